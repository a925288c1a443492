// stitch_environment_check: every STITCH_* variable, read up front by the code that uses it, and
// the same check at engine creation and planning, so that a bad value is an error wherever it is
// set, never a run that goes on without it.
#include <gtest/gtest.h>
#include <stitch/stitch.h>

#include <memory>
#include <stitch/stitch.hpp>
#include <string>
#include <vector>

#include "api/api_test_helpers.h"
#include "common/env_guard.h"

namespace {

using stitch::apitest::lastError;

using stitch::testing::EnvGuard;

struct Setting {
  const char* name;
  const char* value;
};

// A bad value for every variable of the README's table that has valid values to break (the
// paths, STITCH_CACHE_DIR, STITCH_DUMP_DIR, STITCH_LIBRARY and STITCH_*_LIBRARY, take any).
constexpr Setting kBad[] = {
    {"STITCH_LOG_LEVEL", "loud"},
    {"STITCH_BACKEND", "gpu"},
    {"STITCH_FUSION", "bogus"},
    {"STITCH_CACHE", "2"},
    {"STITCH_CACHE_MAX_MB", "-5"},
    {"STITCH_CACHE_KEY_FILE", "/nonexistent/stitch-key"},
    {"STITCH_REMOTE_CACHE", "garbage"},
    {"STITCH_REMOTE_CACHE_NAMESPACE", "a/b"},
    {"STITCH_REMOTE_CACHE_TIMEOUT_MS", "0"},
    {"STITCH_REMOTE_CACHE_TTL", "-1"},
    {"STITCH_REMOTE_CACHE_RETRY_MS", "soon"},
    {"STITCH_DUMP", "ptx"},
    {"STITCH_NUM_THREADS", "0"},
    {"STITCH_SPIN_US", "abc"},
    {"STITCH_CPU_OPENMP", "2"},
    {"STITCH_CPU_STREAMING_STORES", "2"},
    {"STITCH_CPU_FEATURES", "avx2"},
    {"STITCH_SHAPE_CLASSES", "2"},
    {"STITCH_AUTOTUNE", "2"},
    {"STITCH_AUTOTUNE_CANDIDATES", "17"},
    {"STITCH_AUTOTUNE_BUDGET_MS", "0"},
    {"STITCH_COST_CALIBRATION", "2"},
    {"STITCH_COMPILE_THREADS", "0"},
    {"STITCH_DISABLE", "banana"},
    {"STITCH_REPORT", "loud"},
    {"STITCH_HUGE_PAGES", "banana"},
    {"STITCH_HOST_POOL_MB", "-1"},
};

// A valid value for every variable of the table.
constexpr Setting kGood[] = {
    {"STITCH_LOG_LEVEL", "warn"},
    {"STITCH_BACKEND", "auto"},
    {"STITCH_FUSION", "basic"},
    {"STITCH_CACHE", "ON"},
    {"STITCH_CACHE_DIR", "/nonexistent/stitch-cache"},
    {"STITCH_CACHE_MAX_MB", "1"},
    {"STITCH_CACHE_KEY", "a fleet secret of at least 32 bytes"},
    {"STITCH_REMOTE_CACHE", "off"},
    {"STITCH_REMOTE_CACHE_NAMESPACE", "team-a.v2"},
    {"STITCH_REMOTE_CACHE_TIMEOUT_MS", "60000"},
    {"STITCH_REMOTE_CACHE_TTL", "0"},
    {"STITCH_REMOTE_CACHE_RETRY_MS", "0"},
    {"STITCH_DUMP", "plan,source,llvm"},
    {"STITCH_DUMP_DIR", "/nonexistent/dumps"},
    {"STITCH_NUM_THREADS", "3"},
    {"STITCH_SPIN_US", "0"},
    {"STITCH_CPU_OPENMP", "no"},
    {"STITCH_CPU_STREAMING_STORES", "off"},
    {"STITCH_CPU_FEATURES", "-avx512f,+sse2"},
    {"STITCH_SHAPE_CLASSES", "true"},
    {"STITCH_AUTOTUNE", "off"},
    {"STITCH_AUTOTUNE_CANDIDATES", "16"},
    {"STITCH_AUTOTUNE_BUDGET_MS", "600000"},
    {"STITCH_COST_CALIBRATION", "off"},
    {"STITCH_COMPILE_THREADS", "256"},
    {"STITCH_DISABLE", "0"},
    {"STITCH_REPORT", "stderr"},
    {"STITCH_HUGE_PAGES", "yes"},
    {"STITCH_HOST_POOL_MB", "0"},
    {"STITCH_LIBRARY", "/nonexistent/libstitch.so"},
    {"STITCH_CUDA_LIBRARY", "/nonexistent/libcuda.so"},
    {"STITCH_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so"},
    {"STITCH_HIP_LIBRARY", "/nonexistent/libamdhip64.so"},
};

TEST(Environment, ValidValuesOfEveryVariablePass) {
  std::vector<std::unique_ptr<EnvGuard>> set;
  for (const Setting& s : kGood) set.push_back(std::make_unique<EnvGuard>(s.name, s.value));
  EXPECT_EQ(stitch_environment_check(), STITCH_OK) << lastError();
}

TEST(Environment, EachBadValueIsNamedWithTheValidValues) {
  for (const Setting& s : kBad) {
    EnvGuard env(s.name, s.value);
    const std::string setting = std::string(s.name) + "=" + s.value;
    EXPECT_EQ(stitch_environment_check(), STITCH_ERROR_INVALID_ARGUMENT) << setting;
    EXPECT_EQ(lastError().find(setting + " is not valid"), 0u) << lastError();
    EXPECT_NE(lastError().find("valid values: "), std::string::npos) << lastError();
  }
  EXPECT_EQ(stitch_environment_check(), STITCH_OK) << lastError();
}

// A secret is named by its variable, never printed (STITCH_CACHE_KEY_FILE's path is in kBad).
TEST(Environment, ABadSecretIsNamedButNotPrinted) {
  EnvGuard key("STITCH_CACHE_KEY", "too short a secret");
  ASSERT_EQ(stitch_environment_check(), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError().find("STITCH_CACHE_KEY is not valid"), 0u) << lastError();
  EXPECT_EQ(lastError().find("too short a secret"), std::string::npos) << lastError();
}

TEST(Environment, EveryBadValueHasItsLine) {
  EnvGuard fusion("STITCH_FUSION", "bogus");
  EnvGuard ttl("STITCH_REMOTE_CACHE_TTL", "forever");
  EnvGuard omp("STITCH_CPU_OPENMP", "banana");
  ASSERT_EQ(stitch_environment_check(), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(),
            "STITCH_FUSION=bogus is not valid; valid values: stitch, basic, off\n"
            "STITCH_CPU_OPENMP=banana is not valid; valid values: 1, true, yes, on (true), 0, "
            "false, no, off (false)\n"
            "STITCH_REMOTE_CACHE_TTL=forever is not valid; valid values: an integer from 0 to "
            "315360000");
}

TEST(Environment, DumpPtxSaysItIsNotBuilt) {
  EnvGuard dump("STITCH_DUMP", "plan,ptx");
  ASSERT_EQ(stitch_environment_check(), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("STITCH_DUMP=plan,ptx is not valid; valid values: a comma list of "
                             "plan, source, llvm (ptx dumps are not built"),
            std::string::npos)
      << lastError();
  EnvGuard other("STITCH_DUMP", "plan,asm");
  ASSERT_EQ(stitch_environment_check(), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("('asm' is none of them)"), std::string::npos) << lastError();
}

// Engine creation and planning check every variable, not only their own: STITCH_CPU_OPENMP is
// read by the cpu pool's first parallel loop, which a small graph never reaches.
TEST(Environment, EngineCreationAndPlanningCheckEveryVariable) {
  EnvGuard omp("STITCH_CPU_OPENMP", "banana");
  stitch_engine_t e = nullptr;
  const char* k[] = {"backend"};
  const char* v[] = {"reference"};
  EXPECT_EQ(stitch_engine_create(k, v, 1, &e), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(e, nullptr);
  EXPECT_NE(lastError().find("STITCH_CPU_OPENMP=banana"), std::string::npos) << lastError();
  stitch::Graph g = stitch::Graph::parse("graph g(x: f32[4]) {\n  y = exp(x)\n  return y\n}\n");
  size_t needed = 0;
  EXPECT_EQ(stitch_graph_explain_plan(g.get(), nullptr, nullptr, 0, nullptr, nullptr, 0, nullptr, 0,
                                      &needed),
            STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("STITCH_CPU_OPENMP=banana"), std::string::npos) << lastError();
  try {
    stitch::checkEnvironment();
    ADD_FAILURE() << "stitch::checkEnvironment() accepted STITCH_CPU_OPENMP=banana";
  } catch (const stitch::Error& err) {
    EXPECT_EQ(err.status(), STITCH_ERROR_INVALID_ARGUMENT);
  }
}

}  // namespace
