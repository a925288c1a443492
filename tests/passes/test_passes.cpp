// Unit tests of each pass on small graphs: the rewritten structure, and the same answer on the
// reference interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "pass_helpers.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/decompose.h"
#include "passes/fold_constants.h"
#include "passes/fold_reshapes.h"
#include "passes/pipeline.h"

namespace stitch::passes::testing {
namespace {

using ir::OpCode;

// --- decomposeComposites -------------------------------------------------------------------

TEST(Decompose, SoftmaxBecomesMaxSubExpSumDiv) {
  ir::Graph g = parse(R"(graph s(x: f32[4, 8]) {
  y = softmax(x, axis=0)
  return y
})");
  ir::Graph d = decomposeComposites(g);
  EXPECT_FALSE(hasComposite(d));
  EXPECT_EQ(count(d, OpCode::ReduceMax), 1);
  EXPECT_EQ(count(d, OpCode::ReduceSum), 1);
  EXPECT_EQ(count(d, OpCode::Exp), 1);
  EXPECT_EQ(count(d, OpCode::Div), 1);
  EXPECT_EQ(d.numOps(), 5u);
  // The reductions are over the given axis, keeping it, and the output keeps its name.
  const ir::Node& max = *std::find_if(d.nodes().begin(), d.nodes().end(),
                                      [](const ir::Node& n) { return n.op == OpCode::ReduceMax; });
  EXPECT_EQ(max.attrs.getInts("axes"), std::vector<int64_t>{0});
  EXPECT_TRUE(max.attrs.getBool("keepdims"));
  EXPECT_EQ(d.node(d.outputs()[0]).name, "y");
  EXPECT_EQ(d.node(d.outputs()[0]).op, OpCode::Div);
  EXPECT_EQ(differs(g, d, {}, 1, 1e-4), "");
}

TEST(Decompose, LogSoftmax) {
  ir::Graph g = parse(R"(graph s(x: f32[3, 5]) {
  y = log_softmax(x)
  return y
})");
  ir::Graph d = decomposeComposites(g);
  EXPECT_EQ(count(d, OpCode::Log), 1);
  EXPECT_EQ(count(d, OpCode::Sub), 2);
  EXPECT_EQ(d.node(d.outputs()[0]).name, "y");
  EXPECT_EQ(differs(g, d, {}, 2, 1e-4), "");
}

TEST(Decompose, LayerNormOverTrailingDims) {
  ir::Graph g = parse(R"(graph n(x: f32[2, 3, 4], gamma: f32[3, 4], beta: f32[3, 4]) {
  y = layer_norm(x, gamma, beta, axis=1, eps=1e-5)
  return y
})");
  ir::Graph d = decomposeComposites(g);
  EXPECT_FALSE(hasComposite(d));
  EXPECT_EQ(count(d, OpCode::ReduceMean), 2);
  EXPECT_EQ(count(d, OpCode::Rsqrt), 1);
  for (const ir::Node& n : d.nodes()) {
    if (n.op == OpCode::ReduceMean) {
      EXPECT_EQ(n.attrs.getInts("axes"), (std::vector<int64_t>{1, 2}));
      EXPECT_TRUE(n.attrs.getBool("keepdims"));
    }
  }
  EXPECT_EQ(d.node(d.outputs()[0]).op, OpCode::Add);
  EXPECT_EQ(d.node(d.outputs()[0]).name, "y");
  EXPECT_EQ(differs(g, d, {}, 3, 1e-4), "");
}

TEST(Decompose, RmsNorm) {
  ir::Graph g = parse(R"(graph n(x: f32[N, 8], gamma: f32[8]) {
  y = rms_norm(x, gamma)
  return y
})");
  ir::Graph d = decomposeComposites(g);
  EXPECT_EQ(count(d, OpCode::ReduceMean), 1);
  EXPECT_EQ(count(d, OpCode::Sub), 0);  // no centering
  EXPECT_EQ(d.node(d.outputs()[0]).name, "y");
  EXPECT_EQ(differs(g, d, {{"N", 5}}, 4, 1e-4), "");
}

TEST(Decompose, GeluBothFormsAndSilu) {
  ir::Graph g = parse(R"(graph a(x: f32[16]) {
  e = gelu(x)
  t = gelu(x, approximate=tanh)
  s = silu(x)
  return e, t, s
})");
  ir::Graph d = decomposeComposites(g);
  EXPECT_FALSE(hasComposite(d));
  EXPECT_EQ(count(d, OpCode::Erf), 1);
  EXPECT_EQ(count(d, OpCode::Tanh), 1);
  EXPECT_EQ(count(d, OpCode::Sigmoid), 1);
  EXPECT_EQ(d.node(d.outputs()[0]).name, "e");
  EXPECT_EQ(d.node(d.outputs()[1]).name, "t");
  EXPECT_EQ(d.node(d.outputs()[2]).name, "s");
  EXPECT_EQ(differs(g, d, {}, 5, 1e-4), "");
}

TEST(Decompose, HalfPrecisionComputesInF32) {
  ir::Graph g = parse(R"(graph h(x: f16[4, 64], b: bf16[4, 64], gamma: bf16[64], beta: bf16[64]) {
  y = softmax(x)
  z = layer_norm(b, gamma, beta)
  return y, z
})");
  ir::Graph d = decomposeComposites(g);
  // Every reduction and exp runs in f32; the outputs are cast back, under their names.
  for (const ir::Node& n : d.nodes()) {
    if (ir::opInfo(n.op).cls == ir::OpClass::Reduce || n.op == OpCode::Exp) {
      EXPECT_EQ(n.type.dtype, ir::DType::F32) << n.name;
    }
  }
  EXPECT_EQ(d.node(d.outputs()[0]).op, OpCode::Cast);
  EXPECT_EQ(d.node(d.outputs()[0]).type.dtype, ir::DType::F16);
  EXPECT_EQ(d.node(d.outputs()[0]).name, "y");
  EXPECT_EQ(d.node(d.outputs()[1]).type.dtype, ir::DType::BF16);
  EXPECT_EQ(count(d, OpCode::Cast), 6);  // x, b, gamma, beta up; y, z down
  EXPECT_EQ(differs(g, d, {}, 6, 4e-2), "");
}

TEST(Decompose, FreshNamesDoNotCollideWithLaterNodes) {
  // The decomposition's temporaries must not take "t0".."t9", which later nodes already use.
  ir::Graph g = parse(R"(graph c(x: f32[4, 4]) {
  y = softmax(x)
  t0 = add(y, 1)
  t1 = mul(t0, 2)
  t4 = neg(t1)
  return t4
})");
  ir::Graph d = decomposeComposites(g);
  EXPECT_TRUE(d.find("t0") && d.node(*d.find("t0")).op == OpCode::Add);
  EXPECT_TRUE(d.find("t4") && d.node(*d.find("t4")).op == OpCode::Neg);
  EXPECT_EQ(differs(g, d, {}, 7, 1e-4), "");
}

// --- foldReshapes --------------------------------------------------------------------------

TEST(FoldReshapes, ReshapeOfReshape) {
  ir::Graph g = parse(R"(graph r(x: f32[2, 3, 4]) {
  a = reshape(x, shape=[6, 4])
  b = reshape(a, shape=[24])
  c = reshape(b, shape=[4, 6])
  return c
})");
  ir::Graph f = eliminateDeadCode(foldReshapes(g));
  ASSERT_EQ(f.numOps(), 1u);
  const ir::Node& c = f.node(f.outputs()[0]);
  EXPECT_EQ(c.name, "c");
  EXPECT_EQ(f.node(c.operands[0]).name, "x");
  EXPECT_EQ(differs(g, f, {}, 1, 0), "");
}

TEST(FoldReshapes, IdentityLayoutOpsDisappear) {
  ir::Graph g = parse(R"(graph r(x: f32[N, 3, 4]) {
  a = reshape(x, shape=[N, 3, 4])
  b = broadcast_to(a, shape=[N, 3, 4])
  c = transpose(b, perm=[0, 1, 2])
  d = slice(c, starts=[0, 0, 0], ends=[9223372036854775807, 3, 100], steps=[1, 1, 1])
  e = reshape(d, shape=[N, 12])
  f = reshape(e, shape=[N, 3, 4])
  y = exp(f)
  return y, d
})");
  ir::Graph f = eliminateDeadCode(foldReshapes(g));
  EXPECT_EQ(f.numOps(), 1u);
  EXPECT_EQ(f.node(f.outputs()[0]).name, "y");
  // The second output folded all the way back to the input, which the graph now returns.
  EXPECT_EQ(f.outputs()[1], f.inputs()[0]);
  EXPECT_EQ(differs(g, f, {{"N", 2}}, 2, 0), "");
}

TEST(FoldReshapes, KeepsRealLayoutOps) {
  ir::Graph g = parse(R"(graph r(x: f32[2, 3]) {
  a = transpose(x, perm=[1, 0])
  b = slice(x, starts=[0, 1], ends=[2, 3], steps=[1, 1])
  c = broadcast_to(x, shape=[4, 2, 3])
  d = reshape(x, shape=[3, 2])
  return a, b, c, d
})");
  ir::Graph f = foldReshapes(g);
  EXPECT_TRUE(f == g);
}

// --- foldConstants -------------------------------------------------------------------------

TEST(FoldConstants, ScalarArithmeticOnConstants) {
  ir::GraphBuilder b("k");
  int x = b.addInput("x", {ir::DType::F32, {ir::Dim::of(4)}});
  int two = b.addConstant(2.0, ir::DType::F32);
  int three = b.addConstant(3.0, ir::DType::F32);
  int s = b.addOp(OpCode::Mul, {two, three}, {}, "s");
  int r = b.addOp(OpCode::Sqrt, {s}, {}, "r");
  int y = b.addOp(OpCode::Add, {x, r}, {}, "y");
  b.setOutputs({y});
  ir::Graph g = std::move(b).finish();
  ir::Graph f = eliminateDeadCode(foldConstants(g));
  EXPECT_EQ(f.numOps(), 1u);
  const ir::Node& add = f.node(f.outputs()[0]);
  const ir::Node& c = f.node(add.operands[1]);
  ASSERT_EQ(c.op, OpCode::Constant);
  // The reference's value: sqrt(6) rounded to f32.
  EXPECT_EQ(c.attrs.getFloat("value"), static_cast<double>(std::sqrt(6.0f)));
  EXPECT_EQ(differs(g, f, {}, 1, 0), "");
}

TEST(FoldConstants, ScalarFullAndReductionsOfSmallSources) {
  ir::Graph g = parse(R"(graph k(x: f32[4]) {
  a = full(shape=[], value=1.5, dtype=f32)
  i = iota(shape=[5], axis=0, dtype=f32)
  s = reduce_sum(i)
  b = add(x, a)
  c = mul(b, s)
  big = full(shape=[4], value=2, dtype=f32)
  d = add(c, big)
  return d
})");
  ir::Graph f = eliminateDeadCode(foldConstants(g));
  EXPECT_EQ(count(f, OpCode::Iota), 0);
  EXPECT_EQ(count(f, OpCode::ReduceSum), 0);
  EXPECT_EQ(count(f, OpCode::Full), 1);  // the non-scalar full stays a full
  EXPECT_EQ(differs(g, f, {}, 2, 0), "");
}

TEST(FoldConstants, NeverFoldsTensorsOrSymbolicSources) {
  ir::Graph g = parse(R"(graph k(x: f32[N]) {
  a = full(shape=[N], value=1, dtype=f32)
  s = reduce_sum(a)
  y = add(x, s)
  i = iota(shape=[8, 8], axis=1, dtype=f32)
  z = mul(i, 2)
  return y, z
})");
  ir::Graph f = foldConstants(g);
  // sum over a symbolic full depends on N: not a constant. z is a tensor: not folded.
  EXPECT_EQ(count(f, OpCode::ReduceSum), 1);
  EXPECT_EQ(count(f, OpCode::Iota), 1);
  EXPECT_EQ(differs(g, f, {{"N", 3}}, 3, 0), "");
}

TEST(FoldConstants, FoldedOutputKeepsItsName) {
  ir::Graph g = parse(R"(graph k(x: f32[2]) {
  a = full(shape=[], value=4, dtype=f32)
  r = sqrt(a)
  return x, r
})");
  ir::Graph f = eliminateDeadCode(foldConstants(g));
  const ir::Node& r = f.node(f.outputs()[1]);
  EXPECT_EQ(r.name, "r");
  EXPECT_EQ(r.op, OpCode::Full);
  EXPECT_EQ(r.attrs.getFloat("value"), 2.0);
  EXPECT_TRUE(foldConstants(f) == f);  // a fixed point
  EXPECT_EQ(differs(g, f, {}, 4, 0), "");
}

// --- eliminateCommonSubexpressions ---------------------------------------------------------

TEST(Cse, MergesEqualNodesAndConstants) {
  ir::Graph g = parse(R"(graph c(x: f32[4, 8]) {
  a = exp(x)
  b = exp(x)
  m1 = reduce_max(a, axes=[1], keepdims=true)
  m2 = reduce_max(b, axes=[-1], keepdims=true)
  m3 = reduce_max(b, axes=[1])
  p = add(m1, 0.5)
  q = add(m2, 0.5)
  y = sub(p, q)
  return y, m3
})");
  ir::Graph c = eliminateDeadCode(eliminateCommonSubexpressions(g));
  EXPECT_EQ(count(c, OpCode::Exp), 1);
  EXPECT_EQ(count(c, OpCode::ReduceMax), 2);  // keepdims differs
  EXPECT_EQ(count(c, OpCode::Add), 1);
  EXPECT_EQ(count(c, OpCode::Constant), 1);
  EXPECT_EQ(differs(g, c, {}, 1, 0), "");
}

TEST(Cse, DoubleAttributesCompareByBits) {
  ir::GraphBuilder b("c");
  int x = b.addInput("x", {ir::DType::F32, {ir::Dim::of(4)}});
  auto fullOf = [&](double v, std::string name) {
    return b.addOp(OpCode::Full, {},
                   {{"shape", ir::Shape{ir::Dim::of(4)}}, {"value", v}, {"dtype", ir::DType::F32}},
                   std::move(name));
  };
  int pz = fullOf(0.0, "pz"), nz = fullOf(-0.0, "nz");
  int n1 = fullOf(std::nan(""), "n1"), n2 = fullOf(std::nan(""), "n2");
  int cpz = b.addConstant(0.0, ir::DType::F32);
  int cnz = b.addConstant(-0.0, ir::DType::F32);
  int d1 = b.addOp(OpCode::Div, {x, pz}, {}, "d1");
  int d2 = b.addOp(OpCode::Div, {x, nz}, {}, "d2");
  int e1 = b.addOp(OpCode::Add, {n1, n2}, {}, "e1");
  int f1 = b.addOp(OpCode::Sub, {x, cpz}, {}, "f1");
  int f2 = b.addOp(OpCode::Sub, {x, cnz}, {}, "f2");
  b.setOutputs({d1, d2, e1, f1, f2});
  ir::Graph g = std::move(b).finish();
  ir::Graph c = eliminateCommonSubexpressions(g);
  EXPECT_EQ(count(c, OpCode::Full), 3);      // 0.0, -0.0, one NaN
  EXPECT_EQ(count(c, OpCode::Constant), 2);  // 0.0 and -0.0 stay apart
  EXPECT_EQ(count(c, OpCode::Div), 2);
  EXPECT_EQ(differs(g, c, {}, 2, 0), "");
}

TEST(Cse, InputsNeverMerge) {
  ir::Graph g = parse(R"(graph c(x: f32[4], y: f32[4]) {
  a = add(x, y)
  return a
})");
  ir::Graph c = eliminateCommonSubexpressions(g);
  EXPECT_TRUE(c == g);
}

// --- eliminateDeadCode ---------------------------------------------------------------------

TEST(Dce, DropsUnusedNodesKeepsInputs) {
  ir::Graph g = parse(R"(graph d(x: f32[4], unused: f32[4]) {
  a = exp(x)
  b = log(x)
  c = add(b, 1)
  y = neg(a)
  return y
})");
  ir::Graph d = eliminateDeadCode(g);
  EXPECT_EQ(d.numOps(), 2u);
  EXPECT_EQ(d.inputs().size(), 2u);
  EXPECT_EQ(count(d, OpCode::Constant), 0);
  EXPECT_EQ(d.node(d.outputs()[0]).name, "y");
  EXPECT_EQ(differs(g, d, {}, 1, 0), "");
}

// --- runPasses -----------------------------------------------------------------------------

TEST(Pipeline, DecomposesAndCleansUp) {
  ir::Graph g = parse(R"(graph p(x: f32[4, 8]) {
  s1 = softmax(x)
  s2 = softmax(x)
  r = reshape(s1, shape=[32])
  r2 = reshape(r, shape=[4, 8])
  y = add(r2, s2)
  k = full(shape=[], value=2, dtype=f32)
  k2 = mul(k, k)
  z = mul(y, k2)
  return z
})");
  ir::Graph p = runPasses(g);
  EXPECT_FALSE(hasComposite(p));
  EXPECT_EQ(count(p, OpCode::Reshape), 0);
  EXPECT_EQ(count(p, OpCode::Exp), 1);  // the two softmaxes merged
  EXPECT_EQ(count(p, OpCode::Full), 0);
  EXPECT_NO_THROW(ir::verify(p));
  EXPECT_TRUE(runPasses(p) == p);  // a fixed point
  EXPECT_EQ(differs(g, p, {}, 1, 1e-4), "");
}

}  // namespace
}  // namespace stitch::passes::testing
