#include "runtime/gpu/cuda_api.h"

#include <array>
#include <memory>
#include <mutex>

#include "runtime/gpu/dynamic_library.h"
#include "runtime/support/error.h"

namespace stitch::rt::gpu::cu {

namespace {

struct Loaded {
  std::unique_ptr<DynamicLibrary> library;
  Api api;
  std::string why;
  bool ok = false;
};

Loaded& loaded() {
  static Loaded state;
  static std::once_flag once;
  std::call_once(once, [] {
    // libcuda.so.1 is what the driver installs; the unversioned name only exists with a toolkit.
    constexpr std::array<const char*, 2> kCandidates = {"libcuda.so.1", "libcuda.so"};
    std::string why;
    state.library = DynamicLibrary::open("STITCH_CUDA_LIBRARY", kCandidates, &why);
    if (!state.library) {
      state.why = "the CUDA driver library is not available: " + why;
      return;
    }
    std::string missing;
#define STITCH_CUDA_BIND(member, symbol, params) \
  state.library->bind(state.api.member, symbol, &missing);
    STITCH_CUDA_FUNCTIONS(STITCH_CUDA_BIND)
#undef STITCH_CUDA_BIND
    if (!missing.empty()) {
      state.why = fmt::format("{} lacks {} (driver too old?)", state.library->path(), missing);
      return;
    }
    state.api.libraryPath = state.library->path();
    state.ok = true;
  });
  return state;
}

}  // namespace

const Api* api(std::string* why) {
  Loaded& s = loaded();
  if (!s.ok && why) *why = s.why;
  return s.ok ? &s.api : nullptr;
}

std::string errorText(const Api& a, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (a.cuGetErrorName(r, &name) != CUDA_SUCCESS || name == nullptr)
    return fmt::format("CUresult {}", r);
  if (a.cuGetErrorString(r, &text) != CUDA_SUCCESS || text == nullptr) return name;
  return fmt::format("{} ({})", name, text);
}

}  // namespace stitch::rt::gpu::cu
