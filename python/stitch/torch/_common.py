"""What every part of the PyTorch hook shares: dtype names, the type of a node's result as the
partitioner sees it, and the one exception a converter raises to leave a node to PyTorch.

A node's type lives in ``node.meta["stitch"]``, written by the front end before partitioning:
the 1.13 path records it from a real run (sizes known), the torch.compile path reads it from the
FakeTensors AOTAutograd leaves in ``node.meta["val"]`` (sizes symbolic). Either way a tensor is a
:class:`TensorMeta` whose ``dims`` are what the Stitch graph declares: ints and symbol names.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Sequence, Tuple

import torch
import torch.fx as fx

from stitch import _env

STITCH_DTYPE = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32",
                torch.float64: "f64", torch.int32: "i32", torch.int64: "i64", torch.bool: "bool"}
TORCH_DTYPE = {v: k for k, v in STITCH_DTYPE.items()}
BIG = 2 ** 62  # "to the end" for slice ends: Stitch clamps like Python

Dim = Any  # int or symbol name


class Unsupported(Exception):
    """A node this version cannot express in Stitch; the message says why."""


class IndexErrorKind:
    """The exception PyTorch raises for an index out of range that a Stitch index check
    reports: its type and message, formatted with the index and the size (nll_loss: IndexError
    "Target 5 is out of bounds."; gather and scatter_add: RuntimeError "index 5 is out of bounds
    for dimension 1 with size 5")."""

    def __init__(self, exc: type, template: str):
        self.exc = exc
        self.template = template

    def error(self, index: int, size: int) -> Exception:
        return self.exc(self.template.format(index=index, size=size))


def disabled() -> bool:
    return _env.disabled()


class TensorMeta:
    """A tensor result: ``dims`` as the Stitch graph declares them (ints, symbol names);
    ``sizes`` the concrete sizes when known (the 1.13 path's recorded run), else None."""

    __slots__ = ("dims", "sizes", "dtype", "device", "order")

    def __init__(self, dims: Sequence[Dim], dtype: torch.dtype, device: torch.device,
                 sizes: Optional[Sequence[int]] = None, order: Optional[Sequence[int]] = None):
        self.dims = tuple(dims)
        self.sizes = tuple(sizes) if sizes is not None else None
        self.dtype = dtype
        self.device = device
        # PyTorch's memory layout of the result when it is dense but not row-major: the dims
        # from outermost to innermost (see dense_order). A piece output honours it, because ops
        # after it (a view merging dims, an attention kernel's output layout) depend on it.
        self.order = tuple(order) if order is not None else None

    @property
    def rank(self) -> int:
        return len(self.dims)

    def static_dim(self, d: int) -> int:
        """Size of dim d, which must be known (a literal, or recorded)."""
        v = self.dims[d]
        if isinstance(v, int):
            return v
        if self.sizes is not None:
            return self.sizes[d]
        raise Unsupported("dim %d is symbolic (%s)" % (d, v))


def dense_order(sizes: Sequence[int], strides: Sequence[int]) -> Optional[Tuple[int, ...]]:
    """The dims from outermost to innermost in memory when (sizes, strides) is a dense layout
    (no gaps, no overlap) other than row-major; None for row-major or not dense (then the piece
    writes row-major, which any view of the same shape accepts)."""
    n = len(sizes)
    order = sorted(range(n), key=lambda d: (-strides[d], d))
    expected = 1
    for d in reversed(order):
        if sizes[d] == 1:
            continue
        if strides[d] != expected:
            return None
        expected *= sizes[d]
    real = [d for d in order if sizes[d] != 1]
    if real == sorted(real):
        return None
    # Size-1 dims stay where they are in the logical order; only the others move.
    it = iter(real)
    return tuple(d if sizes[d] == 1 else next(it) for d in range(n))


def tensor_meta(arg: Any) -> Optional[TensorMeta]:
    if isinstance(arg, fx.Node) or hasattr(arg, "meta"):
        m = arg.meta.get("stitch")
        return m if isinstance(m, TensorMeta) else None
    return None


def ident(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return s if s and not s[0].isdigit() else "v_" + s


def arg(node: fx.Node, i: int, name: str, default: Any = None) -> Any:
    """Argument i of a call (or keyword `name`)."""
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def same_type(dtype: str, dims: Sequence[Dim], meta: TensorMeta,
              size_of: Dict[str, int]) -> bool:
    """Whether Stitch's inferred (dtype, dims) is PyTorch's. With recorded sizes the comparison is
    by size (symbols at their recorded values: the 1.13 path names dims by guess); otherwise dims
    must be equal, symbol for symbol."""
    if dtype != STITCH_DTYPE.get(meta.dtype):
        return False
    if meta.sizes is not None:
        got = tuple(size_of.get(d, -1) if isinstance(d, str) else d for d in dims)
        return got == meta.sizes
    return tuple(dims) == meta.dims


def reduce_axes(dim: Any, rank: int) -> list:
    """PyTorch's `dim` argument of a reduction as sorted axes (None or [] reduce every dim)."""
    if dim is None:
        return list(range(rank))
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return list(range(rank))  # sum(x, dim=[]) reduces everything, as in PyTorch
    return sorted({d % rank for d in dims})


def describe(dtype: str, dims: Sequence[Dim]) -> str:
    return "%s%s" % (dtype, list(dims))


class ConverterTable:
    """Converters by key (a torch function, method key or module type; an aten overload packet).
    ``layout_only``: keys whose result is a view or a copy of their input; a piece made of these
    alone is left to PyTorch, where views cost nothing. ``copies``: those of them that copy
    (clone, contiguous): not free in PyTorch, so a piece keeps one at its end (it writes the
    copy's layout where PyTorch would read the piece's result again to copy it)."""

    def __init__(self):
        self.converters: Dict[Any, Any] = {}
        self.layout_only: set = set()
        self.copies: set = set()

    def register(self, *keys, layout: bool = False, copy: bool = False):
        def deco(fn):
            for k in keys:
                self.converters[k] = fn
                if layout or copy:
                    self.layout_only.add(k)
                if copy:
                    self.copies.add(k)
            return fn
        return deco
