// The emitter's view of a program's launch (design note in schedule.h).
#include "codegen/gpu/schedule.h"

#include "lower/launch.h"
#include "runtime/support/error.h"

namespace stitch::codegen {

lower::LaunchTarget launchTarget(const GpuTarget& target) {
  return lower::LaunchTarget{target.warpSize, target.smCount, target.maxThreadsPerBlock};
}

KernelSchedule scheduleKernel(const lower::KernelProgram& p, const GpuTarget& target,
                              bool aligned) {
  STITCH_INTERNAL(lower::launchDecidedFor(p, launchTarget(target), aligned),
                  "kernel program {} was not scheduled for {} with {} buffers: its target's "
                  "schedule() decides the launch the emitter prints (target/gpu/gpu_schedule.h)",
                  p.name, target.arch, aligned ? "aligned" : "unaligned");
  auto levels = [&](size_t i) -> const lower::Levels& { return p.phases[i].levels; };
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
