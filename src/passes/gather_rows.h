// Gathers of one element per row of a computed value become one-hot row reductions.
//
//   y = gather(x, index, axis=a)  with index.shape[a] == 1, x computed in the graph, n static
//   =>  y = reduce_max(select(eq(iota(x.shape, a), check_index(index, size=[n])), x, lowest), [a])
//
// A gather reads its data at computed positions, so the planner keeps the data in memory: a
// gather of log_softmax(logits) at the label (cross-entropy's forward) would write the whole
// [tokens, vocab] log-probabilities once to read one value per row. As a row reduction it stitches
// into the kernel computing x, which only reads the logits. The rewrite is exact: the one selected
// element is combined only with the lowest value of the dtype (-inf for floats, so -0.0, NaN and
// +-inf come through unchanged; the dtype's minimum for ints), and check_index (named
// "<y>_index") fails the run on an index outside [0, n) as the gather would.
// Gathers from graph inputs and views of them stay gathers (one load per element); so do bool
// data and symbolic axes (n - 1 would not be a constant).
#pragma once

#include "ir/graph.h"

namespace stitch::passes {

ir::Graph gatherRowsToReductions(const ir::Graph& g);

// Whether value v is a graph input or a view of one (reshape, slice, transpose, broadcast_to):
// read in place by a gather, at index arithmetic, however the kernel is cut.
bool readsInputInPlace(const ir::Graph& g, int v);

}  // namespace stitch::passes
