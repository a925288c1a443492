// Column partials (design note in column_partials.h).
#include "lower/column_partials.h"

#include <algorithm>

namespace stitch::lower {

int64_t columnPartialWorkers(int64_t units, int64_t rowLength, const LaunchTarget* target) {
  // GPU: 32 unit slots per processor (4 blocks of 8 warp-wide rows, or more blocks of wider
  // rows); host: a few tasks per core of any machine this runs on. Not measured yet on a GPU
  // (issue 15): the constants are where the rows phase and the partials' traffic balance on paper.
  if (units == 0) return 0;  // no rows: the combine phase reduces no partials (identities)
  const int64_t machine = target ? int64_t{32} * std::max(1, target->processors) : 64;
  const int64_t budget = std::max<int64_t>(1, kPartialBudget / std::max<int64_t>(rowLength, 1));
  // At least kRowsPerWorker rows each, so the partials (one row per worker, written and read
  // once) stay a small part of the traffic on short inputs too.
  const int64_t enough = (units + kRowsPerWorker - 1) / kRowsPerWorker;
  const int64_t workers = std::max<int64_t>(1, std::min({enough, machine, budget}));
  if (target) return workers;
  // The host deals blocks of ceil(units / workers) units (Phase::workerBlocks): as many workers
  // as it takes, so that none is left without a unit (its partials would never be written).
  const int64_t per = (units + workers - 1) / workers;
  return (units + per - 1) / per;
}

ir::DType partialDType(ir::DType t) {
  return t == ir::DType::F16 || t == ir::DType::BF16 ? ir::DType::F32 : t;
}

Phase columnCombinePhase(const std::string& name, int64_t workers, int64_t rowLength,
                         const std::vector<ColumnPartial>& partials) {
  Phase ph;
  ph.name = name;
  ph.reduce = true;
  ph.domain = {workers, rowLength};
  ph.reduced = {true, false};
  ph.units = rowLength;
  ph.rowLength = workers;
  ph.grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(workers, 1));
  ph.levels.units = ph.units;
  ph.levels.elementsPerThread = workers;
  auto add = [&](Block& b, Inst in) {
    ph.insts.push_back(in);
    int id = static_cast<int>(ph.insts.size()) - 1;
    b.insts.push_back(id);
    return id;
  };
  Inst unit;
  unit.kind = InstKind::UnitIndex;
  const int u = add(ph.pre, unit);
  ph.stages.resize(1);
  Block& body = ph.stages[0].body;
  Inst loop;
  loop.kind = InstKind::LoopIndex;
  const int w = add(body, loop);
  Inst row;
  row.kind = InstKind::IMulC;
  row.args[0] = w;
  row.ivalue = rowLength;
  const int base = add(body, row);
  Inst at;
  at.kind = InstKind::IAdd;
  at.args[0] = std::min(base, u);
  at.args[1] = std::max(base, u);
  const int index = add(body, at);
  const int n = static_cast<int>(partials.size());
  // No workers (no rows): no partials to read; each result is its reduction's identity (a mean
  // divides by zero rows, as the reference does).
  const int inputs = workers > 0 ? n : 0;
  for (int j = 0; j < n; ++j) {
    const ColumnPartial& c = partials[static_cast<size_t>(j)];
    Accumulator acc;
    acc.node = c.node;
    acc.op = c.op;
    acc.dtype = c.dtype;
    acc.count = c.count;  // the rows: a mean of the original reduction, not of the partials
    acc.stage = 0;
    ph.accs.push_back(acc);
    ph.stages[0].accs.push_back(j);
    if (workers == 0) continue;
    ph.buffers.push_back(c.partialParam);
    Inst ld;
    ld.kind = InstKind::Load;
    ld.dtype = partialDType(c.dtype);
    ld.buffer = j;
    ld.args[0] = index;
    Inst accumulate;
    accumulate.kind = InstKind::Accumulate;
    accumulate.dtype = c.dtype;
    accumulate.acc = j;
    accumulate.args[0] = add(body, ld);
    add(body, accumulate);
  }
  for (int j = 0; j < n; ++j) {
    const ColumnPartial& c = partials[static_cast<size_t>(j)];
    ph.buffers.push_back(c.outParam);
    Inst read;
    read.kind = InstKind::AccRead;
    read.dtype = c.dtype;
    read.acc = j;
    Inst st;
    st.kind = InstKind::Store;
    st.dtype = c.dtype;
    st.buffer = inputs + j;
    st.args[0] = u;
    st.args[1] = add(ph.post, read);
    add(ph.post, st);
  }
  ph.numInputs = inputs;
  return ph;
}

}  // namespace stitch::lower
