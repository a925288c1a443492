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
// in disk_cache.h); `rm -rf` on the directory is always safe.
//
// The modules: the key (cache_key.h), the statistics (cache_stats.h), the memory layer
// (lru_cache.h), the entry format (disk_entry.h), the disk layer (disk_cache.h: lookups and stores
// in disk_cache.cpp, the size bound, eviction and maintenance in disk_eviction.cpp), the remote
// layer (remote_cache.h), the persistent layers together (persistent_layers.h), and this file,
// which puts the memory layer over them.
//
// Concurrency
// -----------
// LruCache and the statistics are guarded by a mutex / atomics; KernelCache is safe to call from
// any number of threads. Callers racing on one key do not all compile: the first registers the key
// as in flight and the others wait on its std::shared_future (if that compile throws, they get the
// same exception; the next call tries again). No lock is held while compiling or loading. Across
// processes nothing is locked: two processes may both compile the same key and both rename their
// file into place; both files are complete and valid, and the last rename wins.
#pragma once

#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/cache_key.h"
#include "runtime/cache_stats.h"
#include "runtime/lru_cache.h"
#include "runtime/persistent_layers.h"
#include "runtime/support/error.h"
#include "runtime/support/logging.h"

namespace stitch::rt {

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
