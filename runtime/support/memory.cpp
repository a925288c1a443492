// The host memory limit. The design note is in memory.h.
#include "runtime/support/memory.h"

#include <unistd.h>

#include <fstream>
#include <limits>
#include <string>

#include "runtime/support/checked.h"
#include "runtime/support/error.h"

namespace stitch {

namespace {

// A cgroup limit in bytes from a file holding a number ("max" and unreadable files: none).
int64_t cgroupLimit(const char* path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    return std::numeric_limits<int64_t>::max();
  try {
    return std::stoll(s);
  } catch (const std::exception&) {  // out of range: cgroup v1 writes 2^63 - page for "none"
    return std::numeric_limits<int64_t>::max();
  }
}

int64_t computeLimit() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  int64_t limit = std::numeric_limits<int64_t>::max();
  if (pages > 0 && page > 0) limit = saturatingMul(pages, page);
  limit = std::min(limit, cgroupLimit("/sys/fs/cgroup/memory.max"));                    // v2
  limit = std::min(limit, cgroupLimit("/sys/fs/cgroup/memory/memory.limit_in_bytes"));  // v1
  return limit;
}

}  // namespace

int64_t hostMemoryBytes() {
  static const int64_t limit = computeLimit();
  return limit;
}

void checkHostMemory(int64_t bytes, std::string_view what) {
  int64_t limit = hostMemoryBytes();
  STITCH_CHECK(bytes <= limit, ErrorCode::OutOfMemory,
               "{} needs {}, more than this machine's memory, {}", what, bytesText(bytes),
               bytesText(limit));
}

}  // namespace stitch
