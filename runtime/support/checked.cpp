// Checked sizes. The design note is in checked.h.
#include "runtime/support/checked.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/support/error.h"

namespace stitch {

namespace {

// The product of the nonzero dims, checked; nullopt for a negative dim or past the limit.
std::optional<int64_t> extent(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    auto m = checkedMul(n, std::max<int64_t>(d, 1));
    if (!m || *m > kMaxTensorBytes) return std::nullopt;
    n = *m;
  }
  return n;
}

bool hasZero(std::span<const int64_t> dims) {
  return std::find(dims.begin(), dims.end(), 0) != dims.end();
}

}  // namespace

std::optional<int64_t> checkedElementCount(std::span<const int64_t> dims) {
  auto n = extent(dims);
  if (!n) return std::nullopt;
  return hasZero(dims) ? 0 : *n;
}

std::optional<int64_t> checkedByteSize(int64_t count, int64_t itemBytes) {
  if (count < 0 || itemBytes < 0) return std::nullopt;
  auto b = checkedMul(count, itemBytes);
  if (!b || *b > kMaxTensorBytes) return std::nullopt;
  return b;
}

std::optional<TensorSize> checkedTensorSize(std::span<const int64_t> dims, int64_t itemBytes) {
  auto n = extent(dims);
  auto b = n ? checkedByteSize(*n, itemBytes) : std::nullopt;
  if (!b) return std::nullopt;
  if (hasZero(dims)) return TensorSize{0, 0};
  return TensorSize{*n, *b};
}

TensorSize requireTensorSize(std::span<const int64_t> dims, int64_t itemBytes,
                             std::string_view what, ErrorCode code) {
  if (auto s = checkedTensorSize(dims, itemBytes)) return *s;
  for (size_t i = 0; i < dims.size(); ++i)
    STITCH_CHECK(dims[i] >= 0, code, "{} has shape {}: dim {} is negative", what, dimsText(dims),
                 i);
  auto n = extent(dims);
  throwError(code, fmt::format("{} has shape {}, past the limit of 2^62 bytes per tensor: {}", what,
                               dimsText(dims),
                               !n ? std::string("its dims multiply to more than 2^62")
                                  : fmt::format("{} elements of {} bytes{}", *n, itemBytes,
                                                hasZero(dims) ? " (zero dims aside)" : "")));
}

std::string dimsText(std::span<const int64_t> dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

std::string bytesText(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(kUnits)) v /= 1024.0, ++u;
  if (u == 0) return fmt::format("{} bytes", bytes);
  return fmt::format("{:.2f} {} ({} bytes)", v, kUnits[u], bytes);
}

}  // namespace stitch
