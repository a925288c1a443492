// Binding a graph's signature to concrete input tensors.
//
// At run time each input tensor's dtype and rank must match its declared type, static dims must
// match exactly, and each symbol takes its size from the first input dim that carries it; a later
// dim with the same symbol but another size is a conflict. Errors name the input, the axis and
// both sizes, and are ShapeMismatch. Every backend and the shape query use this one function.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ir/graph.h"

namespace stitch::ir {

struct ConcreteInput {
  DType dtype;
  std::span<const int64_t> shape;
};

// Checks inputs against g's signature and returns the symbol bindings. Also checks, as
// checkValueSizes, that no value of g is too large under them, and, as checkSymbolicSlices,
// that no slice's end cuts a symbolic axis short.
Bindings bindInputs(const Graph& g, std::span<const ConcreteInput> inputs);

// Throws ShapeMismatch naming the value and the bindings when some value of g, under b, has more
// than kMaxTensorBytes (support/checked.h). Static shapes were checked when g was built.
void checkValueSizes(const Graph& g, const Bindings& b);

// Throws ShapeMismatch when a slice of g takes a symbolic axis whole up to an end written below
// 2^62 (ir/infer.h, kSymbolicSliceEnd) and the symbol is bound past that end: Python semantics
// would give a prefix of the axis, not the whole axis that the slice's type promises.
void checkSymbolicSlices(const Graph& g, const Bindings& b);

// The concrete shape of every node under bindings (index = node id).
std::vector<std::vector<int64_t>> concreteShapes(const Graph& g, const Bindings& b);

}  // namespace stitch::ir
