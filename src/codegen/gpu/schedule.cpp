// The emitter's view of a program's launch (design note in schedule.h).
#include "codegen/gpu/schedule.h"

#include "lower/launch.h"

namespace stitch::codegen {

lower::LaunchTarget launchTarget(const GpuTarget& target) {
  return lower::LaunchTarget{target.warpSize, target.smCount, target.maxThreadsPerBlock};
}

KernelSchedule scheduleKernel(const lower::KernelProgram& p, const GpuTarget& target,
                              bool aligned) {
  const lower::LaunchTarget t = launchTarget(target);
  std::vector<lower::Levels> decided;
  if (!lower::launchDecidedFor(p, t, aligned)) decided = lower::decideLaunch(p, t, aligned);
  auto levels = [&](size_t i) -> const lower::Levels& {
    return decided.empty() ? p.phases[i].levels : decided[i];
  };
  KernelSchedule ks;
  ks.aligned = aligned;
  if (!p.phases.empty()) {
    ks.block = levels(0).threadsPerBlock;
    ks.index64 = levels(0).index64;
    ks.sharedBytes = levels(0).sharedBytes;
  }
  for (size_t i = 0; i < p.phases.size(); ++i) {
    const lower::Phase& ph = p.phases[i];
    const lower::Levels& l = levels(i);
    PhaseSchedule s;
    s.reduce = ph.reduce;
    s.rowMajor = l.rowMajor;
    s.vec = l.vectorWidth;
    s.lanes = l.lanes;
    s.unitsPerBlock = l.unitsPerBlock;
    s.items = l.items;
    s.unrolled = l.unrolled;
    s.blocks = l.blocks;
    std::vector<lower::IndexInfo> info = lower::analyzeIndices(ph, s.vec);
    s.vectorAccess.assign(ph.insts.size(), false);
    for (size_t k = 0; k < ph.insts.size(); ++k)
      s.vectorAccess[k] = lower::vectorizable(info, ph.insts[k], s.vec);
    ks.phases.push_back(std::move(s));
  }
  return ks;
}

}  // namespace stitch::codegen
