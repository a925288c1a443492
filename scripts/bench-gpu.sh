#!/usr/bin/env bash
# The GPU benchmark: Stitch (fused, and STITCH_FUSION=off) against PyTorch eager and torch.compile
# on memory-bound graphs in f32 and bf16, with the device's copy bandwidth, in one run.
#
#   scripts/bench-gpu.sh [--no-setup] [--stitch PATH] [--smoke] [--out FILE.md] [--json FILE.json]
#                        [bench/gpu/run.py options...]
#
# On the GPU machine (offline, binary built beforehand):
#   scripts/bench-gpu.sh --no-setup --stitch build/cuda/tools/stitch --out $OUT/gpu.md --json $OUT/gpu.json
#
# --stitch PATH  a prebuilt `stitch` (its shared libraries reachable, e.g. through LD_LIBRARY_PATH).
#                Without it: build/release/tools/stitch, built here first unless --no-setup.
# --no-setup     build nothing, install nothing, create no virtualenv.
# Everything else goes to bench/gpu/run.py (see its docstring): --smoke, --graphs, --dtypes,
# --iters, --warmup, --no-compile, --torch-python, ...
#
# PyTorch (with CUDA, and Triton for torch.compile) must already be importable by BENCH_PYTHON
# (default python3); this script never installs it. With --smoke, run.py also looks for torch in
# .venv-bench and Debian's /usr/bin/python3, and runs everything on the CPU.
# Environment: BENCH_PYTHON, BENCH_BUILD_JOBS.
set -euo pipefail
# run.py resolves relative --stitch, --out and --json against the caller's directory.
export STITCH_BENCH_CWD="$PWD"
export STITCH_BENCH_COMMAND="scripts/bench-gpu.sh $*"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

run() { echo "+ $*" >&2; "$@"; }

setup=1
stitch=""
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-setup) setup=0 ;;
    --stitch)
      [[ $# -ge 2 ]] || { echo "bench-gpu: --stitch needs a path" >&2; exit 2; }
      stitch="$2"
      shift
      ;;
    --stitch=*) stitch="${1#--stitch=}" ;;
    *) args+=("$1") ;;
  esac
  shift
done

if [[ -z "$stitch" ]]; then
  if [[ $setup -eq 1 ]]; then
    ./scripts/setup.sh >&2
    run cmake --preset release >&2
    run cmake --build --preset release --target stitch_cli ${BENCH_BUILD_JOBS:+-j "$BENCH_BUILD_JOBS"} >&2
  elif [[ ! -x build/release/tools/stitch ]]; then
    echo "bench-gpu: --no-setup and no --stitch PATH, and build/release/tools/stitch does not exist" >&2
    exit 2
  fi
  stitch="$PWD/build/release/tools/stitch"
fi

exec "${BENCH_PYTHON:-python3}" bench/gpu/run.py --stitch "$stitch" ${args[@]+"${args[@]}"}
