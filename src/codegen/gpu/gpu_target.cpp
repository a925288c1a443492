#include "codegen/gpu/gpu_target.h"

#include <array>
#include <charconv>

#include "runtime/support/env.h"
#include "runtime/support/error.h"

namespace stitch::codegen {

namespace {
constexpr std::array<std::string_view, 3> kArchs = {"sm_90", "sm_80", "gfx90a"};
}

std::span<const std::string_view> knownGpuArchs() { return kArchs; }

std::string_view costProfileName(const GpuTarget& t) {
  if (t.dialect == "hip") return "gfx90a";
  return t.computeCapability >= 90 ? "sm_90" : "sm_80";
}

GpuTarget gpuTarget(std::string_view arch) {
  GpuTarget t;
  t.arch = std::string(arch);
  if (arch == "gfx90a") {  // MI200: 110 CUs (MI210: 104), wave64
    t.dialect = "hip";
    t.warpSize = 64;
    t.smCount = 110;
    return t;
  }
  int cc = 0;
  if (arch.size() >= 5 && arch.substr(0, 3) == "sm_") {
    auto [end, ec] = std::from_chars(arch.data() + 3, arch.data() + arch.size(), cc);
    if (ec != std::errc() || end != arch.data() + arch.size()) cc = 0;
  }
  STITCH_CHECK(cc >= 70, ErrorCode::InvalidArgument,
               "unknown GPU target '{}'; valid targets: {} (or another sm_XY with XY >= 70)", arch,
               env::joinChoices(kArchs));
  t.dialect = "cuda";
  t.computeCapability = cc;
  t.warpSize = 32;
  t.smCount = cc >= 90 ? 132 : cc >= 80 ? 108 : 80;  // H100 SXM, A100, V100
  return t;
}

}  // namespace stitch::codegen
