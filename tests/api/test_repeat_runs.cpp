// Repeat runs of stitch_program_run (api_program.cpp, "Repeat runs"): a run whose tensors are
// described as an earlier checked run's skips the full check, so these tests run a good call
// first and then change one thing at a time. Each change must give the right answer (shapes that
// change or alternate) or the error the first call would have given (a wrong shape or dtype,
// strides, NULL data, another device, overlapping memory), on every host backend.
#include <gtest/gtest.h>
#include <stitch/stitch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "api/api_test_helpers.h"

namespace {

using stitch::apitest::f32Tensor;
using stitch::apitest::lastError;

// y = x * 2 + 1 and z = x - b, over [N, 4] (b broadcast over rows).
constexpr const char* kAffine = R"(
graph affine(x: f32[N, 4], b: f32[4]) {
  m = mul(x, 2.0)
  y = add(m, 1.0)
  z = sub(x, b)
  return y, z
})";

// Every element of the output reads an element another unit writes, so a run in place that was
// not staged would give a different answer.
constexpr const char* kTranspose = R"(
graph t(x: f32[8, 8]) {
  y = transpose(x, perm=[1, 0])
  z = mul(y, 2)
  return z
})";

struct Program {
  stitch_graph_t graph = nullptr;
  stitch_engine_t engine = nullptr;
  stitch_program_t program = nullptr;

  Program(const char* backend, const char* text) {
    const char* k[] = {"backend"};
    const char* v[] = {backend};
    EXPECT_EQ(stitch_graph_parse(text, "t.stitch", &graph), STITCH_OK) << lastError();
    EXPECT_EQ(stitch_engine_create(k, v, 1, &engine), STITCH_OK) << lastError();
    EXPECT_EQ(stitch_program_compile(engine, graph, &program), STITCH_OK) << lastError();
  }
  ~Program() {
    stitch_program_destroy(program);
    stitch_engine_destroy(engine);
    stitch_graph_destroy(graph);
  }
};

std::vector<const char*> hostBackends() {
  std::vector<const char*> out = {"reference"};
  const char* k[] = {"backend"};
  const char* v[] = {"cpu"};
  stitch_engine_t e = nullptr;
  if (stitch_engine_create(k, v, 1, &e) == STITCH_OK) out.push_back("cpu");
  stitch_engine_destroy(e);
  return out;
}

// The tensors of one affine run over n rows, with data that depends on `seed`, and the answer.
struct AffineRun {
  int64_t xShape[2], bShape[1] = {4};
  std::vector<float> x, b, y, z, wantY, wantZ;
  DLTensor in[2], out[2];

  AffineRun(int64_t n, float seed) : xShape{n, 4} {
    const size_t count = static_cast<size_t>(n) * 4;
    x.resize(count);
    b = {seed, -seed, 0.5f, 2.0f};
    y.assign(count, -99.0f);
    z.assign(count, -99.0f);
    for (size_t i = 0; i < count; ++i) {
      x[i] = seed + static_cast<float>(i);
      wantY.push_back(x[i] * 2.0f + 1.0f);
      wantZ.push_back(x[i] - b[i % 4]);
    }
    in[0] = f32Tensor(x.data(), xShape, 2);
    in[1] = f32Tensor(b.data(), bShape, 1);
    out[0] = f32Tensor(y.data(), xShape, 2);
    out[1] = f32Tensor(z.data(), xShape, 2);
  }
  stitch_status_t run(stitch_program_t p) { return stitch_program_run(p, in, 2, out, 2, nullptr); }
  bool right() const { return y == wantY && z == wantZ; }
};

TEST(ApiRepeatRuns, SameShapeNewDataGivesRightAnswers) {
  for (const char* backend : hostBackends()) {
    SCOPED_TRACE(backend);
    Program p(backend, kAffine);
    for (int k = 0; k < 4; ++k) {
      AffineRun r(3, static_cast<float>(k));  // new buffers and values each time
      ASSERT_EQ(r.run(p.program), STITCH_OK) << lastError();
      EXPECT_TRUE(r.right()) << "run " << k;
    }
  }
}

TEST(ApiRepeatRuns, ChangedAndAlternatingShapesGiveRightAnswers) {
  for (const char* backend : hostBackends()) {
    SCOPED_TRACE(backend);
    Program p(backend, kAffine);
    for (int64_t n : {2, 5, 2, 5, 1, 0, 5, 7, 2}) {
      AffineRun r(n, static_cast<float>(n));
      ASSERT_EQ(r.run(p.program), STITCH_OK) << "n = " << n << ": " << lastError();
      EXPECT_TRUE(r.right()) << "n = " << n;
    }
  }
}

// A program keeps its plans per shape class (README, "Shape classes"): the first signature of a
// class runs the plan search and the others of the class re-price its plan; a repeated signature
// is not planned again. STITCH_SHAPE_CLASSES=0 searches every signature.
TEST(ApiRepeatRuns, ProgramStatsCountSignaturesAndKeptPlans) {
  for (const char* backend : hostBackends()) {
    for (bool classes : {true, false}) {
      SCOPED_TRACE(std::string(backend) + (classes ? "" : ", STITCH_SHAPE_CLASSES=0"));
      if (!classes) ::setenv("STITCH_SHAPE_CLASSES", "0", 1);
      // A graph name no earlier process used: its signatures are planned here, not warm-started
      // from a program entry an earlier run of this test left in the disk cache.
      const std::string text = std::regex_replace(
          kAffine, std::regex("graph affine"),
          "graph affine_" + std::to_string(::getpid()) + "_" +
              std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
      Program p(backend, text.c_str());
      for (int64_t n : {40, 33, 47, 40, 5, 6, 40}) {  // classes 2^5 and 2^2
        AffineRun r(n, static_cast<float>(n));
        ASSERT_EQ(r.run(p.program), STITCH_OK) << "n = " << n << ": " << lastError();
        EXPECT_TRUE(r.right()) << "n = " << n;
      }
      ::unsetenv("STITCH_SHAPE_CLASSES");
      stitch_program_stats_t s{};
      ASSERT_EQ(stitch_program_stats(p.program, &s), STITCH_OK) << lastError();
      EXPECT_EQ(s.signatures, 5u);
      EXPECT_EQ(s.plan_searches, classes ? 2u : 5u);
      EXPECT_EQ(s.plan_reuses, classes ? 3u : 0u);
      EXPECT_EQ(s.plan_classes, classes ? 2u : 0u);
      EXPECT_EQ(s.warm_starts, 0u);
    }
  }
  EXPECT_EQ(stitch_program_stats(nullptr, nullptr), STITCH_ERROR_INVALID_ARGUMENT);
}

// Whole-program entries (driver/program_entry.h): a second program of the same graph runs a
// signature the first one built from its entry in the disk cache, with no planning, and right.
TEST(ApiRepeatRuns, ASecondProgramOfAGraphWarmStartsFromTheFirstOnesEntry) {
  const char* cache = std::getenv("STITCH_CACHE");
  if (cache && std::string(cache) == "0") GTEST_SKIP() << "STITCH_CACHE=0: no disk layer";
  const std::string text = std::regex_replace(
      kAffine, std::regex("graph affine"),
      "graph warm_" + std::to_string(::getpid()) + "_" +
          std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  const std::vector<const char*> backends = hostBackends();
  if (std::find_if(backends.begin(), backends.end(),
                   [](const char* b) { return std::string(b) == "cpu"; }) == backends.end())
    GTEST_SKIP() << "no cpu backend in this build";
  Program first("cpu", text.c_str());
  AffineRun a(9, 3.0f);
  ASSERT_EQ(a.run(first.program), STITCH_OK) << lastError();
  Program second("cpu", text.c_str());
  AffineRun b(9, 5.0f);
  ASSERT_EQ(b.run(second.program), STITCH_OK) << lastError();
  EXPECT_TRUE(b.right());
  AffineRun c(10, 6.0f);  // another signature: built
  ASSERT_EQ(c.run(second.program), STITCH_OK) << lastError();
  EXPECT_TRUE(c.right());
  stitch_program_stats_t s{};
  ASSERT_EQ(stitch_program_stats(second.program, &s), STITCH_OK) << lastError();
  EXPECT_EQ(s.signatures, 2u);
  EXPECT_EQ(s.warm_starts, 1u);
  EXPECT_EQ(s.plan_searches + s.plan_reuses, 1u);
}

TEST(ApiRepeatRuns, AWrongShapeOrDtypeAfterAGoodRunStillFails) {
  for (const char* backend : hostBackends()) {
    SCOPED_TRACE(backend);
    Program p(backend, kAffine);
    AffineRun good(4, 1.0f);
    ASSERT_EQ(good.run(p.program), STITCH_OK) << lastError();

    AffineRun r(4, 2.0f);
    int64_t shortRows[2] = {3, 4};
    r.out[1].shape = shortRows;  // z must be [4, 4]
    EXPECT_EQ(r.run(p.program), STITCH_ERROR_SHAPE_MISMATCH);
    EXPECT_NE(lastError().find("output 1 ('z') must be f32[4, 4]"), std::string::npos)
        << lastError();
    EXPECT_EQ(r.y, std::vector<float>(16, -99.0f)) << "nothing may be written";

    AffineRun wide(4, 2.0f);
    int64_t fiveCols[2] = {4, 5};
    wide.in[0].shape = fiveCols;  // x must be [N, 4]
    EXPECT_EQ(wide.run(p.program), STITCH_ERROR_SHAPE_MISMATCH) << lastError();

    AffineRun f64(4, 2.0f);
    f64.out[0].dtype = {kDLFloat, 64, 1};
    EXPECT_EQ(f64.run(p.program), STITCH_ERROR_SHAPE_MISMATCH);
    EXPECT_NE(lastError().find("output 0 ('y') must be f32[4, 4]"), std::string::npos)
        << lastError();

    AffineRun rank(4, 2.0f);
    int64_t twoDims[2] = {1, 4};  // b must be rank 1
    rank.in[1].ndim = 2;
    rank.in[1].shape = twoDims;
    EXPECT_EQ(rank.run(p.program), STITCH_ERROR_SHAPE_MISMATCH) << lastError();

    // After the failures the kept signature still runs right.
    AffineRun again(4, 3.0f);
    ASSERT_EQ(again.run(p.program), STITCH_OK) << lastError();
    EXPECT_TRUE(again.right());
  }
}

TEST(ApiRepeatRuns, WhatAnEqualDescriptionDoesNotCoverIsCheckedEveryRun) {
  for (const char* backend : hostBackends()) {
    SCOPED_TRACE(backend);
    Program p(backend, kAffine);
    AffineRun good(4, 1.0f);
    ASSERT_EQ(good.run(p.program), STITCH_OK) << lastError();

    AffineRun strided(4, 2.0f);
    int64_t transposed[2] = {1, 4};
    strided.in[0].strides = transposed;
    EXPECT_EQ(strided.run(p.program), STITCH_ERROR_UNSUPPORTED);
    EXPECT_NE(lastError().find("not compact row-major"), std::string::npos) << lastError();
    int64_t compact[2] = {4, 1};
    strided.in[0].strides = compact;  // explicit compact strides are fine
    EXPECT_EQ(strided.run(p.program), STITCH_OK) << lastError();
    EXPECT_TRUE(strided.right());

    AffineRun null(4, 2.0f);
    null.out[0].data = nullptr;
    EXPECT_EQ(null.run(p.program), STITCH_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(lastError().find("has NULL data"), std::string::npos) << lastError();

    AffineRun device(4, 2.0f);
    device.in[1].device = {kDLCUDA, 0};
    EXPECT_EQ(device.run(p.program), STITCH_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(lastError().find("needs host memory"), std::string::npos) << lastError();

    AffineRun sharedOut(4, 2.0f);
    sharedOut.out[1].data = sharedOut.y.data();  // y and z on the same memory
    EXPECT_EQ(sharedOut.run(p.program), STITCH_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(lastError().find("outputs must not overlap"), std::string::npos) << lastError();

    AffineRun partial(4, 2.0f);
    partial.out[0].data = partial.x.data() + 2;  // y overlaps x by all but two elements
    EXPECT_EQ(partial.run(p.program), STITCH_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(lastError().find("partially overlaps"), std::string::npos) << lastError();
  }
}

// An in-place run after a run on separate memory must still be staged.
TEST(ApiRepeatRuns, InPlaceAfterASeparateRunIsStaged) {
  for (const char* backend : hostBackends()) {
    SCOPED_TRACE(backend);
    Program p(backend, kTranspose);
    std::vector<float> x(64), y(64), expect(64);
    for (int i = 0; i < 64; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) expect[static_cast<size_t>(r * 8 + c)] = 2.0f * x[c * 8 + r];
    int64_t shape[2] = {8, 8};
    DLTensor tx = f32Tensor(x.data(), shape, 2), ty = f32Tensor(y.data(), shape, 2);
    ASSERT_EQ(stitch_program_run(p.program, &tx, 1, &ty, 1, nullptr), STITCH_OK) << lastError();
    EXPECT_EQ(y, expect);
    ASSERT_EQ(stitch_program_run(p.program, &tx, 1, &tx, 1, nullptr), STITCH_OK) << lastError();
    EXPECT_EQ(x, expect);
  }
}

// Threads running one program on different shapes: the program's last signature changes under
// them all the time, and every run must still be right (also run under ThreadSanitizer).
TEST(ApiRepeatRuns, ShapesThatDifferBetweenThreads) {
  for (const char* backend : hostBackends()) {
    SCOPED_TRACE(backend);
    Program p(backend, kAffine);
    std::vector<int> wrong(4, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int k = 0; k < 50; ++k) {
          AffineRun r(1 + t + (k % 2) * 4, static_cast<float>(t * 100 + k));
          if (r.run(p.program) != STITCH_OK || !r.right()) ++wrong[static_cast<size_t>(t)];
        }
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(wrong, std::vector<int>(4, 0));
  }
}

}  // namespace
