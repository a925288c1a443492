// Fitting the cost model to this machine's autotuning records in the C API (stitch.h, "The cost
// model's calibration"): stitch_tune_fit, for `stitch tune fit`.
//
// The work is elsewhere: the records are the verified tuned entries of the cache directory the
// environment names (DiskCache::verifiedEntries, driver::decodeTuningRecord), the fit and its
// report driver/calibration_fit.h, the stored calibration runtime/cost_calibration.h. The base the
// fit starts from is the backend's own facts with its calibration cleared: a second fit starts
// from the profile again, not from the first fit's figures, so that fits do not compound.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <memory>

#include "api/api_internal.h"
#include "driver/calibration_fit.h"
#include "runtime/cost_calibration.h"
#include "runtime/kernel_cache.h"
#include "runtime/support/env.h"
#include "runtime/support/logging.h"
#include "target/target.h"

using namespace stitch;

namespace {

constexpr std::array<std::string_view, 4> kTuneFitOptions = {"backend", "hold_back", "dry_run",
                                                             "force"};
constexpr int kMaxHoldBack = 90;

int parseHoldBack(const std::string& value) {
  int v = -1;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  STITCH_CHECK(
      ec == std::errc() && end == value.data() + value.size() && v >= 0 && v <= kMaxHoldBack,
      ErrorCode::InvalidArgument,
      "hold_back '{}' is not valid: a percentage of the records, an integer from 0 to {}", value,
      kMaxHoldBack);
  return v;
}

std::string tuneFit(const char* const* keys, const char* const* values, size_t n) {
  api::checkEnvironment();
  configureLoggingFromEnv();
  std::string backendName = "auto";
  int holdBack = 0;
  bool dryRun = false;
  bool force = false;  // store a fit that ranks worse too (driver::CalibrationFit::refused)
  for (const auto& [key, value] : api::readOptions(keys, values, n, kTuneFitOptions, "tune fit")) {
    if (key == "backend") {
      backendName = value;
    } else if (key == "hold_back") {
      holdBack = parseHoldBack(value);
    } else {
      std::optional<bool> b = env::parseBool(value);
      STITCH_CHECK(b.has_value(), ErrorCode::InvalidArgument,
                   "{} '{}' is not valid: a boolean (1, true, yes, on, 0, false, no, off)", key,
                   value);
      (key == "dry_run" ? dryRun : force) = *b;
    }
  }
  rt::Backend& backend = rt::requireBackend(rt::resolveBackend(backendName));
  const rt::Target& description = backend.target();
  rt::Target uncalibrated = description;
  uncalibrated.calibration = {};
  const std::unique_ptr<target::Target> t = target::makeTarget(uncalibrated);
  STITCH_CHECK(t->generatesCode(), ErrorCode::InvalidArgument,
               "the {} backend runs no generated code: it has no cost model to fit",
               description.backend);

  rt::DiskCache cache = api::cacheDirFromEnv();
  std::vector<driver::IdentifiedRecord> records;
  int unreadable = 0;
  for (rt::DiskCache::VerifiedEntry& e : cache.verifiedEntries("entry=tuned-program")) {
    try {
      records.push_back({e.name, driver::decodeTuningRecord(e.payload)});
    } catch (const Error& err) {
      log().debug("tune fit: skipping {}: {}", (cache.dir() / e.name).string(), err.what());
      ++unreadable;
    }
  }
  // In the directory's order (readdir's) the fit would depend on the file system: by name.
  std::sort(records.begin(), records.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  const std::string machine = driver::machineIdentity(description);
  const driver::CalibrationFit f =
      driver::fitCalibration(records, machine, t->facts(), holdBack, cache.dir().string());

  std::string out =
      fmt::format("tune fit: {} ({} tuned entries in {}{})\n", machine,
                  records.size() + static_cast<size_t>(unreadable), cache.dir().string(),
                  unreadable ? fmt::format(", {} unreadable", unreadable) : "");
  out += driver::calibrationFitText(f);
  const std::string refused = f.refused.empty() ? "" : "; it would be refused: " + f.refused;
  if (f.calibration == rt::CostCalibration{}) {
    out += "stored: nothing (the fit moved no figure)\n";
  } else if (dryRun) {
    out += "stored: nothing (dry run" + refused + ")\n";
  } else if (!f.refused.empty() && !force) {
    out += "stored: nothing (" + f.refused + ")\n";
  } else {
    rt::PersistentLayers* layers = backend.persistentLayers();
    std::unique_ptr<rt::PersistentLayers> own;
    if (!layers) layers = (own = rt::PersistentLayers::fromEnv()).get();
    rt::storeCostCalibration(description, f.calibration, *layers);
    out += fmt::format(
        "stored: this machine's calibration ({} plans), {}; processes started from now on plan "
        "with it (STITCH_COST_CALIBRATION=0 ignores it)\n",
        f.calibration.samples, layers->describe(rt::calibrationKey(description)));
  }
  return out;
}

}  // namespace

extern "C" {

stitch_status_t stitch_tune_fit(const char* const* keys, const char* const* values,
                                size_t num_options, char* report, size_t capacity, size_t* needed) {
  if (num_options) {
    STITCH_API_REQUIRE(keys);
    STITCH_API_REQUIRE(values);
  }
  if (capacity) STITCH_API_REQUIRE(report);
  STITCH_API_GUARD({
    api::copyOut(tuneFit(keys, values, num_options), report, capacity, needed);
    return STITCH_OK;
  })
}

}  // extern "C"
