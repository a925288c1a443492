// The graphs every GPU test runs: each example file's graphs at two sizes of its symbolic dims,
// the transformer test graph, and seeded random graphs. Shared by the compile tests (no device)
// and the run tests (label gpu).
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/numerics_graphs.h"
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

// The reduction numerics cases (tests/common/numerics_graphs.h): long rows and columns of values
// near 1000, products with +-inf, every reduction over empty extents, the cross-entropy example
// on an empty batch. `large`: include the 10M/16M-element cases.
inline std::vector<NamedGraph> numericsGraphs(bool large) {
  std::vector<numerics::Case> cases;
  if (large) {
    cases.push_back(numerics::layerNormNear1000(10'000'000));
    cases.push_back(numerics::layerNormNear1000(int64_t{1} << 24));
    cases.push_back(numerics::longRowMean(1, int64_t{1} << 24));
    cases.push_back(numerics::longRowMean(1, (int64_t{1} << 24) + 1));
    cases.push_back(numerics::longColumnMean(int64_t{1} << 22, 3));
    cases.push_back(numerics::longColumnMean((int64_t{1} << 22) + 1, 3));
  }
  cases.push_back(numerics::longRowMean(3, 300'001));
  cases.push_back(numerics::longColumnMean(200'001, 70));
  for (const char* t : {"f32", "f64", "f16", "bf16"}) {
    cases.push_back(numerics::prodWithInf(t, 4, 1000, 0));
    cases.push_back(numerics::prodWithInf(t, 4, 4096, 2000));
    cases.push_back(numerics::prodWithInf(t, 4, int64_t{1} << 17, 100'000));
  }
  for (numerics::Case& c : numerics::allEmptyReductions()) cases.push_back(std::move(c));
  std::ifstream in(STITCH_SOURCE_DIR "/examples/cross_entropy.stitch");
  std::stringstream text;
  text << in.rdbuf();
  cases.push_back({"cross_entropy.stitch[N=0]", text.str(), {{"N", 0}}});
  std::vector<NamedGraph> out;
  for (const numerics::Case& c : cases) {
    NamedGraph ng{c.name, ir::parseModule(c.text, c.name).at(0), {}};
    for (const auto& [s, v] : c.dims) ng.bindings[s] = v;
    out.push_back(std::move(ng));
  }
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
