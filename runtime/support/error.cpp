#include "runtime/support/error.h"

namespace stitch {

void throwError(ErrorCode code, std::string message) { throw Error(code, std::move(message)); }

std::string indexErrorMessage(std::string_view graph, std::string_view label, int64_t index,
                              int64_t size) {
  return fmt::format("graph '{}': {}: index {} is out of bounds for size {}", graph, label, index,
                     size);
}

void throwIndexError(std::string_view graph, std::string_view label, int64_t index, int64_t size) {
  throw Error(ErrorCode::IndexOutOfRange, indexErrorMessage(graph, label, index, size));
}

}  // namespace stitch
