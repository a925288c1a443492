#!/usr/bin/env bash
# The GPU checks, on a machine with an NVIDIA GPU and no network (the device machine):
#   scripts/gpu-check.sh OUTDIR [build] [tests] [examples] [bench]   (default: all four)
# build:    configures build/gpu (Release, no LLVM: the CUDA path needs none) against the offline
#           dependencies in .deps (../shared/tools/offline-deps.sh .deps, run where apt works);
# tests:    the `gpu`-labelled tests (every example and 500 random graphs on cuda vs the reference);
# examples: `stitch run EXAMPLE --backend cuda --check --iters 20` for every example;
# bench:    the GPU benchmark (bench/gpu/run.py) into OUTDIR/gpu.md and OUTDIR/gpu.json.
# Logs go to OUTDIR. Exit status: the number of failed stages.
set -uo pipefail
out=${1:?usage: gpu-check.sh OUTDIR [build] [tests] [examples] [bench]}
shift
mkdir -p "$out"
stages=${*:-build tests examples bench}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
deps=$PWD/.deps/usr
export LD_LIBRARY_PATH=$deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export STITCH_CACHE_DIR=${STITCH_CACHE_DIR:-/tmp/stitch-cache}
failed=0
for stage in $stages; do
  echo "=== $stage"
  start=$SECONDS
  case $stage in
    build)
      { cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTITCH_ENABLE_LLVM=OFF \
          -DSTITCH_ENABLE_HIP=OFF -DSTITCH_BUILD_BENCHMARKS=OFF -DCMAKE_PREFIX_PATH="$deps" &&
        cmake --build build/gpu -j"$(nproc)" --target stitch_cli stitch_gpu_tests; } \
        >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; failed=$((failed + 1)); }
      ;;
    tests)
      ctest --test-dir build/gpu -L gpu --output-on-failure -j1 >"$out/gpu-tests.log" 2>&1 ||
        failed=$((failed + 1))
      build/gpu/tests/stitch_gpu_tests --gtest_brief=1 2>&1 | grep -E 'graph plans|kernels|FAILED|PASSED' | head -20
      tail -5 "$out/gpu-tests.log"
      ;;
    examples)
      for f in examples/*.stitch; do
        for mode in stitch off; do
          if ! STITCH_FUSION=$mode build/gpu/tools/stitch run "$f" --backend cuda --check --iters 20 \
              >>"$out/examples.log" 2>&1; then
            echo "FAILED: $f (STITCH_FUSION=$mode)"
            failed=$((failed + 1))
          fi
        done
      done
      grep -cE 'check .*: (ok|match)' "$out/examples.log" | sed 's/^/checks passed: /'
      ;;
    bench)
      python3 bench/gpu/run.py --stitch build/gpu/tools/stitch --out "$out/gpu.md" \
        --json "$out/gpu.json" >"$out/bench.log" 2>&1 || failed=$((failed + 1))
      tail -30 "$out/gpu.md" 2>/dev/null
      ;;
    *) echo "unknown stage $stage"; failed=$((failed + 1)) ;;
  esac
  echo "=== $stage: $((SECONDS - start)) s"
done
exit "$failed"
