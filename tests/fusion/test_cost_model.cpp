// The hardware profiles and the cost model, on hand-made kernel summaries: the trade-offs the
// planner relies on (fusion saves launches and traffic, but not at any price).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "fusion/cost_model.h"
#include "fusion/hardware.h"
#include "runtime/support/error.h"

using namespace stitch::fusion;

namespace {

constexpr int64_t kMiB = 1024 * 1024;

HardwareProfile profile(std::string_view name) {
  auto p = findProfile(name);
  EXPECT_TRUE(p.has_value()) << name;
  return *p;
}

// An elementwise f32 kernel over n elements: reads `inputs` tensors, writes `outputs`, one thread
// per four elements (float4), 256 threads per block.
KernelSummary elementwise(int64_t n, int inputs = 1, int outputs = 1, int64_t opsPerElement = 1) {
  KernelSummary k;
  k.bytesRead = 4 * n * inputs;
  k.bytesWritten = 4 * n * outputs;
  k.cheapOps = n * opsPerElement;
  k.threadsPerBlock = 256;
  k.blocks = std::max<int64_t>(1, (n / 4 + 255) / 256);
  k.registersPerThread = 32;
  return k;
}

// The same work laid out for the host, where a block is one task of one thread on one core.
KernelSummary laidOutFor(KernelSummary k, const HardwareProfile& hw) {
  if (!hw.isGpu) {
    k.threadsPerBlock = 1;
    k.blocks = std::min<int64_t>(k.blocks, 4 * int64_t{hw.processors});
  }
  return k;
}

// The kernel that runs a and b in one launch with geometry `geometry`: the work adds up, the
// intermediate written by a and read by b (`intermediate` bytes) stays on chip.
KernelSummary fuse(const KernelSummary& a, const KernelSummary& b, int64_t intermediate,
                   const KernelSummary& geometry) {
  KernelSummary f = geometry;
  f.bytesRead = a.bytesRead + b.bytesRead - intermediate;
  f.bytesWritten = a.bytesWritten + b.bytesWritten - intermediate;
  f.cheapOps = a.cheapOps + b.cheapOps;
  f.expensiveOps = a.expensiveOps + b.expensiveOps;
  f.recomputeCheapOps = a.recomputeCheapOps + b.recomputeCheapOps;
  f.recomputeExpensiveOps = a.recomputeExpensiveOps + b.recomputeExpensiveOps;
  return f;
}

double time(const KernelSummary& k, const HardwareProfile& hw) {
  return estimateKernel(k, hw).time;
}

}  // namespace

TEST(HardwareProfiles, AllFourFoundByName) {
  for (std::string_view name : {"sm_90", "sm_80", "gfx90a", "host"}) {
    auto p = findProfile(name);
    ASSERT_TRUE(p.has_value()) << name;
    EXPECT_EQ(p->name, name);
    EXPECT_FALSE(p->description.empty());
  }
  EXPECT_FALSE(findProfile("sm_75").has_value());
  EXPECT_FALSE(findProfile("").has_value());
  EXPECT_EQ(profileNames(), "sm_90, sm_80, gfx90a, host");
  EXPECT_EQ(builtinProfiles().size(), 4u);
  EXPECT_TRUE(findProfile("sm_90")->isGpu);
  EXPECT_FALSE(findProfile("host")->isGpu);
  EXPECT_EQ(findProfile("gfx90a")->warpSize, 64);
}

// The invariants the cost model's occupancy arithmetic relies on.
TEST(HardwareProfiles, NumbersAreConsistent) {
  for (const HardwareProfile& p : builtinProfiles()) {
    SCOPED_TRACE(p.name);
    EXPECT_GE(p.processors, 1);
    EXPECT_GE(p.warpSize, 1);
    EXPECT_GE(p.maxThreadsPerBlock, 1);
    EXPECT_LE(p.maxThreadsPerBlock, p.maxThreadsPerProcessor);
    EXPECT_GE(p.maxBlocksPerProcessor, 1);
    EXPECT_GE(p.registersPerProcessor, p.maxThreadsPerBlock);
    EXPECT_GE(p.maxRegistersPerThread, 1);
    EXPECT_GT(p.sharedMemoryPerBlock, 0);
    EXPECT_LE(p.sharedMemoryPerBlock, p.sharedMemoryPerProcessor);
    EXPECT_GT(p.cacheBytes, p.sharedMemoryPerBlock);
    EXPECT_GT(p.memoryBandwidth, 0);
    EXPECT_GT(p.memoryLatency, 0);
    EXPECT_GT(p.launchOverhead, 0);
    EXPECT_GT(p.flops, 0);
    EXPECT_GT(p.expensiveFlops, 0);
    EXPECT_LT(p.expensiveFlops, p.flops);
    EXPECT_GE(p.blockSyncTime, 0);
    EXPECT_GT(p.gridSyncTime, 0);
  }
  // Streaming bandwidth is derated from the datasheet peak, not above it.
  EXPECT_LT(profile("sm_90").memoryBandwidth, 3.35e12);
  EXPECT_LT(profile("sm_80").memoryBandwidth, 2.04e12);
  EXPECT_LT(profile("gfx90a").memoryBandwidth, 1.6e12);
}

TEST(CostModel, FillsEveryPart) {
  const HardwareProfile hw = profile("sm_90");
  KernelSummary k = elementwise(16 * kMiB, 1, 1, 4);
  k.expensiveOps = 16 * kMiB;
  k.blockSyncs = 2;
  const KernelCost c = estimateKernel(k, hw);
  ASSERT_TRUE(c.feasible) << c.infeasibleReason;
  EXPECT_TRUE(c.infeasibleReason.empty());
  EXPECT_EQ(c.launch, hw.launchOverhead);
  EXPECT_GT(c.memory, 0);
  EXPECT_GT(c.compute, 0);
  EXPECT_GT(c.sync, 0);
  EXPECT_GT(c.efficiency, 0);
  EXPECT_LE(c.efficiency, 1);
  EXPECT_DOUBLE_EQ(c.time, c.launch + std::max(c.memory, c.compute) + c.sync);
}

// More bytes never cost less; once the kernel is memory-bound they cost strictly more.
TEST(CostModel, MonotonicInBytes) {
  for (const HardwareProfile& hw : builtinProfiles()) {
    SCOPED_TRACE(hw.name);
    double previous = 0;
    double previousMemoryOnly = 0;
    for (int64_t bytes = 0; bytes <= (int64_t{1} << 32); bytes = bytes ? bytes * 4 : 1024) {
      SCOPED_TRACE(bytes);
      KernelSummary k = laidOutFor(elementwise(64 * kMiB, 1, 1, 4), hw);
      k.bytesRead = bytes;
      k.bytesWritten = bytes / 2;
      const double t = time(k, hw);
      EXPECT_GE(t, previous);
      previous = t;
      k.cheapOps = 0;
      const double memoryOnly = time(k, hw);
      EXPECT_GT(memoryOnly, previousMemoryOnly);
      previousMemoryOnly = memoryOnly;
    }
  }
}

TEST(CostModel, StreamingCopyRunsAtProfileBandwidth) {
  // A 64 MiB copy (64 MiB read, 64 MiB written) with ample parallelism.
  const HardwareProfile hw = profile("sm_90");
  const KernelSummary copy = elementwise(16 * kMiB);
  const KernelCost c = estimateKernel(copy, hw);
  const double ideal = 2.0 * 64 * kMiB / hw.memoryBandwidth;
  EXPECT_EQ(c.efficiency, 1.0);
  EXPECT_NEAR(c.memory, ideal, 0.02 * ideal);  // only the one latency on top
  EXPECT_NEAR(c.time, ideal + hw.launchOverhead + hw.memoryLatency, 1e-9);
  EXPECT_LT(c.time, 1.1 * ideal);
}

// A kernel whose traffic fits the last-level cache streams at the profile's cache bandwidth when
// it has one (a calibration's, hardware.h); one that does not, and every kernel of a profile
// without one, at the DRAM bandwidth.
TEST(CostModel, ACacheResidentKernelStreamsAtTheCacheBandwidth) {
  HardwareProfile hw = profile("sm_90");
  ASSERT_EQ(hw.cacheBandwidth, 0);
  const KernelSummary small = elementwise(kMiB), large = elementwise(16 * kMiB);  // 8, 128 MiB
  ASSERT_LE(small.bytesRead + small.bytesWritten, hw.cacheBytes);
  ASSERT_GT(large.bytesRead + large.bytesWritten, hw.cacheBytes);
  const double smallDram = estimateKernel(small, hw).memory;
  const double largeDram = estimateKernel(large, hw).memory;
  hw.cacheBandwidth = 4 * hw.memoryBandwidth;
  EXPECT_NEAR(estimateKernel(small, hw).memory - hw.memoryLatency,
              (smallDram - hw.memoryLatency) / 4, 1e-12);
  EXPECT_EQ(estimateKernel(large, hw).memory, largeDram);
}

TEST(CostModel, LaunchOverheadDominatesTinyKernels) {
  for (const HardwareProfile& hw : builtinProfiles()) {
    SCOPED_TRACE(hw.name);
    const KernelCost c = estimateKernel(laidOutFor(elementwise(1024), hw), hw);
    ASSERT_TRUE(c.feasible) << c.infeasibleReason;
    EXPECT_GT(c.launch, 0.5 * c.time);
    EXPECT_LT(c.time, 2 * (hw.launchOverhead + hw.memoryLatency));
  }
}

TEST(CostModel, FusingTwoElementwiseKernelsIsCheaper) {
  for (const HardwareProfile& hw : builtinProfiles()) {
    SCOPED_TRACE(hw.name);
    for (int64_t n : {int64_t{1024}, 1 * kMiB, 64 * kMiB}) {
      SCOPED_TRACE(n);
      // y = a(x); z = b(y, w): the intermediate y is written once and read once.
      const KernelSummary a = laidOutFor(elementwise(n, 1, 1, 2), hw);
      const KernelSummary b = laidOutFor(elementwise(n, 2, 1, 3), hw);
      const KernelSummary fused = fuse(a, b, 4 * n, b);
      EXPECT_LT(time(fused, hw), time(a, hw) + time(b, hw));
      // At least the launch and the intermediate's round trip are saved.
      EXPECT_LT(time(fused, hw), time(a, hw) + time(b, hw) - hw.launchOverhead -
                                     8.0 * n / hw.memoryBandwidth + 1e-12);
    }
  }
}

TEST(CostModel, TooFewBlocksIsMuchSlower) {
  for (std::string_view name : {"sm_90", "sm_80", "gfx90a"}) {
    SCOPED_TRACE(name);
    const HardwareProfile hw = profile(name);
    KernelSummary wide = elementwise(8 * kMiB);  // 64 MiB moved
    wide.blocks = 10000;
    KernelSummary narrow = wide;
    narrow.blocks = 2;
    const KernelCost w = estimateKernel(wide, hw);
    const KernelCost n = estimateKernel(narrow, hw);
    EXPECT_EQ(w.efficiency, 1.0);
    EXPECT_LT(n.efficiency, 0.01);
    EXPECT_GT(n.time, 20 * w.time);
  }
}

// The column reduction of a tall-thin tensor [4M, 16] f32 maps its 16 columns to a single block;
// fusing the elementwise producer into it runs the producer at that parallelism too. Keeping the
// producer apart (many blocks) and the reduction as a split two-pass kernel wins.
TEST(CostModel, LowParallelismMakesFusionLose) {
  for (std::string_view name : {"sm_90", "sm_80", "gfx90a"}) {
    SCOPED_TRACE(name);
    const HardwareProfile hw = profile(name);
    const int64_t n = 64 * kMiB;
    const KernelSummary producer = elementwise(n, 1, 1, 4);
    KernelSummary reduce;  // split over rows: 1024 blocks write partial sums, a tiny pass combines
    reduce.bytesRead = 4 * n;
    reduce.bytesWritten = 1024 * 16 * 4;
    reduce.cheapOps = n;
    reduce.blocks = 1024;
    reduce.threadsPerBlock = 256;
    reduce.blockSyncs = 8;
    KernelSummary combine;
    combine.bytesRead = reduce.bytesWritten;
    combine.bytesWritten = 16 * 4;
    combine.blocks = 1;
    combine.threadsPerBlock = 256;
    const double apart = time(producer, hw) + time(reduce, hw) + time(combine, hw);

    KernelSummary oneBlock = reduce;
    oneBlock.blocks = 1;
    oneBlock.bytesWritten = 16 * 4;
    const KernelSummary fused = fuse(producer, oneBlock, 4 * n, oneBlock);
    EXPECT_GT(time(fused, hw), apart);
    // With the same split mapping, fusing wins again.
    const KernelSummary fusedSplit = fuse(producer, reduce, 4 * n, reduce);
    EXPECT_LT(time(fusedSplit, hw) + time(combine, hw), apart);
  }
}

TEST(CostModel, SharedMemoryBeyondTheLimitIsInfeasible) {
  for (const HardwareProfile& hw : builtinProfiles()) {
    SCOPED_TRACE(hw.name);
    KernelSummary k = elementwise(kMiB);
    k.threadsPerBlock = 1;
    k.sharedMemoryPerBlock = hw.sharedMemoryPerBlock;
    EXPECT_TRUE(estimateKernel(k, hw).feasible);
    k.sharedMemoryPerBlock = hw.sharedMemoryPerBlock + 1;
    const KernelCost c = estimateKernel(k, hw);
    EXPECT_FALSE(c.feasible);
    EXPECT_TRUE(std::isinf(c.time));
    EXPECT_NE(c.infeasibleReason.find("shared memory"), std::string::npos) << c.infeasibleReason;
  }
}

TEST(CostModel, TooManyThreadsPerBlockIsInfeasible) {
  const HardwareProfile hw = profile("sm_90");
  KernelSummary k = elementwise(kMiB);
  k.threadsPerBlock = 2048;
  const KernelCost c = estimateKernel(k, hw);
  EXPECT_FALSE(c.feasible);
  EXPECT_TRUE(std::isinf(c.time));
  EXPECT_NE(c.infeasibleReason.find("threads per block"), std::string::npos);
}

// Shared memory use cuts occupancy: a block holding all of an SM's shared memory leaves it one
// block; with few threads per block that is too little to saturate DRAM.
TEST(CostModel, SharedMemoryLimitsOccupancy) {
  const HardwareProfile hw = profile("sm_90");
  KernelSummary k = elementwise(64 * kMiB);
  k.threadsPerBlock = 128;
  k.blocks = 100000;
  const KernelCost light = estimateKernel(k, hw);
  k.sharedMemoryPerBlock = hw.sharedMemoryPerBlock;
  const KernelCost heavy = estimateKernel(k, hw);
  EXPECT_EQ(light.efficiency, 1.0);
  EXPECT_NEAR(heavy.efficiency, 128.0 / 2048 / 0.3, 1e-9);
  EXPECT_GT(heavy.time, 3 * light.time);
}

// A grid barrier does not need every block resident: phases are grid-stride, the cooperative
// entry runs at most a resident grid and the host runs phases one after another (cost_model.h).
// So a barrier costs the same whatever the grid, and more blocks than fit stay feasible.
TEST(CostModel, GridBarrierCostsTheSameAtAnyGrid) {
  for (std::string_view name : {"sm_90", "sm_80", "gfx90a", "host"}) {
    SCOPED_TRACE(name);
    const HardwareProfile hw = profile(name);
    KernelSummary k = elementwise(16 * kMiB);
    k.threadsPerBlock = std::min(256, hw.maxThreadsPerBlock);
    k.gridSyncs = 2;
    const int64_t capacity =
        int64_t{hw.processors} *
        std::min<int64_t>(hw.maxBlocksPerProcessor, hw.maxThreadsPerProcessor / k.threadsPerBlock);
    for (int64_t blocks : {int64_t{hw.processors}, capacity, capacity + 1, 30 * capacity}) {
      k.blocks = blocks;
      const KernelCost c = estimateKernel(k, hw);
      ASSERT_TRUE(c.feasible) << blocks << ": " << c.infeasibleReason;
      EXPECT_DOUBLE_EQ(c.sync, 2 * hw.gridSyncTime) << blocks;
      KernelSummary noBarrier = k;
      noBarrier.gridSyncs = 0;
      EXPECT_NEAR(c.time - time(noBarrier, hw), 2 * hw.gridSyncTime, 1e-12) << blocks;
    }
  }
}

TEST(CostModel, BlockBarriersCostPerWave) {
  const HardwareProfile hw = profile("sm_90");
  KernelSummary k = elementwise(16 * kMiB);
  k.blockSyncs = 4;
  const int64_t capacity = int64_t{hw.processors} * 8;  // 256-thread blocks, 32 registers
  k.blocks = 3 * capacity;
  EXPECT_DOUBLE_EQ(estimateKernel(k, hw).sync, 4 * hw.blockSyncTime * 3);
  k.blocks = 3 * capacity + 1;
  EXPECT_DOUBLE_EQ(estimateKernel(k, hw).sync, 4 * hw.blockSyncTime * 4);
}

TEST(CostModel, RegisterSpillsAddTraffic) {
  for (std::string_view name : {"sm_90", "sm_80", "gfx90a"}) {
    SCOPED_TRACE(name);
    const HardwareProfile hw = profile(name);
    KernelSummary k = elementwise(16 * kMiB);
    k.threadsPerBlock = 128;
    k.registersPerThread = hw.maxRegistersPerThread;
    const KernelCost atLimit = estimateKernel(k, hw);
    k.registersPerThread = hw.maxRegistersPerThread + 40;
    const KernelCost spilling = estimateKernel(k, hw);
    EXPECT_EQ(spilling.efficiency, atLimit.efficiency);  // registers are capped, not exceeded
    // Per resident thread: 128-thread blocks at the register cap fit once per processor.
    const int64_t resident = std::min<int64_t>(
        k.blocks,
        int64_t{hw.processors} *
            std::max<int64_t>(1, hw.registersPerProcessor /
                                     (int64_t{hw.maxRegistersPerThread} * k.threadsPerBlock)));
    const double spillBytes = 40.0 * 8 * static_cast<double>(resident) * k.threadsPerBlock;
    EXPECT_NEAR(spilling.memory - atLimit.memory,
                spillBytes / (hw.memoryBandwidth * atLimit.efficiency), 1e-12);
    EXPECT_GT(spilling.time, atLimit.time);
  }
}

// A block must fit on one processor: 1024 threads on an SM of 64K registers get 64 each, and a
// kernel wanting 96 spills the rest instead of failing to launch.
TEST(CostModel, LargeBlocksCapRegisters) {
  const HardwareProfile hw = profile("sm_90");
  KernelSummary k = elementwise(16 * kMiB);
  k.threadsPerBlock = 1024;
  k.blocks = 4096;
  k.registersPerThread = 64;
  const KernelCost fits = estimateKernel(k, hw);
  k.registersPerThread = 96;
  const KernelCost spills = estimateKernel(k, hw);
  ASSERT_TRUE(spills.feasible);
  EXPECT_GT(spills.memory, fits.memory);
}

// Register pressure lowers occupancy before it spills.
TEST(CostModel, RegisterPressureLowersOccupancy) {
  const HardwareProfile hw = profile("sm_90");
  KernelSummary k = elementwise(64 * kMiB);
  k.threadsPerBlock = 128;
  k.registersPerThread = 32;
  const KernelCost low = estimateKernel(k, hw);
  k.registersPerThread = 255;  // 65536 / (255 * 128) = 2 blocks per SM, 256 of 2048 threads
  const KernelCost high = estimateKernel(k, hw);
  EXPECT_EQ(low.efficiency, 1.0);
  EXPECT_NEAR(high.efficiency, 256.0 / 2048 / 0.3, 1e-9);
  EXPECT_GT(high.time, low.time);
}

// y = f(x) feeds a consumer that uses every y many times (a broadcast over a new axis, say):
// fusing means recomputing f for each use instead of reading y back. With f = tanh used 64 times
// the recomputation costs more than the saved launch and round trip; with a cheap f used 16 times
// it hides under the memory time.
TEST(CostModel, RecomputingExpensiveOpsCanOutweighTheSavedLaunch) {
  for (std::string_view name : {"sm_90", "sm_80", "gfx90a"}) {
    SCOPED_TRACE(name);
    const HardwareProfile hw = profile(name);
    const int64_t n = 16 * kMiB;
    KernelSummary producer = elementwise(n);
    producer.cheapOps = 0;
    producer.expensiveOps = n;
    const KernelSummary consumer = elementwise(n);
    const double apart = time(producer, hw) + time(consumer, hw);

    const KernelSummary fused = fuse(producer, consumer, 4 * n, consumer);
    const double fusedOnce = time(fused, hw);
    EXPECT_LT(fusedOnce, apart);

    KernelSummary expensive = fused;
    expensive.recomputeExpensiveOps = 63 * n;
    EXPECT_GT(time(expensive, hw), apart);

    KernelSummary cheap = fused;
    cheap.expensiveOps = 0;
    cheap.cheapOps += n;
    cheap.recomputeCheapOps = 15 * n;
    EXPECT_NEAR(time(cheap, hw), fusedOnce, 0.01 * fusedOnce);
    EXPECT_LT(time(cheap, hw), apart);
  }
}

TEST(CostModel, NewerGpusStreamFaster) {
  const KernelSummary k = elementwise(64 * kMiB, 2, 1);
  const double h100 = time(k, profile("sm_90"));
  const double a100 = time(k, profile("sm_80"));
  const double mi250x = time(k, profile("gfx90a"));
  EXPECT_LT(h100, a100);
  EXPECT_LT(a100, mi250x);
}

TEST(CostModel, HostNeedsEveryCore) {
  HardwareProfile hw = profile("host");
  hw.processors = 16;  // the model, not this machine's core count
  KernelSummary k = elementwise(64 * kMiB);
  k.threadsPerBlock = 1;
  k.blocks = 4;
  const KernelCost few = estimateKernel(k, hw);
  EXPECT_DOUBLE_EQ(few.efficiency, 4.0 / 16);
  k.blocks = 64;
  const KernelCost many = estimateKernel(k, hw);
  EXPECT_DOUBLE_EQ(many.efficiency, 1.0);
  EXPECT_GT(few.time, 3 * many.time);

  const HardwareProfile real = profile("host");
  if (real.processors > 1) {
    k.blocks = real.processors - 1;
    EXPECT_LT(estimateKernel(k, real).efficiency, 1.0);
  }
}

TEST(CostModel, MalformedSummaryIsAnInternalError) {
  const HardwareProfile hw = profile("sm_90");
  KernelSummary k;
  k.blocks = 0;
  EXPECT_THROW(estimateKernel(k, hw), stitch::Error);
  k.blocks = 1;
  k.bytesRead = -1;
  EXPECT_THROW(estimateKernel(k, hw), stitch::Error);
  k.bytesRead = 0;
  k.bytesInFlightPerThread = -1;
  EXPECT_THROW(estimateKernel(k, hw), stitch::Error);
}

// Issue 33: what hides DRAM latency is bytes in flight, not threads. A fused row kernel over a
// few hundred rows has a few hundred blocks, but its unrolled walk issues a row's loads at once:
// six 16-byte loads in flight per thread stream like six times the threads with one each. The
// credit starts at one vector load (a thread with less in flight is priced as the baseline) and
// stops at eight (an SM tracks a bounded number of misses). The host has no such curve.
TEST(CostModel, BytesInFlightHideLatencyLikeThreads) {
  for (std::string_view name : {"sm_90", "sm_80", "gfx90a"}) {
    SCOPED_TRACE(name);
    const HardwareProfile hw = profile(name);
    KernelSummary one = elementwise(kMiB);
    one.blocks = hw.processors / 4;
    const double base = estimateKernel(one, hw).efficiency;
    ASSERT_LT(base * 8, 1.0);
    KernelSummary six = one;
    six.bytesInFlightPerThread = 6 * 16;
    EXPECT_NEAR(estimateKernel(six, hw).efficiency, 6 * base, 1e-12);
    EXPECT_LT(estimateKernel(six, hw).time, estimateKernel(one, hw).time);
    // As many threads with one load each.
    KernelSummary wide = one;
    wide.blocks = 6 * one.blocks;
    EXPECT_NEAR(estimateKernel(wide, hw).efficiency, estimateKernel(six, hw).efficiency, 1e-12);
    KernelSummary less = one;
    less.bytesInFlightPerThread = 4;
    EXPECT_EQ(estimateKernel(less, hw).efficiency, base);
    KernelSummary many = one;
    many.bytesInFlightPerThread = 64 * 16;
    EXPECT_NEAR(estimateKernel(many, hw).efficiency, 8 * base, 1e-12);
  }
  // However much it keeps in flight, one block streams like a few processors, not a GPU: four
  // fair shares of the bandwidth.
  for (std::string_view name : {"sm_90", "sm_80", "gfx90a"}) {
    SCOPED_TRACE(name);
    const HardwareProfile hw = profile(name);
    KernelSummary one = elementwise(kMiB);
    one.blocks = 1;
    one.threadsPerBlock = 1024;
    one.bytesInFlightPerThread = 8 * 16;
    EXPECT_NEAR(estimateKernel(one, hw).efficiency, 4.0 / hw.processors, 1e-12);
  }
  const HardwareProfile host = profile("host");
  KernelSummary k = laidOutFor(elementwise(kMiB), host);
  k.blocks = 1;
  const double base = estimateKernel(k, host).efficiency;
  k.bytesInFlightPerThread = 6 * 16;
  EXPECT_EQ(estimateKernel(k, host).efficiency, base);
}
