// A directory in which this process can neither create nor remove files, for the tests of I/O
// failures (a read-only cache directory), that works for root too.
//
// Permission bits do not stop root (CAP_DAC_OVERRIDE), and the tests run as root in CI's
// containers; so for root the directory gets the immutable attribute instead (chattr +i, the
// FS_IOC_SETFLAGS ioctl), which stops everyone, root included: no entry can be created, removed or
// renamed in it. Setting it needs CAP_LINUX_IMMUTABLE and a file system that has the attribute
// (ext2/3/4, xfs, btrfs, tmpfs since Linux 6.0); where neither way works, make() says why and the
// test skips with that. The directory's files stay readable and writable in place. The attribute
// or mode is taken off when the object goes, so that the test's TempDir can be removed.
#pragma once

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

namespace stitch::testing {

class UnwritableDir {
 public:
  // Makes `dir` unwritable for this process, or returns null with *why.
  static std::unique_ptr<UnwritableDir> make(const std::filesystem::path& dir, std::string* why) {
    auto u = std::unique_ptr<UnwritableDir>(new UnwritableDir(dir));
    if (::geteuid() != 0) {
      if (::chmod(dir.c_str(), 0555) != 0) {
        *why = std::string("chmod: ") + std::strerror(errno);
        return nullptr;
      }
      u->chmodded_ = true;
      return u;
    }
    if (!u->setImmutable(true, why)) return nullptr;
    u->immutable_ = true;
    return u;
  }
  ~UnwritableDir() {
    std::string ignored;
    if (immutable_) setImmutable(false, &ignored);
    if (chmodded_) ::chmod(dir_.c_str(), 0755);
  }
  UnwritableDir(const UnwritableDir&) = delete;
  UnwritableDir& operator=(const UnwritableDir&) = delete;

  // How it was made so, for test messages.
  const char* how() const { return immutable_ ? "chattr +i" : "chmod 0555"; }

 private:
  explicit UnwritableDir(std::filesystem::path dir) : dir_(std::move(dir)) {}

  bool setImmutable(bool on, std::string* why) const {
    const int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      *why = std::string("open: ") + std::strerror(errno);
      return false;
    }
    int flags = 0;
    bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
    if (ok) {
      flags = on ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
      ok = ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
    }
    if (!ok)
      *why = std::string("root, and the immutable attribute cannot be set here (") +
             std::strerror(errno) + "): permission bits do not stop root";
    ::close(fd);
    return ok;
  }

  std::filesystem::path dir_;
  bool chmodded_ = false, immutable_ = false;
};

}  // namespace stitch::testing
