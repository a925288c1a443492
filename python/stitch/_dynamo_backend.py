"""The ``torch_dynamo_backends`` entry point (pyproject.toml): ``backend`` is what PyTorch loads
when ``torch.compile(model, backend="stitch")`` names a backend it has not registered, so that the
name works right after ``pip install`` with no ``import stitch.torch``.

The PyTorch version is checked first (stitch/_torch_support.py), so that an unsupported release
fails here, inside the ``torch.compile`` call, with a message saying which releases work, rather
than somewhere inside Dynamo at the first call. Importing ``stitch.torch`` registers nothing
when the entry point is installed: PyTorch registers what this module exports.
"""

import torch

from . import _torch_support

_torch_support.require(torch.__version__)

from .torch._compile import backend  # noqa: E402

__all__ = ["backend"]
