// A POSIX file descriptor closed when it goes out of scope (the cache's entry and key files).
#pragma once

#include <unistd.h>

namespace stitch {

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

}  // namespace stitch
