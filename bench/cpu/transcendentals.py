"""What the host's f32 transcendentals cost (issue 34): graphs/transcendentals.stitch, timed by
`stitch run --iters K` (kernel time, compile excluded), in interleaved rounds.

    python bench/cpu/transcendentals.py --stitch build/ci/tools/stitch \\
        [--baseline OLD_BUILD/tools/stitch] [--rounds 7] [--iters 20]

Each op over 64 MiB of f32 is reported as a multiple of `neg` over the same bytes on the same
binary (a copy's traffic: a transcendental that costs no more than its memory traffic is 1.0x),
and GPT-2's bias + tanh-approximated GELU beside the exact (erf) one. With --baseline (a build
whose tanh, log and log1p called SLEEF) each graph is also timed on that binary, in alternating
order, and the ratio taken round by round; medians of the rounds are reported. The log graphs
take abs() of the seeded inputs first, so that every input is in the domain. --cpu-features
-avx512f times the code an AVX2-only host runs, on an AVX-512 host (STITCH_CPU_FEATURES).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from common import machine_info, stitch_run, stitch_version  # noqa: E402

GRAPHS = HERE / "graphs" / "transcendentals.stitch"
OPS = ["neg", "exp", "tanh", "log", "log1p", "gelu_tanh", "gelu_erf"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--stitch", default="build/ci/tools/stitch")
    ap.add_argument("--baseline", help="a stitch binary to compare with, graph by graph")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--threads", default="1", help="STITCH_NUM_THREADS for every run")
    ap.add_argument("--cpu-features", help="STITCH_CPU_FEATURES for every run: -avx512f times "
                    "the code an AVX2 host runs (a baseline must be a build that reads it: older "
                    "ones warn and ignore it)")
    a = ap.parse_args()
    env = {"STITCH_CACHE": "0", "STITCH_NUM_THREADS": a.threads}
    if a.cpu_features:
        env["STITCH_CPU_FEATURES"] = a.cpu_features
    binaries = [a.stitch] + ([a.baseline] if a.baseline else [])
    times = {(b, op): [] for b in binaries for op in OPS}
    for r in range(a.rounds):
        for op in OPS:
            order = binaries if r % 2 == 0 else binaries[::-1]
            for binary in order:
                run = stitch_run(binary, GRAPHS, op, "cpu", a.iters, env)
                if run.error:
                    print(f"{binary} {op}: {run.error}", file=sys.stderr)
                    return 1
                times[(binary, op)].append(run.median_ms)
            print(f"round {r + 1}: {op}: " +
                  " / ".join(f"{times[(b, op)][-1]:.2f} ms" for b in binaries), file=sys.stderr)
    info = machine_info()
    print(f"stitch {stitch_version(a.stitch)}, {info['model']}, {info['cores']} CPUs, "
          f"STITCH_NUM_THREADS={a.threads}, STITCH_CPU_FEATURES={a.cpu_features or ''}, load {info['load']} at the end, {a.rounds} rounds of "
          f"--iters {a.iters}")
    head = "| graph | ms | x neg |"
    if a.baseline:
        head += " baseline ms | baseline x neg | this / baseline (median of rounds) |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for op in OPS:
        row = []
        for b in binaries:
            ms = statistics.median(times[(b, op)])
            rel = statistics.median(x / y for x, y in zip(times[(b, op)], times[(b, "neg")]))
            row += [f"{ms:.2f}", f"{rel:.2f}"]
        if a.baseline:
            ratios = [x / y for x, y in zip(times[(a.stitch, op)], times[(a.baseline, op)])]
            row.append(f"{statistics.median(ratios):.2f}")
        print(f"| {op} | " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
