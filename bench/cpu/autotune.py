#!/usr/bin/env python3
"""Autotuning on the CPU (issue 37): what tuning costs, what it buys, and how well the cost model
ranks the plans it measured, before and after `stitch tune fit`.

    python bench/cpu/autotune.py [--stitch build/ci/tools/stitch] [--rounds 3] [--iters 10]
                                 [--candidates 4] [--budget-ms 2000] [--hold-back 30] [--out FILE]

Design
  - Graphs: the CPU benchmark's suites (bench/cpu/run.py: inference and training at their full
    sizes, small at 64 KB to 1 MB; its shapes, its rewritten files) and the model benchmark's
    pieces (bench/torch/pieces/*.stitch: every graph of every file, as the hook hands them over).
  - Tuning: one `stitch run --iters 1` per graph with STITCH_AUTOTUNE=1 into a cache directory of
    its own: the first-run line says whether the plan was tuned, which candidate runs and what
    tuning took (building, compiling and timing the candidates).
  - Timing: then rounds; each round runs every graph untuned (STITCH_AUTOTUNE=0, its own warm
    cache directory: the model's pick) and tuned (the tuning entry's decision, nothing measured),
    one after the other, `stitch run --iters K`; each cell is the median over rounds of the runs'
    medians. Same process kind, same inputs (--seed), same allocation (outputs allocated once by
    `stitch run`), same math; only the plan differs, and only where tuning chose another.
  - The cost model: `stitch tune fit --backend cpu --hold-back P --dry-run` on the tuning entries
    reports, for the plans each entry measured, how often the model's fastest plan measures
    within 5% of the fastest and how its ranking correlates with the measured one, with the
    built-in/measured profile and with the fitted one, on the entries used for the fit and on the
    held-back ones (by a hash of each entry, so whole graphs are held back). Without --dry-run the
    fitted profile is stored in the tuning cache directory only.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import run as cpu  # noqa: E402  (bench/cpu/run.py: the suites)
from common import machine_info  # noqa: E402

TIME_RE = re.compile(r"time: median ([0-9.e+-]+) ms, min ([0-9.e+-]+) ms over (\d+) runs")
PLAN_RE = re.compile(r"first run: ([0-9.e+-]+) ms .*?; plan: (.*)\)\s*$", re.M)
TUNED_RE = re.compile(r"autotuned in ([0-9.e+-]+) ms, (not the cost model's pick|the cost model's pick)")


def run(stitch: str, file: Path, graph: str, iters: int, env: dict, seed: int) -> str:
    cmd = [stitch, "run", str(file), "--graph", graph, "--backend", "cpu", "--iters", str(iters),
           "--seed", str(seed)]
    p = subprocess.run(cmd, env=dict(os.environ, **env), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stdout[-400:]}")
    return p.stdout


def median_ms(out: str) -> float:
    m = TIME_RE.search(out)
    if not m:
        raise RuntimeError("no timing line: " + out[-300:])
    return float(m.group(1))


def cases(tmp: Path) -> list[tuple[str, str, Path, str]]:
    """(suite, row name, file, graph name) for every graph measured."""
    out = []
    for g in cpu.ALL:
        out.append((g.suite, g.name, cpu.prepare_graph(g, False, tmp), g.graph_name))
    for f in sorted((ROOT / "bench/torch/pieces").glob("*.stitch")):
        for name in re.findall(r"^graph (\w+)\(", f.read_text(), re.M):
            out.append(("model pieces", f"{f.stem}/{name}", f, name))
    return out


def machine_text() -> str:
    m = machine_info()
    return (f"{m['model']}, {m['cores']} logical CPUs, {m['mem_gib']:.0f} GiB, ISA {', '.join(m['isa'])}, "
            f"load average {m['load']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stitch", default=str(ROOT / "build/ci/tools/stitch"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--candidates", type=int, default=4)
    ap.add_argument("--budget-ms", type=int, default=2000)
    ap.add_argument("--hold-back", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", help="a regex: only the rows whose name matches")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    t0 = time.time()
    tmp = Path(tempfile.mkdtemp(prefix="stitch-autotune-"))
    tuned_dir, plain_dir = tmp / "tuned", tmp / "plain"
    tune_env = {"STITCH_CACHE_DIR": str(tuned_dir), "STITCH_AUTOTUNE": "1",
                "STITCH_AUTOTUNE_CANDIDATES": str(a.candidates),
                "STITCH_AUTOTUNE_BUDGET_MS": str(a.budget_ms), "STITCH_REMOTE_CACHE": ""}
    plain_env = {"STITCH_CACHE_DIR": str(plain_dir), "STITCH_AUTOTUNE": "0", "STITCH_REMOTE_CACHE": ""}
    rows = []
    for suite, name, file, graph in cases(tmp):
        if a.only and not re.search(a.only, name):
            continue
        out = run(a.stitch, file, graph, 1, tune_env, a.seed)
        plan = PLAN_RE.search(out)
        tuned = TUNED_RE.search(out)
        rows.append({"suite": suite, "name": name, "file": file, "graph": graph,
                     "plan": plan.group(2) if plan else "?",
                     "tuning_ms": float(tuned.group(1)) if tuned else 0.0,
                     "switched": bool(tuned and tuned.group(2).startswith("not")),
                     "plain": [], "tuned": []})
        run(a.stitch, file, graph, 1, plain_env, a.seed)  # warm the untuned cache too
        print(f"tuned {name}: {rows[-1]['plan']}", file=sys.stderr, flush=True)
    for r_ in range(a.rounds):
        for r in rows:
            iters = a.iters * (cpu.SMALL_ITERS if r["suite"] in ("small", "model pieces") else 1)
            r["plain"].append(median_ms(run(a.stitch, r["file"], r["graph"], iters, plain_env, a.seed)))
            r["tuned"].append(median_ms(run(a.stitch, r["file"], r["graph"], iters, tune_env, a.seed)))
        print(f"round {r_ + 1} done", file=sys.stderr, flush=True)
    fit = subprocess.run([a.stitch, "tune", "fit", "--backend", "cpu", "--hold-back", str(a.hold_back),
                          "--dry-run"], env=dict(os.environ, **tune_env), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    L = ["### Autotuning: tuned against untuned plans, and the cost model before and after a fit", ""]
    L.append(f"`python bench/cpu/autotune.py --rounds {a.rounds} --iters {a.iters} --candidates "
             f"{a.candidates} --budget-ms {a.budget_ms} --hold-back {a.hold_back}`; {machine_text()}; "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {time.time() - t0:.0f} s in all.")
    L.append("")
    L.append("Each cell: the median over rounds of `stitch run --backend cpu --iters K`'s median (ms); untuned "
             "is the cost model's pick, tuned the decision STITCH_AUTOTUNE=1 made (from its entry: nothing "
             "measured in the timed processes). Rounds alternate untuned and tuned per graph.")
    L.append("")
    L.append("| suite | graph | untuned ms | tuned ms | tuned / untuned | plan | tuning ms |")
    L.append("|:--|:--|--:|--:|--:|:--|--:|")
    ratios: dict[str, list[float]] = {}
    for r in rows:
        u, t = statistics.median(r["plain"]), statistics.median(r["tuned"])
        ratio = t / u if u > 0 else float("nan")
        ratios.setdefault(r["suite"], []).append(ratio)
        what = ("another plan" if r["switched"] else "the pick") if r["tuning_ms"] else r["plan"]
        L.append(f"| {r['suite']} | {r['name']} | {u:.4g} | {t:.4g} | {ratio:.3f} | {what} | "
                 f"{r['tuning_ms']:.0f} |")
    L.append("")
    for suite, rs in ratios.items():
        geo = statistics.geometric_mean(rs)
        L.append(f"- {suite}: geomean tuned / untuned {geo:.3f} over {len(rs)} graphs; "
                 f"{sum(1 for r in rows if r['suite'] == suite and r['switched'])} tuned to another plan.")
    L.append("")
    L.append("`stitch tune fit --backend cpu --hold-back " + str(a.hold_back) + " --dry-run` on the tuning "
             "entries (exit " + str(fit.returncode) + "):")
    L.append("")
    L.append("```")
    L.extend(fit.stdout.rstrip().splitlines())
    L.append("```")
    text = "\n".join(L) + "\n"
    if a.out:
        a.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
