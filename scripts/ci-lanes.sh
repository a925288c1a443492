#!/usr/bin/env bash
# shellcheck disable=SC2317  # the lane_* functions are called by name, lane_$lane
# The CI run: scripts/test.sh calls this when CI=true (as .ci/run does). Four lanes, one after
# another, each configured, built and tested from its own preset and build directory:
#
#   default  the Python package built as a user's pip builds it (sdist, then the wheel from it) and
#            installed into a fresh virtualenv with PyPI's PyTorch 2.x (scripts/wheel.sh); then the
#            `ci` preset: everything built, every test (the long random-graph sweeps included), the
#            torch.compile tests and the package's tests (tests/package) run against that install
#   asan     `ci-asan`: the unit tests under AddressSanitizer + UBSan (-O1, UB fatal), with the
#            random-graph sweeps cut to 10% (STITCH_TEST_SWEEP_PERCENT); no install or Python tests,
#            no gfx90a cases and no NVRTC spill sweeps (*CompilesWithoutSpills: their time is
#            NVRTC's, which is not instrumented; the default lane runs them)
#   tsan     `tsan`: the thread pool, kernel cache and concurrent-run tests under ThreadSanitizer
#   fuzz     `fuzz`: each libFuzzer target for STITCH_CI_FUZZ_SECONDS (default 60) over its seed
#            corpus, replaying tests/fuzz/regressions/
#
# STITCH_CI_LANES picks lanes (default: "default asan tsan fuzz"). Every lane runs even when an
# earlier one failed; the script prints each lane's time and fails if any lane failed. Extra
# arguments go to the default lane's ctest.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

run() { echo "+ $*"; "$@"; }

# ctest for a preset, its previous list of failures removed first (ctest leaves the file when
# every test passes), so that failed_tests reads this run's.
run_ctest() {
  rm -f "build/$1/Testing/Temporary/LastTestsFailed.log"
  run ctest --preset "$@"
}

# A failed lane's tests, for the summary: CI keeps only the end of the run's log, where ctest's
# own list of failures is long gone under the later lanes. Each failed test's name and the last
# 40 lines of its output, read from the preset's ctest log.
failed_tests() {
  local dir=build/$1/Testing/Temporary name
  [[ -f $dir/LastTestsFailed.log ]] || return 0
  while IFS=: read -r _ name; do
    echo "--- $1: $name failed; the end of its output:"
    awk -v t="$name" '
      index($0, " Test: " t) && substr($0, index($0, " Test: ") + 7) == t { on = 1; n = 0; next }
      on && $0 == "<end of output>" { on = 0; for (i = (n > 40 ? n - 40 : 0); i < n; i++) print line[i] }
      on { line[n++] = $0 }' "$dir/LastTest.log"
  done <"$dir/LastTestsFailed.log"
}

lane_default() {
  run ./scripts/wheel.sh build/wheel/venv &&
    run cmake --preset ci -DSTITCH_TEST_PACKAGE_PYTHON="$PWD/build/wheel/venv/bin/python" &&
    run cmake --build --preset ci && run_ctest ci "$@"
}
lane_asan() {
  run cmake --preset ci-asan && run cmake --build --preset ci-asan && run_ctest ci-asan
}
lane_tsan() {
  run cmake --preset tsan && run cmake --build --preset tsan && run_ctest tsan
}
lane_fuzz() {
  run cmake --preset fuzz -DSTITCH_FUZZ_SECONDS="${STITCH_CI_FUZZ_SECONDS:-60}" &&
    run cmake --build --preset fuzz && run_ctest fuzz
}

run ./scripts/setup.sh || exit 1
summary=()
failures=()  # lanes that failed
failed=0
for lane in ${STITCH_CI_LANES:-default asan tsan fuzz}; do
  if ! declare -F "lane_$lane" >/dev/null; then
    echo "ci-lanes: unknown lane '$lane' (default, asan, tsan, fuzz)" >&2
    exit 2
  fi
  echo "=== lane $lane ==="
  start=$SECONDS
  if [[ $lane == default ]]; then "lane_$lane" "$@"; else "lane_$lane"; fi
  status=$?
  summary+=("lane $lane: $([[ $status -eq 0 ]] && echo ok || echo FAILED) in $((SECONDS - start)) s")
  [[ $status -eq 0 ]] || { failed=1; failures+=("$lane"); }
done
echo "=== summary ==="
declare -A preset=([default]=ci [asan]=ci-asan [tsan]=tsan [fuzz]=fuzz)
for lane in "${failures[@]}"; do failed_tests "${preset[$lane]}"; done
printf '%s\n' "${summary[@]}"
exit $failed
