#include "runtime/kernel_cache.h"

#include <dirent.h>
#include <fcntl.h>
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

#include "support/canonical.h"
#include "support/env.h"

namespace stitch::rt {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// CacheKey

CacheKey& CacheKey::add(std::string name, std::string bytes) {
  parts.push_back(Part{std::move(name), std::move(bytes)});
  return *this;
}

std::string CacheKey::canonical() const {
  // The same encoding as kernel programs (support/canonical.h): lengths as 8 bytes little-endian.
  CanonicalWriter w;
  w.string(kCanonicalKeyFormat);
  w.length(parts.size());
  for (const Part& p : parts) {
    w.string(p.name);
    w.string(p.bytes);
  }
  w.string(version);
  return w.take();
}

uint64_t CacheKey::hash() const { return fnv1a64(canonical()); }

// ---------------------------------------------------------------------------------------------
// Statistics

CacheStats& CacheStats::operator+=(const CacheStats& o) {
  memoryHits += o.memoryHits;
  memoryMisses += o.memoryMisses;
  diskHits += o.diskHits;
  diskMisses += o.diskMisses;
  diskWrites += o.diskWrites;
  corruptEntries += o.corruptEntries;
  compiles += o.compiles;
  compileSeconds += o.compileSeconds;
  shapeClasses += o.shapeClasses;
  classSizes += o.classSizes;
  return *this;
}

std::string CacheStats::toString() const {
  return fmt::format(
      "memory {} hits / {} misses, disk {} hits / {} misses / {} writes, {} corrupt entries, "
      "{} compiles in {:.3f} s, {} shape classes serving {} sizes",
      memoryHits, memoryMisses, diskHits, diskMisses, diskWrites, corruptEntries, compiles,
      compileSeconds, shapeClasses, classSizes);
}

void ShapeClassCounter::note(const CacheKey& key, const std::vector<int64_t>& sizes) {
  if (sizes.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::vector<int64_t>>& seen = sizes_[key.canonical()];
  if (std::find(seen.begin(), seen.end(), sizes) == seen.end()) seen.push_back(sizes);
}

void ShapeClassCounter::addTo(CacheStats& s) const {
  std::lock_guard<std::mutex> lock(mu_);
  s.shapeClasses += sizes_.size();
  for (const auto& [key, seen] : sizes_) s.classSizes += seen.size();
}

void CacheStatsCounter::compiled(std::chrono::nanoseconds took) {
  compiles_.fetch_add(1, std::memory_order_relaxed);
  compileNanos_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, took.count())),
                          std::memory_order_relaxed);
}

CacheStats CacheStatsCounter::snapshot() const {
  CacheStats s;
  s.memoryHits = memoryHits_.load(std::memory_order_relaxed);
  s.memoryMisses = memoryMisses_.load(std::memory_order_relaxed);
  s.diskHits = diskHits_.load(std::memory_order_relaxed);
  s.diskMisses = diskMisses_.load(std::memory_order_relaxed);
  s.diskWrites = diskWrites_.load(std::memory_order_relaxed);
  s.corruptEntries = corruptEntries_.load(std::memory_order_relaxed);
  s.compiles = compiles_.load(std::memory_order_relaxed);
  s.compileSeconds = static_cast<double>(compileNanos_.load(std::memory_order_relaxed)) * 1e-9;
  return s;
}

void CacheStatsCounter::reset() {
  for (auto* c : {&memoryHits_, &memoryMisses_, &diskHits_, &diskMisses_, &diskWrites_,
                  &corruptEntries_, &compiles_, &compileNanos_})
    c->store(0, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// DiskCache

namespace {

void putLE(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t getLE(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// Reads exactly n bytes at the current offset; false on EOF or error.
bool readAll(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool writeAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

std::string errnoText() { return std::strerror(errno); }

// Keys hold a serialized kernel program: a few KB, a few hundred KB for the largest kernels.
// Anything far larger is not one of our headers (and is not worth allocating for).
constexpr uint64_t kMaxKeyBytes = uint64_t{64} << 20;

std::atomic<uint64_t> gTempCounter{0};

constexpr std::string_view kTempPrefix = ".tmp-";
constexpr std::string_view kTempSuffix = ".stitchk~";

bool allOf(std::string_view s, std::string_view chars) {
  return !s.empty() && s.find_first_not_of(chars) == std::string_view::npos;
}

// The writer's process id in the name of a temporary file store() makes
// (".tmp-<16 hex>-<pid>-<hex>-<n>.stitchk~"), or nullopt when the name is not one of ours.
std::optional<pid_t> tempFileWriter(std::string_view name) {
  if (!name.starts_with(kTempPrefix) || !name.ends_with(kTempSuffix)) return std::nullopt;
  name = name.substr(kTempPrefix.size(), name.size() - kTempPrefix.size() - kTempSuffix.size());
  std::array<std::string_view, 4> fields;
  for (size_t i = 0; i < fields.size(); ++i) {
    size_t dash = i + 1 < fields.size() ? name.find('-') : name.size();
    if (dash == std::string_view::npos) return std::nullopt;
    fields[i] = name.substr(0, dash);
    name.remove_prefix(std::min(name.size(), dash + 1));
  }
  constexpr std::string_view kHex = "0123456789abcdef", kDec = "0123456789";
  if (fields[0].size() != 16 || !allOf(fields[0], kHex) || !allOf(fields[1], kDec) ||
      fields[1].size() > 9 || !allOf(fields[2], kHex) || !allOf(fields[3], kDec))
    return std::nullopt;
  pid_t pid = 0;
  for (char c : fields[1]) pid = pid * 10 + (c - '0');
  if (pid <= 0) return std::nullopt;  // kill(0 or -1, ...) would mean a process group
  return pid;
}

// Whether a process with this id exists on this host (EPERM: it exists, owned by someone else).
bool processExists(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

DiskCache::DiskCache(fs::path dir) : enabled_(true), dir_(std::move(dir)) {}

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

std::unique_ptr<DiskCache> DiskCache::fromEnv() {
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
  return std::make_unique<DiskCache>(*dir);
}

fs::path DiskCache::pathFor(const CacheKey& key) const {
  return dir_ / fmt::format("{:016x}{}", key.hash(), kDiskExtension);
}

std::vector<uint8_t> DiskCache::encode(const std::string& canonicalKey,
                                       std::span<const uint8_t> payload) {
  // Sized once and filled by offset (growing it with insert() trips a GCC 12 -O2 false
  // -Wstringop-overflow).
  std::vector<uint8_t> out(kDiskHeaderBytes + canonicalKey.size() + payload.size());
  uint8_t* p = out.data();
  std::memcpy(p, kDiskMagic.data(), kDiskMagic.size());
  putLE(p + 8, kDiskFormatVersion, 4);
  putLE(p + 12, canonicalKey.size(), 4);
  putLE(p + 16, payload.size(), 8);
  putLE(p + 24, fnv1a64(payload), 8);
  if (!canonicalKey.empty())
    std::memcpy(p + kDiskHeaderBytes, canonicalKey.data(), canonicalKey.size());
  if (!payload.empty())
    std::memcpy(p + kDiskHeaderBytes + canonicalKey.size(), payload.data(), payload.size());
  return out;
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

std::optional<std::vector<uint8_t>> DiskCache::load(const CacheKey& key) {
  if (!enabled_) return std::nullopt;
  const fs::path path = pathFor(key);
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever (and a
  // device node could do anything); O_NOFOLLOW: a symlink is not an entry we wrote. Only a regular
  // file is read; anything else is a miss, and store() renames a good entry over it.
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
  if (f.fd < 0) {
    const int err = errno;
    stats_.diskMiss();
    if (err == ELOOP)
      stitch::log().warn("kernel cache: ignoring {}: a symbolic link, not a cache entry",
                         path.string());
    else stitch::log().debug("kernel cache: disk miss {} ({})", path.string(), std::strerror(err));
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    stats_.diskMiss();
    stitch::log().warn("kernel cache: ignoring {}: not a regular file", path.string());
    return std::nullopt;
  }
  const auto dev = static_cast<uint64_t>(st.st_dev);
  const auto ino = static_cast<uint64_t>(st.st_ino);
  const auto fileSize = static_cast<uint64_t>(st.st_size);
  auto corrupt = [&](const std::string& why) -> std::optional<std::vector<uint8_t>> {
    stats_.diskMiss();
    rejectCorrupt(path, why, dev, ino);
    return std::nullopt;
  };

  std::array<uint8_t, kDiskHeaderBytes> header{};
  if (fileSize < kDiskHeaderBytes || !readAll(f.fd, header.data(), header.size()))
    return corrupt(fmt::format("{} bytes, shorter than the header", fileSize));
  if (std::memcmp(header.data(), kDiskMagic.data(), kDiskMagic.size()) != 0)
    return corrupt("wrong magic");
  const uint64_t version = getLE(header.data() + 8, 4);
  if (version != kDiskFormatVersion)
    return corrupt(fmt::format("format version {}, expected {}", version, kDiskFormatVersion));
  const uint64_t keyBytes = getLE(header.data() + 12, 4);
  const uint64_t payloadBytes = getLE(header.data() + 16, 8);
  const uint64_t checksum = getLE(header.data() + 24, 8);
  if (keyBytes > kMaxKeyBytes || payloadBytes > fileSize ||
      fileSize != kDiskHeaderBytes + keyBytes + payloadBytes)
    return corrupt(fmt::format("{} bytes, header says {} + {} + {}", fileSize, kDiskHeaderBytes,
                               keyBytes, payloadBytes));

  const std::string expectedKey = key.canonical();
  std::string storedKey(keyBytes, '\0');
  if (!readAll(f.fd, reinterpret_cast<uint8_t*>(storedKey.data()), storedKey.size()))
    return corrupt("truncated while reading the key");
  if (storedKey != expectedKey)
    return corrupt("the header holds another key (a hash collision or a foreign file)");

  std::vector<uint8_t> payload(payloadBytes);
  if (!readAll(f.fd, payload.data(), payload.size()))
    return corrupt("truncated while reading the payload");
  if (fnv1a64(payload) != checksum) return corrupt("payload checksum mismatch");

  stats_.diskHit();
  stitch::log().debug("kernel cache: disk hit {} ({} bytes)", path.string(), payload.size());
  return payload;
}

void DiskCache::writeFailed(const std::string& what) {
  if (!warnedWrite_.exchange(true))
    stitch::log().warn("kernel cache: {}; compiled kernels are kept in memory only", what);
  else stitch::log().debug("kernel cache: {}", what);
}

void DiskCache::store(const CacheKey& key, std::span<const uint8_t> payload) {
  if (!enabled_) return;
  try {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) {
      writeFailed(fmt::format("cannot create cache directory {}: {}", dir_.string(), ec.message()));
      return;
    }
    // Once per DiskCache (so once per process for the backends' caches): a directory scan costs
    // about what one compile does, and leftovers only accumulate across crashes.
    if (!swept_.exchange(true)) removeStaleTemporaries();
    const fs::path path = pathFor(key);
    const std::vector<uint8_t> bytes = encode(key.canonical(), payload);
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
    stats_.diskWrite();
    stitch::log().debug("kernel cache: wrote {} ({} bytes)", path.string(), payload.size());
  } catch (const std::exception& e) {
    // e.g. bad_alloc or a formatting failure: the cache must never fail the caller.
    writeFailed(fmt::format("cannot store a cache entry: {}", e.what()));
  }
}

size_t DiskCache::removeStaleTemporaries() {
  if (!enabled_) return 0;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return 0;
  // The precise clock: time() reads the coarse one, which may lag a file's mtime set just before
  // (utimensat from the precise clock) into the previous second, an age one second short.
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  const auto now = static_cast<int64_t>(ts.tv_sec);
  size_t removed = 0;
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
    if (stale && ::unlinkat(::dirfd(d), e->d_name, 0) == 0) {
      ++removed;
      stitch::log().debug("kernel cache: removed stale temporary file {} (writer {}, {} s old)",
                          (dir_ / std::string(name)).string(), *writer, age);
    }
  }
  ::closedir(d);
  if (removed > 0)
    stitch::log().info("kernel cache: removed {} stale temporary file(s) of crashed writers in {}",
                       removed, dir_.string());
  return removed;
}

}  // namespace stitch::rt
