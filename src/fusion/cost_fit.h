// Fitting the cost model's hardware figures to measured plan times.
//
// The built-in profiles (hardware.h) are datasheet figures derated by hand; a machine's measured
// plans say what it really does. A sample is one measured plan: the KernelSummary of each of its
// kernels and the plan's measured median wall time. The model's time of a sample under a profile
// is the sum of estimateKernel() over its kernels (cost_model.h), and the fit moves a few of the
// profile's figures so that those times match the measured ones.
//
// What is fitted: memoryBandwidth, memoryLatency, launchOverhead, flops, expensiveFlops and
// gridSyncTime, each one only if FitParameters selects it, each as a positive factor on the base
// profile's value, bounded to [1/100, 100]. The occupancy figures (processors, threads, registers,
// shared memory) are facts of the hardware rather than throughputs, and stay as they are; so does
// feasibility, which depends on them only, so a sample the base profile cannot run (a kernel
// wider than a block may be) is left out of the fit and of every count.
//
// The objective is the sum over samples of log(model / measured)^2. Plan times span microseconds
// (a launch-bound plan of tiny kernels) to milliseconds (a large streaming kernel): an absolute
// error would fit the slow plans and ignore the fast ones, while a log error weighs a 10% miss
// the same on both, and treats over- and under-estimates by the same factor alike. The factors
// are searched as their logs (Nelder-Mead, restarted from its best point until a restart no
// longer improves it; deterministic) so a halving and a doubling are steps of one size.
//
// A figure no sample exercises (no kernel has a grid barrier, none an expensive op, none moves a
// byte) would only drift along a flat objective, so it is frozen at its base value, as is one the
// base profile sets to zero (a factor cannot move it). A tiny penalty on the log-factors keeps the
// remaining ones at their base where the samples leave a direction flat (a rate that never wins
// its max() against the other).
//
// The objective has a ranking term too: the planner needs the order of a group's plans more than
// their times, and a profile that fits times on average can still swap two plans 10% apart. For
// every pair of one group whose measured times differ by more than 5%, the model must order them
// the same way with a gap of at least 2% (as log ratios), or pay the squared shortfall (weight 1:
// a misranked pair costs about what a sample off by a factor of e costs). An exact fit pays
// nothing for it; evaluateFit() reports how well a profile ranks.
//
// Not modelled, so a fit absorbs it into the figures it has: the model has one memory bandwidth
// for every access pattern (a strided gather, a broadcast read from cache and a coalesced stream
// are all priced at memoryBandwidth), and one launch overhead whatever the arguments; on real
// samples the fitted bandwidth is an average over the plans' access patterns, and the residual
// error (FitQuality) is what that costs.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "fusion/cost_model.h"
#include "fusion/hardware.h"

namespace stitch::fusion {

struct FitSample {
  std::vector<KernelSummary> kernels;  // at least one
  double measuredSeconds = 0;          // the plan's median wall time; > 0
  // Samples of one group are alternative plans of one graph and signature: the ranking metrics
  // compare plans within a group. Empty: in no group.
  std::string group;
  int candidate = 0;  // which plan of its group it is, as reports name it
};

// A group whose fastest plan by the model measures more than 5% slower than the group's fastest.
struct MissedPick {
  std::string group;
  int pick = 0;       // the model's fastest (its FitSample::candidate)
  int fastest = 0;    // the measured fastest
  double slower = 1;  // the pick's measured time over the fastest's: > 1.05
};

// Which HardwareProfile figures the fit may move. memoryLatency is off by default: it is added
// once per kernel, as launchOverhead is, and the two are told apart only by kernels whose compute
// outweighs their memory time.
struct FitParameters {
  bool memoryBandwidth = true;
  // The bandwidth of kernels whose traffic fits the last-level cache (hardware.h). A base without
  // one (0, every built-in profile) starts it at memoryBandwidth, where the model is the same.
  bool cacheBandwidth = true;
  bool memoryLatency = false;
  bool launchOverhead = true;
  bool flops = true;
  bool expensiveFlops = true;
  bool gridSyncTime = true;
};

// How well a profile's times match the samples'. Samples whose model time is infinite (an
// infeasible kernel) are counted out of everything.
struct FitQuality {
  int samples = 0;               // samples counted
  double medianAbsLogError = 0;  // median of |log(model / measured)|
  double rmsLogError = 0;        // root mean square of log(model / measured)
  int groups = 0;                // groups with at least two samples counted
  int pickWithin5 = 0;           // groups whose fastest plan by the model measures within 5% of
                                 // the group's fastest
  int rankedFastestFirst = 0;    // groups whose fastest plan by the model is the fastest measured
  std::vector<MissedPick> missedPicks;  // the groups not counted in pickWithin5, by name
  // The mean over groups of at least three samples of the Spearman rank correlation of model and
  // measured times (ties take their mean rank; a group whose times are all tied is left out); 0
  // when there is no such group. Two-sample groups are left out: their correlation is +-1 and
  // says no more than rankedFastestFirst.
  double spearman = 0;
};

struct FitResult {
  HardwareProfile profile;  // the base with the fitted figures; description suffixed " (fitted)"
  FitQuality before;        // of the base profile
  FitQuality after;         // of the fitted profile
  int iterations = 0;       // Nelder-Mead iterations, over all restarts
};

// Throws InvalidArgument for a sample without kernels or a measured time that is not positive.
FitQuality evaluateFit(std::span<const FitSample> samples, const HardwareProfile& hw);

// Throws InvalidArgument as evaluateFit does, and when fewer samples are feasible than `which`
// selects figures.
FitResult fitCostModel(std::span<const FitSample> samples, const HardwareProfile& base,
                       const FitParameters& which = {});

}  // namespace stitch::fusion
