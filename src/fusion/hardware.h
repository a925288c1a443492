// Hardware profiles the cost model prices kernels for.
//
// A profile is a handful of numbers per target: memory bandwidth and latency, launch overhead,
// parallel resources (SMs/CUs/cores, resident threads and blocks, warp width), on-chip memory,
// and arithmetic throughput. The built-in profiles are datasheet figures derated to what
// memory-bound kernels reach in practice (see hardware.cpp for sources); the backends lay their
// own machine's figures over them (each target's facts(), src/target: runtime/gpu/device_profile.h,
// runtime/cpu/host_profile.h), while findProfile() stays the fixed built-in figures.
//
// The host profile maps the CPU onto the same vocabulary: a processor is a core, a block is one
// task on one core and a thread is that core's vector unit (so maxThreadsPerBlock is 1 and
// warpSize the f32 SIMD width); its "shared memory" is the core's private L2.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace stitch::fusion {

struct HardwareProfile {
  std::string name;         // "sm_90", "sm_80", "gfx90a", "host"
  std::string description;  // "NVIDIA H100 SXM (sm_90)"
  int processors;           // SMs, CUs, or CPU cores
  int warpSize;             // 32 on NVIDIA, 64 on gfx90a, SIMD lanes (f32) on the host
  int maxThreadsPerProcessor;
  int maxBlocksPerProcessor;
  int maxThreadsPerBlock;
  int registersPerProcessor;  // 32-bit registers
  int maxRegistersPerThread;
  int64_t sharedMemoryPerProcessor;  // bytes
  int64_t sharedMemoryPerBlock;      // bytes, the most one block may use
  // The last-level cache all processors share (a GPU's L2, the host's L3): scratch a kernel writes
  // and reads back while it fits there is read from it (cost model: column partials).
  int64_t cacheBytes;
  double memoryBandwidth;  // bytes/s that a well-formed streaming kernel reaches (not peak)
  // Bytes/s of a kernel whose whole traffic fits cacheBytes: its data stay in the last-level
  // cache between runs (a model's small pieces, one call after another). 0: priced like DRAM
  // traffic. No built-in profile sets it; a fitted calibration may (fusion/cost_fit.h,
  // runtime/cost_calibration.h), so that plans change only where a machine's records asked.
  double cacheBandwidth = 0;
  double memoryLatency;   // s, a dependent DRAM round trip
  double launchOverhead;  // s per kernel launch (host-side + ramp)
  double flops;           // simple f32 ops/s (add, mul, fma counted as one: issue rate)
  double expensiveFlops;  // transcendental ops/s (exp, log, tanh, erf, rsqrt, ...)
  double blockSyncTime;   // s per __syncthreads-style barrier
  double gridSyncTime;    // s per grid-wide barrier (cooperative launch)
  // Host: the elements one task of the thread pool covers (the grain the cpu target schedules,
  // src/target/cpu); 0 on GPUs.
  int64_t taskElements = 0;
  bool isGpu;
};

// The built-in profiles: sm_90 (H100), sm_80 (A100), gfx90a (MI250X, one GCD), host.
std::span<const HardwareProfile> builtinProfiles();
// A profile by target name; nullopt if unknown.
std::optional<HardwareProfile> findProfile(std::string_view target);
// "sm_90, sm_80, gfx90a, host", for error messages.
std::string profileNames();

}  // namespace stitch::fusion
