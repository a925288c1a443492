// Processes that share compiled work (README, "A fleet shares compiled kernels"): a restarted
// process runs from its disk cache with no planning and no compiling, and processes with disk
// caches of their own that share one Redis server (a real redis-server of the test's own on a
// loopback port, tests/common/redis_server.h) compile each kernel once in all. Each process is
// the `stitch` command line; its first-run line says what it compiled, loaded and planned. And
// what the fleet must survive (issue 33): forged entries, a remote layer without a key, a server
// that trickles its replies.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "../common/cache_entry.h"
#include "../common/redis_server.h"
#include "../common/temp_dir.h"
#include "../common/trickling_server.h"
#include "run_cli.h"

namespace fs = std::filesystem;
using stitch::testing::RedisServer;
using stitch::testing::TempDir;
using stitch::testing::TricklingServer;

namespace {

using stitch::clitest::haveCpuBackend;
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

// The demo's graph set and a transformer block: several programs, kernels shared among them.
const std::string kGraphs = std::string(STITCH_SOURCE_DIR) + "/examples/transformer_block.stitch";
const std::string kArgs = "run " + kGraphs + " --backend cpu --check --dim B=2 --dim S=32";

// The fleet's key, as every process sharing a server is given it.
const std::string kFleetKeyEnv = "STITCH_CACHE_KEY=the-fleet-s-key-0123456789abcdef0123 ";

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
    Result r = runCli(args, kFleetKeyEnv + "STITCH_REMOTE_CACHE=" + server->url() +
                                " STITCH_CACHE_DIR=" + d->path().string());
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
  Result r = runCli(kArgs, kFleetKeyEnv + "STITCH_REMOTE_CACHE=" + url +
                               " STITCH_CACHE_DIR=" + dir.path().string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_GT(firstRuns(r.out).compiled, 0) << r.out;
  // One warning for the outage, not one per lookup.
  size_t warnings = 0;
  for (size_t at = r.out.find("remote cache"); at != std::string::npos;
       at = r.out.find("remote cache", at + 1))
    warnings += r.out.compare(at, 14, "remote cache r") == 0 ? 1 : 0;
  EXPECT_EQ(warnings, 1u) << r.out;
  // A malformed URL is an error that names it.
  Result bad = runCli(kArgs, kFleetKeyEnv + "STITCH_REMOTE_CACHE=redis://host:notaport");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("STITCH_REMOTE_CACHE=redis://host:notaport"), std::string::npos)
      << bad.out;
}

namespace {

// A cache entry file, read as the format of its header says (runtime/kernel_cache.h): format 3
// has a 56-byte header ending in the HMAC tag, format 2 a 32-byte one ending in an FNV-1a
// checksum of the payload.
struct EntryFile {
  std::vector<uint8_t> bytes;
  uint32_t version = 0;
  size_t header = 0, keyBytes = 0;

  explicit EntryFile(const fs::path& p) : EntryFile(stitch::testing::readBytes(p)) {}
  explicit EntryFile(std::vector<uint8_t> b) : bytes(std::move(b)) {
    auto le = [&](size_t at, int n) {
      uint64_t v = 0;
      for (int i = 0; i < n; ++i) v |= uint64_t{bytes.at(at + i)} << (8 * i);
      return v;
    };
    version = static_cast<uint32_t>(le(8, 4));
    keyBytes = le(12, 4);
    header = version == 2 ? 32 : 56;
  }
  std::string key() const {
    return std::string(bytes.begin() + header, bytes.begin() + header + keyBytes);
  }
  std::vector<uint8_t> payload() const {
    return std::vector<uint8_t>(bytes.begin() + header + keyBytes, bytes.end());
  }
  bool isProgram() const {
    return key().find(std::string("entry\x07\0\0\0\0\0\0\0program", 20)) != std::string::npos;
  }

  // This entry with another payload, as one who can write the cache but has no key makes it:
  // every check that needs no key redone (the payload size; in format 2 the checksum, which was
  // all the old format had), the header otherwise as it was.
  std::vector<uint8_t> forged(const std::vector<uint8_t>& payload) const {
    std::vector<uint8_t> out(bytes.begin(), bytes.begin() + header + keyBytes);
    for (int i = 0; i < 8; ++i) out[16 + i] = static_cast<uint8_t>(payload.size() >> (8 * i));
    if (version == 2) {
      const uint64_t sum = stitch::testing::fnv1a64Of(payload.data(), payload.size());
      for (int i = 0; i < 8; ++i) out[24 + i] = static_cast<uint8_t>(sum >> (8 * i));
    }
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
  }
};

std::vector<uint8_t> bytesOf(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

// The names of the values a server holds (KEYS *, read from its RESP array of bulk strings).
std::vector<std::string> serverKeys(const RedisServer& server) {
  const std::string reply = server.command({"KEYS", "*"});
  std::vector<std::string> keys;
  for (size_t at = reply.find("\r\n$"); at != std::string::npos; at = reply.find("\r\n$", at + 1)) {
    const size_t eol = reply.find("\r\n", at + 2);
    const size_t n = std::stoul(reply.substr(at + 3, eol - at - 3));
    keys.push_back(reply.substr(eol + 2, n));
  }
  return keys;
}

std::vector<fs::path> programEntries(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".stitchk" && EntryFile(e.path()).isProgram())
      out.push_back(e.path());
  return out;
}

}  // namespace

// Issue 33: a program entry whose payload was replaced (here by the artifact of another input
// signature of the same graph, a real artifact whose sizes are wrong for this one) used to run:
// failed runs (exit 4 or 5) or wrong answers. It is a miss, rebuilt (planned again) and
// overwritten; the run checks against the reference.
TEST(Fleet, AForgedProgramEntryIsRebuiltNeverRun) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  TempDir dir;
  const std::string env = "STITCH_REMOTE_CACHE= STITCH_CACHE_DIR=" + dir.path().string();
  const std::string small = kArgs, large = kArgs + " --dim B=7 --dim S=48";
  ASSERT_EQ(runCli(small, env).code, 0);
  const std::vector<fs::path> before = programEntries(dir.path());
  ASSERT_EQ(before.size(), 1u);
  ASSERT_EQ(runCli(large, env).code, 0);
  std::vector<fs::path> after = programEntries(dir.path());
  ASSERT_EQ(after.size(), 2u);
  const fs::path victim = before[0];
  const fs::path donor = after[0] == victim ? after[1] : after[0];
  stitch::testing::writeBytes(victim, EntryFile(victim).forged(EntryFile(donor).payload()));

  Result forged = runCli(small, env);
  EXPECT_EQ(forged.code, 0) << forged.out;                 // --check: right answers
  EXPECT_EQ(firstRuns(forged.out).warm, 0) << forged.out;  // planned again, not the forgery
  EXPECT_NE(forged.out.find("ignoring corrupt entry " + victim.string()), std::string::npos)
      << forged.out;
  // Overwritten with a good entry: the next process starts warm from it.
  Result again = runCli(small, env);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(firstRuns(again.out).warm, 1) << again.out;
  EXPECT_EQ(again.out.find("corrupt"), std::string::npos) << again.out;
}

// The remote layer needs the fleet key: without it, the configuration is refused (exit 2) with a
// message naming both variables that give it; with it, the layer works (the tests above).
TEST(Fleet, ARemoteLayerWithoutAFleetKeyIsRefused) {
  Result r = runCli(kArgs,
                    "STITCH_CACHE_KEY= STITCH_CACHE_KEY_FILE= "
                    "STITCH_REMOTE_CACHE=redis://127.0.0.1:1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("STITCH_REMOTE_CACHE=redis://127.0.0.1:1 needs a fleet key"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("STITCH_CACHE_KEY_FILE"), std::string::npos) << r.out;
  Result shortKey =
      runCli(kArgs, "STITCH_CACHE_KEY=tooshort STITCH_REMOTE_CACHE=redis://127.0.0.1:1");
  EXPECT_EQ(shortKey.code, 2) << shortKey.out;
  EXPECT_NE(shortKey.out.find("STITCH_CACHE_KEY is not valid: 8 bytes"), std::string::npos)
      << shortKey.out;
  EXPECT_EQ(shortKey.out.find("tooshort"), std::string::npos) << shortKey.out;
}

// Issue 33: a server that sends its reply one byte per 100 ms held `stitch run` for good (still
// waiting after 30 s). The run costs about one timeout more than a run without the layer, says
// "timed out" once, and checks.
TEST(Fleet, ATricklingServerCostsAtMostTheTimeout) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  TricklingServer server;
  ASSERT_TRUE(server.ok());
  TempDir dir;
  const std::string args = "run " + std::string(STITCH_SOURCE_DIR) +
                           "/examples/layer_norm.stitch --graph layer_norm --backend cpu "
                           "--dim N=8 --check";
  using Clock = std::chrono::steady_clock;
  // The same cold run with no remote layer, for what the layer costs.
  TempDir plainDir;
  const auto tPlain = Clock::now();
  ASSERT_EQ(runCli(args, "STITCH_REMOTE_CACHE= STITCH_CACHE_DIR=" + plainDir.path().string()).code,
            0);
  const double plain = std::chrono::duration<double>(Clock::now() - tPlain).count();
  const auto t0 = Clock::now();
  // `timeout` ends a run that hangs, so that a regression fails this test instead of hanging it.
  Result r = runCli(args, kFleetKeyEnv + "STITCH_REMOTE_CACHE=" + server.url() +
                              " STITCH_REMOTE_CACHE_TIMEOUT_MS=200 STITCH_CACHE_DIR=" +
                              dir.path().string() + " timeout 60");
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf(
      "trickling server: `stitch run` took %.2f s, %.2f s without the layer (timeout "
      "200 ms)\n",
      seconds, plain);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("timed out after 200 ms"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Resource temporarily unavailable"), std::string::npos) << r.out;
  size_t warnings = 0;
  for (size_t at = r.out.find("remote cache r"); at != std::string::npos;
       at = r.out.find("remote cache r", at + 1))
    ++warnings;
  EXPECT_EQ(warnings, 1u) << r.out;
  // One timeout more, and slack for a loaded machine; the regression waited for good.
  EXPECT_LT(seconds, plain + 2.0) << r.out;
  EXPECT_EQ(server.connections(), 1);
}

// Issue 33: one forged Redis value spread to every machine's disk cache, and ran there. A program
// entry's value replaced on the server (the artifact of another signature, its checksum redone
// where the format had one) is a miss for the next machine: planned again, right answers, and its
// disk never holds the forged bytes; the server's value is overwritten with a good one.
TEST(Fleet, AForgedRedisValueIsRebuiltAndReachesNoDisk) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  std::string why;
  std::unique_ptr<RedisServer> server = RedisServer::start(&why);
  if (!server) GTEST_SKIP() << "no redis-server for this test: " << why;
  const std::string remote = kFleetKeyEnv + "STITCH_REMOTE_CACHE=" + server->url();
  const std::string small = kArgs, large = kArgs + " --dim B=7 --dim S=48";
  TempDir first, second;
  ASSERT_EQ(runCli(small, remote + " STITCH_CACHE_DIR=" + first.path().string()).code, 0);
  std::string victim;
  for (const std::string& k : serverKeys(*server)) {
    bool found = false;
    if (EntryFile(bytesOf(server->get(k, &found))).isProgram()) victim = k;
  }
  ASSERT_FALSE(victim.empty()) << "no program entry on the server";
  ASSERT_EQ(runCli(large, remote + " STITCH_CACHE_DIR=" + first.path().string()).code, 0);
  std::string donor;
  for (const std::string& k : serverKeys(*server)) {
    bool found = false;
    if (k != victim && EntryFile(bytesOf(server->get(k, &found))).isProgram()) donor = k;
  }
  ASSERT_FALSE(donor.empty());
  bool found = false;
  const EntryFile good(bytesOf(server->get(victim, &found)));
  const std::vector<uint8_t> forgedPayload =
      EntryFile(bytesOf(server->get(donor, &found))).payload();
  const std::vector<uint8_t> forged = good.forged(forgedPayload);
  ASSERT_TRUE(server->set(victim, std::string(forged.begin(), forged.end())));

  Result r = runCli(small, remote + " STITCH_CACHE_DIR=" + second.path().string());
  EXPECT_EQ(r.code, 0) << r.out;  // --check: right answers
  EXPECT_EQ(firstRuns(r.out).warm, 0) << r.out;
  EXPECT_NE(r.out.find("ignoring entry " + victim), std::string::npos) << r.out;
  // No file of the second machine's disk holds the forged payload.
  for (const auto& e : fs::directory_iterator(second.path())) {
    if (e.path().extension() == ".stitchk") {
      EXPECT_NE(EntryFile(e.path()).payload(), forgedPayload) << e.path();
    }
  }
  // The server holds a good value again: a third machine starts warm from it.
  TempDir third;
  Result warm = runCli(small, remote + " STITCH_CACHE_DIR=" + third.path().string());
  EXPECT_EQ(warm.code, 0) << warm.out;
  EXPECT_EQ(firstRuns(warm.out).warm, 1) << warm.out;
}

// Issue 33: a server answering NOAUTH (it requires a password none was given) got one warning per
// GET and SET, and was never skipped. An error reply is a failure of the layer: one warning.
TEST(Fleet, AServerAnsweringNoauthIsOneWarning) {
  if (!haveCpuBackend()) GTEST_SKIP() << "this build has no cpu backend (STITCH_ENABLE_LLVM=OFF)";
  std::string why;
  std::unique_ptr<RedisServer> server = RedisServer::start(&why);
  if (!server) GTEST_SKIP() << "no redis-server for this test: " << why;
  ASSERT_EQ(server->command({"CONFIG", "SET", "requirepass", "pw"}).rfind("+OK", 0), 0u);
  TempDir dir;
  Result r = runCli(kArgs, kFleetKeyEnv + "STITCH_REMOTE_CACHE=" + server->url() +
                               " STITCH_CACHE_DIR=" + dir.path().string());
  ASSERT_EQ(r.code, 0) << r.out;
  size_t warnings = 0;
  for (size_t at = r.out.find("remote cache r"); at != std::string::npos;
       at = r.out.find("remote cache r", at + 1))
    ++warnings;
  EXPECT_EQ(warnings, 1u) << r.out;
  EXPECT_NE(r.out.find("NOAUTH"), std::string::npos) << r.out;
}
