#!/usr/bin/env python3
"""The model benchmark: Hugging Face models, eager vs torch.compile() (Inductor) vs
torch.compile(backend="stitch"), training and inference, one command:

    PYTHONPATH=python STITCH_LIBRARY=build/release/src/libstitch.so .venv-torch/bin/python \\
        bench/torch/models.py [--models gpt2,llama,qwen2,bert,t5,vit] [--modes train,infer]
        [--dtypes f32,bf16] [--threads 1,2] [--rounds 5] [--steps 3] [--pieces K]
        [--contenders eager,inductor,stitch] [--no-first-step] [--device cpu|cuda] [--quick]
        [--out FILE.json] [--markdown FILE.md] [--chart FILE.svg]

What is measured, and how
-------------------------
Models (hf_models.py): GPT-2, Llama, Qwen2, BERT, T5 and ViT, built from configs with random
weights, dropout 0. CPU sizes: hidden 256, 4 layers, batch 8 x sequence 128, vocab 8192, ViT
224x224 images in 16x16 patches (197 tokens); --quick: hidden 64, 2 layers, batch 2 x 32, vocab
512, 32x32 images, 1 round of 1 step; CUDA: GPT-2-small and a Llama of its width (12 layers,
hidden 768, batch 16 x 512, vocab 50257).

A row is (model, mode, dtype, threads). train: forward and the loss (the model's own, from
labels), backward, an optimizer step (AdamW, or --optimizer sgd; eager for every contender: only
the model is compiled, as users do), zero_grad. infer: a no_grad forward in eval mode, returning
the logits. bf16: torch.autocast(device, bfloat16) around the forward, weights in f32 (mixed
precision as users run it). Threads: torch.set_num_threads(T), and STITCH_NUM_THREADS=T and
OMP_NUM_THREADS=T in the environment: Stitch sizes its pool once per process (README,
"Environment variables"), so every row runs in a process of its own.

Per row, in one fresh process (cold compiler caches: TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR
and STITCH_CACHE_DIR in a new temporary directory, STITCH_CACHE=1 and STITCH_REMOTE_CACHE=off
whatever the caller set; STITCH_CACHE_KEY fixed, so entries verify in
the second process): Dynamo and AOTAutograd are imported and exercised on a tiny function first
(their one-time start-up belongs to no contender); then each contender gets a deep copy of the
same weights, its first step on the first batch is timed (the cold first step: tracing and
compiling included), then --warmup more steps. Its first loss (train) or logits (infer) is compared
with eager's: |a - b| / max(1, max|b|) within 1e-3 (f32) or 5e-2 (bf16), else the table says
NO with the figure. Then --rounds interleaved rounds: each round times --steps consecutive steps
of every contender in turn (the order rotates each round), two input batches alternating; a
contender's step time is the median over rounds of (round time / steps). CUDA: synchronized after
each contender's steps; peak memory is torch.cuda.max_memory_allocated over its steps, minus what
was allocated when they started (every contender's weights stay resident).

First step, warm: a second process re-runs the row's compiled contenders with the caches the first
filled and times each first step; for Stitch it reports the kernels compiled in that process
(the engine's cache statistics), the signatures served from whole-program cache entries, and
Stitch's own time in that first step (GraphReport.stitch_seconds: partitioning and building the
pieces, compiling their programs, each input signature's set-up with its first run): the first
step minus the second minus that is Dynamo's and AOTAutograd's time and the step's other
first-time costs.

The split of a step, per contender: four more steps under torch.profiler (CPU activity), the
first untimed (the profiler's own start-up), each of the others in a record_function of its own;
each figure below is the median over those three steps. Stitch runs are wrapped in
record_function("stitch::program_run") while profiling; Inductor's C++ kernels record themselves
(TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE=1, set for the whole row so that timed and profiled code
are the same; the record costs one check per kernel call when not profiling):
  library   = the inclusive CPU time of every outermost profiler event of a library op: matmul
              (mm, bmm, addmm, baddbmm, matmul, linear), attention (scaled_dot_product_* and its
              kernels), embedding (embedding, embedding_backward), convolution (convolution*,
              conv*d, mkldnn convolution/linear). Under autocast an eager library op's argument
              casts run inside its call and count here.
  memory    = the self CPU time of every other op event outside library ops that does work:
              aten ops other than views, metadata and allocation (HOST_OPS), Stitch program runs,
              Inductor's C++ kernels (cpp_fused_*). This is "the memory-bound rest"; a
              training step's (eager) optimizer update is part of it for every contender.
  host      = the contender's median step time (unprofiled) minus library and memory: Python,
              Dynamo guards, the compiled wrappers, autograd's engine, allocation, dispatch.
              It comes out below 0 when the profiled steps ran slower than the timed ones
              (noise, at steps of a few ms); it is reported as measured.
CUDA: library and memory are device kernel time (the kernels under outermost library ops, and
all other kernels); host is the step time minus all kernel time.

Robustness: a contender that fails (compile error, wrong output shape, exception in a round) has
its error in the table and the JSON; other contenders go on; a row process that dies costs its
row only. Stitch's report is kept per row: programs, kernels, ops in Stitch, ops left to
PyTorch that are not library ops, pieces that failed and run eagerly, eager runs at run time.
--pieces K adds the K Stitch pieces that lose most against their own eager fx modules.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata as _md
import importlib.util
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DRIVER = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))  # bench/common.py
sys.path.insert(0, str(HERE))  # hf_models.py
if importlib.util.find_spec("stitch") is None:
    sys.path.insert(0, str(REPO / "python"))  # the source tree's stitch, unless one is installed

from common import (caller_path, fmt_x, geomean, log, machine_info, med, peer_main,  # noqa: E402
                    run_peer, save_partial)

MODELS = ("gpt2", "llama", "qwen2", "bert", "t5", "vit")  # hf_models.MODELS (it imports torch)
CONTENDERS = ("eager", "inductor", "stitch")
CACHE_KEY = "stitch-bench-models-fixed-key-0123456789abcdef"  # any 32+ bytes, the same each run
SIZES = {  # batch, seq, layers, hidden, vocab, image, patch
    "cpu": dict(batch=8, seq=128, layers=4, hidden=256, vocab=8192, image=224, patch=16),
    "quick": dict(batch=2, seq=32, layers=2, hidden=64, vocab=512, image=32, patch=8),
    "cuda": dict(batch=16, seq=512, layers=12, hidden=768, vocab=50257, image=224, patch=16),
}
LIBRARY = re.compile(r"aten::(mm|bmm|addmm|baddbmm|addbmm|matmul|linear|_?scaled_dot_product\w*|"
                     r"_flash_attention\w*|_efficient_attention\w*|_cudnn_attention\w*|embedding\w*|"
                     r"\w*convolution\w*|conv[123]d|_slow_conv2d\w*)$|mkldnn::\w*(linear|conv)\w*")
HOST_OPS = {  # aten ops that move no data: views, metadata, allocation
    "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "t", "transpose",
    "permute", "expand", "expand_as", "squeeze", "unsqueeze", "slice", "select", "alias",
    "detach", "detach_", "empty", "empty_strided", "empty_like", "lift_fresh", "resolve_conj",
    "resolve_neg", "split", "split_with_sizes", "chunk", "unbind", "narrow", "view_as",
    "flatten", "unflatten", "result_type", "item", "_local_scalar_dense", "is_nonzero",
    "set_", "resize_", "record_stream", "new_empty", "new_empty_strided", "empty_permuted",
    "contiguous", "to", "_to_copy", "_has_compatible_shallow_copy_type", "numpy_T", "size"}


# ------------------------------------------------------------------------------------------------
# The row process (and the warm-cache process), run as peers of this script
# ------------------------------------------------------------------------------------------------

def _setup(job):
    """torch with the row's threads and Dynamo primed (module note)."""
    import torch
    import torch._dynamo
    torch.set_num_threads(job["threads"])
    for knob in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 64)
    x = torch.ones(4, requires_grad=True)
    torch.compile(lambda t: (t * 2).sin().sum(), backend="aot_eager")(x).backward()
    torch._dynamo.reset()
    import hf_models
    import stitch.torch  # noqa: F401  (registers backend="stitch")
    return torch, hf_models


def _sync(torch, cuda):
    if cuda:
        torch.cuda.synchronize()


def _error(e: BaseException) -> str:
    lines = [l for l in str(e).splitlines() if l.strip()]
    return "%s: %s" % (type(e).__name__, lines[0][:300] if lines else "")


def _contender(torch, hf, job, base, c):
    import copy
    model = copy.deepcopy(base)
    run = model if c == "eager" else torch.compile(model) if c == "inductor" else \
        torch.compile(model, backend="stitch")
    if job["mode"] == "infer":
        return hf.infer_step(run, job["device"], job["dtype"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if job["optimizer"] == "adamw" else \
        torch.optim.SGD(model.parameters(), lr=1e-3)
    return hf.train_step(run, opt, job["device"], job["dtype"])


def _row_inputs(job):
    torch, hf = _setup(job)
    s = hf.Sizes(**job["sizes"])
    torch.manual_seed(0)
    base = hf.build(job["model"], s).to(job["device"])
    train = job["mode"] == "train"
    base.train(train)
    gen = torch.Generator().manual_seed(1)
    batches = [hf.batch(job["model"], s, job["device"], gen, train) for _ in range(2)]
    return torch, hf, base, batches


def _diff(out, ref) -> float:
    a, b = out.detach().float(), ref.detach().float()
    if a.shape != b.shape:
        return float("inf")
    d = (a - b).abs().max().item() / max(1.0, b.abs().max().item())
    return float("inf") if d != d else d


def _split(torch, step, batches, step_ms, cuda, n=3):
    """library / memory / host milliseconds of a step: the median over n profiled steps (after
    one more untimed under the profiler: its first step pays the profiler's own start-up)."""
    import stitch
    from torch.profiler import ProfilerActivity, profile, record_function
    run = stitch._program_run_at

    def traced(*a):
        with record_function("stitch::program_run"):
            return run(*a)
    stitch._program_run_at = traced  # run_torch looks it up per call
    try:
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=acts) as prof:
            for i in range(n + 1):
                with record_function("bench::step %d" % i):
                    step(batches[i % 2])
                    _sync(torch, cuda)
    finally:
        stitch._program_run_at = run

    def dev(e, attr):  # device_* in PyTorch 2.4 and later, cuda_* before
        return getattr(e, attr) if hasattr(e, attr) else getattr(e, attr.replace("device", "cuda"))
    per = {"bench::step %d" % i: [0.0, 0.0] for i in range(1, n + 1)}  # library, memory (µs)
    top = {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CPU:
            continue
        chain, p = [], e.cpu_parent
        while p is not None:
            chain.append(p.name)
            p = p.cpu_parent
        at = next((x for x in chain if x in per), None)
        if at is None or any(LIBRARY.match(x) for x in chain):
            continue  # outside the measured steps, or inside a library op counted whole
        if LIBRARY.match(e.name):
            t, k = dev(e, "device_time_total") if cuda else e.cpu_time_total, 0
        elif not cuda and ((e.name.startswith("aten::") and e.name[6:] not in HOST_OPS) or
                           e.name.startswith("stitch::") or "cpp_fused" in e.name):
            t, k = e.self_cpu_time_total, 1
        else:
            continue
        per[at][k] += t
        top[e.name] = top.get(e.name, 0.0) + t / 1e3 / n
    lib = med([v[0] for v in per.values()]) / 1e3
    mem = med([v[1] for v in per.values()]) / 1e3
    if cuda:  # kernels carry no CPU parent: every kernel of the n + 1 steps, per step
        kernels = sum(dev(e, "self_device_time_total") for e in prof.events()
                      if e.device_type != torch.autograd.DeviceType.CPU)
        mem = kernels / 1e3 / (n + 1) - lib
    return {"library_ms": lib, "memory_ms": mem, "host_ms": step_ms - lib - mem,
            "profiled_steps": n, "top_ops": dict(sorted(top.items(), key=lambda kv: -kv[1])[:12])}


def _stitch_report(st) -> dict:
    graphs = [g for r in st.all_reports() for g in r.graphs]
    left = {}
    for g in graphs:
        for f in g.fallbacks:
            op = f["op"].replace("aten.", "").split(".")[0]
            if not LIBRARY.match("aten::" + op) and op not in HOST_OPS:
                left[op] = left.get(op, 0) + 1
    stats = {}
    for g in graphs:
        for k, v in g.plan_stats().items():
            stats[k] = stats.get(k, 0) + v
    return {"graphs": len(graphs), "programs": sum(g.programs for g in graphs),
            "kernels": sum(g.kernels for g in graphs),
            "ops_in_stitch": sum(g.replaced_ops for g in graphs),
            "total_ops": sum(g.total_ops for g in graphs),
            "left_to_pytorch": left,  # ops, not library ops or views, that Stitch did not take
            "failed_pieces": [p["name"] + ": " + p["failed"] for g in graphs for p in g.pieces
                              if p["failed"] is not None],
            "eager_runs": sum(sum(g.runtime_fallbacks.values()) for g in graphs),
            "stitch_s": sum(g.stitch_seconds() for g in graphs),
            "plan_stats": stats, "summary": [r.name + ": " + g.lines()[0]
                                             for r in st.all_reports() for g in r.graphs]}


def _cache_stats(torch, device):
    from stitch.torch._piece import engine_for
    return engine_for(torch.device(device)).cache_stats()


def row_peer(job: dict) -> dict:
    torch, hf, base, batches = _row_inputs(job)
    import stitch.torch as st
    cuda, train = job["device"] == "cuda", job["mode"] == "train"
    tol = 1e-3 if job["dtype"] == "f32" else 5e-2
    res = {"versions": {"torch": torch.__version__, "transformers": _md.version("transformers")},
           "contenders": {}}
    C, steps, ref = res["contenders"], {}, None
    for c in job["contenders"]:
        r = C[c] = {}
        try:
            step = _contender(torch, hf, job, base, c)
            t0 = time.perf_counter()
            out = step(batches[0])
            _sync(torch, cuda)
            r["first_s"] = time.perf_counter() - t0
            for i in range(job["warmup"]):
                t0 = time.perf_counter()
                step(batches[(i + 1) % 2])
                _sync(torch, cuda)
                r.setdefault("second_s", time.perf_counter() - t0)  # high: it compiled again
            if c == "eager":
                ref = out.detach().clone()
            elif ref is not None:
                r["diff"] = _diff(out, ref)
                r["match"] = r["diff"] <= tol
            if train:
                r["first_loss"] = float(out)
            steps[c] = step
        except Exception as e:  # noqa: BLE001  (recorded in the table; the row goes on)
            r["error"] = _error(e)
        save_partial(job, res)
    for rnd in range(job["rounds"]):
        order = [c for c in job["contenders"] if c in steps]
        k = rnd % max(len(order), 1)
        for c in order[k:] + order[:k]:
            try:
                if cuda:
                    torch.cuda.reset_peak_memory_stats()
                    before = torch.cuda.memory_allocated()
                t0 = time.perf_counter()
                for i in range(job["steps"]):
                    steps[c](batches[i % 2])
                _sync(torch, cuda)
                C[c].setdefault("round_ms", []).append(
                    (time.perf_counter() - t0) / job["steps"] * 1e3)
                if cuda:
                    C[c]["peak_mib"] = max(C[c].get("peak_mib", 0),
                                           (torch.cuda.max_memory_allocated() - before) / 2**20)
            except Exception as e:  # noqa: BLE001
                C[c]["error"] = _error(e)
                del steps[c]
        save_partial(job, res)
    for c, step in steps.items():
        C[c]["ms"], C[c]["min_ms"] = med(C[c]["round_ms"]), min(C[c]["round_ms"])
        try:
            C[c]["split"] = _split(torch, step, batches, C[c]["ms"], cuda)
        except Exception as e:  # noqa: BLE001
            C[c]["split_error"] = _error(e)
    if "stitch" in C:
        C["stitch"]["report"] = _stitch_report(st)
        C["stitch"]["cache"] = _cache_stats(torch, job["device"])
        if job["pieces"] and "stitch" in steps:
            try:
                C["stitch"]["pieces"] = [
                    {"piece": n, "stitch_ms": a, "eager_ms": b, "ops": o}
                    for n, a, b, o in hf.piece_times(steps["stitch"], batches[0], cuda,
                                                     job["pieces"])]
            except Exception as e:  # noqa: BLE001
                C["stitch"]["pieces_error"] = _error(e)
    return res


def warm_peer(job: dict) -> dict:
    """The row's compiled contenders in a new process on the caches the row's process filled."""
    torch, hf, base, batches = _row_inputs(job)
    import stitch.torch as st
    cuda = job["device"] == "cuda"
    res = {}
    for c in job["contenders"]:
        if c == "eager":
            continue
        try:
            before = _cache_stats(torch, job["device"]) if c == "stitch" else None
            step = _contender(torch, hf, job, base, c)
            times = []
            for i in range(2):  # the first step, then a warm one for reference
                t0 = time.perf_counter()
                step(batches[i])
                _sync(torch, cuda)
                times.append(time.perf_counter() - t0)
            res[c] = {"first_s": times[0], "second_s": times[1]}
            if c == "stitch":
                after = _cache_stats(torch, job["device"])
                rep = _stitch_report(st)
                res[c].update(kernels_compiled=after["compiles"] - before["compiles"],
                              disk_hits=after["disk_hits"] - before["disk_hits"],
                              stitch_s=rep["stitch_s"],
                              warm_starts=rep["plan_stats"].get("warm_starts", 0),
                              signatures=rep["plan_stats"].get("signatures", 0))
        except Exception as e:  # noqa: BLE001
            res[c] = {"error": _error(e)}
        save_partial(job, res)
    return res


PEERS = {"row": row_peer, "warm": warm_peer}


# ------------------------------------------------------------------------------------------------
# The driver: one row process (and one warm process) per row, then the tables and the chart
# ------------------------------------------------------------------------------------------------

def _ratio(a, b):
    return a / b if a and b else None


def _cell_ms(c: dict | None) -> str:
    if not c:
        return "—"
    if c.get("ms") is None:
        return "error" if c.get("error") else "n/a"
    return "%.1f" % c["ms"] + (" (%.0f MiB)" % c["peak_mib"] if "peak_mib" in c else "")


def _match(c: dict | None) -> str:
    if not c or "match" not in c:
        return "—"
    return "yes" if c["match"] else "**NO** (%.2g)" % c["diff"]


def _label(r):
    return "%s %s %s %dt" % (r["model"], r["mode"], r["dtype"], r["threads"])


def markdown(rows, host, a, command) -> str:
    cs = a.contenders
    L = ["## Models: eager vs torch.compile() vs torch.compile(backend=\"stitch\") (%s)" % a.device,
         "",
         "%s (%s logical CPUs, %s; load average at start %s), PyTorch %s, transformers %s, %s. "
         "Sizes: %s. %s. Step time: median over %d interleaved rounds of %d steps each "
         "(ms per step); \"vs X\" = X's time / Stitch's (above 1: Stitch faster)." % (
             host["model"], host["cores"], ", ".join(host["isa"]) or "no AVX2",
             host["load"], host["torch"], host["transformers"], host["date"],
             ", ".join("%s %s" % kv for kv in a.sizes.items()),
             "Training step: forward, loss, backward, %s step (eager); inference: no_grad forward. "
             "bf16: torch.autocast, f32 weights" % a.optimizer, a.rounds, a.steps),
         "", "Command: `%s`" % command, "",
         "| row | " + " | ".join(("%s ms" + (" (peak)" if a.device == "cuda" else "")) % c for c in cs) +
         " | vs inductor | vs eager | matches eager (ind / st) | Stitch: programs, kernels, "
         "failed pieces, eager runs, other ops left |",
         "|---|" + "---:|" * (len(cs) + 2) + "---|---|"]
    for r in rows:
        C = r.get("contenders", {})
        s = C.get("stitch", {})
        rep = s.get("report")
        L.append("| %s | %s | %s | %s | %s / %s | %s |" % (
            _label(r), " | ".join(_cell_ms(C.get(c)) for c in cs),
            fmt_x(r.get("vs_inductor")), fmt_x(r.get("vs_eager")),
            _match(C.get("inductor")), _match(s),
            "%d, %d, %d, %d, %d" % (rep["programs"], rep["kernels"], len(rep["failed_pieces"]),
                                    rep["eager_runs"], sum(rep["left_to_pytorch"].values()))
            if rep else "—"))
    g_i = geomean(r.get("vs_inductor") for r in rows)
    g_e = geomean(r.get("vs_eager") for r in rows)
    L += ["", "Geomean: Stitch vs Inductor %s, vs eager %s." % (fmt_x(g_i), fmt_x(g_e)), "",
          "Split of the step (ms: library ops / memory-bound rest / host; module note of "
          "bench/torch/models.py) and the rest of the step (memory + host) of Inductor / Stitch's:",
          "", "| row | " + " | ".join(cs) + " | rest: inductor / stitch |",
          "|---|" + "---|" * len(cs) + "---:|"]
    for r in rows:
        C = r.get("contenders", {})
        cells = []
        for c in cs:
            sp = C.get(c, {}).get("split")
            cells.append("%.1f / %.1f / %.1f" % (sp["library_ms"], sp["memory_ms"], sp["host_ms"])
                         if sp else "—")
        L.append("| %s | %s | %s |" % (_label(r), " | ".join(cells), fmt_x(r.get("rest_ratio"))))
    if a.first_step:
        L += ["", "First step (s): cold (fresh caches) and warm (a new process on the caches the "
              "first filled); the warm process's second step (ms) for reference; Stitch's own "
              "time in its warm first step (s: partitioning, programs compiled, each signature's "
              "set-up and first run; GraphReport.stitch_seconds), and the rest of that first step "
              "beyond its second (Dynamo, AOTAutograd and the step's first-time costs); kernels "
              "Stitch compiled in the warm process and signatures it served from program "
              "entries:", "",
              "| row | eager | inductor cold | inductor warm | stitch cold | stitch warm | "
              "warm 2nd step ms ind / st | stitch own (warm) | rest beyond 2nd step | "
              "stitch kernels compiled (warm) | warm starts |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

        def sec(d, k, scale=1.0):
            if d and d.get(k) is not None:
                return "%.2f" % (d[k] * scale)
            return "error" if d and d.get("error") else "—"
        def rest(d):
            if d and all(d.get(k) is not None for k in ("first_s", "second_s", "stitch_s")):
                return "%.2f" % (d["first_s"] - d["second_s"] - d["stitch_s"])
            return "—"
        for r in rows:
            C, W = r.get("contenders", {}), r.get("warm") or {}
            L.append("| %s | %s | %s | %s | %s | %s | %s / %s | %s | %s | %s | %s |" % (
                _label(r), sec(C.get("eager"), "first_s"), sec(C.get("inductor"), "first_s"),
                sec(W.get("inductor"), "first_s"), sec(C.get("stitch"), "first_s"),
                sec(W.get("stitch"), "first_s"), sec(W.get("inductor"), "second_s", 1e3),
                sec(W.get("stitch"), "second_s", 1e3), sec(W.get("stitch"), "stitch_s"),
                rest(W.get("stitch")),
                W.get("stitch", {}).get("kernels_compiled", "—"),
                W.get("stitch", {}).get("warm_starts", "—")))
    errors = ["- %s, %s: %s" % (_label(r), c, d[k]) for r in rows
              for c, d in list(r.get("contenders", {}).items()) + [
                  ("warm " + c, d) for c, d in (r.get("warm") or {}).items()]
              for k in ("error", "split_error", "pieces_error") if d.get(k)]
    errors += ["- %s: %s" % (_label(r), r["error"]) for r in rows if r.get("error")]
    if errors:
        L += ["", "Errors:", ""] + errors
    fb = []
    for r in rows:
        rep = r.get("contenders", {}).get("stitch", {}).get("report")
        if rep and (rep["left_to_pytorch"] or rep["failed_pieces"]):
            fb.append("- %s: %s" % (_label(r), "; ".join(
                [", ".join("%s x%d" % kv for kv in sorted(rep["left_to_pytorch"].items(),
                                                          key=lambda kv: -kv[1]))] +
                ["failed, runs eagerly: " + f for f in rep["failed_pieces"]])))
    if fb:
        L += ["", "Ops (not library ops or views) that Stitch left to PyTorch, and Stitch pieces "
              "that failed and run eagerly:", ""] + fb
    for r in rows:
        P = r.get("contenders", {}).get("stitch", {}).get("pieces")
        if P:
            L += ["", "%s: the Stitch pieces that lose most against their own eager ops (ms per "
                  "call, one step's arguments):" % _label(r), "",
                  "| piece | Stitch ms | eager ms | ops |", "|---|---:|---:|---|"]
            L += ["| %s | %.3f | %.3f | %s |" % (p["piece"], p["stitch_ms"], p["eager_ms"],
                                                ", ".join(p["ops"][:10])) for p in P]
    return "\n".join(L) + "\n"


def svg_chart(rows) -> str:
    """Horizontal bars per row: Stitch's speed over Inductor's and over eager's (1.0 marked)."""
    bars = [(_label(r), r.get("vs_inductor"), r.get("vs_eager")) for r in rows]
    top = max([2.0] + [x for _, a, b in bars for x in (a, b) if x]) * 1.05
    lw, w, bh, pad = 190, 520, 9, 8
    h = 40 + len(bars) * (2 * bh + pad) + 30
    x = lambda v: lw + w * v / top  # noqa: E731
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif"'
           ' font-size="11">' % (lw + w + 20, h), '<rect width="100%" height="100%" fill="white"/>',
           '<text x="10" y="16" font-size="13">Stitch step speed over Inductor\'s (blue) and '
           'eager\'s (orange); right of the line: Stitch faster</text>']
    y = 30
    for name, vi, ve in bars:
        out.append('<text x="%d" y="%d" text-anchor="end">%s</text>' % (lw - 6, y + bh + 3, name))
        for k, (v, col) in enumerate(((vi, "#4878d0"), (ve, "#ee854a"))):
            if v:
                out.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>'
                           '<text x="%.1f" y="%d">%.2f</text>' % (lw, y + k * bh, x(v) - lw, bh - 1,
                                                                 col, x(v) + 3, y + k * bh + 8, v))
        y += 2 * bh + pad
    out.append('<line x1="%.1f" y1="24" x2="%.1f" y2="%d" stroke="black" stroke-dasharray="4 3"/>'
               % (x(1), x(1), y))
    for t in range(0, int(top) + 1):
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%dx</text>' % (x(t), y + 14, t))
    return "\n".join(out + ["</svg>"]) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", help="comma list of %s (default: all; CUDA: gpt2,llama)"
                    % ",".join(MODELS))
    ap.add_argument("--modes", default="train,infer")
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--contenders", default=",".join(CONTENDERS))
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 5; --quick 1)")
    ap.add_argument("--steps", type=int, help="steps per contender per round (default 3; --quick 1)")
    ap.add_argument("--warmup", type=int, help="steps after the first, untimed (default 2; --quick 1)")
    ap.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    ap.add_argument("--first-step", action=argparse.BooleanOptionalAction, default=True,
                    help="time the first step again in a new process on warm caches")
    ap.add_argument("--pieces", type=int, default=0, help="per row, the K Stitch pieces that lose most")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, 1 round of 1 step")
    for k in ("batch", "seq", "layers", "hidden", "vocab", "image", "patch"):
        ap.add_argument("--" + k, type=int, help="override the default size")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per row process")
    ap.add_argument("--out", type=Path, help="JSON with every raw figure")
    ap.add_argument("--markdown", type=Path, help="the BENCHMARKS.md section")
    ap.add_argument("--chart", type=Path, help="an SVG bar chart")
    ap.add_argument("--render", type=Path, metavar="JSON",
                    help="run nothing: write the tables and chart of an earlier run's --out")
    ap.add_argument("--peer", choices=sorted(PEERS), help=argparse.SUPPRESS)
    ap.add_argument("--job", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.peer:
        return peer_main(PEERS, a.peer, a.job, a.result)
    if a.render:
        d = json.loads(caller_path(a.render).read_text())
        return report(d["rows"], d["host"], argparse.Namespace(**d["args"]), d["command"],
                      caller_path(a.markdown), caller_path(a.chart))

    def listed(text, known, what):
        items = [x for x in text.split(",") if x]
        bad = [x for x in items if x not in known]
        if bad or not items:
            ap.error("--%s: %s not among %s" % (what, ", ".join(bad) or "nothing", ", ".join(known)))
        return items
    a.models = listed(a.models or ("gpt2,llama" if a.device == "cuda" else ",".join(MODELS)),
                      MODELS, "models")
    a.modes = listed(a.modes, ("train", "infer"), "modes")
    a.dtypes = listed(a.dtypes, ("f32", "bf16"), "dtypes")
    a.contenders = listed(a.contenders, CONTENDERS, "contenders")
    try:
        a.threads = [int(t) for t in a.threads.split(",")]
        assert a.threads and all(t >= 1 for t in a.threads)
    except (ValueError, AssertionError):
        ap.error("--threads: a comma list of positive integers, not %r" % a.threads)
    q = a.quick
    a.rounds, a.steps, a.warmup = a.rounds or (1 if q else 5), a.steps or (1 if q else 3), \
        a.warmup if a.warmup is not None else (1 if q else 2)
    a.sizes = dict(SIZES["quick" if q else a.device])
    a.sizes.update({k: getattr(a, k) for k in a.sizes if getattr(a, k) is not None})
    a.out, a.markdown, a.chart = caller_path(a.out), caller_path(a.markdown), caller_path(a.chart)
    compiled = [c for c in a.contenders if c != "eager"]
    a.first_step = first_step = a.first_step and bool(compiled)

    t_start = time.perf_counter()
    host = machine_info()
    host.update(date=_dt.datetime.now().isoformat(timespec="seconds"),
                torch=_md.version("torch"), transformers=_md.version("transformers"),
                python=sys.version.split()[0])
    command = "PYTHONPATH=python STITCH_LIBRARY=... %s bench/torch/models.py %s" % (
        Path(sys.executable).name, " ".join(sys.argv[1:]))
    tmp = Path(tempfile.mkdtemp(prefix="stitch-models-"))
    rows, notes = [], []
    args = {k: getattr(a, k) for k in ("device", "contenders", "sizes", "optimizer", "rounds",
                                       "steps", "first_step")}

    def save():  # after every row: a run stopped midway keeps what it measured
        if a.out:
            a.out.write_text(json.dumps({"host": host, "command": command, "args": args,
                                         "rows": rows, "notes": notes}, indent=1))
    for threads in a.threads:
        for model in a.models:
            for mode in a.modes:
                for dtype in a.dtypes:
                    row = dict(model=model, mode=mode, dtype=dtype, threads=threads)
                    log("row " + _label(row))
                    cache = tmp / "cache"
                    shutil.rmtree(cache, ignore_errors=True)
                    # The disk cache on (a caller's STITCH_CACHE=0 would make every first step
                    # cold) and no remote layer (it would make the cold one warm).
                    env = {"STITCH_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
                           "STITCH_CACHE": "1", "STITCH_REMOTE_CACHE": "off",
                           "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
                           "TRITON_CACHE_DIR": str(cache / "triton"),
                           "STITCH_CACHE_DIR": str(cache / "stitch"), "STITCH_CACHE_KEY": CACHE_KEY,
                           "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE": "1"}
                    job = dict(row, device=a.device, sizes=a.sizes, contenders=a.contenders,
                               rounds=a.rounds, steps=a.steps, warmup=a.warmup,
                               optimizer=a.optimizer, pieces=a.pieces)
                    t0 = time.perf_counter()
                    n = len(notes)
                    res = run_peer(DRIVER, "row", sys.executable, job, tmp, notes, a.timeout, env)
                    row.update(res or {"error": notes[-1] if len(notes) > n else "no result"})
                    if first_step and res:
                        row["warm"] = run_peer(DRIVER, "warm", sys.executable,
                                               dict(job, contenders=compiled), tmp, notes,
                                               a.timeout, env)
                    row["wall_s"] = time.perf_counter() - t0
                    C = row.get("contenders", {})
                    ms = {c: C.get(c, {}).get("ms") for c in CONTENDERS}
                    row["vs_inductor"] = _ratio(ms["inductor"], ms["stitch"])
                    row["vs_eager"] = _ratio(ms["eager"], ms["stitch"])
                    sp = {c: C.get(c, {}).get("split") for c in ("inductor", "stitch")}
                    if all(sp.values()):
                        rest = {c: s["memory_ms"] + s["host_ms"] for c, s in sp.items()}
                        row["rest_ratio"] = _ratio(rest["inductor"], rest["stitch"])
                    rows.append(row)
                    log("%s: %s ms; vs inductor %s, vs eager %s (%.0f s)" % (
                        _label(row), ", ".join("%s %s" % (c, _cell_ms(C.get(c)))
                                               for c in a.contenders),
                        fmt_x(row["vs_inductor"]), fmt_x(row["vs_eager"]), row["wall_s"]))
                    save()
    host["load_end"] = machine_info()["load"]
    host["wall_s"] = time.perf_counter() - t_start
    save()
    shutil.rmtree(tmp, ignore_errors=True)
    report(rows, host, a, command, a.markdown, a.chart)
    log("done in %.0f s" % host["wall_s"])
    return 0


def report(rows, host, a, command, md: Path | None, chart: Path | None) -> int:
    text = markdown(rows, host, a, command)
    print(text)
    if md:
        md.write_text(text)
    if chart:
        chart.write_text(svg_chart(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
