// The GPU targets' schedule for one machine and alignment variant (design note in the header).
#include "target/gpu/gpu_schedule.h"

#include "codegen/gpu/schedule.h"
#include "lower/launch.h"

namespace stitch::target {

lower::KernelProgram scheduledFor(const lower::KernelProgram& p, const codegen::GpuTarget& t,
                                  bool aligned) {
  lower::KernelProgram out = p;
  const lower::LaunchTarget launch = codegen::launchTarget(t);
  if (!lower::launchDecidedFor(out, launch, aligned)) lower::scheduleLaunch(out, launch, aligned);
  return out;
}

}  // namespace stitch::target
