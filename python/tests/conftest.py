"""Makes the package importable from the source tree (python/) without installing it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
