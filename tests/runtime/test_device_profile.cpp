// The device profile's plain parts (runtime/gpu/device_profile.h): its text form, the disk cache
// protocol of the measured bandwidth and its fallbacks, and the overlay on the planner's profile
// (the target's facts(): src/target). Querying and measuring a real device is not here: it needs a
// GPU (the `gpu` tests and bench/gpu/run.py exercise it through every GpuBackend).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "common/temp_dir.h"
#include "driver/driver.h"
#include "fusion/hardware.h"
#include "ir/parser.h"
#include "runtime/gpu/device_compiler.h"
#include "runtime/gpu/device_profile.h"

using namespace stitch;
using namespace stitch::rt;
using namespace stitch::rt::gpu;
namespace fs = std::filesystem;

namespace {

using stitch::testing::TempDir;

DeviceProfile h100() {
  DeviceProfile p;
  p.name = "NVIDIA H100 80GB HBM3";
  p.driver = "13000";
  p.maxThreadsPerProcessor = 2048;
  p.maxBlocksPerProcessor = 32;
  p.maxThreadsPerBlock = 1024;
  p.registersPerProcessor = 65536;
  p.sharedMemoryPerProcessor = 233472;
  p.sharedMemoryPerBlock = 232448;
  p.clockHz = 1.98e9;
  return p;
}

TEST(DeviceProfile, TextFormRoundTrips) {
  DeviceProfile p = h100();
  p.memoryBandwidth = 2.9876543210123e12;
  std::string text = serializeDeviceProfile(p);
  EXPECT_EQ(text.rfind("stitch-device-profile 1\n", 0), 0u) << text;
  std::optional<DeviceProfile> back = parseDeviceProfile(text);
  ASSERT_TRUE(back.has_value()) << text;
  EXPECT_EQ(*back, p);
  EXPECT_EQ(parseDeviceProfile(serializeDeviceProfile(DeviceProfile{})), DeviceProfile{});
}

TEST(DeviceProfile, ParsingRefusesAnythingElse) {
  const std::string good = serializeDeviceProfile(h100());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  EXPECT_FALSE(parseDeviceProfile(""));
  EXPECT_FALSE(parseDeviceProfile(replaced("stitch-device-profile 1", "stitch-device-profile 2")));
  EXPECT_FALSE(parseDeviceProfile(good.substr(0, good.size() - 1)));  // last line unterminated
  EXPECT_FALSE(parseDeviceProfile(replaced("clock_hz=", "clock_hertz=")));          // unknown key
  EXPECT_FALSE(parseDeviceProfile(replaced("max_blocks_per_processor=32\n", "")));  // missing
  EXPECT_FALSE(parseDeviceProfile(good + "driver=12000\n"));                        // repeated
  EXPECT_FALSE(parseDeviceProfile(replaced("=2048", "=2048x")));
  EXPECT_FALSE(parseDeviceProfile(replaced("=2048", "=-2048")));
  EXPECT_FALSE(parseDeviceProfile(replaced("clock_hz=", "clock_hz=nan")));
  EXPECT_FALSE(
      parseDeviceProfile(replaced("registers_per_processor=65536", "registers_per_processor")));
}

// The first start measures and stores; a later one (another process: a new DiskCache on the
// directory) reads the figure back and measures nothing.
TEST(DeviceProfile, BandwidthIsMeasuredOnceAndCachedOnDisk) {
  TempDir dir;
  int measured = 0;
  auto measure = [&] {
    ++measured;
    return 2.5e12;
  };
  const CacheKey key = deviceProfileKey("cuda", "sm_90", h100());
  {
    DiskCache disk(dir.path());
    DeviceProfile p = withMeasuredBandwidth(h100(), key, disk, measure);
    EXPECT_EQ(measured, 1);
    EXPECT_EQ(p.memoryBandwidth, 2.5e12);
    EXPECT_TRUE(fs::exists(disk.pathFor(key)));
  }
  DiskCache again(dir.path());
  DeviceProfile p = withMeasuredBandwidth(h100(), key, again, [&] {
    ++measured;
    return 1.0;
  });
  EXPECT_EQ(measured, 1);
  EXPECT_EQ(p.memoryBandwidth, 2.5e12);
  // The rest comes from the query, not the file.
  DeviceProfile other = h100();
  other.clockHz = 1.5e9;
  EXPECT_EQ(withMeasuredBandwidth(other, key, again, measure).clockHz, 1.5e9);
  EXPECT_EQ(measured, 1);
}

TEST(DeviceProfile, AnotherDriverOrDeviceMeasuresAgain) {
  TempDir dir;
  DiskCache disk(dir.path());
  int measured = 0;
  auto measure = [&] { return 1e12 * ++measured; };
  DeviceProfile a = h100();
  withMeasuredBandwidth(a, deviceProfileKey("cuda", "sm_90", a), disk, measure);
  DeviceProfile newDriver = h100();
  newDriver.driver = "13010";
  EXPECT_NE(deviceProfileKey("cuda", "sm_90", newDriver).canonical(),
            deviceProfileKey("cuda", "sm_90", a).canonical());
  EXPECT_EQ(
      withMeasuredBandwidth(newDriver, deviceProfileKey("cuda", "sm_90", newDriver), disk, measure)
          .memoryBandwidth,
      2e12);
  DeviceProfile pcie = h100();
  pcie.name = "NVIDIA H100 PCIe";
  EXPECT_EQ(withMeasuredBandwidth(pcie, deviceProfileKey("cuda", "sm_90", pcie), disk, measure)
                .memoryBandwidth,
            3e12);
  EXPECT_EQ(measured, 3);
  // The first device's figure is still there.
  EXPECT_EQ(
      withMeasuredBandwidth(a, deviceProfileKey("cuda", "sm_90", a), disk, measure).memoryBandwidth,
      1e12);
  EXPECT_EQ(measured, 3);
}

// Without a disk layer (STITCH_CACHE=0) every start measures.
TEST(DeviceProfile, NoDiskCacheMeasuresEveryTime) {
  std::unique_ptr<DiskCache> off = DiskCache::disabled();
  int measured = 0;
  const CacheKey key = deviceProfileKey("cuda", "sm_90", h100());
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(
        withMeasuredBandwidth(h100(), key, *off, [&] { return 1e12 * ++measured; }).memoryBandwidth,
        1e12 * (i + 1));
}

// A failed or meaningless measurement leaves the bandwidth unknown (the built-in figure stands)
// and stores nothing, so the next start tries again.
TEST(DeviceProfile, AFailedMeasurementFallsBackAndIsNotStored) {
  TempDir dir;
  DiskCache disk(dir.path());
  const CacheKey key = deviceProfileKey("cuda", "sm_90", h100());
  DeviceProfile p = withMeasuredBandwidth(
      h100(), key, disk, []() -> double { throw std::runtime_error("out of memory"); });
  EXPECT_EQ(p.memoryBandwidth, 0);
  EXPECT_EQ(p.maxThreadsPerProcessor, 2048);
  EXPECT_FALSE(fs::exists(disk.pathFor(key)));
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::infinity()}) {
    EXPECT_EQ(withMeasuredBandwidth(h100(), key, disk, [&] { return bad; }).memoryBandwidth, 0);
    EXPECT_FALSE(fs::exists(disk.pathFor(key)));
  }
  EXPECT_EQ(withMeasuredBandwidth(h100(), key, disk, [] { return 2e12; }).memoryBandwidth, 2e12);
  EXPECT_TRUE(fs::exists(disk.pathFor(key)));
}

// A damaged entry is a miss (the kernel cache's checks), and the new measurement replaces it.
TEST(DeviceProfile, ADamagedEntryIsMeasuredAgainAndRewritten) {
  TempDir dir;
  const CacheKey key = deviceProfileKey("cuda", "sm_90", h100());
  fs::path file;
  {
    DiskCache disk(dir.path());
    withMeasuredBandwidth(h100(), key, disk, [] { return 2e12; });
    file = disk.pathFor(key);
  }
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.write("xyz", 3);  // the entry's tag no longer verifies
  }
  DiskCache disk(dir.path());
  int measured = 0;
  EXPECT_EQ(withMeasuredBandwidth(h100(), key, disk,
                                  [&] {
                                    ++measured;
                                    return 3e12;
                                  })
                .memoryBandwidth,
            3e12);
  EXPECT_EQ(measured, 1);
  DiskCache later(dir.path());
  EXPECT_EQ(withMeasuredBandwidth(h100(), key, later, [] { return 1.0; }).memoryBandwidth, 3e12);
}

// An entry under the right key whose text names another device (a copied file, a hash clash of
// the name) is not used.
TEST(DeviceProfile, AnEntryForAnotherDeviceIsNotUsed) {
  TempDir dir;
  DiskCache disk(dir.path());
  const CacheKey key = deviceProfileKey("cuda", "sm_90", h100());
  DeviceProfile stranger = h100();
  stranger.name = "NVIDIA A100-SXM4-80GB";
  stranger.memoryBandwidth = 1.8e12;
  std::string text = serializeDeviceProfile(stranger);
  disk.store(key, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  EXPECT_EQ(withMeasuredBandwidth(h100(), key, disk, [] { return 2.9e12; }).memoryBandwidth,
            2.9e12);
}

// The measurement's kernel compiles for every target the backends serve (no GPU needed), so a
// device never loses its measurement to a compile error. One test per run-time compiler: ctest runs
// each test in its own process, and a process that has loaded both NVRTC and hipRTC crashes
// LeakSanitizer's exit-time tracer (the ci-asan lane; README, "Testing").
TEST(DeviceProfile, TheCopyKernelCompilesForSm80AndSm90) {
  std::string why;
  DeviceCompiler* nvrtc = nvrtcCompiler(&why);
  if (nvrtc == nullptr) GTEST_SKIP() << "NVRTC is unavailable: " << why;
  for (const char* arch : {"sm_80", "sm_90"}) {
    DeviceBinary b = nvrtc->compile(std::string(copyKernelSource()), "stitch_copy.cu", {}, arch);
    EXPECT_GT(b.bytes.size(), 0u) << arch;
    EXPECT_EQ(b.spillBytes, 0) << arch;
  }
}

TEST(DeviceProfile, TheCopyKernelCompilesForGfx90a) {
  std::string why;
  DeviceCompiler* hiprtc = hiprtcCompiler(&why);
  if (hiprtc == nullptr) GTEST_SKIP() << "hipRTC is unavailable: " << why;
  DeviceBinary b = hiprtc->compile(std::string(copyKernelSource()), "stitch_copy.cu", {}, "gfx90a");
  EXPECT_GT(b.bytes.size(), 0u);
  EXPECT_EQ(b.spillBytes, 0);
}

// The planner prices the device's own figures where it has them, the family's elsewhere, and
// nothing changes for targets without a device.
TEST(DeviceProfile, TheCostModelUsesTheDevicesFigures) {
  const fusion::HardwareProfile builtin = *fusion::findProfile("sm_90");
  rt::Target t = target::namedTarget("sm_90");
  const fusion::HardwareProfile offline = target::makeTarget(t)->facts();
  EXPECT_EQ(offline.memoryBandwidth, builtin.memoryBandwidth);
  EXPECT_EQ(offline.sharedMemoryPerBlock, builtin.sharedMemoryPerBlock);
  EXPECT_EQ(offline.flops, builtin.flops);
  EXPECT_EQ(offline.description, builtin.description);

  // An H100 PCIe as its backend would describe it.
  t.processors = 114;
  t.warpSize = 32;
  t.device = h100();
  t.device.name = "NVIDIA H100 PCIe";
  t.device.maxBlocksPerProcessor = 24;  // not the datasheet's: must come through
  t.device.sharedMemoryPerBlock = 101376;
  t.device.memoryBandwidth = 1.7e12;
  const fusion::HardwareProfile own = target::makeTarget(t)->facts();
  EXPECT_EQ(own.name, "sm_90");
  EXPECT_EQ(own.processors, 114);
  EXPECT_EQ(own.maxBlocksPerProcessor, 24);
  EXPECT_EQ(own.sharedMemoryPerBlock, 101376);
  EXPECT_EQ(own.sharedMemoryPerProcessor, 233472);
  EXPECT_EQ(own.memoryBandwidth, 1.7e12);
  EXPECT_DOUBLE_EQ(own.flops, builtin.flops * 114 / builtin.processors);
  EXPECT_NE(own.description.find("NVIDIA H100 PCIe"), std::string::npos) << own.description;
  EXPECT_NE(own.description.find("1700 GB/s measured"), std::string::npos) << own.description;
  // Unchanged: what no device reports.
  EXPECT_EQ(own.memoryLatency, builtin.memoryLatency);
  EXPECT_EQ(own.launchOverhead, builtin.launchOverhead);

  // A device that measured nothing keeps the family's bandwidth.
  t.device.memoryBandwidth = 0;
  t.device.maxThreadsPerProcessor = 0;
  EXPECT_EQ(target::makeTarget(t)->facts().memoryBandwidth, builtin.memoryBandwidth);
  EXPECT_EQ(target::makeTarget(t)->facts().maxThreadsPerProcessor, builtin.maxThreadsPerProcessor);

  // The bandwidth reaches the plan: a slower memory prices a memory-bound plan slower.
  ir::Graph g = driver::optimize(ir::parseModule(R"(graph g(x: f32[16384, 4096]) {
  y = softmax(x, axis=-1)
  return y
})",
                                                 "softmax.stitch")
                                     .at(0));
  auto planTime = [&](double bandwidth) {
    t.device.memoryBandwidth = bandwidth;
    return driver::build(g, {}, t, {}, driver::Stage::Plan).plan.time;
  };
  EXPECT_GT(planTime(1.5e12), planTime(3e12) * 1.5);
}

}  // namespace
