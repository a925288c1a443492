// Splitting long rows (design note in split_rows.h).
#include "lower/split_rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "runtime/support/error.h"

namespace stitch::lower {

namespace {

constexpr int64_t kMaxUnits = 64;
constexpr int64_t kMinRowLength = int64_t{1} << 16;
constexpr int64_t kMinSubRow = 4096;      // elements per sub-row, at least
constexpr int64_t kTargetSubRows = 2048;  // units x S, at most
// Column phases: sub-columns of at least kMinColumnSub rows, units x S at most kTargetColumns
// (a GPU block owns 32 adjacent columns: 1024 blocks). 32 rows keep the partials (S per column,
// read once by the combine) at most 1/32 of the column, and give a column reduction of a few
// hundred rows its blocks: a bias+GELU backward of 1-8 MiB (170-680 rows of 1024) was one block
// per 32 columns at 256 rows a sub-column, and its gradient's kernel was cut in two (issue 33).
constexpr int64_t kMinColumnSub = 32;
constexpr int64_t kTargetColumns = 32768;
// Staged splits (GPU): rows are cut into sub-rows of at least kMinStagedSubRow elements, not
// kMinSubRow: their per-element phase walks the same sub-rows, one block each, and an
// all-reduction of 64K elements (Adam's clipping norm) would give it 16 blocks.
constexpr int64_t kMinStagedSubRow = 1024;

// Whether adjacent units are adjacent in memory (the innermost non-trivial axis is kept): the
// column tiles of launch.h.
bool columnMajor(const Phase& ph) {
  int last = -1;
  for (size_t a = 0; a < ph.domain.size(); ++a)
    if (ph.domain[a] != 1) last = static_cast<int>(a);
  return last >= 0 && !ph.reduced[static_cast<size_t>(last)];
}

// The per-element block of a column phase may run on sub-columns when it reads nothing the
// row's reduction or its `post` block computes: only its own instructions and `pre`'s.
bool elemsIndependent(const Phase& ph) {
  std::vector<bool> ok(ph.insts.size(), false);
  for (int id : ph.pre.insts) ok[static_cast<size_t>(id)] = true;
  for (int id : ph.elems.insts) {
    const Inst& in = ph.insts[static_cast<size_t>(id)];
    if (in.kind == InstKind::AccRead || in.kind == InstKind::Accumulate) return false;
    for (int a : in.args)
      if (a >= 0 && !ok[static_cast<size_t>(a)]) return false;
    ok[static_cast<size_t>(id)] = true;
  }
  return true;
}

// How a phase is split: not at all; one stage whose sub-rows need nothing of the result (the
// partials, then the combine with the per-row block); or by stages (several stages, or a
// per-element block that reads the results), GPU only.
enum class Split { None, Simple, Staged };

Split splitOf(const Phase& ph, const LaunchTarget* gpu) {
  if (!ph.reduce || ph.workers != 0 || ph.stages.empty() || ph.units < 1) return Split::None;
  const bool columns = columnMajor(ph);
  if (!columns && (ph.units > kMaxUnits || ph.rowLength < kMinRowLength)) return Split::None;
  const bool elemsFree = columns ? elemsIndependent(ph) : ph.elems.insts.empty();
  if (ph.stages.size() == 1 && elemsFree) return Split::Simple;
  return gpu ? Split::Staged : Split::None;
}

// The number of sub-rows per row, >= 2, or 1 for none: a power of two, with sub-rows of at least
// the minimum and units x S at most the target. A simple split's S divides the row, so every
// sub-row is full; a staged split's sub-rows are ceil(rowLength / S) long and the last ones are
// cut short (masked), so that a batch of 1000 or 4097 rows splits too.
int64_t splitsFor(const Phase& ph, bool staged) {
  const bool columns = columnMajor(ph);
  const int64_t minSub = columns ? kMinColumnSub : staged ? kMinStagedSubRow : kMinSubRow;
  const int64_t target = columns ? kTargetColumns : kTargetSubRows;
  int64_t s = 1;
  auto fits = [&](int64_t t) {
    if (ph.units * t > target) return false;
    if (staged) return (ph.rowLength + t - 1) / t >= minSub;
    return ph.rowLength % t == 0 && ph.rowLength / t >= minSub;
  };
  while (fits(s * 2)) s *= 2;
  return s;
}

int add(Phase& ph, Inst in) {
  ph.insts.push_back(in);
  return static_cast<int>(ph.insts.size()) - 1;
}

Inst make(InstKind k, int a = -1, int64_t imm = 0) {
  Inst in;
  in.kind = k;
  in.args[0] = a;
  in.ivalue = imm;
  return in;
}

Inst constI64(int64_t v) { return make(InstKind::Const, -1, v); }

Inst op(ir::OpCode code, ir::DType t, int a, int b, int c = -1) {
  Inst in = make(InstKind::Op, a);
  in.op = code;
  in.dtype = t;
  in.args[1] = b;
  in.args[2] = c;
  return in;
}

// The accumulator dtype of a sub-row: the compute type (f32 for f16/bf16, so nothing is rounded
// to the narrow dtype between the passes).
ir::DType computeType(ir::DType t) {
  return t == ir::DType::F16 || t == ir::DType::BF16 ? ir::DType::F32 : t;
}

// The dtype of a stored partial: float sums and products in f64 (the emitters total long float
// sums in f64, and a partial rounded to f32 and re-added would lose that accuracy again; an f64
// product of nonzero factors held at the smallest f64 subnormal would round to an f32 zero, and
// zero times an inf partial is NaN), the rest in the compute type.
ir::DType partialType(const Accumulator& a) {
  if (ir::isFloat(a.dtype) && a.op != ReduceOp::Max && a.op != ReduceOp::Min) return ir::DType::F64;
  return computeType(a.dtype);
}

// What a masked element of a cut-short sub-row adds: the operation's identity in dtype t.
Inst identity(ReduceOp o, ir::DType t) {
  Inst in = make(InstKind::Const);
  in.dtype = t;
  const bool fl = ir::isFloat(t);
  switch (o) {
    case ReduceOp::Sum:
    case ReduceOp::Mean: break;  // 0
    case ReduceOp::Prod:
      in.fvalue = 1;
      in.ivalue = 1;
      break;
    case ReduceOp::Max:
      in.fvalue = -std::numeric_limits<double>::infinity();
      in.ivalue = t == ir::DType::I32 ? std::numeric_limits<int32_t>::min()
                                      : std::numeric_limits<int64_t>::min();
      break;
    case ReduceOp::Min:
      in.fvalue = std::numeric_limits<double>::infinity();
      in.ivalue = t == ir::DType::I32 ? std::numeric_limits<int32_t>::max()
                                      : std::numeric_limits<int64_t>::max();
      break;
  }
  if (fl) in.ivalue = 0;
  else in.fvalue = 0;
  // Bool (any, all): false is the least value, true the greatest.
  if (t == ir::DType::Bool) in.ivalue = o == ReduceOp::Min || o == ReduceOp::Prod;
  return in;
}

int unitIndexOf(const Phase& ph) {
  for (int id : ph.pre.insts)
    if (ph.insts[static_cast<size_t>(id)].kind == InstKind::UnitIndex) return id;
  return -1;
}

// A buffer read by the phase: inserted after its inputs (the stores' positions move up).
int addInput(Phase& ph, int param) {
  for (int b = 0; b < ph.numInputs; ++b)
    if (ph.buffers[static_cast<size_t>(b)] == param) return b;
  ph.buffers.insert(ph.buffers.begin() + ph.numInputs, param);
  for (Inst& in : ph.insts)
    if (in.kind == InstKind::Store) ++in.buffer;
  return ph.numInputs++;
}

int addOutput(Phase& ph, int param) {
  ph.buffers.push_back(param);
  return static_cast<int>(ph.buffers.size()) - 1;
}

// The geometry of a split: S sub-rows of `sub` elements per row; `ragged` when S * sub passes
// the row's end (the last sub-rows are cut short, or empty).
struct Geometry {
  int64_t s = 1;
  int64_t sub = 0;
  bool ragged = false;
  bool columns = false;
};

// The phase on sub-rows: units x S units of `sub` elements. Rows: new unit = unit * S + split (a
// row's sub-rows side by side). Columns: new unit = split * units + unit, so adjacent units stay
// adjacent columns (coalesced), and per-sub-unit values are laid out [S, units] for the combine
// phase's column tiles. The original unit and loop index become expressions of the new ones:
// the old instructions keep their ids (everything refers to them) and become those expressions;
// the new unit and loop indices go first in their blocks. `walks` are the blocks whose loop index
// moves. With a ragged geometry the row position is clamped to the row (every load stays in
// bounds) and each accumulated value past the row's end is replaced by the identity.
struct SubUnits {
  Phase phase;
  int newUnit = -1;  // the sub-unit
  int unit = -1;     // the original unit, an expression of newUnit
};

SubUnits subUnits(const Phase& ph, const Geometry& g, std::string name, bool stageWalks,
                  bool elemsWalk, bool needUnit) {
  SubUnits r;
  Phase& a = r.phase;
  a = ph;
  a.name = std::move(name);
  a.units = ph.units * g.s;
  a.rowLength = g.sub;
  if (g.columns) {
    a.domain = {g.s, g.sub, ph.units};
    a.reduced = {false, true, false};
  } else {
    a.domain = {a.units, g.sub};
    a.reduced = {false, true};
  }
  a.levels.units = a.units;
  a.levels.elementsPerThread = g.sub;
  const int unit = unitIndexOf(a);
  r.newUnit = add(a, make(InstKind::UnitIndex));
  int split = add(a, g.columns ? make(InstKind::IDivC, r.newUnit, ph.units)
                               : make(InstKind::IRemC, r.newUnit, g.s));
  int base = add(a, make(InstKind::IMulC, split, g.sub));
  std::vector<int> pre = {r.newUnit, split, base};
  const Inst original = g.columns ? make(InstKind::IRemC, r.newUnit, ph.units)
                                  : make(InstKind::IDivC, r.newUnit, g.s);
  if (unit >= 0) {
    a.insts[static_cast<size_t>(unit)] = original;
    r.unit = unit;
  } else if (needUnit) {
    r.unit = add(a, original);
    pre.push_back(r.unit);
  }
  a.pre.insts.insert(a.pre.insts.begin(), pre.begin(), pre.end());
  // The loop index of a walk becomes base + the new one (clamped to the row when ragged), which
  // goes first in its block.
  auto moveLoop = [&](Block& b) {
    int old = -1;
    for (int id : b.insts)
      if (a.insts[static_cast<size_t>(id)].kind == InstKind::LoopIndex) old = id;
    if (old < 0) return;
    int newLoop = add(a, make(InstKind::LoopIndex));
    Inst sum = make(InstKind::IAdd, newLoop);
    sum.args[1] = base;
    if (!g.ragged) {
      a.insts[static_cast<size_t>(old)] = sum;
      b.insts.insert(b.insts.begin(), newLoop);
      return;
    }
    int at = add(a, sum);
    int length = add(a, constI64(ph.rowLength));
    int last = add(a, constI64(ph.rowLength - 1));
    int valid = add(a, op(ir::OpCode::Lt, ir::DType::Bool, at, length));
    a.insts[static_cast<size_t>(old)] = op(ir::OpCode::Minimum, ir::DType::I64, at, last);
    std::vector<int> insts = {newLoop, at, length, last, valid};
    for (int id : b.insts) {
      const Inst in = a.insts[static_cast<size_t>(id)];
      if (in.kind == InstKind::Accumulate) {
        const Accumulator& acc = a.accs[static_cast<size_t>(in.acc)];
        const ir::DType t = a.insts[static_cast<size_t>(in.args[0])].dtype;
        int none = add(a, identity(acc.op, t));
        int masked = add(a, op(ir::OpCode::Select, t, valid, in.args[0], none));
        a.insts[static_cast<size_t>(id)].args[0] = masked;
        insts.push_back(none);
        insts.push_back(masked);
      }
      insts.push_back(id);
    }
    b.insts = std::move(insts);
  };
  if (stageWalks)
    for (Stage& st : a.stages) moveLoop(st.body);
  if (elemsWalk) moveLoop(a.elems);
  return r;
}

// Phase A of stage `stage`: the original phase on sub-rows, walking that stage only and storing
// each of its accumulators' partials into `scratch` (by position in the stage's accs): Mean as
// Sum, in the compute type, stored in the partial type.
SubUnits partialsPhase(const Phase& ph, const Geometry& g, size_t stage, bool keepElems,
                       std::string name, const std::vector<int>& scratch, bool needUnit) {
  SubUnits su = subUnits(ph, g, std::move(name), true, keepElems, needUnit);
  Phase& a = su.phase;
  Stage st = a.stages[stage];
  a.stages = {st};
  if (!keepElems) a.elems.insts.clear();
  std::vector<ir::DType> stored;
  for (int j : st.accs) {
    Accumulator& acc = a.accs[static_cast<size_t>(j)];
    stored.push_back(partialType(acc));
    if (acc.op == ReduceOp::Mean) acc.op = ReduceOp::Sum;
    acc.dtype = computeType(acc.dtype);
  }
  for (int id : a.stages[0].body.insts) {
    Inst& in = a.insts[static_cast<size_t>(id)];
    if (in.kind == InstKind::Accumulate) in.dtype = a.accs[static_cast<size_t>(in.acc)].dtype;
  }
  // Outputs: the partials, after the original buffers (the loads and the per-element block's
  // stores refer to their positions; the row stores of `post` go to the combine phase).
  a.post.insts.clear();
  for (size_t j = 0; j < st.accs.size(); ++j) {
    const int buffer = addOutput(a, scratch[j]);
    Inst read = make(InstKind::AccRead);
    read.acc = st.accs[j];
    read.dtype = stored[j];
    int r = add(a, read);
    Inst store = make(InstKind::Store, su.newUnit);
    store.args[1] = r;
    store.dtype = read.dtype;
    store.buffer = buffer;
    a.post.insts.push_back(r);
    a.post.insts.push_back(add(a, store));
  }
  return su;
}

// Phase B of stage `stage`: the original units, each reducing the S partials of the stage's
// accumulators with the original operations (float sums and products in f64; Mean divides by the
// row length), then `post` (the original per-row block, or none).
Phase combinePhase(const Phase& ph, const Geometry& g, size_t stage, std::string name,
                   const std::vector<int>& scratch, Block post) {
  Phase b = ph;
  b.name = std::move(name);
  b.rowLength = g.s;
  if (g.columns) {
    b.domain = {g.s, ph.units};
    b.reduced = {true, false};
  } else {
    b.domain = {ph.units, g.s};
    b.reduced = {false, true};
  }
  b.elems.insts.clear();
  b.post = std::move(post);
  b.levels.elementsPerThread = g.s;
  const std::vector<int>& accs = ph.stages[stage].accs;
  std::vector<int> partial;
  for (int param : scratch) partial.push_back(addInput(b, param));
  int unit = unitIndexOf(b);
  if (unit < 0) {
    unit = add(b, make(InstKind::UnitIndex));
    b.pre.insts.insert(b.pre.insts.begin(), unit);
  }
  Block body;
  // The partial of (unit, split k): at unit * S + k (rows) or k * units + unit (columns).
  int k = add(b, make(InstKind::LoopIndex));
  int row = g.columns ? add(b, make(InstKind::IMulC, k, ph.units))
                      : add(b, make(InstKind::IMulC, unit, g.s));
  Inst idx = make(InstKind::IAdd, row);
  idx.args[1] = g.columns ? unit : k;
  int at = add(b, idx);
  body.insts = {k, row, at};
  for (size_t j = 0; j < accs.size(); ++j) {
    Accumulator& acc = b.accs[static_cast<size_t>(accs[j])];
    // Float sums total their f64 partials in f64; the original reads round the result.
    const ir::DType type = partialType(acc);
    if (type == ir::DType::F64) acc.dtype = ir::DType::F64;
    Inst ld = make(InstKind::Load, at);
    ld.dtype = type;
    ld.buffer = partial[j];
    int v = add(b, ld);
    Inst a = make(InstKind::Accumulate, v);
    a.acc = accs[j];
    a.dtype = acc.dtype;
    body.insts.push_back(v);
    body.insts.push_back(add(b, a));
  }
  b.stages = {Stage{accs, std::move(body)}};
  return b;
}

// The instructions of p's blocks that something evaluated needs: the roots are stores,
// accumulations and index checks (kernel_program.h).
std::vector<bool> liveInsts(const Phase& p) {
  std::vector<const Block*> blocks = {&p.pre, &p.post, &p.elems};
  for (const Stage& st : p.stages) blocks.push_back(&st.body);
  std::vector<bool> live(p.insts.size(), false);
  std::vector<int> work;
  for (const Block* b : blocks)
    for (int id : b->insts) {
      const InstKind k = p.insts[static_cast<size_t>(id)].kind;
      if (k == InstKind::Store || k == InstKind::Accumulate || k == InstKind::CheckIndex) {
        live[static_cast<size_t>(id)] = true;
        work.push_back(id);
      }
    }
  while (!work.empty()) {
    const int id = work.back();
    work.pop_back();
    for (int a : p.insts[static_cast<size_t>(id)].args)
      if (a >= 0 && !live[static_cast<size_t>(a)]) {
        live[static_cast<size_t>(a)] = true;
        work.push_back(a);
      }
  }
  return live;
}

// The staged split of one phase: its phases, in order, and the scratch parameters it adds.
class StagedSplit {
 public:
  StagedSplit(KernelProgram& p, const Phase& ph, const Geometry& g) : p_(p), ph_(ph), g_(g) {
    for (size_t s = 0; s < ph.stages.size(); ++s)
      for (int j : ph.stages[s].accs) stageOf_[j] = s;
  }

  std::vector<Phase> build();

 private:
  // Reads the results of the accumulators that are not complete in `x` (all but `finals`) from
  // the scratch where their combine phase stores them, at `unit`: every AccRead of them that x
  // evaluates becomes a load in x's `pre`.
  void readResults(Phase& x, const std::vector<int>& finals, int unit);
  int scratch(ir::DType t, int64_t elements);

  KernelProgram& p_;
  const Phase& ph_;
  const Geometry& g_;
  std::map<int, size_t> stageOf_;  // accumulator -> its stage
  // Results read after their combine phase: (accumulator, dtype) -> the scratch param.
  std::map<std::pair<int, ir::DType>, int> results_;
};

int StagedSplit::scratch(ir::DType t, int64_t elements) {
  Param q;
  q.scratch = p_.scratchSlots++;
  q.dtype = t;
  q.elements = elements;
  p_.params.push_back(q);
  return static_cast<int>(p_.params.size()) - 1;
}

void StagedSplit::readResults(Phase& x, const std::vector<int>& finals, int unit) {
  std::vector<Block*> blocks = {&x.pre, &x.post, &x.elems};
  for (Stage& st : x.stages) blocks.push_back(&st.body);
  const std::vector<bool> evaluated = liveInsts(x);
  std::vector<int> loads;
  for (Block* b : blocks)
    std::erase_if(b->insts, [&](int id) {
      Inst& in = x.insts[static_cast<size_t>(id)];
      if (!evaluated[static_cast<size_t>(id)] || in.kind != InstKind::AccRead ||
          std::find(finals.begin(), finals.end(), in.acc) != finals.end())
        return false;
      STITCH_INTERNAL(unit >= 0, "split rows: phase {} reads a result with no unit index", x.name);
      auto [it, added] = results_.try_emplace({in.acc, in.dtype}, -1);
      if (added) it->second = scratch(in.dtype, ph_.units);
      const int buffer = addInput(x, it->second);
      Inst ld = make(InstKind::Load, unit);
      ld.dtype = in.dtype;
      ld.buffer = buffer;
      in = ld;
      loads.push_back(id);
      return true;
    });
  // After the unit index (and what it is computed from), before every walk that reads them.
  x.pre.insts.insert(x.pre.insts.end(), loads.begin(), loads.end());
  // What the phase no longer computes (the other stages' walks, the row stores of other phases,
  // the results it does not read) goes.
  const std::vector<bool> live = liveInsts(x);
  for (Block* b : blocks)
    std::erase_if(b->insts, [&](int id) { return !live[static_cast<size_t>(id)]; });
}

std::vector<Phase> StagedSplit::build() {
  std::vector<Phase> out;
  std::vector<size_t> combines;  // position in `out` of stage s's combine phase
  std::vector<int> combineUnit;  // its unit index
  const size_t stages = ph_.stages.size();
  for (size_t s = 0; s < stages; ++s) {
    std::vector<int> partials;
    for (int j : ph_.stages[s].accs)
      partials.push_back(scratch(partialType(ph_.accs[static_cast<size_t>(j)]), ph_.units * g_.s));
    SubUnits a = partialsPhase(ph_, g_, s, false, fmt::format("{}_split{}", ph_.name, s), partials,
                               /*needUnit=*/true);
    readResults(a.phase, ph_.stages[s].accs, a.unit);  // its own are the partials it stores
    a.phase.split = s == 0 ? SplitRole::Walk : SplitRole::Rewalk;
    out.push_back(std::move(a.phase));
    Phase b = combinePhase(ph_, g_, s, fmt::format("{}_combine{}", ph_.name, s), partials,
                           s + 1 == stages ? ph_.post : Block{});
    const int unit = unitIndexOf(b);
    readResults(b, ph_.stages[s].accs, unit);
    b.split = SplitRole::Combine;
    combines.push_back(out.size());
    combineUnit.push_back(unit);
    out.push_back(std::move(b));
  }
  if (!ph_.elems.insts.empty()) {
    // The per-element block on the sub-rows, with what it reads of the per-row block (its row
    // stores are the last combine phase's).
    SubUnits su = subUnits(ph_, g_, ph_.name + "_elems", false, true, /*needUnit=*/true);
    Phase& e = su.phase;
    e.stages.clear();
    std::erase_if(e.post.insts,
                  [&](int id) { return e.insts[static_cast<size_t>(id)].kind == InstKind::Store; });
    readResults(e, {}, su.unit);
    e.split = SplitRole::Rewalk;
    out.push_back(std::move(e));
  }
  // Each combine phase stores the results later phases read, per unit.
  for (const auto& [key, param] : results_) {
    const auto [acc, dtype] = key;
    const size_t s = stageOf_.at(acc);
    Phase& b = out[combines[s]];
    Inst read = make(InstKind::AccRead);
    read.acc = acc;
    read.dtype = dtype;
    int r = add(b, read);
    Inst store = make(InstKind::Store, combineUnit[s]);
    store.args[1] = r;
    store.dtype = dtype;
    store.buffer = addOutput(b, param);
    b.post.insts.push_back(r);
    b.post.insts.push_back(add(b, store));
  }
  return out;
}

}  // namespace

int splitLongRows(KernelProgram& p, const LaunchTarget* target) {
  int splits = 0;
  std::vector<Phase> out;
  for (Phase& ph : p.phases) {
    const Split kind = splitOf(ph, target);
    Geometry g;
    g.columns = kind != Split::None && columnMajor(ph);
    g.s = kind == Split::None ? 1 : splitsFor(ph, kind == Split::Staged);
    if (g.s < 2) {
      out.push_back(std::move(ph));
      continue;
    }
    g.sub = (ph.rowLength + g.s - 1) / g.s;
    g.ragged = g.sub * g.s != ph.rowLength;
    if (kind == Split::Staged) {
      for (Phase& x : StagedSplit(p, ph, g).build()) out.push_back(std::move(x));
    } else {
      std::vector<int> scratch;
      for (int j : ph.stages[0].accs) {
        Param q;
        q.scratch = p.scratchSlots++;
        q.dtype = partialType(ph.accs[static_cast<size_t>(j)]);
        q.elements = ph.units * g.s;
        p.params.push_back(q);
        scratch.push_back(static_cast<int>(p.params.size()) - 1);
      }
      out.push_back(
          partialsPhase(ph, g, 0, true, ph.name + "_split", scratch, /*needUnit=*/false).phase);
      out.back().split = SplitRole::Walk;
      out.push_back(combinePhase(ph, g, 0, ph.name + "_combine", scratch, ph.post));
      out.back().split = SplitRole::Combine;
    }
    ++splits;
  }
  p.phases = std::move(out);
  return splits;
}

}  // namespace stitch::lower
