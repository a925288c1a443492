"""PyTorch hook: run the memory-bound parts of a model through Stitch, the rest through PyTorch.

Design note
-----------
``optimize(module_or_fn)`` traces once with ``torch.fx.symbolic_trace`` and waits for the first
call. That call runs the traced graph eagerly through an ``fx.Interpreter`` that records every
node's result (shape, dtype, device of tensors; the value of ints and floats), then:

1. Support: every node with a converter (``_CONVERTERS``, about 90 torch functions, methods and
   modules) is tried alone: a one-node Stitch graph is built from the recorded operand types and
   the type Stitch infers must equal what PyTorch produced. A node that fails is left to PyTorch
   with the reason (Stitch's own error message, or the mismatch) in the report, so a converter
   bug or an unusual argument never becomes a wrong answer, only a fallback.
2. Partition: supported nodes are merged greedily with their supported producers into maximal
   connected pieces; a merge is refused if some path would leave the piece and come back (the
   piece would then depend on itself). Pieces made of layout ops only are left to PyTorch, where
   views cost nothing.
3. Programs: each piece becomes one Stitch graph and one program (stitch_program_compile); the
   fx graph is rewritten so the piece is a single call whose results are unpacked for its users.

Shapes. Stitch programs are shape-polymorphic, so a new shape reuses the program and nothing is
re-traced. Which dims are symbolic is decided from the first call: the sizes of dim 0 (the batch;
``dynamic_dims`` picks others, e.g. ``(0, 1)`` for batch and sequence) of the inputs become
symbols, and every tensor dim of that size in a piece is written with the symbol (sizes 0 and 1
never are: they broadcast). This is a guess by value, so it is checked: Stitch binds each symbol
from the tensors at every run and fails on an inconsistent binding, ints computed in Python that
were folded into a piece are compared with the binding, and any failure runs the piece eagerly
(its own small fx module, kept for this) for that call. Correctness never rests on the guess; only
speed does.

Runs. Inputs are made contiguous (Stitch takes compact tensors), outputs are ``torch.empty`` on
the inputs' device, all handed to Stitch as DLPack without copies. CPU tensors run on the ``cpu``
backend (``reference`` where this build has no LLVM), CUDA tensors on ``cuda`` with PyTorch's
current stream. A piece runs eagerly when autograd needs its graph (an input requires grad and
grad mode is on): Stitch programs have no backward.

``torch.compile(model, backend="stitch")`` (PyTorch >= 2.0) uses the same machinery on the graph
TorchDynamo hands over. ``STITCH_DISABLE=1`` makes ``optimize`` return its argument untouched and
the compile backend return the graph unchanged. Partition decisions are logged at INFO on the
``stitch.torch`` logger.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import operator
import re
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

import stitch as _stitch
from stitch import StitchError, Status, _env

__all__ = ["optimize", "StitchReport", "supported_ops"]

log = logging.getLogger("stitch.torch")

_STITCH_DTYPE = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32",
                 torch.float64: "f64", torch.int32: "i32", torch.int64: "i64", torch.bool: "bool"}
_TORCH_DTYPE = {v: k for k, v in _STITCH_DTYPE.items()}
_BIG = 2 ** 62  # "to the end" for slice ends: Stitch clamps like Python


class _Unsupported(Exception):
    """A node this version cannot express in Stitch; the message says why."""


def _disabled() -> bool:
    return _env.get_bool("STITCH_DISABLE", False)


# ---------------------------------------------------------------------------------------------
# Recording the first call
# ---------------------------------------------------------------------------------------------


class _TensorMeta:
    __slots__ = ("shape", "dtype", "device")

    def __init__(self, t: torch.Tensor):
        self.shape = tuple(int(s) for s in t.shape)
        self.dtype = t.dtype
        self.device = t.device


def _meta_of(value: Any) -> Any:
    """What the partitioner keeps of a node's result: tensors as _TensorMeta, tuples of tensors
    as lists, Python scalars (and tuples of them, torch.Size) as themselves."""
    if isinstance(value, torch.Tensor):
        return _TensorMeta(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor)
                                                          for v in value):
        return [_TensorMeta(v) for v in value]
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        return tuple(int(v) for v in value)
    return None


class _Recorder(fx.Interpreter):
    def run_node(self, n: fx.Node) -> Any:
        result = super().run_node(n)
        n.meta["stitch"] = _meta_of(result)
        return result


# ---------------------------------------------------------------------------------------------
# Building Stitch graphs from fx nodes
# ---------------------------------------------------------------------------------------------


class _Builder:
    """Builds one Stitch graph from fx nodes. ``env`` maps fx nodes to Stitch values (or lists of
    values, for chunk/split); scalar nodes are folded in as constants and recorded in
    ``scalar_checks`` so that each run can verify they still hold."""

    def __init__(self, name: str, sym_of_size: Dict[int, str]):
        self.g = _stitch.Graph(name)
        self.sym = sym_of_size
        self.env: Dict[fx.Node, Any] = {}
        self.inputs: List[fx.Node] = []
        self.scalar_checks: List[Tuple[fx.Node, Any]] = []  # (node, recorded value or symbol)
        self.scalar_inputs: List[fx.Node] = []

    # -- types --------------------------------------------------------------------------------
    def dims(self, shape: Sequence[int]) -> List[Any]:
        return [self.sym.get(s, s) if s > 1 else s for s in shape]

    def add_tensor_input(self, node: fx.Node) -> int:
        m = node.meta.get("stitch")
        if not isinstance(m, _TensorMeta):
            raise _Unsupported("input %s is not a tensor" % node.name)
        if m.dtype not in _STITCH_DTYPE:
            raise _Unsupported("dtype %s" % m.dtype)
        v = self.g.add_input(_ident(node.name), _STITCH_DTYPE[m.dtype], self.dims(m.shape))
        self.env[node] = v
        self.inputs.append(node)
        return v

    def stype(self, v: int) -> Tuple[str, List[Any]]:
        """Stitch's inferred (dtype, dims) of value v (by making it the output for a moment)."""
        self.g.set_outputs([v])
        _, dt, shape = self.g.value_info(0, output=True)
        return dt, shape

    def dtype_of(self, arg: Any) -> Optional[torch.dtype]:
        if isinstance(arg, fx.Node):
            m = arg.meta.get("stitch")
            return m.dtype if isinstance(m, _TensorMeta) else None
        return None

    def out_meta(self, node: fx.Node) -> _TensorMeta:
        m = node.meta.get("stitch")
        if not isinstance(m, _TensorMeta):
            raise _Unsupported("result is not a single tensor")
        return m

    # -- values -------------------------------------------------------------------------------
    def scalar(self, arg: Any) -> Any:
        """A Python scalar argument's value; a node computing one (x.size(0), ...) is folded to
        its recorded value and checked at every run."""
        if isinstance(arg, fx.Node):
            m = arg.meta.get("stitch")
            if isinstance(m, _TensorMeta) or m is None or isinstance(m, list):
                raise _Unsupported("%s is not a Python scalar" % arg.name)
            self._check_scalar(arg, m)
            return m
        return arg

    def _check_scalar(self, node: fx.Node, value: Any) -> None:
        if node not in self.scalar_inputs:
            self.scalar_inputs.append(node)
            self.scalar_checks.append((node, value))

    def shape_entry(self, arg: Any) -> Any:
        """A size in a shape argument: a literal int stays static; a computed one becomes the
        symbol its value stands for (bound at run time), else static and checked."""
        if isinstance(arg, fx.Node):
            m = arg.meta.get("stitch")
            if not isinstance(m, int) or isinstance(m, bool):
                raise _Unsupported("shape entry %s is not an int" % arg.name)
            if m in self.sym and m > 1:
                # Checked at run time against the symbol's binding, not the recorded value.
                if arg not in self.scalar_inputs:
                    self.scalar_inputs.append(arg)
                    self.scalar_checks.append((arg, self.sym[m]))
                return self.sym[m]
            self._check_scalar(arg, m)
            return m
        if isinstance(arg, bool) or not isinstance(arg, int):
            raise _Unsupported("shape entry %r is not an int" % (arg,))
        return arg

    def val(self, arg: Any) -> int:
        if not isinstance(arg, (fx.Node, _ParamNode)):
            raise _Unsupported("expected a tensor, got %r" % (arg,))
        if arg not in self.env:
            raise _Unsupported("%s is not available" % arg.name)
        v = self.env[arg]
        if isinstance(v, list):
            raise _Unsupported("%s is a tuple" % arg.name)
        return v

    def const(self, x: Any, dtype: torch.dtype) -> int:
        x = self.scalar(x)
        if isinstance(x, bool):
            x = float(x)
        if not isinstance(x, (int, float)):
            raise _Unsupported("constant %r" % (x,))
        if dtype not in _STITCH_DTYPE:
            raise _Unsupported("dtype %s" % dtype)
        return self.g.add_constant(float(x), _STITCH_DTYPE[dtype])

    def cast(self, v: int, to: torch.dtype) -> int:
        if to not in _STITCH_DTYPE:
            raise _Unsupported("dtype %s" % to)
        dt, _ = self.stype(v)
        if dt == _STITCH_DTYPE[to]:
            return v
        return self.op("cast", v, to=_STITCH_DTYPE[to])

    def operand(self, arg: Any, dtype: torch.dtype) -> int:
        """arg as a Stitch value of `dtype`: tensors cast when PyTorch would promote them,
        Python numbers as constants (Stitch never promotes implicitly)."""
        if isinstance(arg, (fx.Node, _ParamNode)) and \
                isinstance(arg.meta.get("stitch"), _TensorMeta):
            return self.cast(self.val(arg), dtype)
        return self.const(arg, dtype)

    def op(self, name: str, *operands: int, **attrs: Any) -> int:
        return self.g.add_op(name, *operands, **attrs)


def _ident(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return s if s and not s[0].isdigit() else "v_" + s


def _arg(node: fx.Node, i: int, name: str, default: Any = None) -> Any:
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


# ---------------------------------------------------------------------------------------------
# Converters: one per torch function, method or module. Each returns a Stitch value (or a list
# of values) or raises _Unsupported.
# ---------------------------------------------------------------------------------------------

_CONVERTERS: Dict[Any, Callable[[_Builder, fx.Node, Any], Any]] = {}
# Converters whose result is a view or a copy of their input: a piece made of these alone is
# left to PyTorch.
_LAYOUT_ONLY = set()


def _register(*keys, layout=False):
    def deco(fn):
        for k in keys:
            _CONVERTERS[k] = fn
            if layout:
                _LAYOUT_ONLY.add(k)
        return fn
    return deco


def _m(name):
    """Key of the tensor method `name`."""
    return ("method", name)


def _binary(opname: str):
    def conv(b: _Builder, n: fx.Node, _mod) -> int:
        out = b.out_meta(n).dtype
        a, c = _arg(n, 0, "input"), _arg(n, 1, "other")
        if n.kwargs.get("alpha", 1) != 1 or n.kwargs.get("rounding_mode") is not None:
            raise _Unsupported("alpha/rounding_mode")
        if opname == "pow" and not out.is_floating_point:
            raise _Unsupported("integer pow")
        if opname == "div" and not out.is_floating_point:
            raise _Unsupported("integer division")
        return b.op(opname, b.operand(a, out), b.operand(c, out))
    return conv


def _compute_dtype(b: _Builder, args) -> torch.dtype:
    """The dtype PyTorch compares (or selects) in: promotion of the tensor operands, widened to
    float when a Python float meets an integer tensor."""
    dts = [b.dtype_of(a) for a in args if b.dtype_of(a) is not None]
    if not dts:
        raise _Unsupported("no tensor operand")
    dt = functools.reduce(torch.promote_types, dts)
    if not dt.is_floating_point and any(isinstance(b.scalar(a) if isinstance(a, fx.Node) and
                                                   b.dtype_of(a) is None else a, float)
                                        for a in args):
        dt = torch.get_default_dtype()
    return dt


def _compare(opname: str):
    def conv(b: _Builder, n: fx.Node, _mod) -> int:
        a, c = _arg(n, 0, "input"), _arg(n, 1, "other")
        dt = _compute_dtype(b, [a, c])
        return b.op(opname, b.operand(a, dt), b.operand(c, dt))
    return conv


for _name, _fns in {
    "add": [operator.add, torch.add, _m("add"), operator.iadd],
    "sub": [operator.sub, torch.sub, _m("sub"), torch.subtract],
    "mul": [operator.mul, torch.mul, _m("mul"), torch.multiply],
    "div": [operator.truediv, torch.div, _m("div"), torch.true_divide, torch.divide],
    "pow": [operator.pow, torch.pow, _m("pow")],
    "maximum": [torch.maximum, _m("maximum")],
    "minimum": [torch.minimum, _m("minimum")],
}.items():
    _register(*_fns)(_binary(_name))

for _name, _fns in {
    "eq": [operator.eq, torch.eq, _m("eq")],
    "ne": [operator.ne, torch.ne, _m("ne")],
    "lt": [operator.lt, torch.lt, _m("lt")],
    "le": [operator.le, torch.le, _m("le")],
    "gt": [operator.gt, torch.gt, _m("gt")],
    "ge": [operator.ge, torch.ge, _m("ge")],
}.items():
    _register(*_fns)(_compare(_name))


def _logical(opname: str):
    def conv(b: _Builder, n: fx.Node, _mod) -> int:
        a, c = _arg(n, 0, "input"), _arg(n, 1, "other")
        if b.out_meta(n).dtype != torch.bool:
            raise _Unsupported("bitwise op on integers")
        return b.op(opname, b.operand(a, torch.bool), b.operand(c, torch.bool))
    return conv


_register(torch.logical_and, _m("logical_and"), operator.and_)(_logical("logical_and"))
_register(torch.logical_or, _m("logical_or"), operator.or_)(_logical("logical_or"))


@_register(torch.logical_not, _m("logical_not"), operator.invert)
def _logical_not(b, n, _mod):
    if b.out_meta(n).dtype != torch.bool:
        raise _Unsupported("bitwise not on integers")
    return b.op("logical_not", b.operand(_arg(n, 0, "input"), torch.bool))


def _unary(opname: str):
    def conv(b: _Builder, n: fx.Node, mod) -> int:
        if n.kwargs.get("inplace") or (len(n.args) > 1 and n.args[1] is True):
            raise _Unsupported("in-place")
        if mod is not None and getattr(mod, "inplace", False):
            raise _Unsupported("in-place")
        out = b.out_meta(n).dtype
        return b.op(opname, b.operand(_arg(n, 0, "input"), out))
    return conv


for _name, _fns in {
    "neg": [operator.neg, torch.neg, _m("neg"), torch.negative],
    "abs": [torch.abs, _m("abs"), operator.abs],
    "exp": [torch.exp, _m("exp")],
    "log": [torch.log, _m("log")],
    "log1p": [torch.log1p, _m("log1p")],
    "sqrt": [torch.sqrt, _m("sqrt")],
    "rsqrt": [torch.rsqrt, _m("rsqrt")],
    "tanh": [torch.tanh, _m("tanh"), F.tanh, nn.Tanh],
    "sigmoid": [torch.sigmoid, _m("sigmoid"), F.sigmoid, nn.Sigmoid],
    "erf": [torch.erf, _m("erf"), torch.special.erf],
    "sin": [torch.sin, _m("sin")],
    "cos": [torch.cos, _m("cos")],
    "reciprocal": [torch.reciprocal, _m("reciprocal")],
    "floor": [torch.floor, _m("floor")],
    "ceil": [torch.ceil, _m("ceil")],
    "relu": [torch.relu, F.relu, _m("relu"), nn.ReLU],
    "silu": [F.silu, nn.SiLU],
}.items():
    _register(*_fns)(_unary(_name))


@_register(torch.square, _m("square"))
def _square(b, n, _mod):
    x = b.operand(_arg(n, 0, "input"), b.out_meta(n).dtype)
    return b.op("mul", x, x)


@_register(F.gelu, nn.GELU)
def _gelu(b, n, mod):
    approx = mod.approximate if mod is not None else n.kwargs.get(
        "approximate", n.args[1] if len(n.args) > 1 else "none")
    if approx not in ("none", "tanh"):
        raise _Unsupported("gelu approximate=%r" % (approx,))
    return b.op("gelu", b.val(_arg(n, 0, "input")), approximate=approx)


@_register(torch.clamp, _m("clamp"), torch.clip, _m("clip"), torch.clamp_min, _m("clamp_min"),
           torch.clamp_max, _m("clamp_max"))
def _clamp(b, n, _mod):
    out = b.out_meta(n).dtype
    target = n.target
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    lo = hi = None
    if name.endswith("clamp_min"):
        lo = _arg(n, 1, "min")
    elif name.endswith("clamp_max"):
        hi = _arg(n, 1, "max")
    else:
        lo, hi = _arg(n, 1, "min"), _arg(n, 2, "max")
    v = b.operand(_arg(n, 0, "input"), out)
    if lo is not None:
        v = b.op("maximum", v, b.operand(lo, out))
    if hi is not None:
        v = b.op("minimum", v, b.operand(hi, out))
    return v


@_register(torch.where, _m("where"))
def _where(b, n, _mod):
    if n.target == torch.where:
        cond, a, c = _arg(n, 0, "condition"), _arg(n, 1, "input"), _arg(n, 2, "other")
    else:  # x.where(cond, y)
        a, cond, c = n.args[0], _arg(n, 1, "condition"), _arg(n, 2, "other")
    if a is None or c is None:
        raise _Unsupported("where(cond) without values")
    out = b.out_meta(n).dtype
    return b.op("select", b.operand(cond, torch.bool), b.operand(a, out), b.operand(c, out))


@_register(torch.masked_fill, _m("masked_fill"))
def _masked_fill(b, n, _mod):
    x, mask, value = _arg(n, 0, "input"), _arg(n, 1, "mask"), _arg(n, 2, "value")
    out = b.out_meta(n).dtype
    return b.op("select", b.operand(mask, torch.bool), b.operand(value, out), b.operand(x, out))


def _softmax(opname: str):
    def conv(b: _Builder, n: fx.Node, mod) -> int:
        dim = mod.dim if mod is not None else _arg(n, 1, "dim")
        if dim is None:
            raise _Unsupported("softmax without dim")
        x = b.operand(_arg(n, 0, "input"), b.out_meta(n).dtype)  # dtype= casts first
        return b.op(opname, x, axis=int(dim))
    return conv


_register(F.softmax, torch.softmax, _m("softmax"), nn.Softmax)(_softmax("softmax"))
_register(F.log_softmax, torch.log_softmax, _m("log_softmax"), nn.LogSoftmax)(
    _softmax("log_softmax"))


def _affine_param(b: _Builder, p: Any, shape, fill: float, dtype: torch.dtype) -> int:
    if p is None:
        return b.op("full", shape=list(shape), value=fill, dtype=_STITCH_DTYPE[dtype])
    return b.operand(p, dtype)


@_register(F.layer_norm, torch.layer_norm, nn.LayerNorm)
def _layer_norm(b, n, mod):
    x = _arg(n, 0, "input")
    if mod is not None:
        shape, eps = tuple(mod.normalized_shape), mod.eps
        w = n.meta["stitch_params"][0] if mod.elementwise_affine else None
        bias = n.meta["stitch_params"][1] if mod.elementwise_affine else None
    else:
        shape = _arg(n, 1, "normalized_shape")
        w, bias, eps = _arg(n, 2, "weight"), _arg(n, 3, "bias"), _arg(n, 4, "eps", 1e-5)
        shape = b.scalar(shape) if isinstance(shape, fx.Node) else shape
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
    out = b.out_meta(n).dtype
    xv = b.operand(x, out)
    g = _affine_param(b, w, shape, 1.0, out)
    be = _affine_param(b, bias, shape, 0.0, out)
    return b.op("layer_norm", xv, g, be, axis=-len(shape), eps=float(b.scalar(eps)))


def _norm_dims(dim: Any, rank: int) -> List[int]:
    if dim is None:
        return list(range(rank))
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return list(range(rank))  # sum(x, dim=[]) reduces everything, as in PyTorch
    return [d % rank if rank else 0 for d in dims]


def _reduce(opname: str):
    def conv(b: _Builder, n: fx.Node, _mod) -> int:
        x = _arg(n, 0, "input")
        xm = x.meta.get("stitch") if isinstance(x, fx.Node) else None
        if not isinstance(xm, _TensorMeta):
            raise _Unsupported("reduction of a non-tensor")
        dim = _arg(n, 1, "dim")
        keep = bool(_arg(n, 2, "keepdim", False))
        out = b.out_meta(n).dtype
        v = b.operand(x, out)  # sum(int) is i64 in PyTorch; mean(dtype=) casts first
        if len(xm.shape) == 0:
            return v
        return b.op(opname, v, axes=_norm_dims(dim, len(xm.shape)), keepdims=keep)
    return conv


_register(torch.sum, _m("sum"))(_reduce("reduce_sum"))
_register(torch.mean, _m("mean"))(_reduce("reduce_mean"))
_register(torch.amax, _m("amax"))(_reduce("reduce_max"))
_register(torch.amin, _m("amin"))(_reduce("reduce_min"))
_register(torch.prod, _m("prod"))(_reduce("reduce_prod"))


# -- layout -----------------------------------------------------------------------------------


def _shape_args(n: fx.Node, start: int, kw: str) -> List[Any]:
    rest = list(n.args[start:])
    if not rest and kw in n.kwargs:
        rest = [n.kwargs[kw]]
    if len(rest) == 1 and isinstance(rest[0], (list, tuple, torch.Size)):
        rest = list(rest[0])
    return rest


def _reshape_to(b: _Builder, x: int, entries: Sequence[Any]) -> int:
    """Reshape with PyTorch's view arguments. A computed entry whose value is no symbol (B*S,
    say) becomes -1 when the shape has none yet, so Stitch derives it from the element count."""
    shape: List[Any] = []
    has_minus = any(e == -1 for e in entries if not isinstance(e, fx.Node))
    for e in entries:
        if isinstance(e, fx.Node):
            m = e.meta.get("stitch")
            if not has_minus and isinstance(m, int) and (m not in b.sym or m <= 1):
                shape.append(-1)
                has_minus = True
                continue
        shape.append(b.shape_entry(e))
    return b.op("reshape", x, shape=shape)


@_register(_m("view"), _m("reshape"), torch.reshape, layout=True)
def _view(b, n, _mod):
    if n.target == _m("view") and len(n.args) == 2 and isinstance(n.args[1], torch.dtype):
        raise _Unsupported("view(dtype) reinterprets bits")
    return _reshape_to(b, b.val(n.args[0]), _shape_args(n, 1, "shape"))


@_register(torch.flatten, _m("flatten"), layout=True)
def _flatten(b, n, _mod):
    x = b.val(n.args[0])
    _, dims = b.stype(x)
    r = len(dims)
    s = _arg(n, 1, "start_dim", 0) % max(r, 1)
    e = _arg(n, 2, "end_dim", -1) % max(r, 1)
    if r == 0:
        return b.op("reshape", x, shape=[1])
    return b.op("reshape", x, shape=list(dims[:s]) + [-1] + list(dims[e + 1:]))


@_register(_m("permute"), torch.permute, layout=True)
def _permute(b, n, _mod):
    x = b.val(n.args[0])
    _, dims = b.stype(x)
    perm = [int(p) % len(dims) for p in _shape_args(n, 1, "dims")]
    return b.op("transpose", x, perm=perm)


@_register(_m("transpose"), torch.transpose, layout=True)
def _transpose(b, n, _mod):
    x = b.val(n.args[0])
    _, dims = b.stype(x)
    r = len(dims)
    d0, d1 = _arg(n, 1, "dim0") % r, _arg(n, 2, "dim1") % r
    perm = list(range(r))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return b.op("transpose", x, perm=perm)


@_register(_m("unsqueeze"), torch.unsqueeze, layout=True)
def _unsqueeze(b, n, _mod):
    x = b.val(n.args[0])
    _, dims = b.stype(x)
    d = _arg(n, 1, "dim") % (len(dims) + 1)
    return b.op("reshape", x, shape=list(dims[:d]) + [1] + list(dims[d:]))


@_register(_m("squeeze"), torch.squeeze, layout=True)
def _squeeze(b, n, _mod):
    x = b.val(n.args[0])
    _, dims = b.stype(x)
    d = _arg(n, 1, "dim")
    if d is None:
        keep = [s for s in dims if s != 1]
    else:
        d = d % max(len(dims), 1)
        keep = [s for i, s in enumerate(dims) if not (i == d and s == 1)]
    return b.op("reshape", x, shape=keep)


@_register(_m("expand"), layout=True)
def _expand(b, n, _mod):
    x = b.val(n.args[0])
    _, dims = b.stype(x)
    sizes = _shape_args(n, 1, "size")
    lead = len(sizes) - len(dims)
    shape = []
    for i, s in enumerate(sizes):
        if not isinstance(s, fx.Node) and s == -1:
            shape.append(dims[i - lead])
        elif i >= lead and not isinstance(s, fx.Node) and dims[i - lead] == s:
            shape.append(s)
        else:
            shape.append(b.shape_entry(s))
    return b.op("broadcast_to", x, shape=shape)


@_register(_m("expand_as"), layout=True)
def _expand_as(b, n, _mod):
    _, dims = b.stype(b.val(n.args[1]))
    return b.op("broadcast_to", b.val(n.args[0]), shape=list(dims))


@_register(_m("contiguous"), _m("clone"), torch.clone, _m("detach"), torch.detach, nn.Identity,
           layout=True)
def _identity(b, n, _mod):
    if n.kwargs.get("memory_format") not in (None, torch.contiguous_format):
        raise _Unsupported("memory_format")
    return b.val(n.args[0])


@_register(F.dropout, nn.Dropout, torch.dropout, layout=True)
def _dropout(b, n, mod):
    if mod is not None:
        training, p = mod.training, mod.p
    else:
        p, training = _arg(n, 1, "p", 0.5), _arg(n, 2, "training", n.target is not F.dropout)
    if training and p > 0:
        raise _Unsupported("dropout in training mode")
    return b.val(n.args[0])


@_register(_m("to"), _m("type"), _m("float"), _m("half"), _m("double"), _m("bfloat16"),
           _m("int"), _m("long"), _m("bool"), _m("type_as"))
def _to(b, n, _mod):
    x = n.args[0]
    out = b.out_meta(n)
    xm = x.meta.get("stitch") if isinstance(x, fx.Node) else None
    if not isinstance(xm, _TensorMeta) or xm.device != out.device:
        raise _Unsupported("device transfer")
    if n.kwargs.get("memory_format") not in (None, torch.preserve_format,
                                             torch.contiguous_format):
        raise _Unsupported("memory_format")
    return b.cast(b.val(x), out.dtype)


def _pieces(b: _Builder, x: int, sizes: List[int], dim: int) -> List[int]:
    _, dims = b.stype(x)
    r = len(dims)
    d = dim % r
    out, start = [], 0
    for s in sizes:
        starts = [0] * r
        ends = [_BIG] * r
        starts[d], ends[d] = start, start + s
        out.append(b.op("slice", x, starts=starts, ends=ends))
        start += s
    return out


def _static_dim(n: fx.Node, dim: int) -> int:
    m = n.meta.get("stitch")
    if not isinstance(m, _TensorMeta):
        raise _Unsupported("not a tensor")
    return m.shape[dim]


@_register(_m("chunk"), torch.chunk, layout=True)
def _chunk(b, n, _mod):
    x = n.args[0]
    chunks, dim = _arg(n, 1, "chunks"), _arg(n, 2, "dim", 0)
    size = _static_dim(x, dim)
    step = -(-size // chunks)
    sizes = [min(step, size - i) for i in range(0, size, step)] if size else [0]
    return _pieces(b, b.val(x), sizes, dim)


@_register(_m("split"), torch.split, layout=True)
def _split(b, n, _mod):
    x = n.args[0]
    ss, dim = _arg(n, 1, "split_size_or_sections", n.kwargs.get("split_size")), _arg(n, 2, "dim", 0)
    size = _static_dim(x, dim)
    if isinstance(ss, int):
        sizes = [min(ss, size - i) for i in range(0, size, ss)]
    else:
        sizes = list(ss)
    return _pieces(b, b.val(x), sizes, dim)


@_register(torch.cat, torch.concat)
def _cat(b, n, _mod):
    tensors = _arg(n, 0, "tensors")
    dim = _arg(n, 1, "dim", 0)
    out = b.out_meta(n).dtype
    vals = [b.operand(t, out) for t in tensors]
    return b.op("concat", *vals, axis=int(dim))


@_register(torch.stack)
def _stack(b, n, _mod):
    tensors = _arg(n, 0, "tensors")
    dim = _arg(n, 1, "dim", 0)
    out = b.out_meta(n).dtype
    vals = []
    for t in tensors:
        v = b.operand(t, out)
        _, dims = b.stype(v)
        d = dim % (len(dims) + 1)
        vals.append(b.op("reshape", v, shape=list(dims[:d]) + [1] + list(dims[d:])))
    return b.op("concat", *vals, axis=int(dim) % (len(dims) + 1))


@_register(operator.getitem)
def _getitem(b, n, _mod):
    x, idx = n.args
    if isinstance(x, fx.Node) and isinstance(b.env.get(x), list):
        return b.env[x][idx]  # an element of chunk/split
    xv = b.val(x)
    _, dims = b.stype(xv)
    items = list(idx) if isinstance(idx, tuple) else [idx]
    if any(isinstance(i, fx.Node) or isinstance(i, (list, torch.Tensor)) for i in items):
        raise _Unsupported("advanced indexing")
    consumed = sum(1 for i in items if i is not None and i is not Ellipsis)
    if items.count(Ellipsis) > 1 or consumed > len(dims):
        raise _Unsupported("index")
    expanded: List[Any] = []
    for i in items:
        if i is Ellipsis:
            expanded += [slice(None)] * (len(dims) - consumed)
        else:
            expanded.append(i)
    expanded += [slice(None)] * (len(dims) - sum(1 for i in expanded if i is not None))
    starts, ends, steps, shape = [], [], [], []
    d = 0
    sliced = False
    for i in expanded:
        if i is None:
            shape.append(1)
            continue
        if isinstance(i, slice):
            st = i.step if i.step is not None else 1
            if st <= 0:
                raise _Unsupported("non-positive step")
            starts.append(i.start if i.start is not None else 0)
            ends.append(i.stop if i.stop is not None else _BIG)
            steps.append(st)
            sliced = sliced or i != slice(None)
            shape.append(None)  # filled from the sliced value's dims
        elif isinstance(i, int) and not isinstance(i, bool):
            starts.append(i)
            ends.append(i + 1 if i != -1 else _BIG)
            steps.append(1)
            sliced = True
        else:
            raise _Unsupported("index %r" % (i,))
        d += 1
    v = b.op("slice", xv, starts=starts, ends=ends, steps=steps) if sliced else xv
    _, vd = b.stype(v)
    # Rebuild the shape: sliced dims kept, int-indexed dims dropped, None dims inserted.
    final, k = [], 0
    for i in expanded:
        if i is None:
            final.append(1)
        elif isinstance(i, slice):
            final.append(vd[k])
            k += 1
        else:
            k += 1
    if list(final) != list(vd):
        v = b.op("reshape", v, shape=final)
    return v


def supported_ops() -> List[str]:
    """Names of the torch functions, tensor methods and modules the hook converts."""
    names = []
    for k in _CONVERTERS:
        if isinstance(k, tuple):
            names.append("Tensor." + k[1])
        elif isinstance(k, type):
            names.append("nn." + k.__name__)
        else:
            names.append(_function_name(k))
    return sorted(set(names))


# ---------------------------------------------------------------------------------------------
# Support, partitioning and rewriting
# ---------------------------------------------------------------------------------------------


def _converter_key(gm: fx.GraphModule, n: fx.Node):
    if n.op == "call_function":
        return n.target, None
    if n.op == "call_method":
        return _m(n.target), None
    if n.op == "call_module":
        mod = gm.get_submodule(n.target)
        return type(mod), mod
    return None, None


def _op_name(gm: fx.GraphModule, n: fx.Node) -> str:
    if n.op == "call_module":
        return "nn." + type(gm.get_submodule(n.target)).__name__
    if n.op == "call_method":
        return "Tensor." + n.target
    return _function_name(n.target)


def _function_name(t: Any) -> str:
    mod = getattr(t, "__module__", None) or ""
    # Builtins report odd modules: F.gelu is torch._C._nn.gelu, operator.add is _operator.add.
    mod = {"_operator": "operator", "torch._C._nn": "torch.nn.functional",
           "torch._C._VariableFunctions": "torch", "torch._C._special": "torch.special"}.get(
               mod, mod)
    if not mod and getattr(torch, getattr(t, "__name__", ""), None) is t:
        mod = "torch"
    return (mod + "." if mod else "") + getattr(t, "__name__", str(t))


def _module_params(gm: fx.GraphModule, n: fx.Node) -> List[Optional[str]]:
    """Qualified names of the parameters a converted module reads (passed as piece inputs)."""
    if n.op == "call_module":
        mod = gm.get_submodule(n.target)
        if isinstance(mod, nn.LayerNorm) and mod.elementwise_affine:
            return [n.target + ".weight", n.target + ".bias"]
    return []


def _tensor_args(n: fx.Node) -> List[fx.Node]:
    return [a for a in n.all_input_nodes if isinstance(a.meta.get("stitch"), (_TensorMeta, list))]


def _convert(b: _Builder, gm: fx.GraphModule, n: fx.Node) -> Any:
    key, mod = _converter_key(gm, n)
    conv = _CONVERTERS.get(key)
    if conv is None:
        raise _Unsupported("no Stitch mapping")
    return conv(b, n, mod)


def _check_types(b: _Builder, n: fx.Node, result: Any) -> None:
    """The Stitch result must have PyTorch's dtype and (with symbols at their recorded sizes)
    shape; anything else would be a silent wrong answer downstream."""
    metas = n.meta["stitch"]
    vals = result if isinstance(result, list) else [result]
    metas = metas if isinstance(metas, list) else [metas]
    if len(vals) != len(metas):
        raise _Unsupported("gives %d results, PyTorch %d" % (len(vals), len(metas)))
    size_of = {s: v for v, s in b.sym.items()}
    for v, m in zip(vals, metas):
        dt, dims = b.stype(v)
        shape = tuple(size_of.get(d, d) if isinstance(d, str) else d for d in dims)
        if dt != _STITCH_DTYPE.get(m.dtype) or shape != m.shape:
            raise _Unsupported("Stitch infers %s%s, PyTorch gives %s%s"
                               % (dt, list(dims), m.dtype, list(m.shape)))


def _single_node_support(gm: fx.GraphModule, n: fx.Node, sym: Dict[int, str]) -> Optional[str]:
    """None if n converts on its own and agrees with PyTorch; otherwise why not."""
    key, _ = _converter_key(gm, n)
    if key is None or key not in _CONVERTERS:
        return "no Stitch mapping"
    meta = n.meta.get("stitch")
    if not isinstance(meta, (_TensorMeta, list)):
        return "result is not a tensor"
    metas = meta if isinstance(meta, list) else [meta]
    if any(m.device.type not in ("cpu", "cuda") or m.dtype not in _STITCH_DTYPE for m in metas):
        return "dtype or device Stitch does not take"
    b = _Builder("check", sym)
    try:
        for a in _tensor_args(n):
            if isinstance(a.meta["stitch"], list):
                raise _Unsupported("operand is a tuple")  # getitem of a chunk: merged below
            b.add_tensor_input(a)
        for p in _module_params(gm, n):
            pn = _ParamNode(p, gm)
            b.add_tensor_input(pn)
        n.meta["stitch_params"] = [_ParamNode(p, gm) for p in _module_params(gm, n)]
        result = _convert(b, gm, n)
        _check_types(b, n, result)
        return None
    except _Unsupported as e:
        return str(e)
    except StitchError as e:
        return e.message.splitlines()[0] if e.message else e.status_name
    except Exception as e:  # a converter bug must cost a fallback, never the model
        return "%s: %s" % (type(e).__name__, e)
    finally:
        b.g.close()


class _ParamNode:
    """Stands for a module parameter (nn.LayerNorm's weight) read by a converted module; equal by
    qualified name so the check graph and the piece graph agree."""

    def __init__(self, target: str, gm: fx.GraphModule):
        self.target = target
        self.name = "p_" + target.replace(".", "_")
        t = gm.get_parameter(target) if hasattr(gm, "get_parameter") else None
        self.meta = {"stitch": _TensorMeta(t)}

    def __eq__(self, other):
        return isinstance(other, _ParamNode) and other.target == self.target

    def __hash__(self):
        return hash(("param", self.target))


def _creates_cycle(members: set) -> bool:
    """True if some path leaves `members` and comes back into it."""
    frontier = [u for m in members for u in m.users if u not in members]
    seen = set()
    while frontier:
        x = frontier.pop()
        if x in seen:
            continue
        seen.add(x)
        for u in x.users:
            if u in members:
                return True
            frontier.append(u)
    return False


def _partition(gm: fx.GraphModule, supported: Dict[fx.Node, bool]) -> List[List[fx.Node]]:
    group: Dict[fx.Node, int] = {}
    members: Dict[int, set] = {}
    next_id = 0
    for n in gm.graph.nodes:
        if not supported.get(n):
            continue
        gid = next_id
        next_id += 1
        group[n] = gid
        members[gid] = {n}
        for a in n.all_input_nodes:
            ga = group.get(a)
            if ga is None or ga == gid:
                continue
            merged = members[ga] | members[gid]
            if _creates_cycle(merged):
                continue
            for m in members[gid]:
                group[m] = ga
            members[ga] = merged
            del members[gid]
            gid = ga
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    return sorted((sorted(ms, key=order.get) for ms in members.values()),
                  key=lambda ms: order[ms[0]])


class StitchReport:
    """What ``optimize`` did: filled at the first call.

    ``replaced_ops``: torch ops now run by Stitch; ``programs``: Stitch programs (one per piece);
    ``kernels``: kernels in their plans (stitch_graph_explain_plan at the first call's shapes);
    ``pieces``: per program its name, ops and kernels; ``fallbacks``: ops left to PyTorch, each
    ``{"node", "op", "reason"}``; ``runtime_fallbacks``: calls of a piece that ran eagerly, by
    reason; ``total_ops``: call nodes in the traced graph."""

    def __init__(self):
        self.traced = False
        self.total_ops = 0
        self.replaced_ops = 0
        self.programs = 0
        self.kernels = 0
        self.pieces: List[Dict[str, Any]] = []
        self.fallbacks: List[Dict[str, str]] = []
        self.runtime_fallbacks: Dict[str, int] = {}
        self.backend: Optional[str] = None

    def replaced(self) -> List[str]:
        return [op for p in self.pieces for op in p["ops"]]

    def __repr__(self) -> str:
        if not self.traced:
            return "StitchReport(not traced yet: call the optimized function once)"
        lines = ["StitchReport: %d of %d torch ops replaced by %d Stitch programs (%d kernels)"
                 % (self.replaced_ops, self.total_ops, self.programs, self.kernels)]
        for p in self.pieces:
            lines.append("  %s: %d ops -> %d kernels: %s" % (p["name"], len(p["ops"]),
                                                           p["kernels"], ", ".join(p["ops"])))
        for f in self.fallbacks:
            lines.append("  fallback %s (%s): %s" % (f["node"], f["op"], f["reason"]))
        for r, c in self.runtime_fallbacks.items():
            lines.append("  ran eagerly %d time(s): %s" % (c, r))
        return "\n".join(lines)

    __str__ = __repr__


def _engine_for(device: torch.device) -> "_stitch.Engine":
    if device.type == "cuda":
        return _stitch.engine(backend="cuda")
    try:
        return _stitch.engine(backend="cpu")
    except StitchError as e:
        if e.status != Status.BACKEND_UNAVAILABLE:
            raise
        # A build without LLVM: the reference interpreter is slow but exact.
        return _stitch.engine(backend="reference")


class _Piece(nn.Module):
    """One Stitch program standing in for a connected piece of the fx graph. Holds the piece as
    a small fx module too, run eagerly whenever Stitch cannot take a call."""

    def __init__(self, name: str, graph: "_stitch.Graph", eager: fx.GraphModule,
                 num_tensors: int, scalar_checks, symbol_dims, report: StitchReport):
        super().__init__()
        self.piece_name = name
        self.graph = graph
        self.eager = eager
        self.num_tensors = num_tensors
        self.scalar_checks = scalar_checks
        self.symbol_dims = symbol_dims  # symbol -> (input index, dim)
        self.report = report
        self.programs: Dict[str, "_stitch.Program"] = {}
        self.lock = threading.Lock()
        self.failed: Optional[str] = None

    def _fallback(self, reason: str, args):
        r = "%s: %s" % (self.piece_name, reason)
        if r not in self.report.runtime_fallbacks:
            log.info("stitch: %s runs eagerly: %s", self.piece_name, reason)
        self.report.runtime_fallbacks[r] = self.report.runtime_fallbacks.get(r, 0) + 1
        return self.eager(*args)

    def _program(self, device: torch.device) -> "_stitch.Program":
        key = device.type
        with self.lock:
            p = self.programs.get(key)
            if p is None:
                engine = _engine_for(device)
                self.report.backend = engine.backend
                p = self.programs[key] = engine.compile(self.graph)
            return p

    def forward(self, *args):
        if self.failed:
            return self.eager(*args)
        tensors = list(args[:self.num_tensors])
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            return self._fallback("autograd needs the graph (run under torch.no_grad())", args)
        device = tensors[0].device
        if any(t.device != device for t in tensors):
            return self._fallback("inputs on several devices", args)
        # Computed ints folded into the program must still hold: a literal value, or the size
        # its symbol is bound to by the tensors of this call.
        for pos, expected in self.scalar_checks:
            got = args[self.num_tensors + pos]
            if isinstance(expected, str):
                i, d = self.symbol_dims[expected]
                expected = tensors[i].shape[d]
            if got != expected:
                return self._fallback("a size computed in Python changed (%r, was %r)"
                                      % (got, expected), args)
        tensors = [t if t.is_contiguous() else t.contiguous() for t in tensors]
        try:
            program = self._program(device)
            views = [_stitch.as_dltensor(t) for t in tensors]
            shapes = program.output_shapes(views)
            outs = [torch.empty(s, dtype=_TORCH_DTYPE[d], device=device)
                    for s, d in zip(shapes, program.output_dtypes)]
            stream = None
            if device.type == "cuda":
                stream = torch.cuda.current_stream(device).cuda_stream
            program.run(tensors, outs, stream=stream)
        except StitchError as e:
            if e.status not in (Status.SHAPE_MISMATCH, Status.UNSUPPORTED):
                # Compile or backend failures will not go away: stop trying this piece.
                self.failed = e.message
            return self._fallback(e.message.splitlines()[0] if e.message else e.status_name,
                                  args)
        return tuple(outs)


class _Optimizer:
    """Builds the rewritten fx module of one traced graph at its first call."""

    def __init__(self, gm: fx.GraphModule, dynamic_dims: Sequence[int], report: StitchReport):
        self.gm = gm
        self.dynamic_dims = tuple(dynamic_dims)
        self.report = report

    def build(self, args: Sequence[Any]) -> Tuple[fx.GraphModule, Any]:
        gm = self.gm
        result = _Recorder(gm).run(*args)
        sym: Dict[int, str] = {}
        for n in gm.graph.nodes:
            m = n.meta.get("stitch")
            if n.op == "placeholder" and isinstance(m, _TensorMeta):
                for d in self.dynamic_dims:
                    if d < len(m.shape) and m.shape[d] > 1 and m.shape[d] not in sym:
                        sym[m.shape[d]] = "s%d" % len(sym)
        self.sym = sym
        supported: Dict[fx.Node, bool] = {}
        calls = [n for n in gm.graph.nodes if n.op.startswith("call_")]
        report = self.report
        report.total_ops = len(calls)
        for n in calls:
            if n.target is operator.getitem and isinstance(n.args[0], fx.Node) and \
                    isinstance(n.args[0].meta.get("stitch"), list):
                continue  # decided with its tuple's producer below
            why = _single_node_support(gm, n, sym)
            supported[n] = why is None
            if why is not None and isinstance(n.meta.get("stitch"), (_TensorMeta, list)):
                report.fallbacks.append({"node": n.name, "op": _op_name(gm, n), "reason": why})
                log.info("stitch: %s (%s) stays in PyTorch: %s", n.name, _op_name(gm, n), why)
        for n in calls:
            if n in supported:
                continue
            producer = n.args[0]
            # An element of chunk/split goes with its producer; a tuple used any other way
            # cannot leave a piece, so the producer then stays in PyTorch too.
            ok = supported.get(producer, False) and all(
                u.target is operator.getitem for u in producer.users)
            supported[n] = ok
            if not ok and supported.get(producer):
                supported[producer] = False
        pieces = []
        for members in _partition(gm, supported):
            keys = {_converter_key(gm, m)[0] for m in members}
            if keys <= (_LAYOUT_ONLY | {operator.getitem}):
                for m in members:
                    report.fallbacks.append({"node": m.name, "op": _op_name(gm, m),
                                             "reason": "layout-only piece: free as a view in "
                                                       "PyTorch"})
                continue
            piece = self._make_piece(len(pieces), members)
            if piece is not None:
                pieces.append((members, piece))
        new_gm = self._rewrite(pieces)
        report.traced = True
        return new_gm, result

    def _make_piece(self, index: int, members: List[fx.Node]):
        gm, report = self.gm, self.report
        name = "stitch_piece_%d" % index
        mset = set(members)
        b = _Builder(name, self.sym)
        try:
            ext: List[fx.Node] = []
            for m in members:
                for a in m.all_input_nodes:
                    if a not in mset and a not in ext:
                        ext.append(a)
            tensor_ext = [a for a in ext if isinstance(a.meta.get("stitch"), _TensorMeta)]
            params: List[str] = []
            for a in tensor_ext:
                b.add_tensor_input(a)
            for m in members:
                for p in _module_params(gm, m):
                    if p not in params:
                        params.append(p)
                        b.add_tensor_input(_ParamNode(p, gm))
            for m in members:
                if _module_params(gm, m):
                    m.meta["stitch_params"] = [_ParamNode(p, gm) for p in _module_params(gm, m)]
                b.env[m] = _convert(b, gm, m)
            outputs = [m for m in members if any(u not in mset for u in m.users)]
            if any(isinstance(b.env[o], list) for o in outputs):
                raise _Unsupported("a tuple leaves the piece")
            for o in outputs:
                _check_types(b, o, b.env[o])
            b.g.set_outputs([b.env[o] for o in outputs])
            b.g.verify()
            symbol_dims: Dict[str, Tuple[int, int]] = {}
            for i in range(b.g.num_inputs):
                for d, s in enumerate(b.g.value_info(i)[2]):
                    if isinstance(s, str) and s not in symbol_dims:
                        symbol_dims[s] = (i, d)
            kernels = self._count_kernels(b, members)
        except (_Unsupported, StitchError) as e:
            why = e.message.splitlines()[0] if isinstance(e, StitchError) else str(e)
            for m in members:
                report.fallbacks.append({"node": m.name, "op": _op_name(gm, m),
                                         "reason": "piece failed to build: " + why})
            log.info("stitch: piece %s stays in PyTorch: %s", name, why)
            b.g.close()
            return None
        # Every other outside value (ints computed in Python) is passed too: the eager module
        # needs them, and the folded ones are checked against them.
        scalar_ext = [a for a in ext if a not in tensor_ext]
        checks = [(scalar_ext.index(nd), v) for nd, v in b.scalar_checks]
        eager = self._eager_module(members, tensor_ext, params, scalar_ext, outputs)
        piece = _Piece(name, b.g, eager, len(tensor_ext) + len(params), checks, symbol_dims,
                       report)
        # Elements of chunk/split are bookkeeping, not ops.
        ops = [_op_name(gm, m) for m in members
               if not (m.target is operator.getitem and isinstance(m.args[0], fx.Node)
                       and isinstance(m.args[0].meta.get("stitch"), list))]
        report.pieces.append({"name": name, "ops": ops, "kernels": kernels})
        report.replaced_ops += len(ops)
        report.programs += 1
        report.kernels += kernels
        log.info("stitch: %s replaces %d ops (%s) with one program of %d kernel(s)",
                 name, len(ops), ", ".join(ops), kernels)
        piece.stitch_inputs = (tensor_ext, params, scalar_ext, outputs)
        return piece

    def _count_kernels(self, b: _Builder, members) -> int:
        devices = {m.meta["stitch"].device.type for m in members
                   if isinstance(m.meta.get("stitch"), _TensorMeta)}
        target = "sm_90" if "cuda" in devices else "host"
        sizes = {s: v for v, s in self.sym.items()}
        used = set()
        for i in range(b.g.num_inputs):
            used |= {d for d in b.g.value_info(i)[2] if isinstance(d, str)}
        try:
            plan = b.g.explain_plan({s: sizes[s] for s in used}, format="json", target=target)
            return len(plan.get("kernels", []))
        except StitchError:
            return 0

    def _eager_module(self, members, tensor_ext, params, scalar_inputs, outputs):
        g = fx.Graph()
        env: Dict[fx.Node, fx.Node] = {}
        for a in tensor_ext:
            env[a] = g.placeholder(_ident(a.name))
        for p in params:
            g.placeholder(_ident(p))  # the parameter itself is read through the module
        for a in scalar_inputs:
            env[a] = g.placeholder(_ident(a.name))
        for m in members:
            env[m] = g.node_copy(m, lambda x: env[x])
        g.output(tuple(env[o] for o in outputs))
        return fx.GraphModule(self.gm, g)

    def _rewrite(self, pieces) -> fx.GraphModule:
        gm = self.gm
        nodes = list(gm.graph.nodes)
        order = {n: i for i, n in enumerate(nodes)}
        unit_of: Dict[fx.Node, Any] = {}
        for members, piece in pieces:
            for m in members:
                unit_of[m] = piece
        units: List[Any] = []
        seen = set()
        for n in nodes:
            u = unit_of.get(n, n)
            if id(u) not in seen:
                seen.add(id(u))
                units.append(u)
        members_of = {id(p): ms for ms, p in pieces}

        def deps(u):
            ns = members_of.get(id(u), [u])
            out = set()
            for n in ns:
                for a in n.all_input_nodes:
                    ua = unit_of.get(a, a)
                    if ua is not u:
                        out.add(id(ua))
            return out

        # Kahn's algorithm, earliest original position first, so untouched code keeps its order.
        by_id = {id(u): u for u in units}
        pending = {id(u): deps(u) for u in units}
        first = {id(u): order[members_of[id(u)][0]] if id(u) in members_of else order[u]
                 for u in units}
        done: set = set()
        sorted_units = []
        while pending:
            ready = [k for k, d in pending.items() if d <= done]
            k = min(ready, key=first.get)
            sorted_units.append(by_id[k])
            done.add(k)
            del pending[k]

        g = fx.Graph()
        env: Dict[fx.Node, fx.Node] = {}
        for u in sorted_units:
            if isinstance(u, _Piece):
                tensor_ext, params, scalars, outputs = u.stitch_inputs
                name = u.piece_name
                setattr(gm, name, u)
                args = [env[a] for a in tensor_ext]
                args += [g.get_attr(p) for p in params]
                args += [env[a] for a in scalars]
                call = g.call_module(name, tuple(args))
                for k, o in enumerate(outputs):
                    env[o] = g.call_function(operator.getitem, (call, k))
            else:
                env[u] = g.node_copy(u, lambda x: env[x])
        new_gm = fx.GraphModule(gm, g)
        return new_gm


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


class _Optimized:
    """The callable ``optimize`` returns: the original's signature, ``stitch_report``."""

    def __init__(self, original: Callable, gm: fx.GraphModule, dynamic_dims: Sequence[int],
                 positional_only: bool = False):
        self.original = original
        self.stitch_report = StitchReport()
        self._gm = gm
        self._optimized: Optional[fx.GraphModule] = None
        self._dynamic_dims = dynamic_dims
        self._lock = threading.Lock()
        self._training = getattr(original, "training", None)
        target = original.forward if isinstance(original, nn.Module) else original
        try:
            self.__signature__ = inspect.signature(target)
        except (TypeError, ValueError):
            self.__signature__ = None
        self._positional_only = positional_only or self.__signature__ is None
        functools.update_wrapper(self, target, updated=())

    def _bind(self, args, kwargs) -> List[Any]:
        if self._positional_only:
            return list(args)
        bound = self.__signature__.bind(*args, **kwargs)
        bound.apply_defaults()
        return list(bound.arguments.values())

    def __call__(self, *args, **kwargs):
        if self._training is not None and self.original.training != self._training:
            # Dropout and friends were specialized to the mode of the first call.
            return self.original(*args, **kwargs)
        flat = self._bind(args, kwargs)
        if self._optimized is None:
            with self._lock:
                if self._optimized is None:
                    self._optimized, _ = _Optimizer(self._gm, self._dynamic_dims,
                                                    self.stitch_report).build(flat)
        return self._optimized(*flat)

    @property
    def graph_module(self) -> Optional[fx.GraphModule]:
        """The rewritten fx module (after the first call)."""
        return self._optimized


def optimize(module_or_fn: Callable, dynamic_dims: Sequence[int] = (0,)) -> Callable:
    """Returns a callable with the signature of `module_or_fn` that runs the memory-bound parts
    of it through Stitch (see the module note). ``dynamic_dims``: the input dims whose sizes may
    change between calls (default: the batch dim). With ``STITCH_DISABLE=1`` returns
    `module_or_fn` itself."""
    if _disabled():
        log.info("stitch: STITCH_DISABLE is set; returning the original callable")
        return module_or_fn
    gm = module_or_fn if isinstance(module_or_fn, fx.GraphModule) else \
        fx.symbolic_trace(module_or_fn)
    return _Optimized(module_or_fn, gm, dynamic_dims)


def _dynamo_backend(gm: fx.GraphModule, example_inputs):
    """torch.compile(model, backend="stitch"): the same partitioner on TorchDynamo's graph."""
    if _disabled():
        return gm.forward
    opt = _Optimized(gm, gm, (0,), positional_only=True)

    def run(*args):
        out = opt(*args)
        return out

    run.stitch_report = opt.stitch_report
    return run


def _register_dynamo_backend() -> None:
    major = int(torch.__version__.split(".")[0])
    if major < 2:
        return
    try:
        import torch._dynamo as dynamo
        if "stitch" not in dynamo.list_backends(exclude_tags=()):
            dynamo.register_backend(name="stitch")(_dynamo_backend)
    except Exception as e:  # registration is a convenience; optimize() works without it
        log.warning("stitch: could not register the torch.compile backend: %s", e)


_register_dynamo_backend()
