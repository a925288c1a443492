// Differential checking against the reference interpreter, shared by the pass, planner and
// backend tests: evaluate a graph on host tensors, and compare two sets of outputs with the
// tolerances of DESIGN.md (`stitch run --check`): f32 rtol = atol = 1e-4, f16 1e-2, bf16 4e-2,
// f64 1e-4, ints and bool exact, NaN matches NaN, infinities match exactly.
//
// A value that passed through f16/bf16 on its way to an f32 output carries that lower precision;
// a rewrite that rounds differently (a decomposed composite) may then differ from the reference
// by a low-precision ulp in an f32 output. graphTolerance() gives the tolerance such a graph's
// outputs are fairly judged by: the loosest of every float dtype in the graph.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "reference/interpreter.h"

namespace stitch::testing {

// DESIGN.md's tolerance for a dtype (0 for ints and bool: exact).
double dtypeTolerance(ir::DType t);

// The loosest dtypeTolerance over the float dtypes of every node of g.
double graphTolerance(const ir::Graph& g);

// The outputs of g on inputs (in input order), computed by the reference interpreter.
std::vector<reference::HostTensor> evaluateReference(const ir::Graph& g,
                                                     std::span<const reference::HostTensor> inputs);

// Empty when got matches want (same count, dtypes and shapes; every element within
// |got - want| <= tol * (1 + |want|) for floats with tol = max(floatTol, dtypeTolerance(dtype)),
// exact for ints and bool; floatTol 0 asks for bit-exact floats); otherwise a description of
// the first mismatch.
std::string compareOutputs(std::span<const reference::HostTensor> want,
                           std::span<const reference::HostTensor> got, double floatTol);

}  // namespace stitch::testing
