// Dead code elimination: drops every node no graph output depends on (unused constants
// included). Inputs always stay, used or not: they are the graph's signature.
#pragma once

#include "ir/graph.h"

namespace stitch::passes {

ir::Graph eliminateDeadCode(const ir::Graph& g);

}  // namespace stitch::passes
