#include "runtime/gpu/nvrtc_api.h"

#include <array>
#include <memory>
#include <mutex>

#include "runtime/gpu/dynamic_library.h"
#include "runtime/support/error.h"

namespace stitch::rt::gpu::nvrtc {

namespace {

struct Loaded {
  std::unique_ptr<DynamicLibrary> library;
  RtcFunctions fns;
  std::string why;
  std::string path;
  bool ok = false;
};

Loaded& loaded() {
  static Loaded state;
  static std::once_flag once;
  std::call_once(once, [] {
    constexpr std::array<const char*, 8> kCandidates = {"libnvrtc.so",
                                                        "libnvrtc.so.13",
                                                        "libnvrtc.so.12",
                                                        "libnvrtc.so.11.2",
                                                        "/usr/local/cuda/lib64/libnvrtc.so",
                                                        "/usr/local/cuda/lib64/libnvrtc.so.13",
                                                        "/usr/local/cuda/lib64/libnvrtc.so.12",
                                                        "/usr/local/cuda/lib64/libnvrtc.so.11.2"};
    std::string why;
    state.library = DynamicLibrary::open("STITCH_NVRTC_LIBRARY", kCandidates, &why);
    if (!state.library) {
      state.why = "NVRTC is not available: " + why;
      return;
    }
    std::string missing;
    const DynamicLibrary& lib = *state.library;
    RtcFunctions& f = state.fns;
    lib.bind(f.errorString, "nvrtcGetErrorString", &missing);
    lib.bind(f.createProgram, "nvrtcCreateProgram", &missing);
    lib.bind(f.destroyProgram, "nvrtcDestroyProgram", &missing);
    lib.bind(f.compileProgram, "nvrtcCompileProgram", &missing);
    lib.bind(f.getProgramLogSize, "nvrtcGetProgramLogSize", &missing);
    lib.bind(f.getProgramLog, "nvrtcGetProgramLog", &missing);
    lib.bind(f.getCodeSize, "nvrtcGetCUBINSize", &missing);
    lib.bind(f.getCode, "nvrtcGetCUBIN", &missing);
    lib.bind(f.version, "nvrtcVersion", &missing);
    if (!missing.empty()) {
      state.why = fmt::format("{} lacks {} (NVRTC older than CUDA 11.1?)", lib.path(), missing);
      return;
    }
    state.path = lib.path();
    state.ok = true;
  });
  return state;
}

}  // namespace

const RtcFunctions* api(std::string* why) {
  Loaded& s = loaded();
  if (!s.ok && why) *why = s.why;
  return s.ok ? &s.fns : nullptr;
}

const std::string& libraryPath() { return loaded().path; }

}  // namespace stitch::rt::gpu::nvrtc
