#!/usr/bin/env bash
# Builds the Python package as a user's tools do and installs it the way a user would:
#
#   scripts/wheel.sh [VENV]        (VENV default: build/wheel/venv)
#
# 1. `python -m build` (PyPA's build, in the virtualenv build/wheel/tools): the sdist, then the
#    wheel built from that sdist (so a file the sdist lacks fails here), both into build/dist.
#    scikit-build-core runs the project's CMake (pyproject.toml; cmake/python_package.cmake).
# 2. VENV made afresh: PyTorch and the torch.compile tests' packages (scripts/install_torch.py,
#    from pip's cache after the first time), while step 1 compiles (it waits on the network and
#    the disk, step 1 on the CPU; its log is printed after).
# 3. `pip install build/dist/stitch-VERSION-*.whl` into VENV, nothing else: no PYTHONPATH, no
#    STITCH_LIBRARY.
# The tests of the installed package (tests/package, CTest label `package`) run against VENV
# when the build is configured with -DSTITCH_TEST_PACKAGE_PYTHON=VENV/bin/python, as
# scripts/test.sh and the CI's default lane do.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv=${1:-build/wheel/venv}
tools=build/wheel/tools
python=/usr/bin/python3
run() { echo "+ $*"; "$@"; }

if [[ ! -x $tools/bin/python ]] || ! "$tools/bin/python" -c "import build" 2>/dev/null; then
  run "$python" -m venv "$tools"
  run "$tools/bin/pip" install -q --disable-pip-version-check build
fi
version=$(sed -n 's/^project(stitch VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
rm -f build/dist/stitch-"$version"*
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
venv_log=$venv.log
echo "+ $python scripts/install_torch.py --venv $venv >$venv_log (in the background)"
"$python" scripts/install_torch.py --venv "$venv" >"$venv_log" 2>&1 &
venv_pid=$!
start=$SECONDS
built=0
run "$tools/bin/python" -m build --outdir build/dist . || built=$?
echo "wheel.sh: sdist and wheel built in $((SECONDS - start)) s"
made=0
wait "$venv_pid" || made=$?
cat "$venv_log"
if [[ $built -ne 0 || $made -ne 0 ]]; then
  echo "wheel.sh: failed (python -m build: exit $built; install_torch.py: exit $made)" >&2
  exit 1
fi
wheel=$(ls build/dist/stitch-"$version"-*.whl)
run "$venv/bin/pip" install -q --disable-pip-version-check "$wheel"
echo "wheel.sh: $wheel installed into $venv"
