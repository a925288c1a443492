#!/usr/bin/env python3
"""The PyTorch hook's benchmark: a BERT-base encoder layer, eager vs `stitch.torch.optimize`
(and, where PyTorch 2.x and a GPU are present, `torch.compile()` vs
`torch.compile(backend="stitch")`), measured side by side in one process.

    PYTHONPATH=python STITCH_LIBRARY=build/release/src/libstitch.so \\
        /usr/bin/python3 bench/torch/run_encoder.py [--device cpu|cuda] [--batch 8] [--seq 128]
        [--iters 20] [--out FILE]

The layer is python/tests/models.py's BertLayer at BERT-base sizes (hidden 768, 12 heads, MLP
3072), in eval mode under no_grad. Each contender runs the same inputs: warm-up calls (the first
one traces, plans and compiles), then the median and min of --iters timed calls (CUDA: each
call synchronized). The hook's report (torch ops replaced, Stitch programs and kernels, ops left
to PyTorch) is printed with the table, and the outputs are checked against eager's. Prints a
Markdown section (also written to --out).
"""
from __future__ import annotations

import argparse
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
sys.path.insert(0, str(REPO / "python" / "tests"))

import stitch  # noqa: E402
import stitch.torch as st  # noqa: E402
from models import BertLayer  # noqa: E402


def timed(fn, args, iters: int, warmup: int, cuda: bool):
    """Median and min milliseconds of fn(*args) after `warmup` calls; the first call's time."""
    t0 = time.perf_counter()
    out = fn(*args)
    if cuda:
        torch.cuda.synchronize()
    first = (time.perf_counter() - t0) * 1e3
    for _ in range(warmup - 1):
        fn(*args)
    times = []
    for _ in range(iters):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(*args)
        if cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times), first, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    cuda = a.device == "cuda"
    torch.manual_seed(0)
    model = BertLayer(hidden=768, heads=12, ffn=3072).eval().to(a.device)
    x = torch.randn(a.batch, a.seq, 768, device=a.device)
    mask = torch.ones(a.batch, a.seq, device=a.device)
    mask[:, -a.seq // 4:] = 0
    rows = []
    with torch.no_grad():
        eager = timed(model, (x, mask), a.iters, a.warmup, cuda)
        rows.append(("PyTorch eager", eager))
        opt = st.optimize(model)
        hooked = timed(opt, (x, mask), a.iters, a.warmup, cuda)
        rows.append(("stitch.torch.optimize", hooked))
        compiled = {}
        if hasattr(torch, "compile") and cuda:
            for name, kw in (("torch.compile()", {}), ('torch.compile(backend="stitch")',
                                                       {"backend": "stitch"})):
                torch._dynamo.reset()
                compiled[name] = timed(torch.compile(model, **kw), (x, mask), a.iters, a.warmup,
                                       cuda)
                rows.append((name, compiled[name]))
    err = (hooked[3] - eager[3]).abs().max().item()
    report = opt.stitch_report
    base = eager[0]
    device = torch.cuda.get_device_name() if cuda else (platform.processor() or platform.machine())
    lines = [
        "## PyTorch hook: a BERT-base encoder layer",
        "",
        "Command:",
        "",
        "```sh",
        "PYTHONPATH=python STITCH_LIBRARY=... " + " ".join([Path(sys.executable).as_posix()] +
                                                           sys.argv),
        "```",
        "",
        f"Device: {a.device} ({device}, {os.cpu_count()} CPUs); PyTorch {torch.__version__}; "
        f"Stitch {stitch.version()}; {_dt.datetime.utcnow():%Y-%m-%d %H:%M} UTC. Layer: hidden "
        f"768, 12 heads, MLP 3072, batch {a.batch} x sequence {a.seq}, f32, eval, no_grad. "
        f"Median and min of {a.iters} calls after {a.warmup} warm-up calls.",
        "",
        "| contender | median ms | min ms | first call ms | vs eager |",
        "|:--|--:|--:|--:|--:|",
    ]
    for name, (med, mn, first, _out) in rows:
        lines.append(f"| {name} | {med:.3g} | {mn:.3g} | {first:.4g} | {base / med:.2f}x |")
    lines += [
        "",
        f"Hook report: {report.replaced_ops} of {report.total_ops} torch ops replaced by "
        f"{report.programs} Stitch programs ({report.kernels} kernels) on the {report.backend} "
        f"backend; left to PyTorch: {', '.join(sorted({f['op'] for f in report.fallbacks}))}. "
        f"Max |optimized - eager| = {err:.2e}.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
