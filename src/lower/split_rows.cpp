// Splitting long rows (design note in split_rows.h).
#include "lower/split_rows.h"

#include <fmt/format.h>

#include <algorithm>

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

bool qualifies(const Phase& ph) {
  if (!ph.reduce || ph.workers != 0 || ph.stages.size() != 1 || ph.units < 1) return false;
  if (columnMajor(ph)) return elemsIndependent(ph);
  return ph.elems.insts.empty() && ph.units <= kMaxUnits && ph.rowLength >= kMinRowLength;
}

// The number of sub-rows per row: a power of two dividing the row, >= 2, or 1 for none.
int64_t splitsFor(const Phase& ph) {
  const bool columns = columnMajor(ph);
  const int64_t minSub = columns ? kMinColumnSub : kMinSubRow;
  const int64_t target = columns ? kTargetColumns : kTargetSubRows;
  int64_t s = 1;
  while (ph.rowLength % (s * 2) == 0 && ph.rowLength / (s * 2) >= minSub &&
         ph.units * s * 2 <= target)
    s *= 2;
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

// Phase A: the original phase on sub-rows, storing each accumulator's partial into `scratch`.
// Rows: new unit = unit * S + split (a row's sub-rows side by side). Columns: new unit = split *
// units + unit, so adjacent units stay adjacent columns (coalesced), and the partials are laid
// out [S, units] for the combine phase's column tiles. A column phase's per-element block runs
// on each sub-column (its loop index moved like the stage's).
Phase splitPhase(const Phase& ph, int64_t s, const std::vector<int>& scratch) {
  const bool columns = columnMajor(ph);
  Phase a = ph;
  a.name = ph.name + "_split";
  int64_t sub = ph.rowLength / s;
  a.units = ph.units * s;
  a.rowLength = sub;
  if (columns) {
    a.domain = {s, sub, ph.units};
    a.reduced = {false, true, false};
  } else {
    a.domain = {a.units, sub};
    a.reduced = {false, true};
  }
  a.grain = std::max<int64_t>(1, 16384 / sub);
  a.levels.units = a.units;
  a.levels.elementsPerThread = sub;
  // The original unit and loop index become expressions of the new ones. The old instructions
  // keep their ids (everything refers to them) and become those expressions; the new unit and
  // loop indices go first in their blocks.
  int unit = -1;
  for (int id : a.pre.insts)
    if (a.insts[static_cast<size_t>(id)].kind == InstKind::UnitIndex) unit = id;
  int newUnit = add(a, make(InstKind::UnitIndex));
  int split = add(
      a, columns ? make(InstKind::IDivC, newUnit, ph.units) : make(InstKind::IRemC, newUnit, s));
  int base = add(a, make(InstKind::IMulC, split, sub));
  std::vector<int> pre = {newUnit, split, base};
  if (unit >= 0)
    a.insts[static_cast<size_t>(unit)] =
        columns ? make(InstKind::IRemC, newUnit, ph.units) : make(InstKind::IDivC, newUnit, s);
  a.pre.insts.insert(a.pre.insts.begin(), pre.begin(), pre.end());
  // The loop index of a walk becomes base + the new one, which goes first in its block.
  auto moveLoop = [&](Block& b) {
    int old = -1;
    for (int id : b.insts)
      if (a.insts[static_cast<size_t>(id)].kind == InstKind::LoopIndex) old = id;
    if (old < 0) return;
    int newLoop = add(a, make(InstKind::LoopIndex));
    Inst sum = make(InstKind::IAdd, newLoop);
    sum.args[1] = base;
    a.insts[static_cast<size_t>(old)] = sum;
    b.insts.insert(b.insts.begin(), newLoop);
  };
  moveLoop(a.stages[0].body);
  moveLoop(a.elems);
  // Accumulators: Mean sums (phase B divides), all in the compute type; each partial is read
  // (and stored) in its partial type.
  std::vector<ir::DType> stored;
  for (Accumulator& acc : a.accs) {
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
  const int first = static_cast<int>(a.buffers.size());
  a.post.insts.clear();
  for (size_t j = 0; j < a.accs.size(); ++j) {
    a.buffers.push_back(scratch[j]);
    Inst read = make(InstKind::AccRead);
    read.acc = static_cast<int>(j);
    read.dtype = stored[j];
    int r = add(a, read);
    Inst st = make(InstKind::Store, newUnit);
    st.args[1] = r;
    st.dtype = read.dtype;
    st.buffer = first + static_cast<int>(j);
    a.post.insts.push_back(r);
    a.post.insts.push_back(add(a, st));
  }
  return a;
}

// Phase B: the original phase, its row walk replaced by one over the S partials of each unit.
Phase combinePhase(const Phase& ph, int64_t s, const std::vector<int>& scratch) {
  const bool columns = columnMajor(ph);
  Phase b = ph;
  b.name = ph.name + "_combine";
  b.rowLength = s;
  if (columns) {
    b.domain = {s, ph.units};
    b.reduced = {true, false};
  } else {
    b.domain = {ph.units, s};
    b.reduced = {false, true};
  }
  b.elems.insts.clear();  // done by phase A
  b.grain = std::max<int64_t>(1, 16384 / s);
  b.levels.elementsPerThread = s;
  // The partials become extra inputs, after the original ones; outputs move up accordingly.
  int extra = static_cast<int>(scratch.size());
  b.buffers.insert(b.buffers.begin() + b.numInputs, scratch.begin(), scratch.end());
  for (Inst& in : b.insts)
    if (in.kind == InstKind::Store) in.buffer += extra;
  int unit = -1;
  for (int id : b.pre.insts)
    if (b.insts[static_cast<size_t>(id)].kind == InstKind::UnitIndex) unit = id;
  if (unit < 0) {
    unit = add(b, make(InstKind::UnitIndex));
    b.pre.insts.insert(b.pre.insts.begin(), unit);
  }
  Block body;
  // The partial of (unit, split k): at unit * S + k (rows) or k * units + unit (columns).
  int k = add(b, make(InstKind::LoopIndex));
  int row =
      columns ? add(b, make(InstKind::IMulC, k, ph.units)) : add(b, make(InstKind::IMulC, unit, s));
  Inst idx = make(InstKind::IAdd, row);
  idx.args[1] = columns ? unit : k;
  int at = add(b, idx);
  body.insts = {k, row, at};
  for (size_t j = 0; j < b.accs.size(); ++j) {
    // Float sums total their f64 partials in f64; the original reads round the result.
    ir::DType partial = partialType(b.accs[j]);
    if (partial == ir::DType::F64) b.accs[j].dtype = ir::DType::F64;
    Inst ld = make(InstKind::Load, at);
    ld.dtype = partial;
    ld.buffer = b.numInputs + static_cast<int>(j);
    int v = add(b, ld);
    Inst acc = make(InstKind::Accumulate, v);
    acc.acc = static_cast<int>(j);
    acc.dtype = b.accs[j].dtype;
    body.insts.push_back(v);
    body.insts.push_back(add(b, acc));
  }
  b.numInputs += extra;
  b.stages[0].body = std::move(body);
  return b;
}

}  // namespace

int splitLongRows(KernelProgram& p) {
  int splits = 0;
  std::vector<Phase> out;
  for (Phase& ph : p.phases) {
    int64_t s = qualifies(ph) ? splitsFor(ph) : 1;
    if (s < 2) {
      out.push_back(std::move(ph));
      continue;
    }
    std::vector<int> scratch;
    for (const Accumulator& acc : ph.accs) {
      Param q;
      q.scratch = p.scratchSlots++;
      q.dtype = partialType(acc);
      q.elements = ph.units * s;
      p.params.push_back(q);
      scratch.push_back(static_cast<int>(p.params.size()) - 1);
    }
    out.push_back(splitPhase(ph, s, scratch));
    out.push_back(combinePhase(ph, s, scratch));
    ++splits;
  }
  p.phases = std::move(out);
  return splits;
}

}  // namespace stitch::lower
