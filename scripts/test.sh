#!/usr/bin/env bash
# Sets up (Debian packages; the PyTorch 2.x virtualenv .venv-torch), builds everything with the ci
# preset (RelWithDebInfo, warnings as errors) and runs the whole test suite. Tests labelled `gpu`
# skip themselves when no GPU is present.
# Extra arguments go to ctest (e.g. -L install, -R Dtype).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# In CI (CI=true, as .ci/run is run) the sanitizer and fuzz lanes run too: scripts/ci-lanes.sh.
if [[ "${CI:-}" == "true" ]]; then
  exec ./scripts/ci-lanes.sh "$@"
fi

run() { echo "+ $*"; "$@"; }

run ./scripts/setup.sh
# The torch.compile tests' virtualenv (.venv-torch; quick and offline once made). Offline, the
# C++ tests still run and python_torch2_tests skips, saying why.
run /usr/bin/python3 scripts/install_torch.py --venv .venv-torch ||
  echo "test.sh: .venv-torch could not be made (offline?); the torch.compile tests will skip" >&2
run cmake --preset ci
run cmake --build --preset ci
run ctest --preset ci "$@"
