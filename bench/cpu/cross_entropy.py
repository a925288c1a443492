#!/usr/bin/env python3
"""CPU benchmark of the fused cross-entropy forward + backward: Stitch against PyTorch eager and
torch.compile (Inductor) on the same shapes and the same math, side by side in one run.

    python bench/cpu/cross_entropy.py [--stitch build/release/tools/stitch] [--iters 10]
        [--torch-python /path/to/python]

The graph is bench/cpu/graphs/cross_entropy_train.stitch: F.cross_entropy(logits, labels) with
reduction='mean' and ignore_index=-100, and its gradient with respect to the logits, at
[4096, 32000] f32 logits and i64 labels. Contenders (medians of --iters runs after warm-up, all
cores):
  - Stitch fused: `stitch run --backend cpu --iters K` (the CLI's steady-state median; outputs
    written into buffers allocated once), and with STITCH_FUSION=off (one kernel per op);
  - PyTorch eager, autograd: loss = F.cross_entropy(x, y); loss.backward() (allocates its
    outputs and intermediates every call, as training does);
  - PyTorch eager, preallocated: the four ATen ops autograd runs (_log_softmax,
    nll_loss_forward, nll_loss_backward, _log_softmax_backward_data) through their `.out`
    variants into buffers allocated once: the like-for-like peer of `stitch run`;
  - torch.compile (Inductor, C++): the same autograd step with F.cross_entropy compiled; AOTAutograd
    compiles a forward and a backward graph (Inductor allocates their outputs; no `out=` form).
The PyTorch peer runs in a subprocess of this script (--peer) with --torch-python (default: the
project's .venv-torch, else this interpreter). Labels are uniform in [0, 32000) with every 16th
row -100 (ignored); `stitch run` draws its own seeded inputs (labels in [-8, 8], so most rows pick
no class): the timing does not depend on the label values, and the peers' outputs are checked
against each other, not against Stitch's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
from common import machine_info, med, stitch_run, stitch_version  # noqa: E402

GRAPH = HERE / "graphs" / "cross_entropy_train.stitch"
TOKENS, CLASSES = 4096, 32000


def peer(job: dict) -> dict:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(job["threads"])
    g = torch.Generator().manual_seed(0)
    x0 = torch.rand(TOKENS, CLASSES, generator=g) * 2 - 1
    y = torch.randint(0, CLASSES, (TOKENS,), generator=g)
    y[::16] = -100
    res = {"version": torch.__version__, "threads": torch.get_num_threads()}

    def timed(fn):
        for _ in range(job["warmup"]):
            fn()
        ts = []
        for _ in range(job["iters"]):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return ts

    x = x0.clone().requires_grad_(True)

    def autograd_step(f):
        def step():
            x.grad = None
            loss = f(x, y)
            loss.backward()
            return loss
        return step

    ce = lambda a, b: F.cross_entropy(a, b)  # noqa: E731  (reduction='mean', ignore_index=-100)
    res["eager_ms"] = timed(autograd_step(ce))
    ref_loss = float(ce(x, y))
    x.grad = None
    ce(x, y).backward()
    ref_grad = x.grad.clone()

    # The same ATen ops autograd runs, into buffers allocated once.
    aten = torch.ops.aten
    lsm = torch.empty(TOKENS, CLASSES)
    loss = torch.empty(())
    total_weight = torch.empty(())
    grad_lsm = torch.empty(TOKENS, CLASSES)
    grad = torch.empty(TOKENS, CLASSES)
    one = torch.ones(())

    def out_step():
        with torch.no_grad():
            aten._log_softmax.out(x0, 1, False, out=lsm)
            aten.nll_loss_forward.output(lsm, y, None, 1, -100, output=loss, total_weight=total_weight)
            aten.nll_loss_backward.grad_input(one, lsm, y, None, 1, -100, total_weight, grad_input=grad_lsm)
            aten._log_softmax_backward_data.out(grad_lsm, lsm, 1, torch.float32, out=grad)

    res["prealloc_ms"] = timed(out_step)
    res["prealloc_matches"] = bool(abs(float(loss) - ref_loss) < 1e-4 and torch.allclose(grad, ref_grad, atol=1e-6))

    if not job["no_compile"]:
        torch._dynamo.reset()
        cce = torch.compile(ce)
        t0 = time.perf_counter()
        autograd_step(cce)()
        res["compile_first_call_s"] = time.perf_counter() - t0
        res["compile_ms"] = timed(autograd_step(cce))
        x.grad = None
        closs = cce(x, y)
        closs.backward()
        res["compile_matches"] = bool(abs(float(closs) - ref_loss) < 1e-4 and
                                      torch.allclose(x.grad, ref_grad, atol=1e-6))
    res["loss"] = ref_loss
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stitch", default=str(REPO / "build/release/tools/stitch"))
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    default_py = REPO / ".venv-torch/bin/python"
    ap.add_argument("--torch-python", default=str(default_py) if default_py.exists() else sys.executable)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--peer", type=Path, help=argparse.SUPPRESS)  # worker: job file
    a = ap.parse_args()
    if a.peer:
        job = json.loads(a.peer.read_text())
        Path(job["result"]).write_text(json.dumps(peer(job)))
        return 0

    minfo = machine_info()
    tmp = Path(tempfile.mkdtemp(prefix="stitch-xent-"))
    rows = {}
    env = {"STITCH_CACHE_DIR": str(tmp / "cache"), "STITCH_NUM_THREADS": str(a.threads)}
    for key, fusion in (("fused", "stitch"), ("off", "off")):
        r = stitch_run(a.stitch, GRAPH, "cross_entropy_train", "cpu", a.iters,
                       dict(env, STITCH_FUSION=fusion))
        rows[key] = r.median_ms if r.error is None else None
        if r.error:
            print(f"stitch {key}: {r.error}", file=sys.stderr)
    job = {"threads": a.threads, "iters": a.iters, "warmup": a.warmup, "no_compile": a.no_compile,
           "result": str(tmp / "torch.json")}
    (tmp / "job.json").write_text(json.dumps(job))
    subprocess.run([a.torch_python, str(Path(__file__).resolve()), "--peer", str(tmp / "job.json")],
                   check=True)
    t = json.loads((tmp / "torch.json").read_text())
    rows["eager"] = med(t["eager_ms"])
    rows["prealloc"] = med(t["prealloc_ms"])
    rows["compile"] = med(t.get("compile_ms"))

    ideal = 2 * TOKENS * CLASSES * 4 + TOKENS * 8 + 4
    names = [("fused", "Stitch fused (1 kernel, preallocated outputs)"),
             ("off", "Stitch, STITCH_FUSION=off (one kernel per op)"),
             ("eager", "PyTorch eager, autograd (allocates)"),
             ("prealloc", "PyTorch eager, ATen .out ops (preallocated)"),
             ("compile", "torch.compile, Inductor C++ (allocates)")]
    print(f"Machine: {minfo['model']}, {minfo['cores']} CPUs; load average {minfo['load']} at the start; "
          f"{a.threads} threads for every contender; medians of {a.iters} runs after {a.warmup} warm-up.")
    print(f"PyTorch {t['version']} ({t['threads']} threads); Stitch {stitch_version(a.stitch)}.")
    print()
    print("| contender | ms | GB/s (ideal 1.05 GB) | Stitch fused speedup |")
    print("|:--|--:|--:|--:|")
    for k, n in names:
        v = rows.get(k)
        f = rows.get("fused")
        print(f"| {n} | {v:.1f} | {ideal / (v * 1e-3) / 1e9:.2f} | {v / f:.2f}x |" if v and f else f"| {n} | n/a | | |")
    print()
    print(f"Peers agree with eager autograd: preallocated {t['prealloc_matches']}, "
          f"torch.compile {t.get('compile_matches', 'n/a')}; torch.compile first call "
          f"{t.get('compile_first_call_s', float('nan')):.1f} s; loss {t['loss']:.4f}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
