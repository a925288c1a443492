#!/usr/bin/env python3
"""Training-step benchmark of the torch.compile backend: a GPT-2 and a Llama-style model from
transformers (random weights, built from configs: nothing is downloaded), one training step
(forward, loss, backward, SGD step) per call, for each contender side by side in one process:

    eager | torch.compile() (Inductor) | torch.compile(backend="stitch")

    PYTHONPATH=python STITCH_LIBRARY=build/ci/src/libstitch.so \\
        .venv-torch/bin/python bench/torch/train_step.py [--device cpu|cuda] [--model gpt2|llama]
        [--batch B] [--seq S] [--layers L] [--hidden H] [--iters N] [--pieces K] [--out FILE]

Like for like: every contender starts from a deep copy of the same weights and gets the same
token batches; the first step's loss of each is compared with eager's (a mismatch is reported in
the table, never hidden). Times are the median and min of --iters steps after warm-up (the first
steps compile); CUDA steps are synchronized. Peak memory is torch.cuda.max_memory_allocated over
the timed steps (CUDA only). Dropout is 0 so all contenders do the same math. Defaults are
GPT-2-small / Llama-style sizes for CUDA and small ones for the CPU. --pieces K adds, per model,
the K Stitch pieces that lose most against the PyTorch ops they replace: each piece's program
and its own eager fx module (the fallback every piece keeps), timed on the arguments of one
training step.
"""
from __future__ import annotations

import argparse
import copy
import datetime as _dt
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import stitch.torch as st  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_models import Sizes, build, piece_times  # noqa: E402


def step_fn(model, opt):
    def step(ids):
        loss = model(ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()
    return step


def measure(step, batches, iters: int, warmup: int, cuda: bool):
    t0 = time.perf_counter()
    first_loss = step(batches[0])
    if cuda:
        torch.cuda.synchronize()
    first = time.perf_counter() - t0
    for i in range(1, warmup):
        step(batches[i % len(batches)])
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(iters):
        t0 = time.perf_counter()
        step(batches[i % len(batches)])
        if cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else None
    return statistics.median(times), min(times), first, float(first_loss), peak


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--model", choices=["gpt2", "llama", "all"], default="all")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq", type=int)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--contenders", default="eager,inductor,stitch")
    ap.add_argument("--pieces", type=int, default=0)
    ap.add_argument("--out")
    a = ap.parse_args()
    cuda = a.device == "cuda"
    batch = a.batch or (16 if cuda else 4)
    seq = a.seq or (512 if cuda else 64)
    layers = a.layers or (12 if cuda else 2)
    hidden = a.hidden or (768 if cuda else 128)
    models = ["gpt2", "llama"] if a.model == "all" else [a.model]
    contenders = a.contenders.split(",")
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, a.vocab, (batch, seq), generator=g).to(a.device)
               for _ in range(4)]
    lines = ["## PyTorch training step: eager vs torch.compile vs backend=\"stitch\" (%s)"
             % a.device, "",
             "%s, PyTorch %s, %s. Batch %d x sequence %d, %d layers, hidden %d, vocab %d, "
             "f32, SGD; median (min) of %d steps after %d warm-up steps; \"first\" is the first "
             "step including compilation." % (
                 torch.cuda.get_device_name() if cuda else platform.processor() or "CPU",
                 torch.__version__, _dt.date.today(), batch, seq, layers, hidden, a.vocab,
                 a.iters, a.warmup), "",
             "Command: `PYTHONPATH=python STITCH_LIBRARY=... %s %s`" % (
                 Path(sys.executable).name, " ".join(["bench/torch/train_step.py"] + sys.argv[1:])),
             "",
             "| model | contender | step ms (median) | min | first step s | vs eager | peak MiB "
             "| loss matches eager |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    reports = []
    pieces = []
    for name in models:
        torch.manual_seed(0)
        base = build(name, Sizes(batch, seq, layers, hidden, a.vocab)).to(a.device)
        eager_ms = eager_loss = None
        for c in contenders:
            model = copy.deepcopy(base)
            opt = torch.optim.SGD(model.parameters(), lr=1e-3)
            if c == "eager":
                run = model
            elif c == "inductor":
                torch._dynamo.reset()
                run = torch.compile(model)
            else:
                torch._dynamo.reset()
                st.clear_reports()
                run = torch.compile(model, backend="stitch")
            med, mn, first, loss, peak = measure(step_fn(run, opt), batches, a.iters,
                                                 a.warmup, cuda)
            if c == "eager":
                eager_ms, eager_loss = med, loss
            ok = "yes" if eager_loss is not None and abs(loss - eager_loss) <= \
                1e-3 * max(1.0, abs(eager_loss)) else "NO (%.6f vs %.6f)" % (loss, eager_loss)
            lines.append("| %s | %s | %.2f | %.2f | %.1f | %s | %s | %s |" % (
                name, c, med, mn, first, "%.2fx" % (eager_ms / med) if eager_ms else "-",
                "%.0f" % peak if peak is not None else "n/a", ok))
            if c == "stitch":
                reports.append((name, st.all_reports()))
                if a.pieces:
                    pieces.append((name, piece_times(step_fn(run, opt), batches[0], cuda,
                                                     a.pieces)))
            print(lines[-1], flush=True)
            del run, model, opt
    lines.append("")
    for name, rs in reports:
        for r in rs:
            for gr in r.graphs:
                lines.append("- %s, %s: %s" % (name, r.name, gr.lines()[0]))
    for name, rows in pieces:
        lines += ["", "%s: the Stitch pieces that lose most against their own eager ops "
                  "(ms per call, one step's arguments):" % name, "",
                  "| piece | Stitch ms | eager ms | ops |", "|---|---:|---:|---|"]
        lines += ["| %s | %.3f | %.3f | %s |" % (n, t_s, t_e, ", ".join(o[:10]))
                  for n, t_s, t_e, o in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        Path(a.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
