// Every pass, alone and as the pipeline, keeps the reference interpreter's answer: on every
// example graph, and on random graphs from the seeded generator. Decomposition changes rounding
// (primitives round each step; the reference computes composites in f64 and rounds once), so it
// and the pipeline are held to DESIGN.md's tolerances; every other pass must be bit-exact.
// A failure names the seed and prints both graphs as .stitch text.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "common/sweep.h"
#include "pass_helpers.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/decompose.h"
#include "passes/fold_constants.h"
#include "passes/fold_reshapes.h"
#include "passes/pipeline.h"

namespace stitch::passes::testing {
namespace {

struct Pass {
  const char* name;
  std::function<ir::Graph(const ir::Graph&)> run;
  bool exact;  // bit-exact against the original
};

const std::vector<Pass>& allPasses() {
  static const std::vector<Pass> passes = {
      {"decomposeComposites", decomposeComposites, false},
      {"foldReshapes", foldReshapes, true},
      {"foldConstants", foldConstants, true},
      {"eliminateCommonSubexpressions", eliminateCommonSubexpressions, true},
      {"eliminateDeadCode", eliminateDeadCode, true},
      {"runPasses", runPasses, false},
  };
  return passes;
}

std::vector<ir::Graph> exampleGraphs() {
  std::vector<ir::Graph> out;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(STITCH_SOURCE_DIR "/examples"))
    if (e.path().extension() == ".stitch") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream text;
    text << in.rdbuf();
    for (ir::Graph& g : ir::parseModule(text.str(), f.string())) out.push_back(std::move(g));
  }
  return out;
}

// Symbols bound to 4, or to 1 where that would make an input large (batchnorm's N x 64 x 56 x
// 56), to keep the Debug-build reference quick.
ir::Bindings smallBindings(const ir::Graph& g) {
  ir::Bindings b;
  for (const std::string& s : g.symbols()) b[s] = 4;
  for (int id : g.inputs()) {
    int64_t n = 1;
    for (int64_t d : ir::concretize(g.node(id).type.shape, b)) n *= d;
    if (n > 65536) {
      for (auto& [s, v] : b) v = 1;
      break;
    }
  }
  return b;
}

TEST(PassesOnExamples, EveryPassKeepsTheAnswer) {
  std::vector<ir::Graph> graphs = exampleGraphs();
  ASSERT_GE(graphs.size(), 10u);
  int checked = 0;
  for (const ir::Graph& g : graphs) {
    ir::Bindings b = smallBindings(g);
    double tol = stitch::testing::graphTolerance(g);
    // The original is evaluated once; the examples are the largest graphs here.
    auto inputs = stitch::testing::randomInputs(g, b, 42);
    auto want = stitch::testing::evaluateReference(g, inputs);
    for (const Pass& p : allPasses()) {
      SCOPED_TRACE(std::string(p.name) + " on " + g.name());
      ir::Graph after = p.run(g);
      ASSERT_NO_THROW(ir::verify(after));
      EXPECT_EQ(after.inputs().size(), g.inputs().size());
      auto got = stitch::testing::evaluateReference(after, inputs);
      EXPECT_EQ(stitch::testing::compareOutputs(want, got, p.exact ? 0.0 : tol), "")
          << ir::printGraph(after);
      ++checked;
    }
    ir::Graph p = runPasses(g);
    EXPECT_FALSE(hasComposite(p)) << g.name();
  }
  EXPECT_EQ(checked, static_cast<int>(graphs.size() * allPasses().size()));
}

TEST(PassesOnExamples, PipelineSimplifiesTheCompositeForms) {
  // The composite forms of softmax and layer_norm decompose to what the hand-written forms are.
  for (const ir::Graph& g : exampleGraphs()) {
    if (g.name() == "softmax_composite") {
      EXPECT_EQ(runPasses(g).numOps(), 5u);
    } else if (g.name() == "layer_norm_composite") {
      EXPECT_EQ(runPasses(g).numOps(), 9u);
    }
  }
}

// Runs `count` random graphs from `first` through every pass; returns the number of mismatches
// (each reported with its seed and both graphs).
int randomMismatches(uint64_t first, int count, bool symbolic) {
  int mismatches = 0;
  for (uint64_t seed = first; seed < first + static_cast<uint64_t>(count); ++seed) {
    stitch::testing::RandomGraphOptions o;
    o.symbolic = symbolic;
    o.composites = true;
    ir::Graph g = stitch::testing::randomGraph(seed, o);
    ir::Bindings b = stitch::testing::randomBindings(g, seed);
    double tol = stitch::testing::graphTolerance(g);
    for (const Pass& p : allPasses()) {
      ir::Graph after;
      try {
        after = p.run(g);
        ir::verify(after);
      } catch (const std::exception& e) {
        ADD_FAILURE() << p.name << " threw on seed " << seed << ": " << e.what() << "\n"
                      << ir::printGraph(g);
        ++mismatches;
        continue;
      }
      std::string d = differs(g, after, b, seed, p.exact ? 0.0 : tol);
      if (!d.empty()) {
        ADD_FAILURE() << p.name << " changed the answer of random graph seed " << seed
                      << (symbolic ? " (symbolic)" : "") << ": " << d;
        ++mismatches;
      }
      if (std::string(p.name) == "runPasses") {
        EXPECT_FALSE(hasComposite(after)) << "seed " << seed;
      }
    }
  }
  return mismatches;
}

TEST(PassesOnRandomGraphs, StaticShapes) {
  EXPECT_EQ(randomMismatches(0, stitch::testing::sweepCount(250), false), 0);
}

TEST(PassesOnRandomGraphs, SymbolicShapes) {
  EXPECT_EQ(randomMismatches(10000, stitch::testing::sweepCount(150), true), 0);
}

TEST(PassesOnRandomGraphs, LargerGraphs) {
  int mismatches = 0;
  for (uint64_t seed = 20000; seed < 20000u + stitch::testing::sweepCount(50); ++seed) {
    stitch::testing::RandomGraphOptions o;
    o.minOps = 15;
    o.maxOps = 30;
    o.symbolic = seed % 2 == 0;
    ir::Graph g = stitch::testing::randomGraph(seed, o);
    ir::Graph p = runPasses(g);
    EXPECT_FALSE(hasComposite(p));
    EXPECT_TRUE(runPasses(p) == p) << "not a fixed point, seed " << seed << "\n"
                                   << ir::printGraph(p);
    std::string d = differs(g, p, stitch::testing::randomBindings(g, seed), seed,
                            stitch::testing::graphTolerance(g));
    if (!d.empty()) {
      ADD_FAILURE() << "runPasses, seed " << seed << " (minOps 15, maxOps 30): " << d;
      ++mismatches;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace stitch::passes::testing
