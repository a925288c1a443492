// Constant folding, kept conservative: only scalars become constants, so no large tensor is ever
// materialized in a graph (the planner would then have to move it through memory).
//
// - A node whose result is a scalar (rank 0) and whose operands are all sources (constants,
//   full, iota) of static shape with at most 4096 elements is evaluated with the reference
//   interpreter, which defines every op's value, and becomes a Constant. So the folded value is
//   exactly what the unfolded graph computes.
// - `full` (and `iota`) with shape [] becomes a Constant the same way.
// - An i64 result beyond 2^53 is not folded: a Constant's value is a double.
// - A graph output that folds becomes `full(shape=[], ...)` under the output's name instead, so
//   the output keeps its name (constants are unnamed); such a full is left alone.
#pragma once

#include "ir/graph.h"

namespace stitch::passes {

ir::Graph foldConstants(const ir::Graph& g);

}  // namespace stitch::passes
