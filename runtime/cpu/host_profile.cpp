// The host's own figures for the cost model (design note in host_profile.h).
#include "runtime/cpu/host_profile.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <span>

#include "runtime/cpu/thread_pool.h"
#include "runtime/profile_text.h"
#include "runtime/support/env.h"
#include "runtime/support/error.h"
#include "runtime/support/logging.h"

namespace stitch::rt::cpu {

namespace {

constexpr std::string_view kHeader = "stitch-host-profile 1";

// Every field of HostProfile, by its key in the text form. A field added to the struct must be
// added here, or it is neither stored nor read back.
template <class P, class F>
void forEachField(P& p, F&& f) {
  f("model", p.model);
  f("threads", p.threads);
  f("simd_width", p.simdWidth);
  f("l1_bytes", p.l1Bytes);
  f("l2_bytes", p.l2Bytes);
  f("l3_bytes", p.l3Bytes);
  f("memory_bandwidth", p.memoryBandwidth);
}

std::string firstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "32K", "1024K", "32M" (the kernel's cache size format) in bytes; 0 when it does not parse.
int64_t sizeText(std::string_view s) {
  int64_t n = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || n < 0) return 0;
  std::string_view unit = s.substr(static_cast<size_t>(end - s.data()));
  if (unit == "K") return n << 10;
  if (unit == "M") return n << 20;
  if (unit == "G") return n << 30;
  return unit.empty() ? n : 0;
}

// The CPU model from /proc/cpuinfo ("model name", x86; "Model" or "CPU part" elsewhere); empty
// when there is none.
std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    if (key == "model name" || key == "Model") {
      size_t v = line.find_first_not_of(" \t", colon + 1);
      return v == std::string::npos ? std::string() : line.substr(v);
    }
  }
  return {};
}

// Data and unified caches of cpu0 by level, from sysfs; sysconf where sysfs has none (glibc's
// figure for L3 is the sum over every L3 on some machines, so sysfs comes first).
void readCaches(HostProfile& p) {
  for (int i = 0; i < 16; ++i) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", i);
    const std::string type = firstLine(dir + "type");
    if (type.empty()) break;
    if (type != "Data" && type != "Unified") continue;
    const int64_t bytes = sizeText(firstLine(dir + "size"));
    const std::string level = firstLine(dir + "level");
    if (level == "1") p.l1Bytes = bytes;
    else if (level == "2") p.l2Bytes = bytes;
    else if (level == "3") p.l3Bytes = bytes;
  }
  auto conf = [](int name) { return std::max<int64_t>(0, ::sysconf(name)); };
#if defined(_SC_LEVEL1_DCACHE_SIZE)
  if (p.l1Bytes == 0) p.l1Bytes = conf(_SC_LEVEL1_DCACHE_SIZE);
  if (p.l2Bytes == 0) p.l2Bytes = conf(_SC_LEVEL2_CACHE_SIZE);
  if (p.l3Bytes == 0) p.l3Bytes = conf(_SC_LEVEL3_CACHE_SIZE);
#else
  (void)conf;
#endif
}

bool hasFeature(std::string_view features, std::string_view name) {
  size_t begin = 0;
  while (begin <= features.size()) {
    size_t end = features.find(',', begin);
    if (end == std::string_view::npos) end = features.size();
    std::string_view f = features.substr(begin, end - begin);
    if (f.size() == name.size() + 1 && f[0] == '+' && f.substr(1) == name) return true;
    begin = end + 1;
  }
  return false;
}

}  // namespace

std::string serializeHostProfile(const HostProfile& p) {
  return profile_text::write(kHeader, p, [](const auto& q, auto&& f) { forEachField(q, f); });
}

std::optional<HostProfile> parseHostProfile(std::string_view in) {
  return profile_text::parse<HostProfile>(kHeader, in,
                                          [](auto& q, auto&& f) { forEachField(q, f); });
}

CacheKey hostProfileKey(const HostProfile& queried, const HostTarget& host) {
  CacheKey key;
  key.add("kind", "host-profile")
      .add("model", queried.model)
      .add("threads", std::to_string(queried.threads))
      .add("triple", host.triple)
      .add("cpu", host.cpu)
      .add("features", host.features);
  return key;
}

HostProfile withMeasuredHostBandwidth(HostProfile queried, const CacheKey& key, DiskCache& disk,
                                      const std::function<double()>& measureBandwidth) {
  if (auto bytes = disk.load(key, EntryKind::MachineProfile)) {
    std::optional<HostProfile> stored = parseHostProfile(
        std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
    if (stored && stored->model == queried.model && stored->threads == queried.threads &&
        stored->memoryBandwidth > 0 && std::isfinite(stored->memoryBandwidth)) {
      queried.memoryBandwidth = stored->memoryBandwidth;
      log().debug("host profile: {} on {} threads: {:.1f} GB/s, measured earlier ({})",
                  queried.model, queried.threads, queried.memoryBandwidth / 1e9,
                  disk.pathFor(key).string());
      return queried;
    }
    log().warn("host profile: {} does not hold this machine's figures; measuring again",
               disk.pathFor(key).string());
  }
  double bandwidth = 0;
  try {
    bandwidth = measureBandwidth();
  } catch (const std::exception& e) {
    log().warn(
        "host profile: measuring the copy bandwidth failed ({}); the cost model keeps its "
        "built-in figure",
        e.what());
    return queried;
  }
  if (!(bandwidth > 0) || !std::isfinite(bandwidth)) {
    log().warn(
        "host profile: the measured copy bandwidth is {}; the cost model keeps its built-in "
        "figure",
        bandwidth);
    return queried;
  }
  queried.memoryBandwidth = bandwidth;
  std::string text = serializeHostProfile(queried);
  disk.store(key, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()),
             EntryKind::MachineProfile);
  return queried;
}

int simdWidthOf(std::string_view features) {
  if (hasFeature(features, "avx512f")) return 16;
  if (hasFeature(features, "avx")) return 8;
  if (hasFeature(features, "sse2") || hasFeature(features, "neon")) return 4;
  return 1;
}

HostProfile queryHostProfile(int threads, const HostTarget& host) {
  HostProfile p;
  p.model = cpuModel();
  if (p.model.empty()) p.model = host.cpu;
  p.threads = std::max(1, threads);
  p.simdWidth = simdWidthOf(host.features);
  readCaches(p);
  return p;
}

double measureHostCopyBandwidth(const HostProfile& queried) {
  constexpr size_t kPiece = size_t{256} << 10;
  constexpr int kTimed = 5;
  const size_t bytes = std::clamp<size_t>(2 * static_cast<size_t>(queried.l3Bytes),
                                          size_t{64} << 20, size_t{512} << 20) /
                       kPiece * kPiece;
  const int64_t pieces = static_cast<int64_t>(bytes / kPiece);
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<char[]> in(new char[bytes]), out(new char[bytes]);
  ThreadPool& pool = sharedPool();
  // First touch by the threads that copy, so the pages are mapped (and placed) before timing.
  pool.parallelFor(pieces, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      std::memset(in.get() + i * kPiece, static_cast<int>(i & 0x7f), kPiece);
      std::memset(out.get() + i * kPiece, 0, kPiece);
    }
  });
  auto copy = [&] {
    pool.parallelFor(pieces, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        std::memcpy(out.get() + i * kPiece, in.get() + i * kPiece, kPiece);
    });
  };
  copy();
  double best = 0;
  for (int i = 0; i < kTimed; ++i) {
    auto s = std::chrono::steady_clock::now();
    copy();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count();
    if (seconds > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / seconds);
  }
  // The copy must not be optimized away: its result is looked at.
  STITCH_CHECK(std::memcmp(in.get() + bytes - kPiece, out.get() + bytes - kPiece, kPiece) == 0,
               ErrorCode::Internal, "host bandwidth copy did not copy");
  log().info(
      "host profile: {} copies at {:.1f} GB/s on {} threads (best of {} copies of {} MiB; {:.0f} "
      "ms to measure)",
      queried.model, best / 1e9, pool.threads(), kTimed, bytes >> 20,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return best;
}

HostProfile probeHostProfile(int threads, const HostTarget& host) {
  HostProfile queried = queryHostProfile(threads, host);
  const CacheKey key = hostProfileKey(queried, host);
  // Through the remote layer too (STITCH_REMOTE_CACHE): machines of one kind (model, features,
  // threads) then price plans with one measurement, so that they make the same plans and share
  // program entries and kernels. A remote entry is written to the disk by the lookup.
  std::unique_ptr<PersistentLayers> layers = PersistentLayers::fromEnv();
  const bool shared = layers->load(key, EntryKind::MachineProfile).has_value();
  const HostProfile machine = queried;
  HostProfile p = withMeasuredHostBandwidth(std::move(queried), key, *layers->disk(),
                                            [&] { return measureHostCopyBandwidth(machine); });
  if (!shared) layers->publish(key, EntryKind::MachineProfile);
  return p;
}

int64_t hostStreamingStoreBytes(const HostProfile& profile) {
  if (!env::getBool(kStreamingStoresEnv, true)) return 0;
  return profile.l3Bytes > 0 ? 2 * profile.l3Bytes : int64_t{64} << 20;
}

}  // namespace stitch::rt::cpu
