// The kernel cache: compiled kernels keyed by everything that went into compiling them.
//
// Why
// ---
// A program is shape-polymorphic: the first run with a new input signature plans, generates and
// compiles concrete kernels (NVRTC: ~30 ms a kernel, LLVM ORC: ~10 ms), every later run with that
// signature must cost a few microseconds of host time, and a new process should not pay the
// compile again. So compiled artifacts are cached twice: in memory for this process, on disk
// across processes and runs (tinygrad's on-disk compile cache, nvFuser's FusionExecutorCache).
//
// The key (CacheKey)
// ------------------
// Everything the compiled bytes (and what load() makes of them) depend on, and nothing left out.
// A key is a list of named parts, each canonical bytes, built by one pure function per backend:
//   - the kernel program, serialized field by field (lower/serialize.h: complete by
//     construction, every field of every struct, checked at compile time). Not a printer's
//     text, and not a hash of it: issue 11's wrong answers came from a key built from
//     printProgram, which did not print the reduction kind;
//   - the target, attribute by attribute (host: triple, CPU name, the full feature string, LLVM
//     version; GPU: every GpuTarget field the scheduler and emitter read);
//   - the compile options (host: opt level, vector math library; GPU: the emit options, the
//     compiler's name, version and command-line options, a digest of the device headers);
//   - the library version (STITCH_VERSION_STRING) and the build's code identity (a hash of the
//     sources of src/, runtime/ and kernels_templates/, support/code_identity.h): a new release,
//     or a development build whose lowering or emitters changed, may emit different code for the
//     same program, and old entries must not be reused by it.
// The builders are hostKernelKey and gpuKernelKey (src/target/keys.h: the compile driver keys
// each artifact it emits; backends only read the keys); tests/lower/test_program_key.cpp mutates
// every program field and every target attribute and option one at a time and checks that the key
// changes. CacheKey::canonical() concatenates the parts length-prefixed (no choice of contents can
// make two keys serialize alike). It is the identity: the memory layer's map key and the bytes
// stored in every file header, compared byte for byte on load. CacheKey::hash() is FNV-1a 64 of it
// (the same on every machine, compiler and run, which std::hash promises not); it only names the
// file, so a hash collision reads as a miss, never as another kernel.
//
// Three layers (KernelCache::getOrCompile)
// ----------------------------------------
//   memory hit                -> the loaded value (a shared_ptr; eviction never frees a kernel
//                                someone still holds)
//   else disk hit             -> load(bytes) of an entry whose tag verified; if load throws, the
//                                entry is counted corrupt, compiled again and rewritten
//   else remote hit           -> the same, and the verified bytes are written to the disk layer
//                                too (runtime/remote_cache.h: Redis, STITCH_REMOTE_CACHE); a value
//                                that does not verify is a miss and reaches no disk
//   else                      -> compile() -> bytes, store to disk and remote, load(bytes), keep
//                                in memory.
// The disk and remote layers are PersistentLayers, which the C API also keeps whole-program
// entries in (src/driver/program_entry.h: a program's artifact per input signature).
// The memory layer (LruCache) is bounded by a number of entries and evicts the least recently
// used one (a get counts as a use). The disk layer is bounded by a size (STITCH_CACHE_MAX_MB, 4 GiB
// by default) and drops its least recently used entries past it ("Size bound and eviction"
// below); `rm -rf` on the directory is always safe.
//
// On-disk format (DiskCache), one file per entry: DIR/<hash as 16 lowercase hex>.stitchk
//   offset  size  field (integers little-endian)
//        0     8  magic "STITCHK1"
//        8     4  format version (kDiskFormatVersion, 3)
//       12     4  K: length of the canonical key
//       16     8  P: payload size in bytes
//       24    32  HMAC-SHA-256 tag of bytes 0..23, then the key, then the payload
//       56     K  the canonical key (CacheKey::canonical(), bytes)
//     56+K     P  the payload (the compiled bytes, opaque to the cache)
// The file is exactly 56 + K + P bytes long. Only names ending in ".stitchk" that are 16 hex
// digits long are ever read; any other file in the directory is ignored (the key file of
// "Authentication" below, ".stitch-key-<uid>", is the only other file the cache makes there).
// Format 2 had an FNV-1a checksum where the tag is: its entries read as another version's, misses
// that are rewritten.
//
// Authentication
// --------------
// An entry is native code, so it is not enough that it be intact: it must be ours. The tag is an
// HMAC-SHA-256 (support/sha256.h) under a secret key (runtime/cache_secret.h, which also holds the
// threat model: who may write the directory and the Redis server, and what each can and cannot
// do): the fleet key (STITCH_CACHE_KEY or STITCH_CACHE_KEY_FILE) when the environment names one,
// else this user's key of the directory, DIR/.stitch-key-<uid> (mode 0600, made on the first
// store). It covers every byte of the entry but itself, the full canonical key included, so an
// entry can be neither changed nor moved to another key's name without the key; it is compared
// in constant time. A tag that does not verify is a corrupt entry like any other (below): a
// damaged file and a forged one are told apart by nobody, and both are rebuilt. A remote value is
// the same bytes under the fleet key (runtime/remote_cache.h). Cost: the tag is computed over the
// whole entry on every load and store, at about 340 MB/s of one core (portable code, measured on
// the development VM's EPYC in CPU time): 41 us for a typical host kernel's entry of 14 KB, 0.3 ms
// for 100 KB, against the compile of 10-100 ms a hit saves.
//
// Atomicity and crashes
// ---------------------
// store() writes a temporary file in the same directory (".tmp-<hash>-<pid>-<tid>-<n>.stitchk~",
// opened O_EXCL so no two writers share one), fsyncs it, then rename()s it over the final name.
// rename() within a directory is atomic on POSIX, so a reader opens either the old complete file
// or the new complete one, never a half-written file. A writer killed between the two leaves its
// temporary file behind; it is never read, and the first store() of each DiskCache removes the
// stale ones: a temporary file is stale when it is older than kStaleTempSeconds (five minutes:
// no write takes that long, so this holds whoever wrote it), or when the process id in its name
// does not exist on this host (kill(pid, 0) fails with ESRCH) and it is older than
// kDeadWriterGraceSeconds (a minute: a writer in another pid namespace or on another host
// sharing the directory has a pid that means nothing here, but its write has finished long
// before). A live writer's fresh file is never touched; if a writer far slower than that lost its
// file anyway, its rename fails and the entry is not stored (a recompile later, never a wrong
// entry).
//
// Not regular files
// -----------------
// Entries are opened O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC and accepted only when fstat says they
// are regular files: a FIFO named like an entry would otherwise block the open forever, a
// device could do anything, and a symbolic link is not an entry we wrote. Anything else is a miss
// (logged at warn), and the store() that follows renames a good entry over it.
//
// Corruption
// ----------
// load() never trusts an entry: a short file, a wrong magic or version, a size that does not add
// up, another key in the header (a collision or a file copied from elsewhere) or a tag that does
// not verify each make it a miss, counted in corruptEntries and logged at warn; the file is then
// deleted (only if it is still the same file: another process may have replaced it with a good one
// meanwhile), and the recompile that follows writes a good one. A missing entry is a miss logged
// at debug. Without a key to verify with (no key file yet, or one refused) an entry is a miss
// and is left alone.
//
// Size bound and eviction
// -----------------------
// The entries of a directory hold at most about STITCH_CACHE_MAX_MB MiB, counted as their file
// sizes (temporary files are not counted: they are renamed or removed within seconds). Recency is
// an entry's mtime, which every process sharing the directory sees without a lock: store() writes
// a fresh file, and a disk hit refreshes the mtime (futimens on the descriptor load() already has
// open; if that fails, e.g. on a read-only file system, the entry only looks older). Each
// DiskCache keeps an estimate of the entries' bytes: one scan at its first store() (with the sweep
// of stale temporary files), plus what it writes. When the estimate passes the bound, store()
// scans the directory and removes the entries with the oldest mtimes until the rest hold at most
// 90% of the bound (so a directory near the bound is not scanned at every store); the estimate
// then restarts from what the scan left. Only regular files named like entries are counted or
// removed, never anything else in the directory. Before removing one, eviction checks that its
// name still holds the file the scan saw (same device, inode and mtime): another process may
// have just renamed a fresh entry there, or hit it. A narrow race remains between that check and
// the unlink; losing an entry, like any eviction, costs a recompile, never a wrong answer. The
// bound is approximate: each process counts only its own writes since its last scan, so
// processes writing at once may pass it by what they write before one of them scans.
//
// Maintenance (`stitch cache stats|clear|prune`; stitch_cache_dir_* in the C API)
// -------------------------------------------------------------------------------
// usage() counts the entries and the temporary files. clear() removes every entry and every
// temporary file (regular files with our names) and nothing else; the key file stays. prune()
// removes the stale temporary files and the entries that fail the checks a lookup's key is not
// needed for (magic, format version, sizes adding up, the stored key's hash against the file's
// name, the tag under this process's key: so run it as the user, with the fleet key, that uses
// the directory; with no key at all, neither a fleet key nor a key file of this user, the tags are
// left unchecked, with a warning, rather than every entry removed), then evicts as store() does
// when the entries are past the bound. Both do all
// they can, then fail with an IO error naming what they could not do (a file they cannot remove
// or read, a key they cannot have): a read-only directory is a failure to say, not "removed 0".
//
// Failures
// --------
// The cache is an optimization: failing to create the directory or to write an entry is logged
// (warn the first time for a DiskCache, debug after that) and ignored, never thrown, and the
// program goes on with the memory layer. A write past the process's file-size limit
// (RLIMIT_FSIZE) is one of those failures: SIGXFSZ, whose default action ends the process, is
// blocked on the writing thread for the write and the instance it raised consumed
// (support/signal_guard.h: the process's disposition is never changed), so the write fails with
// EFBIG, the temporary file is removed and the run goes on. Only a bad STITCH_CACHE,
// STITCH_CACHE_MAX_MB, STITCH_CACHE_KEY or STITCH_CACHE_KEY_FILE value is an error.
//
// Concurrency
// -----------
// LruCache and the statistics are guarded by a mutex / atomics; KernelCache is safe to call from
// any number of threads. Callers racing on one key do not all compile: the first registers the key
// as in flight and the others wait on its std::shared_future (if that compile throws, they get the
// same exception; the next call tries again). No lock is held while compiling or loading. Across
// processes nothing is locked: two processes may both compile the same key and both rename their
// file into place; both files are complete and valid, and the last rename wins.
//
// Statistics (CacheStats)
// -----------------------
// memoryHits / memoryMisses per getOrCompile call; diskHits / diskMisses per disk lookup made after
// a memory miss (none when the disk layer is off); diskWrites per entry renamed into place;
// evictions per entry the size bound removed (by store() or prune()); corruptEntries for entries
// rejected on load (by the disk layer or by the loader); compiles and compileSeconds for calls of
// compile(). Each miss is logged at debug level, and the totals when
// a KernelCache is destroyed (KernelCache::logStats() logs them on demand).
//
// Environment (DESIGN.md, "Environment toggles")
// ----------------------------------------------
// STITCH_CACHE: 1 or unset enables the disk layer, 0 disables it, anything else is an
// InvalidArgument error listing 0, 1. STITCH_CACHE_DIR: the directory; if unset,
// $XDG_CACHE_HOME/stitch (when XDG_CACHE_HOME is an absolute path), else $HOME/.cache/stitch; with
// none of them the disk layer is off (a warning says so). The directory is created (mkdir -p) on
// the first store. STITCH_CACHE_MAX_MB: the size bound in MiB, an integer from 1 to
// kMaxDiskCacheMaxMB (the largest whose bytes fit 64 bits); unset, kDefaultDiskCacheMaxMB
// (4 GiB); anything else is an InvalidArgument error naming the valid range. STITCH_CACHE_KEY or
// STITCH_CACHE_KEY_FILE: the fleet key ("Authentication"; runtime/cache_secret.h), whose bad
// values are InvalidArgument errors naming the variable, never the secret.
//
// Not done: the bound counts file sizes, not the blocks a file system allocates for them (up to a
// block more per entry).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/cache_secret.h"
#include "runtime/support/code_identity.h"
#include "runtime/support/error.h"
#include "runtime/support/hash.h"
#include "runtime/support/logging.h"

namespace stitch::rt {

// The identity of a compiled artifact: named parts, each the canonical bytes of one thing the
// compiled code depends on (the kernel program's serialization, each target attribute, the
// options, the compiler's version, ...), in the order the key builder adds them, then the library
// version. Builders: hostKernelKey and gpuKernelKey (src/target/keys.h).
struct CacheKey {
  struct Part {
    std::string name;   // what the bytes are ("program", "triple", ...); part of the identity
    std::string bytes;  // canonical bytes (may hold any byte, NUL included)
    bool operator==(const Part&) const = default;
  };
  std::vector<Part> parts;
  // The release and the build's code identity: a new release, or a development build whose
  // lowering, emitters or device templates changed, may emit other code for the same parts.
  std::string version = std::string(STITCH_VERSION_STRING) + "+" + codeIdentity();

  // Appends a part; returns *this for chaining.
  CacheKey& add(std::string name, std::string bytes);

  // The full identity as bytes: kCanonicalKeyFormat, then every part and the version, each
  // length-prefixed (so no choice of contents can make two different keys serialize alike). The
  // memory layer's map key and the disk entry's header; a change of its format must come with a
  // new kCanonicalKeyFormat (tests pin the hash of a fixed key to catch accidental changes).
  std::string canonical() const;
  // FNV-1a 64 of canonical(): names the disk file, nothing more.
  uint64_t hash() const;
};

// The first bytes of every canonical key; bump it when canonical() or a key builder changes.
inline constexpr std::string_view kCanonicalKeyFormat = "stitch-kernel-key/2\n";

// What a persistent entry holds. The layers store and verify every kind alike, but their hit, miss
// and write counters (CacheStats, stitch_cache_stats_t) count kernels only, so that "loaded from
// the disk cache" means kernels: a program's entry is counted by its program's warm starts
// (src/driver/program_entry.h), and a machine profile (host_profile.h, device_profile.h) once per
// process. Corrupt entries and remote errors count for every kind: they are the layers' health.
enum class EntryKind { Kernel, Program, MachineProfile };

struct CacheStats {
  uint64_t memoryHits = 0;
  uint64_t memoryMisses = 0;
  uint64_t diskHits = 0;
  uint64_t diskMisses = 0;
  uint64_t diskWrites = 0;
  uint64_t corruptEntries = 0;
  uint64_t evictions = 0;  // disk entries removed by the size bound
  uint64_t compiles = 0;
  double compileSeconds = 0;
  // Shape classes: the compiled codes that read size arguments, and the distinct sizes they
  // served in all (classSizes / shapeClasses: signatures a class kernel served on average).
  uint64_t shapeClasses = 0;
  uint64_t classSizes = 0;
  // The remote layer (runtime/remote_cache.h), asked after a disk miss: hits (verified entries,
  // written to the disk layer too), misses, entries written, and operations that failed (a
  // timeout, a refused connection, an error reply; the run went on without the layer).
  uint64_t remoteHits = 0;
  uint64_t remoteMisses = 0;
  uint64_t remoteWrites = 0;
  uint64_t remoteErrors = 0;

  CacheStats& operator+=(const CacheStats& o);
  std::string toString() const;
};

// Thread-safe counters behind a CacheStats.
class CacheStatsCounter {
 public:
  void memoryHit() { memoryHits_.fetch_add(1, std::memory_order_relaxed); }
  void memoryMiss() { memoryMisses_.fetch_add(1, std::memory_order_relaxed); }
  void diskHit() { diskHits_.fetch_add(1, std::memory_order_relaxed); }
  void diskMiss() { diskMisses_.fetch_add(1, std::memory_order_relaxed); }
  void diskWrite() { diskWrites_.fetch_add(1, std::memory_order_relaxed); }
  void corruptEntry() { corruptEntries_.fetch_add(1, std::memory_order_relaxed); }
  void evicted(uint64_t n) { evictions_.fetch_add(n, std::memory_order_relaxed); }
  void remoteHit() { remoteHits_.fetch_add(1, std::memory_order_relaxed); }
  void remoteMiss() { remoteMisses_.fetch_add(1, std::memory_order_relaxed); }
  void remoteWrite() { remoteWrites_.fetch_add(1, std::memory_order_relaxed); }
  void remoteError() { remoteErrors_.fetch_add(1, std::memory_order_relaxed); }
  void compiled(std::chrono::nanoseconds took);
  CacheStats snapshot() const;
  void reset();

 private:
  std::atomic<uint64_t> memoryHits_{0}, memoryMisses_{0}, diskHits_{0}, diskMisses_{0},
      diskWrites_{0}, corruptEntries_{0}, evictions_{0}, compiles_{0}, compileNanos_{0},
      remoteHits_{0}, remoteMisses_{0}, remoteWrites_{0}, remoteErrors_{0};
};

// The shape classes a backend's kernels served (CacheStats::shapeClasses, classSizes): the
// distinct size arguments each code with arguments was asked for, by canonical key. Thread-safe.
class ShapeClassCounter {
 public:
  void note(const CacheKey& key, const std::vector<int64_t>& sizes);
  void addTo(CacheStats& s) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::vector<std::vector<int64_t>>> sizes_;
};

// A bounded least-recently-used map from canonical keys (bytes) to shared values. Thread-safe.
// Capacity 0 keeps nothing.
template <class V>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity) {}

  // The value, marked most recently used; null when absent.
  std::shared_ptr<V> get(const std::string& key) {
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }

  // Inserts or replaces, as most recently used; evicts the least recently used beyond capacity.
  void put(const std::string& key, std::shared_ptr<V> value) {
    std::lock_guard lock(mu_);
    if (capacity_ == 0) return;
    if (auto it = index_.find(key); it != index_.end()) {
      it->second->second = std::move(value);
      order_.splice(order_.begin(), order_, it->second);
      return;
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    while (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }

  size_t size() const {
    std::lock_guard lock(mu_);
    return order_.size();
  }
  size_t capacity() const { return capacity_; }

  void clear() {
    std::lock_guard lock(mu_);
    index_.clear();
    order_.clear();
  }

  // The keys, most recently used first (does not count as a use).
  std::vector<std::string> keys() const {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    out.reserve(order_.size());
    for (const auto& [k, v] : order_) out.push_back(k);
    return out;
  }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<V>>;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<std::string, typename std::list<Entry>::iterator> index_;
};

inline constexpr std::string_view kDiskMagic = "STITCHK1";
inline constexpr uint32_t kDiskFormatVersion = 3;
inline constexpr size_t kDiskHeaderBytes = 56;
inline constexpr size_t kEntryTagOffset = 24;  // the HMAC-SHA-256 tag: header bytes 24..55
inline constexpr std::string_view kDiskExtension = ".stitchk";
// A temporary file older than this is stale whatever its name says (no write takes five minutes).
inline constexpr int64_t kStaleTempSeconds = 300;
// A temporary file whose writer's process id does not exist on this host is stale after this
// long (the grace covers a writer in another pid namespace or on another host sharing the
// directory, whose id means nothing here: its write has long finished by then).
inline constexpr int64_t kDeadWriterGraceSeconds = 60;
// The disk layer's size bound when STITCH_CACHE_MAX_MB is unset (4 GiB), and the largest value it
// may take (its bytes must fit 64 bits).
inline constexpr uint64_t kDefaultDiskCacheMaxMB = 4096;
inline constexpr uint64_t kMaxDiskCacheMaxMB = (uint64_t{1} << 44) - 1;

// The entry format of the persistent layers (the table in the note above; a remote value is the
// same bytes as a disk file): the header with its tag under `secret`, the full canonical key, the
// payload.
std::vector<uint8_t> encodeEntry(const CacheSecret& secret, std::string_view canonicalKey,
                                 std::span<const uint8_t> payload);
// The payload of `bytes` when they are a complete entry for `canonicalKey` whose tag verifies
// under `secret`; otherwise nullopt, with *why (if not null) saying what is wrong: short, wrong
// magic or format version (another release's entry), sizes that do not add up, another key, a tag
// that does not verify (damaged, written under another key, or forged).
std::optional<std::vector<uint8_t>> decodeEntry(const CacheSecret& secret,
                                                std::span<const uint8_t> bytes,
                                                std::string_view canonicalKey, std::string* why);

// The on-disk layer: one authenticated file per entry, written atomically. Thread- and
// process-safe. Never throws from load() or store().
class DiskCache {
 public:
  // An enabled cache in `dir` (created on the first store) whose entries are kept to about
  // maxBytes ("Size bound and eviction" in the note above), authenticated with `fleetSecret`, or
  // with this user's key of the directory when it is null ("Authentication").
  explicit DiskCache(std::filesystem::path dir, uint64_t maxBytes = kDefaultDiskCacheMaxMB << 20,
                     std::shared_ptr<const CacheSecret> fleetSecret = nullptr);
  // A disabled cache: load() always misses (uncounted), store() does nothing.
  static std::unique_ptr<DiskCache> disabled();
  // From STITCH_CACHE, STITCH_CACHE_DIR / XDG_CACHE_HOME / HOME, STITCH_CACHE_MAX_MB and the
  // fleet key (see the note above). Throws InvalidArgument when STITCH_CACHE is not 0 or 1,
  // STITCH_CACHE_MAX_MB not an integer from 1 to kMaxDiskCacheMaxMB, or the fleet key's
  // variables are bad (fleetSecretFromEnv).
  static std::unique_ptr<DiskCache> fromEnv();
  // The size bound STITCH_CACHE_MAX_MB sets, in bytes (kDefaultDiskCacheMaxMB MiB when unset);
  // throws InvalidArgument on a bad value.
  static uint64_t maxBytesFromEnv();
  // Whether STITCH_CACHE enables the disk layer; throws InvalidArgument on a bad value.
  static bool enabledByEnv();
  // The directory the environment names, or nullopt when none can be found.
  static std::optional<std::filesystem::path> directoryFromEnv();

  bool enabled() const { return enabled_; }
  const std::filesystem::path& dir() const { return dir_; }
  uint64_t maxBytes() const { return maxBytes_; }
  // DIR/<16 hex digits of key.hash()>.stitchk
  std::filesystem::path pathFor(const CacheKey& key) const;

  // The payload stored for key, or nullopt when missing or not trustworthy (the bad file is
  // removed, counted and logged). Hits and misses are counted for kernels (EntryKind).
  std::optional<std::vector<uint8_t>> load(const CacheKey& key, EntryKind kind = EntryKind::Kernel);
  // Writes the entry atomically; failures are logged and ignored.
  void store(const CacheKey& key, std::span<const uint8_t> payload,
             EntryKind kind = EntryKind::Kernel);

  // Removes the temporary files of writers that died before renaming them (the rule is in the
  // note above, "Atomicity and crashes"); returns how many. store() runs it once per DiskCache.
  size_t removeStaleTemporaries();

  // Maintenance, for `stitch cache` (the note above, "Maintenance"). These act on the directory
  // as it is now, whoever wrote it; on a disabled cache they find nothing and do nothing. A
  // directory that does not exist yet is empty; one that cannot be read is an IO error.
  struct DiskUsage {
    uint64_t entries = 0;      // regular files named <16 lowercase hex>.stitchk
    uint64_t bytes = 0;        // their sizes
    uint64_t temporaries = 0;  // store()'s temporary files, in progress or left by crashes
    uint64_t temporaryBytes = 0;
  };
  DiskUsage usage() const;
  struct Removed {
    uint64_t files = 0;
    uint64_t bytes = 0;
  };
  // Removes every entry and every temporary file, nothing else.
  Removed clear();
  struct PruneResult {
    uint64_t staleTemporaries = 0;  // temporary files of crashed writers
    uint64_t corruptEntries = 0;    // entries failing the checks that need no key
    uint64_t evictedEntries = 0;    // least recently used entries past the size bound
    uint64_t freedBytes = 0;        // the sizes of all the files removed
  };
  // Removes stale temporary files and corrupt entries (a tag that does not verify under this
  // cache's key included), then evicts to the size bound. When a file cannot be removed or read,
  // or the key cannot be had, throws IO after doing the rest (clear() likewise).
  PruneResult prune();

  CacheStats stats() const { return stats_.snapshot(); }
  void resetStats() { stats_.reset(); }

  // The key this cache's entries are authenticated with: the fleet's, else this user's key of the
  // directory, made when `create` is set and there is none yet (the directory is not created).
  // Null when there is none, or it cannot be made or trusted (warned about once).
  std::shared_ptr<const CacheSecret> secret(bool create = true);

 private:
  DiskCache() = default;
  void writeFailed(const std::string& what);
  void rejectCorrupt(const std::filesystem::path& path, const std::string& why, uint64_t dev,
                     uint64_t ino);
  // Counts in *failures (if not null) the files it could not remove, and names the first in
  // *firstFailure.
  Removed removeStaleTemporaryFiles(uint64_t* failures = nullptr,
                                    std::string* firstFailure = nullptr);
  // Scans the directory and evicts to 90% of the bound if its entries are past it (store()
  // calls it when its estimate is); resets the estimate to what is left.
  void evictIfOverBound();

  bool enabled_ = false;
  std::filesystem::path dir_;
  CacheStatsCounter stats_;
  std::atomic<bool> warnedWrite_{false};
  std::atomic<bool> swept_{false};
  uint64_t maxBytes_ = kDefaultDiskCacheMaxMB << 20;
  // The entries' bytes as this DiskCache believes them: a scan, plus what it wrote since.
  std::atomic<uint64_t> estimatedBytes_{0};
  std::atomic<bool> evicting_{false};  // one scan at a time per DiskCache
  // The key: the fleet's, given; or this user's key of the directory, read or made on first use.
  std::shared_ptr<const CacheSecret> fleetSecret_;
  std::mutex secretMu_;
  std::shared_ptr<const CacheSecret> directorySecret_;
  std::string secretRefused_;  // why the directory's key was refused ("" while it was not)
};

class RemoteCache;  // runtime/remote_cache.h

// The remote layer STITCH_REMOTE_CACHE names (shared by every cache of the process that names the
// same server), or null. Throws InvalidArgument for a bad value.
std::shared_ptr<RemoteCache> remoteFromEnv();

// The layers that outlive a process, behind the memory layer: the disk, then the remote store
// (runtime/remote_cache.h). Payloads come back verified (decodeEntry); neither layer ever throws
// or fails the caller. Thread-safe.
class PersistentLayers {
 public:
  // disk may be null (none); remote may be null (none; setRemote may add one later).
  PersistentLayers(std::unique_ptr<DiskCache> disk, std::shared_ptr<RemoteCache> remote);
  ~PersistentLayers();
  // Disk layer from the environment, remote layer from the environment
  // (STITCH_REMOTE_CACHE). Throws InvalidArgument for a bad value of either.
  static std::unique_ptr<PersistentLayers> fromEnv();

  // The payload stored for key: the disk's, else the remote's (written to the disk as well, so
  // the next process on this machine finds it there). nullopt when neither has it.
  std::optional<std::vector<uint8_t>> load(const CacheKey& key, EntryKind kind = EntryKind::Kernel);
  // Writes the entry to the disk and to the remote store.
  void store(const CacheKey& key, std::span<const uint8_t> payload,
             EntryKind kind = EntryKind::Kernel);
  // Copies the disk's entry of key to the remote store (for entries written to the disk by
  // others, such as a machine profile's measurement); nothing when either layer is missing.
  void publish(const CacheKey& key, EntryKind kind);

  DiskCache* disk() { return disk_.get(); }
  std::shared_ptr<RemoteCache> remote() const;
  // Replaces the remote layer (null: none). Lookups under way finish with the one they had.
  void setRemote(std::shared_ptr<RemoteCache> remote);
  // Where an entry of key lives, for messages ("/dir/0123....stitchk", "redis ... key").
  std::string describe(const CacheKey& key) const;
  // A verified entry its caller could not use (a program entry whose structure is wrong,
  // src/driver/program_entry.h): logged at warn and counted corrupt, like an entry that fails
  // verification; the caller rebuilds it and store() overwrites it.
  void rejected(const CacheKey& key, std::string_view what, std::string_view why);
  // The disk layer's and the remote layer's counters, and the entries rejected().
  CacheStats stats() const;

 private:
  std::unique_ptr<DiskCache> disk_;
  CacheStatsCounter rejected_;
  mutable std::mutex remoteMu_;
  std::shared_ptr<RemoteCache> remote_;
  // Remote layers replaced by setRemote keep counting toward stats().
  CacheStats retiredRemoteStats_;
};

// The memory layer over the persistent ones, behind one call. V is whatever load() makes of the
// bytes (e.g. a loaded module).
template <class V>
class KernelCache {
 public:
  // disk may be null (memory only); remote may be null (none).
  KernelCache(size_t memoryCapacity, std::unique_ptr<DiskCache> disk,
              std::shared_ptr<RemoteCache> remote = nullptr)
      : memory_(memoryCapacity), layers_(std::move(disk), std::move(remote)) {
    // The destructor logs: the logger (a function-local static) must be made first, so that it
    // is destroyed after a process-wide cache (statics die in reverse order of construction).
    (void)log();
  }
  // Memory layer of the given capacity, disk and remote layers from the environment.
  static std::unique_ptr<KernelCache> fromEnv(size_t memoryCapacity) {
    return std::make_unique<KernelCache>(memoryCapacity, DiskCache::fromEnv(), remoteFromEnv());
  }
  ~KernelCache() {
    try {
      logStats();
    } catch (...) {
      // Logging must not throw out of a destructor.
    }
  }
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // compile: () -> std::vector<uint8_t>; load: (const std::vector<uint8_t>&) -> std::shared_ptr<V>.
  // Exceptions of compile(), and of load() on freshly compiled bytes, reach the caller.
  template <class Compile, class Load>
  std::shared_ptr<V> getOrCompile(const CacheKey& key, Compile&& compile, Load&& load) {
    const std::string canon = key.canonical();
    if (auto v = memory_.get(canon)) {
      stats_.memoryHit();
      return v;
    }
    std::shared_ptr<InFlight> flight;
    bool leader = false;
    {
      std::lock_guard lock(inflightMu_);
      // Checked again under the lock: a leader publishes to memory before it leaves the map.
      if (auto v = memory_.get(canon)) {
        stats_.memoryHit();
        return v;
      }
      stats_.memoryMiss();
      auto it = inflight_.find(canon);
      if (it != inflight_.end()) {
        flight = it->second;
      } else {
        flight = std::make_shared<InFlight>();
        flight->future = flight->promise.get_future().share();
        inflight_.emplace(canon, flight);
        leader = true;
      }
    }
    if (!leader) return flight->future.get();  // rethrows the leader's failure

    std::shared_ptr<V> value;
    try {
      value = produce(key, compile, load);
      memory_.put(canon, value);
    } catch (...) {
      flight->promise.set_exception(std::current_exception());
      finish(canon);
      throw;
    }
    flight->promise.set_value(value);
    finish(canon);
    return value;
  }

  CacheStats stats() const {
    CacheStats s = stats_.snapshot();
    s += layers_.stats();
    return s;
  }
  void logStats() const { stitch::log().debug("kernel cache: {}", stats().toString()); }

  LruCache<V>& memory() { return memory_; }
  DiskCache* disk() { return layers_.disk(); }
  PersistentLayers& layers() { return layers_; }

 private:
  struct InFlight {
    std::promise<std::shared_ptr<V>> promise;
    std::shared_future<std::shared_ptr<V>> future;
  };

  void finish(const std::string& canon) {
    std::lock_guard lock(inflightMu_);
    inflight_.erase(canon);
  }

  template <class Compile, class Load>
  std::shared_ptr<V> produce(const CacheKey& key, Compile& compile, Load& load) {
    if (auto bytes = layers_.load(key)) {
      std::string why;
      try {
        if (auto v = load(*bytes)) return v;
        why = "the loader returned nothing";
      } catch (const std::exception& e) {
        why = e.what();
      } catch (...) {
        why = "the loader threw";
      }
      stats_.corruptEntry();
      stitch::log().warn("kernel cache: entry {} could not be loaded ({}); compiling again",
                         layers_.describe(key), why);
    }
    auto t0 = std::chrono::steady_clock::now();
    std::vector<uint8_t> bytes = compile();
    auto took = std::chrono::steady_clock::now() - t0;
    stats_.compiled(std::chrono::duration_cast<std::chrono::nanoseconds>(took));
    stitch::log().debug("kernel cache: compiled {:016x} in {:.3f} ms ({} bytes)", key.hash(),
                        std::chrono::duration<double, std::milli>(took).count(), bytes.size());
    layers_.store(key, bytes);
    std::shared_ptr<V> v = load(std::as_const(bytes));
    if (!v) {
      throwError(ErrorCode::Internal,
                 fmt::format("kernel cache: loading freshly compiled bytes for {:016x} gave "
                             "nothing",
                             key.hash()));
    }
    return v;
  }

  LruCache<V> memory_;
  PersistentLayers layers_;
  CacheStatsCounter stats_;
  std::mutex inflightMu_;
  std::unordered_map<std::string, std::shared_ptr<InFlight>> inflight_;
};

}  // namespace stitch::rt
