// Checked arithmetic for element counts, byte sizes and index ranges.
//
// Design. Dims come from user text, the C API and DLPack tensors, so every product or sum of them
// is checked instead of being left to wrap (signed overflow is UB, and a wrapped count made
// Stitch run a 2^64-element tensor as an empty one, or allocate until killed). The limits:
//
//   - a tensor holds at most kMaxTensorBytes = 2^62 bytes, and so at most 2^62 elements; the
//     bound applies to its nonzero dims (an empty f32[0, 2^62] is refused), so that every partial
//     product of a shape (a row length, a stride, an outer count, in elements or bytes) fits. The
//     factor of two below INT64_MAX is headroom: a sum of two sizes (a round-up to a block, a
//     loop bound plus a step) never overflows the int64 index arithmetic of the planner, the
//     lowering or the generated kernels, which all index with int64;
//   - static shapes are checked when a node is added to a graph (InvalidGraph), symbolic ones when
//     a run binds its inputs (ShapeMismatch), for every node; past those two gates every element
//     count and byte size of a graph's values is known to fit, and code downstream only needs the
//     helpers for products and sums it forms itself (costs, arena totals);
//   - cost estimates (bytes moved, operations) saturate at INT64_MAX instead of failing: they only
//     rank plans, and "very large" ranks correctly.
//
// Whether a size fits in memory is another question, answered by support/memory.h.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace stitch {

// support/error.h; declared here so that the command line, which sees the public C++ API's
// stitch::Error, can use these helpers too.
enum class ErrorCode : int;

inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 62;

inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// For estimates only (see above): clamps to the int64 range.
inline int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return a < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
}

inline int64_t saturatingMul(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  return (a < 0) != (b < 0) ? std::numeric_limits<int64_t>::min()
                            : std::numeric_limits<int64_t>::max();
}

// The element count of dims; nullopt when a dim is negative or the product of the nonzero dims
// exceeds kMaxTensorBytes.
std::optional<int64_t> checkedElementCount(std::span<const int64_t> dims);

// count elements of itemBytes each, in bytes; nullopt when negative or over kMaxTensorBytes.
std::optional<int64_t> checkedByteSize(int64_t count, int64_t itemBytes);

struct TensorSize {
  int64_t elements = 0;
  int64_t bytes = 0;
};

// The size of a tensor of these dims and item size; nullopt when a dim is negative or the tensor
// breaks the limits above (its nonzero dims times itemBytes exceed kMaxTensorBytes).
std::optional<TensorSize> checkedTensorSize(std::span<const int64_t> dims, int64_t itemBytes);

// The same, or throws `code` naming the tensor `what` ("input 0 ('x')"), its dims and the limit.
TensorSize requireTensorSize(std::span<const int64_t> dims, int64_t itemBytes,
                             std::string_view what, ErrorCode code);

// "[4294967296, 4294967296]".
std::string dimsText(std::span<const int64_t> dims);

// "4.00 TiB (4398046511104 bytes)": a size for messages.
std::string bytesText(int64_t bytes);

}  // namespace stitch
