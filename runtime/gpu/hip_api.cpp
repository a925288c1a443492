#include "runtime/gpu/hip_api.h"

#include <array>
#include <memory>
#include <mutex>

#include "runtime/gpu/dynamic_library.h"
#include "runtime/support/error.h"

namespace stitch::rt::gpu::hip {

namespace {

struct Loaded {
  std::unique_ptr<DynamicLibrary> library;
  Api api;
  RtcFunctions rtc;
  std::string apiWhy, rtcWhy;
  bool apiOk = false, rtcOk = false;
};

Loaded& loaded() {
  static Loaded state;
  static std::once_flag once;
  std::call_once(once, [] {
    // The versioned soname first: Debian's libamdhip64-5 ships only libamdhip64.so.5 (the bare
    // name comes with -dev), and our declarations are HIP 5's.
    constexpr std::array<const char*, 2> kCandidates = {"libamdhip64.so.5", "libamdhip64.so"};
    std::string why;
    state.library = DynamicLibrary::open("STITCH_HIP_LIBRARY", kCandidates, &why);
    if (!state.library) {
      state.apiWhy = state.rtcWhy = "the HIP runtime library is not available: " + why;
      return;
    }
    const DynamicLibrary& lib = *state.library;

    std::string missing;
#define STITCH_HIP_BIND(member, symbol, ret, params) lib.bind(state.api.member, symbol, &missing);
    STITCH_HIP_FUNCTIONS(STITCH_HIP_BIND)
#undef STITCH_HIP_BIND
    std::string optional;
    lib.bind(state.api.hipModuleLaunchCooperativeKernel, "hipModuleLaunchCooperativeKernel",
             &optional);
    state.api.libraryPath = lib.path();
    state.apiOk = missing.empty();
    if (!state.apiOk) state.apiWhy = fmt::format("{} lacks {}", lib.path(), missing);

    missing.clear();
    RtcFunctions& f = state.rtc;
    lib.bind(f.errorString, "hiprtcGetErrorString", &missing);
    lib.bind(f.createProgram, "hiprtcCreateProgram", &missing);
    lib.bind(f.destroyProgram, "hiprtcDestroyProgram", &missing);
    lib.bind(f.compileProgram, "hiprtcCompileProgram", &missing);
    lib.bind(f.getProgramLogSize, "hiprtcGetProgramLogSize", &missing);
    lib.bind(f.getProgramLog, "hiprtcGetProgramLog", &missing);
    lib.bind(f.getCodeSize, "hiprtcGetCodeSize", &missing);
    lib.bind(f.getCode, "hiprtcGetCode", &missing);
    lib.bind(f.version, "hiprtcVersion", &missing);
    state.rtcOk = missing.empty();
    if (!state.rtcOk)
      state.rtcWhy =
          fmt::format("{} lacks {} (hipRTC moved to libhiprtc.so in ROCm 6)", lib.path(), missing);
  });
  return state;
}

}  // namespace

const Api* api(std::string* why) {
  Loaded& s = loaded();
  if (!s.apiOk && why) *why = s.apiWhy;
  return s.apiOk ? &s.api : nullptr;
}

const RtcFunctions* rtc(std::string* why) {
  Loaded& s = loaded();
  if (!s.rtcOk && why) *why = s.rtcWhy;
  return s.rtcOk ? &s.rtc : nullptr;
}

std::string errorText(const Api& a, hipError_t e) {
  const char* name = a.hipGetErrorName(e);
  const char* text = a.hipGetErrorString(e);
  if (name == nullptr) return fmt::format("hipError_t {}", e);
  if (text == nullptr || std::string_view(text) == name) return name;
  return fmt::format("{} ({})", name, text);
}

}  // namespace stitch::rt::gpu::hip
