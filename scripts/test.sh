#!/usr/bin/env bash
# Sets up, builds everything with the ci preset (RelWithDebInfo, warnings as errors) and runs
# the whole test suite. Tests labelled `gpu` skip themselves when no GPU is present.
# Extra arguments go to ctest (e.g. -L install, -R Dtype).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

run() { echo "+ $*"; "$@"; }

run ./scripts/setup.sh
run cmake --preset ci
run cmake --build --preset ci
run ctest --preset ci "$@"
