// Splitting long rows: a reduce phase with few units and very long rows becomes two phases.
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
// S is a power of two dividing the row length, so every sub-row is full. Reductions with several
// stages (a softmax over one huge row) are left as they are.
#pragma once

#include "lower/kernel_program.h"

namespace stitch::lower {

// Splits the phases of p that qualify (see above), in place. Returns how many it split.
int splitLongRows(KernelProgram& p);

}  // namespace stitch::lower
