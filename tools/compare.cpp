#include "compare.h"

#include <fmt/format.h>

#include <cmath>

namespace stitch::cli {

Tolerance toleranceFor(stitch_dtype_t t) {
  switch (t) {
    case STITCH_F16: return {1e-2, 1e-2};
    case STITCH_BF16: return {4e-2, 4e-2};
    case STITCH_F32:
    case STITCH_F64: return {1e-4, 1e-4};
    case STITCH_I32:
    case STITCH_I64:
    case STITCH_BOOL: return {0, 0};
  }
  return {0, 0};
}

CompareResult compare(const HostTensor& got, const HostTensor& want) {
  CompareResult r;
  r.count = want.numel();
  if (got.dtype != want.dtype || got.shape != want.shape) {
    r.mismatches = r.count ? r.count : 1;
    r.firstMismatch = 0;
    return r;
  }
  Tolerance tol = toleranceFor(want.dtype);
  for (int64_t i = 0; i < r.count; ++i) {
    double g = got.at(i), w = want.at(i);
    bool ok;
    if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      double err = std::fabs(g - w);
      r.maxAbsErr = std::max(r.maxAbsErr, err);
      if (w != 0.0) r.maxRelErr = std::max(r.maxRelErr, err / std::fabs(w));
      ok = err <= tol.atol + tol.rtol * std::fabs(w);
    }
    if (!ok) {
      if (r.firstMismatch < 0) r.firstMismatch = i;
      ++r.mismatches;
    }
  }
  return r;
}

std::string CompareResult::describe(const HostTensor& got, const HostTensor& want) const {
  Tolerance tol = toleranceFor(want.dtype);
  std::string tolStr = tol.rtol == 0 ? "exact" : fmt::format("rtol=atol={:g}", tol.rtol);
  if (got.dtype != want.dtype || got.shape != want.shape)
    return fmt::format("MISMATCH: got {}, reference {}", typeString(got.dtype, got.shape),
                       typeString(want.dtype, want.shape));
  if (ok())
    return fmt::format("ok (max abs err {:.3g}, max rel err {:.3g} over {} values, {})", maxAbsErr,
                       maxRelErr, count, tolStr);
  return fmt::format(
      "MISMATCH: {} of {} values outside {} (first at flat index {}: got {:.9g}, reference "
      "{:.9g}; max abs err {:.3g})",
      mismatches, count, tolStr, firstMismatch, got.at(firstMismatch), want.at(firstMismatch),
      maxAbsErr);
}

}  // namespace stitch::cli
