// See difftest_graphs.h. Nothing thrown by the core leaves this file as a core stitch::Error.
#include "difftest_graphs.h"

#include <exception>
#include <stdexcept>

#include "ir/printer.h"
#include "testing/random_graph.h"

namespace stitch::difftest {

RandomCase randomCase(uint64_t seed) {
  try {
    testing::RandomGraphOptions o;
    o.symbolic = seed % 4 == 0;
    ir::Graph g = testing::randomGraph(seed, o);
    RandomCase c;
    c.name = g.name();
    c.text = ir::printGraph(g);
    for (const auto& [symbol, size] : testing::randomBindings(g, seed)) c.dims[symbol] = size;
    return c;
  } catch (const std::exception& e) {
    throw std::runtime_error("random graph generator failed on seed " + std::to_string(seed) +
                             ": " + e.what());
  }
}

}  // namespace stitch::difftest
