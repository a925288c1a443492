// Fitting the cost model's figures to measured plan times; cost_fit.h explains the objective.
#include "fusion/cost_fit.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <map>
#include <numeric>
#include <optional>

#include "runtime/support/error.h"

namespace stitch::fusion {
namespace {

// The factors' bounds, as logs: [1/100, 100] of the base value. A figure that needs to move
// further than that is not derated but wrong, and the fit should say so by a poor quality rather
// than by a profile with a 1000x bandwidth.
const double kMaxLogFactor = std::log(100.0);
// The penalty on each squared log-factor. Small enough that it moves an exact fit of forty
// samples by ~1e-7 in its factors, large enough that Nelder-Mead, which compares values only,
// walks a direction the samples leave flat back to the base instead of leaving it where the
// simplex happened to stop.
constexpr double kRidge = 1e-8;
// The ranking term (cost_fit.h): a pair of one group whose measured times differ by more than
// kRankMargin must be ordered by the model with a gap of at least kRankGap (both as log ratios),
// or pay kRankWeight times the squared shortfall. The weight makes a misranked pair cost about as
// much as a sample off by a factor of three, so the fit gives up some time accuracy to rank the
// plans a planner chooses between; the gap keeps it from settling on a tie.
const double kRankMargin = std::log(1.05);
const double kRankGap = std::log(1.02);
constexpr double kRankWeight = 1.0;
// Nelder-Mead: the first simplex's edge in log-factor (a factor of e, so the first steps reach
// the derating a datasheet figure typically needs), the stopping tolerances, and the limits.
constexpr double kInitialStep = 1.0;
constexpr double kRestartStep = 0.25;
constexpr double kSimplexTolerance = 1e-10;  // in log-factor: a 1e-10 relative change
constexpr double kValueTolerance = 1e-14;    // relative spread of the simplex's values
constexpr int kIterationsPerFigure = 500;
constexpr int kMaxRestarts = 20;
// What a restart must gain, relative, to be worth another.
constexpr double kRestartGain = 1e-10;

// A profile figure the fit may move.
struct Figure {
  double HardwareProfile::*field;
  bool FitParameters::*selected;
  // Whether the kernel's model time depends on the figure at all; a figure no sample's kernel
  // depends on is frozen (cost_fit.h).
  bool (*exercisedBy)(const KernelSummary& k, const HardwareProfile& hw);
};

// The bytes a kernel's memory time is priced on (cost_model.h): read, written, no spills (a
// kernel that spills is priced at DRAM bandwidth anyway: its traffic is larger than the cache's
// share of it).
bool fitsCache(const KernelSummary& k, const HardwareProfile& hw) {
  return static_cast<double>(k.bytesRead) + static_cast<double>(k.bytesWritten) <=
         static_cast<double>(hw.cacheBytes);
}

const std::array<Figure, 7> kFigures = {{
    {&HardwareProfile::memoryBandwidth, &FitParameters::memoryBandwidth,
     // The memory time beyond the latency: the bytes read and written, spills included.
     [](const KernelSummary& k, const HardwareProfile& hw) {
       return estimateKernel(k, hw).memory > hw.memoryLatency &&
              !(hw.cacheBandwidth > 0 && fitsCache(k, hw));
     }},
    {&HardwareProfile::cacheBandwidth, &FitParameters::cacheBandwidth,
     [](const KernelSummary& k, const HardwareProfile& hw) {
       return hw.cacheBandwidth > 0 && fitsCache(k, hw) && k.bytesRead + k.bytesWritten > 0;
     }},
    {&HardwareProfile::memoryLatency, &FitParameters::memoryLatency,
     [](const KernelSummary&, const HardwareProfile&) { return true; }},
    {&HardwareProfile::launchOverhead, &FitParameters::launchOverhead,
     [](const KernelSummary&, const HardwareProfile&) { return true; }},
    {&HardwareProfile::flops, &FitParameters::flops,
     [](const KernelSummary& k, const HardwareProfile&) {
       return k.cheapOps + k.recomputeCheapOps > 0;
     }},
    {&HardwareProfile::expensiveFlops, &FitParameters::expensiveFlops,
     [](const KernelSummary& k, const HardwareProfile&) {
       return k.expensiveOps + k.recomputeExpensiveOps > 0;
     }},
    {&HardwareProfile::gridSyncTime, &FitParameters::gridSyncTime,
     [](const KernelSummary& k, const HardwareProfile&) { return k.gridSyncs > 0; }},
}};

void checkSamples(std::span<const FitSample> samples) {
  for (size_t i = 0; i < samples.size(); ++i) {
    STITCH_CHECK(!samples[i].kernels.empty(), ErrorCode::InvalidArgument,
                 "cost fit: sample {} has no kernels", i);
    STITCH_CHECK(std::isfinite(samples[i].measuredSeconds) && samples[i].measuredSeconds > 0,
                 ErrorCode::InvalidArgument,
                 "cost fit: sample {} has a measured time of {} s; it must be positive", i,
                 samples[i].measuredSeconds);
  }
}

// The model's time of a plan: +inf when a kernel is infeasible.
double modelSeconds(const FitSample& sample, const HardwareProfile& hw) {
  double total = 0;
  for (const KernelSummary& k : sample.kernels) total += estimateKernel(k, hw).time;
  return total;
}

// Whether a model time can be compared with a measured one in log: not an infeasible plan's
// +inf, nor the zero of a hand-made profile that charges nothing.
bool usable(double model) { return std::isfinite(model) && model > 0; }

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2;
}

// 1-based ranks, ties sharing their mean rank.
std::vector<double> ranks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> rank(values.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double mean = (static_cast<double>(i + j) / 2) + 1;
    for (size_t t = i; t <= j; ++t) rank[order[t]] = mean;
    i = j + 1;
  }
  return rank;
}

// The Pearson correlation of the ranks (which with ties is the usual generalization of the
// 1 - 6 sum d^2 / (n (n^2 - 1)) formula); nullopt when either side is all one rank.
std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double mean = (static_cast<double>(ra.size()) + 1) / 2;  // ranks always average this
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (va == 0 || vb == 0) return std::nullopt;
  return cov / std::sqrt(va * vb);
}

HardwareProfile withFactors(const HardwareProfile& base, const std::vector<const Figure*>& figures,
                            const std::vector<double>& logFactors) {
  HardwareProfile p = base;
  for (size_t i = 0; i < figures.size(); ++i)
    p.*(figures[i]->field) = base.*(figures[i]->field) * std::exp(logFactors[i]);
  return p;
}

struct Minimum {
  std::vector<double> x;
  double value = 0;
};

template <typename F>
double clampedValue(const F& f, std::vector<double>& x) {
  for (double& v : x) v = std::clamp(v, -kMaxLogFactor, kMaxLogFactor);
  return f(x);
}

// Nelder-Mead (reflection 1, expansion 2, contraction 1/2, shrink 1/2) in the box of the bounds:
// every trial point is projected into it. Deterministic: ties keep the simplex's order.
template <typename F>
Minimum nelderMead(const F& f, const Minimum& start, double step, int maxIterations,
                   int& iterations) {
  const size_t n = start.x.size();
  std::vector<std::vector<double>> points(n + 1, start.x);
  std::vector<double> values(n + 1, start.value);
  for (size_t i = 0; i < n; ++i) {
    // Step inward when the start sits on the upper bound, so the simplex keeps its volume.
    points[i + 1][i] += start.x[i] + step <= kMaxLogFactor ? step : -step;
    values[i + 1] = clampedValue(f, points[i + 1]);
  }
  std::vector<size_t> order(n + 1);
  for (int iter = 0; iter < maxIterations; ++iter) {
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return values[a] < values[b]; });
    const size_t best = order.front(), worst = order.back(), second = order[n - 1];

    double diameter = 0;
    for (size_t i = 0; i <= n; ++i)
      for (size_t d = 0; d < n; ++d)
        diameter = std::max(diameter, std::abs(points[i][d] - points[best][d]));
    if (diameter < kSimplexTolerance ||
        values[worst] - values[best] <= kValueTolerance * std::abs(values[best]))
      break;
    ++iterations;

    std::vector<double> centroid(n, 0.0);
    for (size_t i = 0; i <= n; ++i)
      if (i != worst)
        for (size_t d = 0; d < n; ++d) centroid[d] += points[i][d] / static_cast<double>(n);
    auto along = [&](double t) {  // centroid + t (centroid - worst)
      std::vector<double> x(n);
      for (size_t d = 0; d < n; ++d) x[d] = centroid[d] + t * (centroid[d] - points[worst][d]);
      return x;
    };

    std::vector<double> reflected = along(1.0);
    const double fr = clampedValue(f, reflected);
    if (fr < values[best]) {
      std::vector<double> expanded = along(2.0);
      const double fe = clampedValue(f, expanded);
      if (fe < fr) {
        points[worst] = std::move(expanded);
        values[worst] = fe;
      } else {
        points[worst] = std::move(reflected);
        values[worst] = fr;
      }
      continue;
    }
    if (fr < values[second]) {
      points[worst] = std::move(reflected);
      values[worst] = fr;
      continue;
    }
    const bool outside = fr < values[worst];
    std::vector<double> contracted = along(outside ? 0.5 : -0.5);
    const double fc = clampedValue(f, contracted);
    if (fc < (outside ? fr : values[worst])) {
      points[worst] = std::move(contracted);
      values[worst] = fc;
      continue;
    }
    for (size_t i = 0; i <= n; ++i) {
      if (i == best) continue;
      for (size_t d = 0; d < n; ++d)
        points[i][d] = points[best][d] + 0.5 * (points[i][d] - points[best][d]);
      values[i] = clampedValue(f, points[i]);
    }
  }
  const size_t best =
      static_cast<size_t>(std::min_element(values.begin(), values.end()) - values.begin());
  return {points[best], values[best]};
}

}  // namespace

FitQuality evaluateFit(std::span<const FitSample> samples, const HardwareProfile& hw) {
  checkSamples(samples);
  FitQuality q;
  std::vector<double> model(samples.size());
  std::vector<double> absErrors;
  double squares = 0;
  // Ordered by name, so the counts do not depend on the samples' order.
  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < samples.size(); ++i) {
    model[i] = modelSeconds(samples[i], hw);
    if (!usable(model[i])) continue;
    const double err = std::log(model[i] / samples[i].measuredSeconds);
    absErrors.push_back(std::abs(err));
    squares += err * err;
    if (!samples[i].group.empty()) groups[samples[i].group].push_back(i);
  }
  q.samples = static_cast<int>(absErrors.size());
  if (q.samples > 0) q.rmsLogError = std::sqrt(squares / q.samples);
  q.medianAbsLogError = median(std::move(absErrors));

  double spearmanSum = 0;
  int spearmanGroups = 0;
  for (const auto& [name, members] : groups) {
    if (members.size() < 2) continue;
    ++q.groups;
    std::vector<double> modelTimes, measuredTimes;
    for (size_t i : members) {
      modelTimes.push_back(model[i]);
      measuredTimes.push_back(samples[i].measuredSeconds);
    }
    const size_t pick = static_cast<size_t>(std::min_element(modelTimes.begin(), modelTimes.end()) -
                                            modelTimes.begin());
    const double fastest = *std::min_element(measuredTimes.begin(), measuredTimes.end());
    if (measuredTimes[pick] <= 1.05 * fastest) {
      ++q.pickWithin5;
    } else {
      const size_t best = static_cast<size_t>(
          std::min_element(measuredTimes.begin(), measuredTimes.end()) - measuredTimes.begin());
      q.missedPicks.push_back({name, samples[members[pick]].candidate,
                               samples[members[best]].candidate, measuredTimes[pick] / fastest});
    }
    if (measuredTimes[pick] == fastest) ++q.rankedFastestFirst;
    if (members.size() >= 3) {
      if (std::optional<double> rho = spearman(modelTimes, measuredTimes)) {
        spearmanSum += *rho;
        ++spearmanGroups;
      }
    }
  }
  if (spearmanGroups > 0) q.spearman = spearmanSum / spearmanGroups;
  return q;
}

FitResult fitCostModel(std::span<const FitSample> samples, const HardwareProfile& given,
                       const FitParameters& which) {
  checkSamples(samples);
  // The base the factors scale: the given profile, with a cache bandwidth equal to the DRAM one
  // where it has none and the fit may move it (the same model times, so "before" is unchanged).
  HardwareProfile base = given;
  if (which.cacheBandwidth && !(base.cacheBandwidth > 0))
    base.cacheBandwidth = base.memoryBandwidth;
  // Feasibility depends only on the occupancy figures, which the fit never moves, so the samples
  // usable under the base are the ones usable under every profile the fit tries.
  std::vector<const FitSample*> fitted;
  for (const FitSample& s : samples)
    if (usable(modelSeconds(s, base))) fitted.push_back(&s);
  const auto selected = static_cast<size_t>(std::count_if(
      kFigures.begin(), kFigures.end(), [&](const Figure& f) { return which.*(f.selected); }));
  STITCH_CHECK(fitted.size() >= selected, ErrorCode::InvalidArgument,
               "cost fit: {} usable samples ({} given, {} with an infeasible kernel), but fitting "
               "{} parameters needs at least {}",
               fitted.size(), samples.size(), samples.size() - fitted.size(), selected, selected);

  // Frozen: a figure not selected, one the base sets to zero (no factor moves it), and one no
  // kernel of any usable sample depends on, which the objective cannot see and which would only
  // drift.
  std::vector<const Figure*> figures;
  for (const Figure& f : kFigures) {
    if (!(which.*(f.selected))) continue;
    const double value = base.*(f.field);
    if (!(std::isfinite(value) && value > 0)) continue;
    const bool exercised = std::any_of(fitted.begin(), fitted.end(), [&](const FitSample* s) {
      return std::any_of(s->kernels.begin(), s->kernels.end(),
                         [&](const KernelSummary& k) { return f.exercisedBy(k, base); });
    });
    if (exercised) figures.push_back(&f);
  }

  // The pairs of the ranking term: (clearly faster, slower) by measurement, within a group.
  std::vector<std::pair<size_t, size_t>> pairs;
  {
    std::map<std::string, std::vector<size_t>> groups;
    for (size_t i = 0; i < fitted.size(); ++i)
      if (!fitted[i]->group.empty()) groups[fitted[i]->group].push_back(i);
    for (const auto& [name, members] : groups)
      for (size_t a : members)
        for (size_t b : members)
          if (std::log(fitted[b]->measuredSeconds / fitted[a]->measuredSeconds) > kRankMargin)
            pairs.emplace_back(a, b);
  }
  std::vector<double> logModel(fitted.size());
  auto objective = [&](const std::vector<double>& logFactors) {
    const HardwareProfile hw = withFactors(base, figures, logFactors);
    double sum = 0;
    for (size_t i = 0; i < fitted.size(); ++i) {
      logModel[i] = std::log(modelSeconds(*fitted[i], hw));
      const double err = logModel[i] - std::log(fitted[i]->measuredSeconds);
      sum += err * err;
    }
    for (const auto& [faster, slower] : pairs) {
      const double shortfall = logModel[faster] - logModel[slower] + kRankGap;
      if (shortfall > 0) sum += kRankWeight * shortfall * shortfall;
    }
    for (double x : logFactors) sum += kRidge * x * x;
    return sum;
  };

  FitResult result;
  Minimum best{std::vector<double>(figures.size(), 0.0), 0};
  if (!figures.empty()) {
    best.value = objective(best.x);
    const int maxIterations = kIterationsPerFigure * static_cast<int>(figures.size());
    // Nelder-Mead can stall on a simplex collapsed along a kink of the model's max(); a fresh
    // simplex around the best point gets it going again, until one no longer gains.
    for (int restart = 0; restart <= kMaxRestarts; ++restart) {
      Minimum next = nelderMead(objective, best, restart == 0 ? kInitialStep : kRestartStep,
                                maxIterations, result.iterations);
      const bool gained = next.value < best.value * (1 - kRestartGain);
      if (next.value < best.value) best = std::move(next);
      if (!gained) break;
    }
  }

  result.profile = withFactors(base, figures, best.x);
  // A cache bandwidth the fit did not move says nothing: the given profile's stands.
  if (result.profile.cacheBandwidth == base.cacheBandwidth)
    result.profile.cacheBandwidth = given.cacheBandwidth;
  result.profile.description = given.description + " (fitted)";
  result.before = evaluateFit(samples, given);
  result.after = evaluateFit(samples, result.profile);
  return result;
}

}  // namespace stitch::fusion
