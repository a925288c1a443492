"""A Stitch piece at run time: one Stitch program standing in for a connected piece of an fx
graph, called with the piece's tensor inputs (then, on the 1.13 path, module parameters and the
Python ints the piece was built with) and returning a tuple of its outputs.

The hot path is short on purpose (the hook's budget is 15 us of host time per piece): make
inputs contiguous (Stitch takes compact tensors), pick the program for the device, and one
``Program.run_torch`` call, which allocates the outputs with ``torch.empty`` and runs on
PyTorch's current stream for CUDA tensors. Whatever Stitch cannot take runs the piece's own small
fx module eagerly for that call, counted in the report with its reason: a backend that fails to
compile (then the piece stops trying: logged at WARNING once, and the report no longer counts its
ops as replaced), or on the 1.13 path a Python int that no longer holds.
An index out of range (a gather's, a label's) is the data's error, not Stitch's: the piece
raises what PyTorch raises for it (IndexError "Target 5 is out of bounds." for nll_loss,
RuntimeError "index 5 is out of bounds for dimension 1 with size 5" for gather and
scatter_add), with Stitch's message as its cause, on every device (PyTorch's CUDA kernels
assert instead).
The engine is chosen per device, once per piece, by the settings the piece was made with
(_options.CompileOptions: torch.compile's options, else the STITCH_* variables): by default CPU
tensors run on the ``cpu`` backend (``reference`` in a build without LLVM), CUDA tensors on
``cuda``.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx

import stitch as _stitch
from stitch import StitchError, Status

from ._common import IndexErrorKind
from ._options import CompileOptions
from ._report import GraphReport

log = logging.getLogger("stitch.torch")

# stitch.h, STITCH_ERROR_INDEX_OUT_OF_RANGE: "graph 'G': OP 'NAME'[ (axis A)]: index V is out of
# bounds for size N".
_INDEX_MESSAGE = re.compile(
    r"'(?P<name>[A-Za-z_][A-Za-z0-9_]*)'(?: \(axis \d+\))?: index (?P<index>-?\d+) is out of "
    r"bounds for size (?P<size>\d+)")

_root = threading.local()


@contextlib.contextmanager
def running_root(module):
    """While the 1.13 path's StitchModule runs its graph: eager fallbacks read its attributes."""
    prev = getattr(_root, "module", None)
    _root.module = module
    try:
        yield
    finally:
        _root.module = prev


def engine_for(device: torch.device,
               options: Optional[CompileOptions] = None) -> "_stitch.Engine":
    """The engine for tensors on `device` under `options` (default: the STITCH_* variables')."""
    return (options or CompileOptions.from_environment()).engine_for(device)


class Piece:
    """Called from the rewritten fx graph (as a call_function target, so that it is no
    submodule: the 1.13 path's module shares its parameters and children with the original)."""

    def __init__(self, name: str, graph: "_stitch.Graph",
                 eager: Callable[[], fx.GraphModule],
                 num_tensors: int, scalar_checks: List[Tuple[int, Any]],
                 symbol_dims: Dict[str, Tuple[int, int]], report: GraphReport,
                 check_grad: bool, layouts: List[Optional[Tuple[int, ...]]],
                 index_errors: Optional[Dict[str, IndexErrorKind]] = None,
                 size_args: Sequence[int] = (),
                 input_orders: Sequence[Optional[Tuple[int, ...]]] = (),
                 options: Optional[CompileOptions] = None):
        self.__name__ = self.__qualname__ = name
        self.__module__ = "stitch.torch"
        self.graph = graph
        # The piece's own nodes as an fx module, to run them eagerly when Stitch cannot take a
        # call: made on the first such call (a module's recompile costs ~1 ms, and most pieces
        # never fall back: a warm start of T5's training step made 96 of them for nothing).
        self._make_eager = eager
        self._eager: Optional[fx.GraphModule] = None
        self.num_tensors = num_tensors
        self.scalar_checks = scalar_checks  # (position among the scalar args, value or symbol)
        self.symbol_dims = symbol_dims      # symbol -> (tensor input index, dim)
        # Positions among the scalar args of the symbolic sizes the program reads as values: its
        # last inputs, 0-d i64 tensors made at every call (Builder.size_value).
        self.size_args = tuple(size_args)
        self.report = report
        self.check_grad = check_grad
        # Per output: None, or the permutation that turns the program's row-major result into
        # the strided view PyTorch's graph expects (see _partition).
        self.layouts = layouts if any(x is not None for x in layouts) else None
        # Per tensor input: None, or the permutation that gives the contiguous view of it the
        # program reads (Builder.add_tensor_input); a tensor laid out otherwise at run time is
        # still right, copied by run_torch as any non-contiguous input is.
        self.input_orders = tuple(input_orders) if any(
            x is not None for x in input_orders) else None
        self.programs: Dict[torch.device, "_stitch.Program"] = {}
        # Which engine runs each device's tensors (shared by the graph's pieces).
        self.options = options or CompileOptions.from_environment()
        self.checks_args = bool(scalar_checks) or check_grad
        self.index_errors = index_errors or {}  # check name -> what PyTorch raises
        self.lock = threading.Lock()
        self.failed: Optional[str] = None

    def _check_args(self, args, tensors) -> Optional[str]:
        """The 1.13 path's per-call conditions: autograd, and the Python ints folded in."""
        if self.check_grad and torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            return "autograd needs the graph (run under torch.no_grad())"
        n = self.num_tensors
        for pos, expected in self.scalar_checks:
            got = args[n + pos]
            if isinstance(expected, str):
                i, d = self.symbol_dims[expected]
                expected = tensors[i].shape[d]
            if got != expected:
                return "a size computed in Python changed (%r, was %r)" % (got, expected)
        return None

    def __deepcopy__(self, memo):
        # Programs are compiled code: a copy of a module shares them (parameters are inputs).
        return self

    @property
    def eager(self) -> fx.GraphModule:
        with self.lock:
            if self._eager is None:
                self._eager = self._make_eager()
                self._make_eager = None  # drop what it held of the original graph
            return self._eager

    def _fallback(self, reason: str, args):
        r = "%s: %s" % (self.__name__, reason)
        if self.report.count_runtime_fallback(r):
            log.info("stitch: %s runs eagerly: %s", self.__name__, reason)
        root = getattr(_root, "module", None)
        if root is not None:
            # The piece's nodes name the module's children and parameters: read them live.
            return type(self.eager).forward(root, *args)
        return self.eager(*args)

    def _index_error(self, e: StitchError) -> Exception:
        m = _INDEX_MESSAGE.search(e.message)
        kind = self.index_errors.get(m.group("name")) if m else None
        if kind is None:
            return IndexError(e.message)
        return kind.error(int(m.group("index")), int(m.group("size")))

    def _program(self, device: torch.device) -> "_stitch.Program":
        with self.lock:
            p = self.programs.get(device)
            if p is None:
                t0 = time.perf_counter()
                engine = self.options.engine_for(device)
                self.report.backend = engine.backend
                p = self.programs[device] = engine.compile(self.graph)
                self.report.add_program(p)
                self.report.add_build_seconds(time.perf_counter() - t0)
            return p

    def __call__(self, *args):
        # The hot path: kept to attribute reads and one run_torch call (which makes inputs
        # contiguous and allocates the outputs); bench/torch/overhead.py measures it.
        if self.failed:
            return self._fallback(self.failed, args)
        tensors = args[:self.num_tensors] if len(args) != self.num_tensors else args
        if self.checks_args:
            reason = self._check_args(args, tensors)
            if reason:
                return self._fallback(reason, args)
        device = tensors[0].device
        if self.input_orders is not None:
            tensors = tuple(t if p is None else t.permute(p)
                            for t, p in zip(tensors, self.input_orders))
        if self.size_args:
            n = self.num_tensors
            tensors = tuple(tensors) + tuple(torch.tensor(args[n + i], dtype=torch.int64,
                                                          device=device) for i in self.size_args)
        try:
            program = self.programs.get(device) or self._program(device)
            stream = torch.cuda.current_stream(device).cuda_stream \
                if device.type == "cuda" else None
            outs = program.run_torch(tensors, stream)
            if self.layouts is None:
                return tuple(outs)
            return tuple(o if p is None else o.permute(p) for o, p in zip(outs, self.layouts))
        except StitchError as e:
            if e.status == Status.INDEX_OUT_OF_RANGE:
                raise self._index_error(e) from e
            reason = e.message.splitlines()[0] if e.message else e.status_name
            if e.status not in (Status.SHAPE_MISMATCH, Status.UNSUPPORTED):
                # Compile or backend failures will not go away: stop trying this piece, and say
                # so (a fault, not a size the piece does not take), once.
                self.failed = reason
                ops = self.report.piece_failed(self.__name__, reason)
                if ops is not None:
                    log.warning("stitch: %s failed in Stitch; its %d op(s) (%s) run eagerly from "
                                "now on: %s", self.__name__, len(ops), ", ".join(ops), reason)
            return self._fallback(reason, args)
