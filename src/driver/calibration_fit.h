// Fitting the cost model to a machine's autotuning records: what `stitch tune fit`
// (stitch_tune_fit) does between reading the kernel cache's tuned entries and storing the
// calibration (runtime/cost_calibration.h).
//
// Design note. Each tuned entry (tuning.h) is one signature's search: its candidate plans, each
// with its kernels' summaries and, when it was timed, its measured median. Every Measured
// candidate is one fusion::FitSample, and the candidates of one entry are one group (alternative
// plans of one graph and signature: what the ranking metrics compare). Only records of this
// machine (machineIdentity) are used: another machine's times say nothing of this one's figures.
//
// Held-back records: a fit that matches the times it was fitted to may still misprice others, so
// a percentage of the records can be left out of the fit and scored apart. Which ones is decided
// by a hash of the record's identity (its entry's name, the hash of its key), not by chance, so
// that two fits of one cache hold back the same records and are compared on the same ground.
// Whole records go one way or the other: a group split between the sets would score the fit on
// plans whose alternatives it was fitted to.
//
// The calibration keeps only the figures the fit moved: a figure left at its base value (not
// selected, or frozen because no sample exercised it) stays 0, not calibrated, so that it keeps
// following the profile (a bandwidth measured again, a new built-in figure).
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "driver/tuning.h"
#include "fusion/cost_fit.h"
#include "fusion/hardware.h"
#include "runtime/target.h"

namespace stitch::driver {

// Fewer measured plans than this is too few to fit the model's five default figures (and to leave
// it one sample to spare).
inline constexpr int kMinCalibrationSamples = 6;

// A record with the identity it is grouped and held back by.
struct IdentifiedRecord {
  std::string id;  // its entry's name in the cache directory
  TuningRecord record;
};

struct CalibrationFit {
  int records = 0;        // of this machine with at least one measured plan
  int otherMachines = 0;  // of other machines: not used
  int fitRecords = 0, heldRecords = 0;
  std::vector<fusion::FitSample> fitSamples, heldSamples;
  fusion::HardwareProfile base;
  fusion::FitResult fit;
  fusion::FitQuality heldBefore, heldAfter;     // of the held-back samples (empty: none)
  rt::CostCalibration calibration;              // all zero when the fit moved nothing
  std::map<std::string, std::string> subjects;  // record id -> what it measured (the report's)
  // Why the fitted figures are not kept (empty: they are): they pick a plan within 5% of the
  // fastest in fewer groups of the fit set than the profile did. A calibration exists to make the
  // planner's choices better; one that fits times better but chooses worse is not one, and is
  // stored only when asked to (`stitch tune fit --force`).
  std::string refused;
};

// Fits `base` (the machine's facts without a calibration) to the records of `machine`, holding
// back holdBackPercent (0 to 100) percent of them. Throws InvalidArgument, saying how to make
// records and naming `source` (where they were read), when fewer than kMinCalibrationSamples
// measured plans are left to fit.
CalibrationFit fitCalibration(std::span<const IdentifiedRecord> records, std::string_view machine,
                              const fusion::HardwareProfile& base, int holdBackPercent,
                              std::string_view source);

// The report: what was used and held back, each set's fit quality before -> after with the groups
// whose pick the model misses (by their records' subjects), and the figures before -> after.
std::string calibrationFitText(const CalibrationFit& f);

}  // namespace stitch::driver
