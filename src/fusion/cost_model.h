// The cost model: the estimated run time of one fused kernel on one hardware profile.
//
// It is a pure function of a KernelSummary (what the kernel does, as the planner's group
// analysis measured it) and a HardwareProfile; it knows nothing of graphs. The formula, in
// seconds (the constants are documented in cost_model.cpp where they are used):
//
//   time       = launch + max(memory, compute) + sync
//
//   launch     = launchOverhead
//   memory     = (bytesRead + bytesWritten + spillBytes) / (bandwidth * efficiency)
//              + memoryLatency
//   bandwidth  = cacheBandwidth when the profile has one and those bytes fit cacheBytes (the
//                kernel's data stay in the last-level cache from one run to the next), else
//                memoryBandwidth
//   compute    = ( (cheapOps + recomputeCheapOps) / flops
//                + (expensiveOps + recomputeExpensiveOps) / expensiveFlops ) / efficiency
//   sync       = blockSyncs * blockSyncTime * waves + gridSyncs * gridSyncTime
//
// Occupancy, per processor (SM, CU, core); names from the summary are the kernel's, the others
// the profile's, and a kernel using no shared memory is not limited by it:
//   regLimit   = min(maxRegistersPerThread, registersPerProcessor / threadsPerBlock)
//                (a block must fit on one processor, so the compiler caps registers there)
//   resident   = min(maxBlocksPerProcessor, maxThreadsPerProcessor / threadsPerBlock,
//                    registersPerProcessor / (min(registersPerThread, regLimit) * threadsPerBlock),
//                    sharedMemoryPerProcessor / kernel's sharedMemoryPerBlock)  blocks at once
//   capacity   = processors * resident                                         blocks at once
//   waves      = ceil(blocks / capacity)
//   fill       = min(blocks, capacity) * threadsPerBlock / (processors * maxThreadsPerProcessor)
//   inFlight   = clamp(bytesInFlightPerThread / 16 B, 1, 8)
//   efficiency = GPU:  min(1, fill * inFlight / 0.3, min(blocks, processors) * 4 / processors)
//                      a streaming kernel with one 16-byte load in flight per thread saturates
//                      DRAM at ~30% occupancy; one with k of them at a k-th of that (Little's
//                      law: it is the bytes in flight that hide the latency); but a processor
//                      streams at most ~4 fair shares of the bandwidth, so a few blocks stay a
//                      few processors' worth whatever they keep in flight
//                host: min(1, fill)         = min(1, blocks / cores): every core must stream
//                floored at 1e-6; in (0, 1]
//   spillBytes = max(0, registersPerThread - regLimit) * 4 B * 2 (store + load)
//              * min(blocks, capacity) * threadsPerBlock
//                (per resident thread: a spilled register lives in local memory, which a later
//                block on the same slot reuses and the caches hold; charging it for every thread
//                of a grid of thousands of 1024-thread blocks priced a fused cross-entropy, whose
//                estimated 76 registers NVRTC compiles to 32 without a spill, tens of
//                microseconds above its two kernels: issue 33)
//
// The bytes in flight count only from one vector load up (a thread's later loads of a grid-stride
// loop overlap too, which the 0.3 was measured with) and up to eight of them (an SM tracks a
// bounded number of outstanding misses). They matter where a kernel has few threads: an unrolled
// row walk of a few hundred rows issues every load of its row at once, which is why a fused
// layer-norm backward of 200 rows is not ten times slower than its unfused kernels, as pricing it
// by its thread count alone said (issue 33).
//
// Efficiency scales the throughput terms only: the memory latency is one dependent round trip
// and does not shrink with more threads (dividing it too would price a one-block kernel at
// hundreds of microseconds). So a kernel that keeps few threads busy (a column reduction over a
// tall-thin tensor mapped to a handful of blocks) pays for it in proportion to the bytes it
// moves, and fusing work into such a kernel can lose to keeping it apart.
//
// A kernel is infeasible (feasible = false, time = +inf, infeasibleReason says why) when it
// needs more threads or shared memory per block than the hardware allows. The parts computed
// before the check failed are filled in; the rest stay zero.
//
// A grid barrier (gridSyncs > 0) does not need every block resident, so it is no limit on
// blocks: every phase of a lowered kernel is grid-stride over its units (lower/launch.h), the
// GPU runtime launches the cooperative entry with at most the occupancy bound of blocks, each
// striding over the rest (runtime/gpu/gpu_kernels.h), or one launch per phase where cooperative
// launch is unavailable (HIP 5.2); the host runs the phases one after another on its pool
// (lower/kernel_program.h). So a barrier costs gridSyncTime whatever the grid. (Refusing grids
// past residency cut every loss over a large tensor into two kernels: issue 14.) A summary with no
// blocks, no threads or negative counts is a bug in the caller and throws an internal error.
#pragma once

#include <cstdint>
#include <string>

#include "fusion/hardware.h"

namespace stitch::fusion {

struct KernelSummary {
  // Memory traffic to and from global memory, in bytes.
  int64_t bytesRead = 0;
  int64_t bytesWritten = 0;
  // Arithmetic, counted per element computed (so an op over 1M elements counts 1M).
  int64_t cheapOps = 0;
  int64_t expensiveOps = 0;
  int64_t recomputeCheapOps = 0;  // extra work from recomputing values instead of storing them
  int64_t recomputeExpensiveOps = 0;
  // Launch geometry. On a GPU profile the group analysis (group.cpp) fills blocks and
  // threadsPerBlock with the launch the emitter uses (lower/launch.h: for a kernel of several
  // phases the cooperative launch; the 16-byte aligned variant).
  int64_t blocks = 1;
  int threadsPerBlock = 1;
  int64_t sharedMemoryPerBlock = 0;  // bytes
  int registersPerThread = 16;       // estimated from live values
  // Global-memory bytes a thread has in flight at once: the loads it issues before it needs their
  // values (lower/launch.h). One 16-byte vector load unless the group analysis says more.
  int64_t bytesInFlightPerThread = 16;
  // Synchronization inside the kernel.
  int blockSyncs = 0;  // barriers per block
  int gridSyncs = 0;   // grid-wide barriers (the global stitch scheme)
};

struct KernelCost {
  double time = 0;        // s, the total: launch + max(memory, compute) + sync
  double launch = 0;      // s
  double memory = 0;      // s, at this kernel's efficiency, latency and spills included
  double compute = 0;     // s, at this kernel's efficiency, recomputation included
  double sync = 0;        // s
  double efficiency = 1;  // (0, 1]
  bool feasible = true;
  std::string infeasibleReason;  // when !feasible
};

KernelCost estimateKernel(const KernelSummary& k, const HardwareProfile& hw);

}  // namespace stitch::fusion
