// The targets the driver tests build for: sm_90 and gfx90a (emitted and keyed with no GPU), and
// the host through the cpu backend's JIT target where this build has LLVM.
#pragma once

#include <vector>

#include "driver/driver.h"
#include "runtime/backend.h"

namespace stitch::testing {

inline std::vector<rt::Target> driverTargets() {
  std::vector<rt::Target> out = {target::namedTarget("sm_90"), target::namedTarget("gfx90a")};
#if defined(STITCH_HAVE_LLVM)
  out.push_back(rt::requireBackend("cpu").target());
#endif
  return out;
}

}  // namespace stitch::testing
