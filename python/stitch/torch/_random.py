"""Random numbers in torch.compile graphs: dropout (and ``rand``/``rand_like``/``bernoulli``) as
Stitch's counter-based ``random_uniform``, whose backward regenerates the mask instead of saving
it.

Two custom ops stand in for PyTorch's random ops in the joint graph (rewrite_random, before the
min-cut partition):

* ``stitch::philox_seed(device, site)``: a fresh int64[2] (seed, offset) drawn from PyTorch's
  default generator of ``device`` (``random_``: successive calls draw fresh numbers and
  ``torch.manual_seed`` makes runs reproducible). The only nondeterministic op: the min-cut may
  not recompute it, so the forward saves its 16 bytes. ``site`` numbers the draws of one graph,
  so that common-subexpression elimination cannot merge two of them into one.
* ``stitch::philox_uniform(seed, size, dtype)``: deterministic uniform numbers in [0, 1), the
  spec of Stitch's ``random_uniform`` (Philox4x32-10, key = the seed's two 32-bit halves,
  counter = (flat index >> 2, offset), word ``index & 3``, the top m bits times 2^-m). Marked
  ``MUST_RECOMPUTE``, so the backward computes it again from the saved seed, inside its Stitch
  piece, where the converter makes it ``random_uniform``; its eager implementation (a piece that
  falls back, a graph Stitch does not take) is Philox written with int64 tensor ops and gives the
  same bits.

The numbers are not PyTorch's own dropout stream (PyTorch's CPU generator is a Mersenne twister,
its CUDA kernels use Philox with another counter layout): compiled and eager dropout agree in
distribution, not bit for bit.

``native_dropout(x, p, train)`` with 0 < p < 1 becomes ``keep = philox_uniform(...) >= p``,
``x * keep * 1/(1-p)`` (keep probability 1 - p, as PyTorch); p = 1 and eval mode stay as they
were. ``rand``/``rand_like`` become philox_uniform, ``bernoulli(p)`` ``philox_uniform < p``.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any, List, Sequence

import torch
import torch.fx as fx

aten = torch.ops.aten
prims = torch.ops.prims

# Philox4x32 constants (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK32 = 0xFFFFFFFF
# Mantissa bits per dtype: every value (u >> (32 - m)) * 2^-m is exact in it and below 1.
_BITS = {torch.float32: 24, torch.float16: 11, torch.bfloat16: 8, torch.float64: 32}


def _mulhilo(m: int, c: torch.Tensor):
    """(hi, lo) 32-bit halves of the 64-bit product of the constant m and c (int64 tensors
    holding unsigned 32-bit values), from 16-bit partial products so no int64 ever overflows."""
    mh, ml = m >> 16, m & 0xFFFF
    ch, cl = c >> 16, c & 0xFFFF
    mid = mh * cl + ml * ch                      # < 2^33
    low = ml * cl + ((mid & 0xFFFF) << 16)       # < 2^33
    hi = mh * ch + (mid >> 16) + (low >> 32)     # the product is < 2^64: hi < 2^32
    return hi, low & _MASK32


def philox4x32_10(counter: Sequence[torch.Tensor], key: Sequence[Any]) -> List[torch.Tensor]:
    """Philox4x32-10 on int64 tensors holding 32-bit words (broadcasting): four output words."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for r in range(10):
        if r:
            k0 = (k0 + _W0) & _MASK32
            k1 = (k1 + _W1) & _MASK32
        hi0, lo0 = _mulhilo(_M0, c0)
        hi1, lo1 = _mulhilo(_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return [c0, c1, c2, c3]


def uniform(seed: torch.Tensor, size: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """Stitch's ``random_uniform(seed[0], seed[1], shape=size, dtype=dtype)``, bit for bit."""
    if dtype not in _BITS:
        raise ValueError("random_uniform: dtype %s (f16, bf16, f32 or f64)" % dtype)
    numel = 1
    for s in size:
        numel *= int(s)
    dev = seed.device
    s = seed.to(torch.int64)
    key = (s[0] & _MASK32, (s[0] >> 32) & _MASK32)
    block = torch.arange((numel + 3) // 4, dtype=torch.int64, device=dev)
    off = s[1]
    words = philox4x32_10(
        (block & _MASK32, (block >> 32) & _MASK32,
         (off & _MASK32).expand_as(block), ((off >> 32) & _MASK32).expand_as(block)), key)
    u = torch.stack(words, dim=1).reshape(-1)[:numel]
    m = _BITS[dtype]
    # (u >> (32 - m)) < 2^m is exact in f64; scaling by a power of two keeps it exact.
    v = (u >> (32 - m)).to(torch.float64) * (2.0 ** -m)
    return v.to(dtype).reshape(list(size))


# -- the custom ops ----------------------------------------------------------------------------

def _register_ops():
    lib = torch.library.Library("stitch", "FRAGMENT")
    lib.define("philox_seed(Device device, int site) -> Tensor",
               tags=(torch.Tag.nondeterministic_seeded,))
    lib.define("philox_uniform(Tensor seed, SymInt[] size, ScalarType dtype) -> Tensor")

    @torch.library.impl(lib, "philox_seed", "CompositeExplicitAutograd")
    def _philox_seed(device: torch.device, site: int) -> torch.Tensor:
        # random_() of an int64 tensor: uniform in [0, 2^63), from the device's default
        # generator.
        return torch.empty(2, dtype=torch.int64, device=device).random_()

    @torch.library.register_fake("stitch::philox_seed", lib=lib)
    def _philox_seed_fake(device: torch.device, site: int) -> torch.Tensor:
        return torch.empty(2, dtype=torch.int64, device=device)

    @torch.library.impl(lib, "philox_uniform", "CompositeExplicitAutograd")
    def _philox_uniform(seed: torch.Tensor, size: Sequence[int],
                        dtype: torch.dtype) -> torch.Tensor:
        return uniform(seed, size, dtype)

    @torch.library.register_fake("stitch::philox_uniform", lib=lib)
    def _philox_uniform_fake(seed, size, dtype):
        return seed.new_empty(list(size), dtype=dtype)

    return lib


# The ops exist where torch.compile does (register_fake: PyTorch 2.4+); PyTorch 1.13's hook
# (optimize, inference only) has no use for them.
_lib = _register_ops() if hasattr(torch.library, "register_fake") else None
philox_seed = torch.ops.stitch.philox_seed.default if _lib is not None else None
philox_uniform = torch.ops.stitch.philox_uniform.default if _lib is not None else None


# -- the rewrite -------------------------------------------------------------------------------


def _fake_mode(gm: fx.GraphModule):
    for n in gm.graph.nodes:
        fm = getattr(n.meta.get("val"), "fake_mode", None)
        if fm is not None:
            return fm
    return None


def _size_args(g: fx.Graph, x: fx.Node) -> List[Any]:
    """x's sizes as arguments: ints, or sym_size nodes for symbolic ones."""
    out = []
    for i, s in enumerate(x.meta["val"].shape):
        if isinstance(s, int) or s.node.expr.is_Integer:
            out.append(int(s))
        else:
            d = g.call_function(aten.sym_size.int, (x, i))
            d.meta["val"] = s
            out.append(d)
    return out


def _call(g: fx.Graph, fm, target, args, like: fx.Node) -> fx.Node:
    node = g.call_function(target, tuple(args))
    node.meta.update({k: v for k, v in like.meta.items() if k in ("stack_trace", "seq_nr")})
    node.meta["original_aten"] = like.target  # the report names the op it came from
    vals = fx.node.map_arg(tuple(args), lambda a: a.meta["val"])
    with fm:
        node.meta["val"] = target(*vals)
    return node


def _uniform_source(n: fx.Node):
    """(shape node or size list, dtype of the numbers) of a random op this module rewrites, or
    None to leave it: training dropout with 0 < p < 1, rand, rand_like, bernoulli (the default
    generator only: an explicit generator=, or a dtype Stitch has no random_uniform for, stays)."""
    val = n.meta.get("val")
    t = n.target
    if t is aten.native_dropout.default:
        x, p = n.args[0], float(n.args[1])
        train = n.args[2] if len(n.args) > 2 else n.kwargs.get("train")
        xv = x.meta.get("val") if isinstance(x, fx.Node) else None
        if train is False or not 0.0 < p < 1.0 or not isinstance(xv, torch.Tensor) or \
                not xv.is_floating_point() or \
                any(u.target is not operator.getitem for u in n.users):
            return None
        return x, torch.float32
    if not isinstance(val, torch.Tensor) or n.kwargs.get("generator") is not None:
        return None
    if t is aten.rand_like.default or t is aten.rand.default:
        if val.dtype not in _BITS:
            return None
        return (n.args[0] if t is aten.rand_like.default else list(n.args[0])), val.dtype
    if t is aten.bernoulli.default or t is aten.bernoulli.p:
        src = n.args[0].meta.get("val")
        if not isinstance(src, torch.Tensor) or not src.is_floating_point():
            return None
        return n.args[0], torch.float64 if src.dtype == torch.float64 else torch.float32
    return None


def rewrite_random(gm: fx.GraphModule, recompute: bool) -> int:
    """Rewrites the random ops of gm (see the module note and _uniform_source) in place; returns
    how many. ``recompute``: mark the uniform numbers MUST_RECOMPUTE (a joint graph, before the
    min-cut), so the backward computes them again from the saved seed."""
    fm = _fake_mode(gm)
    if fm is None or _lib is None:
        return 0
    from torch.utils.checkpoint import CheckpointPolicy
    g = gm.graph
    sites = itertools.count()
    done = 0
    for n in list(g.nodes):
        if n.op != "call_function":
            continue
        source = _uniform_source(n)
        if source is None:
            continue
        shape, dtype = source
        device = (n.args[0].meta["val"] if n.target is aten.native_dropout.default
                  else n.meta["val"]).device
        with g.inserting_before(n):
            seed = _call(g, fm, philox_seed, [device, next(sites)], n)
            size = _size_args(g, shape) if isinstance(shape, fx.Node) else shape
            u = _call(g, fm, philox_uniform, [seed, size, dtype], n)
            if recompute:
                u.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
            if n.target is aten.native_dropout.default:
                x, p = n.args[0], float(n.args[1])
                keep = _call(g, fm, aten.ge.Scalar, [u, p], n)  # keep probability 1 - p
                kept = _call(g, fm, aten.mul.Tensor, [x, keep], n)
                out = _call(g, fm, aten.mul.Tensor, [kept, 1.0 / (1.0 - p)], n)
                for user in list(n.users):
                    user.replace_all_uses_with(out if user.args[1] == 0 else keep)
                    g.erase_node(user)
            else:
                out = u
                if n.target is aten.bernoulli.p:
                    out = _call(g, fm, aten.lt.Scalar, [u, float(n.args[1])], n)
                elif n.target is aten.bernoulli.default:
                    out = _call(g, fm, aten.lt.Tensor, [u, n.args[0]], n)  # 1 with probability p
                if out is not u:
                    out = _call(g, fm, prims.convert_element_type.default,
                                [out, n.meta["val"].dtype], n)
                n.replace_all_uses_with(out)
        g.erase_node(n)
        done += 1
    if done:
        gm.recompile()
    return done
