// Checked sizes (runtime/support/checked.h) and the memory limit (memory.h): the helpers at their
// boundaries, and each place a size enters Stitch (graph building, binding symbols, the planner,
// the reference interpreter, the cpu arena) refusing one past the limits with a message naming
// the tensor, where it once wrapped, crashed or allocated until killed.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/planning.h"
#include "fusion/hardware.h"
#include "fusion/planner.h"
#include "ir/parser.h"
#include "ir/signature.h"
#include "reference/interpreter.h"
#include "runtime/cpu/arena.h"
#include "runtime/support/checked.h"
#include "runtime/support/error.h"
#include "runtime/support/memory.h"

using namespace stitch;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t k2e62 = int64_t{1} << 62;

// The error `f` throws; fails the test when it throws none.
template <class F>
Error errorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error(ErrorCode::Internal, "");
}

bool has(const Error& e, const std::string& text) {
  return e.message().find(text) != std::string::npos;
}

TEST(Checked, ArithmeticAtTheInt64Limits) {
  EXPECT_EQ(checkedAdd(kMax - 1, 1), kMax);
  EXPECT_FALSE(checkedAdd(kMax, 1));
  EXPECT_EQ(checkedMul(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_FALSE(checkedMul(int64_t{1} << 32, int64_t{1} << 31));
  EXPECT_EQ(saturatingAdd(kMax, kMax), kMax);
  EXPECT_EQ(saturatingMul(kMax, 12), kMax);
  EXPECT_EQ(saturatingMul(-kMax, 2), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(saturatingMul(3, 4), 12);
}

TEST(Checked, ElementCountsAndByteSizes) {
  std::vector<int64_t> square = {int64_t{1} << 32, int64_t{1} << 32};
  EXPECT_FALSE(checkedElementCount(square));  // 2^64 wrapped to 0 before
  EXPECT_EQ(checkedElementCount(std::vector<int64_t>{int64_t{1} << 31, int64_t{1} << 31}), k2e62);
  EXPECT_EQ(checkedElementCount(std::vector<int64_t>{}), 1);
  EXPECT_EQ(checkedElementCount(std::vector<int64_t>{0, 5}), 0);
  EXPECT_FALSE(checkedElementCount(std::vector<int64_t>{3, -1}));
  // Zero dims aside, the dims must still multiply within the limit: partial products of an empty
  // shape (its row length, its strides) are formed too.
  EXPECT_FALSE(checkedElementCount(std::vector<int64_t>{0, kMax}));
  // The byte limit is 2^62: f32[2^60] is the largest f32 vector.
  EXPECT_EQ(checkedTensorSize(std::vector<int64_t>{int64_t{1} << 60}, 4)->bytes, k2e62);
  EXPECT_FALSE(checkedTensorSize(std::vector<int64_t>{(int64_t{1} << 60) + 1}, 4));
  EXPECT_FALSE(checkedTensorSize(std::vector<int64_t>{0, int64_t{1} << 61}, 4));
  EXPECT_EQ(checkedTensorSize(std::vector<int64_t>{0, int64_t{1} << 59}, 4)->bytes, 0);
  EXPECT_FALSE(checkedByteSize(kMax, 2));
  Error e =
      errorOf([&] { requireTensorSize(square, 4, "input 0 ('x')", ErrorCode::ShapeMismatch); });
  EXPECT_EQ(e.code(), ErrorCode::ShapeMismatch);
  EXPECT_TRUE(has(e, "input 0 ('x') has shape [4294967296, 4294967296]")) << e.message();
  e = errorOf([&] {
    requireTensorSize(std::vector<int64_t>{int64_t{1} << 61}, 8, "t", ErrorCode::InvalidArgument);
  });
  EXPECT_TRUE(has(e, "2305843009213693952 elements of 8 bytes")) << e.message();
}

TEST(Checked, HostMemoryLimit) {
  int64_t limit = hostMemoryBytes();
  EXPECT_GT(limit, int64_t{1} << 26);                     // some memory, however small the machine
  EXPECT_LT(limit, int64_t{1} << 50);                     // and no machine has a petabyte
  checkHostMemory(limit, "a buffer the size of memory");  // the limit itself is allowed
  Error e = errorOf([&] { checkHostMemory(int64_t{1} << 42, "tensor 'x'"); });
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
  EXPECT_TRUE(has(e,
                  "tensor 'x' needs 4.00 TiB (4398046511104 bytes), more than this machine's "
                  "memory"))
      << e.message();
}

ir::Graph parse(const std::string& text) { return ir::parseModule(text, "t.stitch").at(0); }

TEST(SizeGates, StaticShapesAreCheckedWhenBuilt) {
  Error e = errorOf([] { parse("graph g(x: f32[4294967296, 4294967296]) {\n  return x\n}\n"); });
  EXPECT_EQ(e.code(), ErrorCode::Parse);
  EXPECT_TRUE(has(e,
                  "t.stitch:1:9: error: input 'x' has type f32[4294967296, 4294967296], larger "
                  "than the limit of 2^62 bytes per tensor"))
      << e.message();
  // An op's result, from operands within the limit.
  e = errorOf([] {
    parse(
        "graph g(x: f32[1]) {\n  y = broadcast_to(x, shape=[4611686018427387904])\n"
        "  return y\n}\n");
  });
  EXPECT_TRUE(has(e, "the result of broadcast_to 'y' has type f32[4611686018427387904]"))
      << e.message();
  // Static dims alone past the limit: no binding could make the value fit (except 0).
  e = errorOf([] { parse("graph g(x: f32[N, 4294967296, 4294967296]) {\n  return x\n}\n"); });
  EXPECT_TRUE(has(e, "with static dims alone larger")) << e.message();
  // Within the limit, however large: f32[2^60] is 2^62 bytes.
  EXPECT_NO_THROW(parse("graph g(x: f32[1152921504606846976]) {\n  return x\n}\n"));
}

TEST(SizeGates, BindingSymbolsChecksEveryValue) {
  ir::Graph g = parse(
      "graph g(a: f32[N, 1], b: f32[M]) {\n  z = mul(a, b)\n  s = reduce_sum(z, axes=[0, 1])\n"
      "  return s\n}\n");
  std::vector<int64_t> aShape = {int64_t{1} << 32, 1}, bShape = {int64_t{1} << 32};
  std::vector<ir::ConcreteInput> in = {{ir::DType::F32, aShape}, {ir::DType::F32, bShape}};
  Error e = errorOf([&] { ir::bindInputs(g, in); });
  EXPECT_EQ(e.code(), ErrorCode::ShapeMismatch);
  EXPECT_TRUE(has(e,
                  "with M=4294967296, N=4294967296, value 'z' (f32[N, M]) has shape "
                  "[4294967296, 4294967296]"))
      << e.message();
  bShape = {1024};
  EXPECT_NO_THROW(ir::bindInputs(g, in));
}

// A slice takes a symbolic axis whole up to an end written as 2^31 - 1: binding the symbol past
// that end is an error (Python would give a prefix of the axis, not the whole axis its type
// says), at the end itself it is not; ends of 2^62 and more are past any axis.
TEST(SizeGates, SliceEndsBoundTheSymbolicAxesTheyTake) {
  ir::Graph g = parse(
      "graph g(x: f32[N, 2], w: f32[M]) {\n  y = slice(x, starts=[0, 0], ends=[2147483647, 2])\n"
      "  v = slice(w, starts=[0], ends=[9223372036854775807])\n  return y, v\n}\n");
  std::vector<int64_t> xShape = {int64_t{1} << 31, 2}, wShape = {int64_t{1} << 40};
  std::vector<ir::ConcreteInput> in = {{ir::DType::F32, xShape}, {ir::DType::F32, wShape}};
  Error e = errorOf([&] { ir::bindInputs(g, in); });
  EXPECT_EQ(e.code(), ErrorCode::ShapeMismatch);
  EXPECT_TRUE(has(e,
                  "slice 'y' takes axis 0 of 'x' (f32[N, 2]) to its end, written as 2147483647, "
                  "but N=2147483648 is longer"))
      << e.message();
  xShape[0] = 2147483647;
  EXPECT_NO_THROW(ir::bindInputs(g, in));
}

TEST(SizeGates, ReferenceSoftmaxOnAnOverflowingShapeIsAnError) {
  // It crashed: the 2^72-element input wrapped to an empty one whose rows were then read.
  ir::Graph g = parse("graph g(x: f32[N, 1024]) {\n  y = softmax(x, axis=-1)\n  return y\n}\n");
  std::vector<int64_t> shape = {k2e62, 1024};
  float x = 0, y = 0;
  std::vector<reference::TensorView> in = {{ir::DType::F32, shape, &x}};
  std::vector<reference::MutTensorView> out = {{ir::DType::F32, shape, &y}};
  Error e = errorOf([&] { reference::evaluate(g, in, out); });
  EXPECT_EQ(e.code(), ErrorCode::ShapeMismatch);
  EXPECT_TRUE(has(e, "input 'x' (f32[N, 1024])")) << e.message();
  // A count that wrapped negative ([2^62, 3]) made the interpreter allocate until killed.
  std::vector<int64_t> negative = {k2e62, 3};
  ir::Graph g3 = parse("graph g(x: f32[N, 3]) {\n  y = softmax(x, axis=-1)\n  return y\n}\n");
  std::vector<reference::TensorView> in3 = {{ir::DType::F32, negative, &x}};
  std::vector<reference::MutTensorView> out3 = {{ir::DType::F32, negative, &y}};
  e = errorOf([&] { reference::evaluate(g3, in3, out3); });
  EXPECT_EQ(e.code(), ErrorCode::ShapeMismatch);
}

TEST(SizeGates, PlannerRefusesUncheckedBindings) {
  // planGraph called without bindInputs: an f16 dim of 2^63-1 wrapped the byte count negative.
  ir::Graph g = parse("graph g(x: f16[N]) {\n  y = reduce_sum(x, axes=[0])\n  return y\n}\n");
  auto hw = fusion::findProfile("sm_90");
  ASSERT_TRUE(hw.has_value());
  Error e = errorOf([&] {
    fusion::planGraph(g, {{"N", kMax}}, *hw, stitch::testing::plannerOptions({}, *hw));
  });
  EXPECT_EQ(e.code(), ErrorCode::ShapeMismatch);
  EXPECT_TRUE(has(e, "value 'x' has shape [9223372036854775807]")) << e.message();
  // The largest legal size plans, and its cost estimates saturate rather than wrap.
  fusion::Plan p = fusion::planGraph(g, {{"N", int64_t{1} << 61}}, *hw,
                                     stitch::testing::plannerOptions({}, *hw));
  ASSERT_FALSE(p.kernels.empty());
  EXPECT_GT(p.bytes, 0);
}

TEST(SizeGates, CpuArenaRefusesMoreThanMemory) {
  // Overcommitted memory would be granted, then the pre-fault memset would get the process killed.
  rt::cpu::Arena arena;
  std::vector<int64_t> slots = {int64_t{1} << 42};
  Error e = errorOf([&] { arena.prepare(slots); });
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
  EXPECT_TRUE(has(e, "arena for intermediates needs 4.00 TiB")) << e.message();
  EXPECT_EQ(arena.capacity(), 0u);
}

}  // namespace
