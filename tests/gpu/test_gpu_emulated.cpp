// The CUDA code generator's kernels, run on the host (gpu_emulator.h) against the reference
// interpreter: no GPU needed, so every CI run checks what the kernels compute, not only that
// NVRTC compiles them (test_gpu_codegen.cpp). Programs are built by the driver for sm_90 exactly
// as for a device (plan, lowering with the planner's launch, shape-class size arguments, both
// source forms, cache keys); each distinct key is compiled once and serves every signature that
// has it, so a shape class's code runs with the sizes and grid of each of its signatures.
// Launches are cut to a few blocks, which the grid-stride loops must then cover.
//
// A failure names the graph and its sizes (random graphs: the seed; `stitch run FILE --dim ...`
// or the seed reproduces it) and the first mismatch.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "common/fiber_sanitizers.h"
#include "common/index_check_cases.h"
#include "common/sweep.h"
#include "common/temp_dir.h"
#include "driver/driver.h"
#include "gpu/gpu_emulator.h"
#include "gpu/gpu_test_graphs.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "lower/kernel_program.h"
#include "testing/random_graph.h"
#include "testing/reference_check.h"

using namespace stitch;
namespace st = stitch::testing;

namespace {

struct Case {
  gputest::NamedGraph graph;
  ir::Graph optimized;
  driver::Build build;
};

std::vector<Case> buildAll(std::vector<gputest::NamedGraph> graphs) {
  const rt::Target target = target::namedTarget("sm_90");
  std::vector<Case> out;
  for (gputest::NamedGraph& ng : graphs) {
    ir::Graph optimized = driver::optimize(ng.graph);
    driver::Build b = driver::build(optimized, ng.bindings, target, {});
    out.push_back({std::move(ng), std::move(optimized), std::move(b)});
  }
  return out;
}

std::string sizesText(const ir::Bindings& b) {
  std::string s;
  for (const auto& [name, v] : b) s += " --dim " + name + "=" + std::to_string(v);
  return s;
}

struct Totals {
  size_t runs = 0, kernels = 0, codes = 0;
};

// Compiles form `form` of every case's kernels once per key, runs every case on seeded inputs
// and compares with the reference.
Totals runAll(const std::vector<Case>& cases, size_t form, uint64_t seed = 7) {
  std::vector<const rt::ProgramArtifact*> programs;
  Totals t;
  for (const Case& c : cases) {
    programs.push_back(&c.build.artifact);
    t.kernels += c.build.artifact.kernels.size();
  }
  st::TempDir dir("stitch-emulated");
  gputest::Emulator emu(programs, form, dir.path().string());
  t.codes = emu.codes();
  std::cout << t.kernels << " kernels of " << cases.size() << " programs, " << t.codes
            << " distinct codes compiled for the host in " << emu.compileSeconds() << " s\n";
  for (const Case& c : cases) {
    const auto inputs = st::randomInputs(c.graph.graph, c.graph.bindings, seed);
    const auto want = st::evaluateReference(c.graph.graph, inputs);
    std::string mismatch;
    try {
      mismatch =
          st::compareOutputs(want, emu.run(c.optimized, c.graph.bindings, c.build.artifact, inputs),
                             st::graphTolerance(c.graph.graph));
    } catch (const std::exception& e) {
      mismatch = e.what();
    }
    EXPECT_EQ(mismatch, "") << c.graph.name << sizesText(c.graph.bindings) << " (form " << form
                            << "):\n"
                            << ir::printGraph(c.graph.graph);
    ++t.runs;
  }
  return t;
}

TEST(GpuEmulated, ExamplesMatchTheReference) {
  SKIP_UNDER_SANITIZERS();
  // Three sizes of every symbolic dim: two of them share shape classes (40 and 44 select the
  // same mappings for most kernels), 333 is odd (scalar accesses, a partial last group).
  const Totals t = runAll(buildAll(gputest::exampleGraphs({40, 44, 333}, 1 << 16)), 0);
  EXPECT_GT(t.runs, 60u);
  // Kernels of one shape class share a code.
  EXPECT_LT(t.codes, t.kernels);
}

TEST(GpuEmulated, UnalignedFormsMatchTheReference) {
  SKIP_UNDER_SANITIZERS();
  const Totals t = runAll(buildAll(gputest::exampleGraphs({37}, 1 << 16)), 1);
  EXPECT_GT(t.runs, 30u);
}

TEST(GpuEmulated, RandomGraphsMatchTheReference) {
  SKIP_UNDER_SANITIZERS();
  std::vector<gputest::NamedGraph> graphs;
  const int count = stitch::testing::sweepCount(60);
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(count); ++seed) {
    gputest::NamedGraph ng = gputest::randomNamedGraph(seed);
    // Symbolic graphs also at other sizes: the first signature's class code must serve them.
    if (!ng.bindings.empty()) {
      for (int64_t step : {64, 3}) {
        gputest::NamedGraph other = ng;
        for (auto& [s, v] : other.bindings) v += step;
        other.name += " sizes +" + std::to_string(step);
        graphs.push_back(std::move(other));
      }
    }
    graphs.push_back(std::move(ng));
  }
  const Totals t = runAll(buildAll(std::move(graphs)), 0);
  EXPECT_GE(t.runs, static_cast<size_t>(count));
}

// Reductions split by stages over sub-rows (lower/split_rows.h, GPU only): batch norm over [N, C]
// (its two-stage column statistics, then every element), Adam with clipping (an all-reduction
// every element's update reads), a softmax over one long row (two stages of a row, then every
// element) and batch norm over NCHW (two stages of 64 long rows), each planned as one kernel at
// sizes whose sub-rows divide the rows, cut the last one short (odd N, N not a multiple of S),
// or leave too little to split (N = 1, 2, 33, and 64 rows of 256, below the work a staged split
// needs). The launches are cut to 16 blocks, so every phase strides over its sub-rows.
TEST(GpuEmulated, StagedSplitsMatchTheReference) {
  SKIP_UNDER_SANITIZERS();
  auto read = [](const char* file) {
    std::ifstream f(std::string(STITCH_SOURCE_DIR) + "/examples/" + file);
    std::stringstream ss;
    ss << f.rdbuf();
    return ir::parseModule(ss.str(), file);
  };
  const char* longSoftmax = R"(
graph long_softmax(x: f32[R, N]) {
  y = softmax(x, axis=-1)
  return y
})";
  std::vector<gputest::NamedGraph> graphs;
  std::set<std::string> unsplit;  // the cases too small to split
  auto addAt = [&](const ir::Graph& g, std::vector<ir::Bindings> sizes, size_t small = 0) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::string name = g.name();
      for (const auto& [s, v] : sizes[i]) name += "[" + s + "=" + std::to_string(v) + "]";
      if (i < small) unsplit.insert(name);
      graphs.push_back({std::move(name), g, std::move(sizes[i])});
    }
  };
  for (const ir::Graph& g : read("batch_norm1d_train.stitch"))
    addAt(g,
          {{{"N", 1}},
           {{"N", 2}},
           {{"N", 33}},
           {{"N", 64}},
           {{"N", 333}},
           {{"N", 1000}},
           {{"N", 4096}},
           {{"N", 4097}}},
          4);
  addAt(read("adam_clip.stitch").at(0),
        {{{"N", 1}}, {{"N", 65536}}, {{"N", 100003}}, {{"N", 262144}}}, 1);
  addAt(ir::parseModule(longSoftmax, "long_softmax.stitch").at(0),
        {{{"R", 1}, {"N", 65536}}, {{"R", 3}, {"N", 70001}}});
  addAt(read("batch_norm_train.stitch").at(0), {{{"N", 256}}, {{"N", 257}}});
  const std::vector<Case> cases = buildAll(std::move(graphs));
  // The split is what runs: one kernel, and (but at the smallest sizes) phases of every stage and
  // the per-element phase after them.
  for (const Case& c : cases) {
    EXPECT_EQ(c.build.programs.size(), 1u) << c.graph.name;
    bool staged = false;
    for (const lower::KernelProgram& p : c.build.programs)
      for (const lower::Phase& ph : p.phases) staged = staged || ph.name.ends_with("_elems");
    EXPECT_EQ(staged, !unsplit.contains(c.graph.name)) << c.graph.name;
  }
  const Totals t = runAll(cases, 0);
  EXPECT_EQ(t.runs, cases.size());
  // Unaligned: scalar accesses, the other code of each kernel.
  runAll(cases, 1);
}

// Issue 17 on the GPU code generator: a transformer block's memory-bound graph at many
// (batch, sequence) pairs compiles a few codes per kernel of the plan, and every result matches.
TEST(GpuEmulated, TransformerBlockShapeClassesServeManySizes) {
  SKIP_UNDER_SANITIZERS();
  const std::string path = STITCH_SOURCE_DIR "/examples/transformer_block.stitch";
  std::vector<gputest::NamedGraph> graphs;
  for (auto [batch, seq] : {std::pair{1, 40},
                            {2, 44},
                            {3, 36},
                            {2, 48},
                            {4, 40},
                            {1, 100},
                            {2, 120},
                            {3, 104},
                            {1, 128},
                            {2, 112}})
    for (gputest::NamedGraph& ng : gputest::exampleGraphs({1}, int64_t{1} << 30))
      if (ng.name.find("transformer_block") != std::string::npos) {
        ng.bindings = {{"B", batch}, {"S", seq}};
        graphs.push_back(std::move(ng));
        break;
      }
  ASSERT_EQ(graphs.size(), 10u) << path;
  const std::vector<Case> cases = buildAll(std::move(graphs));
  const Totals t = runAll(cases, 0);
  // Codes per kernel position of the plan (each signature's plan has the same kernels here).
  std::map<size_t, std::set<std::string>> codes;
  for (const Case& c : cases)
    for (size_t k = 0; k < c.build.artifact.kernels.size(); ++k)
      codes[k].insert(c.build.artifact.kernels[k].forms[0].key.canonical());
  // The GPU classes split where the code does: the softmax rows' mapping (S <= 48: 4 lanes per
  // row, S >= 100: 8; lower/launch.h) and batch 1 (a size-1 axis broadcasts: a class of its own),
  // so at most 4 codes per kernel for these 10 signatures, and one when only the batch moves.
  for (const auto& [k, keys] : codes) {
    EXPECT_LE(keys.size(), 4u) << "kernel " << k << " of the plan";
    std::cout << "kernel " << k << ": " << keys.size() << " codes\n";
  }
  EXPECT_LE(t.codes, 12u);
  std::cout << t.codes << " codes for " << t.kernels << " kernels of 10 signatures\n";
}

// Index checks in the CUDA kernels (stitch/check.cuh): good indices match the reference; one out
// of range fails the run with the reference's error (the op, the index, the size), and the
// status words are the run's, so the same code then runs good data again.
TEST(GpuEmulated, IndexChecksFailTheRunNamingTheIndex) {
  SKIP_UNDER_SANITIZERS();
  std::vector<gputest::NamedGraph> graphs;
  const std::vector<testcases::IndexCase> cases = testcases::indexCases();
  for (const testcases::IndexCase& c : cases) {
    ir::Graph g = std::move(ir::parseModule(c.text, c.name).at(0));
    graphs.push_back({c.name, std::move(g), ir::Bindings(c.dims.begin(), c.dims.end())});
  }
  const std::vector<Case> built = buildAll(std::move(graphs));
  std::vector<const rt::ProgramArtifact*> programs;
  for (const Case& b : built) programs.push_back(&b.build.artifact);
  st::TempDir dir("stitch-emulated-checks");
  gputest::Emulator emu(programs, 0, dir.path().string());
  for (size_t i = 0; i < cases.size(); ++i) {
    const testcases::IndexCase& c = cases[i];
    const Case& b = built[i];
    SCOPED_TRACE(c.name);
    auto inputs = st::randomInputs(b.graph.graph, b.graph.bindings, 3);
    std::vector<int64_t>& index = inputs[c.input].ints;
    for (size_t k = 0; k < index.size(); ++k) index[k] = static_cast<int64_t>(k) % c.bound;
    auto good = [&] {
      return st::compareOutputs(st::evaluateReference(b.graph.graph, inputs),
                                emu.run(b.optimized, b.graph.bindings, b.build.artifact, inputs),
                                st::graphTolerance(b.graph.graph));
    };
    EXPECT_EQ(good(), "");
    const int64_t keep = index[static_cast<size_t>(c.at)];
    index[static_cast<size_t>(c.at)] = c.bad;
    try {
      emu.run(b.optimized, b.graph.bindings, b.build.artifact, inputs);
      ADD_FAILURE() << "no index error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::IndexOutOfRange) << e.what();
      EXPECT_NE(e.message().find(c.message), std::string::npos) << e.what();
    }
    index[static_cast<size_t>(c.at)] = keep;
    EXPECT_EQ(good(), "");
  }
}

}  // namespace
