// The host profile's plain parts (runtime/cpu/host_profile.h): its text form, the disk cache
// protocol of the measured bandwidth and its fallbacks, what is read of the machine, and the
// overlay on the planner's host profile (the target's facts(): src/target) with what it does to
// plans and keys.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "common/temp_dir.h"
#include "driver/driver.h"
#include "fusion/hardware.h"
#include "ir/parser.h"
#include "runtime/cpu/host_profile.h"

using namespace stitch;
using namespace stitch::rt;
using namespace stitch::rt::cpu;
namespace fs = std::filesystem;

namespace {

using stitch::testing::TempDir;

HostProfile epyc() {
  HostProfile p;
  p.model = "AMD EPYC 9R14 96-Core Processor";
  p.threads = 2;
  p.simdWidth = 16;
  p.l1Bytes = 32 << 10;
  p.l2Bytes = 1 << 20;
  p.l3Bytes = 32 << 20;
  return p;
}

HostTarget machine() {
  HostTarget t;
  t.triple = "x86_64-unknown-linux-gnu";
  t.cpu = "znver4";
  t.features = "+avx,+avx2,+avx512f,+sse2,-amx-tile";
  t.llvmVersion = "16.0.6";
  return t;
}

TEST(HostProfile, TextFormRoundTrips) {
  HostProfile p = epyc();
  p.memoryBandwidth = 3.4123456789012e10;
  std::string text = serializeHostProfile(p);
  EXPECT_EQ(text.rfind("stitch-host-profile 1\n", 0), 0u) << text;
  std::optional<HostProfile> back = parseHostProfile(text);
  ASSERT_TRUE(back.has_value()) << text;
  EXPECT_EQ(*back, p);
  EXPECT_EQ(parseHostProfile(serializeHostProfile(HostProfile{})), HostProfile{});
}

TEST(HostProfile, ParsingRefusesAnythingElse) {
  const std::string good = serializeHostProfile(epyc());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  EXPECT_FALSE(parseHostProfile(""));
  EXPECT_FALSE(parseHostProfile(replaced("stitch-host-profile 1", "stitch-host-profile 2")));
  EXPECT_FALSE(parseHostProfile(good.substr(0, good.size() - 1)));    // last line unterminated
  EXPECT_FALSE(parseHostProfile(replaced("l2_bytes=", "l2_size=")));  // unknown key
  EXPECT_FALSE(parseHostProfile(replaced("simd_width=16\n", "")));    // missing
  EXPECT_FALSE(parseHostProfile(good + "threads=4\n"));               // repeated
  EXPECT_FALSE(parseHostProfile(replaced("threads=2", "threads=2x")));
  EXPECT_FALSE(parseHostProfile(replaced("threads=2", "threads=-2")));
  EXPECT_FALSE(parseHostProfile(replaced("memory_bandwidth=0", "memory_bandwidth=nan")));
  EXPECT_FALSE(parseHostProfile(replaced("l1_bytes=32768", "l1_bytes")));
}

// The first start measures and stores; a later one (another process: a new DiskCache on the
// directory) reads the figure back and measures nothing.
TEST(HostProfile, BandwidthIsMeasuredOnceAndCachedOnDisk) {
  TempDir dir;
  int measured = 0;
  auto measure = [&] {
    ++measured;
    return 3.4e10;
  };
  const CacheKey key = hostProfileKey(epyc(), machine());
  {
    DiskCache disk(dir.path());
    HostProfile p = withMeasuredHostBandwidth(epyc(), key, disk, measure);
    EXPECT_EQ(measured, 1);
    EXPECT_EQ(p.memoryBandwidth, 3.4e10);
    EXPECT_TRUE(fs::exists(disk.pathFor(key)));
  }
  DiskCache again(dir.path());
  HostProfile p = withMeasuredHostBandwidth(epyc(), key, again, [&] {
    ++measured;
    return 1.0;
  });
  EXPECT_EQ(measured, 1);
  EXPECT_EQ(p.memoryBandwidth, 3.4e10);
  // The rest comes from the query, not the file.
  HostProfile other = epyc();
  other.l2Bytes = 2 << 20;
  EXPECT_EQ(withMeasuredHostBandwidth(other, key, again, measure).l2Bytes, 2 << 20);
  EXPECT_EQ(measured, 1);
}

// Another CPU, other features or another thread count is another machine to the planner.
TEST(HostProfile, AnotherMachineOrThreadCountMeasuresAgain) {
  TempDir dir;
  DiskCache disk(dir.path());
  int measured = 0;
  auto measure = [&] { return 1e10 * ++measured; };
  const HostProfile a = epyc();
  withMeasuredHostBandwidth(a, hostProfileKey(a, machine()), disk, measure);
  HostProfile fourThreads = a;
  fourThreads.threads = 4;
  HostTarget noAvx512 = machine();
  noAvx512.features = "+avx,+avx2,-avx512f,+sse2,-amx-tile";
  HostProfile otherModel = a;
  otherModel.model = "Intel(R) Xeon(R) Platinum 8480+";
  const std::string base = hostProfileKey(a, machine()).canonical();
  EXPECT_NE(hostProfileKey(fourThreads, machine()).canonical(), base);
  EXPECT_NE(hostProfileKey(a, noAvx512).canonical(), base);
  EXPECT_NE(hostProfileKey(otherModel, machine()).canonical(), base);
  EXPECT_EQ(
      withMeasuredHostBandwidth(fourThreads, hostProfileKey(fourThreads, machine()), disk, measure)
          .memoryBandwidth,
      2e10);
  EXPECT_EQ(
      withMeasuredHostBandwidth(a, hostProfileKey(a, noAvx512), disk, measure).memoryBandwidth,
      3e10);
  EXPECT_EQ(measured, 3);
  // The first machine's figure is still there.
  EXPECT_EQ(
      withMeasuredHostBandwidth(a, hostProfileKey(a, machine()), disk, measure).memoryBandwidth,
      1e10);
  EXPECT_EQ(measured, 3);
  // An entry under this key that describes another machine (a file copied from elsewhere) is not
  // trusted.
  EXPECT_EQ(
      withMeasuredHostBandwidth(otherModel, hostProfileKey(a, machine()), disk, measure).model,
      otherModel.model);
  EXPECT_EQ(measured, 4);
}

// Without a disk layer (STITCH_CACHE=0) every start measures.
TEST(HostProfile, NoDiskCacheMeasuresEveryTime) {
  std::unique_ptr<DiskCache> off = DiskCache::disabled();
  int measured = 0;
  const CacheKey key = hostProfileKey(epyc(), machine());
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(withMeasuredHostBandwidth(epyc(), key, *off, [&] { return 1e10 * ++measured; })
                  .memoryBandwidth,
              1e10 * (i + 1));
}

// A failed or meaningless measurement leaves the bandwidth unknown (the built-in figure stands)
// and stores nothing, so the next start tries again.
TEST(HostProfile, AFailedMeasurementFallsBackAndIsNotStored) {
  TempDir dir;
  DiskCache disk(dir.path());
  const CacheKey key = hostProfileKey(epyc(), machine());
  HostProfile p = withMeasuredHostBandwidth(
      epyc(), key, disk, []() -> double { throw std::runtime_error("out of memory"); });
  EXPECT_EQ(p.memoryBandwidth, 0);
  EXPECT_EQ(p.threads, 2);
  EXPECT_FALSE(fs::exists(disk.pathFor(key)));
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_EQ(withMeasuredHostBandwidth(epyc(), key, disk, [&] { return bad; }).memoryBandwidth, 0);
    EXPECT_FALSE(fs::exists(disk.pathFor(key)));
  }
  EXPECT_EQ(withMeasuredHostBandwidth(epyc(), key, disk, [] { return 2e10; }).memoryBandwidth,
            2e10);
  EXPECT_TRUE(fs::exists(disk.pathFor(key)));
}

// A damaged entry is a miss (the kernel cache's checks), and the new measurement replaces it.
TEST(HostProfile, ADamagedEntryIsMeasuredAgainAndRewritten) {
  TempDir dir;
  const CacheKey key = hostProfileKey(epyc(), machine());
  fs::path file;
  {
    DiskCache disk(dir.path());
    withMeasuredHostBandwidth(epyc(), key, disk, [] { return 2e10; });
    file = disk.pathFor(key);
  }
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.write("xyz", 3);  // the entry's tag no longer verifies
  }
  int measured = 0;
  {
    DiskCache disk(dir.path());
    EXPECT_EQ(withMeasuredHostBandwidth(epyc(), key, disk,
                                        [&] {
                                          ++measured;
                                          return 3e10;
                                        })
                  .memoryBandwidth,
              3e10);
    EXPECT_EQ(measured, 1);
  }
  DiskCache disk(dir.path());
  EXPECT_EQ(
      withMeasuredHostBandwidth(epyc(), key, disk, [&] { return ++measured, 1.0; }).memoryBandwidth,
      3e10);
  EXPECT_EQ(measured, 1);
}

TEST(HostProfile, SimdWidthComesFromTheFeatures) {
  EXPECT_EQ(simdWidthOf("+avx,+avx2,+avx512f,+sse2"), 16);
  EXPECT_EQ(simdWidthOf("+avx,+avx2,-avx512f,+sse2"), 8);
  EXPECT_EQ(simdWidthOf("-avx,-avx512f,+sse2"), 4);
  EXPECT_EQ(simdWidthOf("+neon,+fp-armv8"), 4);
  EXPECT_EQ(simdWidthOf("-avx512fp16,+avx512f-like"), 1);  // whole names only
  EXPECT_EQ(simdWidthOf(""), 1);
}

// What is read of this machine is sane (its values vary; their presence and order do not).
TEST(HostProfile, QueriesThisMachine) {
  HostProfile p = queryHostProfile(3, machine());
  EXPECT_FALSE(p.model.empty());
  EXPECT_EQ(p.threads, 3);
  EXPECT_EQ(p.simdWidth, 16);
  EXPECT_EQ(p.memoryBandwidth, 0);  // measured separately
  EXPECT_GT(p.l1Bytes, 0);
  EXPECT_GE(p.l2Bytes, p.l1Bytes);
}

// The planner prices the machine's own figures where it has them, the built-in nominal host's
// elsewhere; `stitch plan --target host` (a target with no profile) keeps the built-in one.
TEST(HostProfile, TheCostModelUsesTheMachinesFigures) {
  const fusion::HardwareProfile builtin = *fusion::findProfile("host");
  rt::Target t = target::namedTarget("host");
  const fusion::HardwareProfile offline = target::makeTarget(t)->facts();
  EXPECT_EQ(offline.memoryBandwidth, builtin.memoryBandwidth);
  EXPECT_EQ(offline.processors, builtin.processors);
  EXPECT_EQ(offline.flops, builtin.flops);
  EXPECT_EQ(offline.description, builtin.description);

  t.hostProfile = epyc();
  t.hostProfile.threads = 8;
  t.hostProfile.memoryBandwidth = 4.5e10;
  const fusion::HardwareProfile own = target::makeTarget(t)->facts();
  EXPECT_EQ(own.name, "host");
  EXPECT_EQ(own.processors, 8);
  EXPECT_EQ(own.warpSize, 16);
  EXPECT_EQ(own.sharedMemoryPerBlock, 1 << 20);
  EXPECT_EQ(own.memoryBandwidth, 4.5e10);
  EXPECT_DOUBLE_EQ(own.flops, builtin.flops * 8 / builtin.processors * 16 / builtin.warpSize);
  EXPECT_DOUBLE_EQ(own.expensiveFlops, own.flops / (builtin.flops / builtin.expensiveFlops));
  EXPECT_NE(own.description.find("AMD EPYC"), std::string::npos) << own.description;
  EXPECT_NE(own.description.find("45.0 GB/s measured"), std::string::npos) << own.description;
  EXPECT_EQ(own.memoryLatency, builtin.memoryLatency);
  EXPECT_EQ(own.launchOverhead, builtin.launchOverhead);

  t.hostProfile.memoryBandwidth = 0;
  EXPECT_EQ(target::makeTarget(t)->facts().memoryBandwidth, builtin.memoryBandwidth);
}

// The profile reaches the plan and so the kernels' cache keys (target/keys.h: a host kernel's key
// holds its lowered program, which is what the plan made of the profile): a machine without
// vector units pays a softmax's recomputed exp and divide more than a second pass over memory
// and plans it apart, and those kernels have other keys; a machine that plans alike (here, a
// little more bandwidth) shares the keys, so its compiled kernels are found in the cache.
TEST(HostProfile, FiguresThatChangeThePlanChangeTheKernelKeys) {
  ir::Graph g = driver::optimize(ir::parseModule(R"(graph g(x: f32[4096, 4096]) {
  y = softmax(x, axis=-1)
  return y
})",
                                                 "softmax.stitch")
                                     .at(0));
  auto keys = [&](const HostProfile& h) {
    rt::Target t = target::namedTarget("host");
    t.hostProfile = h;
    driver::Build b = driver::build(g, {}, t, {}, driver::Stage::Emit);
    std::vector<uint64_t> out;
    for (const rt::KernelArtifact& k : b.artifact.kernels) out.push_back(k.forms.at(0).key.hash());
    return out;
  };
  HostProfile vector = epyc();
  vector.memoryBandwidth = 3.4e10;
  HostProfile scalar = vector;
  scalar.simdWidth = 1;
  const std::vector<uint64_t> fused = keys(vector), apart = keys(scalar);
  EXPECT_EQ(fused.size(), 1u);
  EXPECT_EQ(apart.size(), 2u);
  EXPECT_NE(fused, apart);
  HostProfile faster = vector;
  faster.memoryBandwidth = 3.5e10;
  EXPECT_EQ(keys(faster), fused);
}

}  // namespace
