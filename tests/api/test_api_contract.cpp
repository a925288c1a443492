// The C API's contract on misuse (stitch.h, "Handles" and stitch_program_run's "Aliasing"):
// destroyed or foreign handles, overlapping tensors and malformed symbols come back as a status
// and a message, never as heap corruption or a silently wrong answer.
#include <gtest/gtest.h>
#include <stitch/stitch.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "api/api_test_helpers.h"

namespace {

using stitch::apitest::f32Tensor;
using stitch::apitest::lastError;

stitch_engine_t makeEngine(const char* backend) {
  const char* k[] = {"backend"};
  const char* v[] = {backend};
  stitch_engine_t e = nullptr;
  return stitch_engine_create(k, v, 1, &e) == STITCH_OK ? e : nullptr;
}

stitch_program_t compileText(stitch_engine_t e, const char* text) {
  stitch_graph_t g = nullptr;
  EXPECT_EQ(stitch_graph_parse(text, "t.stitch", &g), STITCH_OK) << lastError();
  stitch_program_t p = nullptr;
  EXPECT_EQ(stitch_program_compile(e, g, &p), STITCH_OK) << lastError();
  stitch_graph_destroy(g);
  return p;
}

// The backends that run on host memory in this build.
std::vector<const char*> hostBackends() {
  std::vector<const char*> out = {"reference"};
  if (stitch_engine_t cpu = makeEngine("cpu")) {
    out.push_back("cpu");
    stitch_engine_destroy(cpu);
  }
  return out;
}

constexpr const char* kAdd = R"(
graph add(a: f32[N], b: f32[N]) {
  y = add(a, b)
  return y
})";

// ---------------------------------------------------------------------------------------------
// Handles

TEST(ApiHandles, DoubleDestroyIsHarmless) {
  stitch_engine_t e = makeEngine("reference");
  ASSERT_NE(e, nullptr);
  stitch_program_t p = compileText(e, kAdd);
  stitch_program_destroy(p);
  stitch_program_destroy(p);  // was a double free
  EXPECT_NE(lastError().find("not a live stitch_program_t"), std::string::npos) << lastError();
  stitch_engine_destroy(e);
  stitch_engine_destroy(e);
  EXPECT_NE(lastError().find("not a live stitch_engine_t"), std::string::npos) << lastError();
  stitch_graph_t g = nullptr;
  ASSERT_EQ(stitch_graph_create("g", &g), STITCH_OK);
  stitch_graph_destroy(g);
  stitch_graph_destroy(g);
  stitch_module_t m = nullptr;
  ASSERT_EQ(stitch_module_parse(kAdd, "m.stitch", &m), STITCH_OK);
  stitch_module_destroy(m);
  stitch_module_destroy(m);
}

TEST(ApiHandles, UseAfterDestroyIsAnError) {
  stitch_engine_t e = makeEngine("reference");
  ASSERT_NE(e, nullptr);
  stitch_program_t p = compileText(e, kAdd);
  stitch_graph_t g = nullptr;
  ASSERT_EQ(stitch_graph_parse(kAdd, "t.stitch", &g), STITCH_OK);
  stitch_engine_destroy(e);
  // Compiling with a destroyed engine.
  stitch_program_t p2 = nullptr;
  EXPECT_EQ(stitch_program_compile(e, g, &p2), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("stitch_program_compile: engine is not a live stitch_engine_t"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(p2, nullptr);
  EXPECT_EQ(stitch_engine_backend(e), nullptr);
  // The program made before outlives its engine (documented), then is destroyed.
  float a[2] = {1, 2}, b[2] = {3, 4}, y[2] = {};
  int64_t n[1] = {2};
  DLTensor in[2] = {f32Tensor(a, n, 1), f32Tensor(b, n, 1)};
  DLTensor out = f32Tensor(y, n, 1);
  ASSERT_EQ(stitch_program_run(p, in, 2, &out, 1, nullptr), STITCH_OK) << lastError();
  EXPECT_EQ(y[1], 6.0f);
  stitch_program_destroy(p);
  EXPECT_EQ(stitch_program_run(p, in, 2, &out, 1, nullptr), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("program is not a live stitch_program_t"), std::string::npos);
  EXPECT_EQ(stitch_program_num_inputs(p), 0u);
  // A destroyed graph.
  stitch_graph_destroy(g);
  EXPECT_EQ(stitch_graph_verify(g), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(stitch_graph_name(g), nullptr);
  EXPECT_EQ(stitch_graph_num_ops(g), 0u);
}

TEST(ApiHandles, AHandleDestroyedOnAnotherThreadIsSeenDead) {
  // Each thread remembers the handle it last found live (api_handles.cpp): a destroy on another
  // thread must still be seen, and destroying some other handle must not make a live one fail.
  stitch_engine_t e = makeEngine("reference");
  ASSERT_NE(e, nullptr);
  stitch_program_t p = compileText(e, kAdd);
  stitch_program_t q = compileText(e, kAdd);
  float a[2] = {1, 2}, b[2] = {3, 4}, y[2] = {};
  int64_t n[1] = {2};
  DLTensor in[2] = {f32Tensor(a, n, 1), f32Tensor(b, n, 1)};
  DLTensor out = f32Tensor(y, n, 1);
  ASSERT_EQ(stitch_program_run(p, in, 2, &out, 1, nullptr), STITCH_OK) << lastError();
  std::thread([&] { stitch_program_destroy(q); }).join();
  EXPECT_EQ(stitch_program_run(p, in, 2, &out, 1, nullptr), STITCH_OK) << lastError();
  std::thread([&] { stitch_program_destroy(p); }).join();
  EXPECT_EQ(stitch_program_run(p, in, 2, &out, 1, nullptr), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("program is not a live stitch_program_t"), std::string::npos)
      << lastError();
  stitch_engine_destroy(e);
}

TEST(ApiHandles, AHandleOfAnotherKindIsRejected) {
  stitch_engine_t e = makeEngine("reference");
  ASSERT_NE(e, nullptr);
  auto* notAGraph = reinterpret_cast<stitch_graph_t>(e);
  EXPECT_EQ(stitch_graph_verify(notAGraph), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("not a live stitch_graph_t"), std::string::npos) << lastError();
  stitch_graph_destroy(notAGraph);  // ignored: the engine stays alive
  EXPECT_STREQ(stitch_engine_backend(e), "reference");
  int local = 0;
  EXPECT_EQ(stitch_graph_verify(reinterpret_cast<stitch_graph_t>(&local)),
            STITCH_ERROR_INVALID_ARGUMENT);
  stitch_engine_destroy(e);
}

TEST(ApiHandles, ModuleGraphsLiveAsLongAsTheirModule) {
  stitch_module_t m = nullptr;
  ASSERT_EQ(stitch_module_parse(kAdd, "m.stitch", &m), STITCH_OK);
  stitch_graph_t g = stitch_module_graph(m, 0);
  ASSERT_NE(g, nullptr);
  stitch_graph_destroy(g);  // borrowed: ignored
  EXPECT_EQ(stitch_graph_verify(g), STITCH_OK) << lastError();
  stitch_module_destroy(m);
  EXPECT_EQ(stitch_graph_verify(g), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(stitch_module_num_graphs(m), 0u);
  EXPECT_EQ(stitch_module_graph(m, 0), nullptr);
}

// ---------------------------------------------------------------------------------------------
// Symbols

TEST(ApiSymbols, EmptyOrMalformedSymbolsAreRejected) {
  stitch_graph_t g = nullptr;
  ASSERT_EQ(stitch_graph_create("g", &g), STITCH_OK);
  for (const char* bad : {"", "1N", "N M", "graph", "a-b"}) {
    stitch_dim_t dims[1] = {{7, bad}};
    EXPECT_EQ(stitch_graph_add_input(g, "x", STITCH_F32, dims, 1, nullptr),
              STITCH_ERROR_INVALID_ARGUMENT)
        << "'" << bad << "'";
    EXPECT_NE(lastError().find("is not a valid symbol"), std::string::npos) << lastError();
  }
  EXPECT_EQ(stitch_graph_num_inputs(g), 0u);
  stitch_dim_t ok[2] = {{0, "N"}, {4, nullptr}};
  EXPECT_EQ(stitch_graph_add_input(g, "x", STITCH_F32, ok, 2, nullptr), STITCH_OK) << lastError();
  stitch_graph_destroy(g);
}

// ---------------------------------------------------------------------------------------------
// Aliasing

constexpr const char* kTranspose = R"(
graph t(x: f32[8, 8]) {
  y = transpose(x, perm=[1, 0])
  z = mul(y, 2)
  return z
})";

// In place, every unit of a transpose reads elements another unit writes: without staging the
// result depends on the order the units run in.
TEST(ApiAliasing, InPlaceOutputGivesTheSeparateMemoryResult) {
  for (const char* backend : hostBackends()) {
    SCOPED_TRACE(backend);
    stitch_engine_t e = makeEngine(backend);
    ASSERT_NE(e, nullptr);
    stitch_program_t p = compileText(e, kTranspose);
    std::vector<float> x(64), expect(64);
    for (int i = 0; i < 64; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) expect[static_cast<size_t>(r * 8 + c)] = 2.0f * x[c * 8 + r];
    int64_t shape[2] = {8, 8};
    DLTensor t = f32Tensor(x.data(), shape, 2);
    ASSERT_EQ(stitch_program_run(p, &t, 1, &t, 1, nullptr), STITCH_OK) << lastError();
    EXPECT_EQ(x, expect);
    stitch_program_destroy(p);
    stitch_engine_destroy(e);
  }
}

TEST(ApiAliasing, PartialOverlapIsAnError) {
  for (const char* backend : hostBackends()) {
    SCOPED_TRACE(backend);
    stitch_engine_t e = makeEngine(backend);
    ASSERT_NE(e, nullptr);
    stitch_program_t p = compileText(e, kAdd);
    std::vector<float> buf(12, 1.0f);
    int64_t n[1] = {8};
    DLTensor a = f32Tensor(buf.data(), n, 1), b = f32Tensor(buf.data(), n, 1);
    DLTensor y = f32Tensor(buf.data() + 4, n, 1);  // overlaps a and b by half
    DLTensor in[2] = {a, b};
    EXPECT_EQ(stitch_program_run(p, in, 2, &y, 1, nullptr), STITCH_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(lastError().find("output 0 ('y') partially overlaps input 0 ('a')"),
              std::string::npos)
        << lastError();
    EXPECT_EQ(buf, std::vector<float>(12, 1.0f)) << "nothing may be written";
    // Through byte_offset: the same memory, described differently.
    DLTensor shifted = f32Tensor(buf.data(), n, 1);
    shifted.byte_offset = sizeof(float);
    EXPECT_EQ(stitch_program_run(p, in, 2, &shifted, 1, nullptr), STITCH_ERROR_INVALID_ARGUMENT);
    // Inputs may share memory freely; an output exactly on an input is in place.
    EXPECT_EQ(stitch_program_run(p, in, 2, &a, 1, nullptr), STITCH_OK) << lastError();
    EXPECT_EQ(buf[0], 2.0f);
    EXPECT_EQ(buf[8], 1.0f);
    stitch_program_destroy(p);
    stitch_engine_destroy(e);
  }
}

TEST(ApiAliasing, OverlappingOutputsAreAnError) {
  stitch_engine_t e = makeEngine("reference");
  ASSERT_NE(e, nullptr);
  stitch_program_t p = compileText(e, R"(
graph two(a: f32[4]) {
  y = neg(a)
  z = abs(a)
  return y, z
})");
  float a[4] = {1, -2, 3, -4}, out[6] = {};
  int64_t n[1] = {4};
  DLTensor in = f32Tensor(a, n, 1);
  DLTensor outs[2] = {f32Tensor(out, n, 1), f32Tensor(out + 2, n, 1)};
  EXPECT_EQ(stitch_program_run(p, &in, 1, outs, 2, nullptr), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("output 0 ('y') and output 1 ('z') share memory"), std::string::npos)
      << lastError();
  stitch_program_destroy(p);
  stitch_engine_destroy(e);
}

}  // namespace
