// Sizes through the C API: a DLTensor whose size overflows, allocations past the machine's memory,
// and graphs whose values cannot fit come back as a status and a message naming the tensor, on the
// host backends, never as a crash or a silent result (runtime/support/checked.h, memory.h).
#include <gtest/gtest.h>
#include <stitch/stitch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "api/api_test_helpers.h"

namespace {

using stitch::apitest::f32Tensor;
using stitch::apitest::lastError;

struct Handles {
  stitch_graph_t graph = nullptr;
  stitch_engine_t engine = nullptr;
  stitch_program_t program = nullptr;
  ~Handles() {
    stitch_program_destroy(program);
    stitch_engine_destroy(engine);
    stitch_graph_destroy(graph);
  }
};

// Parses `text` and compiles it for `backend`; false (the test skips that backend) when the
// backend is not built in.
bool compile(Handles& h, const char* text, const char* backend) {
  EXPECT_EQ(stitch_graph_parse(text, "sizes.stitch", &h.graph), STITCH_OK) << lastError();
  const char* k[] = {"backend"};
  const char* v[] = {backend};
  stitch_status_t s = stitch_engine_create(k, v, 1, &h.engine);
  if (s == STITCH_ERROR_BACKEND_UNAVAILABLE) return false;
  EXPECT_EQ(s, STITCH_OK) << lastError();
  EXPECT_EQ(stitch_program_compile(h.engine, h.graph, &h.program), STITCH_OK) << lastError();
  return h.program != nullptr;
}

TEST(CApiSizes, DLTensorWhoseSizeOverflowsIsRejected) {
  // [2^58, 64] has 2^64 elements: it wrapped to 0 and both backends read far past the 1 KB buffer.
  for (const char* backend : {"reference", "cpu"}) {
    Handles h;
    if (!compile(h, "graph g(x: f32[N, 64]) {\n  y = reduce_sum(x, axes=[1])\n  return y\n}\n",
                 backend))
      continue;
    std::vector<float> buf(256, 1.0f), out(256, 0.0f);
    int64_t inShape[2] = {int64_t{1} << 58, 64}, outShape[1] = {int64_t{1} << 58};
    DLTensor in = f32Tensor(buf.data(), inShape, 2), o = f32Tensor(out.data(), outShape, 1);
    EXPECT_EQ(stitch_program_run(h.program, &in, 1, &o, 1, nullptr), STITCH_ERROR_INVALID_ARGUMENT)
        << backend;
    EXPECT_NE(lastError().find("input 0 ('x') has shape [288230376151711744, 64]"),
              std::string::npos)
        << lastError();
    EXPECT_NE(lastError().find("2^62"), std::string::npos) << lastError();
    // The shape query binds the same input and refuses it too.
    int64_t dims[1] = {};
    size_t rank = 0;
    EXPECT_NE(stitch_program_output_shape(h.program, &in, 1, 0, dims, 1, &rank), STITCH_OK);
  }
}

TEST(CApiSizes, SymbolsThatOverflowAnIntermediateAreRejected) {
  // Inputs of 2^32 elements each, fine alone; their outer product has 2^64.
  for (const char* backend : {"reference", "cpu"}) {
    Handles h;
    if (!compile(h,
                 "graph g(a: f32[N, 1], b: f32[M]) {\n  z = mul(a, b)\n"
                 "  s = reduce_sum(z, axes=[0, 1])\n  return s\n}\n",
                 backend))
      continue;
    float one = 1.0f, out = 0.0f;
    int64_t aShape[2] = {int64_t{1} << 32, 1}, bShape[1] = {int64_t{1} << 32};
    // NULL-free views over one float: the sizes must be refused before anything is read.
    DLTensor in[2] = {f32Tensor(&one, aShape, 2), f32Tensor(&one, bShape, 1)};
    DLTensor o = f32Tensor(&out, nullptr, 0);
    EXPECT_EQ(stitch_program_run(h.program, in, 2, &o, 1, nullptr), STITCH_ERROR_SHAPE_MISMATCH)
        << backend << ": " << lastError();
    EXPECT_NE(lastError().find("value 'z' (f32[N, M])"), std::string::npos) << lastError();
  }
}

TEST(CApiSizes, ReferenceRefusesValuesLargerThanMemory) {
  // 2^40 f32 elements (8 TiB as the interpreter's doubles) from a one-element input: the error
  // names the value, where std::bad_alloc once said only "out of memory".
  Handles h;
  ASSERT_TRUE(compile(h,
                      "graph g(x: f32[1]) {\n  b = broadcast_to(x, shape=[1099511627776])\n"
                      "  y = reduce_sum(b, axes=[0])\n  return y\n}\n",
                      "reference"));
  float one = 1.0f, out = 0.0f;
  int64_t shape[1] = {1};
  DLTensor in = f32Tensor(&one, shape, 1), o = f32Tensor(&out, nullptr, 0);
  EXPECT_EQ(stitch_program_run(h.program, &in, 1, &o, 1, nullptr), STITCH_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(lastError().find("'b' f32[1099511627776], takes 8.00 TiB"), std::string::npos)
      << lastError();
  EXPECT_NE(lastError().find("more than this machine's memory"), std::string::npos) << lastError();
}

TEST(CApiSizes, EngineAllocPastMemoryFails) {
  Handles h;
  ASSERT_TRUE(compile(h, "graph g(x: f32[1]) {\n  y = neg(x)\n  return y\n}\n", "reference"));
  // SIZE_MAX used to round up to a 24-byte block and return OK.
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(stitch_engine_alloc(h.engine, SIZE_MAX, &p), STITCH_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(lastError().find("stitch_engine_alloc: 18446744073709551615 bytes"), std::string::npos)
      << lastError();
  // 4 TiB: overcommit would grant it, and touching it would get the process killed.
  EXPECT_EQ(stitch_engine_alloc(h.engine, size_t{1} << 42, &p), STITCH_ERROR_OUT_OF_MEMORY);
  // Ordinary sizes still work.
  ASSERT_EQ(stitch_engine_alloc(h.engine, 1000, &p), STITCH_OK) << lastError();
  stitch_engine_free(h.engine, p);
}

}  // namespace
