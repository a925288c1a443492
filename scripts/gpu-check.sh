#!/usr/bin/env bash
# The GPU checks, on a machine with an NVIDIA GPU and no network (the device machine):
#   scripts/gpu-check.sh OUTDIR [build] [tests] [examples] [autotune] [bench] [torch]   (default: all)
# build:    configures build/gpu (Release, no LLVM: the CUDA path needs none) against the offline
#           dependencies in .deps (../shared/tools/offline-deps.sh .deps, run where apt works; git
#           ignores it, so a device run names it in `carry`); a failed build ends the script;
# tests:    the `gpu`-labelled tests (every example and 500 random graphs on cuda vs the reference),
#           four at a time (the reference interpreter is the slow part, one core each);
# examples: `stitch run EXAMPLE --backend cuda --check --iters 20` for every example;
# autotune: every example tuned on the device (STITCH_AUTOTUNE=1, K=4, its own cache directory),
#           run again from the stored decision (nothing measured), `stitch plan --backend cuda
#           --explain` of one, then `stitch tune fit --backend cuda --hold-back 30 --dry-run` on
#           the GPU's tuning records (issue 37 on a GPU) into OUTDIR/autotune.log;
# bench:    the GPU benchmark (bench/gpu/run.py) into OUTDIR/gpu.md and OUTDIR/gpu.json: every graph
#           against PyTorch, the cost model's pick against its runner-up plans and basic (measured),
#           NVRTC's cold compile time per kernel for the device's arch, and first runs with serial
#           vs parallel compiles (STITCH_BENCH_ARGS adds run.py options, e.g. "--iters 50" or
#           "--sections cost,compile"); and the plans' bytes against the minimal traffic for the
#           device's arch (bench/gpu/plan_traffic.py) into OUTDIR/plan_traffic.md;
# torch:    with the machine's python3 (PyTorch 2.x; transformers if present, else the model tests
#           skip): python/tests/torch2 on CUDA tensors (STITCH_TEST_DEVICE=cuda; eight processes
#           where pytest-xdist is installed; the OpInfo tests need expecttest, which the device
#           lacks: `python3 -m pip download --no-deps expecttest==0.3.0 -d .whl` where pip works
#           and carry .whl; without it they are left out, saying so), then the
#           training-step benchmark (bench/torch/train_step.py: eager vs Inductor vs
#           backend="stitch", GPT-2-small and Llama-style) into OUTDIR/train_step.md.
# Logs go to OUTDIR. Exit status: the number of failed stages.
set -uo pipefail
out=${1:?usage: gpu-check.sh OUTDIR [build] [tests] [examples] [bench]}
shift
mkdir -p "$out"
stages=${*:-build tests examples autotune bench torch}
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
        cmake --build build/gpu -j"$(nproc)" --target stitch stitch_cli stitch_gpu_tests -- -k 0; } \
        >"$out/build.log" 2>&1 || { grep -E 'error|FAILED' "$out/build.log" | head -40; exit 1; }
      ;;
    tests)
      ctest --test-dir build/gpu -L gpu --output-on-failure -j4 >"$out/gpu-tests.log" 2>&1 ||
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
    autotune)
      tune_dir=$(mktemp -d)
      for f in examples/*.stitch; do
        echo "--- $f" >>"$out/autotune.log"
        for pass in tune reuse; do
          if ! STITCH_CACHE_DIR=$tune_dir STITCH_AUTOTUNE=1 STITCH_AUTOTUNE_CANDIDATES=4 \
              build/gpu/tools/stitch run "$f" --backend cuda --check --iters 5 \
              >>"$out/autotune.log" 2>&1; then
            echo "FAILED: $f (autotune, $pass)"
            failed=$((failed + 1))
          fi
        done
      done
      # The entry's key holds K: plan with the K the runs tuned with.
      STITCH_CACHE_DIR=$tune_dir STITCH_AUTOTUNE_CANDIDATES=4 \
        build/gpu/tools/stitch plan examples/layer_norm.stitch \
        --backend cuda --explain >>"$out/autotune.log" 2>&1 || failed=$((failed + 1))
      STITCH_CACHE_DIR=$tune_dir build/gpu/tools/stitch tune fit --backend cuda --hold-back 30 \
        --dry-run >"$out/tune-fit.log" 2>&1 || failed=$((failed + 1))
      grep -cE 'first run: .*plan: autotuned' "$out/autotune.log" | sed 's/^/tuned: /'
      grep -cE 'first run: .*plan: the tuning entry' "$out/autotune.log" | sed 's/^/reused: /'
      grep -E 'not the cost model' "$out/autotune.log" | head -10
      cat "$out/tune-fit.log"
      ;;
    bench)
      # shellcheck disable=SC2086  # STITCH_BENCH_ARGS is a list of options
      python3 bench/gpu/run.py --stitch build/gpu/tools/stitch --out "$out/gpu.md" \
        --json "$out/gpu.json" ${STITCH_BENCH_ARGS:-} >"$out/bench.log" 2>&1 || failed=$((failed + 1))
      cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
      arch=sm_${cap/./}
      python3 bench/gpu/plan_traffic.py --stitch build/gpu/tools/stitch --targets "$arch" \
        >"$out/plan_traffic.md" 2>>"$out/bench.log" || failed=$((failed + 1))
      grep -E "within 5% of the fastest|^\| [0-9]+ \| [0-9.]+ \|" "$out/gpu.md" 2>/dev/null
      tail -30 "$out/gpu.md" 2>/dev/null
      ;;
    torch)
      export PYTHONPATH=$PWD/python STITCH_LIBRARY=$PWD/build/gpu/src/libstitch.so
      pytest_args=(-q -p no:cacheprovider -rfE)
      python3 -c "import xdist" 2>/dev/null && pytest_args+=(-n 8)
      if ! python3 -c "import expecttest" 2>/dev/null && compgen -G ".whl/expecttest-*.whl" >/dev/null
      then
        python3 -m pip install -q --no-index --no-deps --target /tmp/gpu-check-site \
          .whl/expecttest-*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/gpu-check-site
      fi
      if ! python3 -c "import expecttest" 2>/dev/null; then
        echo "expecttest is not installed: python/tests/torch2/opinfo left out"
        pytest_args+=(--ignore=python/tests/torch2/opinfo)
      fi
      STITCH_TEST_DEVICE=cuda python3 -m pytest python/tests/torch2 "${pytest_args[@]}" \
        >"$out/torch-tests.log" 2>&1 || failed=$((failed + 1))
      grep -E '^(FAILED|ERROR) ' "$out/torch-tests.log" | head -40
      tail -5 "$out/torch-tests.log"
      if python3 -c "import transformers" 2>/dev/null; then
        python3 bench/torch/train_step.py --device cuda --out "$out/train_step.md" \
          >"$out/train_step.log" 2>&1 || failed=$((failed + 1))
        tail -20 "$out/train_step.md" 2>/dev/null
      else
        echo "transformers is not installed: no training-step benchmark"
      fi
      ;;
    *) echo "unknown stage $stage"; failed=$((failed + 1)) ;;
  esac
  echo "=== $stage: $((SECONDS - start)) s"
done
exit "$failed"
