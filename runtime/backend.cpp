#include "runtime/backend.h"

#include <array>

#include "runtime/gpu/gpu_kernels.h"
#include "support/env.h"
#include "support/error.h"

namespace stitch::rt {

namespace {
constexpr std::array<std::string_view, 5> kChoices = {"auto", "cuda", "hip", "cpu", "reference"};
}

std::string_view backendName(Backend b) {
  switch (b) {
    case Backend::Reference: return "reference";
    case Backend::Cpu: return "cpu";
    case Backend::Cuda: return "cuda";
    case Backend::Hip: return "hip";
  }
  return "?";
}

std::span<const std::string_view> backendChoices() { return kChoices; }

bool backendAvailable(Backend b, std::string* why) {
  switch (b) {
    case Backend::Reference: return true;
    case Backend::Cpu:
#if defined(STITCH_HAVE_LLVM)
      return true;
#else
      if (why) *why = "this build of Stitch has no LLVM (configured with STITCH_ENABLE_LLVM=OFF)";
      return false;
#endif
    // A GPU backend needs its device (driver library + a device) and its run-time compiler.
    case Backend::Cuda:
    case Backend::Hip: return gpu::GpuRuntime::get(b, why) != nullptr;
  }
  return false;
}

Backend resolveBackend(std::string_view request) {
  if (request == "auto") {
    for (Backend b : {Backend::Cuda, Backend::Hip, Backend::Cpu, Backend::Reference})
      if (backendAvailable(b)) return b;
    STITCH_INTERNAL(false, "no backend available");
  }
  for (Backend b : {Backend::Reference, Backend::Cpu, Backend::Cuda, Backend::Hip}) {
    if (backendName(b) != request) continue;
    std::string why;
    STITCH_CHECK(backendAvailable(b, &why), ErrorCode::BackendUnavailable,
                 "backend '{}' is unavailable: {}", request, why);
    return b;
  }
  throwError(ErrorCode::InvalidArgument, fmt::format("unknown backend '{}'; valid backends: {}",
                                                     request, env::joinChoices(kChoices)));
}

}  // namespace stitch::rt
