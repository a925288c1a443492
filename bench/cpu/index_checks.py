#!/usr/bin/env python3
"""What index checks cost on the CPU (issue 33): graphs/index_checks*.stitch, timed by
`stitch run --iters K` (kernel time, compile excluded), in interleaved rounds.

    python bench/cpu/index_checks.py --stitch build/ci/tools/stitch \\
        [--baseline OLD_BUILD/tools/stitch] [--rounds 7] [--iters 20]

Pairs, each round in alternating order, the ratio taken round by round and reported as the
median (the dev VM's speed drifts by tens of percent within minutes):
  - cross-entropy forward + backward with the label's check_index against the same graph without
    it, on the same binary: what the hook's check adds to a loss step;
  - with --baseline (a build from before the checks, where gather clamped): a gather of an input
    and a gather of computed data, one per row, on this binary against the baseline's: what the
    checks in gather cost.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from common import machine_info, stitch_run, stitch_version  # noqa: E402

GRAPHS = HERE / "graphs" / "index_checks.stitch"
GATHERS = HERE / "graphs" / "index_checks_gather.stitch"  # parsed by the baseline too


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--stitch", default="build/ci/tools/stitch")
    ap.add_argument("--baseline", help="a stitch binary built before the index checks")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    env = {"STITCH_CACHE": "0"}
    pairs = [("cross-entropy fwd+bwd [512, 32000]: check_index / none",
              (a.stitch, GRAPHS, "ce_checked"), (a.stitch, GRAPHS, "ce_unchecked"))]
    if a.baseline:
        pairs += [("gather of an input [16384, 512] of [16384, 1024]: checked / clamped",
                   (a.stitch, GATHERS, "gather_input"), (a.baseline, GATHERS, "gather_input")),
                  ("gather of exp(x), one per row [16384, 1024]: checked / clamped",
                   (a.stitch, GATHERS, "gather_row"), (a.baseline, GATHERS, "gather_row"))]
    times: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in pairs}
    for r in range(a.rounds):
        for name, first, second in pairs:
            order = [first, second] if r % 2 == 0 else [second, first]
            got = {}
            for binary, file, graph in order:
                run = stitch_run(binary, file, graph, "cpu", a.iters, env)
                if run.error:
                    print(f"{binary} {graph}: {run.error}", file=sys.stderr)
                    return 1
                got[(binary, file, graph)] = run.median_ms
            times[name].append((got[first], got[second]))
            print(f"round {r + 1}: {name}: {got[first]:.3f} ms / {got[second]:.3f} ms",
                  file=sys.stderr)
    info = machine_info()
    print(f"stitch {stitch_version(a.stitch)}, {info['model']}, {info['cores']} CPUs, load "
          f"{info['load']} at the end, {a.rounds} rounds of --iters {a.iters}")
    print("| pair | median A (ms) | median B (ms) | A / B (median of rounds) | range |")
    print("|---|---|---|---|---|")
    for name, _, _ in pairs:
        ts = times[name]
        ratios = [x / y for x, y in ts]
        print(f"| {name} | {statistics.median(x for x, _ in ts):.3f} | "
              f"{statistics.median(y for _, y in ts):.3f} | {statistics.median(ratios):.3f} | "
              f"{min(ratios):.3f}-{max(ratios):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
