// Autotuning through the C API (engine options "autotune*", stitch_program_tuning; README,
// "Autotuning"): a tuned program's answers are the untuned program's, its counters say what was
// measured and what came from a stored decision, and the options' mistakes are errors.
#include <gtest/gtest.h>
#include <stitch/stitch.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "api/api_test_helpers.h"

using stitch::apitest::f32Tensor;
using stitch::apitest::lastError;

namespace {

struct Engine {
  stitch_engine_t e = nullptr;
  Engine(std::initializer_list<std::pair<const char*, const char*>> options) {
    std::vector<const char*> k, v;
    for (auto [key, value] : options) k.push_back(key), v.push_back(value);
    status = stitch_engine_create(k.data(), v.data(), k.size(), &e);
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine() { stitch_engine_destroy(e); }
  stitch_status_t status;
};

// A softmax under a name no earlier process used, so that its decisions are made here.
std::string freshSoftmax() {
  return "graph tune_" + std::to_string(::getpid()) + "_" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) +
         "(x: f32[N, 512]) {\n  y = softmax(x)\n  return y\n}\n";
}

// Runs `text` on `engine` over 64 rows; the output, and the program's tuning counters (and its
// statistics, when `stats` is given).
std::vector<float> runOnce(stitch_engine_t engine, const std::string& text,
                           stitch_program_tuning_t* tuning,
                           stitch_program_stats_t* stats = nullptr) {
  stitch_graph_t g = nullptr;
  EXPECT_EQ(stitch_graph_parse(text.c_str(), "t", &g), STITCH_OK) << lastError();
  stitch_program_t p = nullptr;
  EXPECT_EQ(stitch_program_compile(engine, g, &p), STITCH_OK) << lastError();
  std::vector<float> x(64 * 512), y(x.size(), std::nanf(""));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  int64_t shape[] = {64, 512};
  DLTensor in = f32Tensor(x.data(), shape, 2), out = f32Tensor(y.data(), shape, 2);
  EXPECT_EQ(stitch_program_run(p, &in, 1, &out, 1, nullptr), STITCH_OK) << lastError();
  EXPECT_EQ(stitch_program_tuning(p, tuning), STITCH_OK) << lastError();
  if (stats) {
    EXPECT_EQ(stitch_program_stats(p, stats), STITCH_OK) << lastError();
  }
  stitch_program_destroy(p);
  stitch_graph_destroy(g);
  return y;
}

bool haveCpu() {
  Engine e({{"backend", "cpu"}});
  return e.status == STITCH_OK;
}

}  // namespace

TEST(ApiAutotune, ATunedProgramAnswersAsTheUntunedOneAndCountsItsWork) {
  if (!haveCpu()) GTEST_SKIP() << "no cpu backend in this build";
  const std::string text = freshSoftmax();
  Engine plain({{"backend", "cpu"}});
  Engine tuned({{"backend", "cpu"}, {"autotune", "1"}, {"autotune_budget_ms", "20"}});
  ASSERT_EQ(tuned.status, STITCH_OK) << lastError();
  stitch_program_tuning_t none{}, first{}, second{};
  stitch_program_stats_t firstStats{}, secondStats{};
  const std::vector<float> want = runOnce(plain.e, text, &none);
  EXPECT_EQ(none.measured + none.from_entries, 0u);
  const std::vector<float> got = runOnce(tuned.e, text, &first, &firstStats);
  EXPECT_EQ(firstStats.warm_starts, 0u);
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << i;
  EXPECT_EQ(first.measured, 1u);
  EXPECT_EQ(first.from_entries, 0u);
  EXPECT_GT(first.seconds, 0.0);
  const char* cache = std::getenv("STITCH_CACHE");
  if (cache && std::string(cache) == "0") return;  // no disk layer: nothing is kept
  // A second program of the graph runs the first one's decision.
  const std::vector<float> again = runOnce(tuned.e, text, &second, &secondStats);
  EXPECT_EQ(again, got);
  EXPECT_EQ(second.measured, 0u);
  EXPECT_EQ(second.from_entries, 1u);
  EXPECT_EQ(secondStats.warm_starts, 1u);  // the entry's plan and kernels: a warm start
  EXPECT_EQ(second.switched, first.switched);
  stitch_cache_dir_kinds_t kinds{};
  ASSERT_EQ(stitch_cache_dir_kinds(&kinds), STITCH_OK) << lastError();
  EXPECT_GE(kinds.tuned, 1u);
}

TEST(ApiAutotune, TheReferenceBackendTunesNothing) {
  Engine ref({{"backend", "reference"}, {"autotune", "on"}});
  ASSERT_EQ(ref.status, STITCH_OK) << lastError();
  stitch_program_tuning_t t{};
  runOnce(ref.e, freshSoftmax(), &t);
  EXPECT_EQ(t.measured + t.from_entries, 0u);
}

TEST(ApiAutotune, BadOptionsAreErrorsThatNameThem) {
  Engine both({{"autotune", "1"}, {"plan_candidate", "2"}});
  EXPECT_EQ(both.status, STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("exclude each other"), std::string::npos) << lastError();
  Engine many({{"autotune_candidates", "17"}});
  EXPECT_EQ(many.status, STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("autotune_candidates '17'"), std::string::npos) << lastError();
  Engine budget({{"autotune_budget_ms", "0"}});
  EXPECT_EQ(budget.status, STITCH_ERROR_INVALID_ARGUMENT);
  Engine flag({{"autotune", "sometimes"}});
  EXPECT_EQ(flag.status, STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(stitch_program_tuning(nullptr, nullptr), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(stitch_cache_dir_kinds(nullptr), STITCH_ERROR_INVALID_ARGUMENT);
}
