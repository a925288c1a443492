// Fitting the cost model's figures to measured plan times (fusion/cost_fit.h): on samples timed
// by a known "true" profile the fit must find that profile again, rank as it does, leave alone
// what the samples cannot tell, and refuse what it cannot fit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "fusion/cost_fit.h"
#include "fusion/cost_model.h"
#include "fusion/hardware.h"
#include "runtime/support/error.h"

using namespace stitch;
using namespace stitch::fusion;

namespace {

HardwareProfile hostProfile() {
  auto p = findProfile("host");
  EXPECT_TRUE(p.has_value());
  return *p;
}

// The host profile derated the way a slower machine would be: half the bandwidth, launches three
// times dearer, transcendentals four times slower.
HardwareProfile trueProfile() {
  HardwareProfile p = hostProfile();
  p.memoryBandwidth *= 0.5;
  p.launchOverhead *= 3;
  p.expensiveFlops *= 0.25;
  return p;
}

double modelSeconds(const std::vector<KernelSummary>& kernels, const HardwareProfile& hw) {
  double total = 0;
  for (const KernelSummary& k : kernels) total += estimateKernel(k, hw).time;
  return total;
}

// A host kernel (one thread per block) moving `bytes`, over `blocks` tasks.
KernelSummary hostKernel(int64_t bytes, int64_t blocks) {
  KernelSummary k;
  k.bytesRead = bytes / 2;
  k.bytesWritten = bytes - bytes / 2;
  k.blocks = blocks;
  k.threadsPerBlock = 1;
  return k;
}

// Forty plans of one to four kernels, from 4 KiB (launch-bound) to 64 MiB (bandwidth-bound),
// cycling through streaming, transcendental-bound, arithmetic-bound and grid-synchronized
// kernels, over one or several tasks, so that each figure decides some sample's time.
std::vector<FitSample> variedSamples(const HardwareProfile& truth, bool gridSyncs = true,
                                     bool expensive = true) {
  std::vector<FitSample> samples;
  for (int i = 0; i < 40; ++i) {
    FitSample s;
    for (int j = 0; j < 1 + i % 4; ++j) {
      const int64_t bytes = int64_t{4096} << ((i * 3 + j * 5) % 15);
      KernelSummary k = hostKernel(bytes, 1 + (i * 7 + j) % 8);
      switch ((i + j) % 4) {
        case 0: k.cheapOps = bytes / 8; break;
        case 1:
          k.cheapOps = bytes / 4;
          if (expensive) k.expensiveOps = bytes / 2;
          break;
        case 2: k.cheapOps = 32 * bytes; break;
        case 3:
          k.cheapOps = bytes / 4;
          if (expensive) k.recomputeExpensiveOps = bytes / 16;
          if (gridSyncs) k.gridSyncs = 1 + i % 2;
          break;
      }
      s.kernels.push_back(k);
    }
    s.measuredSeconds = modelSeconds(s.kernels, truth);
    samples.push_back(std::move(s));
  }
  return samples;
}

double factor(const HardwareProfile& fitted, const HardwareProfile& base,
              double HardwareProfile::*field) {
  return fitted.*field / base.*field;
}

}  // namespace

TEST(CostFit, RecoversTheProfileThatTimedTheSamples) {
  const HardwareProfile base = hostProfile(), truth = trueProfile();
  const std::vector<FitSample> samples = variedSamples(truth);
  const FitResult fit = fitCostModel(samples, base);

  EXPECT_NEAR(factor(fit.profile, base, &HardwareProfile::memoryBandwidth), 0.5, 0.5 * 0.05);
  EXPECT_NEAR(factor(fit.profile, base, &HardwareProfile::launchOverhead), 3.0, 3.0 * 0.05);
  EXPECT_NEAR(factor(fit.profile, base, &HardwareProfile::expensiveFlops), 0.25, 0.25 * 0.05);
  EXPECT_NEAR(factor(fit.profile, base, &HardwareProfile::flops), 1.0, 0.05);
  EXPECT_NEAR(factor(fit.profile, base, &HardwareProfile::gridSyncTime), 1.0, 0.05);
  EXPECT_EQ(fit.profile.memoryLatency, base.memoryLatency);  // not selected by default
  EXPECT_EQ(fit.profile.processors, base.processors);

  EXPECT_EQ(fit.before.samples, 40);
  EXPECT_EQ(fit.after.samples, 40);
  EXPECT_LT(fit.after.medianAbsLogError, 1e-3);
  EXPECT_LT(fit.after.rmsLogError, 1e-3);
  EXPECT_GT(fit.before.medianAbsLogError, 0.3);
  EXPECT_GT(fit.iterations, 0);

  EXPECT_EQ(fit.profile.name, base.name);
  EXPECT_EQ(fit.profile.description, base.description + " (fitted)");

  // The same samples in the opposite order fit to the same profile: nothing depends on chance.
  const std::vector<FitSample> reversed(samples.rbegin(), samples.rend());
  const FitResult again = fitCostModel(reversed, base);
  EXPECT_NEAR(again.profile.memoryBandwidth / fit.profile.memoryBandwidth, 1.0, 1e-3);
  EXPECT_EQ(fitCostModel(samples, base).profile.launchOverhead, fit.profile.launchOverhead);
}

TEST(CostFit, FittedProfileRanksThePlansTheBaseMisranks) {
  const HardwareProfile base = hostProfile(), truth = trueProfile();
  std::vector<FitSample> samples = variedSamples(truth);
  auto plan = [&](std::vector<KernelSummary> kernels, std::string group) {
    FitSample s;
    s.kernels = std::move(kernels);
    s.measuredSeconds = modelSeconds(s.kernels, truth);
    s.group = std::move(group);
    samples.push_back(std::move(s));
  };
  // Two trade-offs the base prices wrong, each as three groups of slightly different sizes; a
  // third, plainly slow plan of six kernels makes every group rankable by Spearman.
  for (int v = 0; v < 3; ++v) {
    const int64_t d = 500 * v;
    // Launches against bytes: three small kernels (base: 18 us) or one that moves more (base:
    // 20.5 us). Dearer launches and a slower memory make the one kernel faster (46 against
    // 51 us).
    const std::string launches = "launches" + std::to_string(v);
    plan({hostKernel(13500 + d, 2), hostKernel(13500, 2), hostKernel(13500, 2)}, launches);
    plan({hostKernel(231000 + d, 2)}, launches);
    plan(std::vector<KernelSummary>(6, hostKernel(100000, 2)), launches);
    // Recomputing a transcendental against storing it: one kernel that recomputes (base: 20 us)
    // or two that pass the value through memory (base: 22 us). Slower transcendentals make the
    // two faster (54 against 75 us).
    const std::string recompute = "recompute" + std::to_string(v);
    KernelSummary fused = hostKernel(150000 + d, 2);
    fused.recomputeExpensiveOps = 90000;
    plan({fused}, recompute);
    plan({hostKernel(88500 + d, 2), hostKernel(88500, 2)}, recompute);
    plan(std::vector<KernelSummary>(6, hostKernel(100000, 2)), recompute);
  }

  const FitResult fit = fitCostModel(samples, base);
  EXPECT_EQ(fit.before.groups, 6);
  EXPECT_EQ(fit.before.pickWithin5, 0);
  EXPECT_EQ(fit.before.rankedFastestFirst, 0);
  EXPECT_EQ(fit.after.groups, 6);
  EXPECT_EQ(fit.after.pickWithin5, 6);
  EXPECT_EQ(fit.after.rankedFastestFirst, 6);
  EXPECT_NEAR(fit.before.spearman, 0.5, 1e-12);  // the first two swapped, the third last
  EXPECT_NEAR(fit.after.spearman, 1.0, 1e-12);
}

TEST(CostFit, FiguresNoSampleExercisesStayAtTheBase) {
  HardwareProfile base = hostProfile(), truth = trueProfile();
  // The truth's grid barriers are dearer, but no sample has one, so nothing can tell.
  truth.gridSyncTime *= 5;
  const std::vector<FitSample> samples =
      variedSamples(truth, /*gridSyncs=*/false, /*expensive=*/false);
  const FitResult fit = fitCostModel(samples, base);
  EXPECT_EQ(fit.profile.gridSyncTime, base.gridSyncTime);
  EXPECT_EQ(fit.profile.expensiveFlops, base.expensiveFlops);
  EXPECT_NEAR(factor(fit.profile, base, &HardwareProfile::memoryBandwidth), 0.5, 0.5 * 0.05);
  EXPECT_NEAR(factor(fit.profile, base, &HardwareProfile::launchOverhead), 3.0, 3.0 * 0.05);
  EXPECT_LT(fit.after.medianAbsLogError, 1e-3);

  // A figure deselected stays too, even when the samples exercise it.
  FitParameters which;
  which.launchOverhead = false;
  const FitResult partial = fitCostModel(variedSamples(truth), base, which);
  EXPECT_EQ(partial.profile.launchOverhead, base.launchOverhead);
}

TEST(CostFit, TooFewSamplesIsAnError) {
  const HardwareProfile base = hostProfile();
  std::vector<FitSample> samples = variedSamples(trueProfile());
  samples.resize(3);
  try {
    fitCostModel(samples, base);  // six figures selected by default
    FAIL() << "expected an error";
  } catch (const stitch::Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(e.message().find("3 usable samples"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("at least 6"), std::string::npos) << e.message();
  }

  // Infeasible samples (two threads per block on the host) do not count.
  KernelSummary tooWide = hostKernel(4096, 1);
  tooWide.threadsPerBlock = 2;
  for (int i = 0; i < 2; ++i) samples.push_back({{tooWide}, 1e-5, ""});
  EXPECT_THROW(fitCostModel(samples, base), stitch::Error);
  FitParameters two;
  two.flops = two.expensiveFlops = two.gridSyncTime = two.cacheBandwidth = false;
  const FitResult fit = fitCostModel(samples, base, two);
  EXPECT_EQ(fit.after.samples, 3);

  samples[0].measuredSeconds = 0;
  EXPECT_THROW(evaluateFit(samples, base), stitch::Error);
  samples[0].measuredSeconds = 1e-5;
  samples[0].kernels.clear();
  EXPECT_THROW(evaluateFit(samples, base), stitch::Error);
}

TEST(CostFit, EvaluateCountsByHand) {
  const HardwareProfile hw = hostProfile();
  // On two or more tasks a host kernel streams at full bandwidth: 5.1 us of launch and latency
  // plus its bytes at 15 GB/s, so these take 10, 20 and 40 us.
  const std::vector<KernelSummary> k10 = {hostKernel(73500, 2)};
  const std::vector<KernelSummary> k20 = {hostKernel(223500, 2)};
  const std::vector<KernelSummary> k40 = {hostKernel(523500, 2)};
  ASSERT_NEAR(modelSeconds(k10, hw), 10e-6, 1e-12);
  ASSERT_NEAR(modelSeconds(k20, hw), 20e-6, 1e-12);
  ASSERT_NEAR(modelSeconds(k40, hw), 40e-6, 1e-12);
  // Measured = model * exp(e), so |log(model / measured)| = |e|.
  auto sample = [&](const std::vector<KernelSummary>& k, double e, std::string group,
                    int candidate = 0) {
    return FitSample{k, modelSeconds(k, hw) * std::exp(e), std::move(group), candidate};
  };
  KernelSummary tooWide = hostKernel(4096, 1);
  tooWide.threadsPerBlock = 2;
  const std::vector<FitSample> samples = {
      // Measured 22.3, 18.1 and 42.0 us: the model's pick measures 23% above the fastest; ranks
      // (1 2 3) against (2 1 3), Spearman 1 - 6 * 2 / (3 * 8) = 0.5.
      sample(k10, 0.8, "a", 0),
      sample(k20, -0.1, "a", 1),
      sample(k40, 0.05, "a", 2),
      {{tooWide}, 1e-5, "a"},  // infeasible: counted nowhere
      // Measured 10.2 and 11.0 us: the model's pick is the fastest.
      sample(k10, 0.02, "b"),
      sample(k20, -0.6, "b"),
      // Measured 10.3 and 10.1 us: the pick is not the fastest, but within 5% of it.
      sample(k10, 0.03, "c"),
      sample(k20, -0.68, "c"),
      sample(k20, 0.2, "d"),  // a group of one: no ranking
  };
  const FitQuality q = evaluateFit(samples, hw);
  EXPECT_EQ(q.samples, 8);
  // |errors|: 0.8 0.1 0.05 0.02 0.6 0.03 0.68 0.2; the middle two of eight are 0.1 and 0.2.
  EXPECT_NEAR(q.medianAbsLogError, 0.15, 1e-12);
  const double squares = 0.64 + 0.01 + 0.0025 + 0.0004 + 0.36 + 0.0009 + 0.4624 + 0.04;
  EXPECT_NEAR(q.rmsLogError, std::sqrt(squares / 8), 1e-12);
  EXPECT_EQ(q.groups, 3);
  EXPECT_EQ(q.pickWithin5, 2);
  ASSERT_EQ(q.missedPicks.size(), 1u);  // group a: candidate 0 picked, candidate 1 the fastest
  EXPECT_EQ(q.missedPicks[0].group, "a");
  EXPECT_EQ(q.missedPicks[0].pick, 0);
  EXPECT_EQ(q.missedPicks[0].fastest, 1);
  EXPECT_NEAR(q.missedPicks[0].slower, std::exp(0.8) / (2 * std::exp(-0.1)), 1e-9);
  EXPECT_EQ(q.rankedFastestFirst, 1);
  EXPECT_NEAR(q.spearman, 0.5, 1e-12);
}

// A machine whose small kernels stream from the last-level cache at four times its DRAM
// bandwidth: the fit finds that bandwidth (the base has none, hardware.h) and the DRAM one apart.
TEST(CostFit, RecoversACacheResidentBandwidth) {
  const HardwareProfile base = hostProfile();
  ASSERT_EQ(base.cacheBandwidth, 0);
  HardwareProfile truth = trueProfile();
  truth.cacheBandwidth = 4 * truth.memoryBandwidth;
  const FitResult fit = fitCostModel(variedSamples(truth), base);
  EXPECT_NEAR(fit.profile.cacheBandwidth / truth.cacheBandwidth, 1.0, 0.05);
  EXPECT_NEAR(factor(fit.profile, base, &HardwareProfile::memoryBandwidth), 0.5, 0.5 * 0.05);
  EXPECT_LT(fit.after.medianAbsLogError, 1e-3);
  // Not selected: the base's (none) stands.
  FitParameters noCache;
  noCache.cacheBandwidth = false;
  EXPECT_EQ(fitCostModel(variedSamples(truth), base, noCache).profile.cacheBandwidth, 0);
}
