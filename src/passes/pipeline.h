// The pass pipeline run on every graph before planning: decompose composites and turn one-per-row
// gathers of computed values into row reductions (gather_rows.h) once, then fold
// reshapes, fold constants, expand constant powers (expand_pow.h: after folding, which may
// make an exponent constant), CSE and DCE until a round changes nothing (at most four rounds;
// one usually suffices, a second catches what a fold exposed to CSE, like two reshapes that
// became equal).
#pragma once

#include "ir/graph.h"

namespace stitch::passes {

ir::Graph runPasses(const ir::Graph& g);

}  // namespace stitch::passes
