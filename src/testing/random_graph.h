// Seeded random graphs, for differential tests of passes, the fusion planner and the backends.
//
// A graph is a pure function of (seed, options): the generator draws from its own splitmix64
// stream (no std distributions, whose output differs between standard libraries), so a failing
// seed reproduces on every platform. Graphs are built through ir::GraphBuilder only and verify.
//
// What the graphs exercise, because it is what planners and code generators meet: mostly f32
// (f16/bf16 through cast chains, some i32 and bool), 1-4 inputs of rank 1-4 with at most 4096
// elements each, elementwise chains, broadcasts (row vectors, column vectors, scalar literals),
// reductions of every kind (row = innermost axes, column = outermost, a middle axis, all axes;
// keepdims or not) whose results feed back into elementwise ops with the bigger operand (the
// softmax / layer_norm pattern), values with several consumers, several outputs, reshape,
// transpose, slice, concat, broadcast_to, iota/full, select on comparisons and, when
// options.composites, the composite ops. Unary ops that would make mostly NaN or inf are guarded
// (log(abs(x) + 1), sqrt(abs(x)), div by abs(y) + 0.5) so outputs stay comparable.
//
// Constants are made just before their one user, in a literal position, so printGraph /
// parseModule round-trips every graph exactly (Graph::operator==).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "reference/interpreter.h"

namespace stitch::testing {

struct RandomGraphOptions {
  int minOps = 2;  // ops, not counting inputs and constants
  int maxOps = 10;
  bool composites = true;  // softmax, log_softmax, layer_norm, rms_norm, gelu, silu
  bool layout = true;      // reshape, transpose, slice, concat, broadcast_to
  bool symbolic = false;   // some input dims are symbols N, M (shared between inputs)
};

// A verified random graph of minOps..maxOps ops, deterministic in seed on every platform. Its
// name is "random_<seed>".
ir::Graph randomGraph(uint64_t seed, const RandomGraphOptions& options = {});

// Concrete sizes (1..8) for the graph's symbols, deterministic in seed.
ir::Bindings randomBindings(const ir::Graph& g, uint64_t seed);

// Seeded input buffers for evaluating g under bindings, in input order: floats uniform in
// [-1, 1] (rounded to their dtype), ints in [-8, 8], bools 0/1.
std::vector<reference::HostTensor> randomInputs(const ir::Graph& g, const ir::Bindings& b,
                                                uint64_t seed);

}  // namespace stitch::testing
