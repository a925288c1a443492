// The backend factory, names and the host's memory (design notes in backend.h, host_backend.h).
#include "runtime/backend.h"

#include <fmt/format.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "runtime/gpu/gpu_backend.h"
#include "runtime/host_backend.h"
#include "support/checked.h"
#include "support/env.h"
#include "support/error.h"
#include "support/memory.h"
#if defined(STITCH_HAVE_LLVM)
#include "runtime/cpu/cpu_backend.h"
#endif

namespace stitch::rt {

namespace {

constexpr std::array<std::string_view, 5> kChoices = {"auto", "cuda", "hip", "cpu", "reference"};

bool hostAccessible(DLDeviceType d) {
  return d == kDLCPU || d == kDLCUDAHost || d == kDLROCMHost || d == kDLCUDAManaged;
}

// The oracle's backend: host memory, and nothing to load (the C API runs the reference
// interpreter on the graph itself).
class ReferenceBackend final : public HostMemoryBackend {
 public:
  BackendKind kind() const override { return BackendKind::Reference; }
  const Target& target() const override { return target_; }
  std::shared_ptr<const void> compile(const KernelArtifact&) override {
    throwError(ErrorCode::Internal, "the reference backend interprets graphs; it compiles no code");
  }
  std::shared_ptr<Executable> load(const ProgramArtifact&) override {
    throwError(ErrorCode::Internal, "the reference backend interprets graphs; it loads no code");
  }
  CacheStats cacheStats() const override { return {}; }
  PersistentLayers* persistentLayers() override { return nullptr; }

 private:
  Target target_ = [] {
    Target t;
    t.kind = BackendKind::Reference;
    return t;
  }();
};

}  // namespace

std::string_view backendName(BackendKind b) {
  switch (b) {
    case BackendKind::Reference: return "reference";
    case BackendKind::Cpu: return "cpu";
    case BackendKind::Cuda: return "cuda";
    case BackendKind::Hip: return "hip";
  }
  return "?";
}

std::span<const std::string_view> backendChoices() { return kChoices; }

std::string backendRequestFromEnv() {
  return env::getChoice("STITCH_BACKEND", kChoices).value_or("auto");
}

Backend* backendFor(BackendKind b, std::string* why) {
  struct Slot {
    std::once_flag once;
    std::unique_ptr<Backend> backend;
    std::string why;
  };
  static Slot slots[4];
  Slot& s = slots[static_cast<int>(b)];
  std::call_once(s.once, [&] {
    try {
      switch (b) {
        case BackendKind::Reference: s.backend = std::make_unique<ReferenceBackend>(); break;
        case BackendKind::Cpu:
#if defined(STITCH_HAVE_LLVM)
          s.backend = cpu::makeCpuBackend();
#else
          s.why = "this build of Stitch has no LLVM (configured with STITCH_ENABLE_LLVM=OFF)";
#endif
          break;
        // A GPU backend needs its device (driver library + a device) and its run-time compiler.
        case BackendKind::Cuda:
        case BackendKind::Hip: s.backend = gpu::makeGpuBackend(b, &s.why); break;
      }
    } catch (const std::exception& e) {
      s.backend.reset();
      s.why = e.what();
    }
  });
  if (!s.backend && why) *why = s.why;
  return s.backend.get();
}

Backend& requireBackend(BackendKind b) {
  std::string why;
  Backend* backend = backendFor(b, &why);
  STITCH_CHECK(backend != nullptr, ErrorCode::BackendUnavailable, "backend '{}' is unavailable: {}",
               backendName(b), why);
  return *backend;
}

bool backendAvailable(BackendKind b, std::string* why) { return backendFor(b, why) != nullptr; }

BackendKind resolveBackend(std::string_view request) {
  if (request == "auto") {
    for (BackendKind b :
         {BackendKind::Cuda, BackendKind::Hip, BackendKind::Cpu, BackendKind::Reference})
      if (backendAvailable(b)) return b;
    STITCH_INTERNAL(false, "no backend available");
  }
  for (BackendKind b :
       {BackendKind::Reference, BackendKind::Cpu, BackendKind::Cuda, BackendKind::Hip}) {
    if (backendName(b) != request) continue;
    std::string why;
    STITCH_CHECK(backendAvailable(b, &why), ErrorCode::BackendUnavailable,
                 "backend '{}' is unavailable: {}", request, why);
    return b;
  }
  throwError(ErrorCode::InvalidArgument, fmt::format("unknown backend '{}'; valid backends: {}",
                                                     request, env::joinChoices(kChoices)));
}

void HostMemoryBackend::checkTensorDevice(DLDevice d, const std::string& what) const {
  STITCH_CHECK(hostAccessible(d.device_type), ErrorCode::InvalidArgument,
               "{} is on DLPack device type {}, but the {} backend needs host memory (kDLCPU)",
               what, static_cast<int>(d.device_type), name());
}

void* HostMemoryBackend::allocate(size_t bytes) {
  // Checked before the round-up below, which would wrap SIZE_MAX to a tiny block.
  STITCH_CHECK(bytes <= static_cast<uint64_t>(hostMemoryBytes()), ErrorCode::OutOfMemory,
               "stitch_engine_alloc: {} bytes is more than this machine's memory, {}", bytes,
               bytesText(hostMemoryBytes()));
  void* p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  STITCH_CHECK(p != nullptr, ErrorCode::OutOfMemory, "cannot allocate {} bytes", bytes);
  return p;
}

void HostMemoryBackend::release(void* p) { std::free(p); }

void HostMemoryBackend::copy(void* dst, const void* src, size_t bytes, CopyKind, void*) {
  std::memmove(dst, src, bytes);
}

}  // namespace stitch::rt
