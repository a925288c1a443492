// The CPU executor: runs a program's CompiledKernels in order, intermediates in an arena.
//
// Design. Before the first run of an input signature, assignSlots() plans the arena with the
// backend-neutral slot planner (runtime/slots.h), each phase a step.
//
// A run: bind the caller's tensors into a ValueBuffers (kept with the arena lease and reused, so
// nothing is allocated), then runKernels() prepares the arena for the slot sizes, points the
// intermediates and scratch at their slots, and runs each kernel over its parallel units on the
// pool, one kernel after the other: the pool's return is the barrier between kernels.
//
// Small kernels. Handing a kernel to the pool costs the caller a lock, a notify and a wait for
// the workers' last chunks, and a sleeping worker a futex wake; what a split can save is half
// the kernel's time (two threads here), which for these memory-bound kernels follows the bytes
// they move. Measured on this VM (bench/bench_thread_pool.cpp, caller CPU time, a loaded
// machine): y = x * 2 + 1 runs at about 26 GB/s on one core from cache, so 64 KiB take about
// 2.5 µs and a split saves at most 1.2 µs, while the split itself costs the caller 0.3 to 0.6 µs
// with a spinning worker (BM_Kernel at 8 to 16 KiB: 570 to 670 ns against 295 to 575 inline)
// before it waits for the worker's chunk, and far more when the worker sleeps and must first
// get a core. So a kernel whose inputs and outputs together come to at most kInlineBytes is
// marked `serial` when its program is loaded (the shapes are known by then) and runs on the
// calling thread. Bytes, not elements: one f32 element of a kernel with five buffers moves 20
// bytes, of a one-buffer f16 kernel 2. The lowering's grain (16 units of 1024 elements per loop
// task, 16384 elements' worth of rows per reduction task) already keeps a loop of up to 16384
// elements whole on the caller; the byte rule adds the phases whose grain does not follow the
// size (the per-worker column partials, grain 1) and judges all kernels by what they move.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/cpu/arena.h"
#include "runtime/cpu/cpu_kernel.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/slots.h"

namespace stitch::rt::cpu {

// Kernels that move at most this many bytes (inputs read plus outputs written) run on the
// calling thread: the note above.
inline constexpr int64_t kInlineBytes = 64 * 1024;

// The bytes kernel `k` reads and writes: each buffer's elements times its dtype's size,
// saturating.
int64_t kernelBytes(const CompiledKernel& k);
// Whether `k` is small enough to run on the calling thread (kernelBytes <= kInlineBytes).
bool runsInline(const CompiledKernel& k);

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
// pointers (a `serial` kernel as fn(buffers, 0, units) on the calling thread). A buffer with no
// pointer is an Internal error naming the kernel; an exception from a kernel propagates after the
// kernel's other chunks have stopped. A kernel with index checks gets this run's status words;
// when one records a failure the run stops after that kernel with IndexOutOfRange (the message
// names graph `program`, the check, the index and its bound; throwCheckFailure).
void runKernels(std::span<const CompiledKernel> kernels, const SlotPlan& slots,
                ValueBuffers& values, Arena& arena, ThreadPool& pool,
                std::string_view program = "program");

}  // namespace stitch::rt::cpu
