// Group analysis: the traffic, work and resources of a kernel that the cost model prices (design
// note in group.h).
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

void Analyzer::countWork(Kernel& k, const PricedLaunch* launch) {
  const ir::Graph& g = ctx_.graph;
  KernelSummary& s = k.summary;
  int64_t domain = k.mapping.domain;
  // Stages: a value computed after a reduction in the kernel is a stage later than its inputs.
  std::vector<int> stages(nodes_.size(), 0);
  auto stage = [&](int n) -> int& { return stages[pos(n)]; };
  for (int n : k.nodes) {
    int st = 0;
    for (int o : g.node(n).operands)
      if (in(o)) st = std::max(st, stage(o) + (ctx_.kinds[o] == OpKind::Reduce ? 1 : 0));
    stage(n) = st;
  }
  // What a later stage needs again. The lowering (lower/kernel_program.h) never holds a value
  // computed in the kernel across a reduction: it loads the kernel's inputs again (the GPU
  // emitter keeps those loads in registers when the row's walk is unrolled) and recomputes the
  // elementwise values from them. So only external values read in several stages are live
  // across a barrier (registers, shared memory, or a second read); an elementwise value used
  // after its own stage costs its work again. (Counting those values as held, each re-read at
  // DRAM cost, priced a fused cross-entropy forward+backward at 3x its traffic: issue 14.)
  // need(n): the last stage that evaluates n. A reduction evaluates its operand in its own
  // stage; an elementwise consumer recomputed in a later stage evaluates its operands there too.
  // Nodes are in topological order (ids), so consumers are visited first going backwards.
  std::vector<int> need(nodes_.size(), 0);
  auto needAt = [&](int c) {
    return ctx_.kinds[c] == OpKind::Reduce ? stage(c) : std::max(stage(c), need[pos(c)]);
  };
  for (size_t i = k.nodes.size(); i-- > 0;) {
    int n = k.nodes[i];
    int last = stage(n);
    for (int c : ctx_.consumers[n])
      if (in(c)) last = std::max(last, needAt(c));
    need[pos(n)] = last;
  }
  int live = 0;
  std::vector<bool> recomputed(nodes_.size(), false);
  struct Reads {
    int value, first, last;  // an external value and the stages reading it
  };
  std::vector<Reads> external;
  for (int n : k.nodes) {
    if (place(n) == Place::Elem && need[pos(n)] > stage(n)) recomputed[pos(n)] = true;
    int last = ctx_.kinds[n] == OpKind::Reduce ? stage(n) : need[pos(n)];
    for (int o : g.node(n).operands) {
      if (in(o) || ctx_.kinds[o] == OpKind::Source) continue;
      auto it = std::find_if(external.begin(), external.end(),
                             [&](const Reads& r) { return r.value == o; });
      if (it == external.end()) {
        external.push_back({o, stage(n), last});
      } else {
        it->first = std::min(it->first, stage(n));
        it->last = std::max(it->last, last);
      }
    }
  }
  // Bytes of one row of the values live across stages, and what walking them again costs.
  int64_t liveRowBytes = 0, rereadBytes = 0;
  for (const Reads& r : external)
    if (r.last > r.first && ctx_.numel[r.value] == domain) {
      ++live;
      liveRowBytes = saturatingAdd(liveRowBytes, ctx_.bytes[r.value] / std::max<int64_t>(rows_, 1));
      rereadBytes =
          saturatingAdd(rereadBytes, saturatingMul(r.last - r.first, ctx_.bytes[r.value]));
    }

  // Traffic: every external value once; every output once.
  for (int o : k.inputs) s.bytesRead = saturatingAdd(s.bytesRead, ctx_.bytes[o]);
  for (int o : k.outputs) s.bytesWritten = saturatingAdd(s.bytesWritten, ctx_.bytes[o]);
  // Column partials: written by the rows phase and read by the combine phase right after. While
  // they fit in half the last-level cache (the other half for the rows streaming through it) the
  // combine phase reads them from there, and DRAM sees them once, when the cache writes them back;
  // larger ones are written and read again.
  int64_t partials = 0;
  for (int n : k.nodes) {
    if (place(n) != Place::Column) continue;
    const int64_t workers = columnPartialWorkers(
        rows_, rowLength_, ctx_.hw.isGpu ? std::max(1, ctx_.hw.processors) : 0);
    partials =
        saturatingAdd(partials, saturatingMul(saturatingMul(workers, rowLength_),
                                              ir::dtypeBytes(partialDType(g.node(n).type.dtype))));
  }
  s.bytesWritten = saturatingAdd(s.bytesWritten, partials);
  if (partials > ctx_.hw.cacheBytes / 2) s.bytesRead = saturatingAdd(s.bytesRead, partials);
  // An output per element computed from a grid barrier's result is stored by the walk of the
  // next barrier's phase A, or, after the last barrier, by a second walk over the rows
  // (lower/kernel_program.h): then the element-sized inputs are read again.
  std::vector<bool> after(nodes_.size(), false);  // computed from a grid barrier's result
  // A split by stages (lower/split_rows.h) has its walks counted from the lowered program below.
  const bool staged = launch && launch->staged;
  if (hasGlobalReduce_) {
    bool rewalk = false;
    int lastGlobal = -1;
    for (int n : k.nodes)
      if (place(n) == Place::Global) lastGlobal = std::max(lastGlobal, n);
    std::vector<int> needs(nodes_.size(), -1);  // the last barrier each value needs
    for (int n : k.nodes) {
      bool a = place(n) == Place::Global;
      int last = a ? n : -1;
      for (int o : g.node(n).operands)
        if (in(o)) {
          a = a || after[pos(o)];
          last = std::max(last, needs[pos(o)]);
        }
      after[pos(n)] = a;
      needs[pos(n)] = last;
      bool escapes = ctx_.isOutput[n];
      for (int c : ctx_.consumers[n]) escapes = escapes || (!in(c) && ctx_.live[c]);
      rewalk = rewalk || (a && escapes && place(n) == Place::Elem && last == lastGlobal);
    }
    if (rewalk && !staged)
      for (const Reads& r : external)
        if (ctx_.numel[r.value] == domain)
          s.bytesRead = saturatingAdd(s.bytesRead, ctx_.bytes[r.value]);
  }

  // Work, per element computed; partial values are recomputed by every element that uses them.
  for (int n : k.nodes) {
    OpKind kind = ctx_.kinds[n];
    int64_t work = 0, extra = 0;
    switch (place(n)) {
      case Place::Elem:
        work = domain;
        if (recomputed[pos(n)]) extra = domain;
        break;
      case Place::Row:
        work = kind == OpKind::Reduce ? ctx_.numel[g.node(n).operands[0]] : rows_;
        break;
      case Place::Partial:
        work = ctx_.numel[n];
        extra = std::max<int64_t>(0, domain - ctx_.numel[n]);
        break;
      case Place::Global:
      case Place::Column: work = ctx_.numel[g.node(n).operands[0]]; break;
      case Place::Combine:
      case Place::Once: work = ctx_.numel[n]; break;
    }
    switch (kind) {
      case OpKind::Cheap:
      case OpKind::Reduce:
      case OpKind::BroadcastTo:
      case OpKind::Source:
      case OpKind::Input:
        s.cheapOps = saturatingAdd(s.cheapOps, work);
        s.recomputeCheapOps = saturatingAdd(s.recomputeCheapOps, extra);
        break;
      case OpKind::Expensive:
        s.expensiveOps = saturatingAdd(s.expensiveOps, work);
        s.recomputeExpensiveOps = saturatingAdd(s.recomputeExpensiveOps, extra);
        break;
      case OpKind::Composite:
        // Opaque: about a dozen cheap and two expensive ops per element.
        s.cheapOps = saturatingAdd(s.cheapOps, saturatingMul(12, work));
        s.expensiveOps = saturatingAdd(s.expensiveOps, saturatingMul(2, work));
        break;
      case OpKind::Reshape:
      case OpKind::DataMovement: break;  // index arithmetic only
    }
  }

  const Mapping& m = k.mapping;
  s.blocks = m.blocks;
  s.threadsPerBlock = m.threadsPerBlock;
  // Registers: about two per op of the row walk. Ops after a grid barrier run in a later phase
  // (lower/kernel_program.h) and do not add to the walk's pressure; nor does a reshape, which
  // the lowering turns into no instruction (it keeps the flat index).
  // The combine phase's values do not either.
  size_t walkOps = 0;
  for (int n : k.nodes)
    walkOps +=
        after[pos(n)] || place(n) == Place::Combine || ctx_.kinds[n] == OpKind::Reshape ? 0 : 1;
  int base = 16 + 2 * static_cast<int>(std::min<size_t>(walkOps, 64));
  s.registersPerThread = base;
  int reductions = 0;
  for (int n : k.nodes) reductions += ctx_.kinds[n] == OpKind::Reduce;
  if (m.kind != MappingKind::Loop && staged) {
    // A reduction split by stages (lower/split_rows.h): each stage, and the per-element walk
    // after them, is a phase of its own, so nothing is held from one walk to the next; the later
    // walks read the rows again, from the last-level cache while what they walk fits in half of
    // it (the other half for the rest of the traffic, as for column partials above), else from
    // memory, once per walk.
    if (launch->rewalkSpan > ctx_.hw.cacheBytes / 2)
      s.bytesRead = saturatingAdd(s.bytesRead, launch->rewalkBytes);
    s.sharedMemoryPerBlock += static_cast<int64_t>(reductions) * 32 * 8;
    s.blockSyncs += 2 * reductions;
  } else if (m.kind != MappingKind::Loop && ctx_.hw.isGpu) {
    int64_t perThread = ceilDiv(rowLength_, std::max<int64_t>(lanesPerRow_, 1));
    int64_t liveRegs = saturatingMul(perThread, live);
    int64_t rowsPerBlock = m.width == RowWidth::Warp ? m.threadsPerBlock / ctx_.hw.warpSize : 1;
    if (liveRegs <= 64) {
      s.registersPerThread = base + static_cast<int>(liveRegs);
    } else {
      // Too many to keep in registers: hold them in shared memory, else read them again.
      // Estimates over sizes up to 2^62: saturating, so a huge row simply does not fit.
      int64_t smem = saturatingMul(saturatingMul(rowsPerBlock, rowLength_), 4 * live);
      if (m.kind != MappingKind::RowReduce)
        smem = saturatingMul(saturatingMul(m.threadsPerBlock, perThread), 4 * live);
      if (smem <= ctx_.hw.sharedMemoryPerBlock - 4096) {
        s.sharedMemoryPerBlock += smem;
        s.blockSyncs += 1;
      } else {
        s.bytesRead = saturatingAdd(s.bytesRead, saturatingMul(domain, 4 * live));
      }
    }
    // Partial results of each reduction combined across warps in shared memory.
    if (m.width == RowWidth::Block || m.width == RowWidth::MultiBlock) {
      s.sharedMemoryPerBlock += static_cast<int64_t>(reductions) * 32 * 8;
      s.blockSyncs += 2 * reductions;
    }
  } else if (m.kind == MappingKind::RowReduce && !ctx_.hw.isGpu) {
    // A host task walks its row once per stage and loads the live values again in each walk
    // (lower/kernel_program.h). When one row of them fits in the core's L2 (the profile's
    // "shared memory"), the walks after the first hit the cache, which streams several times
    // faster than DRAM and is not what bounds the kernel: they cost no memory traffic, so a
    // softmax reads its row once. A row too long for L2 is evicted before the next walk and is
    // read from DRAM again, once per later stage that needs it.
    if (liveRowBytes > ctx_.hw.sharedMemoryPerBlock)
      s.bytesRead = saturatingAdd(s.bytesRead, rereadBytes);
  }
  // One grid barrier per globally communicated producer, not per edge.
  std::vector<int> globalProducers;
  for (const Edge& e : k.edges)
    if (e.scheme == Scheme::Global) globalProducers.push_back(e.producer);
  std::sort(globalProducers.begin(), globalProducers.end());
  globalProducers.erase(std::unique(globalProducers.begin(), globalProducers.end()),
                        globalProducers.end());
  s.gridSyncs = static_cast<int>(globalProducers.size());
}

}  // namespace stitch::fusion::analysis
