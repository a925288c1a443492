// The cost model's calibration (runtime/cost_calibration.h) and its fit (driver/calibration_fit.h):
// the text form and what it refuses, the key (the machine, not the figures), the store and load
// through the persistent layers with STITCH_COST_CALIBRATION, the overlay on every target's
// facts() and on program keys, the disk layer's verified entries of a kind, and the fit from
// tuning records: deterministic hold-back, only this machine's records, too few is an error.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "common/env_guard.h"
#include "common/temp_dir.h"
#include "driver/calibration_fit.h"
#include "driver/program_entry.h"
#include "fusion/cost_model.h"
#include "fusion/hardware.h"
#include "runtime/cost_calibration.h"
#include "runtime/persistent_layers.h"
#include "runtime/support/error.h"
#include "target/target.h"

using namespace stitch;
using namespace stitch::rt;
using stitch::testing::EnvGuard;
using stitch::testing::TempDir;
namespace fs = std::filesystem;

namespace {

CostCalibration fitted() {
  CostCalibration c;
  c.memoryBandwidth = 1.2345678901234e10;
  c.launchOverhead = 3.5e-6;
  c.flops = 4e11;
  c.expensiveFlops = 2.5e10;
  c.samples = 42;
  return c;
}

Target hostMachine() {
  Target t;
  t.backend = "cpu";
  t.arch = "host";
  t.host.triple = "x86_64-unknown-linux-gnu";
  t.host.cpu = "znver4";
  t.host.features = "+avx,+avx2,+avx512f";
  t.hostProfile.model = "AMD EPYC 9R14 96-Core Processor";
  t.hostProfile.threads = 2;
  t.hostProfile.simdWidth = 16;
  t.hostProfile.memoryBandwidth = 3e10;
  return t;
}

std::unique_ptr<PersistentLayers> layersIn(const fs::path& dir) {
  return std::make_unique<PersistentLayers>(std::make_unique<DiskCache>(dir), nullptr);
}

void storeText(PersistentLayers& layers, const CacheKey& key, const std::string& text) {
  layers.store(key, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()),
               EntryKind::MachineProfile);
}

}  // namespace

TEST(CostCalibration, TextFormRoundTrips) {
  const CostCalibration c = fitted();
  const std::string text = serializeCostCalibration(c);
  EXPECT_EQ(text.rfind("stitch-cost-calibration 1\n", 0), 0u) << text;
  std::optional<CostCalibration> back = parseCostCalibration(text);
  ASSERT_TRUE(back.has_value()) << text;
  EXPECT_EQ(*back, c);
}

TEST(CostCalibration, ParsingRefusesAnythingElse) {
  const std::string good = serializeCostCalibration(fitted());
  CostCalibration none;
  none.samples = 3;
  const std::string noFigure = serializeCostCalibration(none);  // fitted, yet no figure
  auto replaced = [&](std::string_view from, std::string_view to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  // The text with key's line holding `value`.
  auto withValue = [&](std::string_view key, std::string_view value) {
    std::string s = good;
    const size_t at = s.find("\n" + std::string(key) + "=") + key.size() + 2;
    EXPECT_GT(at, key.size() + 2) << key;
    return s.replace(at, s.find('\n', at) - at, value);
  };
  const std::vector<std::string> bad = {
      "",
      replaced("stitch-cost-calibration 1", "stitch-cost-calibration 2"),
      replaced("stitch-cost-calibration 1", "stitch-host-profile 1"),
      good.substr(0, good.size() - 1),      // no final newline
      replaced("samples=42\n", ""),         // a field missing
      good + "samples=42\n",                // repeated
      good + "color=blue\n",                // unknown
      withValue("flops", "-4e11"),          // negative
      withValue("launch_overhead", "inf"),  // not finite
      withValue("launch_overhead", "nan"),
      withValue("launch_overhead", ""),
      withValue("samples", "0"),  // fitted to nothing
      withValue("samples", "4x"),
      noFigure,
  };
  for (const std::string& text : bad)
    EXPECT_FALSE(parseCostCalibration(text).has_value()) << "accepted:\n" << text;
  EXPECT_FALSE(validCostCalibration(CostCalibration{}));
  CostCalibration infinite = fitted();
  infinite.memoryBandwidth = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(validCostCalibration(infinite));
  EXPECT_TRUE(validCostCalibration(fitted()));
}

TEST(CostCalibration, KeyNamesTheMachineNotTheFigures) {
  const Target t = hostMachine();
  const uint64_t key = calibrationKey(t).hash();
  EXPECT_NE(calibrationKey(t).canonical().find("cost-calibration"), std::string::npos);
  Target c = t;
  c.calibration = fitted();  // the figures are what is stored, not what it is found by
  c.hostProfile.memoryBandwidth = 2e10;
  EXPECT_EQ(calibrationKey(c).hash(), key);
  for (auto change : std::vector<void (*)(Target&)>{
           [](Target& m) { m.hostProfile.model = "Intel Xeon"; },
           [](Target& m) { m.hostProfile.threads = 4; },
           [](Target& m) { m.host.cpu = "znver3"; },
           [](Target& m) { m.host.features = "+avx,+avx2,-avx512f"; },
           [](Target& m) { m.backend = "other"; },
       }) {
    Target m = t;
    change(m);
    EXPECT_NE(calibrationKey(m).hash(), key);
  }
  Target gpu;
  gpu.backend = "cuda";
  gpu.arch = "sm_90";
  gpu.device.name = "NVIDIA H100 80GB HBM3";
  gpu.device.driver = "13000";
  Target otherDriver = gpu;
  otherDriver.device.driver = "13010";
  EXPECT_NE(calibrationKey(gpu).hash(), calibrationKey(otherDriver).hash());
}

TEST(CostCalibration, StoredLoadedAndIgnoredWhenAskedOrNotValid) {
  TempDir dir;
  EnvGuard on("STITCH_COST_CALIBRATION", nullptr);
  const Target t = hostMachine();
  {
    auto layers = layersIn(dir.path());
    EXPECT_EQ(loadCostCalibration(t, *layers), CostCalibration{});  // nothing stored
    storeCostCalibration(t, fitted(), *layers);
  }
  auto layers = layersIn(dir.path());  // another process
  EXPECT_EQ(loadCostCalibration(t, *layers), fitted());
  Target other = t;
  other.hostProfile.threads = 8;
  EXPECT_EQ(loadCostCalibration(other, *layers), CostCalibration{});
  {
    EnvGuard off("STITCH_COST_CALIBRATION", "0");
    EXPECT_EQ(loadCostCalibration(t, *layers), CostCalibration{});
  }
  {
    EnvGuard bad("STITCH_COST_CALIBRATION", "maybe");
    EXPECT_THROW(loadCostCalibration(t, *layers), Error);
  }
  // An authentic entry whose text is not a valid calibration is never trusted.
  CostCalibration negative = fitted();
  negative.flops = -1;
  storeText(*layers, calibrationKey(t), serializeCostCalibration(negative));
  EXPECT_EQ(loadCostCalibration(t, *layers), CostCalibration{});
  storeText(*layers, calibrationKey(t), "stitch-cost-calibration 1\nflops=1\n");
  EXPECT_EQ(loadCostCalibration(t, *layers), CostCalibration{});
}

TEST(CostCalibration, EveryTargetsFactsTakeTheNonZeroFigures) {
  Target t = hostMachine();
  const fusion::HardwareProfile plain = target::makeTarget(t)->facts();
  t.calibration = fitted();
  const fusion::HardwareProfile calibrated = target::makeTarget(t)->facts();
  EXPECT_EQ(calibrated.memoryBandwidth, fitted().memoryBandwidth);  // over the measured figure
  EXPECT_EQ(calibrated.launchOverhead, fitted().launchOverhead);
  EXPECT_EQ(calibrated.flops, fitted().flops);
  EXPECT_EQ(calibrated.expensiveFlops, fitted().expensiveFlops);
  EXPECT_EQ(calibrated.memoryLatency, plain.memoryLatency);  // 0: not calibrated
  EXPECT_EQ(calibrated.gridSyncTime, plain.gridSyncTime);
  EXPECT_EQ(calibrated.processors, plain.processors);
  EXPECT_NE(calibrated.description.find("calibrated on 42 measured plans"), std::string::npos)
      << calibrated.description;
  // A GPU target too (planning needs no device).
  Target gpu = target::namedTarget("sm_90");
  const double nominal = target::makeTarget(gpu)->facts().launchOverhead;
  gpu.calibration.launchOverhead = nominal * 2;
  gpu.calibration.samples = 7;
  EXPECT_EQ(target::makeTarget(gpu)->facts().launchOverhead, nominal * 2);
  // And the program entries' key: another calibration plans otherwise, so it is another entry.
  Target uncalibrated = hostMachine();
  EXPECT_NE(driver::serializeTarget(t), driver::serializeTarget(uncalibrated));
}

TEST(CostCalibration, DiskCacheReadsTheVerifiedEntriesOfOneKind) {
  TempDir dir;
  DiskCache disk(dir.path());
  auto key = [](std::string_view entry, std::string_view id) {
    CacheKey k;
    k.add("entry", std::string(entry)).add("id", std::string(id));
    return k;
  };
  const std::vector<uint8_t> a{1, 2, 3}, b{4, 5}, other{6};
  disk.store(key("tuned-program", "a"), a, EntryKind::Tuned);
  disk.store(key("tuned-program", "b"), b, EntryKind::Tuned);
  disk.store(key("program", "c"), other, EntryKind::Program);
  // A damaged one is skipped, not returned and not removed.
  const fs::path damaged = disk.pathFor(key("tuned-program", "b"));
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  std::vector<DiskCache::VerifiedEntry> found = disk.verifiedEntries("entry=tuned-program");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].payload, a);
  EXPECT_EQ(found[0].name, disk.pathFor(key("tuned-program", "a")).filename().string());
  EXPECT_TRUE(fs::exists(damaged));
  EXPECT_TRUE(DiskCache(dir.path() / "none").verifiedEntries("entry=tuned-program").empty());
  // Under another key (another user's directory key, a foreign fleet), nothing verifies.
  const auto foreign = std::make_shared<CacheSecret>(std::string(32, 'k'), "a test's key");
  DiskCache keyed(dir.path(), kDefaultDiskCacheMaxMB << 20, foreign);
  EXPECT_TRUE(keyed.verifiedEntries("entry=tuned-program").empty());
}

namespace {

fusion::HardwareProfile builtinHost() { return *fusion::findProfile("host"); }

// A record of `plans` candidates measured on `machine` as a profile with half the built-in
// bandwidth and three times its launch overhead would run them.
driver::IdentifiedRecord record(const std::string& id, const std::string& machine, int plans) {
  fusion::HardwareProfile truth = builtinHost();
  truth.memoryBandwidth *= 0.5;
  truth.launchOverhead *= 3;
  driver::IdentifiedRecord r{id, {}};
  r.record.machine = machine;
  const int seed = static_cast<int>(fusion::KernelSummary{}.blocks + id.size() * 7 + id.back());
  for (int c = 0; c < plans; ++c) {
    driver::CandidateTiming t;
    t.candidate = c;
    for (int k = 0; k <= c; ++k) {
      fusion::KernelSummary s;
      const int64_t bytes = int64_t{4096} << ((seed + c * 5 + k * 3) % 14);
      s.bytesRead = bytes / 2;
      s.bytesWritten = bytes / 2;
      s.cheapOps = (c + k) % 3 == 2 ? 40 * bytes : bytes / 8;
      s.expensiveOps = (c + k) % 3 == 1 ? bytes / 4 : 0;
      s.blocks = 1 + (seed + k) % 4;
      s.threadsPerBlock = 1;
      t.summaries.push_back(s);
      t.medianSeconds += fusion::estimateKernel(s, truth).time;
    }
    t.kernels = c + 1;
    r.record.candidates.push_back(std::move(t));
  }
  return r;
}

}  // namespace

TEST(CalibrationFit, FitsThisMachinesRecordsAndHoldsBackTheSameOnesEveryTime) {
  std::vector<driver::IdentifiedRecord> records;
  for (int i = 0; i < 12; ++i)
    records.push_back(record(fmt::format("{:016x}.stitchk", i * 0x9e3779b9ull), "this", 3));
  records.push_back(record("elsewhere.stitchk", "another machine", 3));
  // No last-level cache to fit: every kernel is priced at DRAM bandwidth, as the truth prices
  // them (the cache-resident bandwidth has a test of its own, CostFit.*).
  fusion::HardwareProfile base = builtinHost();
  base.cacheBytes = 0;
  const driver::CalibrationFit f = driver::fitCalibration(records, "this", base, 25, "here");
  EXPECT_EQ(f.records, 12);
  EXPECT_EQ(f.otherMachines, 1);
  EXPECT_EQ(f.fitRecords + f.heldRecords, 12);
  EXPECT_GT(f.heldRecords, 0);
  EXPECT_EQ(f.fitSamples.size(), static_cast<size_t>(3 * f.fitRecords));
  EXPECT_LT(f.fit.after.medianAbsLogError, f.fit.before.medianAbsLogError);
  EXPECT_LT(f.heldAfter.medianAbsLogError, f.heldBefore.medianAbsLogError);
  EXPECT_NEAR(f.calibration.memoryBandwidth / base.memoryBandwidth, 0.5, 0.05);
  EXPECT_EQ(f.calibration.memoryLatency, 0);  // not fitted: the profile's stands
  EXPECT_EQ(f.calibration.samples, f.fit.after.samples);
  EXPECT_TRUE(validCostCalibration(f.calibration));
  // The same records held back again, whatever their order.
  std::vector<driver::IdentifiedRecord> reversed(records.rbegin(), records.rend());
  const driver::CalibrationFit again = driver::fitCalibration(reversed, "this", base, 25, "here");
  EXPECT_EQ(again.heldRecords, f.heldRecords);
  EXPECT_EQ(again.heldSamples.size(), f.heldSamples.size());
  const std::string text = driver::calibrationFitText(f);
  for (const char* part : {"records: 12 of this machine", "fit set (", "held back (",
                           "memory bandwidth", "before: median |log(model/measured)|"})
    EXPECT_NE(text.find(part), std::string::npos) << part << " not in:\n" << text;
  // Nothing held back at 0%.
  EXPECT_EQ(driver::fitCalibration(records, "this", base, 0, "here").heldRecords, 0);
}

TEST(CalibrationFit, TheReportNamesTheRecordsWhosePickTheModelMisses) {
  const fusion::HardwareProfile base = builtinHost();
  std::vector<driver::IdentifiedRecord> records;
  for (int i = 0; i < 4; ++i) records.push_back(record(fmt::format("r{}.stitchk", i), "this", 3));
  // In the first record, the plan the base profile prices fastest measured three times slower
  // than the others' fastest.
  driver::TuningRecord& r = records[0].record;
  r.subject = "ln(f32[4,8])";
  std::vector<double> model;
  for (const driver::CandidateTiming& c : r.candidates) {
    double t = 0;
    for (const fusion::KernelSummary& k : c.summaries) t += fusion::estimateKernel(k, base).time;
    model.push_back(t);
  }
  const size_t pick =
      static_cast<size_t>(std::min_element(model.begin(), model.end()) - model.begin());
  double others = 1e9;
  for (size_t c = 0; c < r.candidates.size(); ++c)
    if (c != pick) others = std::min(others, r.candidates[c].medianSeconds);
  r.candidates[pick].medianSeconds = 3 * others;
  const driver::CalibrationFit f = driver::fitCalibration(records, "this", base, 0, "here");
  ASSERT_FALSE(f.fit.before.missedPicks.empty());
  const std::string text = driver::calibrationFitText(f);
  const std::string line = fmt::format(
      "missed (before): ln(f32[4,8]): the model picks candidate {}, 3.00x candidate ", pick);
  EXPECT_NE(text.find(line), std::string::npos) << line << " not in:\n" << text;
}

TEST(CalibrationFit, TooFewMeasuredPlansIsAnErrorThatSaysHowToRecordThem) {
  std::vector<driver::IdentifiedRecord> records = {record("a.stitchk", "this", 2),
                                                   record("b.stitchk", "other", 3)};
  // Plans not measured are not samples.
  records.push_back(record("c.stitchk", "this", 3));
  records.back().record.candidates[1].outcome = driver::CandidateOutcome::OverBudget;
  records.back().record.candidates[1].medianSeconds = 0;
  try {
    driver::fitCalibration(records, "this", builtinHost(), 0, "/the/cache");
    FAIL() << "fitted 4 plans";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    const std::string m = e.what();
    EXPECT_NE(m.find("4 of this machine"), std::string::npos) << m;
    EXPECT_NE(m.find("/the/cache"), std::string::npos) << m;
    EXPECT_NE(m.find("STITCH_AUTOTUNE=1"), std::string::npos) << m;
  }
}
