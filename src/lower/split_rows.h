// Splitting long rows: a reduce phase with few units and very long rows becomes two phases
// (or, split by stages, several).
//
// Why. A reduce phase gives each unit (row) to one block (GPU) or one task (host). A full
// reduction of a large tensor (a loss, a norm) has one row of millions of elements: one block,
// one core, while the machine idles. The classic answer is several blocks per row with a second
// pass over their partial results, and that is what this pass builds, for any backend:
//   phase A ("split")   units x S sub-rows of rowLength / S elements each; every sub-row
//                       accumulates like the original stage and stores its partial results
//                       (Mean as Sum; float sums and products in f64, f16/bf16 max/min in f32) into
//                       scratch buffers;
//   phase B ("combine") the original units, each reducing its S partials with the original
//                       operations (float sums and products in f64; Mean divides by the row
//                       length), then the original per-row block (`post`), whose reads round
//                       the result to its dtype.
// Phase boundaries are where the kernel synchronizes (a grid barrier in a cooperative kernel, the
// stream between launches, the executor between host phases), so this is the "global" stitch
// scheme applied to a single reduction.
//
// Which phases: one stage, and
//   - long rows: no per-element outputs (no `elems` block), at most kMaxUnits rows of at least
//     kMinRowLength elements;
//   - column phases (adjacent units adjacent in memory: column and middle-axis reductions, whose
//     column tiles give a [16384, 4096] column sum only 128 blocks): tall columns, split into
//     sub-columns of >= kMinColumnSub rows until there are kTargetColumns units. Their
//     per-element block (bias+GELU's dh beside dbias) runs in phase A on each sub-column when it
//     reads nothing of the reduction; the new units keep adjacent columns adjacent, and the
//     partials are laid out [S, units] so that the combine phase reads them in column tiles.
// S is a power of two dividing the row length, so every sub-row is full.
//
// Staged splits (GPU only; the host's rows are walked by cores that hold them in their caches):
// a phase of the same shapes with several stages (a softmax over one huge row, batch norm's mean
// then variance over [N, C]), or whose per-element block reads the results (every element of a
// batch norm, Adam's update after the clipping norm), becomes, per stage s, a partials phase over
// the sub-rows (SplitRole::Walk, then Rewalk: it reads the earlier stages' results) and a combine
// phase (SplitRole::Combine) that stores the results later phases read into scratch, one per
// row; then the per-element block runs on the sub-rows again (`<name>_elems`, Rewalk). Every
// phase boundary is a grid barrier, and every walk after the first loads the kernel's inputs
// again (from the last-level cache while they fit), so a staged split is the planner's choice
// (fusion::Kernel::stagedSplits, priced both ways: fusion/group.cpp). Its sub-rows are
// ceil(rowLength / S) long, S a power of two, and the last ones are cut short: their positions
// are clamped to the row (loads stay in bounds; stores past the end rewrite the last element
// with its own value) and what they accumulate is the operation's identity, so that 1000 or
// 4097 rows split too.
#pragma once

#include "lower/kernel_program.h"

namespace stitch::lower {

// Splits the phases of p that qualify (see above), in place; by stages only with a GPU `target`
// (null: none). Returns how many it split.
int splitLongRows(KernelProgram& p, const LaunchTarget* target);

}  // namespace stitch::lower
