// Comparing a backend's output with the reference interpreter's, for `stitch run --check`.
//
// Tolerances (DESIGN.md): |got - want| <= atol + rtol * |want| with rtol = atol = 1e-4 for f32
// (and f64), 1e-2 for f16, 4e-2 for bf16; ints and bools exact. NaN matches NaN; an infinity
// matches only the same infinity.
#pragma once

#include <cstdint>
#include <string>

#include "host_tensor.h"

namespace stitch::cli {

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};
Tolerance toleranceFor(stitch_dtype_t t);

struct CompareResult {
  int64_t count = 0;       // values compared
  int64_t mismatches = 0;  // values outside tolerance
  double maxAbsErr = 0;    // over finite pairs
  double maxRelErr = 0;
  int64_t firstMismatch = -1;
  bool ok() const { return mismatches == 0; }
  // "ok (max abs err 1e-07, max rel err 2e-06 over 6144 values)" or a MISMATCH line.
  std::string describe(const HostTensor& got, const HostTensor& want) const;
};

// Compares elementwise; dtype and shape must agree (a shape or dtype difference is a mismatch of
// every value).
CompareResult compare(const HostTensor& got, const HostTensor& want);

}  // namespace stitch::cli
