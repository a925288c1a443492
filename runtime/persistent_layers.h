// The kernel cache's persistent layers (kernel_cache.h): the disk (disk_cache.h), then the remote
// store (remote_cache.h), behind one call; also where the C API keeps whole-program entries
// (src/driver/program_entry.h).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/cache_key.h"
#include "runtime/cache_stats.h"
#include "runtime/disk_cache.h"

namespace stitch::rt {

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

}  // namespace stitch::rt
