#!/usr/bin/env bash
# The CPU benchmark in one command: Stitch against PyTorch eager, torch.compile and JAX on the
# inference suite, the training suite and the small sizes the PyTorch hook sees, both ways
# (preallocated outputs or glibc keeping freed memory; fresh outputs), with the machine's copy
# bandwidth, and the cost model's pick against its runner-up plans, measured.
#
#   scripts/bench-cpu.sh [--smoke] [--out SECTION.md] [--update-benchmarks] [run.py options...]
#
# Builds the release preset's `stitch` command line and libstitch.so (the hook's columns), creates
# or reuses the virtualenv .venv-bench with the peers from PyPI (bench/cpu/install_peers.py:
# PyTorch 2.x as small as imports, jax[cpu], numpy, matplotlib), then runs bench/cpu/run.py, which
# prints a Markdown section (and writes it to --out; --update-benchmarks puts it into
# BENCHMARKS.md's "CPU kernels" section) and draws bench/cpu/cpu_benchmark.png. A full run takes
# about a quarter of an hour on a 2-core machine.
# --smoke: tiny shapes, few iterations, torch.compile on one graph per suite, Stitch on the
# reference backend when the CPU backend is not built, chart in a temp dir: a couple of minutes
# once stitch and the peers are installed.
# Environment:
#   BENCH_PYTHON        interpreter that makes the venv (default python3)
#   BENCH_BUILD_JOBS    parallel build jobs
#   BENCH_PEERS_PYTHON  an interpreter that already has the peers (torch; jax and matplotlib when
#                       present): used as is, no venv, nothing installed
#   BENCH_STITCH_BUILD  a build directory with tools/stitch and src/libstitch.so: used as is,
#                       nothing built (default: build the release preset)
set -euo pipefail
# run.py resolves a relative --out, --json or --chart against the caller's directory.
export STITCH_BENCH_CWD="$PWD"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

run() { echo "+ $*" >&2; "$@"; }

if [[ -n "${BENCH_STITCH_BUILD:-}" ]]; then
  build_dir=$(cd "$STITCH_BENCH_CWD" && cd "$BENCH_STITCH_BUILD" && pwd)
else
  ./scripts/setup.sh >&2
  run cmake --preset release >&2
  run cmake --build --preset release --target stitch_cli stitch ${BENCH_BUILD_JOBS:+-j "$BENCH_BUILD_JOBS"} >&2
  build_dir=build/release
fi
stitch_args=(--stitch "$build_dir/tools/stitch" --stitch-lib "$build_dir/src/libstitch.so")

torch_args=()
if [[ -n "${BENCH_PEERS_PYTHON:-}" ]]; then
  py="$BENCH_PEERS_PYTHON"
  torch_args=(--torch-python "$py" --torch-note "Peers: $py as it is (BENCH_PEERS_PYTHON; nothing installed)")
else
  VENV=.venv-bench
  if [[ ! -x "$VENV/bin/python" ]]; then
    run "${BENCH_PYTHON:-python3}" -m venv "$VENV" >&2
  fi
  py="$VENV/bin/python"
  set +e
  "$py" bench/cpu/install_peers.py >&2
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
    note=$("$py" - <<'PY'
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
fi

export STITCH_BENCH_COMMAND="scripts/bench-cpu.sh $*"
run "$py" bench/cpu/run.py "${stitch_args[@]}" "${torch_args[@]}" "$@"
