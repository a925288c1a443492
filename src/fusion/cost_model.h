// The cost model: the estimated run time of one fused kernel on one hardware profile.
//
// It is a pure function of a KernelSummary (what the kernel does, as the planner's group
// analysis measured it) and a HardwareProfile; it knows nothing of graphs. The formula, in
// seconds (all terms documented in cost_model.cpp where they are computed):
//
//   time = launch
//        + max(memory, compute) / efficiency
//        + syncs
//
//   memory     = (bytesRead + bytesWritten) / bandwidth + memoryLatency
//   compute    = (cheapOps + recomputeCheapOps) / flops
//              + (expensiveOps + recomputeExpensiveOps) / expensiveFlops
//   efficiency = how much of the machine the kernel keeps busy: the fraction of the processors'
//                resident-thread capacity that its threads fill, after occupancy limits from
//                registers and shared memory, raised to a saturation curve (a streaming kernel
//                needs only part of full occupancy to saturate bandwidth), in (0, 1]
//   syncs      = blockSyncs * blockSyncTime * waves + gridSyncs * gridSyncTime
//
// Register pressure beyond maxRegistersPerThread spills to local memory and is charged as extra
// traffic. A kernel needing more shared memory per block than the hardware has, or a grid
// barrier with more blocks than can be resident at once, is infeasible (time = +inf).
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
  // Launch geometry.
  int64_t blocks = 1;
  int threadsPerBlock = 1;
  int64_t sharedMemoryPerBlock = 0;  // bytes
  int registersPerThread = 16;       // estimated from live values
  // Synchronization inside the kernel.
  int blockSyncs = 0;  // barriers per block
  int gridSyncs = 0;   // grid-wide barriers (the global stitch scheme)
};

struct KernelCost {
  double time = 0;        // s, the total
  double launch = 0;      // s
  double memory = 0;      // s
  double compute = 0;     // s
  double sync = 0;        // s
  double efficiency = 1;  // (0, 1]
  bool feasible = true;
  std::string infeasibleReason;  // when !feasible
};

KernelCost estimateKernel(const KernelSummary& k, const HardwareProfile& hw);

}  // namespace stitch::fusion
