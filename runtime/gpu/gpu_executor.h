// The GPU executor: runs a program's kernels in order on the caller's stream.
//
// Design. Slots are planned by the backend-neutral planner (runtime/slots.h), each kernel a step
// (its phases may run as one cooperative launch): intermediates and kernel scratch get slots of
// a device arena by liveness. GPU runs
// are asynchronous, so an arena cannot be handed back when run() returns, as the host does: the
// kernels may still be reading it. Instead each stream gets its own arena (runs on one stream are
// ordered, so they can share one; runs on two streams never do). An arena is one device
// allocation, grown when a larger signature needs it (after synchronizing its stream, since
// queued kernels may still use the old one), plus two zeroed words per cooperative kernel for its
// grid barrier (they return to zero after every barrier) and the index checks' status words
// (runtime/index_checks.h) of every kernel that has checks, zeroed (a failure is zeroed again
// after it is read). Arenas live until the program is destroyed.
//
// A run binds the caller's pointers (inputs, then each output value once), points intermediates
// at their slots, and launches every kernel: the cooperative entry when it has one, else one
// launch per phase (stream order is the barrier between them). A program with index checks then
// copies the status words back, which waits for the stream: the run reports a bad index as its
// own error, as the host does, at the price of that synchronization (only such programs pay
// it: a gather, a cross-entropy's label check).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/gpu/gpu_kernels.h"
#include "runtime/slots.h"

namespace stitch::rt::gpu {

// The slot plan of `kernels` (in run order); `external` values live in the caller's memory.
SlotPlan planGpuSlots(std::span<const std::shared_ptr<const GpuKernel>> kernels,
                      std::span<const int> external);

class GpuArenas {
 public:
  explicit GpuArenas(Device& device) : device_(device) {}
  ~GpuArenas();
  GpuArenas(const GpuArenas&) = delete;
  GpuArenas& operator=(const GpuArenas&) = delete;

  struct Arena {
    void* base = nullptr;
    size_t bytes = 0;
    std::vector<size_t> offsets;  // per slot
    size_t barrierOffset = 0;     // 2 u32 per cooperative kernel, zeroed
    size_t statusOffset = 0;      // kCheckStatusWords i64 per kernel with checks, zeroed
  };
  // The arena of `stream`, laid out for `plan` with `barriers` barrier pairs and `checked`
  // kernels' status words.
  Arena& forStream(void* stream, const SlotPlan& plan, int barriers, int checked = 0);

 private:
  Device& device_;
  std::mutex mu_;
  std::map<void*, Arena> arenas_;
};

// Launches `kernels` on `stream`. `values` holds a device pointer for every external value (by
// node id); intermediates and scratch come from `arena`. `cooperative`: use cooperative entries
// when present (tests turn it off to check the per-phase path).
void runGpuKernels(Device& device, std::span<const std::shared_ptr<const GpuKernel>> kernels,
                   const SlotPlan& plan, std::vector<void*>& values, const GpuArenas::Arena& arena,
                   void* stream, bool cooperative = true);

// After runGpuKernels on `stream`: when a kernel has index checks, copies the status words back
// (waiting for the stream) and throws IndexOutOfRange for the first kernel that recorded a
// failure (runtime/index_checks.h), after zeroing the words again for the next run.
void checkGpuIndices(Device& device, std::span<const std::shared_ptr<const GpuKernel>> kernels,
                     const GpuArenas::Arena& arena, void* stream, std::string_view program);

}  // namespace stitch::rt::gpu
