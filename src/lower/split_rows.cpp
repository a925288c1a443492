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

bool qualifies(const Phase& ph) {
  return ph.reduce && ph.stages.size() == 1 && ph.elems.insts.empty() && ph.units >= 1 &&
         ph.units <= kMaxUnits && ph.rowLength >= kMinRowLength;
}

// The number of sub-rows per row: a power of two dividing the row, >= 2, or 1 for none.
int64_t splitsFor(const Phase& ph) {
  int64_t s = 1;
  while (ph.rowLength % (s * 2) == 0 && ph.rowLength / (s * 2) >= kMinSubRow &&
         ph.units * s * 2 <= kTargetSubRows)
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
Phase splitPhase(const Phase& ph, int64_t s, const std::vector<int>& scratch) {
  Phase a = ph;
  a.name = ph.name + "_split";
  int64_t sub = ph.rowLength / s;
  a.units = ph.units * s;
  a.rowLength = sub;
  a.domain = {a.units, sub};
  a.reduced = {false, true};
  a.grain = std::max<int64_t>(1, 16384 / sub);
  a.levels.units = a.units;
  a.levels.elementsPerThread = sub;
  // The original unit and loop index become expressions of the new ones. The old instructions
  // keep their ids (everything refers to them) and become those expressions; the new unit and
  // loop indices go first in their blocks.
  int unit = -1, loop = -1;
  for (int id : a.pre.insts)
    if (a.insts[static_cast<size_t>(id)].kind == InstKind::UnitIndex) unit = id;
  for (int id : a.stages[0].body.insts)
    if (a.insts[static_cast<size_t>(id)].kind == InstKind::LoopIndex) loop = id;
  int newUnit = add(a, make(InstKind::UnitIndex));
  int split = add(a, make(InstKind::IRemC, newUnit, s));
  int base = add(a, make(InstKind::IMulC, split, sub));
  std::vector<int> pre = {newUnit, split, base};
  if (unit >= 0) a.insts[static_cast<size_t>(unit)] = make(InstKind::IDivC, newUnit, s);
  a.pre.insts.insert(a.pre.insts.begin(), pre.begin(), pre.end());
  if (loop >= 0) {
    int newLoop = add(a, make(InstKind::LoopIndex));
    Inst sum = make(InstKind::IAdd, newLoop);
    sum.args[1] = base;
    a.insts[static_cast<size_t>(loop)] = sum;
    auto& body = a.stages[0].body.insts;
    body.insert(body.begin(), newLoop);
  }
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
  // Outputs: only the partials. Inputs stay as they were (the loads refer to their positions).
  a.buffers.resize(static_cast<size_t>(a.numInputs));
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
    st.buffer = a.numInputs + static_cast<int>(j);
    a.post.insts.push_back(r);
    a.post.insts.push_back(add(a, st));
  }
  return a;
}

// Phase B: the original phase, its row walk replaced by one over the S partials of each unit.
Phase combinePhase(const Phase& ph, int64_t s, const std::vector<int>& scratch) {
  Phase b = ph;
  b.name = ph.name + "_combine";
  b.rowLength = s;
  b.domain = {ph.units, s};
  b.reduced = {false, true};
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
  int k = add(b, make(InstKind::LoopIndex));
  int row = add(b, make(InstKind::IMulC, unit, s));
  Inst idx = make(InstKind::IAdd, row);
  idx.args[1] = k;
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
