// The cuda and hip backends: one class over the Device and DeviceCompiler interfaces.
//
// Design note. GpuBackend is the process-wide state of one GPU API: its device (device.h), its
// run-time compiler (device_compiler.h), the target the driver emits for (the device's arch,
// warp width and multiprocessor count, the compiler's identity, and the device's profile for the
// cost model: its limits and measured bandwidth, device_profile.h), and its kernel cache
// (runtime/kernel_cache.h) of loaded code. load() makes a GpuExecutable: each kernel's aligned
// form compiled and loaded at once (the kernels of a program in parallel, support/parallel.h),
// the any-alignment form only when a run's buffers need it;
// the slot plan (runtime/slots.h, each kernel a step); one device arena per stream
// (gpu_executor.h). A run binds the caller's pointers, points intermediates at their slots and
// launches every kernel on the caller's stream (gpu_executor.h).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/gpu/device.h"
#include "runtime/gpu/device_compiler.h"
#include "runtime/gpu/gpu_executor.h"
#include "runtime/gpu/gpu_kernels.h"

namespace stitch::rt::gpu {

class GpuBackend final : public Backend {
 public:
  // `api`: "cuda" or "hip", the name it is registered by.
  GpuBackend(std::string_view api, Device* device, DeviceCompiler* compiler);

  // The process-wide backend named `api` ("cuda" or "hip"), or nullptr with *why.
  static GpuBackend* get(std::string_view api, std::string* why = nullptr);

  Device& gpu() { return *device_; }
  DeviceCompiler& compiler() { return *compiler_; }
  // Form `form` of kernel `a`, compiled for this device (through the cache) and loaded.
  std::shared_ptr<const GpuKernel> kernel(const KernelArtifact& a, size_t form);

  std::string_view name() const override { return cuda_ ? "cuda" : "hip"; }
  const Target& target() const override { return target_; }
  DLDevice device() const override;
  void checkTensorDevice(DLDevice d, const std::string& what) const override;
  bool runsInPlace() const override { return false; }
  std::shared_ptr<const void> compile(const KernelArtifact& k) override { return kernel(k, 0); }
  std::shared_ptr<Executable> load(const ProgramArtifact& program) override;
  void* allocate(size_t bytes) override;
  void release(void* p) override;
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream) override;
  void synchronize(void* stream) override;
  CacheStats cacheStats() const override;
  PersistentLayers* persistentLayers() override { return &cache_->layers(); }

 private:
  bool cuda_;  // else hip
  Device* device_;
  DeviceCompiler* compiler_;
  Target target_;
  std::unique_ptr<KernelCache<LoadedCode>> cache_;
  ShapeClassCounter classes_;
};

// The backends registered as "cuda" and "hip" (registration::cuda(), registration::hip()): the
// backend of that API, or nullptr with *why.
std::unique_ptr<Backend> makeGpuBackend(std::string_view api, std::string* why);

// A program loaded on a GPU for one input signature.
class GpuExecutable final : public Executable {
 public:
  // cooperative: use cooperative entries where present (tests turn it off to check the
  // per-phase path).
  GpuExecutable(GpuBackend& backend, const ProgramArtifact& program, bool cooperative = true);
  void run(std::span<const BoundValue> bound, void* stream) override;

 private:
  GpuBackend& backend_;
  std::string name_;                     // the graph's, for messages
  std::vector<KernelArtifact> kernels_;  // kept for the lazily compiled forms
  bool cooperative_;
  std::mutex mu_;                                            // guards loaded_[1] (made lazily)
  std::vector<std::shared_ptr<const GpuKernel>> loaded_[2];  // [0]: aligned, [1]: any alignment
  SlotPlan slots_;
  int cooperativeKernels_ = 0;
  int checkedKernels_ = 0;  // kernels with index checks: their status words in each arena
  // Held from launch to status read by runs with checks: two threads' runs on one stream share
  // its arena's status words, and each must read its own run's.
  std::mutex checkMu_;
  GpuArenas arenas_;
};

}  // namespace stitch::rt::gpu
