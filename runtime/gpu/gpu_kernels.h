// GPU kernels: kernel programs emitted as CUDA/HIP, compiled by NVRTC/hipRTC, cached, loaded.
//
// Design note. The cache key of a GPU kernel is the FNV-1a hash of its generated source (which
// spells out every shape, dtype, mapping, vector width and the alignment assumption), the
// architecture it is compiled for (the device's own, e.g. "sm_90", so a cubin never runs on
// another architecture), the compiler and its options, and the library version; the payload is
// the cubin or HSA code object. A memory hit returns the loaded module; a disk hit loads the
// binary (no compile); a miss compiles, stores and loads. Compilation needs no device
// (compileProgram below: `stitch codegen`, the CI compile tests); loading and launching do.
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

// Code loaded on a device: what the cache holds. Two programs that differ only in which graph
// values they read and write print the same source, so they share this.
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
  std::unique_ptr<KernelCache<LoadedCode>> cache_;
};

}  // namespace stitch::rt::gpu
