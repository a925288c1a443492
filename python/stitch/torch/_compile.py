"""``torch.compile(model, backend="stitch")``: the PyTorch 2.x path.

Dynamo captures graphs from arbitrary Python (graph breaks where it must); this backend hands each
one to AOTAutograd, which traces it to aten ops, applies the decompositions below and splits
training graphs into a forward and a backward graph with ``min_cut_rematerialization_partition``
(as Inductor does): cheap elementwise values are recomputed in the backward instead of being saved
by the forward, which is what a fusing compiler wants, since the recomputation fuses into the
backward's kernels and the saved tensor would cost a write and a read of memory.

Each aten graph is partitioned (_partition, with the converters of _aten_ops) into Stitch pieces
and PyTorch ops; nothing runs at compile time: types come from the FakeTensors in
``node.meta["val"]``.

Shapes. A size Dynamo made symbolic (``dynamic=True``, ``mark_dynamic``, or automatic dynamic
after a recompile) is a sympy expression; a plain symbol (``s0``) becomes the Stitch symbol of that
name, any other expression (``s0*s1``, ``s1 - 1``) a Stitch symbol of its own (``e0``, ...) bound
from the tensors like any symbol. Stitch cannot relate ``e0`` to ``s0`` and ``s1``, so an op that
would need it (a reshape between ``[s0, s1, 64]`` and ``[e0, 64]``) is refused by the type check
and stays in PyTorch, where views are free. Sizes PyTorch specializes (0 and 1) arrive as ints.
Programs are shape-polymorphic: a new size binds new values and reuses the program; nothing runs
eagerly because a size changed.

After partitioning, the copies left to PyTorch that only feed matmul operands are made in the
order that reads their source in rows (_matmul_copies), and the matmuls write into pooled host
outputs (_library_outputs_from_pool).

Settings: ``torch.compile(..., options={...})`` (_options: each option mirrors a STITCH_*
variable, its default) is read and checked when Dynamo enters the backend, with the environment,
and the engines of the inputs' devices are made then, which checks the engine options' values;
each aten graph makes its pieces' engines when it is compiled (a backend that cannot run their
device is a ValueError then) and prints its report if the report option asks. All of these come
to the user as ValueError, not wrapped by Dynamo (_dynamo_passes_through).

Decompositions: PyTorch's own for the backward ops of norms and activations, and the forward of
batch and group norm, so they arrive as the elementwise ops and reductions Stitch maps (the report
still names them through ``meta["original_aten"]``). Softmax, log-softmax, layer norm and their
backward (for softmax) are converted directly.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.fx as fx

import stitch

from ._aten_ops import TABLE
from ._common import TensorMeta, dense_order
from ._matmul_copies import copy_matmul_operands_in_rows
from ._options import CompileOptions
from ._partition import Dialect, Partitioner
from ._random import rewrite_random
from ._report import CompileReport, GraphReport, new_compile_report

log = logging.getLogger("stitch.torch")
aten = torch.ops.aten

_DECOMPOSED = [
    "native_layer_norm_backward", "native_group_norm", "native_group_norm_backward",
    "native_batch_norm", "native_batch_norm_backward", "_native_batch_norm_legit",
    "_native_batch_norm_legit_functional", "_native_batch_norm_legit_no_training",
    "gelu_backward", "silu_backward", "native_dropout_backward", "leaky_relu_backward",
    "hardtanh_backward", "elu_backward", "mse_loss", "mse_loss_backward", "softplus_backward",
    "std_mean",
]


def decompositions() -> Dict[Any, Any]:
    from torch._decomp import get_decompositions
    ops = [getattr(aten, name) for name in _DECOMPOSED if hasattr(aten, name)]
    return get_decompositions(ops)


def _packet_name(target: Any) -> str:
    pk = getattr(target, "overloadpacket", None)
    if pk is not None:
        return str(pk)
    return getattr(target, "__name__", str(target))


class AtenDialect(Dialect):
    table = TABLE
    permutes = frozenset({aten.t, aten.transpose, aten.permute})

    def key(self, gm, n):
        if n.op != "call_function":
            return None, None
        return getattr(n.target, "overloadpacket", n.target), None

    def op_name(self, gm, n):
        return _packet_name(n.target)

    def origin(self, gm, n):
        o = n.meta.get("original_aten")
        return _packet_name(o) if o is not None else self.op_name(gm, n)


class _Symbols:
    """Names Stitch symbols after Dynamo's sympy sizes (see the module note)."""

    def __init__(self, shape_env):
        self.shape_env = shape_env
        self.names: Dict[Any, str] = {}
        self.sizes: Dict[str, int] = {}
        self.fresh = itertools.count()

    def dim(self, d: Any) -> Any:
        if isinstance(d, int):
            return d
        expr = d.node.expr
        if expr.is_Integer:
            return int(expr)
        name = self.names.get(expr)
        if name is None:
            name = self._equal_name(expr)
        if name is None:
            name = str(expr) if expr.is_Symbol and str(expr).isidentifier() else \
                "e%d" % next(self.fresh)
            self.names[expr] = name
            hint = self.hint(d)
            if hint >= 0:  # an unbacked size has no hint: the report then counts no kernels
                self.sizes[name] = hint
        return name

    def _equal_name(self, expr: Any) -> Any:
        """The name of an expression already named that the shape environment proves equal to
        expr (``s72*(s56 + s70 - 1)`` and ``s72*(s70 - 1)`` in Llama's loss, where the guards
        pin s56): one Stitch symbol for both, so the logits and the labels of nll_loss agree."""
        if self.shape_env is None:
            return None
        import sympy
        for known, name in self.names.items():
            try:
                if self.shape_env._maybe_evaluate_static(sympy.Eq(expr, known)) is sympy.true:
                    return name
            except Exception:  # a private API: without it, distinct names (a fallback at worst)
                return None
        return None

    def hint(self, d: Any) -> int:
        if isinstance(d, int):
            return d
        try:
            return int(d.node.hint) if d.node.hint is not None else \
                int(self.shape_env.size_hint(d.node.expr))
        except Exception:
            return -1  # no hint (unbacked): dense_order then finds no layout to honour

    def meta(self, v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            order = None
            if v.layout == torch.strided:
                order = dense_order([self.hint(s) for s in v.shape],
                                    [self.hint(s) for s in v.stride()])
            return TensorMeta([self.dim(s) for s in v.shape], v.dtype, v.device, order=order)
        if isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v):
            return [self.meta(x) if isinstance(x, torch.Tensor) else None for x in v]
        if isinstance(v, torch.SymInt):
            return self.dim(v)
        if isinstance(v, (bool, int, float)):
            return v
        return None


def _shape_env(gm: fx.GraphModule):
    for n in gm.graph.nodes:
        v = n.meta.get("val")
        fm = getattr(v, "fake_mode", None)
        if fm is not None and fm.shape_env is not None:
            return fm.shape_env
        if isinstance(v, torch.SymInt):
            return v.node.shape_env
    return None


def compile_graph(gm: fx.GraphModule, report: GraphReport,
                  options: Optional[CompileOptions] = None, title: str = "") -> fx.GraphModule:
    """Partitions one aten graph into Stitch pieces and PyTorch ops, with `options` (default:
    the STITCH_* variables'), and prints its report under `title` if they ask (its wall time
    goes into the report's build_s)."""
    options = options or CompileOptions.from_environment()
    t0 = time.perf_counter()
    try:
        new_gm = _compile_graph(gm, report, options)
    finally:
        report.add_build_seconds(time.perf_counter() - t0)
    options.print_report(title or "Stitch report", report)
    return new_gm


def _compile_graph(gm: fx.GraphModule, report: GraphReport,
                   options: CompileOptions) -> fx.GraphModule:
    if report.kind == "inference":
        rewrite_random(gm, recompute=False)  # a joint graph's were rewritten before partition()
    syms = _Symbols(_shape_env(gm))
    for n in gm.graph.nodes:
        n.meta["stitch"] = syms.meta(n.meta.get("val"))
    if report.kind == "backward":
        # What the forward saved for this graph (the min-cut partition decides it): its tensor
        # inputs other than the incoming gradients.
        report.saved_tensors = sum(
            1 for n in gm.graph.nodes if n.op == "placeholder"
            and isinstance(n.meta.get("stitch"), TensorMeta) and not n.name.startswith("tangents"))
    p = Partitioner(gm, AtenDialect(), report, param_meta=None, sizes=syms.sizes,
                    name="stitch_%s" % report.kind, options=options)
    new_gm = p.run()
    try:
        # The pieces' engines, now: a backend that cannot run their device, or a bad engine
        # option, fails the compile rather than every piece's first run.
        for engine in options.prepare(p.devices).values():
            report.backend = engine.backend
    except ValueError as e:
        raise _dynamo_passes_through(e) from None
    copy_matmul_operands_in_rows(new_gm)
    _library_outputs_from_pool(new_gm)
    if log.isEnabledFor(logging.INFO):
        log.info("stitch: %s", "\n".join(report.lines()))
    return new_gm


# The matmuls whose outputs come from the pool: their .out overloads, and the output's shape from
# the last two tensor operands (addmm's bias comes first).
_INTO_POOL = {
    aten.mm.default: (aten.mm.out, lambda a, b: (a.shape[0], b.shape[1])),
    aten.addmm.default: (aten.addmm.out, lambda a, b: (a.shape[0], b.shape[1])),
    aten.bmm.default: (aten.bmm.out, lambda a, b: (a.shape[0], a.shape[1], b.shape[2])),
}


def _into_pool(op: Any, allocate: Any, dtype: Any, shape: Optional[Tuple[int, ...]]):
    """`op` writing into an output of `dtype` from `allocate` (stitch.host_allocator): of `shape`
    where the graph fixes it, else of the shape its operands give at each call."""
    out, shape_of = _INTO_POOL[op]
    if shape is not None:
        def run(*args, **kwargs):
            return out(*args, **kwargs, out=allocate(shape, dtype))
    else:
        def run(*args, **kwargs):
            return out(*args, **kwargs, out=allocate(shape_of(args[-2], args[-1]), dtype))
    run.__name__ = "%s_into_pool" % op.overloadpacket.__name__
    return run


def _library_outputs_from_pool(gm: fx.GraphModule) -> None:
    """The matmuls of a host graph write into outputs from the package's pool of host mappings
    (stitch.host_allocator, the environment read once per graph), as Stitch's pieces do: a fresh
    output of a megabyte or more is a block that glibc maps, or takes from a heap it trimmed, and
    faults page by page on every call; Inductor's graphs reuse buffers instead. Llama's inference
    step (f32, one thread) faulted ~11,000 pages against Inductor's ~8,500, 1.5 us each; its
    logits alone are 8,192 pages. Decided per node from the graph's types, which Dynamo's guards
    fix: a matmul whose operands are CPU tensors of one dtype (as PyTorch's own result would be),
    whose result may reach the pool's size (a static one below it keeps PyTorch's call, with no
    wrapper's Python on its path)."""
    floor = stitch._POOLED_OUTPUT_BYTES
    chosen = []
    for n in gm.graph.nodes:
        val = n.meta.get("val") if n.op == "call_function" and n.target in _INTO_POOL else None
        if not isinstance(val, torch.Tensor) or val.device.type != "cpu":
            continue
        operands = [a.meta.get("val") for a in n.args if isinstance(a, fx.Node)]
        if not all(isinstance(v, torch.Tensor) and v.device.type == "cpu" and v.dtype == val.dtype
                   for v in operands):
            continue
        shape = tuple(val.shape) if all(isinstance(d, int) for d in val.shape) else None
        if shape is not None and math.prod(shape) * val.element_size() < floor:
            continue
        chosen.append((n, val.dtype, shape))
    if not chosen or stitch._host_pool() is None:
        return
    allocate = stitch.host_allocator()
    for n, dtype, shape in chosen:
        n.target = _into_pool(n.target, allocate, dtype, shape)
    gm.recompile()


def partition(joint: fx.GraphModule, joint_inputs, **kwargs):
    """AOTAutograd's split of the joint graph: ``min_cut_rematerialization_partition`` after
    dropping the joint graph's ``detach`` nodes (autograd's marks on values the backward reads;
    in a graph that already holds the backward they change no value), which the min-cut would
    otherwise not recompute through, saving the activations after every tanh or sigmoid; and
    after rewriting dropout into a saved seed and uniform numbers the backward recomputes
    (_random)."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    rewrite_random(joint, recompute=True)
    for n in list(joint.graph.nodes):
        if n.op == "call_function" and n.target in (aten.detach.default, aten.alias.default) \
                and isinstance(n.args[0], fx.Node):
            n.replace_all_uses_with(n.args[0])
            joint.graph.erase_node(n)
    joint.recompile()
    return min_cut_rematerialization_partition(joint, joint_inputs, **kwargs)


_graph_ids = itertools.count()


def _dynamo_passes_through(error: ValueError) -> Exception:
    """`error` as an exception Dynamo re-raises unchanged from a backend. Dynamo wraps what a
    backend raises in BackendCompilerFailed (a RuntimeError) except its ShortenTraceback family,
    which it re-raises as is; a bad STITCH_* value or torch.compile option is the user's
    configuration, so the user gets the ValueError the README promises, through a subclass that
    is also Dynamo's. Where Dynamo has no such class (or it changed shape), the plain ValueError,
    wrapped by Dynamo."""
    try:
        from torch._dynamo.exc import ShortenTraceback

        class InvalidConfiguration(ValueError, ShortenTraceback):
            def __init__(self, message: str):
                ShortenTraceback.__init__(self, message, first_useful_frame=None)

        return InvalidConfiguration(str(error))
    except (ImportError, TypeError):
        return error


def backend(gm: fx.GraphModule, example_inputs: List[Any], *,
            options: Optional[Dict[str, Any]] = None, mode: Optional[str] = None,
            name: Optional[str] = None):
    """The "stitch" backend of torch.compile: ``torch.compile(model, backend="stitch",
    options={...})`` (_options says which; ``mode`` other than the default is refused: Stitch has
    none). ``name``, torch.compile's name of the compiled region, is accepted and not used."""
    try:
        # Every STITCH_* variable, before anything reads one: a bad value read later (by an
        # engine, at a piece's first call) would only make the piece run eagerly. Then the
        # options, and the engines of the inputs' devices, which check the engine options.
        stitch.check_environment()
        settings = CompileOptions.parse(options, mode)
        if settings.disable:
            settings.check_engine_options()
        else:
            settings.prepare((t.device.type for t in example_inputs
                              if isinstance(t, torch.Tensor)), runnable_only=True)
    except ValueError as e:
        raise _dynamo_passes_through(e) from None
    if settings.disable:
        return gm.forward
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    report: CompileReport = new_compile_report("graph_%d" % next(_graph_ids))

    def compiler(kind: str):
        def compile_fn(g: fx.GraphModule, _example_inputs):
            # Boxed: AOTAutograd hands over its argument list, which the graph may free early.
            return make_boxed_func(compile_graph(g, report.new_graph(kind), settings,
                                                 "Stitch report for %s" % report.name))
        return compile_fn

    aot = aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                       inference_compiler=compiler("inference"),
                       partition_fn=partition,
                       decompositions=decompositions(), keep_inference_input_mutations=True)
    return aot(gm, example_inputs)


def register() -> None:
    """Registers the "stitch" backend with Dynamo for a process that imports stitch.torch without
    the package's entry point (a source tree on PYTHONPATH). With the entry point installed,
    Dynamo lists "stitch" already and loads it from stitch/_dynamo_backend.py when first asked.
    On a PyTorch outside the supported range nothing is registered (stitch.torch.optimize still
    works): the reason is logged, and the entry point raises it."""
    if int(torch.__version__.split(".")[0]) < 2:
        return  # no torch.compile: PyTorch 1.x has only stitch.torch.optimize
    from stitch import _torch_support
    try:
        _torch_support.require(torch.__version__)
    except _torch_support.UnsupportedTorch as e:
        log.warning("%s", e)
        return
    try:
        import torch._dynamo as dynamo
        if "stitch" not in dynamo.list_backends(exclude_tags=()):
            dynamo.register_backend(name="stitch")(backend)
    except Exception as e:  # registration is a convenience; optimize() works without it
        log.warning("stitch: could not register the torch.compile backend: %s", e)
