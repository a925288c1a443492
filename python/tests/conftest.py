"""Makes the source tree's package (python/) importable without installing it, unless the tests
are of an installed package (package_under_test.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # python/tests
import package_under_test  # noqa: E402

package_under_test.use()
