// The launch schedule of kernel programs (design note in launch.h).
#include "lower/launch.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "runtime/support/dtype.h"

namespace stitch::lower {

namespace {

constexpr int64_t kDivisorCap = int64_t{1} << 40;
constexpr int64_t kMaxUnrolledItems = 8;
constexpr int kDefaultBlock = 256;

int64_t capped(int64_t d) { return std::min<int64_t>(d <= 0 ? kDivisorCap : d, kDivisorCap); }

int64_t pow2Ceil(int64_t x) {
  int64_t p = 1;
  while (p < x) p *= 2;
  return p;
}

// Loads and stores whose index is unit-stride over a group.
bool contiguous(const std::vector<IndexInfo>& info, const Inst& in) {
  return (in.kind == InstKind::Load || in.kind == InstKind::Store) &&
         info[static_cast<size_t>(in.args[0])].kind == IndexKind::Unit;
}

// The widest V (a power of two, V * bytes <= 16) for which every contiguous access is aligned.
int chooseVector(const Phase& ph, bool aligned) {
  if (!aligned) return 1;
  int maxBytes = 0;
  for (const Inst& in : ph.insts)
    if (in.kind == InstKind::Load || in.kind == InstKind::Store)
      maxBytes = std::max(maxBytes, ir::dtypeBytes(in.dtype));
  if (maxBytes == 0) return 1;
  for (int v = std::min(8, 16 / maxBytes); v > 1; v /= 2) {
    std::vector<IndexInfo> info = analyzeIndices(ph, v);
    bool any = false, ok = true;
    for (const Inst& in : ph.insts) {
      if (!contiguous(info, in)) continue;
      any = true;
      ok = ok && info[static_cast<size_t>(in.args[0])].divisor % v == 0;
    }
    if (any && ok) return v;
  }
  return 1;
}

}  // namespace

std::vector<IndexInfo> analyzeIndices(const Phase& ph, int vec) {
  std::vector<IndexInfo> info(ph.insts.size());
  // Blocks list their instructions in dependency order (a rewrite such as split_rows.h may give
  // an old id to an expression of newer ones, so id order is not enough).
  std::vector<int> order;
  for (const Block* b : {&ph.pre, &ph.post, &ph.elems}) {
    if (b == &ph.post)
      for (const Stage& st : ph.stages)
        order.insert(order.end(), st.body.insts.begin(), st.body.insts.end());
    order.insert(order.end(), b->insts.begin(), b->insts.end());
  }
  for (int id : order) {
    const size_t i = static_cast<size_t>(id);
    const Inst& in = ph.insts[i];
    IndexInfo& r = info[i];
    auto arg = [&](int k) { return info[static_cast<size_t>(in.args[k])]; };
    switch (in.kind) {
      case InstKind::Const:
        r = {IndexKind::Invariant, capped(in.ivalue < 0 ? -in.ivalue : in.ivalue)};
        break;
      case InstKind::UnitIndex: r = {IndexKind::Invariant, 1}; break;
      case InstKind::LoopIndex: r = {IndexKind::Unit, vec}; break;
      case InstKind::IAdd: {
        IndexInfo a = arg(0), b = arg(1);
        int64_t d = std::gcd(a.divisor, b.divisor);
        if (a.kind == IndexKind::Invariant && b.kind == IndexKind::Invariant)
          r = {IndexKind::Invariant, d};
        else if ((a.kind == IndexKind::Unit && b.kind == IndexKind::Invariant) ||
                 (a.kind == IndexKind::Invariant && b.kind == IndexKind::Unit))
          r = {IndexKind::Unit, d};
        else r = {IndexKind::Other, 1};
        break;
      }
      case InstKind::IMulC: {
        IndexInfo a = arg(0);
        if (a.kind == IndexKind::Invariant)
          r = {IndexKind::Invariant, capped(a.divisor * in.ivalue)};
        else r = {IndexKind::Other, 1};
        break;
      }
      case InstKind::IDivC: {
        IndexInfo a = arg(0);
        // floor((k0 + v) / c) is the same for v < V when V | c and V | k0.
        if (a.kind == IndexKind::Invariant ||
            (a.kind == IndexKind::Unit && in.ivalue % vec == 0 && a.divisor % vec == 0))
          r = {IndexKind::Invariant, 1};
        else r = {IndexKind::Other, 1};
        break;
      }
      case InstKind::IRemC: {
        IndexInfo a = arg(0);
        if (a.kind == IndexKind::Invariant) r = {IndexKind::Invariant, 1};
        else if (a.kind == IndexKind::Unit && in.ivalue % vec == 0 && a.divisor % vec == 0)
          r = {IndexKind::Unit, std::gcd(a.divisor, in.ivalue)};
        else r = {IndexKind::Other, 1};
        break;
      }
      case InstKind::Op:
      case InstKind::CheckIndex: {
        bool inv = true;
        for (int a : in.args)
          if (a >= 0 && info[static_cast<size_t>(a)].kind != IndexKind::Invariant) inv = false;
        r = {inv ? IndexKind::Invariant : IndexKind::Other, 1};
        break;
      }
      case InstKind::AccRead: r = {IndexKind::Invariant, 1}; break;
      case InstKind::Load:
      case InstKind::Store:
      case InstKind::Accumulate: r = {IndexKind::Other, 1}; break;
    }
  }
  return info;
}

bool vectorizable(const std::vector<IndexInfo>& info, const Inst& in, int vec) {
  return vec > 1 && contiguous(info, in) &&
         info[static_cast<size_t>(in.args[0])].divisor % vec == 0;
}

LaunchTarget launchTarget(const fusion::HardwareProfile& hw) {
  return LaunchTarget{hw.warpSize, hw.processors, hw.maxThreadsPerBlock};
}

std::vector<Levels> decideLaunch(const KernelProgram& p, const LaunchTarget& t, bool aligned) {
  const int warp = t.warpSize;
  int64_t biggest = 0;
  for (const Param& q : p.params) biggest = std::max(biggest, q.elements);
  for (const Phase& ph : p.phases)
    biggest = std::max({biggest, ph.total, ph.units * std::max<int64_t>(ph.rowLength, 1)});
  // Grid-stride loops add up to a grid's worth of threads beyond the domain.
  const bool index64 = biggest >= (int64_t{1} << 30);

  // Pass 1: lanes and vector widths; the block is the widest row a phase wants. Not a phase of one
  // unit in a kernel with others (the grid barrier's reduction of every row's loss, a split's
  // combine): it runs on one block whatever its width, and the block it asked for would be every
  // phase's, a 1024-thread block over rows of a thousand (a cross-entropy's logits) for the sake
  // of one block's walk.
  int block = kDefaultBlock;
  bool manyUnits = false;
  for (const Phase& ph : p.phases) manyUnits = manyUnits || ph.units > 1;
  std::vector<Levels> out;
  out.reserve(p.phases.size());
  for (const Phase& ph : p.phases) {
    Levels s = ph.levels;
    s.vectorWidth = chooseVector(ph, aligned);
    s.rowMajor = true;
    s.lanes = 1;
    s.unitsPerBlock = 1;
    s.items = 1;
    if (ph.reduce) {
      // The row is contiguous when the innermost non-trivial axis is reduced.
      int last = -1;
      for (size_t a = 0; a < ph.domain.size(); ++a)
        if (ph.domain[a] != 1) last = static_cast<int>(a);
      s.rowMajor = last >= 0 && ph.reduced[static_cast<size_t>(last)];
      if (!s.rowMajor) s.vectorWidth = 1;
      if (s.rowMajor) {
        int64_t groups = (ph.rowLength + s.vectorWidth - 1) / s.vectorWidth;
        s.lanes = static_cast<int>(std::min<int64_t>(
            pow2Ceil(std::max<int64_t>(1, (groups + 3) / 4)), t.maxThreadsPerBlock));
        if (s.lanes > warp && (ph.units > 1 || !manyUnits)) block = std::max(block, s.lanes);
      }
    }
    out.push_back(s);
  }
  // Pass 2: units per block, items, grids, shared memory.
  int sharedBytes = 0;
  for (size_t i = 0; i < p.phases.size(); ++i) {
    const Phase& ph = p.phases[i];
    Levels& s = out[i];
    if (!ph.reduce) {
      int64_t perBlock = int64_t{block} * s.vectorWidth;
      int64_t want = (ph.total + perBlock - 1) / perBlock;
      // A few full waves; threads then stride over the rest.
      int64_t cap = int64_t{t.processors} * (2048 / block) * 4;
      s.blocks = std::max<int64_t>(1, std::min(want, cap));
    } else {
      if (s.rowMajor) {
        if (s.lanes > warp) s.lanes = block;  // a long row takes the whole block
        s.unitsPerBlock = block / s.lanes;
        sharedBytes = std::max(sharedBytes, block / warp * 8);
      } else {
        s.unitsPerBlock = static_cast<int>(std::min<int64_t>(warp, pow2Ceil(ph.units)));
        s.lanes = block / s.unitsPerBlock;
        sharedBytes = std::max(sharedBytes, block * 8);
      }
      int64_t perLane = int64_t{s.lanes} * s.vectorWidth;
      s.items = std::max<int64_t>(1, (ph.rowLength + perLane - 1) / perLane);
      // A phase with workers has one unit slot per worker (kernel_program.h).
      const int64_t slots = ph.workers ? ph.workers : ph.units;
      s.blocks = std::max<int64_t>(1, (slots + s.unitsPerBlock - 1) / s.unitsPerBlock);
    }
    s.unrolled = ph.reduce && s.items <= kMaxUnrolledItems;
  }
  for (Levels& s : out) {
    s.threadsPerBlock = block;
    s.warpSize = warp;
    s.processors = t.processors;
    s.maxThreadsPerBlock = t.maxThreadsPerBlock;
    s.aligned = aligned;
    s.index64 = index64;
    s.sharedBytes = sharedBytes;
  }
  return out;
}

void scheduleLaunch(KernelProgram& p, const LaunchTarget& t, bool aligned) {
  std::vector<Levels> levels = decideLaunch(p, t, aligned);
  for (size_t i = 0; i < p.phases.size(); ++i) p.phases[i].levels = levels[i];
}

bool launchDecidedFor(const KernelProgram& p, const LaunchTarget& t, bool aligned) {
  for (const Phase& ph : p.phases) {
    const Levels& l = ph.levels;
    if (l.processors != t.processors || l.warpSize != t.warpSize ||
        l.maxThreadsPerBlock != t.maxThreadsPerBlock || l.aligned != aligned || l.blocks < 1)
      return false;
  }
  return true;
}

PricedLaunch pricedLaunch(const KernelProgram& p) {
  PricedLaunch r;
  r.barriers = std::max(0, static_cast<int>(p.phases.size()) - 1);
  std::set<int> seen;  // the kernel's inputs an earlier phase walked
  std::set<int> span;
  for (const Phase& ph : p.phases) {
    r.split = r.split || ph.split != SplitRole::None;
    r.staged = r.staged || ph.split == SplitRole::Rewalk;
    std::set<int> walked;  // the kernel's inputs this phase's walks load
    auto collect = [&](const Block& b) {
      for (int id : b.insts) {
        const Inst& in = ph.insts[static_cast<size_t>(id)];
        const int param =
            in.kind == InstKind::Load ? ph.buffers[static_cast<size_t>(in.buffer)] : -1;
        if (param >= 0 && p.params[static_cast<size_t>(param)].value >= 0) walked.insert(param);
      }
    };
    for (const Stage& st : ph.stages) collect(st.body);
    collect(ph.elems);
    // A walk again of what an earlier walk loaded; an input first loaded here is the kernel's
    // one read of it, counted with the others.
    for (int param : walked) {
      if (ph.split != SplitRole::Rewalk || !seen.contains(param)) continue;
      const Param& q = p.params[static_cast<size_t>(param)];
      r.rewalkBytes += q.elements * ir::dtypeBytes(q.dtype);
      if (span.insert(param).second) r.rewalkSpan += q.elements * ir::dtypeBytes(q.dtype);
    }
    seen.insert(walked.begin(), walked.end());
  }
  int64_t most = -1;  // elements the phase whose loads are priced walks
  for (const Phase& ph : p.phases) {
    r.blocks = std::max(r.blocks, ph.levels.blocks);
    r.threadsPerBlock = std::max(r.threadsPerBlock, ph.levels.threadsPerBlock);
    const int64_t elements =
        ph.reduce ? ph.units * std::max<int64_t>(ph.rowLength, 1) : std::max<int64_t>(ph.total, 0);
    if (elements < most) continue;
    const Levels& s = ph.levels;
    const std::vector<IndexInfo> info = analyzeIndices(ph, s.vectorWidth);
    auto walk = [&](const Block& b) {
      int64_t bytes = 0;
      for (int id : b.insts) {
        const Inst& in = ph.insts[static_cast<size_t>(id)];
        if (in.kind == InstKind::Load)
          bytes += int64_t{ir::dtypeBytes(in.dtype)} *
                   (vectorizable(info, in, s.vectorWidth) ? s.vectorWidth : 1);
      }
      return bytes;
    };
    int64_t bytes = walk(ph.elems);
    for (const Stage& st : ph.stages) bytes = std::max(bytes, walk(st.body));
    if (ph.reduce && s.unrolled) bytes *= s.items;
    // Of phases walking as many elements (a split's, each over the same sub-rows), the one that
    // loads the most: a staged split's per-element walk, not its first stage's.
    if (elements == most && bytes <= r.bytesInFlightPerThread) continue;
    most = elements;
    r.bytesInFlightPerThread = bytes;
  }
  return r;
}

}  // namespace stitch::lower
