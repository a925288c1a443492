// The CPU executor: runs a program's CompiledKernels in order, intermediates in an arena.
//
// Design. Before the first run of an input signature, assignSlots() plans the arena with the
// backend-neutral slot planner (runtime/slots.h), each phase a step.
//
// A run: bind the caller's tensors into a ValueBuffers (kept with the arena lease and reused, so
// nothing is allocated), then runKernels() prepares the arena for the slot sizes, points the
// intermediates and scratch at their slots, and runs each kernel over its parallel units on the
// pool, one kernel after the other: the pool's return is the barrier between kernels.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/cpu/arena.h"
#include "runtime/cpu/cpu_kernel.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/slots.h"

namespace stitch::rt::cpu {

// The arena plan (runtime/slots.h) over `kernels` as steps, in run order.
using SlotPlan = rt::SlotPlan;
SlotPlan assignSlots(std::span<const CompiledKernel> kernels, std::span<const int> external);

// The data pointer of each value (by node id) and each scratch index for one run.
class ValueBuffers {
 public:
  // Forgets every pointer, keeping the memory (so a reused ValueBuffers does not allocate).
  void clear();
  // Points value `id` at caller memory (a graph input or output's DLTensor data).
  void bind(int id, void* data);
  // Points the plan's intermediates and scratch at their slots in a prepared arena.
  void bindSlots(const SlotPlan& plan, const Arena& arena);

  void* value(int id) const;
  void* scratch(int index) const;
  void* operator[](const KernelBuffer& b) const {
    return b.value >= 0 ? value(b.value) : scratch(b.scratch);
  }

 private:
  std::vector<void*> values_;
  std::vector<void*> scratch_;
};

// Runs `kernels` in order: prepares `arena` for `slots`, binds the intermediates into `values`
// (which must already hold every external value), and runs each kernel as
// pool.parallelFor(units, grain, fn(buffers, begin, end)) with its inputs', then its outputs',
// pointers. A buffer with no pointer is an Internal error naming the kernel; an exception from a
// kernel propagates after the kernel's other chunks have stopped.
void runKernels(std::span<const CompiledKernel> kernels, const SlotPlan& slots,
                ValueBuffers& values, Arena& arena, ThreadPool& pool);

}  // namespace stitch::rt::cpu
