// The CPU backend's arena: the memory a program's intermediates live in between kernels.
//
// Design. One allocation, carved into slots whose sizes come from the slot plan (assignSlots in
// executor.h); each slot starts on a 64-byte boundary (a cache line, and the widest vector load)
// and takes at least 64 bytes, so every slot has its own non-null address even when empty. The
// arena keeps its memory across runs: preparing it again for the same or smaller sizes only
// recomputes offsets (no heap allocation once its offset table has grown). When a new input
// signature needs more, it frees the old block and allocates a bigger one (half as much again as
// before, at least, so a slowly growing shape does not reallocate every time) and pre-faults it
// with memset once: a fresh page faults on first touch (~80 ms per 32 MB here), which would
// otherwise land inside the first kernels, on every worker, every time the memory is new.
// Contents are not kept across prepare() calls that grow: intermediates live for one run.
//
// An arena is used by one run at a time. Programs run concurrently, so a program owns an
// ArenaPool and each run leases an arena from it; with one caller thread the pool holds one
// arena, with k concurrent callers at most k.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace stitch::rt::cpu {

class Arena {
 public:
  static constexpr size_t kAlignment = 64;

  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Lays out one slot per entry of slotBytes (bytes, >= 0), growing the memory if needed. Throws
  // OutOfMemory when the memory cannot be had, InvalidArgument for a negative size.
  void prepare(std::span<const int64_t> slotBytes);

  int numSlots() const { return static_cast<int>(offsets_.size()); }
  // The start of slot i (64-byte aligned); valid until the next prepare().
  void* slot(int i) const;

  size_t capacity() const { return capacity_; }
  // How many times the memory was (re)allocated: constant in steady state.
  int64_t allocations() const { return allocations_; }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte[], Free> base_;
  size_t capacity_ = 0;
  int64_t allocations_ = 0;
  std::vector<size_t> offsets_;
};

// Arenas for concurrent runs of one program. acquire() hands out an idle arena (the one released
// most recently, whose memory is already grown and warm in cache) or makes a new one; the lease
// gives it back when destroyed. Idle arenas are kept until the pool is destroyed.
//
// One idle arena sits in an atomic slot, taken and given back with one atomic exchange each: a
// program run by one thread at a time (the common case, and the whole of a small run's host
// time is a few hundred nanoseconds) never takes the mutex. Further idle arenas, from runs that
// overlapped, wait in the mutex-guarded list.
class ArenaPool {
 public:
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept : pool_(o.pool_), arena_(std::move(o.arena_)) { o.pool_ = nullptr; }
    Lease& operator=(Lease&& o) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { reset(); }

    Arena& operator*() const { return *arena_; }
    Arena* operator->() const { return arena_.get(); }
    Arena* get() const { return arena_.get(); }
    void reset();  // gives the arena back now

   private:
    friend class ArenaPool;
    Lease(ArenaPool* pool, std::unique_ptr<Arena> arena) : pool_(pool), arena_(std::move(arena)) {}
    ArenaPool* pool_ = nullptr;
    std::unique_ptr<Arena> arena_;
  };

  ArenaPool() = default;
  ~ArenaPool();
  ArenaPool(const ArenaPool&) = delete;
  ArenaPool& operator=(const ArenaPool&) = delete;

  // The pool must outlive its leases.
  Lease acquire();

  // Arenas made so far (leased or idle): the peak number of concurrent runs.
  int created() const;

 private:
  void release(std::unique_ptr<Arena> arena);

  std::atomic<Arena*> hot_{nullptr};  // an idle arena (owned), or null
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Arena>> idle_;  // guarded by mu_, as is created_
  int created_ = 0;
};

}  // namespace stitch::rt::cpu
