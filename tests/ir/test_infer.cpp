// Shape and dtype inference on its own: NumPy broadcasting over static and symbolic dims,
// reshape's -1, normalized attributes, and the verifier.
#include <gtest/gtest.h>

#include <cstdint>

#include "ir/graph.h"
#include "ir/infer.h"

using namespace stitch;
using namespace stitch::ir;

namespace {

Shape sh(std::initializer_list<Dim> dims) { return Shape(dims); }
Dim d(int64_t n) { return Dim::of(n); }
Dim s(const char* name) { return Dim::sym(name); }

TEST(Broadcast, NumPyRules) {
  EXPECT_EQ(broadcastShapes(sh({d(4), d(1)}), sh({d(3)})), sh({d(4), d(3)}));
  EXPECT_EQ(broadcastShapes(sh({}), sh({d(2), d(5)})), sh({d(2), d(5)}));
  EXPECT_EQ(broadcastShapes(sh({d(8), d(1), d(6)}), sh({d(7), d(1)})), sh({d(8), d(7), d(6)}));
  EXPECT_FALSE(broadcastShapes(sh({d(4)}), sh({d(3)})).has_value());
}

TEST(Broadcast, SymbolsBroadcastOnlyWhenProvablyEqual) {
  EXPECT_EQ(broadcastShapes(sh({s("N"), d(1)}), sh({d(1), d(768)})), sh({s("N"), d(768)}));
  EXPECT_EQ(broadcastShapes(sh({s("N")}), sh({s("N")})), sh({s("N")}));
  EXPECT_FALSE(broadcastShapes(sh({s("N")}), sh({s("M")})).has_value());
  EXPECT_FALSE(broadcastShapes(sh({s("N")}), sh({d(8)})).has_value());
}

struct Builder : ::testing::Test {
  GraphBuilder b{"g"};
  int in(const char* name, DType t, Shape shape) { return b.addInput(name, {t, std::move(shape)}); }
  const Node& node(int id) { return b.graph().node(id); }
};

TEST_F(Builder, BinaryOpsNeedEqualDTypesAndBroadcastableShapes) {
  int x = in("x", DType::F32, sh({s("N"), d(768)}));
  int g = in("g", DType::F32, sh({d(768)}));
  int h = in("h", DType::F16, sh({d(768)}));
  EXPECT_EQ(node(b.addOp(OpCode::Mul, {x, g}, {})).type,
            (TensorType{DType::F32, sh({s("N"), d(768)})}));
  EXPECT_EQ(node(b.addOp(OpCode::Lt, {x, g}, {})).type.dtype, DType::Bool);
  try {
    b.addOp(OpCode::Add, {x, h}, {});
    FAIL();
  } catch (const OpError& e) {
    EXPECT_EQ(e.operand(), 1);
    EXPECT_NE(e.message().find("f32 and f16"), std::string::npos) << e.message();
  }
  int y = in("y", DType::F32, sh({d(5)}));
  try {
    b.addOp(OpCode::Add, {x, y}, {});
    FAIL();
  } catch (const OpError& e) {
    EXPECT_NE(e.message().find("[N, 768] and [5]"), std::string::npos) << e.message();
  }
  int i = in("i", DType::I32, sh({d(2)}));
  EXPECT_THROW(b.addOp(OpCode::Pow, {i, i}, {}), OpError);  // pow is float-only
  EXPECT_THROW(b.addOp(OpCode::Exp, {i}, {}), OpError);
  EXPECT_NO_THROW(b.addOp(OpCode::Neg, {i}, {}));
}

TEST_F(Builder, ReductionsNormalizeAxesAndKeepdims) {
  int x = in("x", DType::F32, sh({s("B"), d(12), d(128)}));
  int r = b.addOp(OpCode::ReduceSum, {x}, {{"axes", std::vector<int64_t>{-1, 0}}});
  EXPECT_EQ(node(r).type.shape, sh({d(12)}));
  EXPECT_EQ(node(r).attrs.getInts("axes"), (std::vector<int64_t>{0, 2}));
  EXPECT_FALSE(node(r).attrs.getBool("keepdims"));
  int k = b.addOp(OpCode::ReduceMax, {x}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", true}});
  EXPECT_EQ(node(k).type.shape, sh({s("B"), d(1), d(128)}));
  int all = b.addOp(OpCode::ReduceMean, {x}, {});
  EXPECT_EQ(node(all).type.shape, sh({}));
  EXPECT_THROW(b.addOp(OpCode::ReduceSum, {x}, {{"axes", std::vector<int64_t>{1, -2}}}), OpError);
  EXPECT_THROW(b.addOp(OpCode::ReduceSum, {x}, {{"axes", std::vector<int64_t>{3}}}), OpError);
}

TEST_F(Builder, ReshapeInfersMinusOneOverSymbols) {
  int x = in("x", DType::F32, sh({s("B"), s("S"), d(768)}));
  int r = b.addOp(OpCode::Reshape, {x}, {{"shape", sh({s("B"), s("S"), d(12), d(-1)})}});
  EXPECT_EQ(node(r).type.shape, sh({s("B"), s("S"), d(12), d(64)}));
  int t = b.addOp(OpCode::Reshape, {x}, {{"shape", sh({d(-1), s("S"), d(768)})}});
  EXPECT_EQ(node(t).type.shape, sh({s("B"), s("S"), d(768)}));  // the -1 is the symbol B
  // A -1 standing for B * S is a product of dims: refused rather than invented.
  EXPECT_THROW(b.addOp(OpCode::Reshape, {x}, {{"shape", sh({d(-1), d(768)})}}), OpError);
}

TEST_F(Builder, ReshapeErrors) {
  int x = in("x", DType::F32, sh({s("B"), d(6)}));
  int y = b.addOp(OpCode::Reshape, {x}, {{"shape", sh({s("B"), d(2), d(-1)})}});
  EXPECT_EQ(node(y).type.shape, sh({s("B"), d(2), d(3)}));
  EXPECT_THROW(b.addOp(OpCode::Reshape, {x}, {{"shape", sh({s("B"), d(4)})}}), OpError);
  EXPECT_THROW(b.addOp(OpCode::Reshape, {x}, {{"shape", sh({s("B"), d(4), d(-1)})}}), OpError);
  EXPECT_THROW(b.addOp(OpCode::Reshape, {x}, {{"shape", sh({d(-1), d(-1)})}}), OpError);
  EXPECT_THROW(b.addOp(OpCode::Reshape, {x}, {{"shape", sh({s("S"), d(6)})}}), OpError);
}

TEST_F(Builder, SliceNormalizesPythonIndices) {
  int x = in("x", DType::F32, sh({d(10), s("N")}));
  int y = b.addOp(OpCode::Slice, {x},
                  {{"starts", std::vector<int64_t>{-4, 0}},
                   {"ends", std::vector<int64_t>{100, INT64_MAX}},
                   {"steps", std::vector<int64_t>{3, 1}}});
  EXPECT_EQ(node(y).type.shape, sh({d(2), s("N")}));  // indices 6 and 9
  EXPECT_EQ(node(y).attrs.getInts("starts"), (std::vector<int64_t>{6, 0}));
  EXPECT_EQ(node(y).attrs.getInts("ends"), (std::vector<int64_t>{10, INT64_MAX}));
  // Part of a symbolic axis would need a size expression: refused.
  EXPECT_THROW(b.addOp(OpCode::Slice, {x},
                       {{"starts", std::vector<int64_t>{0, 1}},
                        {"ends", std::vector<int64_t>{10, INT64_MAX}}}),
               OpError);
  int e = b.addOp(
      OpCode::Slice, {x},
      {{"starts", std::vector<int64_t>{7, 0}}, {"ends", std::vector<int64_t>{3, INT64_MAX}}});
  EXPECT_EQ(node(e).type.shape, sh({d(0), s("N")}));  // empty, not negative
}

// A symbolic axis is taken whole when the slice starts at 0 with step 1 and ends past the axis:
// 2^31 - 1 (exporters' int32 "to the end") is kept as written and checked against the bound
// size later (signature.h); an end of 2^62 or more is past any axis and becomes INT64_MAX.
// Anything else would need a size expression, and the error names the attribute at fault.
TEST_F(Builder, SliceOfASymbolicAxisEndingPastItTakesItWhole) {
  int x = in("x", DType::F32, sh({s("N"), d(8)}));
  auto slice = [&](std::vector<int64_t> starts, std::vector<int64_t> ends,
                   std::vector<int64_t> steps) {
    return b.addOp(
        OpCode::Slice, {x},
        {{"starts", std::move(starts)}, {"ends", std::move(ends)}, {"steps", std::move(steps)}});
  };
  int y = slice({0, 2}, {2147483647, 2147483647}, {1, 1});
  EXPECT_EQ(node(y).type.shape, sh({s("N"), d(6)}));
  EXPECT_EQ(node(y).attrs.getInts("ends"), (std::vector<int64_t>{2147483647, 8}));
  int z = slice({0, 0}, {int64_t{1} << 62, 8}, {1, 1});
  EXPECT_EQ(node(z).type.shape, sh({s("N"), d(8)}));
  EXPECT_EQ(node(z).attrs.getInts("ends"), (std::vector<int64_t>{INT64_MAX, 8}));
  struct Bad {
    std::vector<int64_t> starts, ends, steps;
    const char* attr;
    const char* says;
  };
  for (const Bad& c : {Bad{{0, 0}, {2147483646, 8}, {1, 1}, "ends", "(end 2147483646 here)"},
                       Bad{{0, 0}, {-1, 8}, {1, 1}, "ends", "(end -1 here)"},
                       Bad{{1, 0}, {INT64_MAX, 8}, {1, 1}, "starts", "(start 1 here)"},
                       Bad{{0, 0}, {INT64_MAX, 8}, {2, 1}, "steps", "(step 2 here)"}}) {
    try {
      slice(c.starts, c.ends, c.steps);
      ADD_FAILURE() << "accepted a slice " << c.says;
    } catch (const OpError& e) {
      EXPECT_EQ(e.attr(), c.attr) << e.message();
      EXPECT_NE(e.message().find(std::string("slice along symbolic dim N (axis 0) must take the "
                                             "whole axis ") +
                                 c.says + ": start 0, step 1 and an end of at least 2147483647"),
                std::string::npos)
          << e.message();
    }
  }
}

TEST_F(Builder, NormalizationParametersMatchNormalizedDims) {
  int x = in("x", DType::F32, sh({s("N"), d(4), d(8)}));
  int g2 = in("g2", DType::F32, sh({d(4), d(8)}));
  int g1 = in("g1", DType::F32, sh({d(8)}));
  int y = b.addOp(OpCode::LayerNorm, {x, g2, g2}, {{"axis", int64_t{-2}}});
  EXPECT_EQ(node(y).attrs.getInt("axis"), 1);
  EXPECT_EQ(node(y).attrs.getFloat("eps"), 1e-5);
  EXPECT_THROW(b.addOp(OpCode::LayerNorm, {x, g1, g1}, {{"axis", int64_t{-2}}}), OpError);
  int r = b.addOp(OpCode::RmsNorm, {x, g1}, {});
  EXPECT_EQ(node(r).attrs.getFloat("eps"), 1e-6);
}

TEST_F(Builder, SymbolsInShapeListsMustBeBoundByInputs) {
  in("x", DType::F32, sh({s("N")}));
  EXPECT_NO_THROW(b.addOp(OpCode::Iota, {},
                          {{"shape", sh({s("N")})}, {"axis", int64_t{0}}, {"dtype", DType::I32}}));
  EXPECT_THROW(
      b.addOp(OpCode::Full, {}, {{"shape", sh({s("M")})}, {"value", 1.0}, {"dtype", DType::F32}}),
      OpError);
}

TEST_F(Builder, ConstantsMustFitTheirDType) {
  EXPECT_NO_THROW(b.addConstant(3, DType::I32));
  EXPECT_THROW(b.addConstant(2.5, DType::I32), OpError);
  EXPECT_THROW(b.addConstant(3e9, DType::I32), OpError);
  EXPECT_THROW(b.addConstant(2, DType::Bool), OpError);
}

TEST_F(Builder, FailedAddsLeaveTheGraphUnchanged) {
  int x = in("x", DType::F32, sh({d(3)}));
  size_t before = b.graph().nodes().size();
  EXPECT_THROW(b.addOp(OpCode::Transpose, {x}, {{"perm", std::vector<int64_t>{0, 0}}}), OpError);
  EXPECT_THROW(b.addOp(OpCode::Exp, {x}, {}, "x"), Error);                   // duplicate name
  EXPECT_THROW(b.addOp(OpCode::Exp, {x}, {{"axis", int64_t{0}}}), OpError);  // no such attribute
  EXPECT_EQ(b.graph().nodes().size(), before);
}

TEST(Verify, RejectsGraphsWithoutOutputs) {
  GraphBuilder b("g");
  b.addInput("x", {DType::F32, {}});
  EXPECT_THROW(std::move(b).finish(), Error);
}

}  // namespace
