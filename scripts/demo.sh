#!/usr/bin/env bash
# Sets up, builds the `stitch` command line (release preset) and runs `stitch demo`.
# Extra arguments go to `stitch demo`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

run() { echo "+ $*"; "$@"; }

run ./scripts/setup.sh
run cmake --preset release
run cmake --build --preset release --target stitch_cli
run ./build/release/tools/stitch demo "$@"
