#!/usr/bin/env python3
"""PyTorch 2.x from PyPI, as small as imports, into a virtualenv. One copy of this logic, used by
the test set-up (this file run as a script) and by the CPU benchmark (bench/cpu/install_peers.py
imports `install_torch`).

Test set-up: `python3 scripts/install_torch.py --venv .venv-torch` (scripts/test.sh and the CI's
default lane) makes the virtualenv the torch.compile tests (python/tests/torch2, CTest
`python_torch2_tests`) run in: TORCH_REQUIREMENT plus TEST_REQUIREMENTS. When the venv's stamp
(`stitch-test-env.json`) names the same requirements and every pinned distribution is there at its
version, it returns at once with no network call. Otherwise it creates the venv (`venv` of the
interpreter running it: Debian's needs python3-venv, which scripts/setup.sh installs) and installs
what is missing, then writes the stamp with what it did (steps, wheel sizes, times).

PyTorch: PyPI's Linux x86-64 torch wheel is the CUDA build, and its requirements pull the whole
CUDA stack (cuDNN, cuBLAS, NCCL, triton, ... several GB). On a CPU machine most of it is never
called, but libtorch links a few of those libraries, so `import torch` needs them. So:
  1. torch --no-deps plus its pure-Python requirements (filelock, sympy, networkx, jinja2, ...);
  2. the CUDA libraries libtorch links that the loader cannot find (`ldd` of libtorch_cuda.so:
     "not found") are mapped to the PyPI packages that ship them, at torch's own pins, and
     installed in one pip run;
  3. `import torch` in a subprocess; each library it still cannot load ("libX.so: cannot open",
     or an "undefined symbol" from a too-old system copy, e.g. /usr/local/cuda's NCCL) is mapped
     the same way and installed; repeat;
  4. if that does not converge: plain `pip install torch` (everything);
  5. if torch still does not import: failure (the script exits 3).
What steps 2-3 add depends on the machine: where the CUDA 13 toolkit's libraries are on the
loader path (/usr/local/cuda-13.0/lib on the development machines) torch 2.15 needs only cuFile,
cuSPARSELt, NVSHMEM and a newer NCCL (~520 MB of wheels); on a machine with no CUDA toolkit it
installs every library libtorch_cuda.so links (still without triton, cuSOLVER's extras, ...).

pip's complaint that torch's other CUDA requirements are not installed is cut to one line: they
are left out on purpose, and nothing that runs on the CPU loads them.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

# One pin for the tests and the benchmark: a new torch changes the graphs Dynamo and AOTAutograd
# produce, so it is taken on purpose (bump here; the test venv's stamp then reinstalls).
TORCH_REQUIREMENT = "torch==2.15.0"
# The torch.compile tests' other packages: transformers builds GPT-2, BERT, Llama and T5 from
# configs (nothing downloaded); 4.46.3 is the version the tests were written against. expecttest:
# PyTorch's test utilities import it, so the OpInfo test (python/tests/torch2/opinfo) needs it to
# import op_db; the wheel does not require it.
TEST_REQUIREMENTS = ["transformers==4.46.3", "pytest==9.2.0", "numpy==2.4.6", "expecttest==0.3.0"]
STAMP = "stitch-test-env.json"

# Library name prefix -> (torch requirement name, or "cuda-toolkit[extra]").
LIB_TO_PKG = {
    "libcudnn": "nvidia-cudnn-cu13",
    "libcusparseLt": "nvidia-cusparselt-cu13",
    "libnccl": "nvidia-nccl-cu13",
    "libnvshmem": "nvidia-nvshmem-cu13",
    "libcufile": "cuda-toolkit[cufile]",
    "libcudart": "cuda-toolkit[cudart]",
    "libcublas": "cuda-toolkit[cublas]",
    "libcufft": "cuda-toolkit[cufft]",
    "libcurand": "cuda-toolkit[curand]",
    "libcusparse": "cuda-toolkit[cusparse]",
    "libcusolver": "cuda-toolkit[cusolver]",
    "libnvrtc": "cuda-toolkit[nvrtc]",
    "libnvJitLink": "cuda-toolkit[nvjitlink]",
    "libcupti": "cuda-toolkit[cupti]",
    "libnvToolsExt": "cuda-toolkit[nvtx]",
}
# Undefined-symbol prefix -> library prefix.
SYM_TO_LIB = {"nccl": "libnccl", "cudnn": "libcudnn", "cusparseLt": "libcusparseLt",
              "cusparse": "libcusparse", "cublasLt": "libcublas", "cublas": "libcublas",
              "cufft": "libcufft", "curand": "libcurand", "cusolver": "libcusolver",
              "nvrtc": "libnvrtc", "nvshmem": "libnvshmem", "cuFile": "libcufile",
              "nvJitLink": "libnvJitLink", "cupti": "libcupti", "cuda": "libcudart"}


def log(msg: str) -> None:
    print(f"[install_torch] {msg}", flush=True)


def pip_install(reqs: list[str], no_deps: bool, record: dict) -> bool:
    """pip download into a temp dir (so the wheels' size is known), then install from it, into
    the running interpreter's environment."""
    with tempfile.TemporaryDirectory(prefix="wheels-", dir=sys.prefix) as d:
        t0 = time.monotonic()
        nd = ["--no-deps"] if no_deps else []
        dl = [sys.executable, "-m", "pip", "download", "-q", "-d", d] + nd + reqs
        log(" ".join(dl[3:]))
        if subprocess.run(dl).returncode != 0:
            return False
        mb = sum(p.stat().st_size for p in Path(d).iterdir()) / 1e6
        t1 = time.monotonic()
        inst = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", d] + nd + reqs
        p = subprocess.run(inst, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        ok = p.returncode == 0
        if not ok:
            print(p.stdout, end="", flush=True)
        elif "dependency conflicts" in p.stdout:
            # pip lists every CUDA package torch requires and this script leaves out on purpose.
            log("  (pip: torch's other CUDA requirements are not installed; not needed to import)")
        t2 = time.monotonic()
        wheels = sorted(p.name for p in Path(d).iterdir())
        record["steps"].append({"requirements": reqs, "no_deps": no_deps, "wheels": wheels,
                                "download_mb": round(mb, 1), "download_s": round(t1 - t0, 1),
                                "install_s": round(t2 - t1, 1), "ok": ok})
        log(f"  {len(wheels)} wheels, {mb:.0f} MB, download {t1 - t0:.0f} s, install {t2 - t1:.0f} s")
        return ok


def try_import_torch() -> tuple[bool, str]:
    code = "import torch; x = torch.ones(4); assert float((x + x).sum()) == 8.0; print(torch.__version__)"
    p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode == 0, p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""


def torch_pins() -> dict[str, tuple[str, str, bool]]:
    """Requirement strings of the installed torch, by project name (markers dropped)."""
    pins = {}
    for r in metadata.requires("torch") or []:
        spec = r.split(";")[0].strip()
        m = re.match(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*)", spec)
        if m:
            pins[m.group(1).lower()] = (m.group(1), m.group(3).strip(), "extra ==" in r)
    return pins


def missing_lib(err: str) -> str | None:
    m = re.search(r"(lib[A-Za-z0-9_]+?)\.so[.0-9]*: cannot open shared object file", err)
    if m:
        return m.group(1)
    m = re.search(r"undefined symbol: ([A-Za-z]+)", err)
    if m:
        sym = m.group(1)
        for prefix in sorted(SYM_TO_LIB, key=len, reverse=True):
            if sym.startswith(prefix):
                return SYM_TO_LIB[prefix]
    return None


def unresolved_libs() -> list[str]:
    """Libraries libtorch_cuda.so links that the loader cannot find, from `ldd` (it follows the
    wheel's RUNPATH into site-packages/nvidia/*, so it sees what pip installed too)."""
    importlib.invalidate_caches()
    try:
        spec = importlib.util.find_spec("torch")
        lib = Path(spec.origin).parent / "lib" / "libtorch_cuda.so" if spec and spec.origin else None
        if not lib or not lib.exists():
            return []
        out = subprocess.run(["ldd", str(lib)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True).stdout
    except (OSError, ImportError):
        return []
    return sorted({m.group(1) for m in re.finditer(r"(lib[A-Za-z0-9_]+?)\.so[.0-9]* => not found", out)})


def requirement_for(lib: str, pins) -> str | None:
    for prefix in sorted(LIB_TO_PKG, key=len, reverse=True):
        if lib.startswith(prefix):
            pkg = LIB_TO_PKG[prefix]
            name = pkg.split("[")[0]
            if name in pins:
                return pkg + pins[name][1].replace(" ", "")
            return None
    return None


def _install_libs(reqs: list[str], record: dict) -> bool:
    # A cuda-toolkit[extra] brings its nvidia-* packages as dependencies; the others are the
    # library's own package, installed alone.
    toolkit = [r for r in reqs if r.startswith("cuda-toolkit[")]
    alone = [r for r in reqs if not r.startswith("cuda-toolkit[")]
    ok = True
    if alone:
        ok = pip_install(alone, True, record) and ok
    if toolkit:
        # One requirement with the union of the extras (pip rejects the same project twice).
        extras = sorted({e for r in toolkit for e in r[r.index("[") + 1:r.index("]")].split(",")})
        pin = toolkit[0][toolkit[0].index("]") + 1:]
        ok = pip_install([f"cuda-toolkit[{','.join(extras)}]{pin}"], False, record) and ok
    return ok


def _version_of(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def install_torch(record: dict, requirement: str = TORCH_REQUIREMENT) -> bool:
    """Makes `import torch` work in the running environment; True on success. Reuses a torch
    that imports and satisfies `requirement` (an `==` pin is compared with the installed
    version). Appends pip's steps to record["steps"] and sets record["torch"]."""
    pinned = requirement.split("==")[1] if "==" in requirement else None
    ok, out = try_import_torch()
    if ok and (pinned is None or _version_of("torch") == pinned):
        log(f"torch {out} already imports; reusing it")
        record["torch"] = {"how": "reused", "version": out}
        return True
    if not pip_install([requirement], True, record):
        return False
    pins = torch_pins()
    pure = [f"{n}{spec}" for key, (n, spec, is_extra) in pins.items()
            if not is_extra and not key.startswith(("nvidia-", "cuda-", "triton"))]
    if pure and not pip_install(pure, False, record):
        return False
    added: list[str] = []
    first = sorted({r for r in (requirement_for(lib, pins) for lib in unresolved_libs()) if r})
    if first:
        log("libtorch_cuda.so needs: " + ", ".join(first))
        added += first
        _install_libs(first, record)
    for _ in range(len(LIB_TO_PKG) + 1):
        ok, out = try_import_torch()
        if ok:
            record["torch"] = {"how": "PyPI torch --no-deps + pure-Python deps"
                               + (" + " + ", ".join(added) if added else "")
                               + " (the other CUDA packages torch lists are not installed)",
                               "version": out}
            return True
        lib = missing_lib(out)
        req = requirement_for(lib, pins) if lib else None
        log(f"import torch failed: {out[:200]}")
        if not req or req in added:
            break
        log(f"  {lib} -> {req}")
        added.append(req)
        if not _install_libs([req], record):
            break
    log(f"falling back to `pip install {requirement}` with all its dependencies")
    if pip_install([requirement], False, record):
        ok, out = try_import_torch()
        if ok:
            record["torch"] = {"how": "PyPI torch with all its dependencies", "version": out}
            return True
    record["torch"] = {"how": "failed", "error": out[:300]}
    return False


# --- the test virtualenv -------------------------------------------------------------------------

def _pins() -> dict[str, str]:
    return dict(r.split("==") for r in [TORCH_REQUIREMENT] + TEST_REQUIREMENTS)


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _up_to_date(venv: Path) -> bool:
    """The stamp names today's requirements and each pinned distribution is at its version.
    Reads only files: no interpreter start, no network."""
    try:
        stamp = json.loads((venv / STAMP).read_text())
    except (OSError, ValueError):
        return False
    if stamp.get("requirements") != [TORCH_REQUIREMENT] + TEST_REQUIREMENTS:
        return False
    if not _venv_python(venv).exists():
        return False
    site = list(venv.glob("lib/python3*/site-packages"))
    for name, version in _pins().items():
        norm = re.sub(r"[-_.]+", "_", name).lower()
        if not any(d.name.lower().startswith(f"{norm}-{version}.") and d.name.endswith(".dist-info")
                   for s in site for d in s.iterdir()):
            return False
    return True


def _make_test_env(venv: Path, requirement: str) -> int:
    """Inside the venv: torch, then the test requirements; writes the stamp. Exit code 0 or 3."""
    t0 = time.monotonic()
    record: dict = {"steps": []}
    if not install_torch(record, requirement):
        log("torch does not import: see the steps above")
        return 3
    missing = [r for r in TEST_REQUIREMENTS if _version_of(r.split("==")[0]) != r.split("==")[1]]
    if missing and not pip_install(missing, False, record):
        log("installing " + " ".join(missing) + " failed")
        return 3
    record["requirements"] = [TORCH_REQUIREMENT] + TEST_REQUIREMENTS
    record["seconds"] = round(time.monotonic() - t0, 1)
    record["download_mb_total"] = round(sum(s["download_mb"] for s in record["steps"]), 1)
    (venv / STAMP).write_text(json.dumps(record, indent=1) + "\n")
    log(f"{venv}: torch {record['torch']['version']}, {' '.join(TEST_REQUIREMENTS)} "
        f"in {record['seconds']} s ({record['download_mb_total']} MB of wheels)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--venv", required=True, type=Path, help="the virtualenv to create or update")
    ap.add_argument("--torch", metavar="VERSION",
                    help="another PyTorch release than the pinned one (the tests of the supported "
                         "range, stitch/_torch_support.py)")
    args = ap.parse_args()
    if args.torch:
        global TORCH_REQUIREMENT
        TORCH_REQUIREMENT = "torch==" + args.torch
    venv = args.venv.resolve()
    if Path(sys.prefix).resolve() == venv:
        return _make_test_env(venv, TORCH_REQUIREMENT)
    if _up_to_date(venv):
        log(f"{args.venv} is up to date ({TORCH_REQUIREMENT}, {', '.join(TEST_REQUIREMENTS)})")
        return 0
    t0 = time.monotonic()
    if not _venv_python(venv).exists():
        log(f"creating {args.venv} with {sys.executable}")
        # Debian's python3 has no ensurepip without python3-venv: say so instead of a traceback.
        if subprocess.run([sys.executable, "-m", "venv", str(venv)]).returncode != 0:
            log("`python3 -m venv` failed (on Debian: apt-get install python3-venv)")
            return 3
    rc = subprocess.run([str(_venv_python(venv)), os.path.abspath(__file__), "--venv", str(venv)] +
                        (["--torch", args.torch] if args.torch else [])).returncode
    log(f"set-up took {time.monotonic() - t0:.0f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
