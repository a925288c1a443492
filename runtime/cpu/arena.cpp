// The arena and its pool. The design note is in arena.h.
#include "runtime/cpu/arena.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "runtime/support/error.h"
#include "runtime/support/memory.h"

namespace stitch::rt::cpu {

namespace {

constexpr size_t kPage = 4096;

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

void Arena::Free::operator()(std::byte* p) const {
  ::operator delete (p, std::align_val_t{kAlignment});
}

void Arena::prepare(std::span<const int64_t> slotBytes) {
  // Offsets first: computing them allocates nothing once offsets_ has held this many slots.
  offsets_.resize(slotBytes.size());
  size_t total = 0;
  constexpr size_t kLimit = std::numeric_limits<size_t>::max() / 4;
  for (size_t i = 0; i < slotBytes.size(); ++i) {
    int64_t bytes = slotBytes[i];
    STITCH_CHECK(bytes >= 0, ErrorCode::InvalidArgument, "arena slot {} has a negative size {}", i,
                 bytes);
    size_t size = std::max(roundUp(static_cast<size_t>(bytes), kAlignment), kAlignment);
    STITCH_CHECK(size < kLimit && total < kLimit - size, ErrorCode::OutOfMemory,
                 "arena slots need more memory than can be addressed");
    offsets_[i] = total;
    total += size;
  }
  if (total <= capacity_) return;
  // Overcommitted memory would be granted and then OOM-kill the process in the memset below.
  checkHostMemory(static_cast<int64_t>(total), "the cpu backend's arena for intermediates");

  // Grow by half at least, so a shape that creeps up does not reallocate and re-fault each time.
  size_t want = roundUp(std::max(total, capacity_ + capacity_ / 2), kPage);
  base_.reset();  // free first: the old contents are dead, and the peak stays lower
  capacity_ = 0;
  auto* p =
      static_cast<std::byte*>(::operator new (want, std::align_val_t{kAlignment}, std::nothrow));
  STITCH_CHECK(p != nullptr, ErrorCode::OutOfMemory,
               "could not allocate a {} byte arena for CPU intermediates", want);
  // Pre-fault now, once, rather than inside the first kernels on every run with new memory.
  std::memset(p, 0, want);
  base_.reset(p);
  capacity_ = want;
  ++allocations_;
}

void* Arena::slot(int i) const {
  STITCH_INTERNAL(i >= 0 && i < numSlots(), "arena slot {} of {}", i, numSlots());
  return base_.get() + offsets_[static_cast<size_t>(i)];
}

ArenaPool::Lease& ArenaPool::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    reset();
    pool_ = o.pool_;
    arena_ = std::move(o.arena_);
    o.pool_ = nullptr;
  }
  return *this;
}

void ArenaPool::Lease::reset() {
  if (pool_ && arena_) pool_->release(std::move(arena_));
  pool_ = nullptr;
  arena_.reset();
}

ArenaPool::~ArenaPool() { delete hot_.load(std::memory_order_acquire); }

ArenaPool::Lease ArenaPool::acquire() {
  // The hot arena, released most recently unless runs overlapped: its memory is grown and
  // likely still in cache.
  if (Arena* hot = hot_.exchange(nullptr, std::memory_order_acq_rel))
    return Lease(this, std::unique_ptr<Arena>(hot));
  std::lock_guard lk(mu_);
  if (!idle_.empty()) {
    // The most recently released of the others.
    auto arena = std::move(idle_.back());
    idle_.pop_back();
    return Lease(this, std::move(arena));
  }
  // Room for every arena to come back, so release() never allocates (or throws).
  idle_.reserve(static_cast<size_t>(created_) + 1);
  auto arena = std::make_unique<Arena>();
  ++created_;
  return Lease(this, std::move(arena));
}

int ArenaPool::created() const {
  std::lock_guard lk(mu_);
  return created_;
}

void ArenaPool::release(std::unique_ptr<Arena> arena) {
  Arena* empty = nullptr;
  if (hot_.compare_exchange_strong(empty, arena.get(), std::memory_order_acq_rel)) {
    (void)arena.release();  // owned by hot_ now
    return;
  }
  std::lock_guard lk(mu_);
  idle_.push_back(std::move(arena));
}

}  // namespace stitch::rt::cpu
