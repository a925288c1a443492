"""Partitioning an fx graph into Stitch pieces and PyTorch ops, and rewriting it.

Both front ends end here, each with a Dialect (its converter table, how it names ops, which
parameters a module reads) and an fx graph whose nodes carry their result type in
``meta["stitch"]`` (see _common):

1. Support: every node with a converter is tried alone: a one-node Stitch graph is built from its
   operand types and the type Stitch infers must equal PyTorch's. A node that fails is left to
   PyTorch with the reason (Stitch's own error message, or the mismatch) in the report, so a
   converter bug or an unusual argument never becomes a wrong answer, only a fallback.
2. Partition: supported nodes are merged greedily with their supported producers into maximal
   connected pieces; a merge is refused if some path would leave the piece and come back (the
   piece would then depend on itself). A group that reads graph inputs only (autocast's weight
   casts) then joins the nearest group before it, so it is not a program of its own. Pieces
   made of layout ops only are left to PyTorch, where views cost nothing.
3. Programs: each piece becomes one Stitch graph; the fx graph is rewritten so the piece is a
   single call (a Piece, see _piece) whose results are unpacked for its users. The piece keeps a
   small fx module of its own nodes to run eagerly when Stitch cannot take a call.
"""

from __future__ import annotations

import logging
import operator
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch.fx as fx

from stitch import StitchError

from ._builder import Builder
from ._common import ConverterTable, TensorMeta, Unsupported, describe, ident, same_type
from ._options import CompileOptions
from ._piece import Piece
from ._report import GraphReport

log = logging.getLogger("stitch.torch")


class Dialect:
    """What a front end tells the partitioner."""

    table: ConverterTable
    permutes: frozenset = frozenset()  # layout ops that permute dims (see _trim_layout_edges)
    check_grad = False  # pieces run eagerly when autograd needs their graph (the 1.13 path)

    def key(self, gm: fx.GraphModule, n: fx.Node) -> Tuple[Any, Any]:
        """(converter key, module or None) of a call node."""
        raise NotImplementedError

    def op_name(self, gm: fx.GraphModule, n: fx.Node) -> str:
        raise NotImplementedError

    def origin(self, gm: fx.GraphModule, n: fx.Node) -> str:
        """The op n came from before decomposition (itself when not decomposed)."""
        return self.op_name(gm, n)

    def module_params(self, gm: fx.GraphModule, n: fx.Node) -> List[str]:
        """Qualified names of the parameters a converted module reads (passed as inputs)."""
        return []

    def plan_target(self, devices: set) -> str:
        return "sm_90" if "cuda" in devices else "host"


class ParamNode:
    """Stands for a module parameter (nn.LayerNorm's weight) read by a converted module; equal by
    qualified name so the check graph and the piece graph agree."""

    def __init__(self, target: str, gm: fx.GraphModule, meta: TensorMeta):
        self.target = target
        self.name = "p_" + target.replace(".", "_")
        self.meta = {"stitch": meta}

    def __eq__(self, other):
        return isinstance(other, ParamNode) and other.target == self.target

    def __hash__(self):
        return hash(("param", self.target))


def _tensor_args(n: fx.Node) -> List[fx.Node]:
    return [a for a in n.all_input_nodes
            if isinstance(a.meta.get("stitch"), (TensorMeta, list))]


def _devices(nodes) -> set:
    """The device types of the nodes' tensor results."""
    return {n.meta["stitch"].device.type for n in nodes
            if isinstance(n.meta.get("stitch"), TensorMeta)}


def _is_tuple_element(n: fx.Node) -> bool:
    return n.target is operator.getitem and isinstance(n.args[0], fx.Node) and \
        isinstance(n.args[0].meta.get("stitch"), list)


class Partitioner:
    def __init__(self, gm: fx.GraphModule, dialect: Dialect, report: GraphReport,
                 param_meta: Callable[[str], TensorMeta], sym: Optional[Dict[int, str]] = None,
                 sizes: Optional[Dict[str, int]] = None, name: str = "stitch_piece",
                 options: Optional[CompileOptions] = None):
        self.gm = gm
        self.d = dialect
        self.report = report
        self.param_meta = param_meta
        self.sym = sym or {}          # the 1.13 path's size -> symbol guess
        self.sizes = sizes or {}      # symbol -> size (the plan's sizes; the 1.13 comparison)
        self.name = name
        # The settings the pieces run with (torch.compile's options, else the STITCH_* variables).
        self.options = options or CompileOptions.from_environment()
        # The device types of the pieces made, whose engines the front end makes at compile time.
        self.devices: set = set()
        # A graph input carrying each symbol in its dims: a piece whose result has a size no
        # input of its own carries (an expand or full to [s0, s1]) takes it as an extra input
        # that Stitch binds the symbol from, and never reads. Graph inputs are available before
        # any piece, so this adds no dependency that could order pieces in a cycle.
        self.carriers: Dict[str, fx.Node] = {}
        for n in gm.graph.nodes:
            m = n.meta.get("stitch")
            if n.op == "placeholder" and isinstance(m, TensorMeta):
                for dim in m.dims:
                    if isinstance(dim, str):
                        self.carriers.setdefault(dim, n)

    def _add_carriers(self, b: Builder, nodes) -> List[fx.Node]:
        bound = {dim for a in b.inputs for dim in a.meta["stitch"].dims if isinstance(dim, str)}
        needed = set()
        for n in nodes:
            m = n.meta.get("stitch")
            for t in (m if isinstance(m, list) else [m]):
                if isinstance(t, TensorMeta):
                    needed |= {dim for dim in t.dims if isinstance(dim, str)}
            needed |= {a.meta["stitch"] for a in n.all_input_nodes
                       if isinstance(a.meta.get("stitch"), str)}
        added = []
        for sym in sorted(needed - bound):
            c = self.carriers.get(sym)
            if c is not None and c not in b.env:
                b.add_tensor_input(c)
                added.append(c)
        return added

    # -- 1. support ---------------------------------------------------------------------------
    def _params(self, n: fx.Node) -> List[ParamNode]:
        return [ParamNode(p, self.gm, self.param_meta(p)) for p in self.d.module_params(self.gm, n)]

    def _convert(self, b: Builder, n: fx.Node) -> Any:
        key, mod = self.d.key(self.gm, n)
        conv = self.d.table.converters.get(key)
        if conv is None:
            raise Unsupported("no Stitch mapping")
        params = self._params(n)
        if params:
            n.meta["stitch_params"] = params
        return conv(b, n, mod)

    def _check_types(self, b: Builder, n: fx.Node, result: Any) -> None:
        """The Stitch result must have PyTorch's dtype and shape; anything else would be a silent
        wrong answer downstream."""
        metas = n.meta["stitch"]
        vals = result if isinstance(result, list) else [result]
        metas = metas if isinstance(metas, list) else [metas]
        if len(vals) != len(metas):
            raise Unsupported("gives %d results, PyTorch %d" % (len(vals), len(metas)))
        for v, m in zip(vals, metas):
            if m is None:
                continue  # a result nobody reads (native_layer_norm's mean, say)
            dt, dims = b.stype(v)
            if not same_type(dt, dims, m, self.sizes):
                raise Unsupported("Stitch infers %s, PyTorch gives %s%s"
                                  % (describe(dt, dims), str(m.dtype).replace("torch.", ""),
                                     list(m.sizes if m.sizes is not None else m.dims)))

    def _single_node_support(self, n: fx.Node) -> Optional[str]:
        """None if n converts on its own and agrees with PyTorch; otherwise why not."""
        key, _ = self.d.key(self.gm, n)
        if key is None or key not in self.d.table.converters:
            return "no Stitch mapping"
        meta = n.meta.get("stitch")
        if not isinstance(meta, (TensorMeta, list)):
            return "result is not a tensor"
        metas = [m for m in (meta if isinstance(meta, list) else [meta]) if m is not None]
        if any(m.device.type not in ("cpu", "cuda") for m in metas):
            return "device Stitch does not take"
        b = Builder("check", self.sym)
        try:
            for a in _tensor_args(n):
                if isinstance(a.meta["stitch"], list):
                    raise Unsupported("operand is a tuple")  # getitem of a chunk: merged below
                b.add_tensor_input(a)
            for p in self._params(n):
                b.add_tensor_input(p)
            self._add_carriers(b, [n])
            result = self._convert(b, n)
            self._check_types(b, n, result)
            return None
        except Unsupported as e:
            return str(e)
        except StitchError as e:
            return e.message.splitlines()[0] if e.message else e.status_name
        except Exception as e:  # a converter bug must cost a fallback, never the model
            return "%s: %s" % (type(e).__name__, e)
        finally:
            b.g.close()

    # -- 2. partition -------------------------------------------------------------------------
    @staticmethod
    def _creates_cycle(members: set, group: Dict[fx.Node, int], groups: Dict[int, set],
                       exclude: Tuple[int, ...]) -> bool:
        """True if some path leaves `members` and comes back into it, where a path that enters
        another group (of `groups`, but for those in `exclude`) may leave it from any of its nodes
        (the group becomes one call): so the graph of pieces and PyTorch nodes stays acyclic after
        every merge."""
        frontier = [u for m in members for u in m.users if u not in members]
        seen: set = set()
        seen_groups: set = set()
        while frontier:
            x = frontier.pop()
            if x in members:
                return True
            if x in seen:
                continue
            seen.add(x)
            g = group.get(x)
            if g is not None and g in groups and g not in exclude and g not in seen_groups:
                seen_groups.add(g)
                for y in groups[g]:
                    if y not in members:
                        frontier.extend(y.users)
            frontier.extend(x.users)
        return False

    def _merge(self, into: int, other: int, group: Dict[fx.Node, int],
               members: Dict[int, set]) -> bool:
        """Merges group `other` into group `into` unless that makes a cycle; whether it did."""
        merged = members[into] | members[other]
        if self._creates_cycle(merged, group, members, (into, other)):
            return False
        for m in members[other]:
            group[m] = into
        members[into] = merged
        del members[other]
        return True

    def _layout_only(self, nodes) -> bool:
        """Nodes that are all layout ops (or tuple elements): left to PyTorch as views."""
        keys = {self.d.key(self.gm, m)[0] for m in nodes}
        return keys <= (self.d.table.layout_only | {operator.getitem})

    def _groups(self, supported: Dict[fx.Node, bool]) -> List[List[fx.Node]]:
        order = {n: i for i, n in enumerate(self.gm.graph.nodes)}
        group: Dict[fx.Node, int] = {}
        members: Dict[int, set] = {}
        next_id = 0
        for n in self.gm.graph.nodes:
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
                if self._merge(ga, gid, group, members):
                    gid = ga
        self._merge_input_only(group, members, order)
        return sorted((sorted(ms, key=order.get) for ms in members.values()),
                      key=lambda ms: order[ms[0]])

    def _merge_input_only(self, group: Dict[fx.Node, int], members: Dict[int, set],
                          order: Dict[fx.Node, int]) -> None:
        """Joins each group that reads nothing but graph inputs to the nearest group before it
        that will be a piece (not views only; on the same devices; where the merge makes no
        cycle). Such groups are connected to no other piece: autocast's cast of each Linear's
        f32 weight to bf16 is one, every layer has seven, and each would be a program of its own
        whose call costs more on the host than its kernel (Llama at bf16: 29 of 50 programs a
        step). Joining the nearest earlier group, not one shared group at the start, moves each
        result only a few library ops earlier, so a model's casts of its weights are not all
        alive at once."""
        def devices(ms):
            return frozenset(m.meta["stitch"].device.type for m in ms
                             if isinstance(m.meta.get("stitch"), TensorMeta))

        def input_only(ms):
            return all(a in ms or a.op in ("placeholder", "get_attr")
                       for m in ms for a in m.all_input_nodes)

        first = {gid: min(order[m] for m in ms) for gid, ms in members.items()}
        for gid in sorted(members, key=first.get):
            if gid not in members or not input_only(members[gid]):
                continue
            mine = devices(members[gid])
            earlier = sorted((k for k in members if k != gid and first[k] < first[gid]),
                             key=first.get, reverse=True)
            for k in earlier[:3]:  # the nearest few: a merge farther back would hold results longer
                if devices(members[k]) != mine or self._layout_only(members[k]):
                    continue
                if self._merge(k, gid, group, members):
                    break

    def run(self) -> fx.GraphModule:
        gm, report, d = self.gm, self.report, self.d
        supported: Dict[fx.Node, bool] = {}
        calls = [n for n in gm.graph.nodes if n.op.startswith("call_")]
        report.total_ops = len(calls)
        returned = {a for n in gm.graph.nodes if n.op == "output"
                    for a in n.all_input_nodes}
        for n in calls:
            if _is_tuple_element(n):
                continue  # decided with its tuple's producer below
            if n in returned and d.key(gm, n)[0] in d.table.layout_only - d.table.copies:
                # A view the graph returns may alias an input: PyTorch keeps it a real view.
                why = "a view the graph returns stays a view"
            else:
                why = self._single_node_support(n)
            supported[n] = why is None
            if why is not None and isinstance(n.meta.get("stitch"), (TensorMeta, list)):
                report.add_fallback(n.name, d.op_name(gm, n), why)
                log.info("stitch: %s (%s) stays in PyTorch: %s", n.name, d.op_name(gm, n), why)
        for n in calls:
            if n in supported:
                continue
            producer = n.args[0]
            # An element of a tuple goes with its producer; a tuple used any other way cannot
            # leave a piece, so the producer then stays in PyTorch too.
            ok = supported.get(producer, False) and all(
                u.target is operator.getitem for u in producer.users)
            supported[n] = ok
            if not ok and supported.get(producer):
                supported[producer] = False
                report.add_fallback(producer.name, d.op_name(gm, producer),
                                    "its tuple result is used whole")
        pieces = []
        for members in self._groups(supported):
            members = self._trim_layout_edges(members)
            if self._layout_only(members):
                for m in members:
                    if not _is_tuple_element(m):
                        report.add_fallback(m.name, d.op_name(gm, m),
                                            "layout-only piece: free as a view in PyTorch")
                continue
            piece = self._make_piece(len(pieces), members)
            if piece is not None:
                pieces.append((members, piece))
        new_gm = self._rewrite(pieces)
        report.traced = True
        return new_gm

    # A permuted input is read in place when PyTorch's last dim is innermost in memory too and
    # at least this long: the host emitter walks such runs as element tiles of 16 or more
    # (llvm_emitter.cpp, "Element tiles"), where shorter ones would be gathered element by element.
    IN_PLACE_RUN = 16

    def _read_in_place(self, a: fx.Node) -> Optional[Tuple[int, ...]]:
        """The memory order to read piece input `a` in, where PyTorch's layout of it is dense but
        not row-major (TensorMeta.order) and only its outer dims are permuted: the last dim that
        is not 1 is innermost in memory and runs for at least IN_PLACE_RUN elements. An
        attention gradient laid out [batch, seq, heads, head_dim] and read as [batch, heads, seq,
        head_dim] (Llama's and Qwen2's backward pieces) is then read in runs of head_dim where
        run_torch copied it first: those pieces took 0.14-0.17 ms in place against 0.24-0.34 ms
        with the copy (one thread, in the model). A layout whose last dim is strided is not: T5's
        position bias, laid out [batch, seq, seq, heads] and read per head (4 floats apart), made
        its softmax pieces 1.1-1.2 ms in place against 0.6 ms with PyTorch's blocked copy first,
        and a transposed matrix (GPT-2's tied-embedding gradient) took 2.8 ms against 0.1.
        Sizes from the graph's hints; an unknown one keeps the copy."""
        m = a.meta.get("stitch")
        if not isinstance(m, TensorMeta) or m.order is None:
            return None
        sizes = [d if isinstance(d, int) else self.sizes.get(d) for d in m.dims]
        if any(s is None for s in sizes):
            return None
        inner = [d for d in m.order if sizes[d] != 1]
        outer = [d for d in range(len(sizes)) if sizes[d] != 1]
        if not inner or inner[-1] != outer[-1] or sizes[inner[-1]] < self.IN_PLACE_RUN:
            return None
        return m.order

    def _trim_layout_edges(self, members: List[fx.Node]) -> List[fx.Node]:
        """Drops layout ops at a piece's edges. At its end (results that only leave the piece):
        in PyTorch they are free views of the piece's output, in Stitch a second copy of it; a
        copy (clone, contiguous) stays, since PyTorch would read the piece's result again to
        write it, where the piece writes that layout at once (T5's attention: the transposed
        [batch, heads, seq, seq] results PyTorch cloned before each bmm). At
        its start, permutations of a piece input: Stitch would read the input across its rows,
        where PyTorch hands over a transposed view that is made contiguous with a blocked copy
        (or is contiguous already, or is read in place when only its outer dims are permuted:
        _read_in_place). Repeated, since dropping one can leave its neighbour at the
        edge."""
        layout = self.d.table.layout_only - self.d.table.copies
        permutes = self.d.permutes
        kept = list(members)
        while True:
            inside = set(kept)
            tail = [m for m in kept
                    if self.d.key(self.gm, m)[0] in layout and not _is_tuple_element(m)
                    and not any(u in inside for u in m.users)
                    and not isinstance(m.meta.get("stitch"), list)]
            head = [m for m in kept
                    if self.d.key(self.gm, m)[0] in permutes
                    and not any(a in inside for a in m.all_input_nodes)]
            if not tail and not head:
                return kept
            for m in tail:
                self.report.add_fallback(m.name, self.d.op_name(self.gm, m),
                                         "a view of a piece's result: free in PyTorch")
            for m in head:
                if m not in tail:
                    self.report.add_fallback(m.name, self.d.op_name(self.gm, m),
                                             "a permutation of a piece's input: PyTorch's view")
            kept = [m for m in kept if m not in tail and m not in head]

    # -- 3. programs --------------------------------------------------------------------------
    def _make_piece(self, index: int, members: List[fx.Node]):
        gm, report, d = self.gm, self.report, self.d
        name = "%s_%d" % (self.name, index)
        mset = set(members)
        b = Builder(name, self.sym)
        try:
            ext: List[fx.Node] = []
            for m in members:
                for a in m.all_input_nodes:
                    if a not in mset and a not in ext:
                        ext.append(a)
            tensor_ext = [a for a in ext if isinstance(a.meta.get("stitch"), TensorMeta)]
            if not tensor_ext:
                raise Unsupported("no tensor input (constants are PyTorch's to make)")
            params: List[str] = []
            for a in tensor_ext:
                b.add_tensor_input(a, self._read_in_place(a))
            tensor_ext += self._add_carriers(b, members)
            for m in members:
                for p in self._params(m):
                    if p.target not in params:
                        params.append(p.target)
                        b.add_tensor_input(p)
            for m in members:
                b.env[m] = self._convert(b, m)
            outputs = [m for m in members if any(u not in mset for u in m.users)]
            if any(isinstance(b.env[o], list) for o in outputs):
                raise Unsupported("a tuple leaves the piece")
            for o in outputs:
                self._check_types(b, o, b.env[o])
            if not outputs:
                raise Unsupported("no result is used")
            # Outputs PyTorch lays out other than row-major are written in that order and handed
            # back as a permuted view (the Piece applies the inverse permutation).
            values, layouts = [], []
            for o in outputs:
                v, order = b.env[o], o.meta["stitch"].order
                if order is not None:
                    v = b.op("transpose", v, perm=list(order))
                    inverse = [0] * len(order)
                    for i, dim in enumerate(order):
                        inverse[dim] = i
                    layouts.append(tuple(inverse))
                else:
                    layouts.append(None)
                values.append(v)
            b.g.set_outputs(values)
            b.g.verify()
            symbol_dims: Dict[str, Tuple[int, int]] = {}
            for i in range(b.g.num_inputs):
                order = b.input_orders[i] if i < len(b.input_orders) else None
                for k, s in enumerate(b.g.value_info(i)[2]):
                    if isinstance(s, str) and s not in symbol_dims:
                        # The dim of the tensor the piece is called with (not of its permuted view).
                        symbol_dims[s] = (i, k if order is None else order[k])
        except (Unsupported, StitchError) as e:
            why = e.message.splitlines()[0] if isinstance(e, StitchError) else str(e)
            for m in members:
                if not _is_tuple_element(m):
                    report.add_fallback(m.name, d.op_name(gm, m), "piece failed to build: " + why)
            log.info("stitch: piece %s stays in PyTorch: %s", name, why)
            b.g.close()
            return None
        # Every other outside value (ints and sizes computed in Python) is passed too: the eager
        # module needs them, and the folded ones are checked against them.
        scalar_ext = [a for a in ext if a not in tensor_ext]
        checks = [(scalar_ext.index(nd), v) for nd, v in b.scalar_checks]
        size_args = [scalar_ext.index(nd) for nd in b.size_inputs]
        def eager():
            return self._eager_module(members, tensor_ext, params, scalar_ext, outputs)
        piece = Piece(name, b.g, eager, len(tensor_ext) + len(params), checks, symbol_dims,
                      report, d.check_grad, layouts, b.index_errors, size_args,
                      input_orders=b.input_orders, options=self.options)
        self.devices |= _devices(members)
        real = [m for m in members if not _is_tuple_element(m)]
        ops = [d.op_name(gm, m) for m in real]
        report.add_piece(name, ops, [d.origin(gm, m) for m in real],
                         self._kernel_counter(b.g, members, symbol_dims))
        if log.isEnabledFor(logging.INFO):
            log.info("stitch: %s replaces %d ops (%s) with one program of %d kernel(s)",
                     name, len(ops), ", ".join(ops), report.pieces[-1]["kernels"])
        return piece, (tensor_ext, params, scalar_ext, outputs)

    def _kernel_counter(self, graph, members, symbol_dims) -> Callable[[], int]:
        """The kernels in the piece's plan at the compile-time sizes, for the report: counted
        when the report is first read (a plan per piece costs ~1 ms, and runs that never read
        the report should not pay for it); 0 where the plan cannot be made then."""
        target = self.d.plan_target(_devices(members))
        sizes = {s: self.sizes.get(s) for s in symbol_dims}
        fusion = self.options.fusion

        def count() -> int:
            if any(v is None for v in sizes.values()):
                return 0
            try:
                plan = graph.explain_plan(sizes, format="json", target=target, fusion=fusion)
                return len(plan.get("kernels", []))
            except Exception:  # noqa: BLE001 - a report figure must not fail a run
                return 0
        return count

    def _eager_module(self, members, tensor_ext, params, scalar_inputs, outputs):
        g = fx.Graph()
        env: Dict[fx.Node, fx.Node] = {}
        for a in tensor_ext:
            env[a] = g.placeholder(ident(a.name))
        for p in params:
            g.placeholder(ident(p))  # the parameter itself is read through the module
        for a in scalar_inputs:
            env[a] = g.placeholder(ident(a.name))
        for m in members:
            env[m] = g.node_copy(m, lambda x: env[x])
        g.output(tuple(env[o] for o in outputs))
        return fx.GraphModule(self.gm, g)

    def _rewrite(self, pieces) -> fx.GraphModule:
        gm = self.gm
        nodes = list(gm.graph.nodes)
        order = {n: i for i, n in enumerate(nodes)}
        unit_of: Dict[fx.Node, Any] = {}
        members_of: Dict[int, List[fx.Node]] = {}
        for members, piece in pieces:
            members_of[id(piece)] = members
            for m in members:
                unit_of[m] = piece
        units: List[Any] = []
        seen = set()
        for n in nodes:
            u = unit_of.get(n, n)
            if id(u) not in seen:
                seen.add(id(u))
                units.append(u)

        def deps(u):
            out = set()
            for n in members_of.get(id(u), [u]):
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
            ready = [k for k, dep in pending.items() if dep <= done]
            k = min(ready, key=first.get)
            sorted_units.append(by_id[k])
            done.add(k)
            del pending[k]

        g = fx.Graph()
        env: Dict[fx.Node, fx.Node] = {}
        for u in sorted_units:
            if isinstance(u, tuple):
                piece, (tensor_ext, params, scalars, outputs) = u
                args = [env[a] for a in tensor_ext]
                args += [g.get_attr(p) for p in params]
                args += [env[a] for a in scalars]
                call = g.call_function(piece, tuple(args))
                for k, o in enumerate(outputs):
                    env[o] = g.call_function(operator.getitem, (call, k))
                    env[o].meta = dict(o.meta)
            else:
                env[u] = g.node_copy(u, lambda x: env[x])
        return fx.GraphModule(gm, g)
