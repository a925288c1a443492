"""Converters of the PyTorch 1.13 path (``stitch.torch.optimize``): one per torch function,
tensor method or module that ``torch.fx.symbolic_trace`` leaves in a graph. Each takes the Builder,
the node and (for modules) the module, and returns a Stitch value (or a list of values) or raises
Unsupported. The torch.compile path has its own table at aten level (_aten_ops).
"""

from __future__ import annotations

import functools
import operator
from typing import Any, List

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from ._builder import Builder
from ._common import (BIG, STITCH_DTYPE, ConverterTable, Unsupported, arg, reduce_axes,
                      tensor_meta)

# ---------------------------------------------------------------------------------------------
# Converters: one per torch function, method or module. Each returns a Stitch value (or a list
# of values) or raises Unsupported.
# ---------------------------------------------------------------------------------------------

TABLE = ConverterTable()
_CONVERTERS = TABLE.converters
_register = TABLE.register


def _m(name):
    """Key of the tensor method `name`."""
    return ("method", name)


def _binary(opname: str):
    def conv(b: Builder, n: fx.Node, _mod) -> int:
        out = b.out_meta(n).dtype
        a, c = arg(n, 0, "input"), arg(n, 1, "other")
        if n.kwargs.get("alpha", 1) != 1 or n.kwargs.get("rounding_mode") is not None:
            raise Unsupported("alpha/rounding_mode")
        if opname == "pow" and not out.is_floating_point:
            raise Unsupported("integer pow")
        if opname == "div" and not out.is_floating_point:
            raise Unsupported("integer division")
        return b.op(opname, b.operand(a, out), b.operand(c, out))
    return conv


def _compute_dtype(b: Builder, args) -> torch.dtype:
    """The dtype PyTorch compares (or selects) in: promotion of the tensor operands, widened to
    float when a Python float meets an integer tensor."""
    dts = [b.dtype_of(a) for a in args if b.dtype_of(a) is not None]
    if not dts:
        raise Unsupported("no tensor operand")
    dt = functools.reduce(torch.promote_types, dts)
    if not dt.is_floating_point and any(isinstance(b.scalar(a) if isinstance(a, fx.Node) and
                                                   b.dtype_of(a) is None else a, float)
                                        for a in args):
        dt = torch.get_default_dtype()
    return dt


def _compare(opname: str):
    def conv(b: Builder, n: fx.Node, _mod) -> int:
        a, c = arg(n, 0, "input"), arg(n, 1, "other")
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
    def conv(b: Builder, n: fx.Node, _mod) -> int:
        a, c = arg(n, 0, "input"), arg(n, 1, "other")
        if b.out_meta(n).dtype != torch.bool:
            raise Unsupported("bitwise op on integers")
        return b.op(opname, b.operand(a, torch.bool), b.operand(c, torch.bool))
    return conv


_register(torch.logical_and, _m("logical_and"), operator.and_)(_logical("logical_and"))
_register(torch.logical_or, _m("logical_or"), operator.or_)(_logical("logical_or"))


@_register(torch.logical_not, _m("logical_not"), operator.invert)
def _logical_not(b, n, _mod):
    if b.out_meta(n).dtype != torch.bool:
        raise Unsupported("bitwise not on integers")
    return b.op("logical_not", b.operand(arg(n, 0, "input"), torch.bool))


def _unary(opname: str):
    def conv(b: Builder, n: fx.Node, mod) -> int:
        if n.kwargs.get("inplace") or (len(n.args) > 1 and n.args[1] is True):
            raise Unsupported("in-place")
        if mod is not None and getattr(mod, "inplace", False):
            raise Unsupported("in-place")
        out = b.out_meta(n).dtype
        return b.op(opname, b.operand(arg(n, 0, "input"), out))
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
    x = b.operand(arg(n, 0, "input"), b.out_meta(n).dtype)
    return b.op("mul", x, x)


@_register(F.gelu, nn.GELU)
def _gelu(b, n, mod):
    approx = mod.approximate if mod is not None else n.kwargs.get(
        "approximate", n.args[1] if len(n.args) > 1 else "none")
    if approx not in ("none", "tanh"):
        raise Unsupported("gelu approximate=%r" % (approx,))
    return b.op("gelu", b.val(arg(n, 0, "input")), approximate=approx)


@_register(torch.clamp, _m("clamp"), torch.clip, _m("clip"), torch.clamp_min, _m("clamp_min"),
           torch.clamp_max, _m("clamp_max"))
def _clamp(b, n, _mod):
    out = b.out_meta(n).dtype
    target = n.target
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    lo = hi = None
    if name.endswith("clamp_min"):
        lo = arg(n, 1, "min")
    elif name.endswith("clamp_max"):
        hi = arg(n, 1, "max")
    else:
        lo, hi = arg(n, 1, "min"), arg(n, 2, "max")
    v = b.operand(arg(n, 0, "input"), out)
    if lo is not None:
        v = b.op("maximum", v, b.operand(lo, out))
    if hi is not None:
        v = b.op("minimum", v, b.operand(hi, out))
    return v


@_register(torch.where, _m("where"))
def _where(b, n, _mod):
    if n.target == torch.where:
        cond, a, c = arg(n, 0, "condition"), arg(n, 1, "input"), arg(n, 2, "other")
    else:  # x.where(cond, y)
        a, cond, c = n.args[0], arg(n, 1, "condition"), arg(n, 2, "other")
    if a is None or c is None:
        raise Unsupported("where(cond) without values")
    out = b.out_meta(n).dtype
    return b.op("select", b.operand(cond, torch.bool), b.operand(a, out), b.operand(c, out))


@_register(torch.masked_fill, _m("masked_fill"))
def _masked_fill(b, n, _mod):
    x, mask, value = arg(n, 0, "input"), arg(n, 1, "mask"), arg(n, 2, "value")
    out = b.out_meta(n).dtype
    return b.op("select", b.operand(mask, torch.bool), b.operand(value, out), b.operand(x, out))


def _softmax(opname: str):
    def conv(b: Builder, n: fx.Node, mod) -> int:
        dim = mod.dim if mod is not None else arg(n, 1, "dim")
        if dim is None:
            raise Unsupported("softmax without dim")
        x = b.operand(arg(n, 0, "input"), b.out_meta(n).dtype)  # dtype= casts first
        return b.op(opname, x, axis=int(dim))
    return conv


_register(F.softmax, torch.softmax, _m("softmax"), nn.Softmax)(_softmax("softmax"))
_register(F.log_softmax, torch.log_softmax, _m("log_softmax"), nn.LogSoftmax)(
    _softmax("log_softmax"))


def _affine_param(b: Builder, p: Any, shape, fill: float, dtype: torch.dtype) -> int:
    if p is None:
        return b.op("full", shape=list(shape), value=fill, dtype=STITCH_DTYPE[dtype])
    return b.operand(p, dtype)


@_register(F.layer_norm, torch.layer_norm, nn.LayerNorm)
def _layer_norm(b, n, mod):
    x = arg(n, 0, "input")
    if mod is not None:
        shape, eps = tuple(mod.normalized_shape), mod.eps
        w = n.meta["stitch_params"][0] if mod.elementwise_affine else None
        bias = n.meta["stitch_params"][1] if mod.elementwise_affine else None
    else:
        shape = arg(n, 1, "normalized_shape")
        w, bias, eps = arg(n, 2, "weight"), arg(n, 3, "bias"), arg(n, 4, "eps", 1e-5)
        shape = b.scalar(shape) if isinstance(shape, fx.Node) else shape
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
    out = b.out_meta(n).dtype
    xv = b.operand(x, out)
    g = _affine_param(b, w, shape, 1.0, out)
    be = _affine_param(b, bias, shape, 0.0, out)
    return b.op("layer_norm", xv, g, be, axis=-len(shape), eps=float(b.scalar(eps)))


def _reduce(opname: str):
    def conv(b: Builder, n: fx.Node, _mod) -> int:
        x = arg(n, 0, "input")
        xm = tensor_meta(x)
        if xm is None:
            raise Unsupported("reduction of a non-tensor")
        dim = arg(n, 1, "dim")
        keep = bool(arg(n, 2, "keepdim", False))
        out = b.out_meta(n).dtype
        v = b.operand(x, out)  # sum(int) is i64 in PyTorch; mean(dtype=) casts first
        if xm.rank == 0:
            return v
        return b.op(opname, v, axes=reduce_axes(dim, xm.rank), keepdims=keep)
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


def _reshape_to(b: Builder, x: int, entries: Sequence[Any]) -> int:
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
        raise Unsupported("view(dtype) reinterprets bits")
    return _reshape_to(b, b.val(n.args[0]), _shape_args(n, 1, "shape"))


@_register(torch.flatten, _m("flatten"), layout=True)
def _flatten(b, n, _mod):
    x = b.val(n.args[0])
    _, dims = b.stype(x)
    r = len(dims)
    s = arg(n, 1, "start_dim", 0) % max(r, 1)
    e = arg(n, 2, "end_dim", -1) % max(r, 1)
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
    d0, d1 = arg(n, 1, "dim0") % r, arg(n, 2, "dim1") % r
    perm = list(range(r))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return b.op("transpose", x, perm=perm)


@_register(_m("unsqueeze"), torch.unsqueeze, layout=True)
def _unsqueeze(b, n, _mod):
    x = b.val(n.args[0])
    _, dims = b.stype(x)
    d = arg(n, 1, "dim") % (len(dims) + 1)
    return b.op("reshape", x, shape=list(dims[:d]) + [1] + list(dims[d:]))


@_register(_m("squeeze"), torch.squeeze, layout=True)
def _squeeze(b, n, _mod):
    x = b.val(n.args[0])
    _, dims = b.stype(x)
    d = arg(n, 1, "dim")
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


@_register(_m("detach"), torch.detach, nn.Identity, layout=True)
@_register(_m("contiguous"), _m("clone"), torch.clone, copy=True)
def _identity(b, n, _mod):
    if n.kwargs.get("memory_format") not in (None, torch.contiguous_format):
        raise Unsupported("memory_format")
    return b.val(n.args[0])


@_register(F.dropout, nn.Dropout, torch.dropout, layout=True)
def _dropout(b, n, mod):
    if mod is not None:
        training, p = mod.training, mod.p
    else:
        p, training = arg(n, 1, "p", 0.5), arg(n, 2, "training", n.target is not F.dropout)
    if training and p > 0:
        raise Unsupported("dropout in training mode")
    return b.val(n.args[0])


@_register(_m("to"), _m("type"), _m("float"), _m("half"), _m("double"), _m("bfloat16"),
           _m("int"), _m("long"), _m("bool"), _m("type_as"))
def _to(b, n, _mod):
    x = n.args[0]
    out = b.out_meta(n)
    xm = tensor_meta(x)
    if xm is None or xm.device != out.device:
        raise Unsupported("device transfer")
    if n.kwargs.get("memory_format") not in (None, torch.preserve_format,
                                             torch.contiguous_format):
        raise Unsupported("memory_format")
    return b.cast(b.val(x), out.dtype)


def _pieces(b: Builder, x: int, sizes: List[int], dim: int) -> List[int]:
    _, dims = b.stype(x)
    r = len(dims)
    d = dim % r
    out, start = [], 0
    for s in sizes:
        starts = [0] * r
        ends = [BIG] * r
        starts[d], ends[d] = start, start + s
        out.append(b.op("slice", x, starts=starts, ends=ends))
        start += s
    return out


def _static_dim(n: fx.Node, dim: int) -> int:
    m = tensor_meta(n)
    if m is None:
        raise Unsupported("not a tensor")
    return m.static_dim(dim)


@_register(_m("chunk"), torch.chunk, layout=True)
def _chunk(b, n, _mod):
    x = n.args[0]
    chunks, dim = arg(n, 1, "chunks"), arg(n, 2, "dim", 0)
    size = _static_dim(x, dim)
    step = -(-size // chunks)
    sizes = [min(step, size - i) for i in range(0, size, step)] if size else [0]
    return _pieces(b, b.val(x), sizes, dim)


@_register(_m("split"), torch.split, layout=True)
def _split(b, n, _mod):
    x = n.args[0]
    ss, dim = arg(n, 1, "split_size_or_sections", n.kwargs.get("split_size")), arg(n, 2, "dim", 0)
    size = _static_dim(x, dim)
    if isinstance(ss, int):
        sizes = [min(ss, size - i) for i in range(0, size, ss)]
    else:
        sizes = list(ss)
    return _pieces(b, b.val(x), sizes, dim)


@_register(torch.cat, torch.concat)
def _cat(b, n, _mod):
    tensors = arg(n, 0, "tensors")
    dim = arg(n, 1, "dim", 0)
    out = b.out_meta(n).dtype
    vals = [b.operand(t, out) for t in tensors]
    return b.op("concat", *vals, axis=int(dim))


@_register(torch.stack)
def _stack(b, n, _mod):
    tensors = arg(n, 0, "tensors")
    dim = arg(n, 1, "dim", 0)
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
        raise Unsupported("advanced indexing")
    consumed = sum(1 for i in items if i is not None and i is not Ellipsis)
    if items.count(Ellipsis) > 1 or consumed > len(dims):
        raise Unsupported("index")
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
                raise Unsupported("non-positive step")
            starts.append(i.start if i.start is not None else 0)
            ends.append(i.stop if i.stop is not None else BIG)
            steps.append(st)
            sliced = sliced or i != slice(None)
            shape.append(None)  # filled from the sliced value's dims
        elif isinstance(i, int) and not isinstance(i, bool):
            starts.append(i)
            ends.append(i + 1 if i != -1 else BIG)
            steps.append(1)
            sliced = True
        else:
            raise Unsupported("index %r" % (i,))
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


