// `stitch tune fit` (stitch_tune_fit; runtime/cost_calibration.h, driver/calibration_fit.h): runs
// with STITCH_AUTOTUNE=1 leave measured plans in a cache directory; the fit reports on them and
// stores this machine's calibration (counted by `stitch cache stats` with the machine profiles),
// which `stitch plan --backend cpu` then prices with, unless STITCH_COST_CALIBRATION=0; --dry-run
// stores nothing; too few records is exit 2 saying how to make them.
#include <gtest/gtest.h>

#include <string>

#include "../common/temp_dir.h"
#include "run_cli.h"

using stitch::clitest::haveCpuBackend;
using stitch::clitest::Result;
using stitch::clitest::runCli;
using stitch::testing::TempDir;

namespace {

const std::string kExamples = std::string(STITCH_SOURCE_DIR) + "/examples/";

// The plan's totals line: the model's time of the plan and of the unfused graph.
std::string totals(const std::string& plan) {
  const size_t at = plan.find("totals: ");
  return at == std::string::npos ? std::string() : plan.substr(at, plan.find('\n', at) - at);
}

std::string machineProfiles(const std::string& env) {
  Result stats = runCli("cache stats", env);
  const size_t at = stats.out.find("machine profiles: ");
  return at == std::string::npos ? stats.out : stats.out.substr(at, stats.out.find('\n', at) - at);
}

}  // namespace

TEST(TuneFit, FitsTheMeasuredPlansStoresTheCalibrationAndPlansWithIt) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  TempDir dir;
  const std::string env = "STITCH_REMOTE_CACHE= STITCH_CACHE_DIR=" + dir.path().string() + " ";
  const std::string tune = env + "STITCH_AUTOTUNE=1 STITCH_AUTOTUNE_BUDGET_MS=50 ";

  // Nothing measured yet: exit 2, and the message says how to measure.
  Result none = runCli("tune fit --backend cpu", env);
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_NE(none.out.find("too few measured plans"), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("STITCH_AUTOTUNE=1"), std::string::npos) << none.out;

  // Small sizes: each signature's search times its candidate plans.
  for (const char* run : {"softmax.stitch --dim N=256", "softmax.stitch --dim N=64",
                          "layer_norm.stitch --dim N=64", "softmax_backward.stitch --dim N=64",
                          "rms_norm.stitch --dim N=32", "cross_entropy.stitch --dim N=64"}) {
    Result r = runCli("run " + kExamples + std::string(run) + " --backend cpu", tune);
    ASSERT_EQ(r.code, 0) << run << "\n" << r.out;
  }
  const std::string plan =
      "plan " + kExamples + "softmax.stitch --graph softmax --dim N=300 " + "--backend cpu";
  const Result before = runCli(plan, env);
  ASSERT_EQ(before.code, 0) << before.out;
  ASSERT_FALSE(totals(before.out).empty()) << before.out;
  const std::string profiles = machineProfiles(env);

  Result dry = runCli("tune fit --backend cpu --dry-run --hold-back 30", env);
  ASSERT_EQ(dry.code, 0) << dry.out;
  for (const char* part : {"tune fit: cpu host", "records: ", "fit set (", "before: median",
                           "after:  median", "figures (before -> after)", "memory bandwidth",
                           "launch overhead", "stored: nothing (dry run"})
    EXPECT_NE(dry.out.find(part), std::string::npos) << part << " not in:\n" << dry.out;
  EXPECT_EQ(machineProfiles(env), profiles);  // nothing stored
  EXPECT_EQ(runCli(plan, env).out, before.out);

  // Without --force a fit is stored only if its model picks no worse than the profile's, which
  // these few noisy records may or may not give: either way it says which.
  Result judged = runCli("tune fit --backend cpu", env);
  ASSERT_EQ(judged.code, 0) << judged.out;
  const bool refused = judged.out.find(
                           "stored: nothing (the fitted figures pick a plan within 5% "
                           "of the fastest in ") != std::string::npos;
  EXPECT_TRUE(refused || judged.out.find("stored: this machine's calibration") != std::string::npos)
      << judged.out;
  if (refused) {
    EXPECT_EQ(machineProfiles(env), profiles);
  }
  Result fit = runCli("tune fit --backend cpu --force", env);
  ASSERT_EQ(fit.code, 0) << fit.out;
  EXPECT_NE(fit.out.find("stored: this machine's calibration"), std::string::npos) << fit.out;
  EXPECT_NE(machineProfiles(env), profiles);  // one more: the calibration
  EXPECT_NE(machineProfiles(env).find("machine profiles: 2"), std::string::npos)
      << machineProfiles(env);

  // Planned with the calibration: other figures, so other times; without it, as before.
  const Result after = runCli(plan, env);
  ASSERT_EQ(after.code, 0) << after.out;
  EXPECT_NE(totals(after.out), totals(before.out)) << after.out;
  const Result ignored = runCli(plan, env + "STITCH_COST_CALIBRATION=0 ");
  EXPECT_EQ(ignored.out, before.out);
  // A bad value of the variable is an error that names it.
  Result bad = runCli(plan, env + "STITCH_COST_CALIBRATION=maybe ");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("STITCH_COST_CALIBRATION"), std::string::npos) << bad.out;
  // A process that runs with it plans, tunes and runs as before (the calibration is only figures).
  Result run =
      runCli("run " + kExamples + "softmax.stitch --dim N=300 --backend cpu --check", tune);
  EXPECT_EQ(run.code, 0) << run.out;
}

TEST(TuneFit, MistakesAreUsageErrors) {
  for (const char* args : {"tune", "tune fix", "tune fit --hold-back", "tune fit --wat",
                           "tune fit --hold-back 95", "tune fit --hold-back x"}) {
    Result r = runCli(std::string(args), "STITCH_CACHE_DIR=/nonexistent/stitch-tune-test");
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
  }
  // No cache directory to read: exit 2 with the reason.
  Result off = runCli("tune fit --backend cpu", "STITCH_CACHE=0");
  EXPECT_EQ(off.code, 2) << off.out;
  EXPECT_NE(off.out.find("STITCH_CACHE=0"), std::string::npos) << off.out;
}
