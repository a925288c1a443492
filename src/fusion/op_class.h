// Op classes as the planner sees them (FusionStitching's taxonomy).
//
// Sources (inputs, constants, full, iota) are never kernels of their own: a kernel that uses a
// constant, full or iota computes it in place, and inputs are read from global memory.
// Elementwise ops are cheap (add, mul, compare, ...) or expensive (transcendentals, division).
// Layout ops are free (reshape: a view of row-major data) or move data (transpose, slice, concat,
// broadcast_to materialized). Reductions are classified on concrete shapes by where their
// reduced axes lie: innermost (row), outermost (column), in between (middle), or all.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace stitch::fusion {

enum class OpKind {
  Input,
  Source,     // constant, full, iota: computed in place by their users
  Cheap,      // elementwise, a few cycles
  Expensive,  // elementwise transcendental or division
  Reduce,
  Reshape,  // free view
  BroadcastTo,
  DataMovement,  // transpose, slice, concat, gather: gathered reads
  Composite,     // softmax, layer_norm, ...: planned as one opaque kernel if not decomposed
};
std::string_view opKindName(OpKind k);

OpKind classify(ir::OpCode op);

enum class ReduceKind { Row, Column, Middle, All };
std::string_view reduceKindName(ReduceKind k);

// Where the reduced axes of a reduction over `shape` lie. Size-1 axes are ignored.
ReduceKind reduceKind(std::span<const int64_t> shape, std::span<const int64_t> axes);

}  // namespace stitch::fusion
