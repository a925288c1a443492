// The random-graph generator: deterministic, always valid, round-trips through the text format,
// covers every op and every reduction kind, and its graphs evaluate on the reference.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>

#include "common/sweep.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "testing/random_graph.h"
#include "testing/reference_check.h"

namespace stitch::testing {
namespace {

using ir::OpCode;

TEST(RandomGraph, SameSeedSameGraph) {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    RandomGraphOptions o;
    o.symbolic = seed % 2 == 1;
    ir::Graph a = randomGraph(seed, o);
    ir::Graph b = randomGraph(seed, o);
    EXPECT_EQ(ir::printGraph(a), ir::printGraph(b)) << "seed " << seed;
    EXPECT_TRUE(a == b) << "seed " << seed;
    ir::Bindings ba = randomBindings(a, seed), bb = randomBindings(b, seed);
    EXPECT_EQ(ba, bb);
    auto ia = randomInputs(a, ba, seed), ib = randomInputs(b, bb, seed);
    EXPECT_EQ(compareOutputs(ia, ib, 0.0), "") << "seed " << seed;
  }
  // Different seeds give different graphs (not a guarantee per pair, but over ten certainly).
  std::set<std::string> texts;
  for (uint64_t seed = 0; seed < 10; ++seed) texts.insert(ir::printGraph(randomGraph(seed)));
  EXPECT_GT(texts.size(), 8u);
}

TEST(RandomGraph, VerifiesAndRoundTrips) {
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(sweepCount(300)); ++seed) {
    RandomGraphOptions o;
    o.symbolic = seed % 3 == 0;
    o.composites = seed % 5 != 0;
    o.layout = seed % 7 != 0;
    ir::Graph g = randomGraph(seed, o);
    ASSERT_NO_THROW(ir::verify(g)) << "seed " << seed;
    size_t ops = g.numOps();
    EXPECT_GE(ops, static_cast<size_t>(o.minOps)) << "seed " << seed;
    EXPECT_LE(ops, static_cast<size_t>(o.maxOps)) << "seed " << seed;
    std::string text = ir::printGraph(g);
    std::vector<ir::Graph> back;
    ASSERT_NO_THROW(back = ir::parseModule(text, "random.stitch")) << text;
    ASSERT_EQ(back.size(), 1u);
    EXPECT_TRUE(back[0] == g) << "seed " << seed << "\n"
                              << text << "\nreads back as\n"
                              << ir::printGraph(back[0]);
    for (const ir::Node& n : g.nodes()) {
      if (o.composites) break;
      EXPECT_NE(ir::opInfo(n.op).cls, ir::OpClass::Composite) << "seed " << seed;
    }
  }
}

TEST(RandomGraph, OpCountOptionsAreHonored) {
  RandomGraphOptions o;
  o.minOps = 20;
  o.maxOps = 25;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    ir::Graph g = randomGraph(seed, o);
    EXPECT_GE(g.numOps(), 20u);
    EXPECT_LE(g.numOps(), 25u);
  }
}

// Which kind of reduction a node is: by the axes it reduces relative to its operand's rank.
std::string reductionKind(const ir::Graph& g, const ir::Node& n) {
  const auto& axes = n.attrs.getInts("axes");
  auto r = static_cast<int64_t>(g.node(n.operands[0]).type.shape.size());
  auto n_axes = static_cast<int64_t>(axes.size());
  std::string keep = n.attrs.getBool("keepdims") ? "/keep" : "/drop";
  if (n_axes == r) return "all" + keep;
  if (axes.back() == r - 1 && axes.front() == r - n_axes) return "row" + keep;
  if (axes.front() == 0 && axes.back() == n_axes - 1) return "column" + keep;
  return "middle" + keep;
}

TEST(RandomGraph, CoversEveryOpAndReductionKind) {
  std::map<OpCode, int> ops;
  std::map<std::string, int> reductions;
  std::set<ir::DType> dtypes;
  int symbolic = 0, multiOutput = 0, multiUse = 0;
  for (uint64_t seed = 0; seed < 500; ++seed) {  // a coverage count: never shrunk
    RandomGraphOptions o;
    o.symbolic = seed % 2 == 0;
    ir::Graph g = randomGraph(seed, o);
    std::vector<int> uses(g.nodes().size(), 0);
    for (const ir::Node& n : g.nodes()) {
      ++ops[n.op];
      dtypes.insert(n.type.dtype);
      for (int x : n.operands) ++uses[static_cast<size_t>(x)];
      if (ir::opInfo(n.op).cls == ir::OpClass::Reduce) ++reductions[reductionKind(g, n)];
    }
    symbolic += !g.symbols().empty();
    multiOutput += g.outputs().size() > 1;
    multiUse += std::any_of(uses.begin(), uses.end(), [](int u) { return u > 1; });
  }
  for (OpCode op : ir::allOps()) EXPECT_GT(ops[op], 0) << "never generated: " << ir::opName(op);
  for (std::string kind : {"row", "column", "middle", "all"})
    for (std::string keep : {"/keep", "/drop"})
      EXPECT_GT(reductions[kind + keep], 0) << "never generated: " << kind << keep << " reduction";
  for (ir::DType t :
       {ir::DType::F32, ir::DType::F16, ir::DType::BF16, ir::DType::I32, ir::DType::Bool})
    EXPECT_TRUE(dtypes.count(t)) << ir::dtypeName(t);
  EXPECT_GT(symbolic, 100);
  EXPECT_GT(multiOutput, 100);
  EXPECT_GT(multiUse, 250);
}

TEST(ReferenceCheck, CompareOutputsFindsDifferences) {
  reference::HostTensor a{ir::DType::F32, {3}, {1.0, -0.0, NAN}, {}};
  reference::HostTensor b = a;
  EXPECT_EQ(compareOutputs({&a, 1}, {&b, 1}, 0.0), "");  // NaN matches NaN
  b.floats[1] = 0.0;
  EXPECT_NE(compareOutputs({&a, 1}, {&b, 1}, 0.0), "");  // bit-exact: -0.0 is not 0.0
  EXPECT_EQ(compareOutputs({&a, 1}, {&b, 1}, 1e-4), "");
  b.floats[0] = 1.0 + 1.5e-4;
  EXPECT_EQ(compareOutputs({&a, 1}, {&b, 1}, 1e-4), "");  // within 1e-4 * (1 + |1|)
  b.floats[0] = 1.0 + 3e-4;
  EXPECT_NE(compareOutputs({&a, 1}, {&b, 1}, 1e-4), "");
  EXPECT_EQ(compareOutputs({&a, 1}, {&b, 1}, 1e-2), "");
  reference::HostTensor i{ir::DType::I32, {2}, {}, {1, 2}};
  reference::HostTensor j{ir::DType::I32, {2}, {}, {1, 3}};
  EXPECT_NE(compareOutputs({&i, 1}, {&j, 1}, 1.0), "");  // ints are exact at any tolerance
}

TEST(RandomGraph, ReferenceEvaluatesEveryGraph) {
  int finiteOutputs = 0, outputs = 0;
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(sweepCount(200)); ++seed) {
    RandomGraphOptions o;
    o.symbolic = seed % 2 == 1;
    ir::Graph g = randomGraph(seed, o);
    ir::Bindings b = randomBindings(g, seed);
    auto inputs = randomInputs(g, b, seed);
    for (size_t i = 0; i < inputs.size(); ++i) {
      for (int64_t e = 0; e < inputs[i].numel(); ++e) {
        double v = inputs[i].at(e);
        double bound = ir::isFloat(inputs[i].dtype) ? 1 : ir::isInt(inputs[i].dtype) ? 8 : 1;
        ASSERT_TRUE(v >= -bound && v <= bound) << "seed " << seed << " input " << i;
      }
    }
    std::vector<reference::HostTensor> out;
    ASSERT_NO_THROW(out = evaluateReference(g, inputs)) << "seed " << seed << "\n"
                                                        << ir::printGraph(g);
    for (const auto& t : out) {
      ++outputs;
      if (!ir::isFloat(t.dtype)) {
        ++finiteOutputs;
        continue;
      }
      int64_t finite = 0;
      for (double v : t.floats) finite += std::isfinite(v);
      // "Mostly finite": the guards keep NaN/inf the exception.
      finiteOutputs += finite * 2 >= t.numel();
    }
  }
  EXPECT_GT(finiteOutputs * 100, outputs * 90) << finiteOutputs << " of " << outputs;
}

}  // namespace
}  // namespace stitch::testing
