// Running a plan on the reference interpreter, kernel by kernel.
//
// Each kernel is cut out as a graph of its own: its inputs are the values it reads (graph inputs
// or earlier kernels' outputs), the sources it uses are recreated inside it, and its outputs are
// the values it writes. Only those outputs are materialized between kernels, as a fused backend
// would. The reference rounds every op to its dtype either way, so a valid plan reproduces the
// unfused answer exactly; a mismatch means the plan lost or misrouted a value.
#pragma once

#include <span>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "reference/interpreter.h"

namespace stitch::fusion {

// The graph outputs computed by running `plan` (made for g) kernel by kernel on `inputs`.
std::vector<reference::HostTensor> evaluatePlan(const ir::Graph& g, const Plan& plan,
                                                std::span<const reference::TensorView> inputs);

// The graph of one kernel, with concrete shapes (for evaluation and, later, code generation).
// `inputs` receives the original node id of each of its inputs, in order.
ir::Graph kernelGraph(const ir::Graph& g, const Kernel& k, const ir::Bindings& bindings,
                      std::vector<int>* inputs = nullptr);

}  // namespace stitch::fusion
