// The cost memo (fusion/cost_memo.h) may only skip analyses whose answer it already knows: a
// candidate's cost from the memo must be the cost its own analysis gives, so plans made with
// and without it are the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/planning.h"
#include "fusion/cost_memo.h"
#include "fusion/group.h"
#include "fusion/hardware.h"
#include "fusion/planner.h"
#include "ir/parser.h"
#include "passes/pipeline.h"
#include "testing/random_graph.h"
#include "testing/transformer_graph.h"

using namespace stitch;
using namespace stitch::fusion;
namespace fs = std::filesystem;
namespace st = stitch::testing;

namespace {

const char* const kProfiles[] = {"host", "sm_90", "gfx90a"};

// Graphs with repeats (stacked layers, the examples' several graphs) and without (random).
struct Case {
  std::string name;
  ir::Graph graph;
  ir::Bindings bindings;
};

// Two copies of g, each on inputs of its own, except that the second reads one input in place of
// another of the same type where a seeded draw says so (add(x, y) becoming add(x, x)), and
// returns some of its intermediate values too. Windows of the copies have the same ops and
// differ in what escapes and in which values they read twice.
ir::Graph twoCopies(const ir::Graph& g, uint64_t seed) {
  uint64_t state = seed;
  auto draw = [&state] {  // splitmix64
    uint64_t z = state += 0x9e3779b97f4a7c15ULL;
    z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ z >> 27) * 0x94d049bb133111ebULL;
    return z ^ z >> 31;
  };
  ir::GraphBuilder b(g.name() + "_twice");
  std::vector<int> outputs;
  auto output = [&](int v) {
    if (std::find(outputs.begin(), outputs.end(), v) == outputs.end()) outputs.push_back(v);
  };
  for (int copy = 0; copy < 2; ++copy) {
    std::vector<int> map(g.nodes().size(), -1);
    std::vector<size_t> inputs;  // this copy's inputs, as ids of g
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& n = g.nodes()[i];
      if (n.op == ir::OpCode::Input) {
        for (size_t j : inputs)
          if (copy == 1 && g.nodes()[j].type == n.type && draw() % 2 == 0) map[i] = map[j];
        if (map[i] < 0) map[i] = b.addInput(n.name + "_" + std::to_string(copy), n.type);
        inputs.push_back(i);
        continue;
      }
      if (n.op == ir::OpCode::Constant) {
        map[i] = b.addConstant(n.attrs.getFloat("value"), n.attrs.getDType("dtype"));
        continue;
      }
      std::vector<int> operands;
      for (int o : n.operands) operands.push_back(map[o]);
      map[i] = b.addOp(n.op, std::move(operands), n.attrs);
      if (copy == 1 && draw() % 3 == 0) output(map[i]);
    }
    for (int o : g.outputs()) output(map[o]);
  }
  b.setOutputs(outputs);
  return std::move(b).finish();
}

std::vector<Case> cases() {
  std::vector<Case> out;
  out.push_back({"stacked_3_layers", st::transformerGraph(3), {}});
  out.push_back({"stacked_1k_ops", st::transformerGraphWithOps(1000), {}});
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    st::RandomGraphOptions o;
    o.minOps = 12;
    o.maxOps = 40;
    o.symbolic = seed % 3 == 0;
    ir::Graph g = passes::runPasses(st::randomGraph(seed, o));
    ir::Bindings b = st::randomBindings(g, seed);
    if (seed <= 12) {
      ir::Graph twice = twoCopies(g, seed);
      out.push_back({twice.name(), std::move(twice), b});
    }
    out.push_back({g.name(), std::move(g), std::move(b)});
  }
  const ir::Bindings sizes = {{"N", 4096}, {"T", 4096}, {"B", 8},
                              {"H", 12},   {"S", 512},  {"P", 1 << 22}};
  for (const auto& entry : fs::directory_iterator(std::string(STITCH_SOURCE_DIR) + "/examples")) {
    if (entry.path().extension() != ".stitch") continue;
    std::ifstream f(entry.path());
    std::stringstream ss;
    ss << f.rdbuf();
    for (const ir::Graph& g : ir::parseModule(ss.str(), entry.path().filename().string())) {
      ir::Bindings b;
      bool known = true;
      for (const std::string& s : g.symbols()) {
        auto it = sizes.find(s);
        if (it == sizes.end()) {
          known = false;
        } else {
          b[s] = it->second;
        }
      }
      if (known) out.push_back({g.name(), passes::runPasses(g), std::move(b)});
    }
  }
  return out;
}

void expectSameKernel(const Kernel& a, const Kernel& b, size_t k) {
  SCOPED_TRACE("kernel " + std::to_string(k));
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.dominant, b.dominant);
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.outputs, b.outputs);
  ASSERT_EQ(a.edges.size(), b.edges.size());
  for (size_t i = 0; i < a.edges.size(); ++i) {
    EXPECT_EQ(a.edges[i].producer, b.edges[i].producer);
    EXPECT_EQ(a.edges[i].consumer, b.edges[i].consumer);
    EXPECT_EQ(a.edges[i].scheme, b.edges[i].scheme);
    EXPECT_EQ(a.edges[i].recompute, b.edges[i].recompute);
  }
  EXPECT_EQ(a.mapping.kind, b.mapping.kind);
  EXPECT_EQ(a.mapping.width, b.mapping.width);
  EXPECT_EQ(a.mapping.blocks, b.mapping.blocks);
  EXPECT_EQ(a.mapping.threadsPerBlock, b.mapping.threadsPerBlock);
  EXPECT_EQ(a.horizontalParts, b.horizontalParts);
  EXPECT_EQ(a.stagedSplits, b.stagedSplits);
  EXPECT_EQ(a.summary.bytesRead, b.summary.bytesRead);
  EXPECT_EQ(a.summary.bytesWritten, b.summary.bytesWritten);
  EXPECT_EQ(a.summary.registersPerThread, b.summary.registersPerThread);
  EXPECT_EQ(a.cost.time, b.cost.time);
}

TEST(CostMemo, PlansAreTheSameWithAndWithoutSharedCosts) {
  for (const Case& c : cases())
    for (const char* profile : kProfiles)
      for (Mode mode : {Mode::Stitch, Mode::Basic}) {
        SCOPED_TRACE(c.name + " on " + profile + (mode == Mode::Basic ? ", basic" : ", stitch"));
        const HardwareProfile hw = *findProfile(profile);
        PlannerOptions o;
        o.mode = mode;
        o = st::plannerOptions(o, hw);
        Plan shared = planGraph(c.graph, c.bindings, hw, o);
        o.shareCosts = false;
        Plan alone = planGraph(c.graph, c.bindings, hw, o);
        ASSERT_EQ(shared.kernels.size(), alone.kernels.size());
        for (size_t k = 0; k < shared.kernels.size(); ++k)
          expectSameKernel(shared.kernels[k], alone.kernels[k], k);
        EXPECT_EQ(shared.time, alone.time);
        EXPECT_EQ(shared.unfusedTime, alone.unfusedTime);
        EXPECT_EQ(shared.unfusedBytes, alone.unfusedBytes);
        ASSERT_EQ(shared.cuts.size(), alone.cuts.size());
        for (size_t i = 0; i < shared.cuts.size(); ++i)
          EXPECT_EQ(shared.cuts[i].reason, alone.cuts[i].reason) << "cut " << i;
      }
}

// Every window of consecutive planned ops (up to 8), priced through one memo, costs what its
// own analysis says; on stacked layers and two copies most windows are answered from the memo.
TEST(CostMemo, EveryWindowCostsWhatItsAnalysisSays) {
  std::vector<Case> all = cases();
  for (const char* profile : kProfiles)
    for (size_t i = 0; i < all.size(); ++i) {
      const Case& c = all[i];
      SCOPED_TRACE(c.name + " on " + profile);
      const HardwareProfile hw = *findProfile(profile);
      PlanContext ctx(c.graph, c.bindings, hw, Mode::Stitch, st::schedulerFor(hw));
      CostMemo memo(ctx);
      size_t windows = 0;
      for (size_t first = 0; first < ctx.planned.size(); ++first)
        for (size_t len = 1; len <= 8 && first + len <= ctx.planned.size(); ++len) {
          std::vector<int> nodes(ctx.planned.begin() + static_cast<long>(first),
                                 ctx.planned.begin() + static_cast<long>(first + len));
          Price expected = priceOf(ctx, nodes), got = memo.price(nodes);
          ASSERT_EQ(got.valid, expected.valid) << "window at " << first << " of " << len;
          ASSERT_EQ(got.time, expected.time) << "window at " << first << " of " << len;
          ASSERT_EQ(got.bytes, expected.bytes) << "window at " << first << " of " << len;
          ++windows;
        }
      EXPECT_EQ(memo.hits() + memo.analyses(), windows);
      if (c.name.rfind("stacked", 0) == 0) {
        EXPECT_GT(memo.hits(), memo.analyses());
      }
      if (c.name.find("_twice") != std::string::npos) {
        EXPECT_GT(memo.hits(), 0u);
      }
    }
}

}  // namespace
