#!/usr/bin/env bash
# Sets up, builds everything with the ci preset (RelWithDebInfo, warnings as errors) and runs
# the whole test suite. Tests labelled `gpu` skip themselves when no GPU is present.
# Extra arguments go to ctest (e.g. -L install, -R Dtype).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# In CI (CI=true, as .ci/run is run) the sanitizer and fuzz lanes run too: scripts/ci-lanes.sh.
if [[ "${CI:-}" == "true" ]]; then
  exec ./scripts/ci-lanes.sh "$@"
fi

run() { echo "+ $*"; "$@"; }

run ./scripts/setup.sh
run cmake --preset ci
run cmake --build --preset ci
run ctest --preset ci "$@"
