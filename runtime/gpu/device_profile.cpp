// The device's own figures for the cost model (design note in device_profile.h).
#include "runtime/gpu/device_profile.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <map>
#include <span>
#include <vector>

#include "runtime/gpu/device.h"
#include "runtime/gpu/device_compiler.h"
#include "runtime/profile_text.h"
#include "runtime/support/error.h"
#include "runtime/support/logging.h"

namespace stitch::rt::gpu {

namespace {

constexpr std::string_view kHeader = "stitch-device-profile 1";

// Every field of DeviceProfile, by its key in the text form. A field added to the struct must be
// added here, or it is neither stored nor read back.
template <class P, class F>
void forEachField(P& p, F&& f) {
  f("name", p.name);
  f("driver", p.driver);
  f("max_threads_per_processor", p.maxThreadsPerProcessor);
  f("max_blocks_per_processor", p.maxBlocksPerProcessor);
  f("max_threads_per_block", p.maxThreadsPerBlock);
  f("registers_per_processor", p.registersPerProcessor);
  f("shared_memory_per_processor", p.sharedMemoryPerProcessor);
  f("shared_memory_per_block", p.sharedMemoryPerBlock);
  f("clock_hz", p.clockHz);
  f("memory_bandwidth", p.memoryBandwidth);
}

}  // namespace

std::string serializeDeviceProfile(const DeviceProfile& p) {
  return profile_text::write(kHeader, p, [](const auto& q, auto&& f) { forEachField(q, f); });
}

std::optional<DeviceProfile> parseDeviceProfile(std::string_view in) {
  return profile_text::parse<DeviceProfile>(kHeader, in,
                                            [](auto& q, auto&& f) { forEachField(q, f); });
}

CacheKey deviceProfileKey(std::string_view backend, const std::string& arch,
                          const DeviceProfile& queried) {
  CacheKey key;
  key.add("kind", "device-profile")
      .add("backend", std::string(backend))
      .add("arch", arch)
      .add("device", queried.name)
      .add("driver", queried.driver);
  return key;
}

DeviceProfile withMeasuredBandwidth(DeviceProfile queried, const CacheKey& key, DiskCache& disk,
                                    const std::function<double()>& measureBandwidth) {
  if (auto bytes = disk.load(key, EntryKind::MachineProfile)) {
    std::optional<DeviceProfile> stored = parseDeviceProfile(
        std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
    if (stored && stored->name == queried.name && stored->driver == queried.driver &&
        stored->memoryBandwidth > 0) {
      queried.memoryBandwidth = stored->memoryBandwidth;
      log().debug("device profile: {} (driver {}): {:.0f} GB/s, measured earlier ({})",
                  queried.name, queried.driver, queried.memoryBandwidth / 1e9,
                  disk.pathFor(key).string());
      return queried;
    }
    log().warn("device profile: {} does not hold {}'s figures; measuring again",
               disk.pathFor(key).string(), queried.name);
  }
  double bandwidth = 0;
  try {
    bandwidth = measureBandwidth();
  } catch (const std::exception& e) {
    log().warn(
        "device profile: measuring {}'s memory bandwidth failed ({}); the cost model "
        "keeps its built-in figure",
        queried.name, e.what());
    return queried;
  }
  if (!(bandwidth > 0) || !std::isfinite(bandwidth)) {
    log().warn(
        "device profile: {}'s measured bandwidth is {}; the cost model keeps its built-in "
        "figure",
        queried.name, bandwidth);
    return queried;
  }
  queried.memoryBandwidth = bandwidth;
  std::string text = serializeDeviceProfile(queried);
  disk.store(key, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()),
             EntryKind::MachineProfile);
  return queried;
}

std::string_view copyKernelSource() {
  // 16 bytes a thread per step, no vector types (NVRTC --minimal, hipRTC without headers).
  static constexpr std::string_view kSource =
      R"(struct alignas(16) Word { unsigned int x, y, z, w; };
extern "C" __global__ void __launch_bounds__(256)
stitch_copy(const Word* __restrict__ in, Word* __restrict__ out, unsigned long long n) {
  for (unsigned long long i = blockIdx.x * 256ull + threadIdx.x; i < n;
       i += static_cast<unsigned long long>(gridDim.x) * 256ull)
    out[i] = in[i];
}
)";
  return kSource;
}

double measureCopyBandwidth(Device& device, DeviceCompiler& compiler, const std::string& arch) {
  constexpr size_t kBytes = size_t{256} << 20;
  constexpr int kWarmup = 3, kTimed = 20;
  auto t0 = std::chrono::steady_clock::now();
  DeviceBinary binary =
      compiler.compile(std::string(copyKernelSource()), "stitch_copy.cu", {}, arch);
  std::shared_ptr<const void> module = device.loadModule(binary.bytes);
  void* fn = device.function(module, "stitch_copy");
  struct Buffer {
    Device& device;
    void* p;
    ~Buffer() { device.release(p); }
  };
  Buffer in{device, device.allocate(kBytes)};
  Buffer out{device, device.allocate(kBytes)};
  void* inPtr = in.p;
  void* outPtr = out.p;
  unsigned long long words = kBytes / 16;
  void* args[] = {&inPtr, &outPtr, &words};
  // Enough blocks to fill every SM (2048 resident threads on the NVIDIA parts, 8 blocks of 256).
  const int64_t grid = int64_t{device.smCount()} * 8;
  for (int i = 0; i < kWarmup; ++i) device.launch(fn, grid, 256, 0, nullptr, args);
  std::shared_ptr<void> start = device.createEvent(), end = device.createEvent();
  std::vector<double> ms;
  for (int i = 0; i < kTimed; ++i) {
    device.recordEvent(start.get(), nullptr);
    device.launch(fn, grid, 256, 0, nullptr, args);
    device.recordEvent(end.get(), nullptr);
    ms.push_back(device.elapsedMs(start.get(), end.get()));
  }
  device.synchronize(nullptr);
  std::sort(ms.begin(), ms.end());
  const double median = (ms[kTimed / 2 - 1] + ms[kTimed / 2]) / 2;
  STITCH_CHECK(median > 0, ErrorCode::Internal, "copy kernel timed at {} ms", median);
  const double bandwidth = 2.0 * kBytes / (median * 1e-3);
  log().info(
      "device profile: {} copies at {:.0f} GB/s (median of {} copies of {} MiB; {:.0f} ms "
      "to measure, compile included)",
      device.name(), bandwidth / 1e9, kTimed, kBytes >> 20,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return bandwidth;
}

DeviceProfile probeDeviceProfile(Device& device, DeviceCompiler& compiler,
                                 const std::string& arch) {
  DeviceProfile queried = device.queryProfile();
  const CacheKey key = deviceProfileKey(device.backend(), arch, queried);
  // Shared through the remote layer as the host's is (cpu/host_profile.cpp: one measurement per
  // kind of device, so that a fleet plans alike).
  std::unique_ptr<PersistentLayers> layers = PersistentLayers::fromEnv();
  const bool shared = layers->load(key, EntryKind::MachineProfile).has_value();
  DeviceProfile p = withMeasuredBandwidth(std::move(queried), key, *layers->disk(), [&] {
    return measureCopyBandwidth(device, compiler, arch);
  });
  if (!shared) layers->publish(key, EntryKind::MachineProfile);
  return p;
}

}  // namespace stitch::rt::gpu
