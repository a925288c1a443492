"""Builds one Stitch graph from fx nodes, for the converters of either front end.

``env`` maps fx nodes to Stitch values (or lists of values: split, chunk, ops with several
results). Operand types come from ``node.meta["stitch"]`` (see _common). A Python scalar that an
fx node computes is folded in as a constant only where its value is known and is recorded in
``scalar_checks``, so that every run can verify it still holds (the 1.13 path: sizes computed in
Python); a symbolic size (a SymInt of torch.compile, whose meta is its symbol's name) can stand in
a ``shape=`` list, and as an arithmetic operand it is read at run time: a 0-d i64 input after the
tensors (``size_inputs``), which the Piece makes from the int the graph computes at every call.
That is what a mean over symbolic axes leaves in its backward (the gradient divided by the
product of the sizes, ``s0*s1``, a size no tensor has): a compile-time constant would have to
be a dim of some input, and a product is none.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.fx as fx

import stitch as _stitch
from ._common import (STITCH_DTYPE, IndexErrorKind, TensorMeta, Unsupported, ident,
                      tensor_meta)


class Builder:
    def __init__(self, name: str, sym_of_size: Optional[Dict[int, str]] = None):
        self.g = _stitch.Graph(name)
        self.sym = sym_of_size or {}  # the 1.13 path's size -> symbol guess
        self.env: Dict[Any, Any] = {}
        self.inputs: List[Any] = []
        # Per tensor input: None, or the memory order the program reads it in (add_tensor_input).
        self.input_orders: List[Optional[Tuple[int, ...]]] = []
        self.scalar_checks: List[Tuple[fx.Node, Any]] = []  # (node, recorded value or symbol)
        self.scalar_inputs: List[fx.Node] = []
        # Symbolic sizes read as values: the program's last inputs, 0-d i64, in this order.
        self.size_inputs: List[fx.Node] = []
        # Stitch value names of the index checks -> the error PyTorch raises for them (see
        # check_index); the piece raises it when a run reports an index out of range.
        self.index_errors: Dict[str, IndexErrorKind] = {}

    # -- types --------------------------------------------------------------------------------
    def add_tensor_input(self, node: Any, order: Optional[Tuple[int, ...]] = None) -> int:
        """Declares a tensor input. With `order` (a dense layout's dims, outermost first: see
        dense_order), the program takes the input in that memory order, ``t.permute(order)``, a
        contiguous view of a tensor laid out so, and transposes it back to PyTorch's dims inside,
        where the transpose is index arithmetic: nothing copies the tensor first."""
        m = tensor_meta(node)
        if m is None:
            raise Unsupported("input %s is not a tensor" % node.name)
        if m.dtype not in STITCH_DTYPE:
            raise Unsupported("dtype %s" % m.dtype)
        dims = list(m.dims) if order is None else [m.dims[d] for d in order]
        v = self.g.add_input(ident(node.name), STITCH_DTYPE[m.dtype], dims)
        self.input_orders.append(order)
        if order is not None:
            inverse = [0] * len(order)
            for i, d in enumerate(order):
                inverse[d] = i
            v = self.op("transpose", v, perm=inverse)
        self.env[node] = v
        self.inputs.append(node)
        return v

    def stype(self, v: int) -> Tuple[str, List[Any]]:
        """Stitch's inferred (dtype, dims) of value v (by making it the output for a moment)."""
        self.g.set_outputs([v])
        _, dt, shape = self.g.value_info(0, output=True)
        return dt, shape

    def dims_of(self, v: int) -> List[Any]:
        return self.stype(v)[1]

    def dtype_of(self, a: Any) -> Optional[torch.dtype]:
        m = tensor_meta(a)
        return m.dtype if m is not None else None

    def out_meta(self, node: fx.Node, index: Optional[int] = None) -> TensorMeta:
        m = node.meta.get("stitch")
        if index is not None and isinstance(m, list):
            m = m[index]
        if not isinstance(m, TensorMeta):
            raise Unsupported("result is not a single tensor")
        return m

    # -- values -------------------------------------------------------------------------------
    def scalar(self, a: Any) -> Any:
        """A Python scalar argument's value; a node computing a known one (x.size(0) on the 1.13
        path) is folded to its recorded value and checked at every run."""
        if isinstance(a, fx.Node):
            m = a.meta.get("stitch")
            if isinstance(m, str):
                raise Unsupported("%s is a symbolic size (%s), not a constant" % (a.name, m))
            if not isinstance(m, (bool, int, float)):
                raise Unsupported("%s is not a Python scalar" % a.name)
            self._check_scalar(a, m)
            return m
        if type(a).__name__ in ("SymInt", "SymFloat", "SymBool"):
            raise Unsupported("symbolic scalar %s" % a)
        return a

    def _check_scalar(self, node: fx.Node, value: Any) -> None:
        if node not in self.scalar_inputs:
            self.scalar_inputs.append(node)
            self.scalar_checks.append((node, value))

    def shape_entry(self, a: Any) -> Any:
        """A size in a shape argument: a literal int stays static; a symbolic one is its symbol; a
        computed int becomes the symbol its value stands for (bound at run time and checked
        against the binding), else static and checked."""
        if isinstance(a, fx.Node):
            m = a.meta.get("stitch")
            if isinstance(m, str):
                return m
            if not isinstance(m, int) or isinstance(m, bool):
                raise Unsupported("shape entry %s is not an int" % a.name)
            if m in self.sym and m > 1:
                if a not in self.scalar_inputs:
                    self.scalar_inputs.append(a)
                    self.scalar_checks.append((a, self.sym[m]))
                return self.sym[m]
            self._check_scalar(a, m)
            return m
        if isinstance(a, bool) or not isinstance(a, int):
            raise Unsupported("shape entry %r is not an int" % (a,))
        return a

    def val(self, a: Any) -> int:
        if not hasattr(a, "meta"):
            raise Unsupported("expected a tensor, got %r" % (a,))
        if a not in self.env:
            raise Unsupported("%s is not available" % a.name)
        v = self.env[a]
        if isinstance(v, list):
            raise Unsupported("%s is a tuple" % a.name)
        return v

    def const(self, x: Any, dtype: torch.dtype) -> int:
        x = self.scalar(x)
        if isinstance(x, bool):
            x = float(x)
        if not isinstance(x, (int, float)):
            raise Unsupported("constant %r" % (x,))
        if dtype not in STITCH_DTYPE:
            raise Unsupported("dtype %s" % dtype)
        return self.g.add_constant(float(x), STITCH_DTYPE[dtype])

    def cast(self, v: int, to: torch.dtype) -> int:
        if to not in STITCH_DTYPE:
            raise Unsupported("dtype %s" % to)
        dt, _ = self.stype(v)
        if dt == STITCH_DTYPE[to]:
            return v
        return self.op("cast", v, to=STITCH_DTYPE[to])

    def operand(self, a: Any, dtype: torch.dtype) -> int:
        """a as a Stitch value of `dtype`: tensors cast when PyTorch would promote them, Python
        numbers as constants (Stitch never promotes implicitly)."""
        if tensor_meta(a) is not None:
            return self.cast(self.val(a), dtype)
        if is_symbolic_size(a):
            return self.cast(self.size_value(a), dtype)
        return self.const(a, dtype)

    def size_value(self, node: fx.Node) -> int:
        """A symbolic size's value at run time, as a 0-d i64 input (see the module's note). Its
        cast to a float dtype rounds as PyTorch's conversion of the int scalar does."""
        v = self.env.get(node)
        if v is None:
            v = self.g.add_input(ident(node.name), STITCH_DTYPE[torch.int64], [])
            self.env[node] = v
            self.size_inputs.append(node)
        return v

    def op(self, name: str, *operands: int, **attrs: Any) -> int:
        return self.g.add_op(name, *operands, **attrs)

    def checked_index(self, index: int, size: Any, kind: IndexErrorKind) -> int:
        """check_index(index, size=[size]): an index PyTorch range-checks where Stitch reads it
        other than by gather (a one-hot eq(iota, label)); `kind` is what PyTorch raises."""
        return self._named_check("check_index", [index], kind, size=[size])

    def gather(self, x: int, index: int, axis: int, kind: IndexErrorKind) -> int:
        return self._named_check("gather", [x, index], kind, axis=axis)

    def _named_check(self, op: str, operands: List[int], kind: IndexErrorKind, **attrs) -> int:
        # A run's index error names the op: this name, or NAME_index for a gather of computed
        # data (checked by a check_index of that name, passes/gather_rows.h).
        name = "stitch_index_%d" % (len(self.index_errors) // 2)
        v = self.g.add_op(op, *operands, name=name, **attrs)
        self.index_errors[name] = self.index_errors[name + "_index"] = kind
        return v

    def full(self, dims: List[Any], value: float, dtype: torch.dtype) -> int:
        return self.op("full", shape=list(dims), value=float(value), dtype=STITCH_DTYPE[dtype])


def is_symbolic_size(a: Any) -> bool:
    """a is an fx node computing a size that is symbolic under torch.compile (its meta is the
    symbol's name)."""
    return isinstance(a, fx.Node) and isinstance(a.meta.get("stitch"), str)
