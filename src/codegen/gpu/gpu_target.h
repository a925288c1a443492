// GPU targets the CUDA/HIP code generator knows: what the generated code depends on.
//
// A target is an architecture name (the one NVRTC/hipRTC compile for and the kernel cache keys
// on) plus the few machine facts the schedule uses: the warp width (32 on NVIDIA, 64 on gfx90a:
// it fixes the shuffle-reduction shapes) and the multiprocessor count (it caps grid-stride
// grids). With a device present the runtime fills smCount from it; without one (stitch codegen,
// CI) the datasheet figure of the architecture's flagship part is used.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace stitch::codegen {

struct GpuTarget {
  std::string arch;  // "sm_90", "sm_80", "gfx90a"
  // The C-style emitter's dialect: "cuda" (NVIDIA: NVRTC) or "hip" (AMD: hipRTC); the source
  // language the backend's compiler reads.
  std::string dialect = "cuda";
  int warpSize = 32;
  int smCount = 132;
  int maxThreadsPerBlock = 1024;
  int computeCapability = 0;  // NVIDIA: major * 10 + minor (90 for sm_90); AMD: 0
};

// The target named `arch` (sm_80, sm_90, other sm_XY with XY >= 70, gfx90a). Throws
// InvalidArgument listing the valid names for anything else.
GpuTarget gpuTarget(std::string_view arch);

// The cost-model profile (src/fusion/hardware.h) that prices plans for t: its family's
// ("sm_90" for sm_90 and later, "sm_80" for earlier NVIDIA parts, "gfx90a").
std::string_view costProfileName(const GpuTarget& t);

// The architecture names accepted by gpuTarget, for messages and the CLI.
std::span<const std::string_view> knownGpuArchs();

}  // namespace stitch::codegen
