#!/usr/bin/env python3
"""Planned traffic against the minimal traffic, for every graph of bench/gpu/graphs, from
`stitch plan --format json` (no GPU needed: the plan is made for a target's profile).

    python3 bench/gpu/plan_traffic.py --stitch build/ci/tools/stitch [--targets sm_90,host]

Minimal traffic: every graph input read once plus every graph output written once (sizes from
the graph's signature and the plan's outputs). Planned: the plan's total bytes, every kernel's
reads and writes as the cost model counts them (column partials and repeated walks included).
Prints a Markdown table: kernels, planned MB, minimal MB, their ratio, the model's time."""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i32": 4, "i64": 8, "bool": 1}
GRAPH_RE = re.compile(r"graph\s+(\w+)\s*\(([^)]*)\)\s*\{(.*?)\n\}", re.S)
PARAM_RE = re.compile(r"(\w+)\s*:\s*(\w+)\[([^\]]*)\]")


def rows(stitch: str, target: str, path: Path):
    for m in GRAPH_RE.finditer(path.read_text()):
        name, params, body = m.groups()
        r = subprocess.run([stitch, "plan", str(path), "--graph", name, "--target", target,
                            "--format", "json"], capture_output=True, text=True)
        if r.returncode:
            yield name, None, (r.stderr.strip().splitlines() or ["failed"])[-1]
            continue
        plan = json.loads(r.stdout)
        minimal = sum(math.prod(int(d) for d in dims.split(",") if d.strip()) * BYTES[dt]
                      for _, dt, dims in PARAM_RE.findall(params))
        returned = [o.strip() for o in re.search(r"return (.*)", body).group(1).split(",")]
        outs = {o["name"]: o["bytes"] for k in plan["kernels"] for o in k["outputs"]}
        minimal += sum(outs.get(o, 0) for o in returned)
        yield name, plan, minimal


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stitch", required=True, help="the stitch binary")
    ap.add_argument("--targets", default="sm_90", help="comma list (default sm_90)")
    ap.add_argument("--graphs", help="comma list of files in bench/gpu/graphs (default all)")
    a = ap.parse_args()
    files = sorted(HERE.glob("graphs/*.stitch"))
    if a.graphs:
        files = [HERE / "graphs" / f"{g}.stitch" for g in a.graphs.split(",")]
    for target in a.targets.split(","):
        print(f"\n#### Target {target}\n")
        print("| graph | kernels | planned MB | minimal MB | planned / minimal | model time µs |")
        print("|:--|--:|--:|--:|--:|--:|")
        for f in files:
            for name, plan, minimal in rows(a.stitch, target, f):
                if plan is None:
                    print(f"| {name} | error: {minimal} | | | | |")
                    continue
                t = plan["totals"]
                print(f"| {name} | {t['kernels']} | {t['bytes'] / 1e6:.1f} | {minimal / 1e6:.1f} | "
                      f"{t['bytes'] / minimal:.2f} | {t['time_us']:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
