// The .stitch printer: its exact output, and graphs built through the API whose constants the
// text cannot write as literals (they print as `full` statements and read back equivalent).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"

using namespace stitch::ir;

namespace {

TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s)}; }

// Printing what the printed text parses to gives the same text.
void expectStable(const std::string& printed) {
  EXPECT_EQ(printModule(parseModule(printed, "p.stitch")), printed);
}

}  // namespace

TEST(Print, NormalizedAttributesAndLiterals) {
  const char* text = R"(graph g(x: f32[N, 4], n: i32[4]) {
  s = reduce_sum(x, axes=[-1])
  a = add(x, 0.50)
  b = mul(3, n)
  c = gelu(x)
  d = slice(n, ends=[-1], starts=[1])
  return s, a, b, c, d
}
)";
  EXPECT_EQ(printModule(parseModule(text, "g")), R"(graph g(x: f32[N, 4], n: i32[4]) {
  s = reduce_sum(x, axes=[1], keepdims=false)
  a = add(x, 0.5)
  b = mul(3, n)
  c = gelu(x, approximate=none)
  d = slice(n, starts=[1], ends=[3], steps=[1])
  return s, a, b, c, d
}
)");
}

TEST(Print, EmptyModule) { EXPECT_EQ(printModule({}), ""); }

TEST(Print, ConstantOutputBecomesFull) {
  GraphBuilder b("k");
  int x = b.addInput("x", f32({Dim::of(4)}));
  int c = b.addConstant(2.5, DType::F32);
  b.setOutputs({x, c});
  Graph g = std::move(b).finish();
  std::string p = printGraph(g);
  EXPECT_EQ(
      p, "graph k(x: f32[4]) {\n  c0 = full(shape=[], value=2.5, dtype=f32)\n  return x, c0\n}\n");
  const Graph back = parseModule(p, "p")[0];
  const Node& out = back.node(back.outputs()[1]);
  EXPECT_EQ(out.op, OpCode::Full);
  EXPECT_EQ(out.type, g.node(c).type);
  EXPECT_EQ(out.attrs.getFloat("value"), 2.5);
  expectStable(p);
}

TEST(Print, ConstantsTheTextCannotInline) {
  // A constant used by a unary op, a bool constant, two constants paired, and a fresh name that
  // must avoid an existing value named c0.
  GraphBuilder b("k");
  int x = b.addInput("c0", f32({Dim::sym("N")}));
  int two = b.addConstant(2, DType::F32);
  int t = b.addConstant(1, DType::Bool);
  int i1 = b.addConstant(-7, DType::I64);
  int i2 = b.addConstant(9007199254740992.0, DType::I64);
  int neg = b.addOp(OpCode::Neg, {two}, {}, "neg2");
  int lt = b.addOp(OpCode::Lt, {x, two}, {}, "lt");
  int both = b.addOp(OpCode::LogicalAnd, {lt, t}, {}, "both");
  int sum = b.addOp(OpCode::Add, {i1, i2}, {}, "sum");
  b.setOutputs({neg, both, sum});
  Graph g = std::move(b).finish();
  std::string p = printGraph(g);
  EXPECT_EQ(p, R"(graph k(c0: f32[N]) {
  c1 = full(shape=[], value=2, dtype=f32)
  c2 = full(shape=[], value=1, dtype=bool)
  c3 = full(shape=[], value=-7, dtype=i64)
  c4 = full(shape=[], value=9007199254740992, dtype=i64)
  neg2 = neg(c1)
  lt = lt(c0, c1)
  both = logical_and(lt, c2)
  sum = add(c3, c4)
  return neg2, both, sum
}
)");
  const Graph back = parseModule(p, "p")[0];
  for (size_t k = 0; k < g.outputs().size(); ++k)
    EXPECT_EQ(back.node(back.outputs()[k]).type, g.node(g.outputs()[k]).type);
  expectStable(p);
}

TEST(Print, SharedAndUnusedConstants) {
  // One constant used twice is written at both uses (the parser makes one per use); an unused one
  // is dropped. The text reads back to an equivalent graph with one constant per use.
  GraphBuilder b("k");
  int x = b.addInput("x", f32({}));
  int half = b.addConstant(0.5, DType::F32);
  b.addConstant(3, DType::F32);
  int a = b.addOp(OpCode::Mul, {x, half}, {}, "a");
  int s = b.addOp(OpCode::Sub, {half, a}, {}, "s");
  b.setOutputs({s});
  std::string p = printGraph(std::move(b).finish());
  EXPECT_EQ(p, "graph k(x: f32[]) {\n  a = mul(x, 0.5)\n  s = sub(0.5, a)\n  return s\n}\n");
  const Graph back = parseModule(p, "p")[0];
  EXPECT_EQ(back.nodes().size(), 5u);
  expectStable(p);
}
