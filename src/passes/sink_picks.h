// Picks of one element per row sink through elementwise ops to the values they are computed from.
//
//   pick   = reduce_sum(select(and(eq(iota(F, a), k), m...), v, 0), axes=[a])   (one-hot pick)
//   gather = gather(v, k, axis=a)
//   v      = f(x1, ..., r1, ...)   elementwise; each xi full along a, each rj of size 1 along a
//   =>  f(gather(x1, k', a), ..., r1, ...)     (the pick: under select(m... and k in range, ., 0))
//
// Cross-entropy's forward picks the log-probability at the label: v = x - max - log(sum(exp(x -
// max))). Picked as a one-hot row reduction it costs a compare, a select and an add over every
// element of the [tokens, vocab] row, and as a gather of a computed value it keeps the whole
// log-probabilities in memory (gather_rows.h then makes it such a reduction). Sunk, it is one load
// of the logit per row, minus the row's max and log-sum, which the softmax computes anyway.
//
// The rewrite applies when every leaf of f that is full along a is a graph input or a view of one
// (reshape, slice, transpose, broadcast_to: read in place at the gathered index) and every other
// leaf has size 1 along a (row statistics, scalars); a pick's mask must be eq(iota, k) and masks
// of size 1 along a. It is exact: f is evaluated at the one picked element with the same ops in
// the same dtypes. The pick's sum of one value and zeros becomes the value, except that a picked
// -0.0 stays -0.0 (0.0 + -0.0 is +0.0), as a gather gives it; a row that picks nothing (k
// outside [0, n), or a mask false) gives 0 as before. k is clamped into range only where the
// select discards the value (k not in [0, n)), or is a check_index of size n, which fails the run
// first. Symbolic n: only with such a check.
#pragma once

#include "ir/graph.h"

namespace stitch::passes {

ir::Graph sinkPicks(const ir::Graph& g);

}  // namespace stitch::passes
