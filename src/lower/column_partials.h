// Column partials: a column reduction of a row kernel's domain, stitched into the rows phase.
//
// Why. A training graph reduces one tensor both ways: layer norm's backward needs per-row sums
// for dx and per-column sums for dgamma and dbeta; bias+GELU's backward, dh per element and dbias
// per column. A row kernel owns whole rows, so a column sum is complete only after every row, and
// computing it in a kernel of its own reads the tensor (and what it is computed from) again.
// AStitch and the split reductions of XLA/nvFuser answer the same way this module does:
//
//   rows phase (workers)  the rows are dealt to W workers (Phase::workers: worker w runs units
//                         w, w + W, ...). For each element it visits, a worker adds the column
//                         reduction's operand into partial[w, k] (k: the element's position in
//                         the row), a scratch buffer of W x rowLength in the compute type. The
//                         first unit of a worker (unit < W) stores instead of adding, so the
//                         scratch needs no clearing. Lanes own the same positions in every row
//                         they visit, so no two threads touch one partial.
//   combine phase         a column reduction of the W x rowLength partials (float sums in the
//                         compute type with the backends' wide totals; a mean divides by the
//                         original row count), storing the result; and, per column, the
//                         elementwise values the kernel computes from the results (the bf16 cast
//                         of an f32 dgamma, as mixed-precision training writes it), which need
//                         them complete and nothing else of the rows.
//
// The inputs are read once; the extra traffic is the partials written and read once, which W
// bounds (kPartialBudget elements, and one partial row per kRowsPerWorker rows). W trades that
// traffic against parallelism: on a GPU, W unit slots are the grid (a few resident blocks per
// processor); on the host, a few tasks per core. Sums and means of float values only: max/min
// partials would need the reference's NaN rules in a select, and integer sums are rare in these
// graphs (the planner does not form them).
#pragma once

#include <algorithm>
#include <cstdint>

#include "fusion/schedule.h"
#include "lower/kernel_program.h"

namespace stitch::lower {

// How many workers and in what dtype: sized once for the planner and the lowering
// (fusion/schedule.h: columnPartialWorkers, partialDType, kPartialBudget, kRowsPerWorker).
using fusion::columnPartialWorkers;
using fusion::partialDType;

// The workers for a rows phase lowered for `target` (a GPU; null: the host).
inline int64_t columnPartialWorkers(int64_t units, int64_t rowLength, const LaunchTarget* target) {
  return fusion::columnPartialWorkers(units, rowLength,
                                      target ? std::max(1, target->processors) : 0);
}

// One column reduction carried by partials. The combine phase (built with the rest of the kernel
// in kernel_program.cpp, whose value lowering it needs for the elementwise values of the results)
// has rowLength units of `workers` partials each.
struct ColumnPartial {
  int node = -1;  // the reduction
  ReduceOp op = ReduceOp::Sum;
  ir::DType dtype = ir::DType::F32;  // the reduction's result dtype
  int64_t count = 1;                 // elements each output sums (the rows): a mean divides by it
  int partialParam = -1;             // program param of the W x rowLength partials
};

}  // namespace stitch::lower
