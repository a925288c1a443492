// Common subexpression elimination: a node equal to an earlier one (same op, same operands after
// remapping, same attributes) is replaced by it; constants with the same dtype and value bits
// merge. All ops are pure, so this is always sound. Hash-based: one pass in node order, a key
// per node, linear in graph size.
//
// Attribute doubles compare by their bits, so -0.0 and 0.0 stay distinct (1/x tells them apart)
// and a NaN equals the same NaN. Inputs never merge: they are the signature. A merged output is
// returned as the surviving node, under its name (see rewriter.h).
#pragma once

#include "ir/graph.h"

namespace stitch::passes {

ir::Graph eliminateCommonSubexpressions(const ir::Graph& g);

}  // namespace stitch::passes
