"""What the hook did, for a user to read: one GraphReport per fx graph it partitioned (a module
traced by ``optimize``; a forward, backward or inference graph of torch.compile), one
CompileReport per Dynamo graph (its forward and backward, or its inference graph).

``str()`` of either is a table: per Stitch piece the ops it replaced and how many kernels its plan
has, then every op left to PyTorch with the reason. Reports are filled while graphs compile;
``runtime_fallbacks`` counts calls that ran a piece eagerly after all (a backend failure, or on
the 1.13 path a size computed in Python that changed).

A piece whose program fails for good (it cannot be compiled, its backend is unavailable) runs
eagerly from then on: the report then says so on its row and in the graph's first line, and its
ops, program and kernels leave ``replaced_ops``, ``programs`` and ``kernels`` (which count what
runs in Stitch), so a report never claims ops that PyTorch runs. The failure is also logged once at
WARNING on the ``stitch.torch`` logger.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Dict, List, Optional


class _PieceEntry(dict):
    """A piece of GraphReport.pieces: a dict whose "kernels" is counted when first read."""

    count_kernels: Optional[Callable[[], int]] = None

    def __missing__(self, key: str) -> Any:
        if key != "kernels" or self.count_kernels is None:
            raise KeyError(key)
        self["kernels"] = value = self.count_kernels()
        self.count_kernels = None
        return value


class GraphReport:
    """One partitioned graph. ``pieces``: per Stitch program its name, ``ops`` (the op of every
    replaced node), ``origins`` (the ops those came from before PyTorch decomposed them) and
    ``kernels`` (in its plan at the compile-time sizes); ``fallbacks``: ops left to PyTorch, each
    ``{"node", "op", "reason"}``; ``total_ops``: call nodes in the graph."""

    def __init__(self, kind: str = "module"):
        self.kind = kind
        self.traced = False
        self.total_ops = 0
        self.pieces: List[Dict[str, Any]] = []
        self.fallbacks: List[Dict[str, str]] = []
        self.runtime_fallbacks: Dict[str, int] = {}
        self.backend: Optional[str] = None
        self.saved_tensors: Optional[int] = None  # a backward graph: tensors the forward saved
        self._programs: List[weakref.ref] = []  # the pieces' programs, one per device
        self._lock = threading.Lock()
        self.build_s = 0.0  # wall seconds partitioning this graph and compiling its programs

    def __deepcopy__(self, memo):
        return self  # a record of what was compiled: a copied module shares it with its pieces

    def _running(self) -> List[Dict[str, Any]]:
        return [p for p in self.pieces if p["failed"] is None]

    def replaced(self) -> List[str]:
        """The op of every node that runs in Stitch (pieces that failed for good excluded)."""
        return [op for p in self._running() for op in p["ops"]]

    def origins(self) -> set:
        return {o for p in self._running() for o in p["origins"]}

    @property
    def replaced_ops(self) -> int:
        """Ops replaced by Stitch pieces that run in Stitch."""
        return sum(len(p["ops"]) for p in self._running())

    @property
    def programs(self) -> int:
        return len(self._running())

    @property
    def kernels(self) -> int:
        return sum(p["kernels"] for p in self._running())

    @property
    def eager_ops(self) -> int:
        """Ops of pieces that failed for good and run eagerly."""
        return sum(len(p["ops"]) for p in self.pieces if p["failed"] is not None)

    def add_piece(self, name: str, ops: List[str], origins: List[str],
                  count_kernels: Callable[[], int]) -> None:
        """`count_kernels`: counts the piece's kernels when its "kernels" is first read."""
        entry = _PieceEntry({"name": name, "ops": ops, "origins": sorted(set(origins)),
                             "failed": None})
        entry.count_kernels = count_kernels
        self.pieces.append(entry)

    def piece_failed(self, name: str, reason: str) -> Optional[List[str]]:
        """Records that piece `name` runs eagerly from now on. Its ops the first time, else
        None."""
        with self._lock:
            for p in self.pieces:
                if p["name"] == name and p["failed"] is None:
                    p["failed"] = reason
                    return p["ops"]
            return None

    def add_program(self, program: Any) -> None:
        """A piece's program (stitch.Program), whose statistics plan_stats() sums."""
        with self._lock:
            self._programs.append(weakref.ref(program))

    def add_build_seconds(self, seconds: float) -> None:
        with self._lock:
            self.build_s += seconds

    def stitch_seconds(self) -> float:
        """Stitch's own wall time on this graph so far, beside the steady runs of its programs:
        partitioning and building the pieces, compiling their programs, and each input
        signature's set-up with its first run (Program.first_call_seconds: plans made or found,
        kernels compiled or loaded). What a first step costs beyond Dynamo's and AOTAutograd's
        own time and the step itself (BENCHMARKS.md, "Whole models")."""
        with self._lock:
            programs = [r() for r in self._programs]
            total = self.build_s
        return total + sum(p.first_call_seconds for p in programs if p is not None)

    def plan_stats(self) -> Dict[str, int]:
        """The pieces' programs' Program.stats() summed: input signatures run so far, how many
        ran the plan search, how many a plan kept for their shape class (README, "Shape
        classes") and how many a program entry of the kernel cache (warm starts)."""
        total = {"signatures": 0, "plan_searches": 0, "plan_reuses": 0, "plan_classes": 0,
                 "warm_starts": 0}
        with self._lock:
            programs = [r() for r in self._programs]
        for p in programs:
            if p is not None:
                for k, v in p.stats().items():
                    total[k] += v
        return total

    def add_fallback(self, node: str, op: str, reason: str) -> None:
        self.fallbacks.append({"node": node, "op": op, "reason": reason})

    def count_runtime_fallback(self, reason: str) -> bool:
        """Counts one eager run; True the first time this reason is seen."""
        with self._lock:
            first = reason not in self.runtime_fallbacks
            self.runtime_fallbacks[reason] = self.runtime_fallbacks.get(reason, 0) + 1
            return first

    def lines(self) -> List[str]:
        if not self.traced:
            return ["%s graph: not traced yet (call it once)" % self.kind]
        failed = [p for p in self.pieces if p["failed"] is not None]
        out = ["%s graph: %d of %d ops in Stitch, %d program(s), %d kernel(s)%s%s%s"
               % (self.kind, self.replaced_ops, self.total_ops, self.programs, self.kernels,
                  " on %s" % self.backend if self.backend else "",
                  "; reads %d tensor(s) saved by the forward" % self.saved_tensors
                  if self.saved_tensors is not None else "",
                  "; %d op(s) of %d failed piece(s) run eagerly" % (self.eager_ops, len(failed))
                  if failed else "")]
        if self._programs:
            st = self.plan_stats()
            out.append("  %d input signature(s) so far: %d planned by the search, %d by a plan kept "
                       "for their shape class" % (st["signatures"], st["plan_searches"],
                                                  st["plan_reuses"]))
        if self.pieces:
            w = max(len(p["name"]) for p in self.pieces)
            out.append("  %-*s  %7s  %s" % (w, "piece", "kernels", "ops (from)"))
            for p in self.pieces:
                came = [o for o in p["origins"] if o not in p["ops"]]
                out.append("  %-*s  %7s  %s%s%s" % (
                    w, p["name"], p["kernels"] if p["failed"] is None else "-",
                    _counted(p["ops"]), "  (from %s)" % ", ".join(came) if came else "",
                    "  FAILED, runs eagerly: %s" % p["failed"] if p["failed"] is not None else ""))
        if self.fallbacks:
            w = max(len(f["op"]) for f in self.fallbacks)
            out.append("  %-*s  %s" % (w, "left to PyTorch", "reason"))
            for op, reason, nodes in _grouped(self.fallbacks):
                out.append("  %-*s  %s%s" % (w, op, reason,
                                             " (x%d)" % nodes if nodes > 1 else ""))
        for r, c in self.runtime_fallbacks.items():
            out.append("  ran eagerly %d time(s): %s" % (c, r))
        return out

    def __repr__(self) -> str:
        return "\n".join(self.lines())

    __str__ = __repr__


# The 1.13 path's name for it (``optimize(m).stitch_report``).
StitchReport = GraphReport


class CompileReport:
    """One Dynamo graph compiled with backend="stitch": its forward and backward graphs (the
    backward appears at the first ``.backward()``), or its inference graph."""

    def __init__(self, name: str):
        self.name = name
        self.graphs: List[GraphReport] = []

    def new_graph(self, kind: str) -> GraphReport:
        g = GraphReport(kind)
        self.graphs.append(g)
        return g

    def graph(self, kind: str) -> Optional[GraphReport]:
        return next((g for g in self.graphs if g.kind == kind), None)

    def replaced(self) -> List[str]:
        return [op for g in self.graphs for op in g.replaced()]

    def origins(self) -> set:
        return {o for g in self.graphs for o in g.origins()}

    @property
    def fallbacks(self) -> List[Dict[str, str]]:
        return [dict(f, graph=g.kind) for g in self.graphs for f in g.fallbacks]

    @property
    def runtime_fallbacks(self) -> Dict[str, int]:
        out: Dict[str, int] = {}
        for g in self.graphs:
            for r, c in g.runtime_fallbacks.items():
                out[r] = out.get(r, 0) + c
        return out

    def __repr__(self) -> str:
        lines = ["Stitch report for %s" % self.name]
        for g in self.graphs:
            lines += g.lines()
        return "\n".join(lines)

    __str__ = __repr__


def _counted(ops: List[str]) -> str:
    seen: Dict[str, int] = {}
    for o in ops:
        seen[o] = seen.get(o, 0) + 1
    return ", ".join(o if c == 1 else "%s x%d" % (o, c) for o, c in seen.items())


def _grouped(fallbacks: List[Dict[str, str]]):
    seen: Dict[tuple, int] = {}
    for f in fallbacks:
        k = (f["op"], f["reason"])
        seen[k] = seen.get(k, 0) + 1
    return [(op, reason, n) for (op, reason), n in seen.items()]


_reports: List[CompileReport] = []
_reports_lock = threading.Lock()


def new_compile_report(name: str) -> CompileReport:
    r = CompileReport(name)
    with _reports_lock:
        _reports.append(r)
    return r


def last_report() -> Optional[CompileReport]:
    """The report of the most recent Dynamo graph compiled with backend="stitch" (None before)."""
    with _reports_lock:
        return _reports[-1] if _reports else None


def all_reports() -> List[CompileReport]:
    """Every CompileReport of this process, oldest first."""
    with _reports_lock:
        return list(_reports)


def clear_reports() -> None:
    with _reports_lock:
        _reports.clear()
