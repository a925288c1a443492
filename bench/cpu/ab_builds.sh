#!/usr/bin/env bash
# Two builds of `stitch` side by side on the CPU kernels: every graph of bench/cpu/graphs/ run
# with `stitch run --backend cpu --iters 40` by each, alternating per graph, ROUNDS rounds, one
# kernel-cache directory per build. Prints "round file:graph before_ms after_ms" lines (medians
# of each run's iterations); BENCHMARKS.md takes the median over rounds.
#   bench/cpu/ab_builds.sh OLD_STITCH NEW_STITCH [ROUNDS]
set -euo pipefail
OLD=$1 NEW=$2 ROUNDS=${3:-3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DO=$(mktemp -d) DN=$(mktemp -d)
trap 'rm -rf "$DO" "$DN"' EXIT
median() { grep -oE 'median [0-9.]+ ms' | grep -oE '[0-9.]+'; }
for r in $(seq 1 "$ROUNDS"); do
  for f in "$ROOT"/bench/cpu/graphs/*.stitch; do
    for g in $(grep -oE '^graph [A-Za-z0-9_]+' "$f" | cut -d' ' -f2); do
      o=$(STITCH_CACHE_DIR=$DO "$OLD" run "$f" --graph "$g" --backend cpu --iters 40 | median)
      n=$(STITCH_CACHE_DIR=$DN "$NEW" run "$f" --graph "$g" --backend cpu --iters 40 | median)
      echo "$r $(basename "$f" .stitch):$g $o $n"
    done
  done
done
