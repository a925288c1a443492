"""The ``stitch`` console script (pyproject.toml, ``[project.scripts]``): the wheel's command line.

The command line is the native program the build makes (tools/stitch_main.cpp); the wheel carries
it as ``stitch/bin/stitch``, beside the library it links (its RUNPATH is ``$ORIGIN/../lib``).
pip's console scripts are Python, so this one replaces the Python process with that program:
arguments, standard streams, signals and the exit status are the program's own, as if it had been
run directly.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def executable() -> str:
    """The path of the command line inside this package (it may be missing in a source tree)."""
    return os.path.join(_HERE, "bin", "stitch")


def main() -> int:
    path = executable()
    if not os.access(path, os.X_OK):
        sys.stderr.write(
            "stitch: %s is missing: the command line comes with the wheel (pip install); in a "
            "source tree it is build/<preset>/tools/stitch\n" % path)
        return 127
    os.execv(path, ["stitch"] + sys.argv[1:])
    return 127  # not reached: execv returns only by raising


if __name__ == "__main__":
    sys.exit(main())
