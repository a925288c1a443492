"""Converters of the torch.compile path: one per aten op (keyed by overload packet) that
AOTAutograd leaves in a forward, backward or inference graph after the decompositions of
_compile (which turn the backward ops of norms and activations into the elementwise ops and
reductions below).

Types. Arithmetic is done in the dtype of the result, as PyTorch's type promotion makes it;
comparisons in the promoted dtype of their operands. An aten op that a converter builds from
several Stitch ops (softmax's backward, layer norm, tanh's backward, add with alpha, ...) computes
them in PyTorch's opmath dtype (f32 for f16 and bf16, see _opmath) and casts once at the end, where
PyTorch's kernels round a low-precision result once: Stitch rounds every op's result to its dtype.
Python numbers are rounded to the tensor's dtype, except in mul and div, whose CPU kernels take
them unrounded (_scaled). A size in a ``shape`` argument may be a
symbol (a SymInt node, whose meta is the symbol's name), and so may an arithmetic operand (read
at run time: Builder.size_value); a symbolic value anywhere else (a slice start, a fill value, an
exponent) is Unsupported, so the node stays in PyTorch. Every converter's result is
checked against PyTorch's type by the partitioner; a converter that is wrong for some argument
costs a fallback, not a wrong answer.

Random numbers: _random rewrites training dropout into ``stitch::philox_seed`` (stays in PyTorch:
it draws from PyTorch's generator) and ``stitch::philox_uniform`` (Stitch's ``random_uniform``).
Indices: gather, scatter_add (one target per row) and nll_loss's labels are range-checked by
Stitch (gather's own check, check_index): a run that reads one out of range fails, and the piece
raises what PyTorch raises (_common.IndexErrorKind). Matmuls, convolutions, attention kernels,
embeddings and anything unmapped stay in PyTorch.
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Any, List

import torch
import torch.fx as fx

from ._builder import Builder, is_symbolic_size
from ._common import (BIG, STITCH_DTYPE, ConverterTable, IndexErrorKind, Unsupported, arg,
                      reduce_axes, tensor_meta)
from ._random import philox_seed, philox_uniform

aten = torch.ops.aten
prims = torch.ops.prims

TABLE = ConverterTable()
_register = TABLE.register


def _out(b: Builder, n: fx.Node) -> torch.dtype:
    return b.out_meta(n).dtype


def _opmath(dt: torch.dtype) -> torch.dtype:
    """The dtype PyTorch's kernels compute an op of dtype `dt` in (at::opmath_type): f32 for f16
    and bf16, rounding once at the result."""
    return torch.float32 if dt in (torch.float16, torch.bfloat16) else dt


def _promoted(b: Builder, args) -> torch.dtype:
    """The dtype PyTorch computes a comparison (or select) in: promotion of the tensor operands
    (0-dim tensors and Python numbers only widen the category, as in PyTorch)."""
    metas = [m for m in (tensor_meta(a) for a in args) if m is not None]
    if not metas:
        raise Unsupported("no tensor operand")
    full = [m.dtype for m in metas if m.rank > 0]
    zero = [m.dtype for m in metas if m.rank == 0]
    dt = functools.reduce(torch.promote_types, full or zero)
    if full and zero:
        z = functools.reduce(torch.promote_types, zero)
        if z.is_floating_point and not dt.is_floating_point:
            dt = z
    # A symbolic size is an int: like an int literal, it never changes the dtype.
    py = [b.scalar(a) for a in args if tensor_meta(a) is None and not is_symbolic_size(a)]
    if not dt.is_floating_point and any(isinstance(x, float) for x in py):
        dt = torch.get_default_dtype()
    return dt


# -- elementwise ------------------------------------------------------------------------------


def _with_alpha(opname: str, swap: bool):
    """add/sub(a, b, alpha) = a op alpha*b; rsub(a, b, alpha) = b - alpha*a. With an alpha, as
    PyTorch's CPU kernel: alpha rounded to the result's dtype, then a op alpha*b in opmath,
    rounded once."""
    def conv(b, n, _m):
        dt = _out(b, n)
        first, second = (n.args[1], n.args[0]) if swap else (n.args[0], n.args[1])
        alpha = n.kwargs.get("alpha", 1)
        if alpha == 1:
            return b.op(opname, b.operand(first, dt), b.operand(second, dt))
        ct = _opmath(dt)
        scaled = b.op("mul", b.operand(second, ct), b.cast(b.const(alpha, dt), ct))
        return b.cast(b.op(opname, b.operand(first, ct), scaled), dt)
    return conv


_register(aten.add)(_with_alpha("add", False))
_register(aten.sub)(_with_alpha("sub", False))
_register(aten.rsub)(_with_alpha("sub", True))


def _scaled(b: Builder, opname: str, n: fx.Node, dt: torch.dtype) -> int:
    """mul and div: with a Python number for an operand, in opmath, the number unrounded, as
    PyTorch's CPU kernels take it (add and sub round it to the tensor's dtype first, which
    b.operand does); x * 0.6931 in bf16 differs in a bit of half the elements otherwise."""
    x, y = n.args[0], n.args[1]
    ct = _opmath(dt)
    if ct != dt and (tensor_meta(x) is None or tensor_meta(y) is None):
        return b.cast(b.op(opname, b.operand(x, ct), b.operand(y, ct)), dt)
    return b.op(opname, b.operand(x, dt), b.operand(y, dt))


@_register(aten.div)
def _div(b, n, _m):
    dt = _out(b, n)
    if not dt.is_floating_point:
        raise Unsupported("integer division")
    mode = n.kwargs.get("rounding_mode")
    if mode is not None:
        # PyTorch floors the exact quotient (through fmod): floor(a / b) is one too high where
        # a / b rounds up to an integer (1.0 // 0.1 is 9, floor(1.0 / 0.1) is 10).
        raise Unsupported("rounding_mode=%r" % (mode,))
    return _scaled(b, "div", n, dt)


@_register(aten.mul)
def _mul(b, n, _m):
    return _scaled(b, "mul", n, _out(b, n))


def _binary(opname: str):
    def conv(b, n, _m):
        dt = _out(b, n)
        return b.op(opname, b.operand(n.args[0], dt), b.operand(n.args[1], dt))
    return conv


_register(aten.maximum)(_binary("maximum"))
_register(aten.minimum)(_binary("minimum"))


@_register(aten.pow)
def _pow(b, n, _m):
    dt = _out(b, n)
    if not dt.is_floating_point:
        raise Unsupported("integer pow")
    x, e = n.args[0], n.args[1]
    if tensor_meta(e) is None:
        e = b.scalar(e)
        if e in (2, 3, 4):
            # Small integer powers as products (GELU's x**3, RMSNorm's x**2): as PyTorch's CPU
            # kernel computes them (in the tensor's dtype: bf16's x**3 rounds x*x first), and no
            # call to a scalar pow per element.
            xv = b.operand(x, dt)
            sq = b.op("mul", xv, xv)
            return sq if e == 2 else b.op("mul", sq, xv) if e == 3 else b.op("mul", sq, sq)
        if e == 0.5:
            return b.op("sqrt", b.operand(x, dt))
        if e == -0.5:
            return b.op("rsqrt", b.operand(x, dt))
        if e == 1:
            return b.operand(x, dt)
    return b.op("pow", b.operand(x, dt), b.operand(e, dt))


def _compare(opname: str):
    def conv(b, n, _m):
        a, c = n.args[0], n.args[1]
        dt = _promoted(b, [a, c])
        return b.op(opname, b.operand(a, dt), b.operand(c, dt))
    return conv


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    _register(getattr(aten, _name))(_compare(_name))


def _logical(opname: str, bool_only: bool):
    def conv(b, n, _m):
        if bool_only and _out(b, n) != torch.bool:
            raise Unsupported("bitwise op on integers")
        return b.op(opname, b.operand(n.args[0], torch.bool), b.operand(n.args[1], torch.bool))
    return conv


_register(aten.logical_and)(_logical("logical_and", False))
_register(aten.logical_or)(_logical("logical_or", False))
_register(aten.bitwise_and)(_logical("logical_and", True))
_register(aten.bitwise_or)(_logical("logical_or", True))


@_register(aten.logical_not, aten.bitwise_not)
def _logical_not(b, n, _m):
    if n.target.overloadpacket is aten.bitwise_not and _out(b, n) != torch.bool:
        raise Unsupported("bitwise not on integers")
    return b.op("logical_not", b.operand(n.args[0], torch.bool))


def _unary(opname: str):
    def conv(b, n, _m):
        return b.op(opname, b.operand(n.args[0], _out(b, n)))
    return conv


for _name in ("neg", "abs", "exp", "log", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
              "sin", "cos", "reciprocal", "floor", "ceil", "relu", "silu"):
    _register(getattr(aten, _name))(_unary(_name))


@_register(aten.expm1)
def _expm1(b, n, _m):
    """exp(x) - 1 without its cancellation near 0 (Kahan: (u - 1) * x / log(u), u = exp(x),
    accurate to a few ulps where u - 1 alone loses every digit), in opmath; where u rounds to 1
    the result is x, where u - 1 rounds to -1 it is -1 (log(u) is -inf at u = 0), and where u
    overflows it is u (inf * x / inf would be NaN)."""
    dt = _out(b, n)
    ct = _opmath(dt)
    x = b.operand(n.args[0], ct)
    u = b.op("exp", x)
    um1 = b.op("sub", u, b.const(1.0, ct))
    r = b.op("div", b.op("mul", um1, x), b.op("log", u))
    r = b.op("select", b.op("eq", u, b.const(1.0, ct)), x, r)
    r = b.op("select", b.op("eq", um1, b.const(-1.0, ct)), b.const(-1.0, ct), r)
    r = b.op("select", b.op("eq", u, b.const(float("inf"), ct)), u, r)
    return b.cast(r, dt)


@_register(aten.gelu)
def _gelu(b, n, _m):
    approx = n.kwargs.get("approximate", "none")
    if approx not in ("none", "tanh"):
        raise Unsupported("gelu approximate=%r" % (approx,))
    return b.op("gelu", b.operand(n.args[0], _out(b, n)), approximate=approx)


@_register(aten.clamp, aten.clamp_min, aten.clamp_max)
def _clamp(b, n, _m):
    dt = _out(b, n)
    pk = n.target.overloadpacket
    lo = hi = None
    if pk is aten.clamp_min:
        lo = arg(n, 1, "min")
    elif pk is aten.clamp_max:
        hi = arg(n, 1, "max")
    else:
        lo, hi = arg(n, 1, "min"), arg(n, 2, "max")
    v = b.operand(n.args[0], dt)
    if lo is not None:
        v = b.op("maximum", v, b.operand(lo, dt))
    if hi is not None:
        v = b.op("minimum", v, b.operand(hi, dt))
    return v


@_register(aten.where)
def _where(b, n, _m):
    if len(n.args) < 3:
        raise Unsupported("where(cond) without values")
    dt = _out(b, n)
    return b.op("select", b.operand(n.args[0], torch.bool), b.operand(n.args[1], dt),
                b.operand(n.args[2], dt))


@_register(aten.masked_fill)
def _masked_fill(b, n, _m):
    dt = _out(b, n)
    x, mask, value = n.args[0], n.args[1], n.args[2]
    return b.op("select", b.operand(mask, torch.bool), b.operand(value, dt), b.operand(x, dt))


@_register(aten.threshold_backward)
def _threshold_backward(b, n, _m):
    # grad where x > threshold, else 0 (ReLU's backward).
    dt = _out(b, n)
    grad, x, th = n.args[0], n.args[1], n.args[2]
    xdt = b.dtype_of(x)
    keep = b.op("le", b.val(x), b.const(th, xdt))
    return b.op("select", keep, b.const(0.0, dt), b.operand(grad, dt))


@_register(aten.sigmoid_backward)
def _sigmoid_backward(b, n, _m):
    dt = _out(b, n)
    ct = _opmath(dt)
    g, y = b.operand(n.args[0], ct), b.operand(n.args[1], ct)
    return b.cast(b.op("mul", b.op("mul", g, y), b.op("sub", b.const(1.0, ct), y)), dt)


@_register(aten.tanh_backward)
def _tanh_backward(b, n, _m):
    dt = _out(b, n)
    ct = _opmath(dt)
    g, y = b.operand(n.args[0], ct), b.operand(n.args[1], ct)
    return b.cast(b.op("mul", g, b.op("sub", b.const(1.0, ct), b.op("mul", y, y))), dt)


@_register(aten._to_copy, prims.convert_element_type)
def _to_copy(b, n, _m):
    x = n.args[0]
    xm, out = tensor_meta(x), b.out_meta(n)
    if xm is None or xm.device != out.device:
        raise Unsupported("device transfer")
    for k in ("layout", "memory_format"):
        if n.kwargs.get(k) not in (None, torch.strided, torch.preserve_format,
                                   torch.contiguous_format):
            raise Unsupported("%s=%s" % (k, n.kwargs[k]))
    return b.cast(b.val(x), out.dtype)


@_register(aten.alias, aten.detach, layout=True)
@_register(aten.clone, aten.lift_fresh_copy, copy=True)
def _identity(b, n, _m):
    if n.kwargs.get("memory_format") not in (None, torch.contiguous_format,
                                             torch.preserve_format):
        raise Unsupported("memory_format")
    return b.val(n.args[0])


@_register(aten.native_dropout)
def _dropout(b, n, _m):
    # Training dropout with 0 < p < 1 never gets here: _random rewrote it into the ops below.
    raise Unsupported("dropout kept as PyTorch emits it (eval mode, p = 0 or p = 1)")


def _philox_seed(b, n, _m):
    raise Unsupported("draws (seed, offset) from PyTorch's generator")


def _philox_uniform(b, n, _m):
    """Stitch's random_uniform, whose bits _random's eager implementation reproduces; the seed
    operand is int64[2] (seed, offset) drawn by stitch::philox_seed."""
    seed, size, dtype = n.args[0], n.args[1], n.args[2]
    if dtype not in STITCH_DTYPE or not dtype.is_floating_point:
        raise Unsupported("random_uniform of %s" % dtype)
    s = b.val(seed)
    half = [b.op("reshape", b.op("slice", s, starts=[i], ends=[i + 1]), shape=[])
            for i in (0, 1)]
    return b.op("random_uniform", half[0], half[1], shape=_shape_list(b, size),
                dtype=STITCH_DTYPE[dtype])


if philox_uniform is not None:  # PyTorch 2.4+ (see _random)
    _register(philox_seed.overloadpacket)(_philox_seed)
    _register(philox_uniform.overloadpacket)(_philox_uniform)


# -- sources ----------------------------------------------------------------------------------


@_register(aten.full)
def _full(b, n, _m):
    dims = [b.shape_entry(s) for s in n.args[0]]
    return b.full(dims, b.scalar(n.args[1]), _out(b, n))


@_register(aten.scalar_tensor)
def _scalar_tensor(b, n, _m):
    return b.full([], b.scalar(n.args[0]), _out(b, n))


@_register(aten.full_like, aten.zeros_like, aten.ones_like)
def _full_like(b, n, _m):
    pk = n.target.overloadpacket
    value = {aten.zeros_like: 0.0, aten.ones_like: 1.0}.get(pk)
    if value is None:
        value = b.scalar(n.args[1])
    return b.full(list(b.out_meta(n).dims), value, _out(b, n))


# -- reductions and normalizations ------------------------------------------------------------


def _reduce(opname: str):
    def conv(b, n, _m):
        x = n.args[0]
        xm = tensor_meta(x)
        if xm is None:
            raise Unsupported("reduction of a non-tensor")
        dt = _out(b, n)
        if opname in ("reduce_max", "reduce_min") and xm.dtype != dt:
            raise Unsupported("amax/amin changing dtype")
        v = b.operand(x, dt)  # sum(int) is i64 in PyTorch; sum(dtype=) casts first
        if xm.rank == 0:
            return v
        dim = arg(n, 1, "dim")
        keep = bool(arg(n, 2, "keepdim", False))
        return b.op(opname, v, axes=reduce_axes(dim, xm.rank), keepdims=keep)
    return conv


_register(aten.sum)(_reduce("reduce_sum"))
_register(aten.mean)(_reduce("reduce_mean"))
_register(aten.amax)(_reduce("reduce_max"))
_register(aten.amin)(_reduce("reduce_min"))
_register(aten.prod)(_reduce("reduce_prod"))


def _reduced_count(b: Builder, xm, axes: List[int]) -> int:
    return math.prod(xm.static_dim(a) for a in axes)


@_register(aten.var_mean, aten.var)
def _var_mean(b, n, _m):
    x = n.args[0]
    xm = tensor_meta(x)
    dt = b.out_meta(n, 0).dtype  # var's result, or var_mean's first
    if xm is None or not dt.is_floating_point or xm.rank == 0:
        raise Unsupported("variance of this operand")
    axes = reduce_axes(arg(n, 1, "dim"), xm.rank)
    correction = n.kwargs.get("correction", 1)
    correction = 1 if correction is None else b.scalar(correction)
    keep = bool(n.kwargs.get("keepdim", False))
    ct = _opmath(dt)
    xv = b.operand(x, ct)
    mean_k = b.op("reduce_mean", xv, axes=axes, keepdims=True)
    xc = b.op("sub", xv, mean_k)
    var = b.op("reduce_mean", b.op("mul", xc, xc), axes=axes, keepdims=keep)
    if correction != 0:
        count = _reduced_count(b, xm, axes)
        var = b.op("mul", var, b.const(count / max(count - correction, 0) if count > correction
                                       else float("inf"), ct))
    if n.target.overloadpacket is aten.var:
        return b.cast(var, dt)
    mean = mean_k if keep else b.op("reduce_mean", xv, axes=axes, keepdims=False)
    return [b.cast(var, dt), b.cast(mean, b.out_meta(n, 1).dtype)]


def _softmax(opname: str):
    def conv(b, n, _m):
        dt = _out(b, n)  # half_to_float gives f32 from f16
        return b.op(opname, b.operand(n.args[0], dt), axis=int(n.args[1]))
    return conv


_register(aten._softmax)(_softmax("softmax"))
_register(aten._log_softmax)(_softmax("log_softmax"))


@_register(aten._softmax_backward_data)
def _softmax_backward(b, n, _m):
    # grad_in = y * (g - sum(g * y, dim))
    dt = _out(b, n)
    ct = _opmath(dt)
    g, y, dim = b.operand(n.args[0], ct), b.operand(n.args[1], ct), int(n.args[2])
    s = b.op("reduce_sum", b.op("mul", g, y), axes=[dim], keepdims=True)
    return b.cast(b.op("mul", y, b.op("sub", g, s)), dt)


@_register(aten._log_softmax_backward_data)
def _log_softmax_backward(b, n, _m):
    # grad_in = g - exp(y) * sum(g, dim)
    dt = _out(b, n)
    ct = _opmath(dt)
    g, y, dim = b.operand(n.args[0], ct), b.operand(n.args[1], ct), int(n.args[2])
    s = b.op("reduce_sum", g, axes=[dim], keepdims=True)
    return b.cast(b.op("sub", g, b.op("mul", b.op("exp", y), s)), dt)


@_register(aten.native_layer_norm)
def _native_layer_norm(b, n, _m):
    # (y, mean, rstd); mean and rstd keep the normalized dims as 1s, in the input's dtype.
    x, shape, w, bias, eps = n.args[0], n.args[1], n.args[2], n.args[3], n.args[4]
    xm = tensor_meta(x)
    dt = b.out_meta(n, 0).dtype
    ct = _opmath(dt)
    k = len(shape)
    axes = list(range(xm.rank - k, xm.rank))
    xv = b.operand(x, ct)
    mean = b.op("reduce_mean", xv, axes=axes, keepdims=True)
    xc = b.op("sub", xv, mean)
    var = b.op("reduce_mean", b.op("mul", xc, xc), axes=axes, keepdims=True)
    rstd = b.op("rsqrt", b.op("add", var, b.const(b.scalar(eps), ct)))
    y = b.op("mul", xc, rstd)
    if w is not None:
        y = b.op("mul", y, b.operand(w, ct))
    if bias is not None:
        y = b.op("add", y, b.operand(bias, ct))
    stat = b.out_meta(n, 1).dtype
    return [b.cast(y, dt), b.cast(mean, stat), b.cast(rstd, stat)]


# -- losses -----------------------------------------------------------------------------------


_TARGET_ERROR = IndexErrorKind(IndexError, "Target {index} is out of bounds.")


def _index_error(dim: int) -> IndexErrorKind:
    return IndexErrorKind(RuntimeError,
                          "index {index} is out of bounds for dimension %d with size {size}" % dim)


def _nll_hits(b: Builder, x: Any, target: Any, ignore_index: Any):
    """(class axis, dims of x, hit, valid) for nll_loss over x ([N, C, ...] or [C]): hit[n, c] is
    the one-hot of the label (eq(iota, label): Stitch's passes turn the row sum that picks x at
    the label into one load of the logit when x is log_softmax of an input, src/passes/
    sink_picks.h, and otherwise it fuses with what computes x), valid[n, 1] that the label is not
    ignore_index. Both keep the class axis (size C, resp. 1) so they broadcast against x. A label
    outside [0, C) other than ignore_index fails the run (check_index), and the piece raises
    PyTorch's IndexError."""
    xm, tm = tensor_meta(x), tensor_meta(target)
    if xm is None or tm is None or tm.dtype not in (torch.int64, torch.int32):
        raise Unsupported("nll_loss operands")
    ch = 1 if xm.rank >= 2 else 0
    dims = list(xm.dims)
    t = b.cast(b.val(target), torch.int64)
    t = b.op("reshape", t, shape=dims[:ch] + [1] + dims[ch + 1:])
    valid = b.op("ne", t, b.const(b.scalar(ignore_index), torch.int64))
    # Ignored labels may be anything (-100): checked as class 0.
    t = b.checked_index(b.op("select", valid, t, b.const(0, torch.int64)), dims[ch], _TARGET_ERROR)
    classes = b.op("iota", shape=dims, axis=ch, dtype="i64")
    hit = b.op("logical_and", b.op("eq", classes, t), valid)
    return ch, dims, hit, valid


def _class_weight(b: Builder, weight: Any, rank: int, ch: int, dims, dt: torch.dtype) -> int:
    """weight [C] shaped to broadcast along the class axis of a rank-`rank` operand."""
    shape = [1] * rank
    shape[ch] = dims[ch]
    return b.op("reshape", b.operand(weight, dt), shape=shape)


@_register(aten.nll_loss_forward, aten.nll_loss2d_forward)
def _nll_loss_forward(b, n, _m):
    """(output, total_weight) as PyTorch defines them: output[n] = -w[t_n] * x[n, t_n], 0 where
    t_n == ignore_index; total_weight = sum of w[t_n] over the labels not ignored (their count
    without weights); reduction 1 (mean) divides the sum by total_weight (NaN when every label is
    ignored, as in PyTorch), 2 sums, 0 keeps output per element (total_weight is then 0 for
    batched input). A label outside [0, C) other than ignore_index raises (_nll_hits)."""
    x, target, weight, reduction, ignore = (arg(n, i, k) for i, k in enumerate(
        ("self", "target", "weight", "reduction", "ignore_index")))
    dt = b.out_meta(n, 0).dtype
    if not dt.is_floating_point or reduction not in (0, 1, 2):
        raise Unsupported("nll_loss of this type")
    ch, dims, hit, valid = _nll_hits(b, x, target, ignore)
    rank = len(dims)
    wx = b.operand(x, dt)
    w = None
    if weight is not None:
        w = _class_weight(b, weight, rank, ch, dims, dt)
        wx = b.op("mul", wx, w)
    # Negated before the selection, as PyTorch negates the gathered value: an ignored label
    # gives +0, not -0.
    zero = b.const(0.0, dt)
    picked = b.op("reduce_sum", b.op("select", hit, b.op("neg", wx), zero), axes=[ch])
    if reduction == 0 and rank > 1:
        return [picked, b.full([], 0.0, dt)]
    if w is not None:
        total = b.op("reduce_sum", b.op("select", hit, b.op("broadcast_to", w, shape=dims), zero))
    else:
        total = b.op("reduce_sum", b.cast(valid, dt))
    if reduction == 0:
        return [picked, total]
    loss = b.op("reduce_sum", picked)
    if reduction == 1:
        loss = b.op("div", loss, total)
    return [loss, total]


@_register(aten.nll_loss_backward, aten.nll_loss2d_backward)
def _nll_loss_backward(b, n, _m):
    """grad_input = one_hot(t) * -(g * w[t]) (g / total_weight for mean), 0 on ignored labels;
    PyTorch's formula (a scatter of -1 times the masked gradient), with the one-hot as
    eq(iota, label) so it fuses with log_softmax's backward into softmax - one_hot."""
    g, x, target, weight, reduction, ignore, total = (arg(n, i, k) for i, k in enumerate(
        ("grad_output", "self", "target", "weight", "reduction", "ignore_index",
         "total_weight")))
    dt = _out(b, n)
    if not dt.is_floating_point or reduction not in (0, 1, 2):
        raise Unsupported("nll_loss backward of this type")
    ch, dims, hit, valid = _nll_hits(b, x, target, ignore)
    rank = len(dims)
    gv = b.operand(g, dt)
    if reduction == 1:
        gv = b.op("div", gv, b.operand(total, dt))
    if reduction == 0 and rank > 1:
        gv = b.op("reshape", gv, shape=dims[:ch] + [1] + dims[ch + 1:])
    if weight is not None:
        gv = b.op("mul", gv, _class_weight(b, weight, rank, ch, dims, dt))
    gv = b.op("select", valid, gv, b.const(0.0, dt))
    return b.op("mul", b.op("select", hit, b.const(-1.0, dt), b.const(0.0, dt)), gv)


# -- indexing and arg-reductions ---------------------------------------------------------------


@_register(aten.gather)
def _gather(b, n, _m):
    """Take-along-axis: Stitch's gather, whose index out of [0, n) fails the run (the piece then
    raises PyTorch's RuntimeError). PyTorch allows index to be smaller than x on the other axes:
    x is then sliced to index's sizes first, as PyTorch only reads those positions."""
    x, dim, index = n.args[0], n.args[1], n.args[2]
    xm, im = tensor_meta(x), tensor_meta(index)
    if xm is None or im is None or xm.rank != im.rank or xm.rank == 0:
        raise Unsupported("gather of these operands")
    if im.dtype not in (torch.int64, torch.int32):
        raise Unsupported("gather index of dtype %s" % im.dtype)
    axis = dim % xm.rank
    xv = b.val(x)
    ends = [BIG] * xm.rank
    for d in range(xm.rank):
        if d != axis and xm.dims[d] != im.dims[d]:
            if not isinstance(im.dims[d], int):
                raise Unsupported("gather index smaller than x on a symbolic axis")
            ends[d] = im.dims[d]
    if any(e != BIG for e in ends):
        xv = b.op("slice", xv, starts=[0] * xm.rank, ends=ends)
    return b.gather(xv, b.val(index), axis, _index_error(axis))


@_register(aten.scatter_add)
def _scatter_add(b, n, _m):
    """x + src scattered along `dim` at index, for an index of size 1 along dim (one target per
    row: gather's backward when it picks one value per row, take_along_dim's): a one-hot select,
    eq(iota, index), with no accumulation between sources. The index is checked (check_index):
    one out of range raises PyTorch's RuntimeError."""
    x, dim, index, src = n.args[0], n.args[1], n.args[2], n.args[3]
    xm, im, sm = tensor_meta(x), tensor_meta(index), tensor_meta(src)
    if xm is None or im is None or sm is None or xm.rank != im.rank or xm.rank == 0:
        raise Unsupported("scatter_add of these operands")
    axis = dim % xm.rank
    if im.dims[axis] != 1 or sm.dims != im.dims or any(
            im.dims[d] != xm.dims[d] for d in range(xm.rank) if d != axis):
        raise Unsupported("scatter_add other than one target per row")
    if im.dtype not in (torch.int64, torch.int32):
        raise Unsupported("scatter_add index of dtype %s" % im.dtype)
    dt = _out(b, n)
    i = b.checked_index(b.cast(b.val(index), torch.int64), xm.dims[axis], _index_error(axis))
    hit = b.op("eq", b.op("iota", shape=list(xm.dims), axis=axis, dtype="i64"), i)
    return b.op("add", b.operand(x, dt),
                b.op("select", hit, b.operand(src, dt), b.const(0.0, dt)))


@_register(aten.new_zeros, aten.new_ones)
def _new_zeros(b, n, _m):
    value = 1.0 if n.target.overloadpacket is aten.new_ones else 0.0
    return b.full(_shape_list(b, n.args[1]), value, _out(b, n))


def _arg_reduce(opname: str):
    """argmax/argmin: i64 indices, the first on ties, the first NaN if any (PyTorch's rules);
    dim=None is the index into the flattened tensor (keepdim then keeps every dim as 1)."""
    def conv(b, n, _m):
        x = n.args[0]
        xm = tensor_meta(x)
        if xm is None or xm.rank == 0:
            raise Unsupported("%s of a scalar" % opname)
        dim, keep = arg(n, 1, "dim"), bool(arg(n, 2, "keepdim", False))
        xv = b.val(x)
        if dim is not None:
            return b.op(opname, xv, axis=dim % xm.rank, keepdims=keep)
        i = b.op(opname, b.op("reshape", xv, shape=[-1]), axis=0, keepdims=False)
        return b.op("reshape", i, shape=[1] * xm.rank) if keep else i
    return conv


_register(aten.argmax)(_arg_reduce("argmax"))
_register(aten.argmin)(_arg_reduce("argmin"))


# -- layout -----------------------------------------------------------------------------------


def _shape_list(b: Builder, sizes) -> List[Any]:
    return [b.shape_entry(s) for s in sizes]


@_register(aten.view, aten._unsafe_view, aten.reshape, layout=True)
def _view(b, n, _m):
    if len(n.args) == 2 and isinstance(n.args[1], torch.dtype):
        raise Unsupported("view(dtype) reinterprets bits")
    return b.op("reshape", b.val(n.args[0]), shape=_shape_list(b, n.args[1]))


@_register(aten.permute, layout=True)
def _permute(b, n, _m):
    x = b.val(n.args[0])
    r = len(b.dims_of(x))
    return b.op("transpose", x, perm=[int(p) % r for p in n.args[1]])


@_register(aten.t, aten.transpose, layout=True)
def _transpose(b, n, _m):
    x = b.val(n.args[0])
    r = len(b.dims_of(x))
    if r < 2:
        return x
    d0, d1 = (0, 1) if n.target.overloadpacket is aten.t else (n.args[1] % r, n.args[2] % r)
    perm = list(range(r))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return b.op("transpose", x, perm=perm)


@_register(aten.expand, layout=True)
def _expand(b, n, _m):
    x = b.val(n.args[0])
    dims = b.dims_of(x)
    sizes = list(n.args[1])
    lead = len(sizes) - len(dims)
    shape = []
    for i, s in enumerate(sizes):
        if isinstance(s, int) and s == -1:
            shape.append(dims[i - lead])
        else:
            shape.append(b.shape_entry(s))
    return b.op("broadcast_to", x, shape=shape)


@_register(aten.unsqueeze, layout=True)
def _unsqueeze(b, n, _m):
    x = b.val(n.args[0])
    dims = b.dims_of(x)
    d = n.args[1] % (len(dims) + 1)
    return b.op("reshape", x, shape=list(dims[:d]) + [1] + list(dims[d:]))


@_register(aten.squeeze, layout=True)
def _squeeze(b, n, _m):
    x = b.val(n.args[0])
    dims = b.dims_of(x)
    which = arg(n, 1, "dim")
    r = max(len(dims), 1)
    if which is None:
        drop = {i for i, s in enumerate(dims) if s == 1}
    else:
        drop = {d % r for d in ([which] if isinstance(which, int) else which)
                if dims and dims[d % r] == 1}
    return b.op("reshape", x, shape=[s for i, s in enumerate(dims) if i not in drop])


def _static(b: Builder, v: Any, what: str) -> int:
    if isinstance(v, fx.Node):
        m = v.meta.get("stitch")
        if isinstance(m, int) and not isinstance(m, bool):
            return b.scalar(v)
        raise Unsupported("%s is symbolic" % what)
    if type(v).__name__ == "SymInt":
        raise Unsupported("%s is symbolic" % what)
    return v


@_register(aten.slice, layout=True)
def _slice(b, n, _m):
    x = b.val(n.args[0])
    dims = b.dims_of(x)
    r = len(dims)
    d = arg(n, 1, "dim", 0) % r
    start = arg(n, 2, "start", None)
    end = arg(n, 3, "end", None)
    step = _static(b, arg(n, 4, "step", 1), "slice step")
    start = 0 if start is None else _static(b, start, "slice start")
    end = BIG if end is None or (isinstance(end, int) and end >= BIG // 4) else \
        _static(b, end, "slice end")
    if step <= 0:
        raise Unsupported("non-positive step")
    starts, ends, steps = [0] * r, [BIG] * r, [1] * r
    starts[d], ends[d], steps[d] = start, end, step
    return b.op("slice", x, starts=starts, ends=ends, steps=steps)


@_register(aten.slice_backward)
def _slice_backward(b, n, _m):
    """slice_backward(grad, input_sizes, dim, start, end, step): zeros of the input's shape with
    grad where the slice took its elements. With step 1 that is a concat of zeros, grad and zeros
    along dim (a causal LM's shifted logits, logits[..., :-1, :], send their gradient through
    it), which fuses with its consumer (the add of the logits' own gradient) where PyTorch writes
    a padded tensor first. The zeros' lengths must be static: start, and the input's size minus
    end (a negative end, or a static size)."""
    grad = b.operand(n.args[0], _out(b, n))
    out = list(b.out_meta(n).dims)
    r = len(out)
    d = n.args[2] % r
    step = _static(b, arg(n, 5, "step", 1), "slice_backward step")
    if step != 1:
        raise Unsupported("slice_backward with step %d" % step)
    start = _static(b, arg(n, 3, "start", 0), "slice_backward start")
    end = _static(b, arg(n, 4, "end", BIG), "slice_backward end")
    size = out[d]
    if isinstance(size, int):  # Python's slice rules
        start = min(max(start + size if start < 0 else start, 0), size)
        end = min(max(end + size if end < 0 else end, start), size)
        before, after = start, size - end
    elif start >= 0 and end < 0:  # a symbolic size: the zeros after are counted from its end
        before, after = start, -end
    elif start >= 0 and end >= BIG // 4:
        before, after = start, 0
    else:
        raise Unsupported("slice_backward of a symbolic size from its end")
    return _zeros_around(b, grad, out, d, before, after, _out(b, n))


@_register(aten.select_backward)
def _select_backward(b, n, _m):
    """select_backward(grad, input_sizes, dim, index): zeros of the input's shape with grad at
    `index` along dim (ViT's class token, x[:, 0], sends its gradient through it): grad with the
    axis put back, between zeros, as slice_backward. A negative index needs a static size."""
    dt = _out(b, n)
    grad = b.operand(n.args[0], dt)
    out = list(b.out_meta(n).dims)
    d = n.args[2] % len(out)
    index = _static(b, n.args[3], "select_backward index")
    size = out[d]
    if index < 0:
        if not isinstance(size, int):
            raise Unsupported("select_backward from the end of a symbolic size")
        index += size
    if isinstance(size, int):
        after = size - index - 1
    else:
        raise Unsupported("select_backward of a symbolic size")
    if index < 0 or after < 0:
        raise Unsupported("select_backward index out of range")
    grad = b.op("reshape", grad, shape=out[:d] + [1] + out[d + 1:])
    return _zeros_around(b, grad, out, d, index, after, dt)


def _zeros_around(b: Builder, value: int, out: List[Any], d: int, before: int, after: int,
                  dt: torch.dtype) -> int:
    """`value` with `before` zeros ahead of it and `after` behind it along axis d of the shape
    `out` (the other axes `out`'s): a concat."""
    parts = []
    for length, v in ((before, None), (None, value), (after, None)):
        if v is not None:
            parts.append(v)
        elif length > 0:
            parts.append(b.full(out[:d] + [length] + out[d + 1:], 0.0, dt))
    return parts[0] if len(parts) == 1 else b.op("concat", *parts, axis=d)


@_register(aten.select, layout=True)
def _select(b, n, _m):
    x = b.val(n.args[0])
    dims = b.dims_of(x)
    r = len(dims)
    d = n.args[1] % r
    i = _static(b, n.args[2], "select index")
    starts, ends = [0] * r, [BIG] * r
    starts[d], ends[d] = i, (i + 1 if i != -1 else BIG)
    v = b.op("slice", x, starts=starts, ends=ends)
    return b.op("reshape", v, shape=[s for k, s in enumerate(dims) if k != d])


def _split_at(b: Builder, x: int, sizes: List[int], d: int) -> List[int]:
    r = len(b.dims_of(x))
    out, start = [], 0
    for s in sizes:
        starts, ends = [0] * r, [BIG] * r
        starts[d], ends[d] = start, start + s
        out.append(b.op("slice", x, starts=starts, ends=ends))
        start += s
    return out


@_register(aten.split, aten.split_with_sizes, layout=True)
def _split(b, n, _m):
    xm = tensor_meta(n.args[0])
    d = arg(n, 2, "dim", 0) % xm.rank
    size = xm.static_dim(d)
    ss = n.args[1]
    if isinstance(ss, int):
        sizes = [min(ss, size - i) for i in range(0, size, ss)] if ss > 0 else []
    else:
        sizes = [_static(b, s, "split size") for s in ss]
    return _split_at(b, b.val(n.args[0]), sizes, d)


@_register(aten.cat)
def _cat(b, n, _m):
    tensors = [t for t in n.args[0]]
    dt = _out(b, n)
    ranks = [tensor_meta(t).rank for t in tensors]
    r = max(ranks)
    # PyTorch skips 1-D empty tensors in cat (legacy behaviour); Stitch would reject them.
    vals = [b.operand(t, dt) for t, k in zip(tensors, ranks)
            if not (k == 1 and r > 1 and tensor_meta(t).dims == (0,))]
    d = arg(n, 1, "dim", 0) % r
    return vals[0] if len(vals) == 1 else b.op("concat", *vals, axis=d)


@_register(operator.getitem)
def _getitem(b: Builder, n: fx.Node, _m):
    x, i = n.args
    v = b.env.get(x)
    if not isinstance(v, list):
        raise Unsupported("indexing a tensor")
    return v[i]
