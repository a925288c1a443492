// Folding of layout ops that do nothing or compose: a canonicalization so the planner sees fewer
// (free, but still counted) layout nodes.
//
//   reshape(reshape(x))          -> reshape(x)   (the outer target shape, stored resolved)
//   reshape(x) to x's own shape  -> x
//   broadcast_to(x) to x's shape -> x
//   transpose(x, identity perm)  -> x
//   slice(x) taking everything   -> x            (starts 0, steps 1, same shape)
//
// The inner reshape of a folded pair stays if something else uses it; eliminateDeadCode removes
// it otherwise. An output folded into its operand is returned as that operand (see rewriter.h).
#pragma once

#include "ir/graph.h"

namespace stitch::passes {

ir::Graph foldReshapes(const ir::Graph& g);

}  // namespace stitch::passes
