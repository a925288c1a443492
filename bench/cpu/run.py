#!/usr/bin/env python3
"""CPU benchmark: Stitch against PyTorch eager, torch.compile (Inductor, C++) and JAX on
memory-bound graphs (an inference suite, a training suite and the small sizes the PyTorch hook
sees), with the machine's copy bandwidth measured in the same run, and the cost model's pick
against its runner-up plans, measured.

Usually started by scripts/bench-cpu.sh, which builds `stitch` and the peers' virtualenv. Run
directly:

    python bench/cpu/run.py [--smoke] [--out FILE] [--stitch build/release/tools/stitch]

Design
  - Suites. "inference" and "training" (backward passes, batch-norm statistics, cross-entropy
    forward + backward, Adam with clipping, GroupNorm + SiLU: bench/cpu/graphs, the f32 graphs of
    bench/gpu/graphs at host sizes) move tens to ~200 MB per call, well past the last-level
    cache; "small" runs layer norm, softmax, bias + GELU + residual and softmax backward at 64 KB,
    256 KB and 1 MB per tensor (each file rewritten with those shapes into a temp dir), where the
    cost of a call dominates. The peers compute the same math on the same shapes (torch: the
    library op for a composite, one tensor op per primitive otherwise, common.training_fns; JAX:
    jnp/jax.nn under jax.jit); their outputs' sums are checked against eager's on the same inputs.
  - Like for like, two settings, each its own table:
      A. preallocated: `stitch run FILE --iters K` (outputs allocated once before the timed runs)
         against PyTorch eager with `out=` into buffers allocated once (every op of the graph, so
         no allocation per call; written for the graphs in torch_out_fns, n/a elsewhere) and the
         peers as they are with glibc told to keep freed memory (mallopt M_MMAP_THRESHOLD and
         M_TRIM_THRESHOLD = 1 GiB, as MALLOC_MMAP_THRESHOLD_=1073741824
         MALLOC_TRIM_THRESHOLD_=1073741824 would: a fresh output reuses freed pages instead of
         page-faulting new ones). torch.compile and JAX have no `out=`: allocator setting only.
         The Stitch hook (B's Stitch column) is shown here too, under the same allocator setting.
      B. fresh outputs: Stitch through the Python binding's PyTorch hot path,
         `stitch.Program.run_torch` (python/stitch: new output tensors with torch.empty on every
         call, as the PyTorch hook runs a compiled piece), against the peers as they are, glibc's
         defaults (tensors above its mmap threshold are mmapped and page-faulted on every call).
         run_torch maps host outputs of 32 MiB or more into transparent huge pages of their own
         (one fault per 2 MiB); the peers' outputs fault 4 KiB at a time. The hook is measured both ways in
         B, the second with STITCH_HUGE_PAGES=0 ("4 KiB pages"): the kernels' part apart from the
         pages' part. PyTorch offers its tensors huge pages through THP_MEM_ALLOC_ENABLE=1, which
         the peers run without, as users do by default.
    Each peer process measures B for every graph first (glibc untouched), then switches the
    allocator (mallopt) and measures A: torch.compile and jax.jit compile once per graph.
  - Rounds (--rounds R, default 1): the copy, every peer and `stitch run` measured R times over,
    round after round; each cell is the contender's best round (the lowest median; copy: the
    highest bandwidth). On a shared VM the memory bandwidth the neighbours leave varies by up to
    2x within minutes, and a contender measured in a bad minute loses for the machine's sake: the
    best round of each, taken the same way for all, compares them at the machine's best. Compile
    times, page faults and sums are the first round's.
  - Copy bandwidth: read + written bytes of a 256 MiB f32 copy, median: numpy (1 thread) and torch
    `copy_` on --threads threads; the larger is "copy", and every cell says its % of it.
  - cost section: for every graph, the planner's pick, its next best plans (`stitch run
    --plan-candidate k`) and STITCH_FUSION=basic, each measured by `stitch run` (common.py's
    measure_cost_model, shared with the GPU driver): how often the pick is within 5% of the
    fastest measured plan.
  - Peers run in subprocesses of this script (`--peer torch|hook|jax|copy`), so another
    interpreter can run PyTorch and one peer's allocator and thread pools never disturb another's
    (the Stitch hook has a process of its own too, so its thread pool and PyTorch's OpenMP
    threads never compete for the same cores). A missing JAX (not installed) makes its columns
    n/a with the reason in the notes.
  - The report ends with issue 16's goals judged from the run's figures (goals_report), and
    --update-benchmarks puts it into BENCHMARKS.md's "CPU kernels" section (update_benchmarks).

Every figure comes from a measurement of this run; what cannot be measured is "n/a" with the
reason in the notes. --smoke runs the same flow on tiny shapes (the .stitch files rewritten into
a temp dir), few iterations, torch.compile on one graph per suite; Stitch on --backend cpu when it
exists, else the reference interpreter. Smoke numbers measure nothing; they prove the pipeline.
"""

from __future__ import annotations

import argparse
import copy
import datetime as _dt
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
GRAPH_DIR = HERE / "graphs"
DRIVER = Path(__file__).resolve()

sys.path.insert(0, str(HERE.parent))
from common import (BenchGraph, CostCase, caller_path, check_signature,  # noqa: E402
                    cost_model_report, fmt_ms, fmt_s, fmt_x, geomean, log, machine_info,
                    measure_cost_model, med, peer_main, run_peer, same_as, save_partial,
                    stitch_backend_available, stitch_run, stitch_version, torch_adam_step,
                    training_fns, training_suite, with_shapes)

R, C = 16384, 1024  # the training suite's [rows, hidden]: 64 MiB per f32 tensor
SUITES = ("inference", "training", "small")
SECTIONS = ("main", "cost")
# glibc's thresholds in setting A: above any tensor here, so freed memory is kept and reused.
KEEP_BYTES = 2**30
# Setting A's warm-up: until a call page-faults fewer than this many times, at most this many calls.
SETTLED_FAULTS, SETTLE_CALLS = 16, 12
# The small suite's calls take microseconds: this many times --iters (and --cost-iters) runs each.
SMALL_ITERS = 20


@dataclass
class Graph(BenchGraph):
    """A benchmark row (common.BenchGraph, f32): graph `graph` (default `name`) of its file, the
    peers' function `fn` (default `name`). `rewrite`: the shapes are not the file's (small sizes):
    the driver writes a copy with them."""

    graph: str = ""
    fn: str = ""
    rewrite: bool = False

    @property
    def graph_name(self) -> str:
        return self.graph or self.name

    @property
    def fn_name(self) -> str:
        return self.fn or self.name

    def bytes(self, smoke: bool) -> int:
        return self.min_bytes("f32", smoke)

    def iters(self, iters: int) -> int:
        return iters * (SMALL_ITERS if self.suite == "small" else 1)


GRAPHS = [
    Graph("layer_norm", "layer_norm.stitch", "composite",
          {"x": [32768, 768], "gamma": [768], "beta": [768]}, same_as("x"),
          {"x": [64, 768], "gamma": [768], "beta": [768]}),
    Graph("rms_norm", "rms_norm.stitch", "composite",
          {"x": [8192, 4096], "gamma": [4096]}, same_as("x"),
          {"x": [16, 4096], "gamma": [4096]}),
    Graph("softmax", "softmax.stitch", "composite",
          {"x": [32768, 1024]}, same_as("x"),
          {"x": [64, 1024]}),
    Graph("bias_gelu_residual", "bias_gelu_residual.stitch", "primitives + gelu composite",
          {"h": [8192, 3072], "bias": [3072], "residual": [8192, 3072]}, same_as("h"),
          {"h": [16, 3072], "bias": [3072], "residual": [16, 3072]}),
    Graph("adam_step", "adam_step.stitch", "primitives",
          {"p": [8388608], "g": [8388608], "m": [8388608], "v": [8388608]}, lambda sh: [sh["p"]] * 3,
          {"p": [4096], "g": [4096], "m": [4096], "v": [4096]}),
    Graph("attention_softmax", "attention_softmax.stitch", "primitives + softmax composite",
          {"scores": [8, 12, 512, 512], "mask_bias": [8, 1, 1, 512]}, same_as("scores"),
          {"scores": [1, 2, 32, 32], "mask_bias": [1, 1, 1, 32]}),
] + training_suite(Graph, R, C, bn_images=64, tokens=512, adam_n=8388608, gn_images=256,
                   overrides={"cross_entropy_train": {"graph": "cross_entropy_train_512"}})


def small_rows() -> list[Graph]:
    """The small suite: four graphs at 64 KB, 256 KB and 1 MB per [rows, 1024] f32 tensor."""
    base = {g.name: g for g in GRAPHS}
    rows = []
    for name in ("layer_norm", "softmax", "bias_gelu_residual", "softmax_backward"):
        g = base[name]
        for kb in (64, 256, 1024):
            r = kb * 1024 // (4 * 1024)
            sh = {n: ([r, 1024] if len(s) > 1 else [1024]) for n, s in g.inputs.items()}
            rows.append(replace(g, name=f"{name} {kb} KB", inputs=sh, smoke=sh, suite="small",
                                graph=g.graph_name, fn=g.fn_name, rewrite=True))
    return rows


ALL = GRAPHS + small_rows()
GRAPH_BY_NAME = {g.name: g for g in ALL}

# ------------------------------------------------------------------------------------------------
# The same math in each peer. Inputs are uniform in [-1, 1) like `stitch run`'s; labels are
# classes in [0, classes).
# ------------------------------------------------------------------------------------------------


def torch_fns(torch):
    F = torch.nn.functional

    return {
        "layer_norm": lambda x, gamma, beta: F.layer_norm(x, (x.shape[-1],), gamma, beta, 1e-5),
        "rms_norm": lambda x, gamma: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * gamma,
        "softmax": lambda x: torch.softmax(x, -1),
        "bias_gelu_residual": lambda h, bias, residual: F.gelu(h + bias) + residual,
        "adam_step": torch_adam_step,
        "attention_softmax": lambda scores, mask_bias: torch.softmax(scores * 0.125 + mask_bias, -1),
        **training_fns(torch),
    }


def torch_out_fns(torch):
    """Eager PyTorch with every op's output in a buffer allocated once (`out=`, ATen's .out
    variants for the library ops): name -> make(*inputs) -> a call returning the outputs. The
    same ops as torch_fns; graphs without an entry have no preallocated eager figure."""
    aten = torch.ops.aten

    def layer_norm(x, gamma, beta):
        y, mean, rstd = torch.empty_like(x), x.new_empty(x.shape[0], 1), x.new_empty(x.shape[0], 1)
        return lambda: aten.native_layer_norm.out(x, [x.shape[-1]], gamma, beta, 1e-5,
                                                  out0=y, out1=mean, out2=rstd)[0]

    def rms_norm(x, gamma):
        t, s, y = torch.empty_like(x), x.new_empty(x.shape[0], 1), torch.empty_like(x)

        def call():
            torch.mul(x, x, out=t)
            torch.mean(t, -1, keepdim=True, out=s)
            torch.rsqrt(torch.add(s, 1e-6, out=s), out=s)
            return torch.mul(torch.mul(x, s, out=y), gamma, out=y)
        return call

    def softmax(x):
        y = torch.empty_like(x)
        return lambda: aten._softmax.out(x, -1, False, out=y)

    def bias_gelu_residual(h, bias, residual):
        t, y = torch.empty_like(h), torch.empty_like(h)

        def call():
            aten.gelu.out(torch.add(h, bias, out=t), out=y)
            return torch.add(y, residual, out=y)
        return call

    def adam_step(p, g, m, v):
        pn, mn, vn, t, u = (torch.empty_like(p) for _ in range(5))

        def call():
            torch.add(torch.mul(m, 0.9, out=mn), torch.mul(g, 0.1, out=t), out=mn)
            torch.mul(torch.abs(v, out=vn), 0.999, out=vn)
            torch.add(vn, torch.mul(torch.mul(g, g, out=t), 0.001, out=t), out=vn)
            torch.div(mn, 0.6513215599, out=u)
            torch.add(torch.sqrt(torch.div(vn, 0.0099551198, out=t), out=t), 1e-8, out=t)
            torch.mul(torch.div(u, t, out=u), 0.001, out=u)
            return torch.sub(p, u, out=pn), mn, vn
        return call

    def attention_softmax(scores, mask_bias):
        t, y = torch.empty_like(scores), torch.empty_like(scores)

        def call():
            torch.add(torch.mul(scores, 0.125, out=t), mask_bias, out=t)
            return aten._softmax.out(t, -1, False, out=y)
        return call

    def softmax_backward(dy, y):
        t, s, dx = torch.empty_like(dy), dy.new_empty(dy.shape[0], 1), torch.empty_like(dy)

        def call():
            torch.sum(torch.mul(dy, y, out=t), 1, keepdim=True, out=s)
            return torch.mul(y, torch.sub(dy, s, out=t), out=dx)
        return call

    return {"layer_norm": layer_norm, "rms_norm": rms_norm, "softmax": softmax,
            "bias_gelu_residual": bias_gelu_residual, "adam_step": adam_step,
            "attention_softmax": attention_softmax, "softmax_backward": softmax_backward}


def jax_fns(jax, jnp):
    def layer_norm(x, gamma, beta):
        mean = jnp.mean(x, axis=-1, keepdims=True)
        xc = x - mean
        var = jnp.mean(xc * xc, axis=-1, keepdims=True)
        return xc * jax.lax.rsqrt(var + 1e-5) * gamma + beta

    def adam(p, g, m, v):
        mn = m * 0.9 + g * 0.1
        vn = jnp.abs(v) * 0.999 + (g * g) * 0.001
        upd = (mn / 0.6513215599) / (jnp.sqrt(vn / 0.0099551198) + 1e-8)
        return p - upd * 0.001, mn, vn

    def layer_norm_backward(dy, x, gamma):
        xc = x - jnp.mean(x, 1, keepdims=True)
        rstd = jax.lax.rsqrt(jnp.mean(xc * xc, 1, keepdims=True) + 1e-5)
        xhat = xc * rstd
        dxhat = dy * gamma
        dx = (dxhat - jnp.mean(dxhat, 1, keepdims=True) - xhat * jnp.mean(dxhat * xhat, 1, keepdims=True)) * rstd
        return dx, jnp.sum(dy * xhat, 0), jnp.sum(dy, 0)

    def rms_norm_backward(dy, x, gamma):
        rstd = jax.lax.rsqrt(jnp.mean(x * x, 1, keepdims=True) + 1e-6)
        xhat = x * rstd
        dxhat = dy * gamma
        return (dxhat - xhat * jnp.mean(dxhat * xhat, 1, keepdims=True)) * rstd, jnp.sum(dy * xhat, 0)

    def bias_gelu_backward(dy, h, bias):
        x = h + bias
        cdf = (jax.lax.erf(x * 0.7071067811865476) + 1) * 0.5
        pdf = jnp.exp(x * x * -0.5) * 0.3989422804014327
        dh = dy * (cdf + x * pdf)
        return dh, jnp.sum(dh, 0)

    def batch_norm_train(x, gamma, beta):
        mean = jnp.mean(x, (0, 2, 3), keepdims=True)
        xc = x - mean
        var = jnp.mean(xc * xc, (0, 2, 3), keepdims=True)
        return jax.nn.relu(xc * jax.lax.rsqrt(var + 1e-5) * gamma + beta), mean, var

    def cross_entropy_train(logits, labels):
        d = logits - jnp.max(logits, 1, keepdims=True)
        e = jnp.exp(d)
        s = jnp.sum(e, 1, keepdims=True)
        onehot = jnp.arange(logits.shape[1])[None, :] == labels
        nll = jnp.sum(jnp.where(onehot, d - jnp.log(s), 0), 1, keepdims=True)
        w = (labels != -100).astype(logits.dtype)
        count = jnp.sum(w)
        return -(jnp.sum(nll) / count), (e / s - onehot.astype(logits.dtype)) * (w / count)

    def adam_clip(p, g, m, v):
        clip = jnp.minimum(1 / (jnp.sqrt(jnp.sum(g * g)) + 1e-6), 1)
        return adam(p, g * clip, m, v)

    def group_norm_silu(x, gamma, beta):
        xg = x.reshape(x.shape[0], 32, -1)
        xc = xg - jnp.mean(xg, 2, keepdims=True)
        xn = (xc * jax.lax.rsqrt(jnp.mean(xc * xc, 2, keepdims=True) + 1e-5)).reshape(x.shape)
        return jax.nn.silu(xn * gamma[:, None, None] + beta[:, None, None])

    return {
        "layer_norm": layer_norm,
        "rms_norm": lambda x, gamma: x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * gamma,
        "softmax": lambda x: jax.nn.softmax(x, axis=-1),
        "bias_gelu_residual": lambda h, bias, residual: jax.nn.gelu(h + bias, approximate=False) + residual,
        "adam_step": adam,
        "attention_softmax": lambda scores, mask_bias: jax.nn.softmax(scores * 0.125 + mask_bias, axis=-1),
        "layer_norm_backward": layer_norm_backward,
        "rms_norm_backward": rms_norm_backward,
        "softmax_backward": lambda dy, y: y * (dy - jnp.sum(dy * y, 1, keepdims=True)),
        "bias_gelu_backward": bias_gelu_backward,
        "batch_norm_train": batch_norm_train,
        "cross_entropy_train": cross_entropy_train,
        "adam_clip": adam_clip,
        "group_norm_silu": group_norm_silu,
    }


def numpy_inputs(np, case: dict, seed: int):
    """Floats uniform in [-1, 1); i64 inputs (labels) classes in [0, the first input's last dim)."""
    rng = np.random.default_rng(seed)
    shapes, fixed = case["inputs"], case.get("fixed") or {}
    classes = next(iter(shapes.values()))[-1]
    return [rng.integers(0, classes, size=s, dtype=np.int64) if fixed.get(n) == "i64"
            else (rng.random(s, dtype=np.float32) * 2 - 1).astype(np.float32)
            for n, s in shapes.items()]


def timed(fn, sync, warmup: int, iters: int) -> tuple[list[float], object]:
    """Runs fn warmup times, then iters timed runs; returns the times in ms and the last output."""
    out = None
    for _ in range(warmup):
        out = sync(fn())
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        out = sync(fn())
        times.append((time.perf_counter() - t0) * 1e3)
    return times, out


def settle(call, sync) -> int:
    """Setting A's extra warm-up: calls until one page-faults fewer than SETTLED_FAULTS times (at
    most SETTLE_CALLS); returns how many it took. With the thresholds raised, glibc still grows
    its heap for several calls (a freed output's chunk does not fit the next request until the
    heap has room for both) before it reuses memory: measured here, 6 to 11 calls of a 128 MB
    softmax, each faulting every page."""
    import resource

    for n in range(1, SETTLE_CALLS + 1):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        sync(call())
        if resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0 < SETTLED_FAULTS:
            return n
    return SETTLE_CALLS


def measure_call(r: dict, label: str, phase: str, call, sync, to_numpy, job: dict, case: dict) -> None:
    """Times `call` (timed) into r[LABEL_PHASE_ms], with the minor page faults per timed call (the
    whole process's: what a fresh output costs the kernel) in r[LABEL_PHASE_faults] and the
    outputs' checksum, once, in r[LABEL_sum]."""
    import resource

    if phase == "kept":
        r[f"{label}_settle_calls"] = settle(call, sync)
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    n0 = job["warmup"]
    ts, out = timed(call, sync, n0, case["iters"])
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    r[f"{label}_{phase}_ms"] = ts
    r[f"{label}_{phase}_faults"] = faults / (n0 + case["iters"])
    r.setdefault(f"{label}_sum", checksum([to_numpy(o) for o in as_list(out)]))


def checksum(outs) -> list[float]:
    """[sum, sum of |x|] over every output in f64: a cheap check that peers computed the same."""
    import numpy as np

    outs = [np.asarray(o, dtype=np.float64) for o in (outs if isinstance(outs, (tuple, list)) else [outs])]
    return [float(sum(o.sum() for o in outs)), float(sum(np.abs(o).sum() for o in outs))]


def keep_freed_memory() -> str:
    """Setting A's allocator: glibc keeps freed memory (mallopt, as the MALLOC_*_ variables)."""
    import ctypes

    libc = ctypes.CDLL("libc.so.6")
    m_trim, m_mmap = -1, -3  # M_TRIM_THRESHOLD, M_MMAP_THRESHOLD (malloc.h)
    ok = libc.mallopt(m_mmap, KEEP_BYTES) == 1 and libc.mallopt(m_trim, KEEP_BYTES) == 1
    return "" if ok else "mallopt refused the thresholds"


def run_phases(job: dict, res: dict, measure) -> None:
    """measure(case, phase, r) for every case with glibc untouched ("fresh"), then again after
    keep_freed_memory() ("kept"); results saved case by case."""
    for phase in ("fresh", "kept"):
        if phase == "kept":
            res["mallopt_error"] = keep_freed_memory()
        for case in job["cases"]:
            r = res["cases"].setdefault(case["key"], {})
            try:
                measure(case, phase, r)
            except Exception as e:
                r.setdefault("errors", []).append(f"{phase}: {type(e).__name__}: "
                                                  f"{(str(e).splitlines() or [''])[0][:200]}")
            save_partial(job, res)


# ------------------------------------------------------------------------------------------------
# Peer workers (run in subprocesses: `run.py --peer NAME --job JOB.json --result OUT.json`)
# ------------------------------------------------------------------------------------------------


def stitch_hook_engine(job: dict):
    """The Python binding (python/stitch) on the driver's libstitch.so: (stitch module, engine),
    or (None, why not)."""
    if not job.get("stitch_lib"):
        return None, "no libstitch.so"
    os.environ["STITCH_LIBRARY"] = job["stitch_lib"]
    os.environ["STITCH_NUM_THREADS"] = str(job["threads"])
    os.environ.setdefault("STITCH_CACHE_DIR", job["stitch_cache"])
    sys.path.insert(0, str(REPO / "python"))
    try:
        import stitch
        return stitch, stitch.engine(backend=job["backend"])
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"


def peer_torch(job: dict) -> dict:
    import numpy as np
    import torch

    torch.set_num_threads(job["threads"])
    res = {"version": torch.__version__, "threads": torch.get_num_threads(), "cases": {}}
    fns, out_fns = torch_fns(torch), torch_out_fns(torch)
    has_compile = hasattr(torch, "compile")
    if not has_compile:
        res["compile_note"] = f"torch {torch.__version__} has no torch.compile"
    else:
        try:
            import torch._inductor.config as icfg
            cxx = getattr(icfg.cpp, "cxx", "?")
            if isinstance(cxx, (tuple, list)):  # (None, "g++"): the first found is used
                cxx = ", ".join(c for c in cxx if c)
            res["inductor_cpp_compiler"] = str(cxx)
        except Exception as e:  # only informative
            res["inductor_cpp_compiler"] = f"? ({e})"
    compiled: dict[str, object] = {}

    def measure(case: dict, phase: str, r: dict) -> None:
        args = [torch.from_numpy(a) for a in numpy_inputs(np, case, job["seed"])]
        fn = fns[case["fn"]]

        def run(label, call):
            measure_call(r, label, phase, call, lambda o: o, lambda o: o.numpy(), job, case)

        with torch.inference_mode():
            run("eager", lambda: fn(*args))
            if phase == "kept" and case["fn"] in out_fns:
                run("eager_out", out_fns[case["fn"]](*args))
            if has_compile and case["compile"]:
                if case["key"] not in compiled:
                    compiled[case["key"]] = torch.compile(fn, dynamic=False)
                    t0 = time.perf_counter()
                    compiled[case["key"]](*args)
                    r["compile_first_call_s"] = time.perf_counter() - t0
                cfn = compiled[case["key"]]
                run("compile", lambda: cfn(*args))

    run_phases(job, res, measure)
    return res


def peer_hook(job: dict) -> dict:
    """Stitch as the PyTorch hook runs it: Program.run_torch on torch tensors, new outputs per
    call. Its own process: its thread pool and PyTorch's never share cores' spin-waits."""
    import numpy as np
    import torch

    stitch, engine = stitch_hook_engine(job)
    if stitch is None:
        raise SystemExit(f"the binding did not load: {engine}")
    res = {"library": stitch.library_path(), "cases": {}}
    progs: dict[tuple, object] = {}

    def program(case: dict, huge: bool):
        # A program per page setting: run_torch reads STITCH_HUGE_PAGES when it first sees a
        # signature (the first call, below) and keeps the answer with it.
        key = (case["key"], huge)
        if key not in progs:
            mod = stitch.parse_module(Path(case["file"]).read_text(), case["file"])
            progs[key] = stitch.Program(engine, mod[case["graph"]])
        return progs[key]

    def measure(case: dict, phase: str, r: dict) -> None:
        args = [torch.from_numpy(a) for a in numpy_inputs(np, case, job["seed"])]
        with torch.inference_mode():
            for label, huge in (("hook", True), ("hook4k", False)):
                if phase == "kept" and not huge:
                    continue  # kept memory is faulted once: the pages' size does not show
                prog = program(case, huge)
                os.environ["STITCH_HUGE_PAGES"] = "1" if huge else "0"
                measure_call(r, label, phase, lambda: prog.run_torch(args), lambda o: o, lambda o: o.numpy(),
                             job, case)

    run_phases(job, res, measure)
    return res


def as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def peer_jax(job: dict) -> dict:
    import numpy as np
    import jax
    import jax.numpy as jnp
    import jaxlib

    res = {"version": jax.__version__, "jaxlib": jaxlib.__version__,
           "devices": [str(d) for d in jax.devices()], "cases": {}}
    fns = jax_fns(jax, jnp)
    jitted: dict[str, object] = {}

    def measure(case: dict, phase: str, r: dict) -> None:
        args = [jax.device_put(a) for a in numpy_inputs(np, case, job["seed"])]
        if case["key"] not in jitted:
            jitted[case["key"]] = jfn = jax.jit(fns[case["fn"]])
            t0 = time.perf_counter()
            jax.block_until_ready(jfn(*args))
            r["jit_first_call_s"] = time.perf_counter() - t0
        jfn = jitted[case["key"]]
        measure_call(r, "jax", phase, lambda: jfn(*args), jax.block_until_ready, np.asarray, job, case)

    run_phases(job, res, measure)
    return res


def peer_copy(job: dict) -> dict:
    """Copy bandwidth: read + written bytes of one buffer copy over its median time."""
    import numpy as np

    n = job["copy_bytes"] // 4
    src = np.random.default_rng(0).random(n, dtype=np.float32)
    dst = np.empty_like(src)
    res = {"bytes": n * 4}
    ts, _ = timed(lambda: np.copyto(dst, src), lambda o: o, job["warmup"], job["iters"])
    res["numpy_1thread_ms"] = ts
    try:
        import torch

        torch.set_num_threads(job["threads"])
        s, d = torch.from_numpy(src), torch.from_numpy(dst)
        ts, _ = timed(lambda: d.copy_(s), lambda o: o, job["warmup"], job["iters"])
        res["torch_all_threads_ms"] = ts
        res["torch_threads"] = torch.get_num_threads()
    except Exception as e:
        res["torch_error"] = f"{type(e).__name__}: {e}"
    return res


PEERS = {"torch": peer_torch, "hook": peer_hook, "jax": peer_jax, "copy": peer_copy}


# ------------------------------------------------------------------------------------------------
# Stitch
# ------------------------------------------------------------------------------------------------


def prepare_graph(g: Graph, smoke: bool, tmp: Path) -> Path:
    """Checks the file's signature against the table (a small-size row: against its suite's
    row); writes a copy with the row's shapes for small sizes and --smoke."""
    path = GRAPH_DIR / g.file
    base = next(b for b in GRAPHS if b.file == g.file and b.graph_name == g.graph_name)
    dts = base.input_dtypes("f32")
    check_signature(path, g.graph_name, {n: (dts[n], s) for n, s in base.inputs.items()})
    if not (smoke or g.rewrite):
        return path
    shapes = g.shapes(smoke)
    text = with_shapes(path.read_text(), g.graph_name, {n: (dts[n], s) for n, s in shapes.items()})
    for n, s in base.inputs.items():  # shapes written in the body (iota's) follow the inputs'
        if len(s) > 1:
            text = text.replace(str(s), str(shapes[n]))
    out = tmp / (g.name.replace(" ", "_") + ".stitch")
    out.write_text(text)
    return out


def stitch_env(fusion: str, cache_dir: Path) -> dict[str, str]:
    return {"STITCH_FUSION": fusion, "STITCH_CACHE_DIR": str(cache_dir)}


def measure_stitch(stitch: str, backend: str, g: Graph, file: Path, a, tmp: Path, notes: list[str]) -> dict:
    """`stitch run` fused and STITCH_FUSION=off (median ms), and the process's wall time with a
    cold and then a warm kernel cache (--iters 1)."""
    out = {"ms": {}, "compile": {}}
    for key, fusion in (("cli", "stitch"), ("off", "off")):
        cache = Path(tempfile.mkdtemp(dir=tmp, prefix=f"cache-{key}-"))
        r = stitch_run(stitch, file, g.graph_name, backend, g.iters(a.iters), stitch_env(fusion, cache), a.seed,
                       a.stitch_timeout)
        if r.error:
            notes.append(f"{g.name}: Stitch {'fused' if key == 'cli' else key} failed: {r.error}")
        out["ms"][key] = r.median_ms
    cache = Path(tempfile.mkdtemp(dir=tmp, prefix="cache-cold-"))
    cold = stitch_run(stitch, file, g.graph_name, backend, 1, stitch_env("stitch", cache), a.seed, a.stitch_timeout)
    nfiles = sum(1 for p in cache.rglob("*") if p.is_file())
    out["compile"]["cache_files"] = nfiles
    if cold.error is None:
        out["compile"]["cold"] = cold.wall_s
        if nfiles:
            warm = stitch_run(stitch, file, g.graph_name, backend, 1, stitch_env("stitch", cache), a.seed,
                              a.stitch_timeout)
            if warm.error is None:
                out["compile"]["warm"] = warm.wall_s
                out["compile"]["saved"] = cold.wall_s - warm.wall_s
    return out


def measure_round(a, job: dict, graphs: list[Graph], files: dict, stitch: str | None, backend: str, tmp: Path,
                  notes: list[str], r: int) -> tuple:
    """One round: the copy, the peers (torch, the hook, JAX) and `stitch run` per graph. Notes
    of later rounds are dropped where the first round said the same."""
    log(f"round {r + 1} of {max(1, a.rounds)}")
    mine: list[str] = []
    cres = run_peer(DRIVER, "copy", a.torch_python, job, tmp, mine, a.peer_timeout)
    t0 = time.perf_counter()
    tres = run_peer(DRIVER, "torch", a.torch_python, job, tmp, mine, a.peer_timeout)
    log(f"torch peer: {time.perf_counter() - t0:.0f} s")
    hres = run_peer(DRIVER, "hook", a.torch_python, job, tmp, mine, a.peer_timeout) if job["stitch_lib"] else None
    t0 = time.perf_counter()
    jres = run_peer(DRIVER, "jax", sys.executable, job, tmp, mine, a.peer_timeout)
    log(f"jax peer: {time.perf_counter() - t0:.0f} s")
    sres = {}
    if stitch:
        for g in graphs:
            log(f"stitch {g.name}")
            sres[g.name] = measure_stitch(stitch, backend, g, files[g.name], a, tmp, mine)
    notes.extend(n if r == 0 else f"(round {r + 1}) {n}" for n in mine if r == 0 or n not in notes)
    return cres, tres, hres, jres, sres


def best_round(rounds: list[tuple]) -> tuple:
    """Each contender's best round (see the design note): copy times, peer times (every *_ms list
    of a case: the round whose median is lowest) and `stitch run` medians; everything else is the
    first round's."""
    cres, tres, hres, jres, sres = (copy.deepcopy(x) for x in rounds[0])
    for c2, t2, h2, j2, s2 in rounds[1:]:
        if cres and c2:
            for k, v in c2.items():
                if k.endswith("_ms") and isinstance(v, list) and v and (not cres.get(k) or med(v) < med(cres[k])):
                    cres[k] = v
        for res, other in ((tres, t2), (hres, h2), (jres, j2)):
            if not res or not other:
                continue
            for case, r2 in other.get("cases", {}).items():
                r1 = res["cases"].setdefault(case, {})
                for k, v in r2.items():
                    if k.endswith("_ms") and isinstance(v, list) and v and (not r1.get(k) or med(v) < med(r1[k])):
                        r1[k] = v
        for name, st in s2.items():
            ms = sres.setdefault(name, {"ms": {}, "compile": st["compile"]})["ms"]
            for k, v in st["ms"].items():
                if v is not None and (ms.get(k) is None or v < ms[k]):
                    ms[k] = v
    return cres, tres, hres, jres, sres


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------

# Setting A: preallocated outputs (Stitch's CLI, eager out=) or glibc keeping freed memory.
TABLE_A = [("cli", "Stitch `stitch run`"), ("off", "Stitch off"), ("hook_kept", "Stitch hook"),
           ("eager_out", "eager out="), ("eager_kept", "eager"), ("compile_kept", "torch.compile"),
           ("jax_kept", "JAX")]
# Setting B: fresh outputs on every call, glibc's defaults.
TABLE_B = [("hook_fresh", "Stitch hook"), ("hook4k_fresh", "Stitch hook, 4 KiB pages"), ("eager_fresh", "eager"),
           ("compile_fresh", "torch.compile"), ("jax_fresh", "JAX")]
SPEEDUPS = [("cli", "eager_out", "A: vs eager out="), ("cli", "eager_kept", "A: vs eager"),
            ("cli", "compile_kept", "A: vs torch.compile"), ("cli", "jax_kept", "A: vs JAX"),
            ("cli", "off", "A: vs Stitch off"), ("hook_kept", "eager_kept", "A: hook vs eager"),
            ("hook_fresh", "eager_fresh", "B: hook vs eager"),
            ("hook_fresh", "compile_fresh", "B: hook vs torch.compile"), ("hook_fresh", "jax_fresh", "B: hook vs JAX"),
            ("hook4k_fresh", "eager_fresh", "B: hook 4 KiB vs eager"),
            ("hook4k_fresh", "compile_fresh", "B: hook 4 KiB vs torch.compile")]


# Minor page faults per call, each peer in both settings: did glibc's setting A keep memory?
FAULTS = [("eager_out_kept", "eager out= A"), ("eager_kept", "eager A"), ("eager_fresh", "eager B"),
          ("hook_kept", "hook A"), ("hook_fresh", "hook B"), ("hook4k_fresh", "hook 4 KiB B"),
          ("compile_kept", "torch.compile A"),
          ("compile_fresh", "torch.compile B"), ("jax_kept", "JAX A"), ("jax_fresh", "JAX B")]


def faults_table(rows: list[dict]) -> list[str]:
    """Minor page faults per call (the peer process's, warm-up and timed calls): a fresh output
    that glibc mmaps anew costs one per 4 KiB page touched; in setting A it should cost none."""
    rows = [r for r in rows if any(v is not None for v in r.get("faults", {}).values())]
    if not rows:
        return []
    L = ["Minor page faults per call (the peer process's, over warm-up and timed calls; a 4 KiB page "
         "of a freshly mapped output costs one): whether each setting kept memory as intended.", ""]
    L.append("| graph | " + " | ".join(n for _, n in FAULTS) + " |")
    L.append("|:--|" + "--:|" * len(FAULTS))
    for r in rows:
        L.append(f"| {r['name']} | " + " | ".join("n/a" if r["faults"].get(k) is None else f"{r['faults'][k]:.0f}"
                                                 for k, _ in FAULTS) + " |")
    L.append("")
    return L


def cell(r: dict, k: str) -> str:
    ms = r["ms"].get(k)
    if ms is None:
        return "n/a"
    pct = r["pct_copy"].get(k)
    return f"{fmt_ms(ms)}" + ("" if pct is None else f" · {pct:.0f}%")


def speedup(r: dict, mine: str, other: str) -> float | None:
    a, b = r["ms"].get(mine), r["ms"].get(other)
    return b / a if a and b else None


def suite_tables(rows: list[dict], suites: list[str]) -> list[str]:
    L = []
    for suite in suites:
        srows = [r for r in rows if r["suite"] == suite]
        if not srows:
            continue
        L += [f"#### {suite} suite", ""]
        L.append("A: preallocated outputs (`stitch run`, eager `out=`) or glibc keeping freed memory "
                 "(the others). Each cell: median ms · % of copy bandwidth.")
        L.append("")
        L.append("| graph | MB | " + " | ".join(n for _, n in TABLE_A) + " |")
        L.append("|:--|--:|" + "--:|" * len(TABLE_A))
        for r in srows:
            L.append(f"| {r['name']} | {r['bytes'] / 1e6:.3g} | " + " | ".join(cell(r, k) for k, _ in TABLE_A) + " |")
        L += ["", "B: fresh outputs on every call, glibc's default allocator settings.", ""]
        L.append("| graph | MB | " + " | ".join(n for _, n in TABLE_B) + " |")
        L.append("|:--|--:|" + "--:|" * len(TABLE_B))
        for r in srows:
            L.append(f"| {r['name']} | {r['bytes'] / 1e6:.3g} | " + " | ".join(cell(r, k) for k, _ in TABLE_B) + " |")
        L += ["", "Speedups (other's time / Stitch's: A with `stitch run`, B with the hook):", ""]
        L.append("| graph | " + " | ".join(n for _, _, n in SPEEDUPS) + " |")
        L.append("|:--|" + "--:|" * len(SPEEDUPS))
        for r in srows:
            L.append(f"| {r['name']} | " + " | ".join(fmt_x(speedup(r, m, o)) for m, o, _ in SPEEDUPS) + " |")
        L.append(f"| **geomean, {suite}** | "
                 + " | ".join(fmt_x(geomean(speedup(r, m, o) for r in srows)) for m, o, _ in SPEEDUPS) + " |")
        L.append("")
    return L


def goals_report(rows: list[dict]) -> list[str]:
    """Issue 16's goals, judged from this run's figures: >= 80% of copy bandwidth for every graph
    of the inference and training suites (Stitch `stitch run`, setting A); per suite, geomeans of
    >= 1.5x over torch.compile and >= 3x over eager (A with `stitch run`, B with the hook); no
    row slower than eager in either setting. In the small suite, A's Stitch is the hook too: eager
    pays Python's per-call cost there, which `stitch run`'s own timing (in C++) does not."""
    L = ["Goals (from the figures above):", ""]
    big = [r for r in rows if r["suite"] != "small"]
    pct = [(r["name"], r["pct_copy"].get("cli")) for r in big]
    low = [f"{n} {p:.0f}%" for n, p in pct if p is not None and p < 80]
    known = [p for _, p in pct if p is not None]
    if known:
        L.append(f"- >= 80% of copy bandwidth (Stitch `stitch run`): {len(known) - len(low)} of {len(known)} "
                 "graphs" + (f"; below: {', '.join(low)}." if low else "."))
    for suite in ("inference", "training", "small"):
        srows = [r for r in rows if r["suite"] == suite]
        if not srows:
            continue
        parts = []
        a_mine = "hook_kept" if suite == "small" else "cli"
        for mine, other, label, want in ((a_mine, "compile_kept", "A vs torch.compile", 1.5),
                                         (a_mine, "eager_kept", "A vs eager", 3.0),
                                         ("hook_fresh", "compile_fresh", "B vs torch.compile", 1.5),
                                         ("hook_fresh", "eager_fresh", "B vs eager", 3.0)):
            gm = geomean(speedup(r, mine, other) for r in srows)
            if gm is not None:
                parts.append(f"{label} {fmt_x(gm)} ({'met' if gm >= want else '**not met**'}, goal {want:g}x)")
        if parts:
            L.append(f"- {suite} suite geomeans" + (" (A: the hook)" if suite == "small" else "") + ": "
                     + "; ".join(parts) + ".")
    slower = []
    for r in rows:
        a_mine = "hook_kept" if r["suite"] == "small" else "cli"
        for mine, other, label in ((a_mine, "eager_kept", "A, eager"), (a_mine, "eager_out", "A, eager out="),
                                   ("hook_fresh", "eager_fresh", "B, eager")):
            s = speedup(r, mine, other)
            if s is not None and s < 1:
                slower.append(f"{r['name']} ({label}: {fmt_x(s)})")
    L.append("- No row slower than eager: " + ("met." if not slower else "**not met**: " + "; ".join(slower) + "."))
    L.append("")
    return L


def build_report(a, rows, copy, versions, notes, minfo, command, backend, extra: list[str], wall_s: float) -> str:
    L = [f"## CPU kernels: Stitch vs PyTorch, torch.compile and JAX"
         f"{' (SMOKE: tiny shapes, not a benchmark)' if a.smoke else ''}", ""]
    L += ["Command:", "", "```sh", command, "```", ""]
    mem = f"{minfo['mem_gib']:.0f} GiB" if minfo.get("mem_gib") else "?"
    L.append(f"Machine: {minfo['model']}, {minfo['cores']} CPUs, {mem} memory, "
             f"{platform.system()} {platform.release()}; "
             f"{_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; "
             f"load average {minfo['load']} at the start (other work on the machine skews every column); "
             f"the run took {wall_s:.0f} s. "
             f"Medians of {a.iters} runs (small suite: {a.iters * SMALL_ITERS}) after {a.warmup} warm-up "
             f"run{'s' if a.warmup > 1 else ''}"
             + (f", each contender's best of {a.rounds} rounds measured one after the other (the lowest "
                "median; copy: the highest bandwidth)" if a.rounds > 1 else "") + "; float32; "
             f"{a.threads} threads for every contender (Stitch: STITCH_NUM_THREADS; torch.set_num_threads; "
             "XLA's default pool).")
    L.append("")
    L.append("Versions: " + "; ".join(f"{k} {v}" for k, v in versions.items()) + ".")
    L.append("")
    if copy:
        L.append(f"Copy bandwidth (read + written bytes of a {copy['bytes'] / 2**20:.0f} MiB f32 copy, median): "
                 + "; ".join(f"{k} {v:.1f} GB/s" for k, v in copy["all"].items())
                 + f". \"copy\" is the larger, **{copy['gbps']:.1f} GB/s**; % of copy = (every input read once "
                 "+ every output written once) / median time / copy.")
    else:
        L.append("Copy bandwidth: n/a (see notes); no % of copy.")
    L.append("")
    L.append("Contenders and settings (like for like, both ways):")
    L.append("")
    L.append(f"- A, preallocated: **Stitch `stitch run`** = `stitch run FILE --backend {backend} --iters K` "
             "(outputs allocated once before the timed runs; the CLI's own median; glibc defaults); **Stitch "
             "off** the same with STITCH_FUSION=off (one kernel per op); **eager out=** = every op of the graph "
             "with `out=` (ATen's `.out` variants for `F.layer_norm`, softmax and GELU) into buffers allocated "
             "once (n/a where not written: the training graphs but softmax backward). **eager**, "
             "**torch.compile**, **JAX** and **Stitch hook** allocate their outputs as they always do, with "
             f"glibc told to keep freed memory: mallopt(M_MMAP_THRESHOLD and M_TRIM_THRESHOLD, {KEEP_BYTES}) in "
             f"the peer process, as `MALLOC_MMAP_THRESHOLD_={KEEP_BYTES} MALLOC_TRIM_THRESHOLD_={KEEP_BYTES}` "
             "would; torch.compile and jax.jit have no `out=`. Before its timed calls in A, each contender "
             f"runs until a call page-faults fewer than {SETTLED_FAULTS} times (at most {SETTLE_CALLS} calls): "
             "with the thresholds raised, glibc still grows its heap for several calls before it reuses "
             "freed outputs (the page-fault table below shows what remained).")
    L.append("- B, fresh outputs: glibc's defaults (tensors above its mmap threshold, at most 32 MiB, are "
             "mmapped and page-faulted anew on every call). **Stitch hook** = the Python binding's PyTorch "
             "path `stitch.Program.run_torch(inputs)` (python/stitch: `torch.empty` outputs per call, one C "
             "call), as the PyTorch hook runs a compiled piece; it gives outputs of 32 MiB or more mappings of "
             "their own in transparent huge pages (one fault per 2 MiB, `madvise(MADV_HUGEPAGE)`), as the "
             "hook does by default. **Stitch hook, 4 KiB pages** = the same with STITCH_HUGE_PAGES=0: 4 KiB faults, as the "
             "peers' outputs take them (PyTorch gives its own tensors huge pages only with "
             "THP_MEM_ALLOC_ENABLE=1, unset here as by default); the peers as they are.")
    L.append("- Each peer process measures B for every graph first, then switches glibc and measures A, so "
             "torch.compile (Inductor, C++, `dynamic=False`) and jax.jit compile once per graph.")
    L.append("")
    L += suite_tables(rows, a.suites)
    if rows:
        L += goals_report(rows)
        L += faults_table(rows)
    all_rows = [r for r in rows if r["suite"] != "small"]
    if all_rows:
        L.append("Geomean over the inference and training suites together: "
                 + "; ".join(f"{n} {fmt_x(geomean(speedup(r, m, o) for r in all_rows))}" for m, o, n in SPEEDUPS)
                 + ".")
        L.append("")
    L.append("Compile time. Stitch: wall time of `stitch run FILE --iters 1` (a process: parse, random "
             "inputs, compile, 2 runs) with a fresh STITCH_CACHE_DIR (cold) and again with the same "
             "directory (warm). torch.compile and JAX: the first call's time (trace + compile + run), in process.")
    L.append("")
    L.append("| graph | Stitch cold | Stitch warm | cold - warm | cache files | torch.compile 1st call | JAX jit 1st call |")
    L.append("|:--|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        c = r["compile"]
        L.append(f"| {r['name']} | {fmt_s(c.get('cold'))} | {fmt_s(c.get('warm'))} | {fmt_s(c.get('saved'))} | "
                 f"{c.get('cache_files', 'n/a')} | {fmt_s(c.get('torch_compile'))} | {fmt_s(c.get('jax'))} |")
    L.append("")
    L.append("Graphs: `bench/cpu/graphs/*.stitch` (static shapes; the training suite is the f32 graphs of "
             "bench/gpu/graphs at host sizes; the small suite rewrites layer norm, softmax, bias + GELU + "
             "residual and softmax backward to [16, 256 or 1024 rows, 1024] f32: 64 KB, 256 KB, 1 MB per "
             "tensor). The peers compute the same math on the same shapes: PyTorch with its library op "
             "where the graph uses a composite (`F.layer_norm`, `torch.softmax`, `F.gelu`, `F.group_norm`, "
             "`F.silu`) and one tensor op per primitive otherwise; JAX with `jax.nn` and `jnp` under "
             "`jax.jit`. Every output's sum from torch.compile, JAX and the Stitch hook is compared with "
             "eager's on the same inputs (a disagreement is a note below).")
    L += extra
    if notes:
        L += ["", "Notes:", ""]
        L += [f"- {n}" for n in notes]
    L.append("")
    return "\n".join(L)


def draw_chart(rows, copy, path: Path, smoke: bool, notes: list[str]) -> bool:
    """Draws the chart; False (with a note) when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:
        notes.append(f"no chart: matplotlib unavailable ({e})")
        return False
    big = [r for r in rows if r["suite"] != "small"]
    panels = [(big, "pct_copy", [("cli", "Stitch `stitch run`"), ("eager_out", "eager out="),
                                 ("eager_kept", "eager"), ("compile_kept", "torch.compile"), ("jax_kept", "JAX")],
               "A (preallocated / glibc keeps freed memory): % of measured copy bandwidth", "% of copy"),
              (rows, "vs_eager", [("cli", "A: Stitch `stitch run`"), ("compile_kept", "A: torch.compile"),
                                  ("hook_fresh", "B: Stitch hook"), ("compile_fresh", "B: torch.compile")],
               "Speedup over PyTorch eager in the same setting (higher is better; log scale)", "x eager")]
    fig, axes = plt.subplots(2, 1, figsize=(max(11, 0.45 * len(rows) + 2), 9))
    for ax, (prow, key, series, title, ylabel) in zip(axes, panels):
        width = 0.8 / len(series)
        for i, (k, label) in enumerate(series):
            vals = [r[key].get(k) for r in prow]
            xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(prow))]
            ax.bar(xs, [v if v is not None else 0 for v in vals], width, label=label)
        ax.set_xticks(range(len(prow)))
        ax.set_xticklabels([r["name"] for r in prow], fontsize=7, rotation=40, ha="right")
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
        if key == "vs_eager":
            ax.set_yscale("log")
            ax.axhline(1.0, color="black", lw=0.8)
        else:
            ax.axhline(100.0, color="black", lw=0.8, ls="--")
        ax.legend(fontsize=7, ncol=len(series), loc="upper left")
    sup = "Stitch CPU benchmark" + (" - SMOKE RUN (tiny shapes, not a measurement)" if smoke else "")
    if copy:
        sup += f"; copy bandwidth {copy['gbps']:.1f} GB/s"
    fig.suptitle(sup, fontsize=12)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    log(f"chart: {path}")
    return True


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------


SECTION_HEAD = "## CPU kernels:"
CHART_LINE = "![CPU benchmark"


def update_benchmarks(path: Path, report: str, chart: Path | None) -> None:
    """Replaces the CPU section of `path` (its '## CPU kernels:' heading through its chart line;
    what follows, the hand-written reading of the figures, stays) with `report` and the chart
    (None: this run drew none, and the line says so rather than show an older chart)."""
    text = path.read_text()
    start = text.find(SECTION_HEAD)
    chart_at = text.find(CHART_LINE, start) if start >= 0 else -1
    if start < 0 or chart_at < 0:
        raise SystemExit(f"bench: {path} has no '{SECTION_HEAD}' section ending in a '{CHART_LINE}' line")
    end = text.find("\n", chart_at) + 1 or len(text)
    if chart is None:
        line = f"{CHART_LINE} chart: not drawn by this run (see its notes)]()"
    else:
        line = f"{CHART_LINE}: % of copy bandwidth and speedups over PyTorch eager]({os.path.relpath(chart, path.parent)})"
    new = report.rstrip("\n") + f"\n\n{line}\n"
    path.write_text(text[:start] + new + text[end:])
    log(f"updated {path}")


def check_sums(row: dict, tr: dict, jr: dict, notes: list[str]) -> None:
    """Peers' output sums against eager's on the same inputs (relative to the sum of |x|)."""
    ref = tr.get("eager_sum")
    if not ref:
        return
    for label, s in (("eager out=", tr.get("eager_out_sum")), ("torch.compile", tr.get("compile_sum")),
                     ("Stitch hook", tr.get("hook_sum")), ("JAX", jr.get("jax_sum"))):
        if s is not None and abs(s[0] - ref[0]) > 1e-4 * max(ref[1], 1.0):
            notes.append(f"{row['name']}: {label}'s output sum {s[0]:.6g} differs from eager's {ref[0]:.6g} "
                         f"(sum of |x| {ref[1]:.6g})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, few iterations: checks the flow")
    ap.add_argument("--out", type=Path, help="also write the Markdown section here")
    ap.add_argument("--json", type=Path, help="write every raw figure here")
    ap.add_argument("--update-benchmarks", nargs="?", const=REPO / "BENCHMARKS.md", type=Path, metavar="FILE",
                    help="replace FILE's (default BENCHMARKS.md) section from its '## CPU kernels:' heading to "
                    "its chart line with this run's (not with --smoke)")
    ap.add_argument("--chart", type=Path, help="PNG path (default bench/cpu/cpu_benchmark.png; "
                    "with --smoke, a temp path)")
    ap.add_argument("--stitch", default=str(REPO / "build/release/tools/stitch"))
    ap.add_argument("--stitch-lib", help="libstitch.so for the hook columns (default: ../src/libstitch.so "
                    "next to --stitch's tools/)")
    ap.add_argument("--backend", default="cpu", help="Stitch backend (default cpu; --smoke falls back "
                    "to reference when cpu is unavailable)")
    ap.add_argument("--iters", type=int, help="timed runs per contender (default 10; smoke 3; "
                    f"the small suite {SMALL_ITERS} times as many)")
    ap.add_argument("--warmup", type=int, help="untimed runs first (default 2; smoke 1)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure everything this many times over; each contender's best round counts "
                         "(default 1)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--suites", default=",".join(SUITES), help="comma list of " + ", ".join(SUITES))
    ap.add_argument("--graphs", help="comma list of rows (default all of the suites)")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help="main (the tables against the peers), cost (the planner's pick against its "
                    "runner-ups and basic, measured); default both")
    ap.add_argument("--candidates", type=int, default=4,
                    help="cost section: the planner's pick and its next best plans, K in all (default 4)")
    ap.add_argument("--cost-iters", type=int, help="cost section: timed runs per plan (default 10; smoke 3; "
                    f"the small suite {SMALL_ITERS} times as many)")
    ap.add_argument("--torch-python", default=sys.executable, help="interpreter for the PyTorch peer")
    ap.add_argument("--torch-note", default="", help="how PyTorch was installed (put in the report)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stitch-timeout", type=float, default=300, help="seconds per `stitch run` (default 300)")
    ap.add_argument("--peer-timeout", type=float, default=1800, help="seconds per peer process (default 1800)")
    # Worker mode.
    ap.add_argument("--peer", choices=sorted(PEERS), help=argparse.SUPPRESS)
    ap.add_argument("--job", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.peer:
        return peer_main(PEERS, a.peer, a.job, a.result)

    t_start = time.perf_counter()
    a.out, a.chart, a.json = caller_path(a.out), caller_path(a.chart), caller_path(a.json)
    a.iters = a.iters or (3 if a.smoke else 10)
    a.warmup = a.warmup or (1 if a.smoke else 2)
    a.cost_iters = a.cost_iters or (3 if a.smoke else 10)
    a.suites = [s for s in a.suites.split(",") if s]
    sections = [s for s in a.sections.split(",") if s]
    for s in a.suites:
        if s not in SUITES:
            raise SystemExit(f"bench: unknown suite {s} (have {', '.join(SUITES)})")
    for s in sections:
        if s not in SECTIONS:
            raise SystemExit(f"bench: unknown section {s} (have {', '.join(SECTIONS)})")
    unknown = [n for n in (a.graphs or "").split(",") if n and n not in GRAPH_BY_NAME]
    if unknown:
        raise SystemExit(f"bench: unknown graph {', '.join(unknown)} (have {', '.join(GRAPH_BY_NAME)})")
    graphs = [g for g in ALL if g.suite in a.suites and (not a.graphs or g.name in a.graphs.split(","))]
    notes: list[str] = [a.torch_note] if a.torch_note else []
    tmp = Path(tempfile.mkdtemp(prefix="stitch-bench-"))
    chart = a.chart or (tmp / "cpu_benchmark.png" if a.smoke else HERE / "cpu_benchmark.png")
    command = os.environ.get("STITCH_BENCH_COMMAND") or " ".join(["python bench/cpu/run.py"] + sys.argv[1:])
    minfo = machine_info()
    versions = {"Python": platform.python_version()}
    os.environ["STITCH_NUM_THREADS"] = str(a.threads)  # every `stitch run` and the hook's library

    # Stitch: which backend, and its version.
    stitch = str(caller_path(Path(a.stitch)))
    backend = a.backend
    stitch_ok = Path(stitch).exists()
    if not stitch_ok:
        notes.append(f"Stitch not run: {stitch} does not exist (build it: cmake --build --preset release --target stitch_cli)")
    else:
        versions["Stitch"] = stitch_version(stitch)
        ok, why = stitch_backend_available(stitch, backend, tmp)
        if not ok and a.smoke and backend != "reference":
            notes.append(f"Stitch backend `{backend}` unavailable ({why}); smoke run uses `reference` "
                         "(the f64 interpreter, unfused: its times say nothing about Stitch's kernels)")
            backend = "reference"
            ok, why = stitch_backend_available(stitch, backend, tmp)
        if not ok:
            notes.append(f"Stitch columns n/a: backend `{backend}` unavailable ({why})")
            stitch_ok = False
    lib = caller_path(Path(a.stitch_lib)) if a.stitch_lib else Path(stitch).resolve().parents[1] / "src/libstitch.so"
    if stitch_ok and not lib.exists():
        notes.append(f"Stitch hook columns n/a: {lib} does not exist (build the `stitch` target or pass --stitch-lib)")

    files = {g.name: prepare_graph(g, a.smoke, tmp) for g in graphs}
    # torch.compile in a smoke run: the first graph of each suite (each compile takes seconds).
    compiled = {g.name for g in graphs} if not a.smoke else {
        next(g.name for g in graphs if g.suite == s) for s in a.suites if any(g.suite == s for g in graphs)}
    if a.update_benchmarks and a.smoke:
        raise SystemExit("bench: --update-benchmarks with --smoke would publish smoke figures")
    if a.smoke and not a.no_compile:
        notes.append("smoke run: torch.compile only on " + ", ".join(sorted(compiled)))
    job = {"seed": a.seed, "iters": a.iters, "warmup": a.warmup, "threads": a.threads,
           "copy_bytes": (32 if a.smoke else 256) * 2**20, "backend": backend,
           "stitch_lib": str(lib) if stitch_ok and lib.exists() else "",
           "stitch_cache": str(tmp / "hook-cache"),
           "cases": [{"key": g.name, "fn": g.fn_name, "inputs": g.shapes(a.smoke), "fixed": g.fixed,
                      "file": str(files[g.name]), "graph": g.graph_name,
                      "compile": not a.no_compile and g.name in compiled, "iters": g.iters(a.iters)}
                     for g in graphs]}

    rows, tres, hres, jres, copy, drew = [], None, None, None, None, False
    if "main" in sections:
        rounds = [measure_round(a, job, graphs, files, stitch if stitch_ok else None, backend, tmp, notes, r)
                  for r in range(max(1, a.rounds))]
        cres, tres, hres, jres, sres = best_round(rounds)
        if cres:
            allbw = {"numpy copyto, 1 thread": 2 * cres["bytes"] / (med(cres["numpy_1thread_ms"]) * 1e-3) / 1e9}
            if "torch_all_threads_ms" in cres:
                allbw[f"torch copy_, {cres['torch_threads']} threads"] = (
                    2 * cres["bytes"] / (med(cres["torch_all_threads_ms"]) * 1e-3) / 1e9)
            copy = {"bytes": cres["bytes"], "all": allbw, "gbps": max(allbw.values())}

        # 2. Peers.
        if tres:
            versions["PyTorch"] = tres["version"]
            if "compile_note" in tres:
                notes.append(f"torch.compile n/a: {tres['compile_note']}")
            elif a.no_compile:
                notes.append("torch.compile skipped (--no-compile)")
            else:
                versions["torch.compile"] = f"Inductor, C++ backend ({tres.get('inductor_cpp_compiler', '?')})"
            if tres.get("mallopt_error"):
                notes.append(f"setting A's allocator: {tres['mallopt_error']} (A's eager, torch.compile and "
                             "hook columns then ran with glibc's defaults)")
        if hres:
            versions["Stitch hook"] = f"python/stitch on {hres['library']}"
            if hres.get("mallopt_error"):
                notes.append(f"Stitch hook, setting A: {hres['mallopt_error']}")
        if jres:
            versions["JAX"] = f"{jres['version']} (jaxlib {jres['jaxlib']}, {', '.join(jres['devices'])})"
            if jres.get("mallopt_error"):
                notes.append(f"JAX, setting A: {jres['mallopt_error']}")
        else:
            notes.append(f"JAX columns n/a: the JAX peer did not run under {sys.executable} (not installed? "
                         "scripts/bench-cpu.sh installs jax[cpu] into .venv-bench)")
        try:
            import numpy
            versions["numpy"] = numpy.__version__
        except ImportError:
            pass

        # 3. Stitch's command line, per graph; then the tables' figures.
        for g in graphs:
            row = {"name": g.name, "suite": g.suite, "form": g.form, "bytes": g.bytes(a.smoke), "ms": {},
                   "compile": {}}
            if g.name in sres:
                row["ms"].update(sres[g.name]["ms"])
                row["compile"].update(sres[g.name]["compile"])
            tr = dict((tres or {}).get("cases", {}).get(g.name, {}))
            hr = (hres or {}).get("cases", {}).get(g.name, {})
            tr.update({k: v for k, v in hr.items() if k != "errors"})
            tr["errors"] = tr.get("errors", []) + [f"Stitch hook {e}" for e in hr.get("errors", [])]
            jr = (jres or {}).get("cases", {}).get(g.name, {})
            for e in tr.get("errors", []) + jr.get("errors", []):
                notes.append(f"{g.name}: {e}")
            for k in ("eager_fresh", "eager_kept", "eager_out_kept", "compile_fresh", "compile_kept",
                      "hook_fresh", "hook_kept", "hook4k_fresh"):
                row["ms"][k.replace("_out_kept", "_out")] = med(tr.get(f"{k}_ms"))
            for k in ("jax_fresh", "jax_kept"):
                row["ms"][k] = med(jr.get(f"{k}_ms"))
            row["faults"] = {k: src.get(f"{k}_faults") for src, ks in ((tr, FAULTS[:-2]), (jr, FAULTS[-2:]))
                             for k, _ in ks}
            row["compile"]["torch_compile"] = tr.get("compile_first_call_s")
            row["compile"]["jax"] = jr.get("jit_first_call_s")
            check_sums(row, tr, jr, notes)
            ms = row["ms"]
            row["gbps"] = {k: (row["bytes"] / (v * 1e-3) / 1e9 if v else None) for k, v in ms.items()}
            row["pct_copy"] = {k: (100 * v / copy["gbps"] if v and copy else None) for k, v in row["gbps"].items()}
            row["vs_eager"] = {k: (speedup(row, k, "eager_fresh" if k.endswith("_fresh") else "eager_kept"))
                               for k in ms}
            rows.append(row)
        drew = draw_chart(rows, copy, chart, a.smoke, notes)

    # 4. The cost model's pick against the alternatives it ranked lower, measured.
    extra, cost_rows = [], []
    if "cost" in sections and stitch_ok:
        t0 = time.perf_counter()
        cases = [CostCase(g.name, "f32", files[g.name], g.graph_name, g.bytes(a.smoke), g.iters(a.cost_iters))
                 for g in graphs]
        cost_rows = measure_cost_model(stitch, backend, cases, a, tmp, notes)
        extra += cost_model_report(cost_rows, a, backend, "tiny shapes; the figures measure nothing."
                                   if a.smoke else None)
        if any(g.suite == "small" for g in graphs):
            extra += ["", f"(The small suite's rows: `--iters {a.cost_iters * SMALL_ITERS}`.)"]
        log(f"cost model: {time.perf_counter() - t0:.0f} s")

    wall_s = time.perf_counter() - t_start
    report = build_report(a, rows, copy, versions, notes, minfo, command, backend, extra, wall_s)
    print(report)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(report)
        log(f"report: {a.out}")
    if a.update_benchmarks:
        update_benchmarks(caller_path(a.update_benchmarks), report, chart if drew else None)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps({"smoke": a.smoke, "command": command, "wall_s": wall_s, "host": minfo,
                                      "versions": versions, "backend": backend, "copy": copy, "rows": rows,
                                      "torch": tres, "hook": hres, "jax": jres, "cost_model": cost_rows, "notes": notes},
                                     indent=1))
        log(f"json: {a.json}")
    if not a.smoke:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        log(f"smoke outputs kept in {tmp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
