// The built-in hardware profiles.
//
// Every number is a datasheet figure or a well-known microbenchmark result, derated where the
// datasheet states a peak that memory-bound kernels never see. Conventions, so the profiles are
// comparable:
//   - memoryBandwidth is what a well-formed streaming kernel (vectorized copy) reaches, ~80-90%
//     of the HBM peak, not the peak itself;
//   - flops counts instructions issued per second (an FMA is one op, as hardware.h says), i.e.
//     half the datasheet "TFLOPS", which counts an FMA as two;
//   - expensiveFlops is the transcendental-unit (SFU / quarter-rate) issue rate: exp, log, rsqrt
//     map onto it with an instruction or two of range reduction around them;
//   - registers are 32-bit registers counted per thread lane, as the CUDA occupancy calculator
//     counts them.
// A backend lays its own machine's figures over these (the targets' facts(): src/target: a GPU's
// queried limits and measured bandwidth, runtime/gpu/device_profile.h; the host's,
// runtime/cpu/host_profile.h).
#include "fusion/hardware.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace stitch::fusion {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;

HardwareProfile sm90() {
  HardwareProfile p{};
  p.name = "sm_90";
  p.description = "NVIDIA H100 SXM (sm_90)";
  p.processors = 132;  // H100 SXM5: 132 SMs enabled (of 144 on the full GH100)
  p.warpSize = 32;
  p.maxThreadsPerProcessor = 2048;  // CUDA C Programming Guide, compute capability 9.0 table
  p.maxBlocksPerProcessor = 32;
  p.maxThreadsPerBlock = 1024;
  p.registersPerProcessor = 65536;  // 64K 32-bit registers per SM
  p.maxRegistersPerThread = 255;
  p.sharedMemoryPerProcessor = 228 * kKiB;  // 228 KiB per SM (the rest of the 256 KiB is L1)
  p.sharedMemoryPerBlock = 227 * kKiB;      // 227 KiB opt-in maximum per block (1 KiB reserved)
  p.cacheBytes = 50 * kMiB;                 // H100 SXM5: 50 MiB L2
  // HBM3 peak 3.35 TB/s; vectorized copy kernels reach ~90% of it.
  p.memoryBandwidth = 3.0e12;
  // Unloaded DRAM round trip ~500-600 ns in pointer-chasing microbenchmarks; the upper end.
  p.memoryLatency = 0.6e-6;
  // Launch to first instruction plus ramp-down, as seen in back-to-back launches of tiny kernels.
  p.launchOverhead = 2.5e-6;
  // 132 SMs * 128 FP32 lanes * 1.98 GHz boost = 33.5e12 instructions/s (67 TFLOPS counting FMA
  // as two).
  p.flops = 33.5e12;
  // 16 SFUs per SM against 128 FP32 lanes: 1/8 of the simple rate.
  p.expensiveFlops = p.flops / 8;
  // bar.sync: ~20-40 cycles plus waiting for the slowest warp; ~30 ns at ~1.9 GHz.
  p.blockSyncTime = 30e-9;
  // cooperative-groups grid.sync(): ~1-2 us measured (a global atomic round trip per block).
  p.gridSyncTime = 1.5e-6;
  p.isGpu = true;
  return p;
}

HardwareProfile sm80() {
  HardwareProfile p{};
  p.name = "sm_80";
  p.description = "NVIDIA A100 80GB (sm_80)";
  p.processors = 108;  // A100: 108 SMs enabled
  p.warpSize = 32;
  p.maxThreadsPerProcessor = 2048;  // CUDA C Programming Guide, compute capability 8.0 table
  p.maxBlocksPerProcessor = 32;
  p.maxThreadsPerBlock = 1024;
  p.registersPerProcessor = 65536;
  p.maxRegistersPerThread = 255;
  p.sharedMemoryPerProcessor = 164 * kKiB;  // 164 KiB per SM usable as shared memory
  p.sharedMemoryPerBlock = 163 * kKiB;      // 163 KiB opt-in maximum per block
  p.cacheBytes = 40 * kMiB;                 // A100: 40 MiB L2
  // HBM2e peak 2.04 TB/s; streaming kernels reach ~88% of it.
  p.memoryBandwidth = 1.8e12;
  p.memoryLatency = 0.6e-6;   // similar to H100 in pointer-chasing microbenchmarks
  p.launchOverhead = 2.5e-6;  // same driver path as H100; launch cost is host-side
  // 108 SMs * 64 FP32 lanes * 1.41 GHz = 9.75e12 instructions/s (19.5 TFLOPS counting FMA as two).
  p.flops = 9.75e12;
  // 16 SFUs per SM against 64 FP32 lanes: 1/4 of the simple rate.
  p.expensiveFlops = p.flops / 4;
  p.blockSyncTime = 30e-9;  // ~40 cycles at 1.41 GHz
  p.gridSyncTime = 1.5e-6;
  p.isGpu = true;
  return p;
}

HardwareProfile gfx90a() {
  HardwareProfile p{};
  p.name = "gfx90a";
  p.description = "AMD Instinct MI250X, one GCD (gfx90a)";
  p.processors = 110;               // 110 CUs per GCD (220 per MI250X)
  p.warpSize = 64;                  // wave64
  p.maxThreadsPerProcessor = 2048;  // 4 SIMDs * 8 waves * 64 lanes
  p.maxBlocksPerProcessor = 32;     // bounded by waves: 32 one-wave workgroups
  p.maxThreadsPerBlock = 1024;
  // 4 SIMDs * 512 unified VGPR/AGPR registers * 64 lanes. A wave may hold up to 512 of them
  // (256 arch VGPRs + 256 AGPRs, which the compiler uses as a cheap spill target).
  p.registersPerProcessor = 4 * 512 * 64;
  p.maxRegistersPerThread = 512;
  p.sharedMemoryPerProcessor = 64 * kKiB;  // 64 KiB LDS per CU, all of it available to one block
  p.sharedMemoryPerBlock = 64 * kKiB;
  p.cacheBytes = 8 * kMiB;  // 8 MiB L2 per GCD (no Infinity Cache on CDNA2)
  // HBM2e peak 1.6 TB/s per GCD; STREAM-like kernels reach ~1.3-1.4 TB/s.
  p.memoryBandwidth = 1.3e12;
  p.memoryLatency = 0.8e-6;  // CDNA2 DRAM latency is higher than NVIDIA's in microbenchmarks
  p.launchOverhead = 4e-6;   // HIP launches cost more host time than CUDA's
  // 110 CUs * 64 FP32 lanes * 1.7 GHz = 12e12 instructions/s (24 TFLOPS per GCD counting FMA as
  // two; packed FP32 doubles it but generic code rarely uses it).
  p.flops = 12e12;
  // v_exp_f32, v_log_f32, v_rsq_f32 are quarter rate.
  p.expensiveFlops = p.flops / 4;
  p.blockSyncTime = 40e-9;  // s_barrier; ~70 cycles at 1.7 GHz
  p.gridSyncTime = 2.5e-6;  // HIP cooperative grid sync is slower than CUDA's
  p.isGpu = true;
  return p;
}

// A nominal CPU: two cores of a small cloud VM with AVX2, the smallest machine the CPU backend is
// tested on. Fixed, not read from the machine, so that `stitch plan --target host` and the
// planner's tests give the same plans everywhere; the cpu backend lays the machine it runs on
// over it (threads, SIMD width, L2, measured copy bandwidth: runtime/cpu/host_profile.h,
// src/target/cpu). A "block" is one task on one core and a "thread" is one core's vector
// unit, so maxThreadsPerBlock and maxThreadsPerProcessor are 1 and warpSize is the f32 SIMD
// width.
HardwareProfile host() {
  constexpr int cores = 2;
  HardwareProfile p{};
  p.name = "host";
  p.description = "host CPU (nominal: 2 cores, AVX2)";
  p.processors = cores;
  p.warpSize = 8;  // AVX2: 8 f32 lanes
  p.maxThreadsPerProcessor = 1;
  p.maxBlocksPerProcessor = 1;
  p.maxThreadsPerBlock = 1;
  // 16 ymm registers hold 16 live vectors; spills go to L1 and are nearly free, and with one
  // "thread" per task the spill traffic the model charges is negligible anyway.
  p.registersPerProcessor = 16;
  p.maxRegistersPerThread = 16;
  // "Shared memory" is the core's private L2 (1-2 MiB on current server cores): what a row kept
  // on chip between a kernel's stages lives in (cost model: a fused row kernel walks its row once
  // per stage, and the walks after the first hit the cache when the row fits).
  p.sharedMemoryPerProcessor = 1 * kMiB;
  p.sharedMemoryPerBlock = 1 * kMiB;
  // The L3 such a VM's cores share is a slice of the socket's; the cpu backend reads its own.
  p.cacheBytes = 16 * kMiB;
  // Copy bandwidth of two cores of a small cloud VM or desktop (the cpu backend measures its own).
  p.memoryBandwidth = 15e9;
  p.memoryLatency = 0.1e-6;  // ~80-100 ns DRAM round trip
  p.launchOverhead = 5e-6;   // waking a thread pool and dispatching one task per core
  // Two 8-wide f32 ops a cycle per core at ~3 GHz: every x86 core since Haswell and Zen has two
  // (or more) vector ALU ports that take FMA, add, mul, compare, blend and logic ops, and the
  // loop vectorizer interleaves independent vectors of a streaming loop (and of its reductions'
  // accumulators) so both fill. (At one a cycle the fused bf16 row kernels, whose rounding after
  // every op is several integer ops, priced above twice their DRAM traffic on the measured
  // machine, and attention softmax and cross-entropy in bf16 planned as two kernels.)
  p.flops = cores * 3e9 * 8 * 2;
  // The expensive ops run vectorized at the SIMD width: the transcendentals as SLEEF's u10 vector
  // functions (src/codegen/llvm), ~12-16 instructions per vector (range reduction, a polynomial
  // of FMAs, the exponent put back): ~8 cycles a vector at two a cycle, 1/16 of the simple rate;
  // a vector divide (vdivps) has a throughput of 4-10 cycles on current cores, about the same.
  // (Scalar libm calls, as before SLEEF, cost ~20-50 cycles per element instead.)
  p.expensiveFlops = p.flops / 16;
  p.blockSyncTime = 0;    // a block is one thread: its barriers are no-ops
  p.gridSyncTime = 2e-6;  // a thread-pool barrier across all cores
  // A task of the thread pool covers ~16k elements (a loop phase's 16 chunks of 1024, or rows
  // adding up to as many): dispatching a task costs ~1 us, which that much work hides.
  p.taskElements = 16384;
  p.isGpu = false;
  return p;
}

const std::array<HardwareProfile, 4>& profiles() {
  static const std::array<HardwareProfile, 4> all = {sm90(), sm80(), gfx90a(), host()};
  return all;
}

}  // namespace

std::span<const HardwareProfile> builtinProfiles() { return profiles(); }

std::optional<HardwareProfile> findProfile(std::string_view target) {
  for (const HardwareProfile& p : profiles())
    if (p.name == target) return p;
  return std::nullopt;
}

std::string profileNames() {
  std::string names;
  for (const HardwareProfile& p : profiles()) {
    if (!names.empty()) names += ", ";
    names += p.name;
  }
  return names;
}

}  // namespace stitch::fusion
