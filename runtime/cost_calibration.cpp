// The cost model's calibration for one machine (design note in cost_calibration.h).
#include "runtime/cost_calibration.h"

#include <cmath>
#include <span>
#include <type_traits>

#include "runtime/profile_text.h"
#include "runtime/support/env.h"
#include "runtime/support/logging.h"

namespace stitch::rt {

namespace {

constexpr std::string_view kHeader = "stitch-cost-calibration 1";

// Every field of CostCalibration, by its key in the text form. A field added to the struct must be
// added here, or it is neither stored nor read back.
template <class C, class F>
void forEachField(C& c, F&& f) {
  f("memory_bandwidth", c.memoryBandwidth);
  f("cache_bandwidth", c.cacheBandwidth);
  f("memory_latency", c.memoryLatency);
  f("launch_overhead", c.launchOverhead);
  f("flops", c.flops);
  f("expensive_flops", c.expensiveFlops);
  f("grid_sync_time", c.gridSyncTime);
  f("samples", c.samples);
}

}  // namespace

std::string serializeCostCalibration(const CostCalibration& c) {
  return profile_text::write(kHeader, c, [](const auto& q, auto&& f) { forEachField(q, f); });
}

bool validCostCalibration(const CostCalibration& c) {
  bool ok = c.samples > 0, any = false;
  forEachField(c, [&](std::string_view, const auto& v) {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, double>) {
      ok = ok && std::isfinite(v) && v >= 0;
      any = any || v > 0;
    }
  });
  return ok && any;
}

std::optional<CostCalibration> parseCostCalibration(std::string_view in) {
  std::optional<CostCalibration> c = profile_text::parse<CostCalibration>(
      kHeader, in, [](auto& q, auto&& f) { forEachField(q, f); });
  if (c && !validCostCalibration(*c)) return std::nullopt;
  return c;
}

CacheKey calibrationKey(const Target& t) {
  CacheKey key;
  key.add("kind", "cost-calibration").add("backend", t.backend).add("arch", t.arch);
  if (!t.device.name.empty()) key.add("device", t.device.name).add("driver", t.device.driver);
  else
    key.add("model", t.hostProfile.model)
        .add("threads", std::to_string(t.hostProfile.threads))
        .add("triple", t.host.triple)
        .add("cpu", t.host.cpu)
        .add("features", t.host.features);
  return key;
}

bool costCalibrationEnabled() { return env::getBool(kCostCalibrationEnv, true); }

CostCalibration loadCostCalibration(const Target& t, PersistentLayers& layers) {
  if (!costCalibrationEnabled()) return {};
  const CacheKey key = calibrationKey(t);
  std::optional<std::vector<uint8_t>> bytes = layers.load(key, EntryKind::MachineProfile);
  if (!bytes) return {};
  std::optional<CostCalibration> c = parseCostCalibration(
      std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
  if (!c) {
    log().warn(
        "cost calibration: {} does not hold a valid calibration; the cost model keeps this "
        "machine's profile (`stitch tune fit` writes a new one)",
        layers.describe(key));
    return {};
  }
  log().debug("cost calibration: fitted to {} measured plans ({})", c->samples,
              layers.describe(key));
  return *c;
}

void storeCostCalibration(const Target& t, const CostCalibration& c, PersistentLayers& layers) {
  const std::string text = serializeCostCalibration(c);
  layers.store(calibrationKey(t),
               std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()),
               EntryKind::MachineProfile);
}

CostCalibration probeCostCalibration(const Target& t) {
  if (!costCalibrationEnabled()) return {};
  std::unique_ptr<PersistentLayers> layers = PersistentLayers::fromEnv();
  return loadCostCalibration(t, *layers);
}

}  // namespace stitch::rt
