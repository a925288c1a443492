#!/usr/bin/env python3
"""CPU benchmark: Stitch (fused, and one kernel per op) against PyTorch eager, torch.compile and
JAX on memory-bound graphs, with the machine's copy bandwidth measured in the same run.

Usually started by scripts/bench-cpu.sh, which builds `stitch` and the peers' virtualenv. Run
directly:

    python bench/cpu/run.py [--smoke] [--out FILE] [--stitch build/release/tools/stitch]

What it does, in one run:
  1. measures copy bandwidth (bytes read + written / time, median) of a 256 MB f32 buffer, with
     numpy (one thread) and torch (all cores); the larger is "copy" in the tables;
  2. for each graph of bench/cpu/graphs/ (static shapes): `stitch run FILE --backend cpu --iters K`
     with STITCH_FUSION=stitch and =off (parsing the median the CLI prints); the same math in
     PyTorch eager, torch.compile (Inductor, C++ backend) and jax.jit, each with warm-up and the
     median of K runs; and the wall time of `stitch run --iters 1` with a fresh and then a warm
     STITCH_CACHE_DIR;
  3. prints a Markdown section (command, machine, date, versions, tables), writes it to --out, and
     draws bench/cpu/cpu_benchmark.png (or --chart).

Every figure comes from a measurement of this run; what cannot be measured is written "n/a" with
the reason in the notes. Peers run in subprocesses of this script (`--peer torch|jax|copy`), so a
different interpreter can run PyTorch (Debian's python3-torch when PyPI's does not import) and
one peer's allocator and thread pools do not disturb another's.

--smoke runs the same flow on tiny shapes (the .stitch files are rewritten to a temp dir) with few
iterations; Stitch runs on --backend cpu when it exists, else on the reference interpreter. Smoke
numbers measure nothing of interest; they prove the pipeline works.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import platform
import shutil
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
from common import (DTYPE_BYTES, caller_path, check_signature, fmt_ms, fmt_s, fmt_x,  # noqa: E402
                    geomean, log, machine_info, med, peer_main, run_peer, stitch_backend_available,
                    stitch_run, stitch_version, torch_adam_step, with_shapes)


@dataclass
class Graph:
    """A benchmark graph: its .stitch file and the shapes the peers must use.

    `inputs` must match the file's signature exactly (checked); `outputs` names, per output, the
    input whose shape it has. `smoke` gives tiny shapes for --smoke."""

    name: str
    file: str
    form: str
    inputs: dict[str, list[int]]
    outputs: list[str]
    smoke: dict[str, list[int]]
    dtype: str = "f32"

    def shapes(self, smoke: bool) -> dict[str, list[int]]:
        return self.smoke if smoke else self.inputs

    def ideal_bytes(self, smoke: bool) -> int:
        """Bytes an ideal fused kernel moves: every input read once, every output written once."""
        sh = self.shapes(smoke)
        elems = sum(math.prod(s) for s in sh.values()) + sum(math.prod(sh[o]) for o in self.outputs)
        return elems * DTYPE_BYTES[self.dtype]


GRAPHS = [
    Graph("layer_norm", "layer_norm.stitch", "composite",
          {"x": [32768, 768], "gamma": [768], "beta": [768]}, ["x"],
          {"x": [64, 768], "gamma": [768], "beta": [768]}),
    Graph("rms_norm", "rms_norm.stitch", "composite",
          {"x": [8192, 4096], "gamma": [4096]}, ["x"],
          {"x": [16, 4096], "gamma": [4096]}),
    Graph("softmax", "softmax.stitch", "composite",
          {"x": [32768, 1024]}, ["x"],
          {"x": [64, 1024]}),
    Graph("bias_gelu_residual", "bias_gelu_residual.stitch", "primitives + gelu composite",
          {"h": [8192, 3072], "bias": [3072], "residual": [8192, 3072]}, ["h"],
          {"h": [16, 3072], "bias": [3072], "residual": [16, 3072]}),
    Graph("adam_step", "adam_step.stitch", "primitives",
          {"p": [8388608], "g": [8388608], "m": [8388608], "v": [8388608]}, ["p", "p", "p"],
          {"p": [4096], "g": [4096], "m": [4096], "v": [4096]}),
    Graph("attention_softmax", "attention_softmax.stitch", "primitives + softmax composite",
          {"scores": [8, 12, 512, 512], "mask_bias": [8, 1, 1, 512]}, ["scores"],
          {"scores": [1, 2, 32, 32], "mask_bias": [1, 1, 1, 32]}),
]
GRAPH_BY_NAME = {g.name: g for g in GRAPHS}

# ------------------------------------------------------------------------------------------------
# The same math in each peer. Inputs are uniform in [-1, 1) like `stitch run`'s.
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
    }


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

    return {
        "layer_norm": layer_norm,
        "rms_norm": lambda x, gamma: x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * gamma,
        "softmax": lambda x: jax.nn.softmax(x, axis=-1),
        "bias_gelu_residual": lambda h, bias, residual: jax.nn.gelu(h + bias, approximate=False) + residual,
        "adam_step": adam,
        "attention_softmax": lambda scores, mask_bias: jax.nn.softmax(scores * 0.125 + mask_bias, axis=-1),
    }


def numpy_inputs(np, shapes: dict[str, list[int]], seed: int):
    rng = np.random.default_rng(seed)
    return [(rng.random(s, dtype=np.float32) * 2 - 1).astype(np.float32) for s in shapes.values()]


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


def checksum(outs) -> float:
    """Sum of every output in f64: a cheap way to see that peers computed the same thing."""
    if not isinstance(outs, (tuple, list)):
        outs = [outs]
    return float(sum(float(o.astype("float64").sum()) for o in outs))


# ------------------------------------------------------------------------------------------------
# Peer workers (run in subprocesses: `run.py --peer NAME --job JOB.json --result OUT.json`)
# ------------------------------------------------------------------------------------------------


def peer_torch(job: dict) -> dict:
    import numpy as np
    import torch

    torch.set_num_threads(job["threads"])
    res = {"version": torch.__version__, "threads": torch.get_num_threads(), "graphs": {}}
    fns = torch_fns(torch)
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
    for gname, shapes in job["graphs"].items():
        r = res["graphs"][gname] = {}
        args = [torch.from_numpy(a) for a in numpy_inputs(np, shapes, job["seed"])]
        fn = fns[gname]
        with torch.inference_mode():
            ts, out = timed(lambda: fn(*args), lambda o: o, job["warmup"], job["iters"])
            r["eager_ms"] = ts
            r["eager_sum"] = checksum([o.numpy() for o in (out if isinstance(out, tuple) else [out])])
            del out
        if not has_compile or job.get("no_compile"):
            continue
        try:
            torch._dynamo.reset()
            cfn = torch.compile(fn)
            with torch.inference_mode():
                t0 = time.perf_counter()
                cfn(*args)  # compiles
                r["compile_first_call_s"] = time.perf_counter() - t0
                ts, out = timed(lambda: cfn(*args), lambda o: o, job["warmup"], job["iters"])
            r["compile_ms"] = ts
            r["compile_sum"] = checksum([o.numpy() for o in (out if isinstance(out, tuple) else [out])])
            del out
        except Exception as e:
            r["compile_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    return res


def peer_jax(job: dict) -> dict:
    import numpy as np
    import jax
    import jax.numpy as jnp
    import jaxlib

    res = {"version": jax.__version__, "jaxlib": jaxlib.__version__,
           "devices": [str(d) for d in jax.devices()], "graphs": {}}
    fns = jax_fns(jax, jnp)
    for gname, shapes in job["graphs"].items():
        r = res["graphs"][gname] = {}
        args = [jax.device_put(a) for a in numpy_inputs(np, shapes, job["seed"])]
        jfn = jax.jit(fns[gname])
        t0 = time.perf_counter()
        jax.block_until_ready(jfn(*args))
        r["jit_first_call_s"] = time.perf_counter() - t0
        ts, out = timed(lambda: jfn(*args), jax.block_until_ready, job["warmup"], job["iters"])
        r["jax_ms"] = ts
        r["jax_sum"] = checksum([np.asarray(o) for o in (out if isinstance(out, tuple) else [out])])
        del out
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


PEERS = {"torch": peer_torch, "jax": peer_jax, "copy": peer_copy}


# ------------------------------------------------------------------------------------------------
# Stitch
# ------------------------------------------------------------------------------------------------


def stitch_env(fusion: str, cache_dir: Path, threads: int) -> dict[str, str]:
    return {"STITCH_FUSION": fusion, "STITCH_CACHE_DIR": str(cache_dir), "STITCH_NUM_THREADS": str(threads)}


def prepare_graph(g: Graph, smoke: bool, tmp: Path) -> Path:
    """Checks the file's signature against the spec; for --smoke writes a copy with tiny shapes."""
    path = GRAPH_DIR / g.file
    check_signature(path, g.name, {n: (g.dtype, s) for n, s in g.inputs.items()})
    if not smoke:
        return path
    out = tmp / g.file
    out.write_text(with_shapes(path.read_text(), g.name, {n: (g.dtype, s) for n, s in g.smoke.items()}))
    return out


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------


CONTENDERS = [("fused", "Stitch fused"), ("off", "Stitch off"), ("eager", "PyTorch eager"),
              ("compile", "torch.compile"), ("jax", "JAX jit")]


def build_report(a, rows, copy, versions, notes, minfo, command, backend) -> str:
    L = []
    L.append(f"## CPU kernels: Stitch vs PyTorch, torch.compile and JAX{' (SMOKE: tiny shapes, not a benchmark)' if a.smoke else ''}")
    L.append("")
    L.append("Command:")
    L.append("")
    L.append("```sh")
    L.append(command)
    L.append("```")
    L.append("")
    mem = f"{minfo['mem_gib']:.0f} GiB" if minfo.get("mem_gib") else "?"
    L.append(f"Machine: {minfo['model']}, {minfo['cores']} CPUs, {mem} memory, "
             f"{platform.system()} {platform.release()}; "
             f"{_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; "
             f"load average {minfo['load']} at the start (other work on the machine skews every column). "
             f"Medians of {a.iters} runs after {a.warmup} warm-up run{'s' if a.warmup > 1 else ''}; float32; all {a.threads} threads "
             f"for every contender (Stitch: STITCH_NUM_THREADS; torch.set_num_threads; XLA's default pool).")
    L.append("")
    L.append("Versions: " + "; ".join(f"{k} {v}" for k, v in versions.items()) + ".")
    L.append("")
    if copy:
        L.append(f"Copy bandwidth (read + written bytes of a {copy['bytes'] / 2**20:.0f} MiB f32 copy, median): "
                 + "; ".join(f"{k} {v:.1f} GB/s" for k, v in copy["all"].items())
                 + f". The reference (\"copy\") is the larger, {copy['gbps']:.1f} GB/s.")
    else:
        L.append("Copy bandwidth: n/a (see notes).")
    L.append("")
    L.append(f"Stitch backend: `{backend}`. Traffic is what an ideal fused kernel moves: every input read once "
             "and every output written once; GB/s = that / median time (10^9 bytes).")
    L.append("")
    # Table 1: times.
    L.append("| graph | form | ideal MB | " + " | ".join(f"{n} ms" for _, n in CONTENDERS) + " |")
    L.append("|:--|:--|--:|" + "--:|" * len(CONTENDERS))
    for r in rows:
        L.append(f"| {r['name']} | {r['form']} | {r['bytes'] / 1e6:.3g} | "
                 + " | ".join(fmt_ms(r["ms"].get(k)) for k, _ in CONTENDERS) + " |")
    L.append("")
    # Table 2: bandwidth.
    L.append("Achieved bandwidth, GB/s (% of copy):")
    L.append("")
    L.append("| graph | " + " | ".join(n for _, n in CONTENDERS) + " |")
    L.append("|:--|" + "--:|" * len(CONTENDERS))
    for r in rows:
        cells = []
        for k, _ in CONTENDERS:
            g = r["gbps"].get(k)
            cells.append("n/a" if g is None else
                         f"{g:.1f} ({100 * g / copy['gbps']:.0f}%)" if copy else f"{g:.1f}")
        L.append(f"| {r['name']} | " + " | ".join(cells) + " |")
    L.append("")
    # Table 3: speedups of Stitch fused.
    vs = [("off", "vs off"), ("eager", "vs eager"), ("compile", "vs torch.compile"), ("jax", "vs JAX")]
    L.append("Speedup of Stitch fused (other's time / fused time):")
    L.append("")
    L.append("| graph | " + " | ".join(n for _, n in vs) + " |")
    L.append("|:--|" + "--:|" * len(vs))
    for r in rows:
        L.append(f"| {r['name']} | " + " | ".join(fmt_x(r["speedup"].get(k)) for k, _ in vs) + " |")
    L.append("| **geomean** | " + " | ".join(fmt_x(geomean(r["speedup"].get(k) for r in rows)) for k, _ in vs) + " |")
    L.append("")
    L.append("Speedup over PyTorch eager (eager time / contender time), geomean over graphs: "
             + "; ".join(f"{n} {fmt_x(geomean(r['vs_eager'].get(k) for r in rows))}"
                         for k, n in CONTENDERS if k != "eager") + ".")
    L.append("")
    # Table 4: compile times.
    L.append("Compile time. Stitch: wall time of `stitch run FILE --iters 1` (a process: parse, random "
             "inputs, compile, 2 runs) with a fresh STITCH_CACHE_DIR (cold) and again with the same "
             "directory (warm); cold - warm estimates the compile time the disk cache saves. "
             "torch.compile and JAX: the first call's time (trace + compile + run), in process.")
    L.append("")
    L.append("| graph | Stitch cold | Stitch warm | cold - warm | cache files | torch.compile 1st call | JAX jit 1st call |")
    L.append("|:--|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        c = r["compile"]
        L.append(f"| {r['name']} | {fmt_s(c.get('cold'))} | {fmt_s(c.get('warm'))} | {fmt_s(c.get('saved'))} | "
                 f"{c.get('cache_files', 'n/a')} | {fmt_s(c.get('torch_compile'))} | {fmt_s(c.get('jax'))} |")
    L.append("")
    L.append("Graphs: `bench/cpu/graphs/*.stitch` (static shapes; \"form\" says whether written with composites "
             "or primitives). The peers compute the same math on the same shapes: PyTorch with its library "
             "ops where it has one (`F.layer_norm`, `torch.softmax`, `F.gelu`) and plain tensor ops otherwise "
             "(RMSNorm, Adam written out as in the graph); JAX with `jax.nn` and `jnp` ops under `jax.jit`. "
             "Each peer's outputs are summed and compared with PyTorch eager's, on the same inputs.")
    if notes:
        L.append("")
        L.append("Notes:")
        L.append("")
        for n in notes:
            L.append(f"- {n}")
    L.append("")
    return "\n".join(L)


def draw_chart(rows, copy, path: Path, smoke: bool, notes: list[str]) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:
        notes.append(f"no chart: matplotlib unavailable ({e})")
        return
    names = [r["name"] for r in rows]
    fig, axes = plt.subplots(2, 1, figsize=(11, 8.5))
    colors = {"fused": "#1b7837", "off": "#a6dba0", "eager": "#762a83", "compile": "#c2a5cf", "jax": "#e08214"}
    width = 0.8 / len(CONTENDERS)
    for ax, key, title, ylabel in (
        (axes[0], "vs_eager", "Speedup over PyTorch eager (higher is better)", "x faster than eager"),
        (axes[1], "pct_copy", "Achieved bandwidth as % of measured copy bandwidth", "% of copy bandwidth"),
    ):
        for i, (k, label) in enumerate(CONTENDERS):
            vals = [r[key].get(k) for r in rows]
            xs = [j + (i - (len(CONTENDERS) - 1) / 2) * width for j in range(len(rows))]
            ax.bar(xs, [v if v is not None else 0 for v in vals], width, label=label, color=colors[k])
            for x, v in zip(xs, vals):
                if v is None:
                    ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=6, rotation=90)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(names, fontsize=9)
        ax.set_title(title, fontsize=11)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
        if key == "vs_eager":
            ax.axhline(1.0, color="black", lw=0.8)
        else:
            ax.axhline(100.0, color="black", lw=0.8, ls="--")
        ax.legend(fontsize=8, ncol=5, loc="upper left")
    sup = "Stitch CPU benchmark" + (" - SMOKE RUN (tiny shapes, not a measurement of interest)" if smoke else "")
    if copy:
        sup += f"\ncopy bandwidth {copy['gbps']:.1f} GB/s"
    fig.suptitle(sup, fontsize=12)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    log(f"chart: {path}")


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, few iterations: checks the flow")
    ap.add_argument("--out", type=Path, help="also write the Markdown section here")
    ap.add_argument("--chart", type=Path, help="PNG path (default bench/cpu/cpu_benchmark.png; "
                    "with --smoke, a temp path)")
    ap.add_argument("--stitch", default=str(REPO / "build/release/tools/stitch"))
    ap.add_argument("--backend", default="cpu", help="Stitch backend (default cpu; --smoke falls back "
                    "to reference when cpu is unavailable)")
    ap.add_argument("--iters", type=int, help="timed runs per contender (default 20; smoke 3)")
    ap.add_argument("--warmup", type=int, help="untimed runs first (default 3; smoke 1)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--graphs", help="comma list of graphs (default all: " + ",".join(GRAPH_BY_NAME) + ")")
    ap.add_argument("--torch-python", default=sys.executable, help="interpreter for the PyTorch peer")
    ap.add_argument("--torch-note", default="", help="how PyTorch was installed (put in the report)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--seed", type=int, default=0)
    # Worker mode.
    ap.add_argument("--peer", choices=sorted(PEERS), help=argparse.SUPPRESS)
    ap.add_argument("--job", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.peer:
        return peer_main(PEERS, a.peer, a.job, a.result)

    a.out = caller_path(a.out)
    a.chart = caller_path(a.chart)
    a.iters = a.iters or (3 if a.smoke else 20)
    a.warmup = a.warmup or (1 if a.smoke else 3)
    graphs = [GRAPH_BY_NAME[n] for n in a.graphs.split(",")] if a.graphs else GRAPHS
    notes: list[str] = []
    if a.torch_note:
        notes.append(a.torch_note)
    tmp = Path(tempfile.mkdtemp(prefix="stitch-bench-"))
    chart = a.chart or (tmp / "cpu_benchmark.png" if a.smoke else HERE / "cpu_benchmark.png")
    command = " ".join(["scripts/bench-cpu.sh"] + (["--smoke"] if a.smoke else []))
    if os.environ.get("STITCH_BENCH_COMMAND"):
        command = os.environ["STITCH_BENCH_COMMAND"]
    minfo = machine_info()
    versions = {"Python": platform.python_version()}

    # Stitch: which backend, and its version.
    backend = a.backend
    stitch_ok = Path(a.stitch).exists()
    if not stitch_ok:
        notes.append(f"Stitch not run: {a.stitch} does not exist (build it: cmake --build --preset release --target stitch_cli)")
    else:
        versions["Stitch"] = stitch_version(a.stitch)
        ok, why = stitch_backend_available(a.stitch, backend, tmp)
        if not ok and a.smoke and backend != "reference":
            notes.append(f"Stitch backend `{backend}` unavailable ({why}); smoke run uses `reference` "
                         "(the f64 interpreter, unfused: its times say nothing about Stitch's kernels)")
            backend = "reference"
            ok, why = stitch_backend_available(a.stitch, backend, tmp)
        if not ok:
            notes.append(f"Stitch columns n/a: backend `{backend}` unavailable ({why})")
            stitch_ok = False

    shapes = {g.name: g.shapes(a.smoke) for g in graphs}
    job = {"graphs": shapes, "seed": a.seed, "iters": a.iters, "warmup": a.warmup, "threads": a.threads,
           "no_compile": a.no_compile, "copy_bytes": (32 if a.smoke else 256) * 2**20}

    # 1. Copy bandwidth (torch if the torch interpreter has it, numpy always).
    copy = None
    cres = run_peer(DRIVER, "copy", a.torch_python, job, tmp, notes)
    if cres:
        allbw = {"numpy copyto, 1 thread": 2 * cres["bytes"] / (med(cres["numpy_1thread_ms"]) * 1e-3) / 1e9}
        if "torch_all_threads_ms" in cres:
            allbw[f"torch copy_, {cres['torch_threads']} threads"] = (
                2 * cres["bytes"] / (med(cres["torch_all_threads_ms"]) * 1e-3) / 1e9)
        copy = {"bytes": cres["bytes"], "all": allbw, "gbps": max(allbw.values())}

    # 2. Peers.
    tres = run_peer(DRIVER, "torch", a.torch_python, job, tmp, notes)
    if tres:
        versions["PyTorch"] = tres["version"]
        if "compile_note" in tres:
            notes.append(f"torch.compile skipped: {tres['compile_note']}")
        elif a.no_compile:
            notes.append("torch.compile skipped (--no-compile)")
        else:
            versions["torch.compile"] = f"Inductor, C++ backend ({tres.get('inductor_cpp_compiler', '?')})"
    jres = run_peer(DRIVER, "jax", sys.executable, job, tmp, notes)
    if jres:
        versions["JAX"] = f"{jres['version']} (jaxlib {jres['jaxlib']}, {', '.join(jres['devices'])})"
    try:
        import numpy
        versions["numpy"] = numpy.__version__
    except ImportError:
        pass

    # 3. Stitch, per graph; then the tables' figures.
    rows = []
    for g in graphs:
        file = prepare_graph(g, a.smoke, tmp)
        row = {"name": g.name, "form": g.form, "bytes": g.ideal_bytes(a.smoke), "ms": {}, "compile": {}}
        if stitch_ok:
            log(f"stitch {g.name}")
            for key, fusion in (("fused", "stitch"), ("off", "off")):
                cache = Path(tempfile.mkdtemp(dir=tmp, prefix=f"cache-{key}-"))
                r = stitch_run(a.stitch, file, g.name, backend, a.iters, stitch_env(fusion, cache, a.threads))
                if r.error:
                    notes.append(f"{g.name}: Stitch {key} failed: {r.error}")
                row["ms"][key] = r.median_ms
            cache = Path(tempfile.mkdtemp(dir=tmp, prefix="cache-cold-"))
            cold = stitch_run(a.stitch, file, g.name, backend, 1, stitch_env("stitch", cache, a.threads))
            nfiles = sum(1 for p in cache.rglob("*") if p.is_file())
            row["compile"]["cache_files"] = nfiles
            if cold.error is None:
                row["compile"]["cold"] = cold.wall_s
                if nfiles == 0:
                    if g is graphs[0]:
                        notes.append("Stitch warm-cache column n/a: the cold run wrote nothing to "
                                     "STITCH_CACHE_DIR (no disk cache in this build)")
                else:
                    warm = stitch_run(a.stitch, file, g.name, backend, 1, stitch_env("stitch", cache, a.threads))
                    if warm.error is None:
                        row["compile"]["warm"] = warm.wall_s
                        row["compile"]["saved"] = cold.wall_s - warm.wall_s
        tg = (tres or {}).get("graphs", {}).get(g.name, {})
        jg = (jres or {}).get("graphs", {}).get(g.name, {})
        row["ms"]["eager"] = med(tg.get("eager_ms"))
        row["ms"]["compile"] = med(tg.get("compile_ms"))
        row["ms"]["jax"] = med(jg.get("jax_ms"))
        row["compile"]["torch_compile"] = tg.get("compile_first_call_s")
        row["compile"]["jax"] = jg.get("jit_first_call_s")
        if "compile_error" in tg:
            notes.append(f"{g.name}: torch.compile failed: {tg['compile_error']}")
        ref = tg.get("eager_sum")
        for key, s in (("torch.compile", tg.get("compile_sum")), ("JAX", jg.get("jax_sum"))):
            if ref is not None and s is not None and abs(s - ref) > 1e-3 * max(1.0, abs(ref)):
                notes.append(f"{g.name}: {key}'s output sum {s:.6g} differs from eager's {ref:.6g}")
        ms = row["ms"]
        row["gbps"] = {k: (row["bytes"] / (v * 1e-3) / 1e9 if v else None) for k, v in ms.items()}
        row["pct_copy"] = {k: (100 * v / copy["gbps"] if v and copy else None) for k, v in row["gbps"].items()}
        f = ms.get("fused")
        row["speedup"] = {k: (ms[k] / f if f and ms.get(k) else None) for k in ("off", "eager", "compile", "jax")}
        e = ms.get("eager")
        row["vs_eager"] = {k: (e / v if e and v else None) for k, v in ms.items()}
        rows.append(row)

    draw_chart(rows, copy, chart, a.smoke, notes)
    report = build_report(a, rows, copy, versions, notes, minfo, command, backend)
    print(report)
    if a.out:
        a.out.write_text(report)
        log(f"report: {a.out}")
    if not a.smoke:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        log(f"smoke outputs kept in {tmp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
