// Fitting the cost model to a machine's autotuning records (design note in calibration_fit.h).
#include "driver/calibration_fit.h"

#include <fmt/format.h>

#include "runtime/support/error.h"
#include "runtime/support/hash.h"

namespace stitch::driver {

namespace {

std::string quality(const fusion::FitQuality& q) {
  return fmt::format(
      "median |log(model/measured)| {:.3f}, model's pick within 5% {}/{}, fastest "
      "ranked first {}/{}, spearman {:.2f}",
      q.medianAbsLogError, q.pickWithin5, q.groups, q.rankedFastestFirst, q.groups, q.spearman);
}

// One line per group the model's pick misses, under the figures of `which`: the diagnosis a count
// cannot give (is the miss noise, or a cost the model lacks?).
std::string missedLines(std::string_view which, const fusion::FitQuality& q,
                        const std::map<std::string, std::string>& subjects) {
  std::string out;
  for (const fusion::MissedPick& m : q.missedPicks) {
    auto it = subjects.find(m.group);
    out += fmt::format("    missed ({}): {}: the model picks candidate {}, {:.2f}x candidate {}\n",
                       which, it == subjects.end() ? m.group : it->second, m.pick, m.slower,
                       m.fastest);
  }
  return out;
}

std::string qualityLines(std::string_view what, const fusion::FitQuality& before,
                         const fusion::FitQuality& after,
                         const std::map<std::string, std::string>& subjects) {
  return fmt::format("{}:\n  before: {}\n{}  after:  {}\n{}", what, quality(before),
                     missedLines("before", before, subjects), quality(after),
                     missedLines("after", after, subjects));
}

}  // namespace

CalibrationFit fitCalibration(std::span<const IdentifiedRecord> records, std::string_view machine,
                              const fusion::HardwareProfile& base, int holdBackPercent,
                              std::string_view source) {
  STITCH_INTERNAL(holdBackPercent >= 0 && holdBackPercent <= 100, "hold back {}%", holdBackPercent);
  CalibrationFit f;
  f.base = base;
  for (const IdentifiedRecord& r : records) {
    if (r.record.machine != machine) {
      ++f.otherMachines;
      continue;
    }
    std::vector<fusion::FitSample> samples;
    for (const CandidateTiming& c : r.record.candidates)
      if (c.outcome == CandidateOutcome::Measured && c.medianSeconds > 0 && !c.summaries.empty())
        samples.push_back(fusion::FitSample{c.summaries, c.medianSeconds, r.id, c.candidate});
    if (samples.empty()) continue;
    f.subjects[r.id] = r.record.subject.empty() ? r.id : r.record.subject;
    ++f.records;
    const bool held = static_cast<int>(fnv1a64(r.id) % 100) < holdBackPercent;
    ++(held ? f.heldRecords : f.fitRecords);
    std::vector<fusion::FitSample>& into = held ? f.heldSamples : f.fitSamples;
    into.insert(into.end(), samples.begin(), samples.end());
  }
  STITCH_CHECK(static_cast<int>(f.fitSamples.size()) >= kMinCalibrationSamples,
               ErrorCode::InvalidArgument,
               "too few measured plans to fit the cost model: {} of this machine ({}) in {} "
               "({} tuning record{}, {} held back; {} of other machines), at least {} needed. "
               "Run programs with STITCH_AUTOTUNE=1 on this machine to record some: each new "
               "input signature's tuning times up to STITCH_AUTOTUNE_CANDIDATES plans (e.g. "
               "STITCH_AUTOTUNE=1 stitch run FILE --backend B)",
               f.fitSamples.size(), machine, source, f.records, f.records == 1 ? "" : "s",
               f.heldRecords, f.otherMachines, kMinCalibrationSamples);
  f.fit = fusion::fitCostModel(f.fitSamples, base);
  if (!f.heldSamples.empty()) {
    f.heldBefore = fusion::evaluateFit(f.heldSamples, base);
    f.heldAfter = fusion::evaluateFit(f.heldSamples, f.fit.profile);
  }
  // Only the figures the fit moved (the note above).
  const fusion::HardwareProfile& p = f.fit.profile;
  auto moved = [](double fitted, double was) { return fitted != was ? fitted : 0.0; };
  rt::CostCalibration& c = f.calibration;
  c.memoryBandwidth = moved(p.memoryBandwidth, base.memoryBandwidth);
  c.cacheBandwidth = moved(p.cacheBandwidth, base.cacheBandwidth);
  c.memoryLatency = moved(p.memoryLatency, base.memoryLatency);
  c.launchOverhead = moved(p.launchOverhead, base.launchOverhead);
  c.flops = moved(p.flops, base.flops);
  c.expensiveFlops = moved(p.expensiveFlops, base.expensiveFlops);
  c.gridSyncTime = moved(p.gridSyncTime, base.gridSyncTime);
  if (c != rt::CostCalibration{}) c.samples = f.fit.after.samples;
  if (f.fit.after.pickWithin5 < f.fit.before.pickWithin5) {
    f.refused = fmt::format(
        "the fitted figures pick a plan within 5% of the fastest in {} of the fit set's {} groups, "
        "the profile's in {}",
        f.fit.after.pickWithin5, f.fit.after.groups, f.fit.before.pickWithin5);
  }
  return f;
}

std::string calibrationFitText(const CalibrationFit& f) {
  std::string out = fmt::format(
      "records: {} of this machine, {} fitted ({} plans), {} held back ({} plans); {} of other "
      "machines not used\n",
      f.records, f.fitRecords, f.fitSamples.size(), f.heldRecords, f.heldSamples.size(),
      f.otherMachines);
  out += qualityLines(
      fmt::format("fit set ({} plans, {} groups)", f.fit.after.samples, f.fit.after.groups),
      f.fit.before, f.fit.after, f.subjects);
  if (f.heldSamples.empty())
    out += "held back: none (--hold-back PERCENT scores the fit on records it did not see)\n";
  else
    out += qualityLines(
        fmt::format("held back ({} plans, {} groups)", f.heldAfter.samples, f.heldAfter.groups),
        f.heldBefore, f.heldAfter, f.subjects);
  const fusion::HardwareProfile& a = f.fit.profile;
  const fusion::HardwareProfile& b = f.base;
  out += "figures (before -> after):\n";
  auto line = [&](std::string_view name, double before, double after, double scale,
                  std::string_view unit) {
    out += fmt::format("  {:<16} {:.4g} {} -> {:.4g} {}{}\n", name, before * scale, unit,
                       after * scale, unit, before == after ? " (unchanged)" : "");
  };
  line("memory bandwidth", b.memoryBandwidth, a.memoryBandwidth, 1e-9, "GB/s");
  line("cache bandwidth", b.cacheBandwidth, a.cacheBandwidth, 1e-9, "GB/s");
  line("memory latency", b.memoryLatency, a.memoryLatency, 1e6, "us");
  line("launch overhead", b.launchOverhead, a.launchOverhead, 1e6, "us");
  line("flops", b.flops, a.flops, 1e-9, "G/s");
  line("expensive flops", b.expensiveFlops, a.expensiveFlops, 1e-9, "G/s");
  line("grid sync time", b.gridSyncTime, a.gridSyncTime, 1e6, "us");
  return out;
}

}  // namespace stitch::driver
