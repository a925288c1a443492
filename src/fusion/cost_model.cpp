// The cost model's formula; cost_model.h states it in full.
#include "fusion/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/support/error.h"

namespace stitch::fusion {
namespace {

// The fraction of a GPU's resident-thread capacity at which a streaming kernel saturates DRAM.
// Little's law: H100 needs 3.0e12 B/s * 0.6 us = 1.8 MB in flight; at 16 B (one vector load)
// per thread that is ~110k threads, 40% of its 270k; kernels that unroll keep two or more loads in
// flight per thread and need proportionally less, and copy microbenchmarks on A100/H100 reach
// their plateau from about a quarter to a half of full occupancy. A100 and MI250X land in the
// same range by the same arithmetic. 0.3 sits in the middle; occupancy above it buys nothing.
constexpr double kGpuSaturationFill = 0.3;
// The in-flight bytes kGpuSaturationFill was reasoned with (one vector load per thread), and the
// most loads of that size the model credits a thread with.
constexpr double kBaselineBytesInFlight = 16.0;
constexpr double kMaxInFlightLoads = 8.0;
// What one processor streams at most, in fair shares of the bandwidth (bandwidth / processors):
// its load/store path and its misses in flight bound it whatever its threads keep in flight
// (single-SM copy kernels reach 50-100 GB/s on A100/H100, about 3-4 shares).
constexpr double kMaxProcessorShares = 4.0;
// Keeps the divisions finite; a real kernel (one thread on a whole GPU) is ~1e-5.
constexpr double kMinEfficiency = 1e-6;
// A spilled 32-bit register is stored once and loaded once.
constexpr double kSpillBytesPerRegister = 4.0 * 2.0;

KernelCost infeasible(KernelCost cost, std::string reason) {
  cost.feasible = false;
  cost.infeasibleReason = std::move(reason);
  cost.time = std::numeric_limits<double>::infinity();
  return cost;
}

}  // namespace

KernelCost estimateKernel(const KernelSummary& k, const HardwareProfile& hw) {
  STITCH_INTERNAL(k.blocks >= 1 && k.threadsPerBlock >= 1,
                  "kernel summary with {} blocks of {} threads", k.blocks, k.threadsPerBlock);
  STITCH_INTERNAL(k.bytesRead >= 0 && k.bytesWritten >= 0 && k.cheapOps >= 0 &&
                      k.expensiveOps >= 0 && k.recomputeCheapOps >= 0 &&
                      k.recomputeExpensiveOps >= 0 && k.sharedMemoryPerBlock >= 0 &&
                      k.registersPerThread >= 0 && k.blockSyncs >= 0 && k.gridSyncs >= 0 &&
                      k.bytesInFlightPerThread >= 0,
                  "kernel summary with a negative count");

  KernelCost cost;
  cost.launch = hw.launchOverhead;

  if (k.threadsPerBlock > hw.maxThreadsPerBlock)
    return infeasible(cost, fmt::format("{} threads per block exceed the {} limit of {}",
                                        k.threadsPerBlock, hw.name, hw.maxThreadsPerBlock));
  if (k.sharedMemoryPerBlock > hw.sharedMemoryPerBlock)
    return infeasible(cost, fmt::format("{} bytes of shared memory per block exceed the {} limit "
                                        "of {}",
                                        k.sharedMemoryPerBlock, hw.name, hw.sharedMemoryPerBlock));

  // Occupancy. Every limit is at least one block: the checks above and the profile invariants
  // (maxThreadsPerBlock <= maxThreadsPerProcessor, sharedMemoryPerBlock <= per processor,
  // registersPerProcessor >= maxThreadsPerBlock) guarantee it; the max(1, ...) guards a
  // hand-made profile that breaks them.
  const int64_t threads = k.threadsPerBlock;
  const int64_t regLimit = std::max<int64_t>(
      1, std::min<int64_t>(hw.maxRegistersPerThread, hw.registersPerProcessor / threads));
  const int64_t regs = std::clamp<int64_t>(k.registersPerThread, 1, regLimit);
  int64_t resident = hw.maxBlocksPerProcessor;
  resident = std::min(resident, hw.maxThreadsPerProcessor / threads);
  resident = std::min(resident, hw.registersPerProcessor / (regs * threads));
  if (k.sharedMemoryPerBlock > 0)
    resident = std::min(resident, hw.sharedMemoryPerProcessor / k.sharedMemoryPerBlock);
  resident = std::max<int64_t>(1, resident);
  const int64_t capacity = static_cast<int64_t>(hw.processors) * resident;
  const int64_t waves = (k.blocks + capacity - 1) / capacity;

  const double fill = static_cast<double>(std::min(k.blocks, capacity) * threads) /
                      (static_cast<double>(hw.processors) * hw.maxThreadsPerProcessor);
  // On a CPU no saturation curve: one core streams far below the socket's bandwidth.
  const double inFlight =
      std::clamp(static_cast<double>(k.bytesInFlightPerThread) / kBaselineBytesInFlight, 1.0,
                 kMaxInFlightLoads);
  double saturation = fill;
  if (hw.isGpu) {
    const double active = static_cast<double>(std::min<int64_t>(k.blocks, hw.processors));
    saturation = std::min(fill * inFlight / kGpuSaturationFill,
                          active * kMaxProcessorShares / hw.processors);
  }
  cost.efficiency = std::clamp(saturation, kMinEfficiency, 1.0);

  cost.sync =
      k.blockSyncs * hw.blockSyncTime * static_cast<double>(waves) + k.gridSyncs * hw.gridSyncTime;

  const double spilled = static_cast<double>(std::max<int64_t>(0, k.registersPerThread - regLimit));
  // Per resident thread: later blocks reuse a slot's local memory, which the caches hold.
  const double spillBytes = spilled * kSpillBytesPerRegister *
                            static_cast<double>(std::min(k.blocks, capacity)) *
                            static_cast<double>(threads);
  const double bytes =
      static_cast<double>(k.bytesRead) + static_cast<double>(k.bytesWritten) + spillBytes;
  const double bandwidth = hw.cacheBandwidth > 0 && bytes <= static_cast<double>(hw.cacheBytes)
                               ? hw.cacheBandwidth
                               : hw.memoryBandwidth;
  cost.memory = bytes / (bandwidth * cost.efficiency) + hw.memoryLatency;

  const double cheap = static_cast<double>(k.cheapOps) + static_cast<double>(k.recomputeCheapOps);
  const double expensive =
      static_cast<double>(k.expensiveOps) + static_cast<double>(k.recomputeExpensiveOps);
  cost.compute = (cheap / hw.flops + expensive / hw.expensiveFlops) / cost.efficiency;

  cost.time = cost.launch + std::max(cost.memory, cost.compute) + cost.sync;
  return cost;
}

}  // namespace stitch::fusion
