// Index check failures (design note in index_checks.h).
#include "runtime/index_checks.h"

#include "runtime/support/error.h"

namespace stitch::rt {

void throwCheckFailure(std::span<const int64_t> status, std::span<const std::string> checks,
                       std::string_view program, size_t kernel) {
  STITCH_INTERNAL(status.size() >= kCheckStatusWords, "{} status words", status.size());
  const int64_t c = status[0] - 1;
  STITCH_INTERNAL(c >= 0 && static_cast<size_t>(c) < checks.size(),
                  "kernel {} of graph {} recorded index check {} of {}", kernel, program, c,
                  checks.size());
  throwIndexError(program, checks[static_cast<size_t>(c)], status[1], status[2]);
}

}  // namespace stitch::rt
