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
# The Python package built and installed the way a user does it (scripts/wheel.sh: the wheel,
# into a fresh virtualenv with PyTorch 2.x); the torch.compile tests and the package's tests run
# against that install. Offline (no PyPI for the build backend and PyTorch), the C++ tests still
# run and those tests skip, saying why.
package=()
if run ./scripts/wheel.sh build/wheel/venv; then
  package=(-DSTITCH_TEST_PACKAGE_PYTHON="$PWD/build/wheel/venv/bin/python")
else
  echo "test.sh: the wheel could not be built or installed (offline?); the package and" \
    "torch.compile tests will skip" >&2
  package=(-DSTITCH_TEST_PACKAGE_PYTHON=)
fi
run cmake --preset ci "${package[@]}"
run cmake --build --preset ci
run ctest --preset ci "$@"
