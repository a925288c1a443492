// What code is generated for: the description a backend gives the compile driver.
//
// A backend (runtime/backend.h) describes its machine here, in plain data, and the compile side's
// target of the same name (src/target/target.h) turns it into the planner's machine facts, the
// schedule and the emitted code, and the cache keys. Nothing in this header knows how code is
// generated.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stitch::rt {

// The machine host code is generated for: every attribute the object code depends on.
struct HostTarget {
  std::string triple;       // "x86_64-unknown-linux-gnu"
  std::string cpu;          // "znver3"
  std::string features;     // every feature LLVM reports for the host, "+avx2,-avx512f,...", sorted
  std::string llvmVersion;  // another LLVM may generate other code for the same IR
};

// How host code is compiled.
struct HostCompileOptions {
  int optLevel = 3;
  std::string mathLibrary;  // what transcendentals call, with its version: "sleef 3.5.1"
  // Phases touching at least this many bytes write their outputs with streaming stores
  // (runtime/cpu/streaming_stores.h); 0: never. The host compiler sets it from the last-level
  // cache (hostStreamingStoreBytes).
  int64_t streamingStoreBytes = 0;
};

// A GPU compiler as cache keys name it.
struct GpuCompilerId {
  std::string name;                  // "nvrtc" / "hiprtc"
  std::string version;               // "13.0"
  std::vector<std::string> options;  // what the compiler passes for the target's arch
};

// What a GPU backend read from its device and measured on it (runtime/gpu/device_profile.h), for
// the planner's hardware profile (target::Target::facts). Zero means unknown: the arch's built-in
// figure stands (always so when compiling without a device).
struct DeviceProfile {
  std::string name;    // "NVIDIA H100 80GB HBM3"
  std::string driver;  // the driver's version number ("13000"): with the name, what the
                       // measurement is cached under
  int maxThreadsPerProcessor = 0;
  int maxBlocksPerProcessor = 0;
  int maxThreadsPerBlock = 0;
  int registersPerProcessor = 0;         // 32-bit registers
  int64_t sharedMemoryPerProcessor = 0;  // bytes
  int64_t sharedMemoryPerBlock = 0;      // bytes, the opt-in maximum
  double clockHz = 0;                    // the SM clock the driver reports
  double memoryBandwidth = 0;            // bytes/s (read + written) a copy kernel reaches: measured
  bool operator==(const DeviceProfile&) const = default;
};

// What the cpu backend measured and read of its machine (runtime/cpu/host_profile.h), for the
// planner's host profile (target::Target::facts). Zero means unknown: the built-in host figure
// stands (always so for `stitch plan --target host`, which plans for the built-in profile).
struct HostProfile {
  std::string model;    // "AMD EPYC 9R14 96-Core Processor" (/proc/cpuinfo), else LLVM's CPU name
  int threads = 0;      // the threads CPU kernels run on, callers included (STITCH_NUM_THREADS)
  int simdWidth = 0;    // f32 lanes of the widest vector unit the CPU features offer
  int64_t l1Bytes = 0;  // one core's L1 data cache
  int64_t l2Bytes = 0;  // one core's L2
  int64_t l3Bytes = 0;  // the last-level cache one core sees (shared)
  double memoryBandwidth = 0;  // bytes/s (read + written) a copy over `threads` threads reaches
  bool operator==(const HostProfile&) const = default;
};

// The cost model's figures fitted to this machine's measured plans (runtime/cost_calibration.h,
// `stitch tune fit`), laid over the profile the target's facts() builds, after the measured host
// or device figures. Zero means not calibrated: the profile's figure stands.
struct CostCalibration {
  double memoryBandwidth = 0;  // bytes/s
  double cacheBandwidth = 0;   // bytes/s of a kernel whose traffic fits the last-level cache
  double memoryLatency = 0;    // s
  double launchOverhead = 0;   // s per kernel
  double flops = 0;            // simple f32 ops/s
  double expensiveFlops = 0;   // transcendental ops/s
  double gridSyncTime = 0;     // s per grid-wide barrier
  int samples = 0;             // the measured plans it was fitted to
  bool operator==(const CostCalibration&) const = default;
};

struct Target {
  // The backend the code is for, by its registered name (runtime/backend.h: "cpu", "cuda", "hip",
  // "reference", or one a build or a test registers): the compile side's Target of the same name
  // (src/target/target.h) generates its code.
  std::string backend = "cpu";
  std::string arch = "host";  // "host", "sm_90", "gfx90a"
  // GPU: measured on the device; 0 means the arch's nominal value (compiling with no device).
  int warpSize = 0;
  int processors = 0;
  // Cpu: the JIT's machine and options.
  HostTarget host;
  HostCompileOptions hostOptions;
  // Cpu: the machine's figures for the planner (all zero when unknown).
  HostProfile hostProfile;
  // Cuda, Hip: the run-time compiler (name empty when there is none: source only).
  GpuCompilerId compiler;
  // Cuda, Hip: the device's own figures (all zero without a device).
  DeviceProfile device;
  // Cpu, Cuda, Hip: the cost model fitted to this machine (all zero when it is not).
  CostCalibration calibration;
};

}  // namespace stitch::rt
