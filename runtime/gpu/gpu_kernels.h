// GPU kernels: artifact code compiled by NVRTC/hipRTC, cached, loaded on a device.
//
// Design note. The compile driver (src/driver) emits each kernel as CUDA or HIP source in two
// forms (16-byte aligned buffers, which allow vector accesses, and any alignment) with a cache
// key each (target/keys.h: the program's canonical serialization, every target field, the emit
// options, the compiler's name, version and options, a digest of the device headers). The
// payload is the cubin or HSA code object. A memory hit returns the loaded module; a disk hit
// loads the binary (no compile); a miss compiles, stores and loads. Compilation needs no device
// (compileCode below: `stitch codegen`, the CI compile tests); loading and launching do.
//
// Each kernel has one entry per phase and, with several phases, a cooperative entry running
// them all with grid barriers in between. The cooperative entry is used only when the device
// supports cooperative launch, and its grid is the occupancy calculator's bound of co-resident
// blocks (blocks per multiprocessor x multiprocessors): a grid barrier over blocks that are not
// all resident would deadlock.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/artifact.h"
#include "runtime/gpu/device.h"
#include "runtime/gpu/device_compiler.h"
#include "runtime/target.h"

namespace stitch::rt::gpu {

// The compiler as cache keys name it.
GpuCompilerId compilerId(const DeviceCompiler& compiler, const std::string& arch);

// Compiles one form of a kernel for `arch` (throws Compile with source and log). No device.
DeviceBinary compileCode(const KernelCode& code, const std::string& arch, DeviceCompiler& compiler);

// Code loaded on a device: what the cache holds. One code serves every artifact whose key it has
// (the signatures of a shape class, lower/size_args.h), so it holds what the code determines and
// nothing an artifact's sizes do: the grids are the GpuKernel's.
struct LoadedCode {
  std::vector<void*> phaseFns;    // the entries of code.phases, in order
  void* cooperativeFn = nullptr;  // null: single phase, or cooperative launch unavailable
  int64_t residentBlocks = 0;     // the cooperative entry's blocks that fit on the device at once
  int registers = -1;
  int64_t spillBytes = 0;
  std::shared_ptr<const void> module;
};

// Loads `binary`, compiled from `code`, on `device`.
std::shared_ptr<LoadedCode> loadCode(Device& device, const KernelCode& code,
                                     const std::vector<uint8_t>& binary);

// A kernel ready to launch: its loaded code, the graph values (or scratch slots) bound to the
// code's parameters, the values of its size arguments and its artifact's launches.
struct GpuKernel {
  std::vector<KernelBuffer> params;  // the entries' parameters, in order
  std::vector<bool> written;         // per param: some phase writes it
  std::vector<int64_t> sizes;        // the size arguments, passed by value after the buffers
  std::vector<std::string> checks;   // KernelArtifact::checks: non-empty, the entries take the
                                     // status words' pointer between the buffers and the sizes
  std::vector<EntryPoint> phases;    // per phase: grid and block
  int64_t cooperativeGrid = 0;       // blocks of the cooperative entry (when the code has one)
  int cooperativeBlock = 256;
  std::shared_ptr<const LoadedCode> code;
  void* cooperativeFn() const { return code->cooperativeFn; }
};

// The kernel of artifact `a` in form `form`, over its loaded code.
std::shared_ptr<GpuKernel> makeGpuKernel(const KernelArtifact& a, size_t form,
                                         std::shared_ptr<const LoadedCode> code);

}  // namespace stitch::rt::gpu
