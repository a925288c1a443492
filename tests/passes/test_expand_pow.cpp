// expandPowers (src/passes/expand_pow.h): which pows become products, what they become, and the
// same values as pow on the reference interpreter, special values included.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "pass_helpers.h"
#include "passes/expand_pow.h"
#include "passes/pipeline.h"

namespace stitch::passes::testing {
namespace {

using ir::OpCode;

ir::Graph powGraph(const std::string& dtype, const std::string& exponent) {
  return parse("graph p(x: " + dtype + "[3, 40]) {\n  y = pow(x, " + exponent + ")\n  return y\n}");
}

// Every value pow treats specially, and ordinary ones of both signs around 1.
std::vector<double> specialValues() {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {0.0,  -0.0, 1.0,   -1.0, inf,   -inf, std::nan(""), 0.5,   -0.5,  2.0,
                           -2.0, 3.25, -3.25, 1e-3, -1e-3, 7.5,  -7.5,         0.999, 1.001, 40.0};
  for (int i = 0; v.size() < 120; ++i)
    v.push_back(std::ldexp(1.0 + 0.37 * i, i % 9 - 4) * (i % 2 ? -1 : 1));
  return v;
}

// pow and its expansion on the reference interpreter, on specialValues(): "" when they match
// within the dtype's tolerance (NaN matches NaN, infinities exactly).
std::string expansionDiffers(const ir::Graph& g, const ir::Graph& e, ir::DType dtype) {
  reference::HostTensor x;
  x.dtype = dtype;
  x.shape = {3, 40};
  for (double v : specialValues()) x.floats.push_back(ir::roundToFloat(v, dtype));
  std::vector<reference::HostTensor> in = {x};
  auto want = stitch::testing::evaluateReference(g, in);
  auto got = stitch::testing::evaluateReference(e, in);
  std::string d =
      stitch::testing::compareOutputs(want, got, stitch::testing::dtypeTolerance(dtype));
  return d.empty() ? d : d + "\nafter:\n" + ir::printGraph(e);
}

TEST(ExpandPow, IntegerPowersAreProductsBySquaring) {
  // exponent -> products made (x^13 = x^8 * x^4 * x: 3 squarings, 2 products)
  for (auto [e, muls] : std::vector<std::pair<int, int>>{
           {2, 1}, {3, 2}, {4, 2}, {5, 3}, {8, 3}, {13, 5}, {16, 4}, {-1, 0}, {-2, 1}, {-3, 2}}) {
    ir::Graph g = powGraph("f32", std::to_string(e));
    ir::Graph p = expandPowers(g);
    EXPECT_EQ(count(p, OpCode::Pow), 0) << e;
    EXPECT_EQ(count(p, OpCode::Mul), muls) << e;
    EXPECT_EQ(count(p, OpCode::Reciprocal), e < 0 ? 1 : 0) << e;
    EXPECT_EQ(count(p, OpCode::Sqrt), 0) << e;
    EXPECT_EQ(p.node(p.outputs()[0]).name, "y") << e;
    EXPECT_EQ(expansionDiffers(g, p, ir::DType::F32), "") << e;
  }
}

TEST(ExpandPow, HalfIntegerPowersUseSqrt) {
  struct Case {
    const char* e;
    OpCode root;
    int muls;
    bool reciprocal;
  };
  for (const Case& c : {Case{"0.5", OpCode::Sqrt, 0, false}, Case{"-0.5", OpCode::Rsqrt, 0, false},
                        Case{"1.5", OpCode::Sqrt, 1, false}, Case{"2.5", OpCode::Sqrt, 2, false},
                        Case{"-1.5", OpCode::Sqrt, 1, true}}) {
    for (const char* dtype : {"f32", "f64"}) {
      ir::Graph g = powGraph(dtype, c.e);
      ir::Graph p = expandPowers(g);
      EXPECT_EQ(count(p, OpCode::Pow), 0) << c.e;
      EXPECT_EQ(count(p, c.root), 1) << c.e;
      EXPECT_EQ(count(p, OpCode::Mul), c.muls) << c.e;
      EXPECT_EQ(count(p, OpCode::Reciprocal), c.reciprocal ? 1 : 0) << c.e;
      // -inf and -0 taken as their magnitudes, as pow does for a non-integer exponent.
      EXPECT_EQ(count(p, OpCode::Select), 1) << c.e;
      EXPECT_EQ(p.node(p.outputs()[0]).name, "y") << c.e;
      EXPECT_EQ(expansionDiffers(g, p, p.node(p.outputs()[0]).type.dtype), "")
          << c.e << " " << dtype;
    }
  }
}

TEST(ExpandPow, ZeroAndOne) {
  // x^0 is 1 even for NaN and infinities.
  ir::Graph g0 = powGraph("f32", "0");
  ir::Graph p0 = expandPowers(g0);
  EXPECT_EQ(count(p0, OpCode::Pow), 0);
  EXPECT_EQ(p0.node(p0.outputs()[0]).op, OpCode::Full);
  EXPECT_EQ(p0.node(p0.outputs()[0]).name, "y");
  EXPECT_EQ(expansionDiffers(g0, p0, ir::DType::F32), "");
  // x^1 is x.
  ir::Graph g1 = powGraph("f32", "1");
  ir::Graph p1 = expandPowers(g1);
  EXPECT_EQ(count(p1, OpCode::Pow), 0);
  EXPECT_EQ(p1.outputs()[0], p1.inputs()[0]);
  EXPECT_EQ(expansionDiffers(g1, p1, ir::DType::F32), "");
}

TEST(ExpandPow, HalfPrecisionComputesInF32AndRoundsOnce) {
  for (const char* dtype : {"f16", "bf16"}) {
    for (const char* e : {"3", "-2", "1.5", "-0.5", "16"}) {
      ir::Graph g = powGraph(dtype, e);
      ir::Graph p = expandPowers(g);
      EXPECT_EQ(count(p, OpCode::Pow), 0) << dtype << " " << e;
      EXPECT_EQ(count(p, OpCode::Cast), 2) << dtype << " " << e;
      const ir::Node& out = p.node(p.outputs()[0]);
      EXPECT_EQ(out.op, OpCode::Cast);
      EXPECT_EQ(out.name, "y");
      EXPECT_EQ(expansionDiffers(g, p, out.type.dtype), "") << dtype << " " << e;
    }
  }
}

TEST(ExpandPow, KeepsOtherPows) {
  // Not a half-integer, beyond the bound, not a constant, or broadcasting x.
  for (const char* e : {"2.25", "0.3", "17", "-16.5", "1e9"})
    EXPECT_EQ(count(expandPowers(powGraph("f32", e)), OpCode::Pow), 1) << e;
  ir::Graph var = parse(R"(graph p(x: f32[3, 40], e: f32[3, 40]) {
  y = pow(x, e)
  return y
})");
  EXPECT_EQ(count(expandPowers(var), OpCode::Pow), 1);
  ir::Graph widening = parse(R"(graph p(x: f32[40]) {
  e = full(shape=[3, 40], value=2, dtype=f32)
  y = pow(x, e)
  return y
})");
  EXPECT_EQ(count(expandPowers(widening), OpCode::Pow), 1);
  // x^0 of a symbolic shape has no full to become.
  ir::Graph symbolic = parse(R"(graph p(x: f32[N, 4]) {
  y = pow(x, 0)
  return y
})");
  EXPECT_EQ(count(expandPowers(symbolic), OpCode::Pow), 1);
}

TEST(ExpandPow, ExponentsThatFoldOrBroadcast) {
  // The pipeline folds 1 + 2 before expanding; a full of x's shape is a constant too.
  ir::Graph g = parse(R"(graph p(x: f32[3, 40]) {
  a = full(shape=[], value=1, dtype=f32)
  b = add(a, 2)
  y = pow(x, b)
  e = full(shape=[3, 40], value=-0.5, dtype=f32)
  z = pow(x, e)
  return y, z
})");
  ir::Graph p = runPasses(g);
  EXPECT_EQ(count(p, OpCode::Pow), 0);
  EXPECT_EQ(count(p, OpCode::Mul), 2);
  EXPECT_EQ(count(p, OpCode::Rsqrt), 1);
  EXPECT_TRUE(runPasses(p) == p);  // a fixed point
  EXPECT_EQ(differs(g, p, {}, 3, 1e-4), "");
}

}  // namespace
}  // namespace stitch::passes::testing
