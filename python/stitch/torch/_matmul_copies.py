"""Copies made for a matmul operand are made in the order that reads their source in rows.

``torch.matmul`` on tensors of three or more dims folds the batch dims with a reshape, and where
the operand's layout does not allow a view, AOTAutograd's graph copies it first:
``clone(x, memory_format=contiguous)`` then ``_unsafe_view`` to ``[batch, m, n]`` then ``bmm``.
Attention written as ``q @ k.transpose(-1, -2)`` (T5, and any model's eager attention) gives such
an x whose last dim is strided in memory and whose second-to-last is contiguous: the copy is a
transpose, which reads each source line for one element (0.38 ms for T5's [8, 4, 64, 128] keys
in its step, against 0.12 ms for the same bytes copied in runs, its queries and values). A
matmul takes either order of an operand's last two dims at the same speed (BLAS's transposed
flag), so the copy can be made of ``x.transpose(-1, -2)``, which is contiguous along its rows,
and the matmul handed its transposed view: same values, one fewer transpose walk. Measured in
isolation (one thread, bench note in BENCHMARKS.md): clone + bmm of T5's keys 0.88 -> 0.67 ms.

The rewrite applies where the copy's only users are views that keep its last two dims (folding
batch dims, which the transposed layout still allows) and whose only users are matmul operands
(``bmm``, ``mm``): nothing else sees the layout. A copy the graph returns or saves for the
backward keeps PyTorch's row-major result. Layouts are read from the FakeTensors in
``meta["val"]``; a size that is not a plain int keeps the graph as it is.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.fx as fx

aten = torch.ops.aten

_VIEWS = (aten._unsafe_view.default, aten.view.default, aten.reshape.default)
_MATMULS = (aten.bmm.default, aten.mm.default)


def _static(shape: Any) -> Optional[tuple]:
    return tuple(shape) if all(isinstance(d, int) for d in shape) else None


def _copies_a_transpose(clone: fx.Node) -> bool:
    """The clone reads a source whose last dim is strided and whose second-to-last is contiguous
    (both longer than 1)."""
    # AOTAutograd's matmul copies ask for contiguous; a plain clone preserves the layout.
    if clone.kwargs.get("memory_format", torch.preserve_format) is not torch.contiguous_format:
        return False
    src = clone.args[0]
    val = src.meta.get("val") if isinstance(src, fx.Node) else None
    if not isinstance(val, torch.Tensor) or val.dim() < 2 or val.layout != torch.strided:
        return False
    shape, stride = _static(val.shape), _static(val.stride())
    if shape is None or stride is None or shape[-1] < 2 or shape[-2] < 2:
        return False
    return stride[-2] == 1 and stride[-1] != 1


def _feeds_matmuls_only(clone: fx.Node) -> bool:
    cval = clone.meta.get("val")
    if not isinstance(cval, torch.Tensor) or _static(cval.shape) is None or not clone.users:
        return False
    for view in clone.users:
        if view.op != "call_function" or view.target not in _VIEWS or view.args[0] is not clone:
            return False
        vval = view.meta.get("val")
        vshape = _static(vval.shape) if isinstance(vval, torch.Tensor) else None
        if vshape is None or len(vshape) < 2 or vshape[-2:] != tuple(cval.shape[-2:]):
            return False
        if not view.users or any(u.op != "call_function" or u.target not in _MATMULS or
                                 view in u.kwargs.values() for u in view.users):
            return False
    return True


def copy_matmul_operands_in_rows(gm: fx.GraphModule) -> int:
    """Rewrites every such copy (module note); returns how many."""
    g = gm.graph
    done = 0
    for clone in list(g.nodes):
        if clone.op != "call_function" or clone.target is not aten.clone.default:
            continue
        if not _copies_a_transpose(clone) or not _feeds_matmuls_only(clone):
            continue
        src = clone.args[0]
        with g.inserting_before(clone):
            flipped = g.call_function(aten.transpose.int, (src, -2, -1))
            rows = g.call_function(aten.clone.default, (flipped,),
                                   {"memory_format": torch.contiguous_format})
            back = g.call_function(aten.transpose.int, (rows, -2, -1))
        try:  # the new nodes' FakeTensors, for passes that read them after this one
            fv = src.meta["val"].transpose(-2, -1)
            rv = fv.clone(memory_format=torch.contiguous_format)
            flipped.meta["val"], rows.meta["val"], back.meta["val"] = \
                fv, rv, rv.transpose(-2, -1)
        except Exception:  # noqa: BLE001 - metadata only: the graph runs without it
            pass
        clone.replace_all_uses_with(back)
        g.erase_node(clone)
        done += 1
    if done:
        gm.recompile()
    return done
