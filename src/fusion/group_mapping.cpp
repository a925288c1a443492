// Group analysis: the mapping of a kernel's domain onto the machine and the launch the target
// schedules for it (design note in group.h).
#include <algorithm>
#include <numeric>
#include <optional>
#include <span>

#include "fusion/cost_model.h"
#include "fusion/group_analyzer.h"
#include "fusion/schedule.h"
#include "ir/signature.h"
#include "runtime/support/checked.h"
#include "runtime/support/error.h"

namespace stitch::fusion::analysis {

void Analyzer::layOut(Kernel& k) {
  const HardwareProfile& hw = ctx_.hw;
  Mapping& m = k.mapping;
  m.kind = kind_;
  m.domain = product(domain_);
  m.rows = rows_;
  m.rowLength = rowLength_;
  int warp = std::max(1, hw.warpSize);
  if (!hw.isGpu) {
    // The host runs a block per task on a thread pool; a task covers hw.taskElements elements
    // (the grain the cpu target schedules: src/target/cpu).
    const int64_t task = std::max<int64_t>(1, hw.taskElements);
    m.threadsPerBlock = 1;
    m.width = RowWidth::Thread;
    if (kind_ == MappingKind::Loop || kind_ == MappingKind::RowReduce)
      m.blocks = std::max<int64_t>(1, ceilDiv(m.domain, task));
    else m.blocks = std::max<int64_t>(1, std::min(rows_, ceilDiv(m.domain, task)));
    if (kind_ == MappingKind::AllReduce) m.width = RowWidth::MultiBlock;
    // A rows phase carrying column partials runs a task per worker (lower/column_partials.h):
    // a few hundred rows are several tasks, not the one their element count makes.
    if (std::find(places_.begin(), places_.end(), Place::Column) != places_.end())
      m.blocks = std::max<int64_t>(1, columnPartialWorkers(rows_, rowLength_, 0));
    return;
  }
  switch (kind_) {
    case MappingKind::Loop: {
      m.width = RowWidth::Thread;
      m.threadsPerBlock = 256;
      m.blocks = std::max<int64_t>(1, ceilDiv(ceilDiv(m.domain, 4), 256));
      break;
    }
    case MappingKind::RowReduce: {
      if (rowLength_ <= 32 * warp) {
        m.width = RowWidth::Warp;
        m.threadsPerBlock = 256 / warp * warp;
        m.blocks = std::max<int64_t>(1, ceilDiv(rows_, m.threadsPerBlock / warp));
        lanesPerRow_ = warp;
      } else if (rowLength_ <= 32768 || rows_ >= hw.processors) {
        m.width = RowWidth::Block;
        int64_t t = ceilDiv(ceilDiv(rowLength_, 8), warp) * warp;
        m.threadsPerBlock = static_cast<int>(std::clamp<int64_t>(t, 128, hw.maxThreadsPerBlock));
        m.blocks = std::max<int64_t>(1, rows_);
        lanesPerRow_ = m.threadsPerBlock;
      } else {
        m.width = RowWidth::MultiBlock;
        m.threadsPerBlock = std::min(1024, hw.maxThreadsPerBlock);
        int64_t splits = ceilDiv(rowLength_, 16384);
        m.blocks = rows_ * splits;
        lanesPerRow_ = m.threadsPerBlock * splits;
      }
      break;
    }
    case MappingKind::ColumnReduce:
    case MappingKind::MiddleReduce: {
      // Blocks own tiles of `warp` columns; 8 lanes of rows inside a block, combined in shared
      // memory. inner = kept extent after the last reduced axis, outer = the rest of the kept.
      int64_t inner = 1;
      for (size_t i = domain_.size(); i-- > 0 && !reduced_[i];) inner *= domain_[i];
      int64_t outer = rows_ / std::max<int64_t>(inner, 1);
      constexpr int64_t kLanes = 8;
      m.threadsPerBlock = static_cast<int>(warp * kLanes);
      int64_t tiles = std::max<int64_t>(1, outer * ceilDiv(inner, warp));
      // Too few column tiles to fill the machine: split the reduced rows across blocks too
      // (partials combined by atomics, or through the global scheme when the kernel uses the
      // result), keeping at least 4 rows per lane.
      int64_t want = 2 * static_cast<int64_t>(hw.processors);
      int64_t splits = 1;
      if (tiles < want)
        splits = std::clamp<int64_t>(ceilDiv(want, tiles), 1,
                                     std::max<int64_t>(1, rowLength_ / (kLanes * 4)));
      m.width = splits > 1 ? RowWidth::MultiBlock : RowWidth::Block;
      m.blocks = tiles * splits;
      lanesPerRow_ = kLanes * splits;
      break;
    }
    case MappingKind::AllReduce: {
      m.width = RowWidth::MultiBlock;
      m.threadsPerBlock = 256;
      m.blocks = std::clamp<int64_t>(ceilDiv(m.domain, 256 * 8), 1,
                                     static_cast<int64_t>(hw.processors) * 4);
      lanesPerRow_ = m.blocks * m.threadsPerBlock;
      break;
    }
  }
}

// On a GPU profile a kernel is priced on the launch that runs: the target's Scheduler lowers the
// candidate and decides its launch as the emitter will use it (fusion/schedule.h; for several
// phases, the cooperative launch). layOut's guess still names the mapping's width and feeds
// countWork's register and shared-memory estimates; its grid and block are replaced by
// applyLaunch. A host kernel's launch is its mapping's.
std::optional<PricedLaunch> scheduledLaunch(const PlanContext& ctx, const Kernel& k) {
  if (!ctx.hw.isGpu) return std::nullopt;
  STITCH_INTERNAL(ctx.scheduler != nullptr,
                  "profile {} is a GPU's, planned without its target's scheduler", ctx.hw.name);
  return ctx.scheduler->launch(ctx.graph, k, ctx.shapes);
}

void applyLaunch(Kernel& k, const PricedLaunch& launch) {
  k.summary.blocks = k.mapping.blocks = launch.blocks;
  k.summary.threadsPerBlock = k.mapping.threadsPerBlock = launch.threadsPerBlock;
  k.summary.bytesInFlightPerThread = launch.bytesInFlightPerThread;
  // A kernel whose long rows were split (lower/split_rows.h) costs a grid barrier at each of its
  // phase boundaries: before each combine, before each later stage's partials, before the
  // per-element phase. Other kernels keep countWork's count, one per globally communicated
  // producer (a second-level reduction's store phase is not counted apart).
  if (launch.split) k.summary.gridSyncs = launch.barriers;
}

Scheme communicationScheme(const Mapping& m) {
  switch (m.width) {
    case RowWidth::Thread: return Scheme::Local;
    case RowWidth::Warp: return Scheme::Warp;
    case RowWidth::Block: return Scheme::Block;
    case RowWidth::MultiBlock: return Scheme::Global;
  }
  return Scheme::Global;
}

}  // namespace stitch::fusion::analysis
