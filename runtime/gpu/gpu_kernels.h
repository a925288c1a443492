// GPU kernels: kernel programs emitted as CUDA/HIP, compiled by NVRTC/hipRTC, cached, loaded.
//
// Design note. The cache key of a GPU kernel (gpuKernelKey, a pure function of program, target,
// emit options and compiler, testable without a GPU) is built like the host's (kernel_cache.h):
// the kernel program's canonical serialization (lower/serialize.h: every field), every field of
// the GpuTarget the scheduler and emitter read (arch, vendor and so the dialect, warp size,
// multiprocessor count, block limit, compute capability), the emit options (the alignment
// assumption), the compiler's name, version and options for the arch, a digest of the device
// headers the source includes (build constants, like the library version), and the library
// version. The payload is the cubin or HSA code object. The source is emitted only on a miss
// (compile, or load of a disk entry), never on a memory hit. A memory hit returns the loaded
// module; a disk hit loads the binary (no compile); a miss compiles, stores and loads.
// Compilation needs no device (compileProgram below: `stitch codegen`, the CI compile tests);
// loading and launching do.
//
// The key holds the whole program, so two programs that differ only in which graph values they
// read and write (the same layer repeated) are two entries although they print the same source:
// sharing them would need a proof that the emitter never reads those fields, which the key is
// meant not to depend on.
//
// Each kernel has one entry per phase and, with several phases, a cooperative entry running
// them all with grid barriers in between (cstyle_emitter.h). The cooperative entry is used only
// when the device supports cooperative launch, and its grid is the occupancy calculator's bound
// of co-resident blocks (blocks per multiprocessor x multiprocessors): a grid barrier over blocks
// that are not all resident would deadlock.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/gpu/cstyle_emitter.h"
#include "lower/kernel_program.h"
#include "runtime/backend.h"
#include "runtime/cpu/cpu_kernel.h"
#include "runtime/gpu/device.h"
#include "runtime/gpu/device_compiler.h"
#include "runtime/kernel_cache.h"

namespace stitch::rt::gpu {

// A kernel program compiled for one target, with no device involved.
struct CompiledProgram {
  codegen::GpuKernelSource source;
  DeviceBinary binary;
};

// The device templates as compiler headers.
std::vector<DeviceHeader> deviceHeaderList();

// Emits `p` for `target` and compiles it with `compiler` (throws Compile with source and log).
CompiledProgram compileProgram(const lower::KernelProgram& p, const codegen::GpuTarget& target,
                               DeviceCompiler& compiler, bool aligned);

// The compiler as cache keys name it.
struct GpuCompilerId {
  std::string name;                  // "nvrtc" / "hiprtc"
  std::string version;               // "13.0"
  std::vector<std::string> options;  // what compile() passes for the target's arch
};
GpuCompilerId compilerId(const DeviceCompiler& compiler, const std::string& arch);

// The cache key of program p emitted for target with options and compiled by compiler. Pure.
CacheKey gpuKernelKey(const lower::KernelProgram& p, const codegen::GpuTarget& target,
                      const codegen::GpuEmitOptions& options, const GpuCompilerId& compiler);

// Code loaded on a device: what the cache holds.
struct LoadedCode {
  std::vector<codegen::GpuLaunch> phases;
  std::vector<void*> phaseFns;
  void* cooperativeFn = nullptr;  // null: single phase, or cooperative launch unavailable
  int64_t cooperativeGrid = 0;    // blocks for the cooperative entry
  int block = 256;
  int registers = -1;
  int64_t spillBytes = 0;
  std::shared_ptr<const void> module;
};

// A kernel program ready to launch: its loaded code, and the graph values (or scratch slots)
// bound to the code's parameters.
struct GpuKernel {
  std::vector<cpu::KernelBuffer> params;  // the entries' parameters, in order
  std::vector<bool> written;              // per param: some phase writes it
  std::shared_ptr<const LoadedCode> code;
  void* cooperativeFn() const { return code->cooperativeFn; }
};

// The process-wide GPU state of one backend (cuda or hip): its device, compiler and kernel cache.
class GpuRuntime {
 public:
  // The runtime of `b` (Cuda or Hip); nullptr with *why when its device or compiler is missing.
  static GpuRuntime* get(Backend b, std::string* why = nullptr);

  Device& device() { return *device_; }
  DeviceCompiler& compiler() { return *compiler_; }
  const codegen::GpuTarget& target() const { return target_; }
  // Kernel program `p`, compiled for this device (through the cache) and loaded.
  std::shared_ptr<const GpuKernel> kernel(const lower::KernelProgram& p, bool aligned);
  CacheStats stats() const { return cache_->stats(); }

 private:
  GpuRuntime(Device* device, DeviceCompiler* compiler);
  Device* device_;
  DeviceCompiler* compiler_;
  codegen::GpuTarget target_;
  GpuCompilerId compilerId_;
  std::unique_ptr<KernelCache<LoadedCode>> cache_;
};

}  // namespace stitch::rt::gpu
