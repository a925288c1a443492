"""The torch.compile tests need PyTorch 2.x: CTest runs them with the virtualenv .venv-torch
(scripts/install_torch.py), or the virtualenv holding the installed wheel (scripts/wheel.sh). Makes
the package under test (package_under_test.py) and the shared test models (python/tests/models.py)
importable, and starts each test from a fresh Dynamo (no graphs, guards
or recompile counts left by the test before) and an empty list of Stitch reports."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # harness.py
sys.path.insert(0, os.path.dirname(HERE))  # python/tests
import package_under_test  # noqa: E402

package_under_test.use()  # python/, or the installed package (STITCH_TEST_INSTALLED=1)

try:
    import torch
    TORCH2 = int(torch.__version__.split(".")[0]) >= 2
except ImportError:
    TORCH2 = False

if not TORCH2:
    # Under Debian's PyTorch 1.13 (`pytest python/tests`) there is nothing to run here; CTest runs
    # this folder only with .venv-torch, and with nothing collected pytest exits 5 there.
    collect_ignore_glob = ["test_*.py"]
else:
    @pytest.fixture(autouse=True)
    def fresh_dynamo():
        import harness
        harness.reset()
        yield
        harness.reset()
