// The graphs every GPU test runs: each example file's graphs at two sizes of its symbolic dims,
// the transformer test graph, and seeded random graphs. Shared by the compile tests (no device)
// and the run tests (label gpu).
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/parser.h"
#include "testing/random_graph.h"
#include "testing/transformer_graph.h"

namespace stitch::gputest {

struct NamedGraph {
  std::string name;  // "layer_norm.stitch:layer_norm[T=64]"
  ir::Graph graph;
  ir::Bindings bindings;
};

inline int64_t inputElements(const ir::Graph& g, const ir::Bindings& b) {
  int64_t total = 0;
  for (int id : g.inputs()) {
    int64_t n = 1;
    for (int64_t e : ir::concretize(g.node(id).type.shape, b)) n *= e;
    total += n;
  }
  return total;
}

// Every example graph at each of `sizes` for all its symbols, scaled down to at most
// `maxElements` input elements.
inline std::vector<NamedGraph> exampleGraphs(std::vector<int64_t> sizes = {64, 333},
                                             int64_t maxElements = int64_t{1} << 20) {
  std::vector<NamedGraph> out;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(STITCH_SOURCE_DIR "/examples"))
    if (e.path().extension() == ".stitch") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream text;
    text << in.rdbuf();
    for (ir::Graph& g : ir::parseModule(text.str(), f.string())) {
      std::vector<std::string> symbols = g.symbols();
      for (int64_t n : symbols.empty() ? std::vector<int64_t>{0} : sizes) {
        NamedGraph ng{f.filename().string() + ":" + g.name(), g, {}};
        for (const std::string& s : symbols) ng.bindings[s] = n;
        // Several symbols multiply: halve them all until the inputs fit in `maxElements`.
        while (inputElements(g, ng.bindings) > maxElements) {
          bool shrunk = false;
          for (auto& [s, v] : ng.bindings)
            if (v > 1) v /= 2, shrunk = true;
          if (!shrunk) break;
        }
        for (const auto& [s, v] : ng.bindings) ng.name += "[" + s + "=" + std::to_string(v) + "]";
        out.push_back(std::move(ng));
      }
    }
  }
  testing::TransformerGraphOptions t;
  out.push_back({"transformer(2 layers)", testing::transformerGraph(2, t), {}});
  for (const std::string& s : out.back().graph.symbols()) out.back().bindings[s] = 32;
  return out;
}

inline NamedGraph randomNamedGraph(uint64_t seed) {
  testing::RandomGraphOptions o;
  o.symbolic = seed % 4 == 0;  // a quarter with symbolic dims, bound to random sizes
  ir::Graph g = testing::randomGraph(seed, o);
  ir::Bindings b = testing::randomBindings(g, seed);
  return {"random seed " + std::to_string(seed), std::move(g), std::move(b)};
}

}  // namespace stitch::gputest
