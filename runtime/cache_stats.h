// The kernel cache's statistics (kernel_cache.h): counters per layer, behind stitch_cache_stats_t.
//
// Statistics (CacheStats)
// -----------------------
// memoryHits / memoryMisses per getOrCompile call; diskHits / diskMisses per disk lookup made after
// a memory miss (none when the disk layer is off); diskWrites per entry renamed into place;
// evictions per entry the size bound removed (by store() or prune()); corruptEntries for entries
// rejected on load (by the disk layer or by the loader); compiles and compileSeconds for calls of
// compile(). Each miss is logged at debug level, and the totals when
// a KernelCache is destroyed (KernelCache::logStats() logs them on demand).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/cache_key.h"

namespace stitch::rt {

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

}  // namespace stitch::rt
