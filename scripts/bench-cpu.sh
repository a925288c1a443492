#!/usr/bin/env bash
# The CPU benchmark: Stitch (fused, and STITCH_FUSION=off) against PyTorch eager, torch.compile
# and JAX on memory-bound graphs, with the machine's copy bandwidth, in one run.
#
#   scripts/bench-cpu.sh [--smoke] [--out BENCHMARKS_SECTION.md] [run.py options...]
#
# Builds the release preset's `stitch` command line, creates or reuses the virtualenv .venv-bench
# with the peers from PyPI (bench/cpu/install_peers.py: PyTorch 2.x as small as imports, jax[cpu],
# numpy, matplotlib), then runs bench/cpu/run.py, which prints a Markdown section (and writes it
# to --out) and draws bench/cpu/cpu_benchmark.png. --smoke: tiny shapes, Stitch on the reference
# backend when the CPU backend is not built yet, chart in a temp dir.
# Environment: BENCH_PYTHON (interpreter for the venv, default python3), BENCH_BUILD_JOBS.
set -euo pipefail
# run.py resolves a relative --out or --chart against the caller's directory.
export STITCH_BENCH_CWD="$PWD"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

run() { echo "+ $*" >&2; "$@"; }

./scripts/setup.sh >&2
run cmake --preset release >&2
run cmake --build --preset release --target stitch_cli ${BENCH_BUILD_JOBS:+-j "$BENCH_BUILD_JOBS"} >&2

VENV=.venv-bench
if [[ ! -x "$VENV/bin/python" ]]; then
  run "${BENCH_PYTHON:-python3}" -m venv "$VENV" >&2
fi
torch_args=()
set +e
"$VENV/bin/python" bench/cpu/install_peers.py >&2
rc=$?
set -e
if [[ $rc -eq 3 ]]; then
  # PyPI's torch would not install or import: Debian's PyTorch 1.13 runs the eager peer.
  if ! /usr/bin/python3 -c "import torch, numpy" 2>/dev/null; then
    echo "bench-cpu: installing Debian's python3-torch python3-numpy (fallback)" >&2
    sudo_cmd=(); [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3-torch python3-numpy >&2
  fi
  torch_args=(--torch-python /usr/bin/python3 --torch-note
    "PyTorch from PyPI did not install or import here (see $VENV/peers.json): PyTorch is Debian's python3-torch (eager only; torch.compile n/a)")
elif [[ $rc -ne 0 ]]; then
  echo "bench-cpu: installing the peers failed" >&2
  exit "$rc"
else
  note=$("$VENV/bin/python" - <<'PY'
import json, sys
r = json.load(open(sys.prefix + "/peers.json"))
t = r.get("torch", {})
if r.get("steps"):
    print(f"PyTorch {t.get('version', '?')} from PyPI: {t.get('how', '?')}; the venv's peers took "
          f"{r.get('download_mb_total', '?')} MB of wheels in all (.venv-bench/peers.json).")
else:
    print(f"PyTorch {t.get('version', '?')} from PyPI, in a .venv-bench made before peers.json "
          f"recorded how (delete .venv-bench to reinstall and record it).")
PY
)
  torch_args=(--torch-note "$note")
fi

export STITCH_BENCH_COMMAND="scripts/bench-cpu.sh $*"
run "$VENV/bin/python" bench/cpu/run.py "${torch_args[@]}" "$@"
