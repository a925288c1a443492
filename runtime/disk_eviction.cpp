// The disk layer's size bound, eviction and maintenance (design note in disk_cache.h).
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

#include "runtime/disk_cache.h"
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

// The size bound, eviction and maintenance (the note's "Size bound and eviction" and
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

// Whether an entry file's name is the one its stored key gives it (pathFor): only a file copied or
// renamed by hand, or damaged in its header, fails this.
bool namedForKey(std::string_view name, std::string_view canonicalKey) {
  return fmt::format("{:016x}{}", fnv1a64(canonicalKey), kDiskExtension) == name;
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
  if (!namedForKey(name, key)) return "the key in the header does not hash to the file's name";
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

namespace {

// The first part of an entry's key, "name=value" (the note on DiskUsage), from the file's first
// bytes; empty when they cannot be read or are not an entry's.
std::string firstKeyPart(int dirFd, const std::string& name) {
  const int fd = ::openat(dirFd, name.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return {};
  uint8_t head[kDiskHeaderBytes + 256];
  const ssize_t n = ::pread(fd, head, sizeof head, 0);
  ::close(fd);
  if (n < static_cast<ssize_t>(kDiskHeaderBytes) ||
      std::memcmp(head, kDiskMagic.data(), kDiskMagic.size()) != 0)
    return {};
  try {
    CanonicalReader r(std::string_view(reinterpret_cast<const char*>(head) + kDiskHeaderBytes,
                                       static_cast<size_t>(n) - kDiskHeaderBytes));
    if (r.string() != kCanonicalKeyFormat || r.integer<uint64_t>() == 0) return {};
    std::string part = r.string();
    return part + "=" + r.string();
  } catch (const Error&) {
    return {};  // a key longer than what was read, or not a key
  }
}

}  // namespace

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
  for (const ScannedFile& f : s.entries) {
    const std::string kind = firstKeyPart(d->fd(), f.name);
    if (kind == "entry=program") ++u.programs;
    else if (kind == "entry=tuned-program") ++u.tuned;
    else if (kind == "kind=host-profile" || kind == "kind=device-profile" ||
             kind == "kind=cost-calibration")
      ++u.profiles;
  }
  return u;
}

std::vector<DiskCache::VerifiedEntry> DiskCache::verifiedEntries(std::string_view firstPart) {
  std::vector<VerifiedEntry> out;
  if (!enabled_) return out;
  std::unique_ptr<DirStream> d = openForMaintenance(dir_);
  if (!d) return out;
  const std::shared_ptr<const CacheSecret> key = secret(/*create=*/false);
  if (!key) return out;  // nothing here can be verified (and none of it was written by us)
  const DirScan s = scanDirectory(*d);
  for (const ScannedFile& f : s.entries) {
    if (firstKeyPart(d->fd(), f.name) != firstPart || f.bytes > kMaxEntryBytes) continue;
    const Fd fd(::openat(d->fd(), f.name.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (fd.fd < 0 || ::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<uint64_t>(st.st_size) > kMaxEntryBytes)
      continue;
    std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
    EntryHeader h;
    std::string why = !readAll(fd.fd, bytes.data(), bytes.size())
                          ? "it cannot be read whole"
                          : parseEntryHeader(bytes.data(), bytes.size(), h);
    std::optional<std::vector<uint8_t>> payload;
    if (why.empty()) {
      const std::string_view canonical(
          reinterpret_cast<const char*>(bytes.data()) + kDiskHeaderBytes, h.keyBytes);
      if (!namedForKey(f.name, canonical))
        why = "the key in the header does not hash to the file's name";
      else payload = decodeEntry(*key, bytes, canonical, &why);
    }
    if (!payload) {
      stitch::log().debug("kernel cache: skipping {}: {}", (dir_ / f.name).string(), why);
      continue;
    }
    out.push_back(VerifiedEntry{f.name, std::move(*payload)});
  }
  return out;
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

}  // namespace stitch::rt
