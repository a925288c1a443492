#!/usr/bin/env python3
"""GPU benchmark: Stitch (fused, and one kernel per op) against PyTorch eager and torch.compile
on memory-bound graphs in f32 and bf16, with the device's copy bandwidth measured in the same run.

Usually started by scripts/bench-gpu.sh. On a GPU machine with a prebuilt `stitch`:

    python3 bench/gpu/run.py --stitch PATH --out gpu.md --json gpu.json

Design
  - One run, side by side: (1) a copy peer names the device and measures device-to-device copy
    bandwidth (torch `copy_` of 256 MiB and 1 GiB, CUDA events, median; the larger is the
    roofline, "copy"); (2) a torch peer runs every (graph, dtype) in PyTorch eager and under
    `torch.compile` (Inductor, default mode, compiled once per case), CUDA events around each
    call, median of --iters after --warmup; (3) `stitch run FILE --backend cuda --iters K` with
    STITCH_FUSION=stitch and =off, whose own timing line (device events around each whole
    program run, compile excluded) gives the median. Peers are subprocesses of this script
    (common.run_peer), so their CUDA contexts and caching allocators never share a process with
    each other; Stitch runs in its own processes anyway.
  - Same inputs, same math, checked. The graphs are bench/gpu/graphs/*.stitch (static shapes,
    one graph per dtype, `<name>_<dtype>`); their signatures are checked against GRAPHS below.
    The torch peer recreates `stitch run`'s seeded inputs bit for bit (splitmix64 on the
    device, see stitch_inputs) and prints the same per-output summary as the CLI (min, max,
    mean, first values), so every Stitch column is compared with PyTorch eager on identical
    inputs, and torch.compile's outputs with eager's elementwise. A disagreement is a note, not
    a silent number.
  - Traffic for GB/s is the minimum: every input read once plus every output written once
    (no intermediate), over the median time; "% of copy" divides by the copy bandwidth.
  - Device time is scarce: the default run (15 cases, 4 contenders) is sized to finish in a
    couple of minutes on an H100, torch.compile's cold compiles included. Each peer saves its
    results case by case, and each `stitch run` has a time limit, so a hang costs one cell.
  - Every figure comes from a measurement of this run; what cannot be measured is "n/a" with
    the reason in the notes. Raw figures (every timed iteration of the peers) go to --json.

Two more sections (--sections main,cost,compile; all by default):
  - cost: the cost model against the hardware. For every graph and dtype (and every graph in
    bench/gpu/graphs the table below does not describe, at its file's shapes), the planner's pick,
    its next best plans (`stitch run --plan-candidate k`, k < --candidates: the distinct plans its
    search evaluated, ranked by the model) and STITCH_FUSION=basic are each run with
    `stitch run --iters --cost-iters`; the model's own estimate of each comes from the plan the run
    dumped (STITCH_DUMP=plan: priced with the profile of the device the run used, measured
    bandwidth included). The table says how often the pick is within 5% of the fastest measured
    plan, and whether the model ranks the fastest first.
  - compile: `stitch codegen FILE --target ARCH --emit report` for every example and bench graph
    file, one process per file: NVRTC's cold compile time of every kernel (no device needed, so a
    smoke run measures the host it runs on), the first kernel of each process apart (it also pays
    NVRTC's start-up); on a GPU backend also each f32 graph's first run under STITCH_FUSION=off
    (many kernels) with STITCH_COMPILE_THREADS=1 against the default parallel compiles.

--smoke runs the same flow with no GPU: tiny shapes (the .stitch files rewritten into a temp
dir), few iterations, Stitch on --backend cpu (the reference interpreter when cpu is not built),
torch on the CPU with whatever PyTorch imports (this interpreter, .venv-bench, or Debian's
/usr/bin/python3; without torch.compile its column is n/a). Smoke numbers mean nothing; they
prove the pipeline, including the input recreation and the output cross-check, end to end.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
GRAPH_DIR = HERE / "graphs"
DRIVER = Path(__file__).resolve()

sys.path.insert(0, str(HERE.parent))
from common import (DTYPE_BYTES, BenchGraph, CostCase, caller_path, check_signature, cost_model_report,  # noqa: E402
                    extra_graphs, fmt_ms, fmt_s, fmt_x, geomean, log, machine_info, measure_cost_model,
                    med, peer_main, run_peer, save_partial, stitch_backend_available, stitch_run,
                    stitch_version, same_as, torch_adam_step, training_fns, training_suite,
                    with_shapes)

R, C = 16384, 4096  # the [16384, 4096] class: 64M elements, 256 MiB in f32
DTYPES = ("f32", "bf16")
# Tolerances of `stitch run --check` (DESIGN.md), applied here relative to each output's scale
# (its largest magnitude): the cross-check compares summaries, not every element.
TOL = {"f32": 1e-4, "bf16": 4e-2}


@dataclass
class Graph(BenchGraph):
    """A benchmark graph (common.BenchGraph), in each of its dtypes: graph `<name>_<dtype>` of
    its file."""

    dtypes: tuple[str, ...] = DTYPES

    def graph_name(self, dtype: str) -> str:
        return f"{self.name}_{dtype}"


GRAPHS = [
    Graph("layer_norm", "layer_norm.stitch", "composite",
          {"x": [R, C], "gamma": [C], "beta": [C]}, same_as("x"),
          {"x": [64, 256], "gamma": [256], "beta": [256]}),
    Graph("rms_norm", "rms_norm.stitch", "composite",
          {"x": [R, C], "gamma": [C]}, same_as("x"),
          {"x": [64, 256], "gamma": [256]}),
    Graph("softmax", "softmax.stitch", "composite",
          {"x": [R, C]}, same_as("x"),
          {"x": [64, 256]}),
    Graph("log_softmax", "log_softmax.stitch", "composite",
          {"x": [R, C]}, same_as("x"),
          {"x": [64, 256]}),
    Graph("attention_softmax", "attention_softmax.stitch", "primitives + softmax composite",
          {"scores": [8, 32, 512, 512], "mask_bias": [8, 1, 1, 512]}, same_as("scores"),
          {"scores": [2, 2, 16, 64], "mask_bias": [2, 1, 1, 64]}),
    Graph("bias_gelu_residual", "bias_gelu_residual.stitch", "primitives + gelu composite",
          {"h": [R, C], "bias": [C], "residual": [R, C]}, same_as("h"),
          {"h": [64, 256], "bias": [256], "residual": [64, 256]}),
    Graph("adam_step", "adam_step.stitch", "primitives",
          {"p": [R * C], "g": [R * C], "m": [R * C], "v": [R * C]}, lambda sh: [sh["p"]] * 3,
          {"p": [4096], "g": [4096], "m": [4096], "v": [4096]}, dtypes=("f32",)),
    Graph("column_sums", "column_sums.stitch", "primitives (two column reductions)",
          {"dy": [R, C], "xhat": [R, C]}, lambda sh: [sh["dy"][1:]] * 2,
          {"dy": [64, 256], "xhat": [64, 256]}),
] + training_suite(Graph, R, C, bn_images=256, tokens=4096, adam_n=R * C, gn_images=1024,
                   overrides={"adam_clip": {"dtypes": ("f32",)}})  # issue 15's suite
GRAPH_BY_NAME = {g.name: g for g in GRAPHS}
SECTIONS = ("main", "cost", "compile")

# ------------------------------------------------------------------------------------------------
# The same math in PyTorch. Read with the graph files: composites map to PyTorch's library op
# (which, like Stitch's decomposition, computes bf16 in f32 and rounds once); primitives map to
# tensor ops one for one, rounding to the dtype after each, as Stitch's primitives do.
# ------------------------------------------------------------------------------------------------


def torch_fns(torch):
    F = torch.nn.functional

    def rms_norm(x, gamma):
        if hasattr(F, "rms_norm"):  # PyTorch >= 2.4
            return F.rms_norm(x, (x.shape[-1],), gamma, 1e-6)
        xf = x.float()  # older PyTorch: written out, in f32 like the composite
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * gamma.float()).to(x.dtype)

    return {
        "layer_norm": lambda x, gamma, beta: F.layer_norm(x, (x.shape[-1],), gamma, beta, 1e-5),
        "rms_norm": rms_norm,
        "softmax": lambda x: torch.softmax(x, -1),
        "log_softmax": lambda x: torch.log_softmax(x, -1),
        "attention_softmax": lambda scores, mask_bias: torch.softmax(scores * 0.125 + mask_bias, -1),
        "bias_gelu_residual": lambda h, bias, residual: F.gelu(h + bias) + residual,
        "adam_step": torch_adam_step,
        "column_sums": lambda dy, xhat: ((dy * xhat).sum(0), dy.sum(0)),
        **training_fns(torch),
    }


TORCH_DTYPE = {"f32": "float32", "bf16": "bfloat16"}
M64 = (1 << 64) - 1


def _i64(u: int) -> int:
    """A uint64 constant as the int64 with the same bits (torch has no full uint64 arithmetic)."""
    u &= M64
    return u - (1 << 64) if u >= 1 << 63 else u


def _lsr(z, k: int):
    """Logical right shift of int64 bits (torch's >> is arithmetic)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def stitch_inputs(torch, shapes: dict[str, list[int]], dtype: str, seed: int, device,
                  fixed: dict[str, str] | None = None):
    """The inputs `stitch run --seed SEED` makes (tools/host_tensor.cpp, fillRandom): input i is
    splitmix64 stream i, x -> (x >> 11) * 2^-53 * 2 - 1, rounded from f64 to the dtype to nearest
    even; integer inputs (`fixed` names them: i64) are x mod 17 - 8. splitmix64's k-th output
    depends only on state0 + k * golden, so the whole stream is a few vectorized int64 ops
    (wrapping multiplication) on the device."""
    out = []
    for stream, (name, shape) in enumerate(shapes.items()):
        n = math.prod(shape)
        state0 = (seed ^ (0xD1B54A32D192ED03 * (stream + 1))) & M64
        z = torch.arange(1, n + 1, dtype=torch.int64, device=device) * _i64(0x9E3779B97F4A7C15) + _i64(state0)
        z = (z ^ _lsr(z, 30)) * _i64(0xBF58476D1CE4E5B9)
        z = (z ^ _lsr(z, 27)) * _i64(0x94D049BB133111EB)
        z = z ^ _lsr(z, 31)
        if (fixed or {}).get(name) == "i64":
            # The unsigned value mod 17: 2^64 = 1 (mod 17), so a negative int64 adds one.
            out.append(((torch.remainder(z, 17) + (z < 0).to(torch.int64)) % 17 - 8).reshape(shape))
            continue
        v = _lsr(z, 11).double() * 2.0**-52 - 1.0
        del z
        if dtype == "bf16":
            # Round f64 to bf16 directly (torch goes through f32: a double rounding): add half an
            # ulp of bf16 (minus one, plus the kept lsb: ties to even) to the bits and truncate.
            b = v.view(torch.int64)
            b = (b + ((1 << 44) - 1) + (_lsr(b, 45) & 1)) & ~((1 << 45) - 1)
            v = b.view(torch.float64)
        out.append(v.to(getattr(torch, TORCH_DTYPE[dtype])).reshape(shape))
        del v
    return out


def stitch_inputs_selftest(torch, device) -> str | None:
    """Checks the vectorized generator against splitmix64 in Python integers; None when equal."""
    state = 0xD1B54A32D192ED03 & M64  # seed 0, stream 0
    want = []
    for _ in range(64):
        state = (state + 0x9E3779B97F4A7C15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        z ^= z >> 31
        want.append((z >> 11) * 2.0**-53 * 2.0 - 1.0)
    got = stitch_inputs(torch, {"x": [64]}, "f32", 0, device)[0].double().tolist()
    # f32 rounding of the Python values: compare through torch's own f64 -> f32 cast.
    want32 = torch.tensor(want, dtype=torch.float64).float().double().tolist()
    return None if got == want32 else f"generator mismatch: {got[:3]} vs {want32[:3]}"


def summarize(torch, t) -> dict:
    """What `stitch run` prints per output: min, max, mean over non-NaN values, NaN count, the
    first four values (in f64)."""
    d = t.detach().flatten().double()
    nan = torch.isnan(d)
    n_nan = int(nan.sum())
    if n_nan:
        d = d[~nan]
    res = {"shape": list(t.shape), "nan": n_nan, "first": t.flatten()[:4].double().tolist()}
    if d.numel():
        res.update(min=float(d.min()), max=float(d.max()), mean=float(d.mean()))
    return res


def scaled_max_diff(torch, got, want) -> float:
    """max |got - want| / max |want| over all outputs: agreement relative to the output's scale."""
    worst = 0.0
    for g, w in zip(got, want):
        w64 = w.double()
        scale = max(float(w64.abs().max()), 1e-30) if w64.numel() else 1.0
        worst = max(worst, float((g.double() - w64).abs().max()) / scale if w64.numel() else 0.0)
    return worst


def make_timer(torch, device):
    """timed(fn, warmup, iters) -> (ms per call, last output). On CUDA: a pair of events around
    each call, read after one final synchronize, so the host enqueues ahead and the figure is
    device time (plus any gap the host leaves, which a user sees too). On the CPU: wall time."""
    if device.type == "cuda":
        def timed(fn, warmup, iters):
            out = None
            for _ in range(warmup):
                out = fn()
            torch.cuda.synchronize()
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(iters)]
            for start, end in ev:
                start.record()
                out = fn()
                end.record()
            torch.cuda.synchronize()
            return [s.elapsed_time(e) for s, e in ev], out
        return timed

    def timed(fn, warmup, iters):
        out = None
        for _ in range(warmup):
            out = fn()
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            out = fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return times, out
    return timed


def as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


# ------------------------------------------------------------------------------------------------
# Peer workers (subprocesses: `run.py --peer NAME --job JOB.json --result OUT.json`)
# ------------------------------------------------------------------------------------------------


def peer_copy(job: dict) -> dict:
    """Names the device and measures copy bandwidth: read + written bytes of a `copy_` between
    two buffers over its median time (for CUDA, a device-to-device cudaMemcpyAsync)."""
    import torch

    device = torch.device(job["device"])
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"torch {torch.__version__} sees no CUDA device")
    res = {"torch": torch.__version__, "device": device_info(torch, device), "copies": []}
    timed = make_timer(torch, device)

    def copy_ms(nbytes: int) -> list[float]:  # a function, so the buffers are freed on return
        src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
        dst = torch.empty_like(src)
        return timed(lambda: dst.copy_(src), job["warmup"], job["iters"])[0]

    for nbytes in job["copy_sizes"]:
        res["copies"].append({"bytes": nbytes, "ms": copy_ms(nbytes)})
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return res


def device_info(torch, device) -> dict:
    if device.type != "cuda":
        return {"name": f"host CPU ({platform.processor() or platform.machine()})", "type": "cpu"}
    p = torch.cuda.get_device_properties(device)
    info = {"type": "cuda", "name": torch.cuda.get_device_name(device),
            "capability": f"{p.major}.{p.minor}", "sms": p.multi_processor_count,
            "mem_gib": p.total_memory / 2**30, "torch_cuda": torch.version.cuda}
    try:  # the driver's CUDA version, from the driver itself
        import ctypes
        v = ctypes.c_int()
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v)) == 0:
            info["driver_cuda"] = f"{v.value // 1000}.{v.value % 1000 // 10}"
    except OSError:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader",
                              f"--id={device.index or 0}"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            info["driver"] = out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return info


def peer_torch(job: dict) -> dict:
    """Every case in PyTorch eager and under torch.compile; results saved case by case."""
    import torch

    device = torch.device(job["device"])
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"torch {torch.__version__} sees no CUDA device")
    res = {"version": torch.__version__, "cases": {}}
    try:
        import triton
        res["triton"] = triton.__version__
    except Exception:  # only informative: Inductor reports its own errors per case
        pass
    has_compile = hasattr(torch, "compile")
    if not has_compile:
        res["compile_note"] = f"torch {torch.__version__} has no torch.compile"
    res["gen_selftest"] = stitch_inputs_selftest(torch, device)
    fns = torch_fns(torch)
    timed = make_timer(torch, device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    compile_too = has_compile and not job["no_compile"]

    # A function per case, so its tensors are freed on return, before the next case allocates.
    @torch.no_grad()
    def run_case(case: dict, r: dict) -> None:
        fn = fns[case["graph"]]
        args = stitch_inputs(torch, case["inputs"], case["dtype"], job["seed"], device,
                             case.get("fixed"))
        r["eager_ms"], eager = timed(lambda: fn(*args), job["warmup"], job["iters"])
        eager = as_list(eager)
        r["eager_summary"] = [summarize(torch, o) for o in eager]
        if not compile_too:
            return
        torch._dynamo.reset()  # a clean first call per case; no recompile limits
        cfn = torch.compile(fn, dynamic=False)
        t0 = time.perf_counter()
        cfn(*args)
        sync()
        r["compile_first_call_s"] = time.perf_counter() - t0
        r["compile_ms"], out = timed(lambda: cfn(*args), job["warmup"], job["iters"])
        r["compile_vs_eager"] = scaled_max_diff(torch, as_list(out), eager)

    for case in job["cases"]:
        r = res["cases"][case["key"]] = {}
        try:
            run_case(case, r)
        except Exception as e:
            r["error"] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]}"
        if device.type == "cuda":
            torch.cuda.empty_cache()
        save_partial(job, res)
    return res


PEERS = {"torch": peer_torch, "copy": peer_copy}

# ------------------------------------------------------------------------------------------------
# Checks
# ------------------------------------------------------------------------------------------------


def compare_summaries(got: list[dict], want: list[dict], tol: float) -> str | None:
    """None when Stitch's printed summaries agree with eager's within tol times each output's
    scale; else what differs."""
    if len(got) != len(want):
        return f"{len(got)} outputs, eager has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        name = g.get("name", f"output {i}")
        if g["shape"] != w["shape"]:
            return f"{name}: shape {g['shape']} vs {w['shape']}"
        if g["nan"] != w["nan"]:
            return f"{name}: {g['nan']} NaNs vs {w['nan']}"
        if "min" not in w:
            continue
        scale = max(abs(w["min"]), abs(w["max"]), 1e-30)
        pairs = [(k, g[k], w[k]) for k in ("min", "max", "mean")]
        pairs += [(f"value {j}", a, b) for j, (a, b) in enumerate(zip(g["first"], w["first"]))]
        for what, a, b in pairs:
            if not abs(a - b) <= tol * scale:  # `not <=`: a NaN on one side is a difference
                return f"{name}: {what} {a:.6g} vs eager {b:.6g} (scale {scale:.3g})"
    return None


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------

CONTENDERS = [("fused", "Stitch fused"), ("off", "Stitch off"), ("eager", "PyTorch eager"),
              ("compile", "torch.compile")]
RATIOS = [("off", "fused vs off"), ("eager", "fused vs eager"), ("compile", "fused vs torch.compile")]


def fmt_gbps(x):
    return "n/a" if x is None else f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def cell(row: dict, k: str) -> str:
    ms = row["ms"].get(k)
    if ms is None:
        return "n/a"
    s = f"{fmt_ms(ms)} ms · {fmt_gbps(row['gbps'][k])} GB/s"
    return s + (f" · {row['pct_copy'][k]:.0f}%" if row["pct_copy"].get(k) is not None else "")


def device_line(dev: dict | None, torch_res: dict | None, minfo: dict) -> str:
    host = f"host {minfo['model']}, {minfo['cores']} CPUs"
    if not dev:
        return f"Device: n/a (the copy peer did not run, see notes); {host}."
    if dev.get("type") != "cuda":
        return f"Device: {dev['name']} (smoke run: PyTorch on the CPU, no GPU); {host}."
    drv = dev.get("driver", "n/a (no nvidia-smi)")
    s = (f"Device: {dev['name']} (sm_{dev['capability'].replace('.', '')}, {dev['sms']} SMs, "
         f"{dev['mem_gib']:.1f} GiB); driver {drv}, driver CUDA {dev.get('driver_cuda', 'n/a')}; "
         f"PyTorch built with CUDA {dev.get('torch_cuda')}")
    if torch_res and torch_res.get("triton"):
        s += f", Triton {torch_res['triton']}"
    return s + f"; {host}."


def build_report(a, rows, copy, versions, notes, minfo, command, backend, dev, tres, wall_s,
                 sections: list[str], extra: list[str]) -> str:
    L = []
    title = ("## GPU kernels: Stitch vs PyTorch eager and torch.compile" if "main" in sections
             else "## GPU kernels: Stitch's " + " and ".join(s for s in sections))
    L += [title + (" (SMOKE: tiny shapes on the CPU, not a benchmark)" if a.smoke else ""), ""]
    L += ["Command:", "", "```sh", command, "```", ""]
    L.append(device_line(dev, tres, minfo))
    L.append("")
    L.append(f"Date {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; the whole run "
             f"took {wall_s:.0f} s. Versions: " + "; ".join(f"{k} {v}" for k, v in versions.items()) + ".")
    L.append("")
    if "main" not in sections:
        L += extra
        if notes:
            L += ["", "Notes:", ""]
            L += [f"- {n}" for n in notes]
        L.append("")
        return "\n".join(L)
    L.append(f"Method: medians of {a.iters} timed runs per contender. PyTorch eager and torch.compile "
             f"(Inductor, default mode, compiled once per graph and dtype, `dynamic=False`): "
             f"{a.warmup} warm-up call{'s' if a.warmup != 1 else ''}, then "
             + ("a pair of CUDA events around each call" if not a.smoke else "wall time around each call")
             + f". Stitch: `stitch run FILE --graph NAME_DTYPE --backend {backend} --iters {a.iters}` with "
             "STITCH_FUSION=stitch (fused) and =off (one kernel per op), a fresh STITCH_CACHE_DIR each; "
             "the median of the CLI's own timing line (its first run, which compiles, is untimed).")
    L.append("")
    if copy:
        where = "host memory: a smoke run" if a.smoke else "device to device"
        L.append(f"Copy bandwidth (the roofline): read + written bytes of a `copy_` between two buffers ({where}), "
                 "median: " + "; ".join(f"{c['bytes'] / 2**20:.0f} MiB {c['gbps']:,.0f} GB/s" for c in copy["all"])
                 + f". \"copy\" below is the larger, {copy['gbps']:,.0f} GB/s.")
    else:
        L.append("Copy bandwidth: n/a (see notes); no % of copy.")
    L.append("")
    L.append("Each cell: median time · achieved GB/s · % of copy bandwidth. GB/s = minimum traffic "
             "(every input read once + every output written once, no intermediate) / median time, "
             "10^9 bytes. \"copy-bound\" is the time the copy bandwidth needs for that traffic. A copy "
             "reads and writes equal amounts; a graph that reads more than it writes can pass 100% of it "
             "(an even mix of reads and writes is not DRAM's best case), so 100% is a yardstick, not a ceiling. "
             "Ratios: other's time / Stitch fused's (above 1: fused is faster).")
    for dtype in a.dtypes:
        drows = [r for r in rows if r["dtype"] == dtype]
        if not drows:
            continue
        L += ["", f"### {dtype}", ""]
        L.append("| graph | MB moved | copy-bound ms | " + " | ".join(n for _, n in CONTENDERS) + " | "
                 + " | ".join(n for _, n in RATIOS) + " |")
        L.append("|:--|--:|--:|" + "--:|" * (len(CONTENDERS) + len(RATIOS)))
        for r in drows:
            L.append(f"| {r['graph']} | {r['bytes'] / 1e6:.4g} | {fmt_ms(r['copy_bound_ms'])} | "
                     + " | ".join(cell(r, k) for k, _ in CONTENDERS) + " | "
                     + " | ".join(fmt_x(r["ratio"].get(k)) for k, _ in RATIOS) + " |")
        L.append("| **geomean** | | | " + " | ".join("" for _ in CONTENDERS) + " | "
                 + " | ".join(fmt_x(geomean(r["ratio"].get(k) for r in drows)) for k, _ in RATIOS) + " |")
        for suite in ("inference", "training"):
            srows = [r for r in drows if GRAPH_BY_NAME[r["graph"]].suite == suite]
            if srows and len(srows) < len(drows):
                L.append(f"| geomean, {suite} suite | | | " + " | ".join("" for _ in CONTENDERS) + " | "
                         + " | ".join(fmt_x(geomean(r["ratio"].get(k) for r in srows)) for k, _ in RATIOS)
                         + " |")
    L += ["", "Kernels, compile and agreement. Kernels: how many `stitch run`'s first run compiled "
          "(cold cache). First run: that run's time (plan, code generation, compile, one run). "
          "torch.compile 1st call: trace, compile and one run, in process. Outputs vs eager: Stitch's "
          "printed summaries (min, max, mean, first values) against eager's on the same inputs (a check "
          "of the summary, which catches wrong inputs, axes, ops or constants, not every last-bit "
          "difference), and "
          "torch.compile's outputs elementwise against eager's, as max |diff| / max |eager|; "
          f"tolerance {TOL['f32']:g} (f32) and {TOL['bf16']:g} (bf16) of each output's scale.", ""]
    L.append("| graph | dtype | kernels fused / off | first run fused / off | torch.compile 1st call "
             "| Stitch fused | Stitch off | torch.compile |")
    L.append("|:--|:--|--:|--:|--:|:--|:--|:--|")
    def pair(a, b, unit=""):
        return "n/a" if a is None and b is None else f"{'n/a' if a is None else a} / {'n/a' if b is None else b}{unit}"

    for r in rows:
        k, fr = r["kernels"], r["first_ms"]
        first = pair(fmt_ms(fr["fused"]) if "fused" in fr else None, fmt_ms(fr["off"]) if "off" in fr else None, " ms")
        L.append(f"| {r['graph']} | {r['dtype']} | {pair(k.get('fused'), k.get('off'))} | "
                 f"{first} | {fmt_s(r['compile_first_call_s'])} | "
                 f"{r['agree'].get('fused', 'n/a')} | {r['agree'].get('off', 'n/a')} | {r['agree'].get('compile', 'n/a')} |")
    L.append("")
    L.append("Graphs: `bench/gpu/graphs/*.stitch`, static shapes of the [16384, 4096] class "
             "(64M elements: 256 MiB per tensor in f32, 128 MiB in bf16), one graph per dtype. "
             "PyTorch computes the same math on the same inputs: the library op where the graph uses "
             "a composite (`F.layer_norm`, `F.rms_norm`, `torch.softmax`, `torch.log_softmax`, `F.gelu`: "
             "bf16 computed in f32 and rounded once, as Stitch's decomposition does) and one tensor op per "
             "primitive otherwise (the mask and scale, bias and residual adds, Adam, the column sums), "
             "each rounding to the dtype as Stitch's primitives do. adam_step is f32 only: its literals "
             "would round to bf16 in a bf16 graph, which no PyTorch code computes. torch.compile may keep "
             "bf16 intermediates in f32 (Inductor's default), hence its small bf16 differences.")
    L += extra
    if notes:
        L += ["", "Notes:", ""]
        L += [f"- {n}" for n in notes]
    L.append("")
    return "\n".join(L)


# ------------------------------------------------------------------------------------------------
# Cold compile: NVRTC per kernel, and a program's first run with parallel compiles
# ------------------------------------------------------------------------------------------------

KERNEL_RE = re.compile(r"^\s+kernel (\d+): .* compiled by (\w+) in ([0-9.]+) ms(?: \(([0-9.]+) ms CPU\))?",
                       re.M)


def measure_compile(stitch: str, arch: str, files: list[Path], repeats: int, notes: list[str],
                    timeout_s: float) -> dict:
    """`stitch codegen FILE --target ARCH --emit report` for each file, one process per file: the
    run-time compiler's time for every kernel of every graph (no device, no kernel cache: each is a
    cold compile). The first kernel of each process also pays NVRTC's own start-up. With repeats >
    1, every file's process runs that many times (the files taking turns, so a burst of other load
    hits all alike) and each kernel's figure is its median."""
    runs: dict[Path, list[list[float]]] = {f: [] for f in files}
    for r in range(repeats):
        for f in files:
            log(f"compile {f.name} for {arch} ({r + 1} of {repeats})")
            try:
                p = subprocess.run([stitch, "codegen", str(f), "--target", arch, "--emit", "report"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   timeout=timeout_s, env=dict(os.environ, STITCH_FUSION="stitch"))
            except subprocess.TimeoutExpired:
                notes.append(f"compile times: {f.name} stopped after {timeout_s:.0f} s")
                continue
            if p.returncode != 0:
                notes.append(f"compile times: `stitch codegen {f.name}` exited {p.returncode}: "
                             f"{(p.stderr.strip().splitlines() or [''])[-1][:200]}")
                continue
            kernels = list(KERNEL_RE.finditer(p.stdout))
            runs[f].append([(float(m.group(3)), float(m.group(4)) if m.group(4) else None) for m in kernels])
    out = {"arch": arch, "repeats": repeats, "files": []}
    for f, rs in runs.items():
        if rs and all(len(x) == len(rs[0]) for x in rs):
            n = len(rs[0])
            cpu = [[x[i][1] for x in rs] for i in range(n)]
            out["files"].append({"file": str(f.relative_to(REPO)), "runs": rs,
                                 "ms": [med([x[i][0] for x in rs]) for i in range(n)],
                                 "cpu_ms": [med(c) if None not in c else None for c in cpu]})
    return out


def measure_parallel_first_runs(stitch: str, backend: str, cases, files, a, tmp: Path) -> list[dict]:
    """A program's first run (plan, compile every kernel, one run) with STITCH_FUSION=off, where
    programs have many kernels, compiled one at a time (STITCH_COMPILE_THREADS=1) and in parallel
    (the default), each with a fresh kernel cache."""
    rows = []
    for g, dt in cases:
        key = g.graph_name(dt)
        row = {"graph": g.name, "dtype": dt}
        for label, threads in (("serial", "1"), ("parallel", None)):
            env = {"STITCH_FUSION": "off", "STITCH_CACHE_DIR": tempfile.mkdtemp(dir=tmp, prefix="par-")}
            if threads:
                env["STITCH_COMPILE_THREADS"] = threads
            r = stitch_run(stitch, files[g.name], key, backend, 1, env, a.seed, a.stitch_timeout)
            row[label] = None if r.error else r.first_ms
            row["kernels"] = r.kernels_compiled
        rows.append(row)
    return rows


def compile_report(comp: dict, par: list[dict], notes_extra: list[str], smoke: bool) -> list[str]:
    L = ["", f"### Cold compile: {comp['arch']}", ""]
    all_ms = [m for f in comp["files"] for m in f["ms"]]
    first = [f["ms"][0] for f in comp["files"] if f["ms"]]
    rest = [m for f in comp["files"] for m in f["ms"][1:]]
    if not all_ms:
        return L + ["No kernel compiled (see notes)."]

    def pct(xs, q):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))] if xs else None

    L.append(f"`stitch codegen FILE --target {comp['arch']} --emit report` for every example and every "
             "bench graph file, one process per file (every graph in it; fusion stitch; `codegen` compiles "
             "every kernel, no kernel cache): the run-time compiler's wall time per kernel as Stitch "
             "reports it (program creation to code, compile options included)"
             + (f", the median of {comp['repeats']} processes per file." if comp["repeats"] > 1 else ".")
             + (" On this host CPU: NVRTC needs no GPU, so these figures are real for the CPU they ran on."
                if smoke else ""))
    L.append("")
    all_cpu = [c for f in comp["files"] for c in f.get("cpu_ms") or [] if c is not None]

    def summary(what, xs, firsts, rests):
        return (f"| {what} | {len(xs)} | {pct(xs, .5):.1f} | {pct(xs, .9):.1f} | {max(xs):.1f} | "
                f"{sum(m <= 50 for m in xs)} of {len(xs)} | {pct(firsts, .5):.1f} | "
                f"{pct(rests, .5) if rests else float('nan'):.1f} |")

    L.append("| time | kernels | median ms | p90 ms | max ms | ≤ 50 ms | first kernel of a process, median ms | "
             "later kernels, median ms |")
    L.append("|:--|--:|--:|--:|--:|--:|--:|--:|")
    L.append(summary("wall", all_ms, first, rest))
    if all_cpu and len(all_cpu) == len(all_ms):
        L.append(summary("CPU (compiling thread)", all_cpu,
                         [f["cpu_ms"][0] for f in comp["files"] if f["cpu_ms"]],
                         [c for f in comp["files"] for c in f["cpu_ms"][1:]]))
    L.append("")
    L.append("| file | kernels | wall ms per kernel (in order) | CPU ms |")
    L.append("|:--|--:|:--|:--|")
    for f in comp["files"]:
        cpu = ", ".join("n/a" if c is None else f"{c:.0f}" for c in f.get("cpu_ms") or [])
        L.append(f"| {f['file']} | {len(f['ms'])} | {', '.join(f'{m:.0f}' for m in f['ms'])} | {cpu or 'n/a'} |")
    if par:
        L += ["", "A program's first run (plan, compile, load, one run) with STITCH_FUSION=off (one kernel "
              "per op, so many kernels), a fresh kernel cache each: kernels compiled one at a time "
              "(STITCH_COMPILE_THREADS=1) and in parallel (the default, min(8, cores)).", ""]
        L.append("| graph | dtype | kernels | serial ms | parallel ms | speedup |")
        L.append("|:--|:--|--:|--:|--:|--:|")
        for r in par:
            sp = r["serial"] / r["parallel"] if r.get("serial") and r.get("parallel") else None
            L.append(f"| {r['graph']} | {r['dtype']} | {r.get('kernels', 'n/a')} | {fmt_ms(r.get('serial'))} | "
                     f"{fmt_ms(r.get('parallel'))} | {fmt_x(sp)} |")
    L += notes_extra
    return L


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------


def find_torch_python(explicit: str | None, smoke: bool) -> str:
    """The interpreter for the peers: --torch-python, else this one; for --smoke also the repo's
    .venv-bench and Debian's /usr/bin/python3, the first that imports torch."""
    if explicit:
        return explicit
    candidates = [sys.executable]
    if smoke:
        candidates += [str(REPO / ".venv-bench/bin/python"), "/usr/bin/python3"]
    for c in candidates:
        if Path(c).exists() and subprocess.run([c, "-c", "import torch"], stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL).returncode == 0:
            return c
    return sys.executable  # the peers then fail, and the notes say why


def prepare_file(g: Graph, smoke: bool, tmp: Path) -> Path:
    """Checks every dtype's signature against GRAPHS; --smoke gets a copy with tiny shapes."""
    path = GRAPH_DIR / g.file
    text = path.read_text()
    for dt in g.dtypes:
        dts = g.input_dtypes(dt)
        check_signature(path, g.graph_name(dt), {n: (dts[n], s) for n, s in g.inputs.items()})
        if smoke:
            text = with_shapes(text, g.graph_name(dt), {n: (dts[n], s) for n, s in g.smoke.items()})
            # Shapes written in the body (iota's) follow the inputs' shapes.
            for n, s in g.inputs.items():
                if len(s) > 1:
                    text = text.replace(str(s), str(g.smoke[n]))
    if not smoke:
        return path
    out = tmp / g.file
    out.write_text(text)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU, few iterations: checks the flow")
    ap.add_argument("--out", type=Path, help="also write the Markdown section here")
    ap.add_argument("--json", type=Path, help="write every raw figure here")
    ap.add_argument("--stitch", help="the stitch binary (default build/release/tools/stitch, else build/dev/...)")
    ap.add_argument("--backend", help="Stitch backend (default cuda; --smoke: cpu, else reference)")
    ap.add_argument("--iters", type=int, help="timed runs per contender (default 100; smoke 3)")
    ap.add_argument("--warmup", type=int, help="untimed calls first, PyTorch peers (default 5; smoke 1)")
    ap.add_argument("--graphs", help="comma list (default all: " + ",".join(GRAPH_BY_NAME) + ")")
    ap.add_argument("--dtypes", default=",".join(DTYPES), help="comma list (default f32,bf16)")
    ap.add_argument("--torch-python", help="interpreter for the PyTorch peers (default: this one)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--seed", type=int, default=0, help="input seed, as `stitch run --seed`")
    ap.add_argument("--stitch-timeout", type=float, default=120, help="seconds per `stitch run` (default 120)")
    ap.add_argument("--peer-timeout", type=float, default=480, help="seconds per peer process (default 480)")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help="comma list of " + ", ".join(SECTIONS) + " (default all): main = the table against "
                    "PyTorch; cost = the cost model's pick against its runner-ups and basic, measured; "
                    "compile = NVRTC's time per kernel and parallel first runs")
    ap.add_argument("--candidates", type=int, default=4,
                    help="cost section: the planner's pick and its next best plans, K in all (default 4)")
    ap.add_argument("--cost-iters", type=int, help="cost section: timed runs per plan (default 30; smoke 3)")
    ap.add_argument("--compile-target", help="compile section: the arch (default the device's, else sm_90)")
    ap.add_argument("--compile-repeats", type=int, default=1,
                    help="compile section: processes per file; each kernel's median (default 1)")
    # Worker mode.
    ap.add_argument("--peer", choices=sorted(PEERS), help=argparse.SUPPRESS)
    ap.add_argument("--job", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.peer:
        return peer_main(PEERS, a.peer, a.job, a.result)

    t_start = time.perf_counter()
    a.out, a.json = caller_path(a.out), caller_path(a.json)
    a.iters = a.iters or (3 if a.smoke else 100)
    a.cost_iters = a.cost_iters or (3 if a.smoke else 30)
    sections = [x for x in a.sections.split(",") if x]
    for x in sections:
        if x not in SECTIONS:
            raise SystemExit(f"bench: unknown section {x} (have {', '.join(SECTIONS)})")
    if a.candidates < 1:
        raise SystemExit("bench: --candidates must be at least 1 (the planner's pick)")
    a.warmup = a.warmup or (1 if a.smoke else 5)
    a.dtypes = [d for d in a.dtypes.split(",") if d]
    for d in a.dtypes:
        if d not in DTYPES:
            raise SystemExit(f"bench: unknown dtype {d} (have {', '.join(DTYPES)})")
    unknown = [n for n in (a.graphs or "").split(",") if n and n not in GRAPH_BY_NAME]
    if unknown:
        raise SystemExit(f"bench: unknown graph {', '.join(unknown)} (have {', '.join(GRAPH_BY_NAME)})")
    graphs = [GRAPH_BY_NAME[n] for n in a.graphs.split(",") if n] if a.graphs else GRAPHS
    notes: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="stitch-gpubench-"))
    command = os.environ.get("STITCH_BENCH_COMMAND") or " ".join(
        ["python3 bench/gpu/run.py"] + sys.argv[1:])
    minfo = machine_info()
    versions = {"Python (driver)": platform.python_version()}

    # Stitch: binary, backend, version.
    stitch = a.stitch or next((str(p) for p in (REPO / "build/release/tools/stitch", REPO / "build/dev/tools/stitch")
                               if p.exists()), str(REPO / "build/release/tools/stitch"))
    stitch = str(caller_path(Path(stitch))) if a.stitch else stitch
    backend = a.backend or ("cpu" if a.smoke else "cuda")
    stitch_ok = Path(stitch).exists()
    if not stitch_ok:
        notes.append(f"Stitch columns n/a: {stitch} does not exist (pass --stitch PATH)")
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

    cases = [(g, dt) for g in graphs for dt in g.dtypes if dt in a.dtypes]
    files = {g.name: prepare_file(g, a.smoke, tmp) for g in graphs}
    torch_python = find_torch_python(a.torch_python, a.smoke)
    device = "cpu" if a.smoke else "cuda"
    job = {"device": device, "seed": a.seed, "iters": a.iters, "warmup": a.warmup, "no_compile": a.no_compile,
           "copy_sizes": [8 * 2**20] if a.smoke else [256 * 2**20, 2**30],
           "cases": [{"key": g.graph_name(dt), "graph": g.name, "dtype": dt, "inputs": g.shapes(a.smoke),
                      "fixed": g.fixed} for g, dt in cases]}

    # 1. The device and its copy bandwidth.
    t0 = time.perf_counter()
    cres = run_peer(DRIVER, "copy", torch_python, job, tmp, notes, a.peer_timeout)
    copy, dev = None, None
    if cres:
        dev = cres["device"]
        allbw = [{"bytes": c["bytes"], "ms": med(c["ms"]), "gbps": 2 * c["bytes"] / (med(c["ms"]) * 1e-3) / 1e9}
                 for c in cres["copies"]]
        copy = {"all": allbw, "gbps": max(c["gbps"] for c in allbw)}
    log(f"copy peer: {time.perf_counter() - t0:.1f} s")

    # 2. PyTorch eager and torch.compile.
    t0 = time.perf_counter()
    tres = run_peer(DRIVER, "torch", torch_python, job, tmp, notes, a.peer_timeout) if "main" in sections else None
    log(f"torch peer: {time.perf_counter() - t0:.1f} s")
    if tres:
        versions["PyTorch"] = f"{tres['version']} ({torch_python})"
        if tres.get("compile_note"):
            notes.append(f"torch.compile n/a: {tres['compile_note']}")
        elif a.no_compile:
            notes.append("torch.compile skipped (--no-compile)")
        if tres.get("gen_selftest"):
            notes.append(f"output cross-check n/a: the torch peer could not recreate Stitch's inputs "
                         f"({tres['gen_selftest']})")

    # 3. Stitch, fused and one kernel per op; then each row's figures.
    t0 = time.perf_counter()
    rows, raw = [], []
    for g, dt in (cases if "main" in sections else []):
        key = g.graph_name(dt)
        sh = g.shapes(a.smoke)
        row = {"graph": g.name, "dtype": dt, "bytes": g.min_bytes(dt, a.smoke), "ms": {}, "kernels": {},
               "first_ms": {}, "agree": {}}
        stitch_raw = {}
        tc = (tres or {}).get("cases", {}).get(key, {})
        if tc.get("error"):
            notes.append(f"{key}: PyTorch failed: {tc['error']}")
        eager_summary = tc.get("eager_summary")
        cross = bool(eager_summary) and not (tres or {}).get("gen_selftest")
        if stitch_ok:
            log(f"stitch {key}")
            for k, fusion in (("fused", "stitch"), ("off", "off")):
                cache = Path(tempfile.mkdtemp(dir=tmp, prefix=f"cache-{k}-"))
                r = stitch_run(stitch, files[g.name], key, backend, a.iters,
                               {"STITCH_FUSION": fusion, "STITCH_CACHE_DIR": str(cache)}, a.seed, a.stitch_timeout)
                stitch_raw[k] = r.__dict__
                if r.error:
                    notes.append(f"{key}: Stitch {k} failed: {r.error}")
                    continue
                row["ms"][k] = r.median_ms
                row["kernels"][k] = r.kernels_compiled
                row["first_ms"][k] = r.first_ms
                want_shapes = g.outputs(sh)
                if [o["shape"] for o in r.outputs] != want_shapes:
                    notes.append(f"{key}: Stitch {k} printed output shapes {[o['shape'] for o in r.outputs]}, "
                                 f"the table says {want_shapes}: its MB figure is wrong")
                if cross:
                    diff = compare_summaries(r.outputs, eager_summary, TOL[dt])
                    row["agree"][k] = "agrees" if diff is None else "**differs**"
                    if diff:
                        notes.append(f"{key}: Stitch {k}'s outputs differ from eager's: {diff}")
        row["ms"]["eager"] = med(tc.get("eager_ms"))
        row["ms"]["compile"] = med(tc.get("compile_ms"))
        row["compile_first_call_s"] = tc.get("compile_first_call_s")
        if tc.get("compile_vs_eager") is not None:
            d = tc["compile_vs_eager"]
            row["agree"]["compile"] = f"{d:.1e}" + ("" if d <= TOL[dt] else " **differs**")
            if d > TOL[dt]:
                notes.append(f"{key}: torch.compile's outputs differ from eager's by {d:.2g} of their scale")
        ms = row["ms"]
        row["gbps"] = {k: (row["bytes"] / (v * 1e-3) / 1e9 if v else None) for k, v in ms.items()}
        row["pct_copy"] = {k: (100 * v / copy["gbps"] if v and copy else None) for k, v in row["gbps"].items()}
        row["copy_bound_ms"] = row["bytes"] / (copy["gbps"] * 1e9) * 1e3 if copy else None
        f = ms.get("fused")
        row["ratio"] = {k: (ms[k] / f if f and ms.get(k) else None) for k, _ in RATIOS}
        rows.append(row)
        raw.append({"key": key, "inputs": sh, "outputs": g.outputs(sh), "stitch": stitch_raw,
                    "torch": tc})
    log(f"stitch: {time.perf_counter() - t0:.1f} s")
    if not a.smoke and copy is None and "main" in sections:
        notes.append("no % of copy: the copy peer did not run")

    # 4. The cost model's pick against the alternatives it ranked lower, measured.
    extra, cost_rows, comp, par = [], [], None, []
    if "cost" in sections and stitch_ok:
        t0 = time.perf_counter()
        covered = {g.graph_name(dt) for g in GRAPHS for dt in g.dtypes}
        cost_cases = [CostCase(g.name, dt, files[g.name], g.graph_name(dt), g.min_bytes(dt, a.smoke))
                      for g, dt in cases]
        if not a.graphs:
            found = extra_graphs(GRAPH_DIR, covered)
            if a.smoke and found:
                notes.append("cost model: graphs without smoke shapes in the driver's table are not run in a "
                             "smoke run: " + ", ".join(n for _, n in found))
            elif found:
                cost_cases += [CostCase(n, n.rsplit("_", 1)[-1] if n.rsplit("_", 1)[-1] in DTYPE_BYTES else "",
                                        f, n, None) for f, n in found]
        cost_rows = measure_cost_model(stitch, backend, cost_cases, a, tmp, notes)
        extra += cost_model_report(cost_rows, a, backend,
                                   "tiny shapes on the CPU; the figures say nothing about a GPU." if a.smoke else None)
        log(f"cost model: {time.perf_counter() - t0:.1f} s")

    # 5. Cold compiles: NVRTC per kernel (no device needed), parallel first runs (a GPU backend).
    if "compile" in sections and stitch_ok:
        t0 = time.perf_counter()
        arch = a.compile_target or (f"sm_{dev['capability'].replace('.', '')}"
                                    if dev and dev.get("type") == "cuda" else "sm_90")
        comp_files = sorted((REPO / "examples").glob("*.stitch")) + sorted(GRAPH_DIR.glob("*.stitch"))
        comp = measure_compile(stitch, arch, comp_files, a.compile_repeats, notes, a.stitch_timeout)
        par_notes = []
        if backend in ("cuda", "hip"):
            par = measure_parallel_first_runs(stitch, backend, [(g, dt) for g, dt in cases if dt == "f32"],
                                              files, a, tmp)
        else:
            par_notes = ["", f"(No parallel first-run comparison: the `{backend}` backend does not compile "
                         "GPU kernels; STITCH_COMPILE_THREADS applies to cuda and hip.)"]
        extra += compile_report(comp, par, par_notes, a.smoke)
        log(f"compile: {time.perf_counter() - t0:.1f} s")

    wall_s = time.perf_counter() - t_start
    report = build_report(a, rows, copy, versions, notes, minfo, command, backend, dev, tres, wall_s,
                          sections, extra)
    print(report)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(report)
        log(f"report: {a.out}")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps({
            "smoke": a.smoke, "command": command, "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(),
            "wall_s": wall_s, "device": dev, "host": minfo, "versions": versions, "backend": backend,
            "stitch": stitch, "torch_python": torch_python, "iters": a.iters, "warmup": a.warmup, "seed": a.seed,
            "copy": {"derived": copy, "raw": (cres or {}).get("copies")}, "rows": rows, "raw": raw,
            "sections": sections, "cost_model": cost_rows, "compile": comp, "parallel_first_runs": par,
            "notes": notes}, indent=1))
        log(f"json: {a.json}")
    if a.smoke:
        log(f"smoke outputs kept in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
