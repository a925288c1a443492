// Autotuning through the command line (README, "Autotuning"; src/driver/tuning.h): a process with
// STITCH_AUTOTUNE=1 times a signature's candidate plans and keeps the decision in the kernel
// cache; a restarted process, and processes with disk caches of their own sharing one Redis server
// (a fleet: tests/common/redis_server.h), run the decision with no measurement; a damaged or
// foreign decision is measured again, never run; `stitch plan --backend` and STITCH_DUMP=plan say
// where the plan came from; `stitch cache stats` counts the decisions.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../common/redis_server.h"
#include "../common/temp_dir.h"
#include "run_cli.h"

namespace fs = std::filesystem;
using stitch::clitest::haveCpuBackend;
using stitch::clitest::Result;
using stitch::clitest::runCli;
using stitch::testing::RedisServer;
using stitch::testing::TempDir;

namespace {

// Softmax's search makes several plans (one kernel, two, three); the budget keeps the test short.
const std::string kArgs = "run " + std::string(STITCH_SOURCE_DIR) +
                          "/examples/softmax.stitch --graph softmax --backend cpu --check --dim "
                          "N=256";
const std::string kTune = "STITCH_AUTOTUNE=1 STITCH_AUTOTUNE_BUDGET_MS=50 STITCH_REMOTE_CACHE= ";
const std::string kFleetKeyEnv = "STITCH_CACHE_KEY=the-fleet-s-key-0123456789abcdef0123 ";

bool measured(const Result& r) { return r.out.find("plan: autotuned in ") != std::string::npos; }
bool fromEntry(const Result& r) {
  return r.out.find("plan: the tuning entry's decision") != std::string::npos;
}

// The tuned entries of a cache directory: the files whose key names the kind.
std::vector<fs::path> tunedEntries(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream f(e.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (bytes.find("tuned-program") != std::string::npos) out.push_back(e.path());
  }
  return out;
}

}  // namespace

TEST(Autotune, OneProcessMeasuresAndARestartedOneRunsTheDecision) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  TempDir dir;
  const std::string env = kTune + "STITCH_CACHE_DIR=" + dir.path().string() + " ";
  Result first = runCli(kArgs, env);
  ASSERT_EQ(first.code, 0) << first.out;  // --check: the tuned plan matches the reference
  EXPECT_TRUE(measured(first)) << first.out;
  ASSERT_EQ(tunedEntries(dir.path()).size(), 1u);
  Result stats = runCli("cache stats", "STITCH_CACHE_DIR=" + dir.path().string());
  EXPECT_NE(stats.out.find("tuned plans: 1,"), std::string::npos) << stats.out;

  Result second = runCli(kArgs, env);
  ASSERT_EQ(second.code, 0) << second.out;
  EXPECT_TRUE(fromEntry(second)) << second.out;
  EXPECT_NE(second.out.find("0 kernels compiled"), std::string::npos) << second.out;

  // Where the plan comes from, with every candidate's measured time.
  Result plan = runCli("plan " + std::string(STITCH_SOURCE_DIR) +
                           "/examples/softmax.stitch --graph softmax --dim N=256 --backend cpu "
                           "--explain",
                       env);
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_NE(plan.out.find("# plan: autotuned: candidate "), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("#   candidate 1"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("measured median"), std::string::npos) << plan.out;
  // Without tuning on record (another size), the model's pick, and it says so.
  Result untuned = runCli("plan " + std::string(STITCH_SOURCE_DIR) +
                              "/examples/softmax.stitch --graph softmax --dim N=300 --backend cpu",
                          env);
  EXPECT_NE(untuned.out.find("# plan: the cost model's pick (no tuning entry"), std::string::npos)
      << untuned.out;

  // STITCH_DUMP=plan says it too, from the entry (and the dump's plan is what runs).
  TempDir dumps;
  // (Without --check, whose reference engine dumps its own plan under the same name.)
  const std::string unchecked = kArgs.substr(0, kArgs.find(" --check")) + " --dim N=256";
  Result dumped =
      runCli(unchecked, env + "STITCH_DUMP=plan STITCH_DUMP_DIR=" + dumps.path().string() + " ");
  ASSERT_EQ(dumped.code, 0) << dumped.out;
  EXPECT_TRUE(fromEntry(dumped)) << dumped.out;
  std::string text;
  for (const auto& e : fs::directory_iterator(dumps.path())) {
    std::ifstream f(e.path());
    text.assign((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  EXPECT_NE(text.find("# plan: autotuned: candidate "), std::string::npos) << text;
  EXPECT_NE(text.find("read the decision from the tuning entry"), std::string::npos) << text;
}

TEST(Autotune, ADamagedDecisionIsMeasuredAgainNotRun) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  TempDir dir;
  const std::string env = kTune + "STITCH_CACHE_DIR=" + dir.path().string() + " ";
  ASSERT_TRUE(measured(runCli(kArgs, env)));
  for (const fs::path& p : tunedEntries(dir.path())) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x5a');
  }
  Result again = runCli(kArgs, env);
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_TRUE(measured(again)) << again.out;
  EXPECT_NE(again.out.find("corrupt"), std::string::npos) << again.out;
  // A decision written under another fleet key is foreign: it fails verification, and is measured
  // again under this one.
  TempDir keyed;
  const std::string envA = kTune +
                           "STITCH_CACHE_KEY=key-a-0123456789abcdef0123456789ab STITCH_CACHE_DIR=" +
                           keyed.path().string() + " ";
  const std::string envB = kTune +
                           "STITCH_CACHE_KEY=key-b-0123456789abcdef0123456789ab STITCH_CACHE_DIR=" +
                           keyed.path().string() + " ";
  ASSERT_TRUE(measured(runCli(kArgs, envA)));
  Result foreign = runCli(kArgs, envB);
  ASSERT_EQ(foreign.code, 0) << foreign.out;
  EXPECT_TRUE(measured(foreign)) << foreign.out;
}

TEST(Autotune, ThreeProcessesSharingRedisTuneOnce) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  std::string why;
  std::unique_ptr<RedisServer> server = RedisServer::start(&why);
  if (!server) GTEST_SKIP() << "no redis-server for this test: " << why;
  TempDir a, b, c;
  int tuned = 0, reused = 0;
  for (const TempDir* d : {&a, &b, &c}) {
    // Disk caches of their own: three hosts of one machine kind, one server.
    Result r = runCli(kArgs, kFleetKeyEnv + "STITCH_AUTOTUNE=1 STITCH_AUTOTUNE_BUDGET_MS=50 " +
                                 "STITCH_REMOTE_CACHE=" + server->url() +
                                 " STITCH_CACHE_DIR=" + d->path().string());
    ASSERT_EQ(r.code, 0) << r.out;
    if (d == &a) {
      EXPECT_TRUE(measured(r)) << r.out;
      tuned += measured(r);
    } else {
      EXPECT_TRUE(fromEntry(r)) << r.out;
      EXPECT_NE(r.out.find("0 kernels compiled"), std::string::npos) << r.out;
      reused += fromEntry(r);
      // The decision came through the server and is now on this host's disk too.
      EXPECT_EQ(tunedEntries(d->path()).size(), 1u);
    }
  }
  EXPECT_EQ(tuned, 1);
  EXPECT_EQ(reused, 2);
}

TEST(Autotune, BadSettingsAreErrorsThatNameThem) {
  Result candidates = runCli(kArgs, "STITCH_AUTOTUNE=1 STITCH_AUTOTUNE_CANDIDATES=0");
  EXPECT_EQ(candidates.code, 2) << candidates.out;
  EXPECT_NE(candidates.out.find("STITCH_AUTOTUNE_CANDIDATES"), std::string::npos) << candidates.out;
  Result budget = runCli(kArgs, "STITCH_AUTOTUNE_BUDGET_MS=forever");
  EXPECT_EQ(budget.code, 2) << budget.out;
  EXPECT_NE(budget.out.find("STITCH_AUTOTUNE_BUDGET_MS"), std::string::npos) << budget.out;
  Result both = runCli(kArgs + " --plan-candidate 1", "STITCH_AUTOTUNE=1");
  EXPECT_EQ(both.code, 2) << both.out;
  EXPECT_NE(both.out.find("exclude each other"), std::string::npos) << both.out;
}
