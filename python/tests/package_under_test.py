"""Which `stitch` package the Python tests import: the source tree's (python/, with the library
from $STITCH_LIBRARY or the build tree: the default), or an installed one
(STITCH_TEST_INSTALLED=1, set by CTest when the build is configured with
-DSTITCH_TEST_PACKAGE_PYTHON: the wheel installed into a virtualenv by scripts/wheel.sh, with no
PYTHONPATH and no STITCH_LIBRARY). Conftests call use() before anything imports stitch; tests that
start another Python pass subprocess_env() so that it imports the same package."""
import os
import sys

INSTALLED = os.environ.get("STITCH_TEST_INSTALLED") == "1"
SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/


def use() -> None:
    """Puts the source tree's package first on sys.path, unless the tests are of an installed
    package; then checks that `import stitch` finds the package meant."""
    if not INSTALLED:
        if SOURCE_DIR not in sys.path:
            sys.path.insert(0, SOURCE_DIR)
        return
    assert not os.environ.get("STITCH_LIBRARY"), "STITCH_LIBRARY is set for an installed package"
    while SOURCE_DIR in sys.path:
        sys.path.remove(SOURCE_DIR)
    import stitch
    where = os.path.dirname(os.path.abspath(stitch.__file__))
    assert not where.startswith(SOURCE_DIR + os.sep), \
        "STITCH_TEST_INSTALLED=1 but stitch was imported from the source tree (%s)" % where


def subprocess_env(**extra: str) -> dict:
    """os.environ for a child Python that imports the same stitch as this process."""
    env = dict(os.environ, **extra)
    if not INSTALLED:
        env["PYTHONPATH"] = SOURCE_DIR + (os.pathsep + env["PYTHONPATH"]
                                          if env.get("PYTHONPATH") else "")
    return env
