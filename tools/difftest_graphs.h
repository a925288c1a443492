// The graphs of `stitch-difftest`: seeded random graphs (src/testing/random_graph.h) as .stitch
// text, with sizes for their symbolic dims.
//
// This header deliberately exposes only standard types: the tool's driver uses the public C++ API
// (stitch.hpp), whose stitch::Error must not meet the core's class of the same name in one
// translation unit.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace stitch::difftest {

struct RandomCase {
  std::string name;                     // the graph's name, "random_<seed>"
  std::string text;                     // the graph in the .stitch format
  std::map<std::string, int64_t> dims;  // a size for every symbolic dim
};

// The graph of `seed`: the generator's default options (2-10 ops, composites and layout ops),
// with symbolic input dims for one seed in four, as the backends' random-graph tests draw them.
// Throws std::runtime_error if the generator fails (a bug in the generator).
RandomCase randomCase(uint64_t seed);

}  // namespace stitch::difftest
