// The cuda and hip backends (design note in gpu_backend.h).
#include "runtime/gpu/gpu_backend.h"

#include <algorithm>

#include "runtime/cost_calibration.h"
#include "runtime/gpu/device_profile.h"
#include "runtime/support/error.h"
#include "runtime/support/logging.h"
#include "runtime/support/parallel.h"

namespace stitch::rt::gpu {

std::unique_ptr<Backend> makeGpuBackend(std::string_view api, std::string* why) {
  STITCH_INTERNAL(api == "cuda" || api == "hip", "'{}' is not a GPU API", api);
  bool cuda = api == "cuda";
  Device* device = cuda ? cudaDevice(why) : hipDevice(why);
  if (!device) return nullptr;
  DeviceCompiler* compiler = cuda ? nvrtcCompiler(why) : hiprtcCompiler(why);
  if (!compiler) return nullptr;
  return std::make_unique<GpuBackend>(api, device, compiler);
}

GpuBackend* GpuBackend::get(std::string_view api, std::string* why) {
  STITCH_INTERNAL(api == "cuda" || api == "hip", "'{}' is not a GPU API", api);
  return static_cast<GpuBackend*>(backendFor(api, why));
}

GpuBackend::GpuBackend(std::string_view api, Device* device, DeviceCompiler* compiler)
    : cuda_(api == "cuda"), device_(device), compiler_(compiler) {
  target_.backend = std::string(api);
  target_.arch = device->arch();
  target_.processors = device->smCount();
  target_.warpSize = device->warpSize();
  target_.compiler = compilerId(*compiler_, target_.arch);
  // The planner prices this very device (target::Target::facts): its limits, and its bandwidth
  // measured once and cached on disk (device_profile.h).
  target_.device = probeDeviceProfile(*device_, *compiler_, target_.arch);
  // And with the cost model fitted to this device's measured plans, if any (cost_calibration.h).
  target_.calibration = probeCostCalibration(target_);
  cache_ = KernelCache<LoadedCode>::fromEnv(/*memoryCapacity=*/4096);
  log().debug("{} backend: {} ({} multiprocessors, warp {}), compiler {}", device->backend(),
              target_.arch, target_.processors, target_.warpSize, compiler->name());
}

std::shared_ptr<const GpuKernel> GpuBackend::kernel(const KernelArtifact& a, size_t form) {
  const KernelCode& code = a.forms.at(form);
  auto compile = [&]() -> std::vector<uint8_t> {
    DeviceBinary bin = compileCode(code, target_.arch, *compiler_);
    log().debug("compiled {} kernel {:016x} in {:.1f} ms ({} registers, {} bytes)", target_.arch,
                code.key.hash(), bin.seconds * 1e3, bin.registers, bin.bytes.size());
    return std::move(bin.bytes);
  };
  auto load = [&](const std::vector<uint8_t>& bytes) { return loadCode(*device_, code, bytes); };
  std::shared_ptr<const LoadedCode> loaded = cache_->getOrCompile(code.key, compile, load);
  classes_.note(code.key, a.sizes);
  return makeGpuKernel(a, form, std::move(loaded));
}

CacheStats GpuBackend::cacheStats() const {
  CacheStats s = cache_->stats();
  classes_.addTo(s);
  return s;
}

DLDevice GpuBackend::device() const { return DLDevice{cuda_ ? kDLCUDA : kDLROCM, 0}; }

void GpuBackend::checkTensorDevice(DLDevice d, const std::string& what) const {
  const bool cuda = cuda_;
  DLDeviceType want = cuda ? kDLCUDA : kDLROCM;
  STITCH_CHECK(d.device_type == want || (cuda && d.device_type == kDLCUDAManaged),
               ErrorCode::InvalidArgument,
               "{} is on DLPack device type {}, but the {} backend needs device memory ({})", what,
               static_cast<int>(d.device_type), name(), cuda ? "kDLCUDA" : "kDLROCM");
  STITCH_CHECK(d.device_id == 0, ErrorCode::Unsupported,
               "{} is on device {}; this version of Stitch runs on device 0 only", what,
               d.device_id);
}

std::shared_ptr<Executable> GpuBackend::load(const ProgramArtifact& program) {
  return std::make_shared<GpuExecutable>(*this, program);
}

void* GpuBackend::allocate(size_t bytes) {
  device_->makeCurrent();
  return device_->allocate(std::max<size_t>(bytes, 1));
}

void GpuBackend::release(void* p) {
  device_->makeCurrent();
  device_->release(p);
}

void GpuBackend::copy(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream) {
  device_->makeCurrent();
  switch (kind) {
    case CopyKind::HostToDevice: device_->copyToDevice(dst, src, bytes, stream); break;
    case CopyKind::DeviceToHost: device_->copyToHost(dst, src, bytes, stream); break;
    case CopyKind::DeviceToDevice: device_->copyDeviceToDevice(dst, src, bytes, stream); return;
  }
  device_->synchronize(stream);  // the host buffer is the caller's again when copy returns
}

void GpuBackend::synchronize(void* stream) {
  device_->makeCurrent();
  device_->synchronize(stream);
}

GpuExecutable::GpuExecutable(GpuBackend& backend, const ProgramArtifact& program, bool cooperative)
    : backend_(backend),
      name_(program.name),
      kernels_(program.kernels),
      cooperative_(cooperative),
      arenas_(backend.gpu()) {
  // A program's kernels compile at once (STITCH_COMPILE_THREADS of them): a cold first run waits
  // for the slowest kernel rather than for their sum. Each lands at its index, and the first
  // failing kernel's error is the one reported, whatever the order the compiles finish in.
  loaded_[0].resize(kernels_.size());
  parallelForEach(kernels_.size(), compileThreads(),
                  [&](size_t i) { loaded_[0][i] = backend_.kernel(kernels_[i], 0); });
  for (const KernelArtifact& k : kernels_) {
    // Barrier words for every kernel that has a cooperative entry in some form: whether a
    // form's entry is usable depends on its occupancy, so count them all.
    if (!k.forms.front().cooperative.symbol.empty()) ++cooperativeKernels_;
    if (!k.checks.empty()) ++checkedKernels_;
  }
  slots_ = planGpuSlots(loaded_[0], program.external);
}

void GpuExecutable::run(std::span<const BoundValue> bound, void* stream) {
  Device& device = backend_.gpu();
  device.makeCurrent();
  bool aligned = true;
  thread_local std::vector<void*> values;
  values.clear();
  for (const BoundValue& b : bound) {
    if (values.size() <= static_cast<size_t>(b.value))
      values.resize(static_cast<size_t>(b.value) + 1, nullptr);
    values[static_cast<size_t>(b.value)] = b.data;
    aligned = aligned && reinterpret_cast<uintptr_t>(b.data) % 16 == 0;
  }
  std::span<const std::shared_ptr<const GpuKernel>> kernels = loaded_[0];
  if (!aligned) {
    std::lock_guard<std::mutex> lock(mu_);
    if (loaded_[1].empty()) {
      for (const KernelArtifact& k : kernels_)  // the last form assumes no alignment
        STITCH_INTERNAL(!k.forms.back().requiresAlignment, "kernel {} has no unaligned form",
                        k.name);
      std::vector<std::shared_ptr<const GpuKernel>> any(kernels_.size());
      parallelForEach(kernels_.size(), compileThreads(), [&](size_t i) {
        any[i] = backend_.kernel(kernels_[i], kernels_[i].forms.size() - 1);
      });
      loaded_[1] = std::move(any);
    }
    kernels = loaded_[1];
  }
  std::unique_lock<std::mutex> checking(checkMu_, std::defer_lock);
  if (checkedKernels_ > 0) checking.lock();
  const GpuArenas::Arena& arena =
      arenas_.forStream(stream, slots_, cooperativeKernels_, checkedKernels_);
  runGpuKernels(device, kernels, slots_, values, arena, stream, cooperative_);
  checkGpuIndices(device, kernels, arena, stream, name_);
}

}  // namespace stitch::rt::gpu

namespace stitch::rt::registration {

// Listed in runtime/CMakeLists.txt's built-in backends.
void cuda() {
  registerBackend(
      {"cuda", /*autoRank=*/0, [](std::string* why) { return gpu::makeGpuBackend("cuda", why); }});
}
void hip() {
  registerBackend(
      {"hip", /*autoRank=*/10, [](std::string* why) { return gpu::makeGpuBackend("hip", why); }});
}

}  // namespace stitch::rt::registration
