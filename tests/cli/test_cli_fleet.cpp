// Processes that share compiled work (README, "A fleet shares compiled kernels"): a restarted
// process runs from its disk cache with no planning and no compiling, and processes with disk
// caches of their own that share one Redis server (a real redis-server of the test's own on a
// loopback port, tests/common/redis_server.h) compile each kernel once in all. Each process is
// the `stitch` command line; its first-run line says what it compiled, loaded and planned.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "../common/redis_server.h"
#include "../common/temp_dir.h"
#include "run_cli.h"

namespace fs = std::filesystem;
using stitch::testing::RedisServer;
using stitch::testing::TempDir;

namespace {

using stitch::clitest::Result;
using stitch::clitest::runCli;

// What the first-run lines of one `stitch run` say, summed over its graphs.
struct FirstRuns {
  int graphs = 0;
  int compiled = 0, fromDisk = 0, fromRemote = 0;
  int warm = 0;  // graphs whose plan came from the program cache
};

FirstRuns firstRuns(const std::string& out) {
  static const std::regex line(
      R"(first run: [0-9.e+-]+ ms \((\d+) kernels compiled, (\d+) loaded from the disk cache, )"
      R"((\d+) from the remote cache; plan: ([^)]*)\))");
  FirstRuns f;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it) {
    ++f.graphs;
    f.compiled += std::stoi((*it)[1]);
    f.fromDisk += std::stoi((*it)[2]);
    f.fromRemote += std::stoi((*it)[3]);
    f.warm += (*it)[4].str().starts_with("the program cache") ? 1 : 0;
  }
  return f;
}

bool haveCpuBackend() {
  static const bool have =
      runCli("run " + std::string(STITCH_SOURCE_DIR) + "/examples/softmax.stitch --backend cpu",
             "STITCH_CACHE=0")
          .code == 0;
  return have;
}

// The demo's graph set and a transformer block: several programs, kernels shared among them.
const std::string kGraphs = std::string(STITCH_SOURCE_DIR) + "/examples/transformer_block.stitch";
const std::string kArgs = "run " + kGraphs + " --backend cpu --check --dim B=2 --dim S=32";

}  // namespace

TEST(Fleet, ARestartedProcessNeitherPlansNorCompiles) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  TempDir dir;
  const std::string env = "STITCH_REMOTE_CACHE= STITCH_CACHE_DIR=" + dir.path().string();
  Result cold = runCli(kArgs, env);
  ASSERT_EQ(cold.code, 0) << cold.out;
  FirstRuns c = firstRuns(cold.out);
  ASSERT_EQ(c.graphs, 1) << cold.out;
  EXPECT_GT(c.compiled, 0) << cold.out;
  EXPECT_EQ(c.warm, 0) << cold.out;
  Result warm = runCli(kArgs, env);
  ASSERT_EQ(warm.code, 0) << warm.out;  // --check: the warm start matches the reference
  FirstRuns w = firstRuns(warm.out);
  EXPECT_EQ(w.compiled, 0) << warm.out;
  EXPECT_EQ(w.warm, 1) << warm.out;
  // Every kernel the cold process compiled, loaded: the program's own entry is not a kernel.
  EXPECT_EQ(w.fromDisk, c.compiled) << warm.out;
  EXPECT_EQ(w.fromRemote, 0) << warm.out;
  // Another size is another signature: planned (its class's plan or a search), not warm.
  Result other = runCli(kArgs + " --dim B=3", env);
  ASSERT_EQ(other.code, 0) << other.out;
  EXPECT_EQ(firstRuns(other.out).warm, 0) << other.out;
  // A damaged program entry is not trusted: every entry's last byte flipped, the run still checks.
  for (const auto& e : fs::directory_iterator(dir.path())) {
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x5a');
  }
  Result fixed = runCli(kArgs, env);
  ASSERT_EQ(fixed.code, 0) << fixed.out;
  EXPECT_EQ(firstRuns(fixed.out).warm, 0) << fixed.out;
  EXPECT_NE(fixed.out.find("corrupt"), std::string::npos) << fixed.out;
}

TEST(Fleet, ThreeProcessesSharingRedisCompileEachKernelOnce) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  std::string why;
  std::unique_ptr<RedisServer> server = RedisServer::start(&why);
  if (!server) GTEST_SKIP() << "no redis-server for this test: " << why;
  // The demo's graphs: kernels of several programs, some shared between them.
  const std::string demo = std::string(STITCH_SOURCE_DIR) + "/tools/demo.stitch";
  const std::string args = "run " + demo + " --backend cpu --check --dim T=64 --dim B=2 --dim S=32";
  TempDir a, b, c;
  int total = 0, first = 0;
  for (const TempDir* d : {&a, &b, &c}) {
    Result r = runCli(
        args, "STITCH_REMOTE_CACHE=" + server->url() + " STITCH_CACHE_DIR=" + d->path().string());
    ASSERT_EQ(r.code, 0) << r.out;
    FirstRuns f = firstRuns(r.out);
    ASSERT_GE(f.graphs, 3) << r.out;
    if (d == &a) {
      first = f.compiled;
      EXPECT_EQ(f.fromRemote, 0) << r.out;
    } else {
      // Separate disks: everything came from the server, plans included.
      EXPECT_EQ(f.compiled, 0) << r.out;
      EXPECT_EQ(f.fromRemote, first) << r.out;  // kernels: program entries are not counted
      EXPECT_EQ(f.fromDisk, 0) << r.out;
      EXPECT_EQ(f.warm, f.graphs) << r.out;
    }
    total += f.compiled;
  }
  EXPECT_GT(first, 0);
  EXPECT_EQ(total, first) << "each kernel compiled once across the three processes";
}

TEST(Fleet, ADeadServerFailsNoRun) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  std::string why;
  std::unique_ptr<RedisServer> server = RedisServer::start(&why);
  if (!server) GTEST_SKIP() << "no redis-server for this test: " << why;
  const std::string url = server->url();
  server->kill();  // refused connections from here on
  TempDir dir;
  Result r =
      runCli(kArgs, "STITCH_REMOTE_CACHE=" + url + " STITCH_CACHE_DIR=" + dir.path().string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_GT(firstRuns(r.out).compiled, 0) << r.out;
  // One warning for the outage, not one per lookup.
  size_t warnings = 0;
  for (size_t at = r.out.find("remote cache"); at != std::string::npos;
       at = r.out.find("remote cache", at + 1))
    warnings += r.out.compare(at, 14, "remote cache r") == 0 ? 1 : 0;
  EXPECT_EQ(warnings, 1u) << r.out;
  // A malformed URL is an error that names it.
  Result bad = runCli(kArgs, "STITCH_REMOTE_CACHE=redis://host:notaport");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("STITCH_REMOTE_CACHE=redis://host:notaport"), std::string::npos)
      << bad.out;
}
