"""``python -m stitch``: what this installation is and what it can do here.

With no argument it prints the package's version, where the library and the command line it
uses are, each backend with whether it runs on this machine (and why not), the kernel cache's
directory, and the PyTorch it would hook into. The options print one path each, for build
systems: ``--cmakedir`` (for ``-DCMAKE_PREFIX_PATH`` or ``stitch_DIR``: find_package(stitch) ->
stitch::stitch), ``--includedir``, ``--libdir`` (where libstitch.so is) and ``--pkgconfigdir``;
they exist only in an installed package (the wheel), which is an install prefix
(cmake/python_package.cmake).
"""

import argparse
import os
import sys

import stitch
from stitch import _cli, _torch_support

_HERE = os.path.dirname(os.path.abspath(__file__))


def _prefix_path(*parts: str) -> str:
    path = os.path.join(_HERE, *parts)
    if not os.path.isdir(path):
        raise SystemExit("stitch: %s does not exist: only the installed package (pip install) "
                         "carries the headers and the CMake package" % path)
    return path


def _torch_line() -> str:
    try:
        import torch
    except ImportError:
        return "not installed (pip install torch for torch.compile(backend=\"stitch\"))"
    problem = _torch_support.problem(torch.__version__)
    if problem:
        return "%s: %s" % (torch.__version__, problem)
    return "%s (torch.compile(backend=\"stitch\") supported; tested %d.%d to %d.%d)" % (
        (torch.__version__,) + _torch_support.MINIMUM + _torch_support.NEWEST_TESTED)


def info() -> str:
    cli = _cli.executable()
    lines = [
        "stitch %s" % stitch.__version__,
        "library: %s" % stitch.library_path(),
        "command line: %s" % (cli if os.access(cli, os.X_OK) else "not in this package"),
        "backends:",
    ]
    for name, reason in stitch.backends().items():
        if reason is None:
            lines.append("  %-9s  available" % name)
            continue
        # The library's message starts "backend 'NAME' is unavailable: "; the rest is the reason,
        # with what was tried on indented lines below it.
        reason = reason.split(" is unavailable: ", 1)[-1].replace("\n", "\n" + " " * 13)
        lines.append("  %-9s  unavailable: %s" % (name, reason))
    try:
        lines.append("cache directory: %s" % stitch.cache_dir())
    except stitch.StitchError as e:  # STITCH_CACHE=0
        lines.append("cache directory: none (%s)" % e.message)
    lines.append("PyTorch: %s" % _torch_line())
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stitch", description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--version", action="store_true", help="print the version")
    group.add_argument("--cmakedir", action="store_true",
                       help="print the directory of stitchConfig.cmake")
    group.add_argument("--includedir", action="store_true", help="print the include directory")
    group.add_argument("--libdir", action="store_true", help="print the library directory")
    group.add_argument("--pkgconfigdir", action="store_true",
                       help="print the directory of stitch.pc")
    args = parser.parse_args(argv)
    if args.version:
        print(stitch.__version__)
    elif args.cmakedir:
        print(_prefix_path("lib", "cmake", "stitch"))
    elif args.includedir:
        print(_prefix_path("include"))
    elif args.libdir:
        print(_prefix_path("lib"))
    elif args.pkgconfigdir:
        print(_prefix_path("lib", "pkgconfig"))
    else:
        print(info())
    return 0


if __name__ == "__main__":
    sys.exit(main())
