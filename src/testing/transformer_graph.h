// Stacked transformer layers, memory-bound parts only: graphs of realistic mix and any size, for
// the planner's benchmarks and tests.
//
// Per layer (h: f32[tokens, hidden], tokens = batch * seq), all in primitives:
//   - scaled masked softmax over attention scores, with reshapes and transposes around it;
//   - bias add, residual add and layer norm after the attention output;
//   - bias add and GELU (tanh form) on the feed-forward intermediate;
//   - bias add, residual add and layer norm after the feed-forward output.
// The matmuls between these parts are not memory-bound and are left out; layout ops stand in
// for them so that every layer feeds the next and the whole graph is one connected DAG:
// attention scores are h reshaped to [batch, seq, heads, head] and transposed (so the head size
// must equal seq), the up projection is a broadcast to the intermediate width, and the down
// projection a sum over it (a middle-axis reduction). No dropout.
//
// Inputs come first (x, the shared additive mask, then each layer's biases and norm weights), so
// printing the graph reads back to the same graph. Every shape is concrete.
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace stitch::testing {

struct TransformerGraphOptions {
  int64_t batch = 4;
  int64_t seq = 128;  // tokens = batch * seq = 512
  int64_t hidden = 768;
  int64_t heads = 6;   // head size hidden / heads must equal seq (see above)
  int64_t ffn = 3072;  // a multiple of hidden
};

// `layers` (>= 1) layers; throws InvalidArgument for options that do not fit together.
ir::Graph transformerGraph(int layers, const TransformerGraphOptions& options = {});

// Ops (Graph::numOps) one layer adds.
int64_t transformerOpsPerLayer(const TransformerGraphOptions& options = {});

// As many layers as come closest to `ops` ops (at least one).
ir::Graph transformerGraphWithOps(int64_t ops, const TransformerGraphOptions& options = {});

}  // namespace stitch::testing
