#include "runtime/kernel_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <functional>
#include <system_error>
#include <thread>

#include "support/env.h"

namespace stitch::rt {

namespace fs = std::filesystem;

uint64_t fnv1a64(std::span<const uint8_t> bytes, uint64_t seed) {
  uint64_t h = seed;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t fnv1a64(std::string_view text) {
  return fnv1a64(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

// ---------------------------------------------------------------------------------------------
// CacheKey

namespace {

void appendList(std::string& out, std::string_view name, const std::vector<int64_t>& xs) {
  out += name;
  out += '[';
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(xs[i]);
  }
  out += ']';
}

// "name=<bytes>:<text>\n": the length makes any text, newlines included, unambiguous.
void appendString(std::string& out, std::string_view name, std::string_view text) {
  out += fmt::format("{}={}:", name, text.size());
  out += text;
  out += '\n';
}

}  // namespace

std::string CacheKey::canonical() const {
  std::string out;
  out += kCanonicalKeyFormat;
  out += '\n';
  out += fmt::format("fingerprint={:016x}\n", graphFingerprint);
  out += fmt::format("inputs={}\n", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputSignature& in = inputs[i];
    out += fmt::format("input{}={} ", i, ir::dtypeName(in.dtype));
    appendList(out, "shape", in.shape);
    out += ' ';
    appendList(out, "strides", in.strides);
    out += fmt::format(" align{}\n", in.alignment);
  }
  appendString(out, "target", target);
  appendString(out, "options", options);
  appendString(out, "version", version);
  return out;
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
  return *this;
}

std::string CacheStats::toString() const {
  return fmt::format(
      "memory {} hits / {} misses, disk {} hits / {} misses / {} writes, {} corrupt entries, "
      "{} compiles in {:.3f} s",
      memoryHits, memoryMisses, diskHits, diskMisses, diskWrites, corruptEntries, compiles,
      compileSeconds);
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

// Keys are a few hundred bytes; anything far larger is not one of our headers.
constexpr uint64_t kMaxKeyBytes = 1 << 20;

std::atomic<uint64_t> gTempCounter{0};

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
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) {
    stats_.diskMiss();
    stitch::log().debug("kernel cache: disk miss {} ({})", path.string(), errnoText());
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    stats_.diskMiss();
    stitch::log().debug("kernel cache: disk miss {} (not a regular file)", path.string());
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

}  // namespace stitch::rt
