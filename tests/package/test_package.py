"""The installed package as its users meet it (tests/package/CMakeLists.txt): run by the Python of
the virtualenv that scripts/wheel.sh installed the wheel into, from outside the source tree, with
no PYTHONPATH and no STITCH_LIBRARY. Each test does what a user would: import it, run the console
script and `python -m stitch`, build a C program against the headers and CMake package inside it,
and `torch.compile(backend="stitch")` with no import, in fresh processes."""
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from importlib import metadata

import pytest

SOURCE = os.environ.get("STITCH_TEST_SOURCE_DIR", "")
VERSION = os.environ.get("STITCH_TEST_VERSION", "")
BIN = os.path.dirname(sys.executable)
# The libraries a base Debian 12 has, which the wheel does not carry (cmake/python_package.cmake).
SYSTEM = re.compile(r"^(ld-linux-x86-64|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libz|"
                    r"libzstd)\.so")


def user_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "STITCH_LIBRARY", "LD_LIBRARY_PATH")}
    env.update(extra)
    return env


def run(args, cwd, **extra):
    p = subprocess.run(args, cwd=cwd, env=user_env(**extra), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=300)
    return p.returncode, p.stdout


def python(code, cwd, **extra):
    return run([sys.executable, "-c", textwrap.dedent(code)], cwd, **extra)


@pytest.fixture(scope="module")
def package():
    assert not os.environ.get("STITCH_LIBRARY")
    assert SOURCE and VERSION, "run through CTest (tests/package/CMakeLists.txt)"
    import stitch
    return os.path.dirname(os.path.abspath(stitch.__file__))


def test_imports_from_the_virtualenv(package):
    import stitch
    site = os.path.realpath(sysconfig.get_paths()["purelib"])
    assert os.path.realpath(package) == os.path.join(site, "stitch")
    assert stitch.library_path() == os.path.join(package, "lib", "libstitch.so")


def test_versions_agree(package, tmp_path):
    """CMakeLists.txt's project() version is the package's, the C API's, the CMake package's,
    pkg-config's and the command line's."""
    import stitch
    assert metadata.version("stitch") == VERSION
    assert stitch.__version__ == VERSION
    assert stitch.version() == VERSION
    cmakedir = os.path.join(package, "lib", "cmake", "stitch")
    config = open(os.path.join(cmakedir, "stitchConfigVersion.cmake")).read()
    assert 'set(PACKAGE_VERSION "%s")' % VERSION in config
    pc = open(os.path.join(package, "lib", "pkgconfig", "stitch.pc")).read()
    assert "Version: %s\n" % VERSION in pc
    assert run([os.path.join(BIN, "stitch"), "--version"], tmp_path) == (0, "stitch %s\n" % VERSION)
    assert run([sys.executable, "-m", "stitch", "--version"], tmp_path) == (0, VERSION + "\n")


def test_a_library_of_another_version_is_refused(package, tmp_path):
    """STITCH_LIBRARY naming a libstitch.so of another version: ImportError naming both."""
    fake = tmp_path / "_wheel_version.py"
    fake.write_text('version = "0.0.1"\n')
    code = """
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("stitch._wheel_version", %r)
        sys.modules["stitch._wheel_version"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["stitch._wheel_version"])
        try:
            import stitch
        except ImportError as e:
            print("ImportError:", e)
    """ % str(fake)
    rc, out = python(code, tmp_path)
    assert rc == 0, out
    assert "ImportError: stitch: the package is version 0.0.1 but the library" in out, out
    assert "is version %s" % VERSION in out, out


def _dynamic(path):
    out = subprocess.run(["readelf", "-d", path], stdout=subprocess.PIPE, text=True,
                         check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", out)
    runpath = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]", out)
    return needed, runpath


def test_the_native_files_need_only_the_base_system(package):
    """libstitch.so and the command line load, besides a base Debian 12's libraries, only what the
    wheel carries, found through $ORIGIN: no libLLVM, no absolute path of the build machine."""
    lib = os.path.join(package, "lib")
    for path, origin in ((os.path.join(lib, "libstitch.so"), "$ORIGIN"),
                         (os.path.join(package, "bin", "stitch"), "$ORIGIN/../lib")):
        needed, runpath = _dynamic(path)
        assert runpath == [origin], (path, runpath)
        for name in needed:
            assert SYSTEM.match(name) or os.path.isfile(os.path.join(lib, name)), (path, name)
        assert not any("LLVM" in n for n in needed), needed
    for name in os.listdir(lib):
        if ".so" in name and name != "libstitch.so":
            needed, _ = _dynamic(os.path.join(lib, name))
            for dep in needed:
                assert SYSTEM.match(dep) or os.path.isfile(os.path.join(lib, dep)), (name, dep)
    ldd = subprocess.run(["ldd", os.path.join(lib, "libstitch.so")], stdout=subprocess.PIPE,
                         text=True, check=True).stdout
    for line in ldd.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m and not SYSTEM.match(m.group(1)):
            assert os.path.dirname(m.group(2)) == lib, line
    assert os.listdir(os.path.join(package, "licenses")), "no licenses of the bundled libraries"


def test_runs_without_the_build_machines_libraries(package, tmp_path):
    """The cpu backend compiles and runs with LLVM's, SLEEF's, spdlog's, fmt's and hiredis's
    system copies hidden (a mount namespace binding /dev/null over each), as on a machine that
    never installed them."""
    unshare = shutil.which("unshare")
    if not unshare or subprocess.run([unshare, "-m", "true"]).returncode != 0:
        pytest.skip("no mount namespace here (unshare -m)")
    hidden = []
    for name in os.listdir(os.path.join(package, "lib")):
        if name != "libstitch.so" and ".so" in name:
            for d in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"):
                if os.path.exists(os.path.join(d, name)):
                    hidden.append(os.path.realpath(os.path.join(d, name)))
    hidden += [p for p in ("/usr/lib/llvm-19/lib/libLLVM.so.19.1",) if os.path.exists(p)]
    mounts = "; ".join(["set -e"] + ["mount --bind /dev/null %s" % h for h in sorted(set(hidden))])
    code = ("import stitch, numpy as np; "
            "p = stitch.compile('graph g(x: f32[8, 16]) {\\n e = exp(x)\\n"
            " y = reduce_sum(e, axes=[1])\\n return y\\n}', backend='cpu'); "
            "x = np.random.rand(8, 16).astype(np.float32); "
            "print(np.allclose(p(x), np.exp(x).sum(1), rtol=1e-5))")
    rc, out = run([unshare, "-m", "sh", "-c", "%s; exec \"$0\" -c \"$1\"" % mounts,
                   sys.executable, code], tmp_path)
    assert rc == 0 and out.strip().endswith("True"), out
    assert hidden, "nothing was hidden"


def test_console_script_is_the_command_line(tmp_path):
    rc, out = run([os.path.join(BIN, "stitch"), "demo"], tmp_path)
    assert rc == 0 and out.rstrip().endswith("demo: ok"), out
    rc, out = run([os.path.join(BIN, "stitch"), "frobnicate"], tmp_path)
    assert rc == 2 and "frobnicate" in out, out


def test_python_m_stitch(package, tmp_path):
    rc, out = run([sys.executable, "-m", "stitch"], tmp_path, STITCH_CACHE="1",
                  STITCH_CACHE_DIR=str(tmp_path / "c"))
    assert rc == 0, out
    assert out.startswith("stitch %s\n" % VERSION), out
    assert "library: %s\n" % os.path.join(package, "lib", "libstitch.so") in out
    assert "command line: %s\n" % os.path.join(package, "bin", "stitch") in out
    assert re.search(r"^  cpu +available$", out, re.M), out
    assert re.search(r"^  reference +available$", out, re.M), out
    assert re.search(r"^  cuda +(available|unavailable: .+)$", out, re.M), out
    assert "cache directory: %s\n" % (tmp_path / "c") in out
    assert re.search(r"^PyTorch: 2\.\d+", out, re.M), out
    for flag, path in (("--cmakedir", "lib/cmake/stitch"), ("--includedir", "include"),
                       ("--libdir", "lib"), ("--pkgconfigdir", "lib/pkgconfig")):
        assert run([sys.executable, "-m", "stitch", flag], tmp_path) == (
            0, os.path.join(package, path) + "\n")


def test_c_program_with_cmake(package, tmp_path):
    """examples/c against the package's CMake package (find_package(stitch) -> stitch::stitch):
    its headers (and DLPack's) and libstitch.so, nothing of the system's DLPack."""
    cmake = os.environ.get("STITCH_TEST_CMAKE", "cmake")
    cmakedir = os.path.join(package, "lib", "cmake", "stitch")
    args = [cmake, "-S", os.path.join(SOURCE, "examples", "c"), "-B", str(tmp_path / "b"),
            "-Dstitch_DIR=" + cmakedir, "-DCMAKE_BUILD_TYPE=Debug"]
    if os.environ.get("STITCH_TEST_CC"):
        args.append("-DCMAKE_C_COMPILER=" + os.environ["STITCH_TEST_CC"])
    for step in (args, [cmake, "--build", str(tmp_path / "b")],
                 [str(tmp_path / "b" / "stitch_example")]):
        rc, out = run(step, tmp_path)
        assert rc == 0, (step, out)


def test_c_program_with_pkg_config(package, tmp_path):
    if not shutil.which("pkg-config"):
        pytest.skip("pkg-config is not installed")
    env = user_env(PKG_CONFIG_PATH=os.path.join(package, "lib", "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "stitch"], env=env, check=True,
                           stdout=subprocess.PIPE, text=True).stdout.split()
    exe = str(tmp_path / "stitch_example")
    cc = os.environ.get("STITCH_TEST_CC") or "cc"
    rc, out = run([cc, "-std=c99", "-Wall", "-Wextra", "-Wpedantic",
                   os.path.join(SOURCE, "examples", "c", "main.c")] + flags +
                  ["-Wl,-rpath," + os.path.join(package, "lib"), "-o", exe], tmp_path)
    assert rc == 0, out
    rc, out = run([exe], tmp_path)
    assert rc == 0, out


def test_backend_name_works_with_no_import(tmp_path):
    """The torch_dynamo_backends entry point: Dynamo lists "stitch" and compiles with it in a
    process that never imported stitch."""
    code = """
        import sys, torch, torch._dynamo
        assert "stitch" in torch._dynamo.list_backends(), torch._dynamo.list_backends()
        assert "stitch" not in sys.modules
        f = lambda x: torch.softmax(x * 2, dim=-1).sum(-1)
        x = torch.randn(8, 32)
        torch.testing.assert_close(torch.compile(f, backend="stitch")(x), f(x))
        import stitch.torch
        report = stitch.torch.last_report()
        assert report.graph("inference").replaced_ops > 0, str(report)
        print("ok")
    """
    rc, out = python(code, tmp_path)
    assert rc == 0 and out.strip().endswith("ok"), out


def test_quick_start_trains_and_prints_the_report(tmp_path):
    """python/examples/quick_start.py, the README's first PyTorch example, exactly as a user runs
    it right after pip install."""
    rc, out = run([sys.executable, os.path.join(SOURCE, "python", "examples", "quick_start.py")],
                  tmp_path)
    assert rc == 0, out
    assert re.search(r"^forward graph: \d+ of \d+ ops in Stitch", out, re.M), out
    assert re.search(r"^backward graph: \d+ of \d+ ops in Stitch", out, re.M), out
    losses = [float(x) for x in re.findall(r"^step \d: loss (\S+)$", out, re.M)]
    assert len(losses) == 3 and all(x == x for x in losses), out


def test_an_unsupported_pytorch_is_refused_at_torch_compile(tmp_path):
    """The entry point checks the PyTorch version before Dynamo runs anything: torch.compile
    itself raises, naming the supported range."""
    code = """
        import torch
        torch.__version__ = "2.1.2"
        try:
            torch.compile(lambda x: x + 1, backend="stitch")
        except Exception as e:
            print(type(e).__name__, e)
    """
    rc, out = python(code, tmp_path)
    assert rc == 0 and re.search(r'^UnsupportedTorch stitch: torch.compile\(backend="stitch"\) '
                                 r'supports PyTorch .*; this is PyTorch 2\.1\.2\.', out, re.M), out
