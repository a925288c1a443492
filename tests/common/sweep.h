// The size of the tests' random-graph sweeps.
//
// The sweeps (hundreds of seeded random graphs through the passes, the planner, the code
// generators and the backends) are the default CI lane's job. The sanitizer lanes run the same
// tests for what the sanitizers catch, where a few dozen graphs cover the code and hundreds only
// cost time: they set STITCH_TEST_SWEEP_PERCENT (scripts/ci-lanes.sh), and sweepCount(n) then
// gives that percentage of n, at least 1. Unset, empty or malformed: the full count.
#pragma once

#include <cstdlib>
#include <string>

namespace stitch::testing {

inline int sweepCount(int full) {
  const char* v = std::getenv("STITCH_TEST_SWEEP_PERCENT");
  if (v == nullptr || *v == '\0') return full;
  char* end = nullptr;
  const long percent = std::strtol(v, &end, 10);
  if (*end != '\0' || percent <= 0 || percent >= 100) return full;
  const long n = full * percent / 100;
  return n < 1 ? 1 : static_cast<int>(n);
}

}  // namespace stitch::testing
