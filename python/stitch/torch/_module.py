"""The PyTorch 1.13 path: ``optimize(module_or_fn)`` (torch.fx.symbolic_trace, no Dynamo).

It traces once and waits for the first call. That call runs the traced graph through an
``fx.Interpreter`` that records every node's result (shape, dtype, device of tensors; the value of
ints and floats) and returns its result, so the module runs once; the graph is then partitioned
(_partition) with the torch-level converters (_fx_ops) and later calls run the rewritten graph.

Shapes. Which dims are symbolic is decided from the first call: the sizes of dim 0 (the batch;
``dynamic_dims`` picks others, e.g. ``(0, 1)``) of the inputs become symbols, and every tensor dim
of that size in a piece is written with the symbol (sizes 0 and 1 never are: they broadcast). This
is a guess by value, so it is checked: Stitch binds each symbol from the tensors at every run and
fails on an inconsistent binding, and ints computed in Python that were folded into a piece are
compared with the binding; any failure runs the piece eagerly for that call. Correctness never
rests on the guess; only speed does. (torch.compile, see _compile, gets symbolic sizes from
Dynamo and needs no guess.)

The result is an ``nn.Module`` (for a module) that shares the original's parameters, buffers and
children (the same dicts): it can be assigned into a parent, saved and loaded with the original's
``state_dict`` keys, moved with ``to`` and deep-copied, and it reads parameters at every call (the
rewritten graph runs with the StitchModule as ``self``, so ``self.fc.weight`` is looked up live).
A piece runs eagerly when autograd needs its graph (Stitch programs have no backward here; that is
what torch.compile's path is for). A change of ``training`` runs the original module.

Attributes the graph reads. Every ``get_attr`` and ``call_module`` target of the traced graph is
read through the StitchModule, at the first call (the recording run) as at every later one, so
that each call sees the module as it is then. A target resolves, by its first name, to
  * the shared parameters, buffers and children: live, as above (a buffer replaced or registered
    after tracing included);
  * a tensor constant the trace made: a tensor the forward computes from no input (a causal mask
    ``torch.ones(n, n).tril()`` from sizes in attributes) is evaluated once by ``symbolic_trace``,
    which stores it on the traced module as ``_tensor_constant0`` and, as a side effect, on the
    original module too. ``optimize`` takes those attributes off the original (leaving it as it
    was) and keeps them on the StitchModule, where ``to``/``cuda``/``half`` move and cast them as
    they do buffers and a deep copy copies them; they are not state (no ``state_dict`` key), as in
    fx's own GraphModule;
  * any other attribute of the original (a tensor kept as a plain attribute, not a buffer): read
    from the original at every call.
"""

from __future__ import annotations

import copy
import functools
import inspect
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
import torch.fx as fx
import torch.nn as nn

import stitch as _stitch

from . import _fx_ops
from ._common import TensorMeta, dense_order, disabled
from ._options import CompileOptions
from ._partition import Dialect, Partitioner
from ._piece import running_root
from ._report import GraphReport

class FxDialect(Dialect):
    table = _fx_ops.TABLE
    permutes = frozenset({_fx_ops._m("permute"), torch.permute, _fx_ops._m("transpose"),
                          torch.transpose})
    check_grad = True

    def key(self, gm, n):
        if n.op == "call_function":
            return n.target, None
        if n.op == "call_method":
            return _fx_ops._m(n.target), None
        if n.op == "call_module":
            mod = gm.get_submodule(n.target)
            return type(mod), mod
        return None, None

    def op_name(self, gm, n):
        if n.op == "call_module":
            return "nn." + type(gm.get_submodule(n.target)).__name__
        if n.op == "call_method":
            return "Tensor." + n.target
        return function_name(n.target)

    def module_params(self, gm, n):
        if n.op == "call_module":
            mod = gm.get_submodule(n.target)
            if isinstance(mod, nn.LayerNorm) and mod.elementwise_affine:
                return [n.target + ".weight", n.target + ".bias"]
        return []


def function_name(t: Any) -> str:
    mod = getattr(t, "__module__", None) or ""
    # Builtins report odd modules: F.gelu is torch._C._nn.gelu, operator.add is _operator.add.
    mod = {"_operator": "operator", "torch._C._nn": "torch.nn.functional",
           "torch._C._VariableFunctions": "torch", "torch._C._special": "torch.special"}.get(
               mod, mod)
    if not mod and getattr(torch, getattr(t, "__name__", ""), None) is t:
        mod = "torch"
    return (mod + "." if mod else "") + getattr(t, "__name__", str(t))


def supported_ops() -> List[str]:
    """Names of the torch functions, tensor methods and modules ``optimize`` converts."""
    names = []
    for k in _fx_ops.TABLE.converters:
        if isinstance(k, tuple):
            names.append("Tensor." + k[1])
        elif isinstance(k, type):
            names.append("nn." + k.__name__)
        else:
            names.append(function_name(k))
    return sorted(set(names))


def _recorded(value: Any) -> Any:
    """What the partitioner keeps of a node's result: tensors as TensorMeta (sizes; dims filled
    once the symbols are chosen), tuples of tensors as lists, Python scalars (and tuples of them,
    torch.Size) as themselves."""
    if isinstance(value, torch.Tensor):
        s = tuple(int(x) for x in value.shape)
        order = dense_order(s, value.stride()) if value.layout == torch.strided else None
        return TensorMeta(s, value.dtype, value.device, sizes=s, order=order)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor)
                                                          for v in value):
        return [_recorded(v) for v in value]
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        return tuple(int(v) for v in value)
    return None


class _Recorder(fx.Interpreter):
    """Runs the traced graph once, recording every node's result. Attributes are read from
    `root` (the StitchModule, whose attributes are the module's as it is now), not from the
    traced module, which holds what the attributes were at tracing."""

    def __init__(self, gm: fx.GraphModule, root: nn.Module):
        super().__init__(gm)
        self._stitch_root = root

    def fetch_attr(self, target: str) -> Any:
        obj = self._stitch_root
        for atom in target.split("."):
            obj = getattr(obj, atom)
        return obj

    def run_node(self, n: fx.Node) -> Any:
        result = super().run_node(n)
        n.meta["stitch"] = _recorded(result)
        return result


def _read_names(gm: fx.GraphModule) -> List[str]:
    """The first names of every attribute and submodule the graph reads."""
    return sorted({n.target.split(".")[0] for n in gm.graph.nodes
                   if n.op in ("get_attr", "call_module")})


def _name_dims(m: Any, sym: Dict[int, str]) -> None:
    for t in (m if isinstance(m, list) else [m]):
        if isinstance(t, TensorMeta):
            t.dims = tuple(sym.get(s, s) if s > 1 else s for s in t.sizes)


class StitchModule(nn.Module):
    """What ``optimize`` returns for an nn.Module (see the module note)."""

    def __init__(self, original: Callable, gm: fx.GraphModule, dynamic_dims: Sequence[int],
                 positional_only: bool = False, constants: Optional[Dict[str, Any]] = None):
        super().__init__()
        constants = dict(constants or {})
        from_original: List[str] = []
        if isinstance(original, nn.Module):
            # The same dicts: state, children and their changes are the original's.
            self._parameters = original._parameters
            self._buffers = original._buffers
            self._modules = original._modules
            self._non_persistent_buffers_set = original._non_persistent_buffers_set
            self.training = original.training
            shared = (original._parameters, original._buffers, original._modules)
            for name in _read_names(gm):
                if name in constants or any(name in d for d in shared):
                    continue
                if hasattr(original, name):
                    from_original.append(name)
                else:  # on the traced module only: a constant that tracing did not put back
                    constants[name] = getattr(gm, name)
        # Constants live in __dict__, where the graph's `self._tensor_constant0` finds them at
        # the cost of a plain attribute read; _apply keeps them on the module's device and dtype.
        for name, value in constants.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_constant_names", tuple(sorted(constants)))
        object.__setattr__(self, "_from_original", frozenset(from_original))
        object.__setattr__(self, "original", original)
        object.__setattr__(self, "stitch_report", GraphReport("module"))
        object.__setattr__(self, "_traced", gm)
        object.__setattr__(self, "_rewritten", None)
        object.__setattr__(self, "_dynamic_dims", tuple(dynamic_dims))
        object.__setattr__(self, "_lock", threading.Lock())
        object.__setattr__(self, "_mode", None)
        target = original.forward if isinstance(original, nn.Module) else original
        try:
            sig = inspect.signature(target)
        except (TypeError, ValueError):
            sig = None
        object.__setattr__(self, "_signature", sig)
        object.__setattr__(self, "__signature__", sig)
        object.__setattr__(self, "_positional_only", positional_only or sig is None)
        if not isinstance(original, nn.Module):
            functools.update_wrapper(self, target, updated=())

    def __getattr__(self, name: str) -> Any:
        # Reached only when normal lookup fails: the shared dicts (nn.Module's lookup), then the
        # original's other attributes the graph reads, live.
        d = self.__dict__
        if name in d.get("_from_original", ()):
            return getattr(d["original"], name)
        return super().__getattr__(name)

    def _apply(self, fn, *args, **kwargs):
        # The shared parameters, buffers and children as nn.Module does; the trace's tensor
        # constants as buffers are (moved by .to()/.cuda(), floats cast by .half(), ...).
        result = super()._apply(fn, *args, **kwargs)
        for name in self._constant_names:
            value = self.__dict__[name]
            if isinstance(value, torch.Tensor):
                object.__setattr__(self, name, fn(value))
        return result

    def __deepcopy__(self, memo):
        # nn.Module's deepcopy copies __dict__; the shared dicts stay shared in the copy because
        # deepcopy keeps identity through its memo. The traced graphs are copied, pieces shared.
        cls = type(self)
        new = cls.__new__(cls)
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            if k != "_lock":
                object.__setattr__(new, k, copy.deepcopy(v, memo))
        object.__setattr__(new, "_lock", threading.Lock())
        return new

    def _bind(self, args, kwargs) -> List[Any]:
        if self._positional_only:
            return list(args)
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return list(bound.arguments.values())

    def _build(self, flat: List[Any]) -> Any:
        # The environment may have changed since optimize(): a bad value read by a piece's
        # engine would only make the piece run eagerly.
        _stitch.check_environment()
        gm = self._traced
        root = self if isinstance(self.original, nn.Module) else gm
        result = _Recorder(gm, root).run(*flat)
        sym: Dict[int, str] = {}
        for n in gm.graph.nodes:
            m = n.meta.get("stitch")
            if n.op == "placeholder" and isinstance(m, TensorMeta):
                for d in self._dynamic_dims:
                    if d < len(m.sizes) and m.sizes[d] > 1 and m.sizes[d] not in sym:
                        sym[m.sizes[d]] = "s%d" % len(sym)
        for n in gm.graph.nodes:
            _name_dims(n.meta.get("stitch"), sym)

        def param_meta(target: str) -> TensorMeta:
            t = root.get_parameter(target)
            s = tuple(int(x) for x in t.shape)
            return TensorMeta(s, t.dtype, t.device, sizes=s)

        sizes = {s: v for v, s in sym.items()}
        # No options here: the STITCH_* variables' settings (STITCH_BACKEND, STITCH_REPORT, ...).
        options = CompileOptions.from_environment()
        p = Partitioner(gm, FxDialect(), self.stitch_report, param_meta, sym=sym, sizes=sizes,
                        options=options)
        rewritten = p.run()
        # The pieces' engines, now: STITCH_BACKEND naming a backend that cannot run their device
        # is a ValueError from this call, not a fallback at every piece's.
        for engine in options.prepare(p.devices).values():
            self.stitch_report.backend = engine.backend
        object.__setattr__(self, "_rewritten", rewritten)
        options.print_report("Stitch report for stitch.torch.optimize(%s)"
                             % getattr(self.original, "__name__", type(self.original).__name__),
                             self.stitch_report)
        return result

    def forward(self, *args, **kwargs):
        flat = self._bind(args, kwargs)
        mode = self.training
        with self._lock:
            if self._rewritten is None:
                object.__setattr__(self, "_mode", mode)
                return self._build(flat)
        if mode != self._mode:
            # Dropout and friends were specialized to the mode of the first call.
            return self.original(*args, **kwargs)
        gm = self._rewritten
        if not isinstance(self.original, nn.Module):
            return gm(*flat)
        with running_root(self):
            # Run the graph's code with this module as `self`: attributes are read live.
            return type(gm).forward(self, *flat)

    @property
    def graph_module(self) -> Optional[fx.GraphModule]:
        """The rewritten fx module (after the first call)."""
        return self._rewritten


def optimize(module_or_fn: Callable, dynamic_dims: Sequence[int] = (0,)) -> Callable:
    """Returns an nn.Module (for a module; a callable for a function) with the signature of
    `module_or_fn` that runs the memory-bound parts of it through Stitch (see the module note).
    ``dynamic_dims``: the input dims whose sizes may change between calls (default: the batch
    dim). With ``STITCH_DISABLE=1`` returns `module_or_fn` itself."""
    _stitch.check_environment()  # a ValueError naming each bad STITCH_* value
    if disabled():
        import logging
        logging.getLogger("stitch.torch").info(
            "stitch: STITCH_DISABLE is set; returning the original callable")
        return module_or_fn
    if isinstance(module_or_fn, fx.GraphModule):
        return StitchModule(module_or_fn, module_or_fn, dynamic_dims)
    if not isinstance(module_or_fn, nn.Module):
        return StitchModule(module_or_fn, fx.symbolic_trace(module_or_fn), dynamic_dims)
    # symbolic_trace stores the tensor constants it makes on the module it traces (see the
    # module note): they move to the StitchModule, and the original is left as it was.
    before = set(vars(module_or_fn))
    gm = fx.symbolic_trace(module_or_fn)
    constants = {name: vars(module_or_fn).pop(name)
                 for name in set(vars(module_or_fn)) - before}
    return StitchModule(module_or_fn, gm, dynamic_dims, constants=constants)


