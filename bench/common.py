"""Pieces the CPU and GPU benchmark drivers (bench/cpu/run.py, bench/gpu/run.py) share.

Both drivers do the same things around different contenders: run `stitch run FILE --iters K`
and parse what it prints, check a graph file's signature against the driver's table (and
rewrite it with tiny shapes for --smoke), start peers (PyTorch, JAX, copy) as subprocesses of
the driver script speaking JSON files, and format numbers for Markdown. This module holds those
and nothing device-specific; it needs only the standard library, so a driver's main process
never imports numpy or torch (the peers do, in their own interpreter).
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

DTYPE_BYTES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i32": 4, "i64": 8, "bool": 1}

# ------------------------------------------------------------------------------------------------
# Numbers and formatting
# ------------------------------------------------------------------------------------------------


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def med(ts) -> float | None:
    return statistics.median(ts) if ts else None


def geomean(xs) -> float | None:
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt_ms(x):
    return "n/a" if x is None else (f"{x:.3g}" if x < 100 else f"{x:.0f}")


def fmt_x(x):
    return "n/a" if x is None else f"{x:.2f}x"


def fmt_s(x):
    return "n/a" if x is None else (f"{x * 1e3:.0f} ms" if x < 10 else f"{x:.1f} s")


def caller_path(p: Path | None) -> Path | None:
    """A path the user gave, relative to where they ran the wrapper script (which cds to the
    repository root and exports its old directory as STITCH_BENCH_CWD)."""
    if p is None:
        return None
    return Path(os.environ.get("STITCH_BENCH_CWD", ".")) / p


def machine_info() -> dict:
    """The host: CPU model, logical CPUs, memory, load average (other work skews every column),
    and the vector extensions that decide which kernels a compiler emits (isa: those of avx2,
    avx512f, avx512_bf16, amx_bf16 that /proc/cpuinfo lists)."""
    info = {"model": platform.processor() or "?", "cores": os.cpu_count(), "mem_gib": None,
            "load": ", ".join(f"{x:.1f}" for x in os.getloadavg()), "isa": []}
    try:
        flags = next((line.split(":", 1)[1].split() for line in
                      Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), [])
        info["isa"] = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    except OSError:
        pass
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        kv = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        kv = {k.strip(): v.strip() for k, v in kv.items()}
        info["model"] = kv.get("Model name", info["model"])
        info["cores"] = kv.get("CPU(s)", info["cores"])
        info["threads_per_core"] = kv.get("Thread(s) per core")
    except OSError:
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["mem_gib"] = int(line.split()[1]) / 2**20
    except OSError:
        pass
    return info


# ------------------------------------------------------------------------------------------------
# Benchmark graphs
# ------------------------------------------------------------------------------------------------


@dataclass
class BenchGraph:
    """A benchmark graph: its file, the input shapes the peers must use (checked against the
    file), the output shapes as a function of the input shapes, and tiny shapes for --smoke."""

    name: str
    file: str
    form: str
    inputs: dict[str, list[int]]
    outputs: Callable[[dict[str, list[int]]], list[list[int]]]
    smoke: dict[str, list[int]]
    suite: str = "inference"  # or "training" (backward passes, optimizer steps)
    fixed: dict[str, str] | None = None  # inputs whose dtype is not the case's (labels: i64)

    def shapes(self, smoke: bool) -> dict[str, list[int]]:
        return self.smoke if smoke else self.inputs

    def input_dtypes(self, dtype: str) -> dict[str, str]:
        return {n: (self.fixed or {}).get(n, dtype) for n in self.inputs}

    def min_bytes(self, dtype: str, smoke: bool) -> int:
        """Every input read once, every output written once: the least any implementation moves."""
        sh = self.shapes(smoke)
        dts = self.input_dtypes(dtype)
        ins = sum(math.prod(s) * DTYPE_BYTES[dts[n]] for n, s in sh.items())
        return ins + sum(math.prod(s) for s in self.outputs(sh)) * DTYPE_BYTES[dtype]


def same_as(name: str):
    """Outputs: one, shaped like input `name`."""
    return lambda sh: [sh[name]]


def training_suite(cls, rows: int, cols: int, bn_images: int, tokens: int, adam_n: int, gn_images: int,
                   overrides: dict[str, dict] | None = None) -> list:
    """The training suite's rows as `cls` (a BenchGraph): backward passes and optimizer steps,
    where row and column reductions and all-reductions of one tensor meet. The graphs are
    bench/gpu/graphs' (bench/cpu/graphs holds their f32 graphs at host sizes), written out in
    PyTorch one op per primitive in training_fns (as a fused backward computes them: statistics
    recomputed from x). Sizes: [rows, cols] activations, batch norm on [bn_images, 256, 32, 32],
    cross-entropy over `tokens` x 32000 classes, Adam on `adam_n` parameters, GroupNorm on
    [gn_images, 256, 16, 16]. overrides: {graph: {field: value}} for a driver's own fields."""
    R, C = rows, cols
    spec = [
        ("layer_norm_backward", "rows + column partials", {"dy": [R, C], "x": [R, C], "gamma": [C]},
         lambda sh: [sh["dy"], sh["gamma"], sh["gamma"]], {"dy": [64, 256], "x": [64, 256], "gamma": [256]}),
        ("rms_norm_backward", "rows + column partials", {"dy": [R, C], "x": [R, C], "gamma": [C]},
         lambda sh: [sh["dy"], sh["gamma"]], {"dy": [64, 256], "x": [64, 256], "gamma": [256]}),
        ("softmax_backward", "rows", {"dy": [R, C], "y": [R, C]}, same_as("dy"),
         {"dy": [64, 256], "y": [64, 256]}),
        ("bias_gelu_backward", "column split + elementwise", {"dy": [R, C], "h": [R, C], "bias": [C]},
         lambda sh: [sh["dy"], sh["bias"]], {"dy": [64, 256], "h": [64, 256], "bias": [256]}),
        ("batch_norm_train", "middle-axis statistics",
         {"x": [bn_images, 256, 32, 32], "gamma": [256, 1, 1], "beta": [256, 1, 1]},
         lambda sh: [sh["x"], [1, sh["x"][1], 1, 1], [1, sh["x"][1], 1, 1]],
         {"x": [4, 8, 4, 4], "gamma": [8, 1, 1], "beta": [8, 1, 1]}),
        ("cross_entropy_train", "rows + grid barriers", {"logits": [tokens, 32000], "labels": [tokens, 1]},
         lambda sh: [[], sh["logits"]], {"logits": [16, 100], "labels": [16, 1]}),
        ("adam_clip", "all-reduction + elementwise", {n: [adam_n] for n in ("p", "g", "m", "v")},
         lambda sh: [sh["p"]] * 3, {n: [4096] for n in ("p", "g", "m", "v")}),
        ("group_norm_silu", "primitives across a reshape + silu composite",
         {"x": [gn_images, 256, 16, 16], "gamma": [256], "beta": [256]}, same_as("x"),
         {"x": [2, 256, 16, 16], "gamma": [256], "beta": [256]}),
    ]
    fixed = {"cross_entropy_train": {"labels": "i64"}}
    return [cls(name, f"{name}.stitch", form, inputs, outputs, smoke, suite="training", fixed=fixed.get(name),
                **(overrides or {}).get(name, {}))
            for name, form, inputs, outputs, smoke in spec]


# ------------------------------------------------------------------------------------------------
# The same math in PyTorch, where both drivers' graphs agree
# ------------------------------------------------------------------------------------------------


def torch_adam_step(p, g, m, v):
    """adam_step.stitch (bench/cpu/graphs and bench/gpu/graphs): one Adam step, step t = 10, as
    PyTorch tensor ops, one per primitive of the graph (constants: 1 - 0.9^10 and 1 - 0.999^10).
    Takes torch tensors; this module itself never imports torch."""
    mn = m * 0.9 + g * 0.1
    vn = v.abs() * 0.999 + (g * g) * 0.001
    upd = (mn / 0.6513215599) / ((vn / 0.0099551198).sqrt() + 1e-8)
    return p - upd * 0.001, mn, vn


def training_fns(torch):
    """The training suite's graphs as PyTorch tensor ops, one per primitive of the .stitch file
    (bf16 rounds after each op, as Stitch's primitives do). Eager runs them op by op; Inductor
    fuses what it can: the same math both ways. GroupNorm + SiLU is PyTorch's library ops, as the
    .stitch file is its composites' decomposition."""
    F = torch.nn.functional

    def layer_norm_backward(dy, x, gamma):
        mean = x.mean(1, keepdim=True)
        xc = x - mean
        var = (xc * xc).mean(1, keepdim=True)
        rstd = torch.rsqrt(var + 1e-5)
        xhat = xc * rstd
        dxhat = dy * gamma
        m1 = dxhat.mean(1, keepdim=True)
        m2 = (dxhat * xhat).mean(1, keepdim=True)
        dx = (dxhat - m1 - xhat * m2) * rstd
        return dx, (dy * xhat).sum(0), dy.sum(0)

    def rms_norm_backward(dy, x, gamma):
        rstd = torch.rsqrt((x * x).mean(1, keepdim=True) + 1e-6)
        xhat = x * rstd
        dxhat = dy * gamma
        m = (dxhat * xhat).mean(1, keepdim=True)
        return (dxhat - xhat * m) * rstd, (dy * xhat).sum(0)

    def bias_gelu_backward(dy, h, bias):
        x = h + bias
        cdf = (torch.erf(x * 0.7071067811865476) + 1) * 0.5
        pdf = torch.exp(x * x * -0.5) * 0.3989422804014327
        dh = dy * (cdf + x * pdf)
        return dh, dh.sum(0)

    def batch_norm_train(x, gamma, beta):
        mean = x.mean((0, 2, 3), keepdim=True)
        xc = x - mean
        var = (xc * xc).mean((0, 2, 3), keepdim=True)
        y = torch.relu(xc * torch.rsqrt(var + 1e-5) * gamma + beta)
        return y, mean, var

    def cross_entropy_train(logits, labels):
        m = logits.amax(1, keepdim=True)
        d = logits - m
        e = torch.exp(d)
        s = e.sum(1, keepdim=True)
        lp = d - torch.log(s)
        onehot = torch.arange(logits.shape[1], device=logits.device)[None, :] == labels
        nll = torch.where(onehot, lp, 0).sum(1, keepdim=True)
        w = (labels != -100).to(logits.dtype)
        count = w.sum()
        loss = -(nll.sum() / count)
        dlogits = (e / s - onehot.to(logits.dtype)) * (w / count)
        return loss, dlogits

    def adam_clip(p, g, m, v):
        clip = torch.clamp(1 / (torch.sqrt((g * g).sum()) + 1e-6), max=1)
        gc = g * clip
        mn = m * 0.9 + gc * 0.1
        vn = v.abs() * 0.999 + (gc * gc) * 0.001
        upd = (mn / 0.6513215599) / ((vn / 0.0099551198).sqrt() + 1e-8)
        return p - upd * 0.001, mn, vn

    return {
        "layer_norm_backward": layer_norm_backward,
        "rms_norm_backward": rms_norm_backward,
        "softmax_backward": lambda dy, y: y * (dy - (dy * y).sum(1, keepdim=True)),
        "bias_gelu_backward": bias_gelu_backward,
        "batch_norm_train": batch_norm_train,
        "cross_entropy_train": cross_entropy_train,
        "adam_clip": adam_clip,
        "group_norm_silu": lambda x, gamma, beta: F.silu(F.group_norm(x, 32, gamma, beta, 1e-5)),
    }


# ------------------------------------------------------------------------------------------------
# Graph files
# ------------------------------------------------------------------------------------------------

SIG_RE = re.compile(r"(\w+)\s*:\s*(\w+)\[([^\]]*)\]")


def graph_header(text: str, name: str) -> re.Match:
    """The `graph NAME(...)` header; group 1 is the parameter list."""
    m = re.search(r"graph\s+" + re.escape(name) + r"\s*\(([^)]*)\)", text)
    if not m:
        raise SystemExit(f"bench: no graph {name} in its file")
    return m


def graph_signature(text: str, name: str) -> dict[str, tuple[str, list[int]]]:
    """{input: (dtype, dims)} of graph `name` (static shapes: every dim an integer)."""
    hdr = graph_header(text, name)
    return {n: (dt, [int(d) for d in dims.split(",")] if dims.strip() else [])
            for n, dt, dims in SIG_RE.findall(hdr.group(1))}


def check_signature(path: Path, name: str, want: dict[str, tuple[str, list[int]]]) -> None:
    """Stops the run when the file and the driver's table disagree: the peers would then compute
    on other shapes than Stitch and every ratio would be wrong."""
    sig = graph_signature(path.read_text(), name)
    if sig != want:
        raise SystemExit(f"bench: {path} graph {name}: signature {sig} differs from the driver's {want}")


def with_shapes(text: str, name: str, inputs: dict[str, tuple[str, list[int]]]) -> str:
    """`text` with graph `name`'s parameter list replaced (how --smoke gets tiny shapes)."""
    hdr = graph_header(text, name)
    args = ", ".join(f"{n}: {dt}[{', '.join(map(str, s))}]" for n, (dt, s) in inputs.items())
    return text[: hdr.start(1)] + args + text[hdr.end(1):]


# ------------------------------------------------------------------------------------------------
# The stitch command line
# ------------------------------------------------------------------------------------------------

TIME_RE = re.compile(r"time: median ([0-9.eE+-]+) ms, min ([0-9.eE+-]+) ms over (\d+) runs")
FIRST_RE = re.compile(r"first run: ([0-9.eE+-]+) ms \((\d+) kernels compiled, (\d+) loaded")
# One output's summary line: "  y: f32[4, 8]  min -1.2  max 3.4  mean 0.01  [0.1, 0.2, ...]".
OUT_RE = re.compile(r"^\s+(\w+): (\w+)\[([^\]]*)\]\s+min (\S+)\s+max (\S+)\s+mean (\S+)"
                    r"(?:\s+nan (\d+))?\s+\[([^\]]*)\]", re.M)


@dataclass
class StitchRun:
    median_ms: float | None = None
    min_ms: float | None = None
    runs: int | None = None
    first_ms: float | None = None        # the untimed first run: plan, codegen, compile, run
    kernels_compiled: int | None = None  # in that first run (0 when all came from the disk cache)
    wall_s: float | None = None          # the whole process
    outputs: list[dict] = field(default_factory=list)  # parsed summaries, in output order
    error: str | None = None


def parse_summaries(text: str) -> list[dict]:
    """The per-output summaries `stitch run` prints (min, max, mean over non-NaN values, NaN
    count, first values), so a driver can compare them with a peer's on the same inputs."""
    outs = []
    for name, dtype, dims, lo, hi, mean, nans, first in OUT_RE.findall(text):
        vals = [float(v) for v in first.split(",") if v.strip() not in ("", "...")]
        outs.append({"name": name, "dtype": dtype, "shape": [int(d) for d in dims.split(",") if d.strip()],
                     "min": float(lo), "max": float(hi), "mean": float(mean), "nan": int(nans or 0),
                     "first": vals})
    return outs


def stitch_run(stitch: str, file: Path, graph: str, backend: str, iters: int, env: dict[str, str],
               seed: int = 0, timeout_s: float | None = None,
               extra_args: list[str] | None = None) -> StitchRun:
    """`stitch run FILE --graph G --backend B --iters K --seed S [EXTRA...]` with extra
    environment `env`."""
    cmd = [stitch, "run", str(file), "--graph", graph, "--backend", backend, "--iters", str(iters),
           "--seed", str(seed)] + (extra_args or [])
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=dict(os.environ, **env), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return StitchRun(error=f"stopped after {timeout_s:.0f} s")
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        last = p.stdout.strip().splitlines()[-1:] or [""]
        return StitchRun(error=f"exit {p.returncode}: {last[0][:200]}")
    m = TIME_RE.search(p.stdout)
    if not m:
        return StitchRun(error="no timing line in the output")
    r = StitchRun(median_ms=float(m.group(1)), min_ms=float(m.group(2)), runs=int(m.group(3)),
                  wall_s=wall, outputs=parse_summaries(p.stdout))
    f = FIRST_RE.search(p.stdout)
    if f:
        r.first_ms, r.kernels_compiled = float(f.group(1)), int(f.group(2))
    return r


def stitch_backend_available(stitch: str, backend: str, tmp: Path) -> tuple[bool, str]:
    """Runs a one-op graph on `backend`; (ok, the last line printed)."""
    probe = tmp / "probe.stitch"
    probe.write_text("graph probe(x: f32[4]) {\n  y = add(x, 1)\n  return y\n}\n")
    p = subprocess.run([stitch, "run", str(probe), "--backend", backend], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return p.returncode == 0, (p.stdout.strip().splitlines() or [""])[-1]


def stitch_version(stitch: str) -> str:
    out = subprocess.run([stitch, "--version"], stdout=subprocess.PIPE, text=True).stdout.strip()
    return out.replace("stitch ", "")


# ------------------------------------------------------------------------------------------------
# Peers: `DRIVER --peer NAME --job JOB.json --result OUT.json` in a subprocess
# ------------------------------------------------------------------------------------------------


def run_peer(driver: Path, name: str, python: str, job: dict, tmp: Path, notes: list[str],
             timeout_s: float | None = None, env: dict[str, str] | None = None) -> dict | None:
    """Runs peer `name` of `driver` under `python`; its result, or None (with a note) on failure.

    A subprocess per peer: another interpreter can run it, and one peer's allocator, thread
    pools or CUDA context never disturb another's measurements. A peer may save what it has so
    far with save_partial(); when it then fails or runs past timeout_s, that part is returned
    (with a note), so one slow or broken case does not lose the others. env: variables set for
    the peer on top of this process's (its thread count, its compiler caches)."""
    jf, rf = tmp / f"{name}.job.json", tmp / f"{name}.result.json"
    rf.unlink(missing_ok=True)
    jf.write_text(json.dumps(dict(job, _result=str(rf))))
    cmd = [python, str(driver), "--peer", name, "--job", str(jf), "--result", str(rf)]
    log(f"peer {name}: {python}")
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout_s, env=dict(os.environ, **env) if env else None)
        rc, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc, out = None, out + f"\n(stopped after {timeout_s:.0f} s)"
    if rc == 0 and rf.exists():
        return json.loads(rf.read_text())
    tail = " / ".join(out.strip().splitlines()[-3:])
    why = f"exit {rc}" if rc is not None else f"stopped after {timeout_s:.0f} s (--peer-timeout)"
    log(out[-3000:])
    if rf.exists():
        notes.append(f"{name} peer failed ({why}); its results up to then are used: {tail}")
        return json.loads(rf.read_text())
    notes.append(f"{name} peer failed ({why}): {tail}")
    return None


def save_partial(job: dict, res: dict) -> None:
    """A peer's results so far, written where run_peer looks (atomically: a peer killed
    mid-write leaves the previous complete file)."""
    path = Path(job["_result"])
    tmp = path.with_suffix(".partial")
    tmp.write_text(json.dumps(res))
    tmp.replace(path)


def peer_main(peers: dict, name: str, job: Path, result: Path) -> int:
    """The subprocess side of run_peer."""
    res = peers[name](json.loads(job.read_text()))
    result.write_text(json.dumps(res))
    return 0


# ------------------------------------------------------------------------------------------------
# The cost model against the hardware: the planner's pick, its runner-up plans and basic, measured
# ------------------------------------------------------------------------------------------------

TOTALS_RE = re.compile(r"^totals: (\d+) kernels?, [^,]+, ([0-9.eE+-]+) µs", re.M)
NO_CANDIDATE = "no candidate"


@dataclass
class CostCase:
    """One graph of the cost-model table: a file, a graph in it, its dtype (for the table) and
    its minimal traffic when known (None for a graph the driver's table does not describe)."""

    name: str
    dtype: str
    file: Path
    graph: str
    min_bytes: int | None
    iters: int | None = None  # timed runs of each plan (default: the driver's --cost-iters)


def extra_graphs(graph_dir: Path, covered: set[str]) -> list[tuple[Path, str]]:
    """Graphs in a driver's graph directory that its table does not describe (suites added
    later): measured by the cost-model section at their file's shapes, with no peer."""
    out = []
    for f in sorted(graph_dir.glob("*.stitch")):
        for name in re.findall(r"^graph\s+(\w+)\s*\(", f.read_text(), re.M):
            if name not in covered:
                out.append((f, name))
    return out


def plan_totals(dump_dir: Path) -> tuple[int | None, float | None]:
    """(kernels, modeled µs) from the plan STITCH_DUMP=plan wrote: the plan as the engine made it,
    priced with the profile the run used (the device's own, on a GPU)."""
    for f in sorted(dump_dir.glob("*.plan.txt")):
        m = TOTALS_RE.search(f.read_text())
        if m:
            return int(m.group(1)), float(m.group(2))
    return None, None


def measure_cost_model(stitch: str, backend: str, cases: list[CostCase], a, tmp: Path,
                       notes: list[str]) -> list[dict]:
    """Per case: the planner's pick (candidate 0), its next best K-1 plans (--plan-candidate k,
    fewer when the search saw fewer) and STITCH_FUSION=basic, each run by `stitch run --iters`
    with STITCH_DUMP=plan for the model's own estimate. One kernel cache per case: a kernel shared
    by two plans compiles once (compile time is outside the timed runs anyway)."""
    rows = []
    for c in cases:
        log(f"cost model {c.name}")
        cache = Path(tempfile.mkdtemp(dir=tmp, prefix="cost-cache-"))
        variants = [(f"candidate {k}", "stitch", k) for k in range(a.candidates)] + [("basic", "basic", 0)]
        row = {"graph": c.name, "dtype": c.dtype, "bytes": c.min_bytes, "variants": [], "searched": None}
        for label, fusion, k in variants:
            dump = Path(tempfile.mkdtemp(dir=tmp, prefix="plan-"))
            env = {"STITCH_FUSION": fusion, "STITCH_CACHE_DIR": str(cache), "STITCH_DUMP": "plan",
                   "STITCH_DUMP_DIR": str(dump)}
            r = stitch_run(stitch, c.file, c.graph, backend, c.iters or a.cost_iters, env, a.seed, a.stitch_timeout,
                           ["--plan-candidate", str(k)] if k else None)
            if r.error and NO_CANDIDATE in r.error:
                row["searched"] = k  # the search offered k plans: 0 .. k-1
                continue
            if r.error:
                notes.append(f"cost model, {c.name} {label}: {r.error}")
                continue
            kernels, model_us = plan_totals(dump)
            row["variants"].append({"label": label, "fusion": fusion, "candidate": k, "ms": r.median_ms,
                                    "min_ms": r.min_ms, "kernels": kernels, "model_us": model_us})
        v = row["variants"]
        measured = [x for x in v if x["ms"]]
        pick = next((x for x in v if x["label"] == "candidate 0"), None)
        if pick and measured:
            fastest = min(measured, key=lambda x: x["ms"])
            row["fastest"] = fastest["label"]
            row["pick_vs_fastest"] = pick["ms"] / fastest["ms"]
            row["within_5pct"] = pick["ms"] <= 1.05 * fastest["ms"]
            modeled = [x for x in v if x["model_us"] is not None and x["ms"]]
            if modeled:  # the plan the model ranks first among those measured, measured
                row["model_best"] = min(modeled, key=lambda x: x["model_us"])["label"]
        rows.append(row)
    return rows


def cost_model_report(rows: list[dict], a, backend: str, smoke_note: str | None) -> list[str]:
    """The cost section's Markdown. smoke_note: what a smoke run's figures do not say (None in a
    real run)."""
    L = ["", "### Cost model: the planner's pick against the alternatives, measured", ""]
    L.append(f"Each cell: measured median ms of `stitch run --backend {backend} --iters {a.cost_iters}` "
             "(compile excluded) / the cost model's estimate in µs (its own plan dump, STITCH_DUMP=plan, "
             "priced with the profile of the device the run used) / kernels. Candidate 0 is the planner's "
             "pick; candidate k (`--plan-candidate k`) its k-th next best distinct plan by the model; basic "
             "is STITCH_FUSION=basic. A missing candidate (—): the search evaluated fewer plans. 'pick / "
             "fastest': the pick's time over the fastest measured plan's; the pick is 'within 5%' when "
             "that is at most 1.05." + (f" SMOKE: {smoke_note}" if smoke_note else ""))
    L.append("")
    labels = [f"candidate {k}" for k in range(a.candidates)] + ["basic"]
    L.append("| graph | dtype | " + " | ".join(labels) + " | fastest | pick / fastest | within 5% | model's best |")
    L.append("|:--|:--|" + "--:|" * len(labels) + ":--|--:|:--|:--|")
    for r in rows:
        by = {x["label"]: x for x in r["variants"]}

        def cell(label):
            x = by.get(label)
            if not x:
                return "—" if r.get("searched") is not None and label.startswith("candidate") else "n/a"
            model = "n/a" if x["model_us"] is None else f"{x['model_us']:.4g}"
            return f"{fmt_ms(x['ms'])} / {model} / {x['kernels'] if x['kernels'] is not None else 'n/a'}"

        ratio = r.get("pick_vs_fastest")
        L.append(f"| {r['graph']} | {r['dtype']} | " + " | ".join(cell(l) for l in labels) + " | "
                 f"{r.get('fastest', 'n/a')} | {'n/a' if ratio is None else f'{ratio:.3f}'} | "
                 f"{'n/a' if 'within_5pct' not in r else ('yes' if r['within_5pct'] else '**no**')} | "
                 f"{r.get('model_best', 'n/a')} |")
    judged = [r for r in rows if "within_5pct" in r]
    within = sum(r["within_5pct"] for r in judged)
    alternatives = sum(1 for r in judged if len(r["variants"]) > 1)
    agree = sum(1 for r in judged if r.get("model_best") == r.get("fastest"))
    L.append("")
    L.append(f"The planner's pick is within 5% of the fastest measured plan in **{within} of {len(judged)}** "
             f"graph/dtype cases ({alternatives} of them had an alternative to measure); the model ranks "
             f"the measured fastest plan first in {agree} of {len(judged)}.")
    return L
