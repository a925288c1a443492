// Helpers for the pass tests: graphs from text, op counts, and the differential check of a
// rewritten graph against the original on the reference interpreter.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "ir/parser.h"
#include "ir/printer.h"
#include "testing/random_graph.h"
#include "testing/reference_check.h"

namespace stitch::passes::testing {

inline ir::Graph parse(std::string_view text) { return ir::parseModule(text, "test.stitch").at(0); }

inline int count(const ir::Graph& g, ir::OpCode op) {
  return static_cast<int>(std::count_if(g.nodes().begin(), g.nodes().end(),
                                        [&](const ir::Node& n) { return n.op == op; }));
}

inline bool hasComposite(const ir::Graph& g) {
  return std::any_of(g.nodes().begin(), g.nodes().end(), [](const ir::Node& n) {
    return ir::opInfo(n.op).cls == ir::OpClass::Composite;
  });
}

// Empty when `after` computes what `before` does on seeded inputs under bindings b, within
// floatTol (0: bit-exact); else the mismatch with both graphs as text, to reproduce it.
inline std::string differs(const ir::Graph& before, const ir::Graph& after, const ir::Bindings& b,
                           uint64_t seed, double floatTol) {
  auto inputs = stitch::testing::randomInputs(before, b, seed);
  auto want = stitch::testing::evaluateReference(before, inputs);
  auto got = stitch::testing::evaluateReference(after, inputs);
  std::string d = stitch::testing::compareOutputs(want, got, floatTol);
  if (d.empty()) return d;
  return d + "\nbefore:\n" + ir::printGraph(before) + "after:\n" + ir::printGraph(after);
}

}  // namespace stitch::passes::testing
