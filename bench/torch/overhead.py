#!/usr/bin/env python3
"""Host time one Stitch piece adds per call in the PyTorch hook (DESIGN.md's bar: <= 15 us).

    PYTHONPATH=python STITCH_LIBRARY=build/ci/src/libstitch.so \\
        .venv-torch/bin/python bench/torch/overhead.py [--rounds 100] [--calls 200] [--out FILE]

Pieces small enough that their kernels take well under a microsecond, so a call's time is its
host work: y = x * 2 + 1 on an [8, 8] f32 CPU tensor (one input, one output), and three inputs
to two outputs (a = x + b; y = tanh(a * s); z = a - s, over [8, 8] with b of [8]). Contenders,
measured side by side in one run:

* no-op: a Python function taking the same input list and returning it. What every call site
  pays whatever it calls (the loop and a Python call); subtracted from the others, so "added per
  piece" is what running the piece through Stitch costs on top of calling anything at all.
* Stitch run_torch: ``Program.run_torch(inputs)``, the hook's call per piece (outputs allocated
  with torch.empty inside, as eager allocates its results).
* Stitch output_shapes + run: the hook's call before run_torch (contiguous(), a DLTensor built
  per tensor, stitch_program_output_shape per output, torch.empty, Program.run).
* C call only: stitch_program_run through ctypes on DLTensor arrays built once, outputs
  allocated once: the C API's share of run_torch (dispatch plus the kernels).
* PyTorch eager: the same math op by op, for scale.

With PyTorch 2.x, the same functions also go through ``torch.compile(backend="stitch")``, which
makes each one piece (the report is checked), and two more rows per case:

* hook piece call: the piece object the hook put into the graph (stitch.torch's Piece, caught
  at its first call), called with the arguments it got: the hook's whole per-piece work (grad
  check, program lookup, contiguous(), run_torch). This is the figure DESIGN.md's bar is about.
* torch.compile, backend="stitch" and backend="aot_eager": the whole compiled function, Dynamo's
  guards and AOTAutograd's wrapper included; aot_eager runs the same aten graph op by op
  through the same wrappers, so the difference is the piece against the eager ops it replaces.

Every call of every contender runs on the same inputs. A round times --calls calls of each
contender in turn (the order rotates per round, so drifting load on the machine falls on all of
them); the figure is the median over --rounds rounds of the time per call. The garbage
collector is paused while timing (its pauses land on whichever contender allocates when it
runs). Results are checked against eager before timing. Prints a Markdown section (also written
to --out).
"""
from __future__ import annotations

import argparse
import ctypes
import datetime as _dt
import gc
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO / "bench"))

import stitch  # noqa: E402
from common import machine_info  # noqa: E402

ONE = """
graph affine(x: f32[N, 8]) {
  a = mul(x, 2.0)
  y = add(a, 1.0)
  return y
}
"""

THREE_TWO = """
graph three_two(x: f32[N, 8], b: f32[8], s: f32[N, 8]) {
  a = add(x, b)
  m = mul(a, s)
  y = tanh(m)
  z = sub(a, s)
  return y, z
}
"""


def eager_one(inputs):
    (x,) = inputs
    return [x * 2 + 1]


def eager_three_two(inputs):
    x, b, s = inputs
    a = x + b
    return [torch.tanh(a * s), a - s]


def old_path(program):
    """The hook's piece call before run_torch (python/stitch/torch.py, _Piece.forward)."""
    def call(inputs):
        tensors = [t if t.is_contiguous() else t.contiguous() for t in inputs]
        views = [stitch.as_dltensor(t) for t in tensors]
        shapes = program.output_shapes(views)
        outs = [torch.empty(s, dtype=d, device=tensors[0].device)
                for s, d in zip(shapes, [stitch._torch_dtype(n) for n in program.output_dtypes])]
        program.run(tensors, outs)
        return outs
    return call


def c_call_only(program, inputs):
    """stitch_program_run on DLTensor arrays and outputs made once (the C API's share)."""
    outs = eager_one(inputs) if len(inputs) == 1 else eager_three_two(inputs)
    in_views = [stitch.as_dltensor(t) for t in inputs]
    out_views = [stitch.as_dltensor(t) for t in outs]
    in_arr, out_arr = stitch._dl_array(in_views), stitch._dl_array(out_views)
    h, ni, no = program._h, len(in_views), len(out_views)
    ia, oa = ctypes.addressof(in_arr), ctypes.addressof(out_arr)
    run = stitch._program_run_at

    def call(_inputs):
        # The views and arrays stay alive in this closure.
        return run(h, ia, ni, oa, no, None), in_views, out_views, in_arr, out_arr
    return call


def noop(inputs):
    return inputs


def through_compile(fn, inputs):
    """(hook piece call, compiled stitch, compiled aot_eager) contenders for fn, or a reason why
    there are none (PyTorch 1.x, or the hook made no single piece of it)."""
    if not hasattr(torch, "compile"):
        return None, "PyTorch %s has no torch.compile" % torch.__version__
    import stitch.torch as st
    from stitch.torch import _piece
    calls = []
    original = _piece.Piece.__call__

    def catch(self, *args):
        calls.append((self, args))
        return original(self, *args)

    def star(f):
        return lambda inputs: f(*inputs)

    _piece.Piece.__call__ = catch
    try:
        compiled = torch.compile(fn, backend="stitch")
        compiled(*inputs)
    finally:
        _piece.Piece.__call__ = original
    report = st.last_report()
    graph = report.graph("inference") if report else None
    if len(calls) != 1 or graph is None or graph.replaced_ops != graph.total_ops:
        return None, "the hook did not make one piece of it: %s" % report
    piece, args = calls[0]
    return {
        "hook piece call (stitch.torch)": lambda _inputs: piece(*args),
        'torch.compile, backend="stitch"': star(compiled),
        'torch.compile, backend="aot_eager"': star(torch.compile(fn, backend="aot_eager")),
    }, None


def measure(contenders, inputs, rounds: int, calls: int):
    """Median over rounds of microseconds per call, per contender."""
    names = list(contenders)
    per = {n: [] for n in names}
    for n in names:  # warm up (the first Stitch run of a signature compiles)
        for _ in range(20):
            contenders[n](inputs)
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                fn = contenders[n]
                t0 = time.perf_counter_ns()
                for _ in range(calls):
                    fn(inputs)
                per[n].append((time.perf_counter_ns() - t0) / calls / 1e3)
    finally:
        gc.enable()
    return {n: statistics.median(v) for n, v in per.items()}


def case(name, text, eager, fn, inputs, args):
    program = stitch.compile(text, backend="cpu")
    want = eager(inputs)
    got = program.run_torch(inputs)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)
    for g, w in zip(old_path(program)(inputs), want):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)
    contenders = {
        "no-op": noop,
        "Stitch run_torch": program.run_torch,
        "Stitch output_shapes + run (before)": old_path(program),
        "C call only (stitch_program_run)": c_call_only(program, inputs),
        "PyTorch eager": eager,
    }
    more, why = through_compile(fn, inputs)
    contenders.update(more or {})
    t = measure(contenders, inputs, args.rounds, args.calls)
    base = t["no-op"]
    lines = [f"{name}:", "",
             "| contender | us per call | minus no-op |",
             "|:--|--:|--:|"]
    for n, v in t.items():
        added = "" if n == "no-op" else f"{v - base:.2f}"
        lines.append(f"| {n} | {v:.2f} | {added} |")
    if why:
        lines += ["", f"(No torch.compile rows: {why}.)"]
    return "\n".join(lines), t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    torch.manual_seed(0)
    x, b, s = torch.randn(8, 8), torch.randn(8), torch.randn(8, 8)
    m = machine_info()
    sections = [
        f"Machine: {m['model']}, {m['cores']} CPUs, load average {m['load']}; PyTorch "
        f"{torch.__version__} ({torch.get_num_threads()} threads), Python "
        f"{sys.version.split()[0]}, {stitch.library_path()}, "
        f"{_dt.date.today().isoformat()}. Median of {args.rounds} rounds of {args.calls} calls.",
    ]
    with torch.no_grad():
        text, _ = case("y = x * 2 + 1, x f32[8, 8] (1 input, 1 output)", ONE, eager_one,
                       lambda x: x * 2 + 1, [x], args)
        sections.append(text)
        text, _ = case("a = x + b; y = tanh(a * s); z = a - s, f32[8, 8] (3 inputs, 2 outputs)",
                       THREE_TWO, eager_three_two, lambda x, b, s: eager_three_two([x, b, s]),
                       [x, b, s], args)
        sections.append(text)
    out = "\n\n".join(sections) + "\n"
    print(out)
    if args.out:
        args.out.write_text(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
