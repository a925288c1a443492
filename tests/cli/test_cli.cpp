// The `stitch` binary end to end: every example runs and checks, and each kind of bad input exits
// with DESIGN.md's code and a located message.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "../common/cache_entry.h"
#include "../common/temp_dir.h"
#include "../common/unwritable_dir.h"
#include "run_cli.h"

namespace fs = std::filesystem;

namespace {

using stitch::clitest::haveCpuBackend;
using stitch::clitest::Result;
using stitch::clitest::runCli;

std::string writeTemp(const std::string& name, const std::string& text) {
  fs::path dir = fs::temp_directory_path() / "stitch_cli_test";
  fs::create_directories(dir);
  fs::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

TEST(Cli, EveryExampleChecksAgainstTheReference) {
  int seen = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(STITCH_SOURCE_DIR) / "examples")) {
    if (entry.path().extension() != ".stitch") continue;
    ++seen;
    Result r = runCli("run " + entry.path().string() + " --check");
    EXPECT_EQ(r.code, 0) << entry.path() << "\n" << r.out;
    EXPECT_NE(r.out.find("check "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("MISMATCH"), std::string::npos) << r.out;
  }
  EXPECT_GE(seen, 8);
}

// Regression: with two or more symbols bound, the plan's header and JSON named no bindings and
// gave null bytes for every tensor with a symbolic dim, though the plan used the sizes.
TEST(Cli, PlanShowsEveryBindingAndExactBytes) {
  std::string file = std::string(STITCH_SOURCE_DIR) + "/examples/attention_softmax.stitch";
  Result json = runCli("plan " + file +
                       " --graph attention_softmax --dim B=4 --dim S=96 "
                       "--dim H=12 --format json");
  ASSERT_EQ(json.code, 0) << json.out;
  EXPECT_NE(json.out.find(R"("bindings": {"B": 4, "H": 12, "S": 96})"), std::string::npos)
      << json.out;
  EXPECT_EQ(json.out.find("null"), std::string::npos) << json.out;
  // scores: bf16[4, 12, 96, 96] = 884,736 bytes.
  EXPECT_NE(json.out.find("884736"), std::string::npos) << json.out;
  Result text = runCli("plan " + file +
                       " --graph attention_softmax --dim B=4 --dim S=96 "
                       "--dim H=12");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("B=4"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("S=96"), std::string::npos) << text.out;
}

// A STITCH_* variable Stitch does not read is most likely a typo: warned once, naming it.
TEST(Cli, UnknownStitchVariablesAreWarnedAbout) {
  std::string file = std::string(STITCH_SOURCE_DIR) + "/examples/softmax.stitch";
  Result r = runCli("plan " + file + " --graph softmax", "STITCH_BACKNED=cpu STITCH_FUSOIN=off");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("unknown environment variables STITCH_BACKNED, STITCH_FUSOIN"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("STITCH_BACKEND"), std::string::npos) << r.out;
  size_t first = r.out.find("unknown environment variable");
  EXPECT_EQ(r.out.find("unknown environment variable", first + 1), std::string::npos) << r.out;
  Result quiet = runCli("plan " + file + " --graph softmax", "STITCH_FUSION=off");
  EXPECT_EQ(quiet.out.find("unknown environment variable"), std::string::npos) << quiet.out;
}

// Every subcommand honours STITCH_LOG_LEVEL, `plan` included, and rejects a bad value.
TEST(Cli, PlanHonoursTheLogLevel) {
  std::string file = std::string(STITCH_SOURCE_DIR) + "/examples/softmax.stitch";
  Result bad = runCli("plan " + file + " --graph softmax", "STITCH_LOG_LEVEL=loud");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("STITCH_LOG_LEVEL=loud"), std::string::npos) << bad.out;
  Result debug = runCli("plan " + file + " --graph softmax", "STITCH_LOG_LEVEL=debug");
  EXPECT_EQ(debug.code, 0) << debug.out;
  EXPECT_NE(debug.out.find("[stitch debug]"), std::string::npos) << debug.out;
  Result off = runCli("plan " + file + " --graph softmax", "STITCH_LOG_LEVEL=off");
  EXPECT_EQ(off.out.find("[stitch"), std::string::npos) << off.out;
}

TEST(Cli, EveryExampleOnTheCpuBackendChecksAgainstTheReference) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  for (const auto& entry : fs::directory_iterator(fs::path(STITCH_SOURCE_DIR) / "examples")) {
    if (entry.path().extension() != ".stitch") continue;
    for (const char* fusion : {"stitch", "off"}) {
      Result r = runCli("run " + entry.path().string() + " --backend cpu --check",
                        std::string("STITCH_FUSION=") + fusion);
      EXPECT_EQ(r.code, 0) << entry.path() << " " << fusion << "\n" << r.out;
      EXPECT_EQ(r.out.find("MISMATCH"), std::string::npos) << r.out;
    }
  }
}

// A runner-up plan runs and checks like the pick; its kernels are its own (layer norm's first
// runner-up cuts the row statistics from the normalization: two kernels).
TEST(Cli, RunsAPlanCandidateOnTheCpuBackend) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  std::string ln = std::string(STITCH_SOURCE_DIR) + "/examples/layer_norm.stitch";
  Result pick = runCli("run " + ln + " --graph layer_norm --backend cpu --check --dim N=64",
                       "STITCH_CACHE=0");
  ASSERT_EQ(pick.code, 0) << pick.out;
  EXPECT_NE(pick.out.find("(1 kernels compiled"), std::string::npos) << pick.out;
  Result other = runCli(
      "run " + ln + " --graph layer_norm --backend cpu --check --dim N=64 --plan-candidate 1",
      "STITCH_CACHE=0");
  ASSERT_EQ(other.code, 0) << other.out;
  EXPECT_NE(other.out.find("check y: ok"), std::string::npos) << other.out;
  EXPECT_NE(other.out.find("(2 kernels compiled"), std::string::npos) << other.out;
  EXPECT_EQ(runCli("demo --plan-candidate 1").code, 2);
}

TEST(Cli, DiskCacheServesASecondProcess) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  fs::path dir = fs::temp_directory_path() / "stitch_cli_cache_test";
  fs::remove_all(dir);
  std::string env = "STITCH_CACHE_DIR=" + dir.string();
  std::string ln = std::string(STITCH_SOURCE_DIR) + "/examples/layer_norm.stitch";
  // One graph: the file's two graphs compile to the same kernel (the second is a memory hit).
  ln += " --graph layer_norm";
  Result cold = runCli("run " + ln + " --backend cpu --dim N=8", env);
  ASSERT_EQ(cold.code, 0) << cold.out;
  EXPECT_NE(cold.out.find("kernels compiled, 0 loaded from the disk cache"), std::string::npos)
      << cold.out;
  EXPECT_EQ(cold.out.find(" 0 kernels compiled"), std::string::npos) << cold.out;
  Result warm = runCli("run " + ln + " --backend cpu --dim N=8", env);
  ASSERT_EQ(warm.code, 0) << warm.out;
  EXPECT_NE(warm.out.find("(0 kernels compiled"), std::string::npos) << warm.out;
  EXPECT_EQ(warm.out.find("0 loaded from the disk cache"), std::string::npos) << warm.out;
  // A damaged entry is detected and recompiled, not trusted.
  for (const auto& e : fs::directory_iterator(dir)) {
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x5a');
  }
  Result fixed = runCli("run " + ln + " --backend cpu --dim N=8 --check", env);
  EXPECT_EQ(fixed.code, 0) << fixed.out;
  EXPECT_EQ(fixed.out.find("(0 kernels compiled"), std::string::npos) << fixed.out;
  // STITCH_CACHE=0 leaves the directory alone.
  fs::path off = fs::temp_directory_path() / "stitch_cli_cache_off";
  fs::remove_all(off);
  Result r = runCli("run " + ln + " --backend cpu --dim N=8",
                    "STITCH_CACHE=0 STITCH_CACHE_DIR=" + off.string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_FALSE(fs::exists(off));
  EXPECT_EQ(runCli("run " + ln + " --backend cpu", "STITCH_CACHE=2").code, 2);
}

// `stitch cache stats|clear|prune` on a directory of files written by hand from the documented
// format: what stats counts, what prune and clear remove, and that nothing else is touched.
TEST(Cli, CacheStatsPruneAndClear) {
  fs::path dir = fs::temp_directory_path() / "stitch_cli_cache_maintenance";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string env = "STITCH_CACHE_DIR=" + dir.string() + " STITCH_CACHE_MAX_MB=2";
  stitch::testing::writeDirectoryKey(dir);  // this user's key, which the entries are tagged with
  const fs::path good = stitch::testing::writeCacheEntry(dir, "key", std::vector<uint8_t>(3000, 1));
  const fs::path bad = stitch::testing::writeCacheEntry(dir, "other", std::vector<uint8_t>(10, 2));
  fs::resize_file(bad, fs::file_size(bad) + 1);
  const fs::path stale = stitch::testing::writeCacheTemporary(dir, 1, 1, 50);
  stitch::testing::setFileAge(stale, 3600);
  const fs::path foreign = dir / "notes.txt";
  stitch::testing::writeBytes(foreign, {1, 2, 3});
  // Entries are a 56-byte header, the key, the payload: 3059 bytes and 71 + 1.
  ASSERT_EQ(fs::file_size(good), 3059u);

  Result stats = runCli("cache stats", env);
  ASSERT_EQ(stats.code, 0) << stats.out;
  EXPECT_NE(stats.out.find("directory: " + dir.string() + "\n"), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("entries: 2, 3.1 KiB (3131 bytes)"), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("temporary files: 1, 50 B"), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("limit (STITCH_CACHE_MAX_MB): 2.0 MiB (2097152 bytes), 0.1% used"),
            std::string::npos)
      << stats.out;

  Result prune = runCli("cache prune", env);
  ASSERT_EQ(prune.code, 0) << prune.out;
  EXPECT_NE(prune.out.find("removed 1 stale temporary files, 1 corrupt entries, 0 least recently "
                           "used entries; freed 122 B"),
            std::string::npos)
      << prune.out;
  EXPECT_TRUE(fs::exists(good));
  EXPECT_FALSE(fs::exists(bad));
  EXPECT_FALSE(fs::exists(stale));

  Result clear = runCli("cache clear", env);
  ASSERT_EQ(clear.code, 0) << clear.out;
  EXPECT_NE(clear.out.find("removed 1 files, 3.0 KiB (3059 bytes)"), std::string::npos)
      << clear.out;
  EXPECT_FALSE(fs::exists(good));
  EXPECT_TRUE(fs::exists(foreign));
  EXPECT_NE(runCli("cache stats", env).out.find("entries: 0, 0 B"), std::string::npos);
  fs::remove_all(dir);
}

// Entries the cpu backend wrote are intact for prune, counted by stats and removed by clear.
TEST(Cli, CacheCommandsSeeWhatRunsWrote) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  fs::path dir = fs::temp_directory_path() / "stitch_cli_cache_written";
  fs::remove_all(dir);
  const std::string env = "STITCH_CACHE_DIR=" + dir.string();
  std::string ln = std::string(STITCH_SOURCE_DIR) + "/examples/layer_norm.stitch";
  ASSERT_EQ(runCli("run " + ln + " --graph layer_norm --backend cpu --dim N=8", env).code, 0);
  Result stats = runCli("cache stats", env);
  ASSERT_EQ(stats.code, 0) << stats.out;
  EXPECT_EQ(stats.out.find("entries: 0,"), std::string::npos) << stats.out;
  Result prune = runCli("cache prune", env);
  EXPECT_NE(prune.out.find(" 0 corrupt entries"), std::string::npos) << prune.out;
  Result clear = runCli("cache clear", env);
  ASSERT_EQ(clear.code, 0) << clear.out;
  EXPECT_EQ(clear.out.find("removed 0 files"), std::string::npos) << clear.out;
  EXPECT_NE(runCli("cache stats", env).out.find("entries: 0, 0 B"), std::string::npos);
  fs::remove_all(dir);
}

// Issue 33: `stitch cache prune` on a directory it cannot remove files from said "removed 0" and
// exited 0. prune and clear say what they could not remove, and exit non-zero.
TEST(Cli, CachePruneAndClearFailOnADirectoryTheyCannotChange) {
  stitch::testing::TempDir tmp;
  const fs::path dir = tmp.path();
  const std::string env = "STITCH_CACHE_DIR=" + dir.string();
  stitch::testing::writeDirectoryKey(dir);
  const fs::path bad = stitch::testing::writeCacheEntry(dir, "other", std::vector<uint8_t>(10, 2));
  fs::resize_file(bad, fs::file_size(bad) + 1);  // corrupt: prune must remove it
  std::string why;
  auto locked = stitch::testing::UnwritableDir::make(dir, &why);
  if (!locked) GTEST_SKIP() << why;
  Result prune = runCli("cache prune", env);
  EXPECT_EQ(prune.code, 2) << prune.out;
  EXPECT_NE(prune.out.find("cannot prune " + dir.string() + ": 1 file(s) could not be removed"),
            std::string::npos)
      << prune.out;
  EXPECT_NE(prune.out.find(bad.string()), std::string::npos) << prune.out;
  Result clear = runCli("cache clear", env);
  EXPECT_EQ(clear.code, 2) << clear.out;
  EXPECT_NE(clear.out.find("cannot clear " + dir.string()), std::string::npos) << clear.out;
  EXPECT_EQ(clear.out.find("removed 0 files, 0 B"), std::string::npos) << clear.out;
  locked.reset();
  EXPECT_TRUE(fs::exists(bad));
}

// Issue 33: under a file-size limit smaller than an entry (`ulimit -f`), `stitch run` died of
// SIGXFSZ writing the cache and left a temporary file. The write fails with a warning, the run
// goes on and checks, and nothing is left behind.
TEST(Cli, AFileSizeLimitFailsTheCacheWriteNotTheRun) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  stitch::testing::TempDir tmp;
  const std::string ln = std::string(STITCH_SOURCE_DIR) + "/examples/layer_norm.stitch";
  // /bin/sh's `ulimit -f` counts 512-byte blocks: 1 KiB, less than any kernel's entry (its object
  // code alone is several KiB) and more than the key file (65 bytes).
  Result r = runCli("run " + ln + " --graph layer_norm --backend cpu --dim N=8 --check",
                    "ulimit -f 2; STITCH_CACHE_DIR=" + tmp.path().string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("check y: ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("File too large"), std::string::npos) << r.out;
  for (const auto& e : fs::directory_iterator(tmp.path()))
    EXPECT_FALSE(e.path().filename().string().starts_with(".tmp-"))
        << "a temporary file was left: " << e.path();
}

TEST(Cli, CacheMisuseExits2) {
  const std::string env =
      "STITCH_CACHE_DIR=" + (fs::temp_directory_path() / "stitch_cli_x").string();
  Result r = runCli("cache", env);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("stats, clear or prune"), std::string::npos) << r.out;
  r = runCli("cache frobnicate", env);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown cache command 'frobnicate'"), std::string::npos) << r.out;
  EXPECT_EQ(runCli("cache stats --all", env).code, 2);
  r = runCli("cache stats", env + " STITCH_CACHE=0");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("STITCH_CACHE=0"), std::string::npos) << r.out;
  r = runCli("cache prune", env + " STITCH_CACHE_MAX_MB=lots");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("STITCH_CACHE_MAX_MB=lots"), std::string::npos) << r.out;
}

TEST(Cli, RunPrintsSummariesAndTimes) {
  std::string ex = std::string(STITCH_SOURCE_DIR) + "/examples/softmax.stitch";
  Result r = runCli("run " + ex + " --graph softmax --dim N=4 --iters 3 --seed 7");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("graph softmax: 5 ops"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("y: f32[4, 1024]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("time: median"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("over 3 runs"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("note: symbolic dim"), std::string::npos) << r.out;
  // Inputs are a function of the seed: same seed, same summary; another seed, another one.
  Result again = runCli("run " + ex + " --graph softmax --dim N=4 --seed 7");
  Result other = runCli("run " + ex + " --graph softmax --dim N=4 --seed 8");
  auto line = [](const std::string& s) {
    size_t at = s.find("y: f32");
    return s.substr(at, s.find('\n', at) - at);
  };
  EXPECT_EQ(line(again.out), line(r.out));
  EXPECT_NE(line(other.out), line(again.out));
  // Defaults for unbound symbols are announced.
  Result d = runCli("run " + ex + " --graph softmax");
  EXPECT_NE(d.out.find("note: symbolic dim N = 16"), std::string::npos) << d.out;
}

TEST(Cli, MalformedFilesExit2WithLocation) {
  std::string f = writeTemp("bad.stitch", "graph g(x: f32[4]) {\n  y = expp(x)\n  return y\n}\n");
  Result r = runCli("run " + f);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(r.out.rfind(f + ":2:7: error: ", 0), 0u) << r.out;
  std::string t =
      writeTemp("type.stitch", "graph g(x: f32[4], y: f16[4]) {\n  z = add(x, y)\n  return z\n}\n");
  r = runCli("run " + t);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(t + ":2:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("f32 and f16"), std::string::npos) << r.out;
}

// An index out of range is the data's error on every backend: exit 2 and the message naming
// the graph, the op, the index and the size (never a clamped answer).
TEST(Cli, AnIndexOutOfRangeExits2NamingIt) {
  std::string f = writeTemp("bad_index.stitch",
                            "graph bad(x: f32[N, 5], i: i64[N, 3]) {\n"
                            "  j = add(i, 2)\n"
                            "  y = gather(x, j, axis=1)\n"
                            "  return y\n"
                            "}\n"
                            "graph label(logits: f32[N, 10], labels: i64[N, 1]) {\n"
                            "  t = add(labels, 10)\n"
                            "  c = check_index(t, size=[10])\n"
                            "  cls = iota(shape=[N, 10], axis=1, dtype=i64)\n"
                            "  hit = eq(cls, c)\n"
                            "  picked = select(hit, logits, 0)\n"
                            "  nll = reduce_sum(picked, axes=[1])\n"
                            "  return nll\n"
                            "}\n");
  for (const char* backend : {"reference", "cpu"}) {
    SCOPED_TRACE(backend);
    Result r = runCli("run " + f + " --graph bad --dim N=4 --check --backend " + backend,
                      "STITCH_CACHE=0");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("stitch: error: graph 'bad': gather 'y' (axis 1): index -2 is out of "
                         "bounds for size 5"),
              std::string::npos)
        << r.out;
    r = runCli("run " + f + " --graph label --dim N=8 --backend " + backend, "STITCH_CACHE=0");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("check_index 'c': index "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" is out of bounds for size 10"), std::string::npos) << r.out;
  }
}

TEST(Cli, BadInvocationsExitWithDesignCodes) {
  std::string ex = std::string(STITCH_SOURCE_DIR) + "/examples/softmax.stitch";
  EXPECT_EQ(runCli("").code, 2);
  EXPECT_EQ(runCli("frobnicate").code, 2);
  EXPECT_EQ(runCli("run").code, 2);
  EXPECT_EQ(runCli("run /nonexistent.stitch").code, 2);
  Result r = runCli("run " + ex + " --bogus");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("unknown option '--bogus'"), std::string::npos) << r.out;
  r = runCli("run " + ex + " --backend tpu");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("valid backends"), std::string::npos) << r.out;
  r = runCli("run " + ex + " --backend cuda");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("unavailable"), std::string::npos) << r.out;
  EXPECT_EQ(runCli("run " + ex + " --dim N").code, 2);
  EXPECT_EQ(runCli("run " + ex + " --dim N=-3").code, 2);
  r = runCli("run " + ex + " --dim M=3");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("no selected graph has a symbolic dim M"), std::string::npos) << r.out;
  r = runCli("run " + ex + " --graph nope");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("softmax_composite"), std::string::npos) << r.out;  // lists the graphs
  EXPECT_EQ(runCli("run " + ex + " --iters 0").code, 2);
  r = runCli("run " + ex, "STITCH_LOG_LEVEL=chatty");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("STITCH_LOG_LEVEL=chatty"), std::string::npos) << r.out;
  r = runCli("run " + ex, "STITCH_BACKEND=cuda");
  EXPECT_EQ(r.code, 3) << r.out;
}

TEST(Cli, PlanExplainsEveryExample) {
  for (const auto& entry : fs::directory_iterator(fs::path(STITCH_SOURCE_DIR) / "examples")) {
    if (entry.path().extension() != ".stitch") continue;
    for (const char* format : {"text", "json", "dot"}) {
      Result r = runCli("plan " + entry.path().string() + " --format " + format);
      EXPECT_EQ(r.code, 0) << entry.path() << " " << format << "\n" << r.out;
    }
  }
}

TEST(Cli, PlanShowsKernelsSchemesAndTotals) {
  std::string ln = std::string(STITCH_SOURCE_DIR) + "/examples/layer_norm.stitch";
  Result r = runCli("plan " + ln + " --graph layer_norm --dim N=4096");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("mode stitch, target sm_90, 1 kernel"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("row_reduce warp-per-row"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[mean: warp]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unfused: 9 kernels"), std::string::npos) << r.out;
  r = runCli("plan " + ln + " --graph layer_norm --dim N=4096 --fusion basic");
  EXPECT_NE(r.out.find("cut edges:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("basic mode"), std::string::npos) << r.out;
  r = runCli("plan " + ln + " --graph layer_norm --dim N=4096 --target gfx90a --format json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("{", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\"kernels\""), std::string::npos);
  EXPECT_NE(r.out.find("\"ops\""), std::string::npos);
  EXPECT_NE(r.out.find("gfx90a"), std::string::npos);
  r = runCli("plan " + ln + " --graph layer_norm --format dot", "STITCH_FUSION=off");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("digraph"), std::string::npos);
  // The planner's runner-up plans: explained, run and checked like its pick.
  r = runCli("plan " + ln + " --graph layer_norm --dim N=4096 --plan-candidate 1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(candidate 1 of the search: not the plan it picks)"), std::string::npos)
      << r.out;
  r = runCli("plan " + ln + " --graph layer_norm --dim N=4096 --plan-candidate 1 --format json");
  EXPECT_NE(r.out.find("\"candidate\": 1"), std::string::npos) << r.out;
  EXPECT_EQ(runCli("plan " + ln + " --graph layer_norm --plan-candidate 65").code, 2);
  EXPECT_EQ(runCli("plan " + ln + " --graph layer_norm --plan-candidate x").code, 2);
  r = runCli("plan " + ln + " --graph layer_norm --plan-candidate 1", "STITCH_FUSION=off");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no candidate 1"), std::string::npos) << r.out;
  EXPECT_EQ(runCli("plan " + ln + " --target sm_75").code, 2);
  EXPECT_EQ(runCli("plan " + ln + " --format yaml").code, 2);
  EXPECT_EQ(runCli("plan " + ln + " --fusion max").code, 2);
  EXPECT_EQ(runCli("plan " + ln, "STITCH_FUSION=max").code, 2);
  EXPECT_EQ(runCli("plan " + ln + " --check").code, 2);  // an option of run, not plan
  EXPECT_EQ(runCli("run " + ln + " --target host").code, 2);
}

TEST(Cli, DumpPlanWritesOnePlanPerSignature) {
  fs::path dir = fs::temp_directory_path() / "stitch_dump_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string sm = std::string(STITCH_SOURCE_DIR) + "/examples/softmax.stitch";
  Result r = runCli("run " + sm + " --graph softmax --dim N=4 --iters 2",
                    "STITCH_DUMP=plan STITCH_DUMP_DIR=" + dir.string());
  ASSERT_EQ(r.code, 0) << r.out;
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++files;
    std::ifstream f(e.path());
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("# signature f32[4,1024];"), std::string::npos) << text;
    EXPECT_NE(text.find("kernel 0"), std::string::npos) << text;
  }
  EXPECT_EQ(files, 1);  // three runs of one signature: planned once
  EXPECT_EQ(runCli("run " + sm, "STITCH_DUMP=ptx").code, 2);
}

TEST(Cli, DumpLlvmWritesEachKernelsIr) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  fs::path dir = fs::temp_directory_path() / "stitch_dump_llvm_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string ln = std::string(STITCH_SOURCE_DIR) + "/examples/layer_norm.stitch";
  Result r = runCli("run " + ln + " --graph layer_norm --dim N=4 --backend cpu",
                    "STITCH_DUMP=plan,llvm,source STITCH_DUMP_DIR=" + dir.string());
  ASSERT_EQ(r.code, 0) << r.out;
  int plans = 0, ir = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    std::ifstream f(e.path());
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (name.ends_with(".plan.txt")) ++plans;
    if (name.ends_with(".kernel0.ll")) {
      ++ir;
      // The IR the backend compiles: each phase's function is named after the kernel's cache
      // key ("stitch_<16 hex digits>_<phase>").
      EXPECT_TRUE(std::regex_search(text, std::regex("define void @stitch_[0-9a-f]{16}_0\\(")))
          << text;
    }
  }
  EXPECT_EQ(plans, 1);
  EXPECT_EQ(ir, 1);  // "source" is the GPU backends' CUDA/HIP: nothing on cpu
}

TEST(Cli, VersionAndHelp) {
  Result r = runCli("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("stitch 0.1.0"), std::string::npos);
  r = runCli("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("stitch run FILE"), std::string::npos);
}

TEST(Cli, DemoRuns) {
  Result r = runCli("demo --iters 1");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("graph bias_gelu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("graph residual_layer_norm"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("graph scaled_masked_softmax"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("demo: ok"), std::string::npos) << r.out;
}

// Sizes past the limits (runtime/support/checked.h) and shapes larger than the machine's memory are
// invalid input (exit 2) with a message naming the tensor, on every backend and in `plan`; before,
// they ran as "(empty)", returned 0, crashed, or died of std::bad_alloc (exit 5).
bool has(const Result& r, const std::string& text) { return r.out.find(text) != std::string::npos; }

TEST(Cli, OverflowingStaticShapesAreRejectedWhereDeclared) {
  std::string f = writeTemp(
      "huge2d.stitch", "graph g(x: f32[4294967296, 4294967296]) {\n  y = neg(x)\n  return y\n}\n");
  for (const char* backend : {"reference", "cpu"}) {
    if (backend == std::string("cpu") && !haveCpuBackend()) continue;
    Result r = runCli("run " + f + " --backend " + backend);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_TRUE(has(r, f + ":1:9: error: input 'x' has type f32[4294967296, 4294967296]")) << r.out;
    EXPECT_FALSE(has(r, "(empty)")) << r.out;
  }
  // A reduction over a 2^62 axis returned 0; an f16 dim of 2^63-1 broke `plan`.
  std::string red = writeTemp(
      "huge_axis.stitch",
      "graph g(x: f32[4611686018427387904]) {\n  y = reduce_sum(x, axes=[0])\n  return y\n}\n");
  Result r = runCli("run " + red + " --backend reference");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "input 'x' has type f32[4611686018427387904]")) << r.out;
  std::string half = writeTemp(
      "huge_f16.stitch",
      "graph g(x: f16[9223372036854775807]) {\n  y = reduce_sum(x, axes=[0])\n  return y\n}\n");
  r = runCli("plan " + half);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "input 'x' has type f16[9223372036854775807]")) << r.out;
}

TEST(Cli, OverflowingSymbolicDimsAreRejectedWhenBound) {
  std::string ex = std::string(STITCH_SOURCE_DIR) + "/examples/softmax.stitch";
  for (const char* backend : {"reference", "cpu"}) {
    if (backend == std::string("cpu") && !haveCpuBackend()) continue;
    Result r =
        runCli("run " + ex + " --graph softmax --dim N=4611686018427387904 --backend " + backend);
    EXPECT_EQ(r.code, 2) << r.out;  // was a crash in the JIT-compiled kernel
    EXPECT_TRUE(has(r, "input 'x' f32[4611686018427387904, 1024]")) << r.out;
    EXPECT_TRUE(has(r, "2^62")) << r.out;
  }
  std::string half = writeTemp(
      "sym_f16.stitch", "graph g(x: f16[N]) {\n  y = reduce_sum(x, axes=[0])\n  return y\n}\n");
  Result r = runCli("plan " + half + " --dim N=9223372036854775807");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "N=9223372036854775807, input 'x' (f16[N])")) << r.out;
  // An intermediate past the limit, from inputs within it.
  std::string outer = writeTemp("outer.stitch",
                                "graph g(a: f32[N, 1], b: f32[M]) {\n  z = mul(a, b)\n"
                                "  s = reduce_sum(z, axes=[0, 1])\n  return s\n}\n");
  r = runCli("plan " + outer + " --dim N=4294967296 --dim M=4294967296");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r, "value 'z' (f32[N, M])")) << r.out;
}

TEST(Cli, ShapesLargerThanMemoryNameTheTensorAndItsSize) {
  // 4 TiB fits int64 easily but no test machine's memory.
  std::string f = writeTemp("tib.stitch",
                            "graph g(x: f32[1099511627776]) {\n  y = neg(x)\n"
                            "  return y\n}\n");
  for (const char* backend : {"reference", "cpu"}) {
    if (backend == std::string("cpu") && !haveCpuBackend()) continue;
    Result r = runCli("run " + f + " --backend " + backend);
    EXPECT_EQ(r.code, 2) << r.out;  // was "internal error: std::bad_alloc", exit 5
    EXPECT_TRUE(has(r,
                    "input 'x' f32[1099511627776] needs 4.00 TiB (4398046511104 bytes), more "
                    "than this machine's memory"))
        << r.out;
  }
}

}  // namespace
