// Errors inside the library.
//
// The core throws stitch::Error; the C API (src/api) catches it at the boundary and turns it into
// a stitch_status_t plus a per-thread message, so no exception ever crosses into C. Like nvFuser's
// NVF_CHECK / NVF_ERROR, user mistakes and internal bugs use different macros: STITCH_CHECK names
// the user-facing status, STITCH_INTERNAL marks a broken invariant (a bug in Stitch itself).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

namespace stitch {

// Mirrors stitch_status_t (include/stitch/stitch.h); the values are the ABI.
enum class ErrorCode : int {
  InvalidArgument = 1,
  Parse = 2,
  InvalidGraph = 3,
  ShapeMismatch = 4,
  BackendUnavailable = 5,
  Compile = 6,
  Unsupported = 7,
  OutOfMemory = 8,
  IO = 9,
  Internal = 10,
  IndexOutOfRange = 11,  // data: a run read an index outside its range
};

class Error : public std::exception {
 public:
  Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  ErrorCode code_;
  std::string message_;
};

[[noreturn]] void throwError(ErrorCode code, std::string message);

// An index outside its range, read by a run: IndexOutOfRange with the one message every backend
// and the reference give (stitch.h, STITCH_ERROR_INDEX_OUT_OF_RANGE):
//   graph 'G': LABEL: index V is out of bounds for size N
// LABEL names the op that read it ("gather 'y' (axis 1)", "check_index 'label_ok'").
std::string indexErrorMessage(std::string_view graph, std::string_view label, int64_t index,
                              int64_t size);
[[noreturn]] void throwIndexError(std::string_view graph, std::string_view label, int64_t index,
                                  int64_t size);

}  // namespace stitch

// A user-facing check: `STITCH_CHECK(cond, ErrorCode::X, "fmt {}", args...)`.
#define STITCH_CHECK(cond, code, ...)                                    \
  do {                                                                   \
    if (!(cond)) ::stitch::throwError((code), fmt::format(__VA_ARGS__)); \
  } while (0)

// An internal invariant; failing it is a bug in Stitch, reported as STITCH_ERROR_INTERNAL.
#define STITCH_INTERNAL(cond, ...)                                                        \
  do {                                                                                    \
    if (!(cond))                                                                          \
      ::stitch::throwError(::stitch::ErrorCode::Internal,                                 \
                           fmt::format("internal error at {}:{}: {}", __FILE__, __LINE__, \
                                       fmt::format(__VA_ARGS__)));                        \
  } while (0)
