// The kernel cache's disk layer (kernel_cache.h): one authenticated file per entry
// (disk_entry.h), written atomically, bounded in size.
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

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/cache_key.h"
#include "runtime/cache_secret.h"
#include "runtime/cache_stats.h"
#include "runtime/disk_entry.h"

namespace stitch::rt {

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
    // The entries by what their key's first part says they are (read from each file's header,
    // not verified: a count for people, never a reason to trust an entry): whole-program entries
    // (src/driver/program_entry.h), autotuning decisions (src/driver/tuning.h), machine profiles
    // (runtime/cpu/host_profile.h, runtime/gpu/device_profile.h) and cost calibrations
    // (runtime/cost_calibration.h); the rest are kernels.
    uint64_t programs = 0;
    uint64_t tuned = 0;
    uint64_t profiles = 0;
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

  // The entries whose key's first part is `firstPart` ("entry=tuned-program", as DiskUsage reads
  // them), each verified as load() verifies its entry (header, sizes, the key against the file's
  // name, the tag under this cache's key), for tools that read every entry of a kind (`stitch
  // tune fit`). An entry that fails is skipped (logged at debug), never removed, and recency is
  // left alone. Nothing without a key to verify with (none is made). `name` is the file's.
  struct VerifiedEntry {
    std::string name;
    std::vector<uint8_t> payload;
  };
  std::vector<VerifiedEntry> verifiedEntries(std::string_view firstPart);

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

}  // namespace stitch::rt
