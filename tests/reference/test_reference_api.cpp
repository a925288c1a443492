// The interpreter's interface: misuse errors, evaluateNodes, and encode/decode.
#include <gtest/gtest.h>

#include "ref_helpers.h"
#include "runtime/support/error.h"

namespace stitch::reference::testing {
namespace {

using ir::Attrs;
using ir::OpCode;

// graph g(x: f32[N, 3], y: f32[N, 3]) { s = add(x, y); return s }
ir::Graph addGraph() {
  ir::GraphBuilder b("g");
  int x = b.addInput("x", ty("f32[N, 3]"));
  int y = b.addInput("y", ty("f32[N, 3]"));
  b.setOutputs({b.addOp(OpCode::Add, {x, y}, {}, "s")});
  return std::move(b).finish();
}

// Runs evaluate and returns the ShapeMismatch message (fails the test if none is thrown).
std::string mismatch(const ir::Graph& g, std::vector<Buffer> in, std::vector<Buffer> out,
                     ErrorCode want = ErrorCode::ShapeMismatch) {
  std::vector<TensorView> iv;
  for (const Buffer& b : in) iv.push_back(b.view());
  std::vector<MutTensorView> ov;
  for (Buffer& b : out) ov.push_back(b.mut());
  try {
    evaluate(g, iv, ov);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), want) << e.message();
    return e.message();
  }
  ADD_FAILURE() << "evaluate did not throw";
  return {};
}

Buffer f32(Dims s) { return Buffer(ir::DType::F32, std::move(s)); }

TEST(RefApi, WrongInputCount) {
  std::string m = mismatch(addGraph(), {f32({2, 3})}, {f32({2, 3})});
  EXPECT_NE(m.find("takes 2 inputs"), std::string::npos) << m;
  EXPECT_NE(m.find("1 were given"), std::string::npos) << m;
}

TEST(RefApi, WrongInputDType) {
  std::string m =
      mismatch(addGraph(), {Buffer(ir::DType::F16, {2, 3}), f32({2, 3})}, {f32({2, 3})});
  EXPECT_NE(m.find("input 0 ('x') has dtype f16"), std::string::npos) << m;
  EXPECT_NE(m.find("f32[N, 3]"), std::string::npos) << m;
}

TEST(RefApi, WrongInputRank) {
  std::string m = mismatch(addGraph(), {f32({2, 3}), f32({6})}, {f32({2, 3})});
  EXPECT_NE(m.find("input 1 ('y') has rank 1"), std::string::npos) << m;
}

TEST(RefApi, WrongStaticDim) {
  std::string m = mismatch(addGraph(), {f32({2, 4}), f32({2, 3})}, {f32({2, 3})});
  EXPECT_NE(m.find("input 0 ('x') dim 1 is 4"), std::string::npos) << m;
}

TEST(RefApi, SymbolConflictBetweenInputs) {
  std::string m = mismatch(addGraph(), {f32({2, 3}), f32({5, 3})}, {f32({2, 3})});
  EXPECT_NE(m.find("symbolic dim N is bound to 2"), std::string::npos) << m;
  EXPECT_NE(m.find("but to 5"), std::string::npos) << m;
}

TEST(RefApi, WrongOutputShape) {
  std::string m = mismatch(addGraph(), {f32({2, 3}), f32({2, 3})}, {f32({3, 3})});
  EXPECT_NE(m.find("output 0 ('s') has shape [3, 3]"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
}

TEST(RefApi, WrongOutputDType) {
  std::string m =
      mismatch(addGraph(), {f32({2, 3}), f32({2, 3})}, {Buffer(ir::DType::F64, {2, 3})});
  EXPECT_NE(m.find("output 0 ('s') has dtype f64"), std::string::npos) << m;
}

TEST(RefApi, WrongOutputCount) {
  std::string m = mismatch(addGraph(), {f32({2, 3}), f32({2, 3})}, {});
  EXPECT_NE(m.find("has 1 outputs, but 0"), std::string::npos) << m;
}

TEST(RefApi, NullDataIsInvalidArgument) {
  ir::Graph g = addGraph();
  Dims s = {2, 3};
  Buffer y = f32(s), out = f32(s);
  TensorView in[] = {{ir::DType::F32, s, nullptr}, y.view()};
  MutTensorView o[] = {out.mut()};
  try {
    evaluate(g, in, o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(e.message().find("null"), std::string::npos) << e.message();
  }
}

TEST(RefApi, EvaluateNodesReturnsEveryNode) {
  // graph h(x: f32[N]) { e = exp(x); m = mul(e, 2); return m }
  ir::GraphBuilder b("h");
  int x = b.addInput("x", ty("f32[N]"));
  int e = b.addOp(OpCode::Exp, {x}, {}, "e");
  int two = b.addConstant(2, ir::DType::F32);
  int m = b.addOp(OpCode::Mul, {e, two}, {}, "m");
  b.setOutputs({m});
  ir::Graph g = std::move(b).finish();
  Buffer in(T(ir::DType::F32, {2}, {0, 1}));
  TensorView views[] = {in.view()};
  std::vector<HostTensor> v = evaluateNodes(g, views);
  ASSERT_EQ(v.size(), g.nodes().size());
  EXPECT_EQ(v[static_cast<size_t>(x)].floats, (std::vector<double>{0, 1}));
  EXPECT_EQ(v[static_cast<size_t>(e)].floats, (std::vector<double>{1, r32(std::exp(1.0))}));
  EXPECT_EQ(v[static_cast<size_t>(two)].shape, Dims{});
  EXPECT_EQ(v[static_cast<size_t>(two)].floats, (std::vector<double>{2}));
  EXPECT_EQ(v[static_cast<size_t>(m)].floats,
            (std::vector<double>{2, r32(2 * r32(std::exp(1.0)))}));
}

TEST(RefApi, EncodeDecodeRoundTripsEveryDType) {
  for (int k = 0; k < ir::kNumDTypes; ++k) {
    auto t = static_cast<ir::DType>(k);
    HostTensor h;
    h.dtype = t;
    h.shape = {3};
    if (ir::isFloat(t)) h.floats = {1.5, -0.25, kInf};
    else if (ir::isBool(t)) h.ints = {1, 0, 1};
    else h.ints = {-7, 0, t == ir::DType::I32 ? -2147483648LL : (int64_t{1} << 60) + 1};
    Buffer buf(t, {3});
    encode(h, buf.mut());
    HostTensor back = decode(buf.view());
    EXPECT_EQ(back.floats, h.floats) << ir::dtypeName(t);
    EXPECT_EQ(back.ints, h.ints) << ir::dtypeName(t);
  }
}

TEST(RefApi, BoolInputsReadNonZeroBytesAsTrue) {
  Buffer b(ir::DType::Bool, {2});
  b.bytes[0] = std::byte{0};
  b.bytes[1] = std::byte{7};
  EXPECT_EQ(decode(b.view()).ints, (std::vector<int64_t>{0, 1}));
}

}  // namespace
}  // namespace stitch::reference::testing
