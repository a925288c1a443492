// Decomposition of composite ops into primitives, the first pass: the planner and the code
// generators only ever see primitives, so a softmax is planned like any hand-written one.
//
//   softmax(x)     = e / reduce_sum(e)           with e = exp(x - reduce_max(x))
//   log_softmax(x) = d - log(reduce_sum(exp(d)))  with d = x - reduce_max(x)
//   layer_norm     = (x - mean) * rsqrt(mean((x - mean)^2) + eps) * gamma + beta
//                    (two passes, population variance, as the reference defines it)
//   rms_norm       = x * rsqrt(mean(x^2) + eps) * gamma
//   gelu none      = 0.5 * x * (1 + erf(x * 0.7071067811865476))
//   gelu tanh      = 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x^3)))
//   silu(x)        = x * sigmoid(x)
//   argmax(x)      = two chained reductions over the axis: the NaN-free max, then the least
//                    index holding it (a NaN's index first); argmin alike (see argReduce)
//
// Reductions keep their dims (keepdims=true) so their results broadcast back against x: over the
// one axis for softmax and log_softmax, over axis..end for the norms. An f16/bf16 composite is
// computed in f32 (its operands cast up, its result cast back), as production kernels do; that
// keeps the decomposition within the f16/bf16 tolerances of the reference, which computes
// composites in f64 and rounds once. The final node keeps the composite's name, so outputs keep
// their names; the other nodes get fresh names.
#pragma once

#include "ir/graph.h"

namespace stitch::passes {

ir::Graph decomposeComposites(const ir::Graph& g);

}  // namespace stitch::passes
