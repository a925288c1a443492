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
#include <tuple>

#include "runtime/remote_cache.h"
#include "runtime/support/canonical.h"
#include "runtime/support/env.h"
#include "runtime/support/fd.h"
#include "runtime/support/signal_guard.h"

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
  evictions += o.evictions;
  compiles += o.compiles;
  compileSeconds += o.compileSeconds;
  shapeClasses += o.shapeClasses;
  classSizes += o.classSizes;
  remoteHits += o.remoteHits;
  remoteMisses += o.remoteMisses;
  remoteWrites += o.remoteWrites;
  remoteErrors += o.remoteErrors;
  return *this;
}

std::string CacheStats::toString() const {
  return fmt::format(
      "memory {} hits / {} misses, disk {} hits / {} misses / {} writes / {} evictions, "
      "{} corrupt entries, {} compiles in {:.3f} s, {} shape classes serving {} sizes, remote {} "
      "hits / {} misses / {} writes / {} errors",
      memoryHits, memoryMisses, diskHits, diskMisses, diskWrites, evictions, corruptEntries,
      compiles, compileSeconds, shapeClasses, classSizes, remoteHits, remoteMisses, remoteWrites,
      remoteErrors);
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
  s.evictions = evictions_.load(std::memory_order_relaxed);
  s.compiles = compiles_.load(std::memory_order_relaxed);
  s.compileSeconds = static_cast<double>(compileNanos_.load(std::memory_order_relaxed)) * 1e-9;
  s.remoteHits = remoteHits_.load(std::memory_order_relaxed);
  s.remoteMisses = remoteMisses_.load(std::memory_order_relaxed);
  s.remoteWrites = remoteWrites_.load(std::memory_order_relaxed);
  s.remoteErrors = remoteErrors_.load(std::memory_order_relaxed);
  return s;
}

void CacheStatsCounter::reset() {
  for (auto* c : {&memoryHits_, &memoryMisses_, &diskHits_, &diskMisses_, &diskWrites_,
                  &corruptEntries_, &evictions_, &compiles_, &compileNanos_, &remoteHits_,
                  &remoteMisses_, &remoteWrites_, &remoteErrors_})
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

// A write past the file-size limit fails with EFBIG instead of ending the process with SIGXFSZ
// (the note's "Failures"; support/signal_guard.h).
bool writeAll(int fd, const uint8_t* p, size_t n) {
  SignalGuard xfsz(SIGXFSZ);
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
// No entry (a cubin, an object file, a program's artifact) comes near this; a larger file is not
// ours, and is not read whole.
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 30;

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

namespace {

// An entry's header fields (the format table in kernel_cache.h).
struct EntryHeader {
  uint64_t keyBytes = 0, payloadBytes = 0;
};

// Reads the header at h of an entry `size` bytes long into out: "" when the magic and format
// version are ours and the sizes add up to `size`, else what is wrong. Each term is checked
// against the size first, so their sum cannot wrap.
std::string parseEntryHeader(const uint8_t* h, uint64_t size, EntryHeader& out) {
  if (size < kDiskHeaderBytes) return fmt::format("{} bytes, shorter than the header", size);
  if (std::memcmp(h, kDiskMagic.data(), kDiskMagic.size()) != 0) return "wrong magic";
  const uint64_t version = getLE(h + 8, 4);
  if (version != kDiskFormatVersion)
    return fmt::format("format version {}, expected {}", version, kDiskFormatVersion);
  out.keyBytes = getLE(h + 12, 4);
  out.payloadBytes = getLE(h + 16, 8);
  if (out.keyBytes > kMaxKeyBytes || out.payloadBytes > size ||
      size != kDiskHeaderBytes + out.keyBytes + out.payloadBytes)
    return fmt::format("{} bytes, header says {} + {} + {}", size, kDiskHeaderBytes, out.keyBytes,
                       out.payloadBytes);
  return "";
}

// The tag of an entry: HMAC-SHA-256 of the header before the tag, the key, the payload. Begun
// here and fed the key and the payload by the caller (prune() reads the payload in pieces).
HmacSha256::Message beginTag(const CacheSecret& secret, const uint8_t* header) {
  HmacSha256::Message m = secret.hmac().begin();
  m.add(std::span<const uint8_t>(header, kEntryTagOffset));
  return m;
}

constexpr std::string_view kBadTag =
    "its authentication tag does not verify (damaged, written under another key, or forged)";

}  // namespace

std::vector<uint8_t> encodeEntry(const CacheSecret& secret, std::string_view canonicalKey,
                                 std::span<const uint8_t> payload) {
  // Sized once and filled by offset (growing it with insert() trips a GCC 12 -O2 false
  // -Wstringop-overflow).
  std::vector<uint8_t> out(kDiskHeaderBytes + canonicalKey.size() + payload.size());
  uint8_t* p = out.data();
  std::memcpy(p, kDiskMagic.data(), kDiskMagic.size());
  putLE(p + 8, kDiskFormatVersion, 4);
  putLE(p + 12, canonicalKey.size(), 4);
  putLE(p + 16, payload.size(), 8);
  if (!canonicalKey.empty())
    std::memcpy(p + kDiskHeaderBytes, canonicalKey.data(), canonicalKey.size());
  if (!payload.empty())
    std::memcpy(p + kDiskHeaderBytes + canonicalKey.size(), payload.data(), payload.size());
  const Sha256Digest tag = beginTag(secret, p).add(canonicalKey).add(payload).finish();
  std::memcpy(p + kEntryTagOffset, tag.data(), tag.size());
  return out;
}

std::optional<std::vector<uint8_t>> decodeEntry(const CacheSecret& secret,
                                                std::span<const uint8_t> bytes,
                                                std::string_view canonicalKey, std::string* why) {
  auto fail = [&](std::string text) -> std::optional<std::vector<uint8_t>> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  EntryHeader h;
  if (std::string defect = parseEntryHeader(bytes.data(), bytes.size(), h); !defect.empty())
    return fail(std::move(defect));
  const std::span<const uint8_t> storedKey = bytes.subspan(kDiskHeaderBytes, h.keyBytes);
  const std::span<const uint8_t> payload = bytes.subspan(kDiskHeaderBytes + h.keyBytes);
  const Sha256Digest tag = beginTag(secret, bytes.data()).add(storedKey).add(payload).finish();
  if (!macEqual(tag, bytes.subspan(kEntryTagOffset, tag.size()))) return fail(std::string(kBadTag));
  if (std::string_view(reinterpret_cast<const char*>(storedKey.data()), storedKey.size()) !=
      canonicalKey)
    return fail(
        "the header holds another key (a hash collision, another version's entry or a "
        "foreign value)");
  return std::vector<uint8_t>(payload.begin(), payload.end());
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

// ---------------------------------------------------------------------------------------------
// DiskCache: the size bound, eviction and maintenance (the note's "Size bound and eviction" and
// "Maintenance"). Recency is each entry's mtime, so that every process sharing the directory
// sees the same order without a lock.

namespace {

// Whether `name` is an entry's: 16 lowercase hex digits, then ".stitchk" (pathFor's names).
bool isEntryName(std::string_view name) {
  constexpr size_t kHexDigits = 16;
  return name.size() == kHexDigits + kDiskExtension.size() && name.ends_with(kDiskExtension) &&
         allOf(name.substr(0, kHexDigits), "0123456789abcdef");
}

// A directory stream, closed on scope exit; get() is null (and error() the errno) when the
// directory could not be opened.
class DirStream {
 public:
  explicit DirStream(const fs::path& dir) : d_(::opendir(dir.c_str())), error_(d_ ? 0 : errno) {}
  ~DirStream() {
    if (d_) ::closedir(d_);
  }
  DirStream(const DirStream&) = delete;
  DirStream& operator=(const DirStream&) = delete;
  DIR* get() const { return d_; }
  int fd() const { return ::dirfd(d_); }
  int error() const { return error_; }

 private:
  DIR* d_;
  int error_;
};

// For the maintenance calls: the directory, or null when it does not exist yet (nothing in it).
// Any other failure to read it is an IO error: the caller asked for this directory.
std::unique_ptr<DirStream> openForMaintenance(const fs::path& dir) {
  auto d = std::make_unique<DirStream>(dir);
  if (d->get()) return d;
  if (d->error() == ENOENT) return nullptr;
  throwError(ErrorCode::IO, fmt::format("kernel cache: cannot read the cache directory {}: {}",
                                        dir.string(), std::strerror(d->error())));
}

// A regular file of ours as a scan saw it: enough to tell later whether the name still holds it.
struct ScannedFile {
  std::string name;
  uint64_t bytes = 0;
  struct timespec mtime {};
  dev_t dev = 0;
  ino_t ino = 0;
};

struct DirScan {
  std::vector<ScannedFile> entries, temporaries;
  uint64_t entryBytes = 0, temporaryBytes = 0;
};

// The entries and temporary files in d: regular files with our names. Symbolic links, FIFOs and
// every other name are not ours and are skipped.
DirScan scanDirectory(const DirStream& d) {
  DirScan s;
  while (const dirent* e = ::readdir(d.get())) {
    const std::string_view name = e->d_name;
    const bool entry = isEntryName(name);
    if (!entry && !tempFileWriter(name)) continue;
    struct stat st {};
    if (::fstatat(d.fd(), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    ScannedFile f{std::string(name), static_cast<uint64_t>(st.st_size), st.st_mtim, st.st_dev,
                  st.st_ino};
    (entry ? s.entryBytes : s.temporaryBytes) += f.bytes;
    (entry ? s.entries : s.temporaries).push_back(std::move(f));
  }
  return s;
}

// What unlinkIfUnchanged did: removed the file; found it gone; kept it, changed since the scan;
// failed to remove it (logged at warn: a directory others may not write to, say).
enum class Unlinked { Removed, Gone, Kept, Failed };

// The files a maintenance call could not remove or read, for the error it ends with.
struct Failures {
  uint64_t files = 0;
  std::string first;  // "/dir/0123....stitchk: Permission denied"

  void add(const fs::path& path, const std::string& why) {
    if (files++ == 0) first = fmt::format("{}: {}", path.string(), why);
  }
  // Throws IO when there were any: "kernel cache: cannot <what> <dir>: N file(s) ... (first: ...);
  // <done>".
  void check(std::string_view what, const fs::path& dir, const std::string& done) const {
    if (files == 0) return;
    throwError(ErrorCode::IO,
               fmt::format("kernel cache: cannot {} {}: {} file(s) could not be removed or read "
                           "(the first: {}); {}",
                           what, dir.string(), files, first, done));
  }
};

// Removes f's name only if it still holds the file the scan saw (device, inode and mtime): in the
// meantime another process may have renamed a fresh entry there or refreshed it with a hit. The
// race left between the check and the unlink can only lose an entry, which costs a recompile.
Unlinked unlinkIfUnchanged(const DirStream& d, const fs::path& dir, const ScannedFile& f,
                           Failures* failures = nullptr) {
  struct stat st {};
  if (::fstatat(d.fd(), f.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? Unlinked::Gone : Unlinked::Kept;
  if (st.st_dev != f.dev || st.st_ino != f.ino || st.st_mtim.tv_sec != f.mtime.tv_sec ||
      st.st_mtim.tv_nsec != f.mtime.tv_nsec)
    return Unlinked::Kept;
  if (::unlinkat(d.fd(), f.name.c_str(), 0) == 0) return Unlinked::Removed;
  if (errno == ENOENT) return Unlinked::Gone;
  const std::string why = errnoText();
  stitch::log().warn("kernel cache: cannot remove {}: {}", (dir / f.name).string(), why);
  if (failures) failures->add(dir / f.name, why);
  return Unlinked::Failed;
}

// Removes the least recently used (oldest mtime) of `entries` until `total`, the bytes they
// hold, is at most `target`; updates total. Entries changed since the scan are kept.
DiskCache::Removed evictOldest(const DirStream& d, const fs::path& dir,
                               std::vector<ScannedFile> entries, uint64_t& total, uint64_t target,
                               Failures* failures = nullptr) {
  std::sort(entries.begin(), entries.end(), [](const ScannedFile& a, const ScannedFile& b) {
    return std::tie(a.mtime.tv_sec, a.mtime.tv_nsec, a.name) <
           std::tie(b.mtime.tv_sec, b.mtime.tv_nsec, b.name);
  });
  DiskCache::Removed r;
  for (const ScannedFile& f : entries) {
    if (total <= target) break;
    switch (unlinkIfUnchanged(d, dir, f, failures)) {
      case Unlinked::Removed:
        ++r.files;
        r.bytes += f.bytes;
        total -= f.bytes;
        stitch::log().debug("kernel cache: evicted {} ({} bytes, last used {} s ago)",
                            (dir / f.name).string(), f.bytes,
                            std::max<int64_t>(0, std::time(nullptr) - f.mtime.tv_sec));
        break;
      case Unlinked::Gone: total -= f.bytes; break;  // another process removed it
      case Unlinked::Kept:
      case Unlinked::Failed: break;
    }
  }
  return r;
}

// Why the entry file open as fd (`size` bytes, named `name`) is not an intact entry of ours, or
// "" when it is. load()'s checks that need no lookup key (magic, format version, sizes adding up,
// the tag under `secret` when there is one), and one that only a file can have: the stored key
// must hash to the file's name (pathFor). Reads the payload in pieces, so that a huge file costs
// no memory.
std::string entryDefect(int fd, std::string_view name, uint64_t size, const CacheSecret* secret) {
  std::array<uint8_t, kDiskHeaderBytes> head{};
  if (size >= kDiskHeaderBytes && !readAll(fd, head.data(), head.size()))
    return "truncated while reading the header";
  EntryHeader h;
  if (std::string defect = parseEntryHeader(head.data(), size, h); !defect.empty()) return defect;
  std::string key(h.keyBytes, '\0');
  if (!readAll(fd, reinterpret_cast<uint8_t*>(key.data()), key.size()))
    return "truncated while reading the key";
  if (fmt::format("{:016x}{}", fnv1a64(key), kDiskExtension) != name)
    return "the key in the header does not hash to the file's name";
  std::optional<HmacSha256::Message> tag;
  if (secret) tag.emplace(beginTag(*secret, head.data())).add(key);
  std::vector<uint8_t> buf(std::min<uint64_t>(h.payloadBytes, uint64_t{1} << 20));
  for (uint64_t left = h.payloadBytes; left > 0;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
    if (!readAll(fd, buf.data(), n)) return "truncated while reading the payload";
    if (tag) tag->add(std::span<const uint8_t>(buf.data(), n));
    left -= n;
  }
  if (!tag) return "";
  const Sha256Digest expected = tag->finish();
  if (!macEqual(expected, std::span<const uint8_t>(head).subspan(kEntryTagOffset, expected.size())))
    return std::string(kBadTag);
  return "";
}

}  // namespace

void DiskCache::evictIfOverBound() {
  if (evicting_.exchange(true)) return;  // another thread of this cache is scanning already
  struct Done {
    std::atomic<bool>& flag;
    ~Done() { flag.store(false); }
  } done{evicting_};
  const uint64_t before = estimatedBytes_.load();
  DirStream d(dir_);
  if (!d.get()) return;
  DirScan s = scanDirectory(d);
  uint64_t total = s.entryBytes;
  Removed r;
  if (total > maxBytes_) r = evictOldest(d, dir_, std::move(s.entries), total, maxBytes_ / 10 * 9);
  // The estimate restarts from what is left, keeping what other threads wrote meanwhile
  // (unsigned arithmetic wraps back: estimate = before + theirs, now total + theirs).
  estimatedBytes_.fetch_add(total - before);
  if (r.files == 0) return;
  stats_.evicted(r.files);
  stitch::log().info(
      "kernel cache: evicted {} least recently used entries ({} bytes) from {}: {} bytes left "
      "(bound {} bytes, STITCH_CACHE_MAX_MB)",
      r.files, r.bytes, dir_.string(), total, maxBytes_);
}

DiskCache::DiskUsage DiskCache::usage() const {
  DiskUsage u;
  if (!enabled_) return u;
  std::unique_ptr<DirStream> d = openForMaintenance(dir_);
  if (!d) return u;
  const DirScan s = scanDirectory(*d);
  u.entries = s.entries.size();
  u.bytes = s.entryBytes;
  u.temporaries = s.temporaries.size();
  u.temporaryBytes = s.temporaryBytes;
  return u;
}

// A writer whose temporary file goes loses its rename: that entry is not stored (a recompile
// later). The size estimate is not lowered: it errs high, which only brings a scan forward.
DiskCache::Removed DiskCache::clear() {
  Removed r;
  if (!enabled_) return r;
  std::unique_ptr<DirStream> d = openForMaintenance(dir_);
  if (!d) return r;
  const DirScan s = scanDirectory(*d);
  Failures failures;
  for (const std::vector<ScannedFile>* files : {&s.entries, &s.temporaries})
    for (const ScannedFile& f : *files) {
      if (::unlinkat(d->fd(), f.name.c_str(), 0) == 0) {
        ++r.files;
        r.bytes += f.bytes;
      } else if (errno != ENOENT) {  // ENOENT: gone already, which is what was asked
        failures.add(dir_ / f.name, errnoText());
      }
    }
  stitch::log().info("kernel cache: cleared {}: removed {} files ({} bytes)", dir_.string(),
                     r.files, r.bytes);
  failures.check("clear", dir_, fmt::format("removed {} files", r.files));
  return r;
}

DiskCache::PruneResult DiskCache::prune() {
  PruneResult r;
  if (!enabled_) return r;
  std::unique_ptr<DirStream> d = openForMaintenance(dir_);
  if (!d) return r;
  // Tags are verified under this process's key. A key refused is an error (nothing can be
  // judged); no key at all (no fleet key, and this user never wrote here) means the entries are
  // someone else's: their tags are left unchecked rather than every entry removed, and a key is
  // not made here.
  const std::shared_ptr<const CacheSecret> key = secret(/*create=*/false);
  if (!key) {
    std::lock_guard lock(secretMu_);
    if (!secretRefused_.empty())
      throwError(ErrorCode::IO, fmt::format("kernel cache: cannot prune {}: no key to verify its "
                                            "entries with: {}",
                                            dir_.string(), secretRefused_));
    stitch::log().warn(
        "kernel cache: pruning {} without checking the entries' tags: there is no key to check "
        "them with (STITCH_CACHE_KEY is not set, and this user has no key file {} there)",
        dir_.string(), directorySecretName());
  }
  Failures failures;
  const Removed temps = removeStaleTemporaryFiles(&failures.files, &failures.first);
  r.staleTemporaries = temps.files;
  r.freedBytes = temps.bytes;

  DirScan s = scanDirectory(*d);
  std::vector<ScannedFile> intact;
  uint64_t total = 0;
  for (ScannedFile& f : s.entries) {
    // As load() opens entries: a FIFO or device swapped in since the scan must not block or act.
    Fd fd(::openat(d->fd(), f.name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
    struct stat st {};
    if (fd.fd < 0 || ::fstat(fd.fd, &st) != 0) {
      if (errno != ENOENT) {  // ENOENT: gone since the scan
        failures.add(dir_ / f.name, errnoText());
        total += f.bytes;
      }
      continue;
    }
    if (!S_ISREG(st.st_mode) || st.st_dev != f.dev || st.st_ino != f.ino) {
      // Replaced since the scan: not what was scanned; eviction will not touch it either.
      total += f.bytes;
      intact.push_back(std::move(f));
      continue;
    }
    const std::string why =
        entryDefect(fd.fd, f.name, static_cast<uint64_t>(st.st_size), key.get());
    if (why.empty()) {
      total += f.bytes;
      intact.push_back(std::move(f));
    } else if (unlinkIfUnchanged(*d, dir_, f, &failures) == Unlinked::Removed) {
      ++r.corruptEntries;
      r.freedBytes += f.bytes;
      stitch::log().info("kernel cache: removed corrupt entry {}: {}", (dir_ / f.name).string(),
                         why);
    }
  }
  if (total > maxBytes_) {
    const Removed evicted =
        evictOldest(*d, dir_, std::move(intact), total, maxBytes_ / 10 * 9, &failures);
    r.evictedEntries = evicted.files;
    r.freedBytes += evicted.bytes;
    stats_.evicted(evicted.files);
  }
  const std::string done = fmt::format(
      "removed {} stale temporary files, {} corrupt entries, {} least recently used entries ({} "
      "bytes freed; {} bytes of entries left, bound {} bytes)",
      r.staleTemporaries, r.corruptEntries, r.evictedEntries, r.freedBytes, total, maxBytes_);
  stitch::log().info("kernel cache: pruned {}: {}", dir_.string(), done);
  failures.check("prune", dir_, done);
  return r;
}

// ---------------------------------------------------------------------------------------------
// PersistentLayers

std::shared_ptr<RemoteCache> remoteFromEnv() {
  if (auto config = remoteCacheConfigFromEnv()) return RemoteCache::shared(*config);
  return nullptr;
}

PersistentLayers::PersistentLayers(std::unique_ptr<DiskCache> disk,
                                   std::shared_ptr<RemoteCache> remote)
    : disk_(std::move(disk)), remote_(std::move(remote)) {}

PersistentLayers::~PersistentLayers() = default;

std::unique_ptr<PersistentLayers> PersistentLayers::fromEnv() {
  return std::make_unique<PersistentLayers>(DiskCache::fromEnv(), remoteFromEnv());
}

std::shared_ptr<RemoteCache> PersistentLayers::remote() const {
  std::lock_guard lock(remoteMu_);
  return remote_;
}

void PersistentLayers::setRemote(std::shared_ptr<RemoteCache> remote) {
  std::lock_guard lock(remoteMu_);
  if (remote_ == remote) return;
  if (remote_) retiredRemoteStats_ += remote_->stats();
  remote_ = std::move(remote);
}

std::optional<std::vector<uint8_t>> PersistentLayers::load(const CacheKey& key, EntryKind kind) {
  const bool onDisk = disk_ && disk_->enabled();
  if (onDisk)
    if (auto bytes = disk_->load(key, kind)) return bytes;
  std::shared_ptr<RemoteCache> r = remote();
  if (!r) return std::nullopt;
  auto bytes = r->load(key, kind);
  // The next process on this machine finds it on its disk.
  if (bytes && onDisk) disk_->store(key, *bytes, kind);
  return bytes;
}

void PersistentLayers::store(const CacheKey& key, std::span<const uint8_t> payload,
                             EntryKind kind) {
  if (disk_ && disk_->enabled()) disk_->store(key, payload, kind);
  if (std::shared_ptr<RemoteCache> r = remote()) r->store(key, payload, kind);
}

void PersistentLayers::publish(const CacheKey& key, EntryKind kind) {
  std::shared_ptr<RemoteCache> r = remote();
  if (!r || !disk_ || !disk_->enabled()) return;
  if (auto bytes = disk_->load(key, kind)) r->store(key, *bytes, kind);
}

void PersistentLayers::rejected(const CacheKey& key, std::string_view what, std::string_view why) {
  rejected_.corruptEntry();
  stitch::log().warn("kernel cache: ignoring {} {}: {}; building it again", what, describe(key),
                     why);
}

std::string PersistentLayers::describe(const CacheKey& key) const {
  std::string where;
  if (disk_ && disk_->enabled()) where = disk_->pathFor(key).string();
  if (std::shared_ptr<RemoteCache> r = remote())
    where += (where.empty() ? "" : " or ") + r->config().url + " " + r->nameFor(key);
  return where.empty() ? fmt::format("{:016x}", key.hash()) : where;
}

CacheStats PersistentLayers::stats() const {
  CacheStats s = rejected_.snapshot();
  if (disk_) s += disk_->stats();
  std::lock_guard lock(remoteMu_);
  s += retiredRemoteStats_;
  if (remote_) s += remote_->stats();
  return s;
}

}  // namespace stitch::rt
