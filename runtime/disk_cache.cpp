// The disk layer: lookups, stores, stale temporary files (design note in disk_cache.h).
#include "runtime/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <functional>
#include <system_error>
#include <thread>
#include <tuple>

#include "runtime/support/canonical.h"
#include "runtime/support/env.h"
#include "runtime/support/error.h"
#include "runtime/support/fd.h"
#include "runtime/support/hash.h"
#include "runtime/support/logging.h"
#include "runtime/support/signal_guard.h"

namespace stitch::rt {

namespace fs = std::filesystem;
using namespace diskfmt;

namespace {

std::atomic<uint64_t> gTempCounter{0};

}  // namespace

DiskCache::DiskCache(fs::path dir, uint64_t maxBytes,
                     std::shared_ptr<const CacheSecret> fleetSecret)
    : enabled_(true),
      dir_(std::move(dir)),
      maxBytes_(maxBytes),
      fleetSecret_(std::move(fleetSecret)) {}

std::unique_ptr<DiskCache> DiskCache::disabled() {
  return std::unique_ptr<DiskCache>(new DiskCache());
}

bool DiskCache::enabledByEnv() { return env::getBool("STITCH_CACHE", true); }

std::optional<fs::path> DiskCache::directoryFromEnv() {
  if (auto d = env::get("STITCH_CACHE_DIR")) return fs::path(*d);
  // The XDG base directory spec says a relative XDG_CACHE_HOME is invalid and to be ignored.
  if (auto x = env::get("XDG_CACHE_HOME"); x && fs::path(*x).is_absolute())
    return fs::path(*x) / "stitch";
  if (auto h = env::get("HOME")) return fs::path(*h) / ".cache" / "stitch";
  return std::nullopt;
}

uint64_t DiskCache::maxBytesFromEnv() {
  const int64_t mb = env::getInt("STITCH_CACHE_MAX_MB", 1, static_cast<int64_t>(kMaxDiskCacheMaxMB),
                                 static_cast<int64_t>(kDefaultDiskCacheMaxMB));
  return static_cast<uint64_t>(mb) << 20;
}

std::unique_ptr<DiskCache> DiskCache::fromEnv() {
  // Checked even when the layer is off: a bad value is a mistake wherever it is set.
  const uint64_t maxBytes = maxBytesFromEnv();
  std::shared_ptr<const CacheSecret> fleet = fleetSecretFromEnv();
  if (!enabledByEnv()) {
    stitch::log().debug("kernel cache: disk layer off (STITCH_CACHE=0)");
    return disabled();
  }
  auto dir = directoryFromEnv();
  if (!dir) {
    stitch::log().warn(
        "kernel cache: no cache directory (set STITCH_CACHE_DIR, XDG_CACHE_HOME or HOME); "
        "compiled kernels are kept in memory only");
    return disabled();
  }
  return std::make_unique<DiskCache>(*dir, maxBytes, std::move(fleet));
}

std::shared_ptr<const CacheSecret> DiskCache::secret(bool create) {
  if (!enabled_) return nullptr;
  if (fleetSecret_) return fleetSecret_;
  std::lock_guard lock(secretMu_);
  if (directorySecret_ || !secretRefused_.empty()) return directorySecret_;
  std::string why;
  directorySecret_ = directorySecret(dir_, create, &why);
  if (!directorySecret_ && !why.empty()) {
    // Refused for good (this DiskCache): entries that cannot be verified are never used.
    secretRefused_ = why;
    stitch::log().warn(
        "kernel cache: not using the cache directory {}: {}; compiled kernels are kept in memory "
        "only (remove that file, or set STITCH_CACHE_KEY)",
        dir_.string(), why);
  }
  return directorySecret_;
}

fs::path DiskCache::pathFor(const CacheKey& key) const {
  return dir_ / fmt::format("{:016x}{}", key.hash(), kDiskExtension);
}

void DiskCache::rejectCorrupt(const fs::path& path, const std::string& why, uint64_t dev,
                              uint64_t ino) {
  stats_.corruptEntry();
  stitch::log().warn("kernel cache: ignoring corrupt entry {}: {}", path.string(), why);
  // Remove it only if it is still the file we read: another process may have just renamed a good
  // entry into its place. (A narrow race remains; losing a good entry only costs a recompile.)
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_dev) == dev &&
      static_cast<uint64_t>(st.st_ino) == ino)
    ::unlink(path.c_str());
}

std::optional<std::vector<uint8_t>> DiskCache::load(const CacheKey& key, EntryKind kind) {
  if (!enabled_) return std::nullopt;
  const bool counted = kind == EntryKind::Kernel;
  const fs::path path = pathFor(key);
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever (and a
  // device node could do anything); O_NOFOLLOW: a symlink is not an entry we wrote. Only a regular
  // file is read; anything else is a miss, and store() renames a good entry over it.
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
  if (f.fd < 0) {
    const int err = errno;
    if (counted) stats_.diskMiss();
    if (err == ELOOP)
      stitch::log().warn("kernel cache: ignoring {}: a symbolic link, not a cache entry",
                         path.string());
    else stitch::log().debug("kernel cache: disk miss {} ({})", path.string(), std::strerror(err));
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (counted) stats_.diskMiss();
    stitch::log().warn("kernel cache: ignoring {}: not a regular file", path.string());
    return std::nullopt;
  }
  // The key to verify with; none yet (no entry of ours can be here) or one refused: a miss, and
  // the entry is left alone (the store that follows overwrites it, if it can).
  const std::shared_ptr<const CacheSecret> secret = this->secret(/*create=*/false);
  if (!secret) {
    if (counted) stats_.diskMiss();
    stitch::log().debug("kernel cache: disk miss {} (no key to verify it with)", path.string());
    return std::nullopt;
  }
  const auto dev = static_cast<uint64_t>(st.st_dev);
  const auto ino = static_cast<uint64_t>(st.st_ino);
  const auto fileSize = static_cast<uint64_t>(st.st_size);
  auto corrupt = [&](const std::string& why) -> std::optional<std::vector<uint8_t>> {
    if (counted) stats_.diskMiss();
    rejectCorrupt(path, why, dev, ino);
    return std::nullopt;
  };
  if (fileSize > kMaxEntryBytes)
    return corrupt(fmt::format("{} bytes, more than any entry ({})", fileSize, kMaxEntryBytes));
  std::vector<uint8_t> bytes(fileSize);
  if (!readAll(f.fd, bytes.data(), bytes.size())) return corrupt("truncated while reading");
  std::string why;
  std::optional<std::vector<uint8_t>> payload = decodeEntry(*secret, bytes, key.canonical(), &why);
  if (!payload) return corrupt(why);
  // A hit makes the entry the most recently used, for every process sharing the directory (the
  // note, "Size bound and eviction"); if it fails (a read-only file system), it only looks older.
  ::futimens(f.fd, nullptr);

  if (counted) stats_.diskHit();
  stitch::log().debug("kernel cache: disk hit {} ({} bytes)", path.string(), payload->size());
  return payload;
}

void DiskCache::writeFailed(const std::string& what) {
  if (!warnedWrite_.exchange(true))
    stitch::log().warn("kernel cache: {}; compiled kernels are kept in memory only", what);
  else stitch::log().debug("kernel cache: {}", what);
}

void DiskCache::store(const CacheKey& key, std::span<const uint8_t> payload, EntryKind kind) {
  if (!enabled_) return;
  try {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) {
      writeFailed(fmt::format("cannot create cache directory {}: {}", dir_.string(), ec.message()));
      return;
    }
    // Once per DiskCache (so once per process for the backends' caches): a directory scan costs
    // about what one compile does, and leftovers only accumulate across crashes. The size
    // estimate starts from the same first store.
    if (!swept_.exchange(true)) {
      removeStaleTemporaries();
      estimatedBytes_.fetch_add(usage().bytes);
    }
    const std::shared_ptr<const CacheSecret> secret = this->secret(/*create=*/true);
    if (!secret) return;  // secret() said why, once
    const fs::path path = pathFor(key);
    const std::vector<uint8_t> bytes = encodeEntry(*secret, key.canonical(), payload);
    const auto tid = std::hash<std::thread::id>{}(std::this_thread::get_id());

    fs::path tmp;
    int fd = -1;
    for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
      tmp = dir_ / fmt::format(".tmp-{:016x}-{}-{:x}-{}{}~", key.hash(), ::getpid(), tid,
                               gTempCounter.fetch_add(1), kDiskExtension);
      fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
      writeFailed(fmt::format("cannot create {}: {}", tmp.string(), errnoText()));
      return;
    }
    bool ok = writeAll(fd, bytes.data(), bytes.size());
    std::string err = ok ? "" : errnoText();
    if (ok && ::fsync(fd) != 0) {
      ok = false;
      err = errnoText();
    }
    if (::close(fd) != 0 && ok) {
      ok = false;
      err = errnoText();
    }
    if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
      ok = false;
      err = errnoText();
    }
    if (!ok) {
      ::unlink(tmp.c_str());
      writeFailed(fmt::format("cannot write {}: {}", path.string(), err));
      return;
    }
    if (kind == EntryKind::Kernel) stats_.diskWrite();
    stitch::log().debug("kernel cache: wrote {} ({} bytes)", path.string(), payload.size());
    // An entry written over an older one is counted twice: the estimate errs high, which only
    // brings the next scan forward.
    if (estimatedBytes_.fetch_add(bytes.size()) + bytes.size() > maxBytes_) evictIfOverBound();
  } catch (const std::exception& e) {
    // e.g. bad_alloc or a formatting failure: the cache must never fail the caller.
    writeFailed(fmt::format("cannot store a cache entry: {}", e.what()));
  }
}

size_t DiskCache::removeStaleTemporaries() { return removeStaleTemporaryFiles().files; }

DiskCache::Removed DiskCache::removeStaleTemporaryFiles(uint64_t* failures,
                                                        std::string* firstFailure) {
  Removed removed;
  if (!enabled_) return removed;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return removed;
  // The precise clock: time() reads the coarse one, which may lag a file's mtime set just before
  // (utimensat from the precise clock) into the previous second, an age one second short.
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  const auto now = static_cast<int64_t>(ts.tv_sec);
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    const std::optional<pid_t> writer = tempFileWriter(name);
    if (!writer) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    const int64_t age = now - static_cast<int64_t>(st.st_mtime);
    const bool stale =
        age > kStaleTempSeconds || (age > kDeadWriterGraceSeconds && !processExists(*writer));
    if (!stale) continue;
    if (::unlinkat(::dirfd(d), e->d_name, 0) == 0) {
      ++removed.files;
      removed.bytes += static_cast<uint64_t>(st.st_size);
      stitch::log().debug("kernel cache: removed stale temporary file {} (writer {}, {} s old)",
                          (dir_ / std::string(name)).string(), *writer, age);
    } else if (errno != ENOENT && failures) {  // ENOENT: another process removed it
      if ((*failures)++ == 0 && firstFailure)
        *firstFailure = fmt::format("{}: {}", (dir_ / std::string(name)).string(), errnoText());
    }
  }
  ::closedir(d);
  if (removed.files > 0)
    stitch::log().info("kernel cache: removed {} stale temporary file(s) of crashed writers in {}",
                       removed.files, dir_.string());
  return removed;
}

}  // namespace stitch::rt
