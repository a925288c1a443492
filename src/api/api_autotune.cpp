// Measuring a signature's candidate plans (design note in api_autotune.h).
#include "api/api_autotune.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "api/api_internal.h"
#include "driver/program_entry.h"
#include "ir/signature.h"
#include "runtime/persistent_layers.h"
#include "runtime/support/dtype.h"
#include "runtime/support/logging.h"

namespace stitch::api {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Device memory from the backend, released when the buffer goes.
class DeviceBuffer {
 public:
  DeviceBuffer(rt::Backend& b, size_t bytes)
      : backend_(&b), bytes_(bytes), data_(b.allocate(bytes)) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : backend_(o.backend_), bytes_(o.bytes_), data_(std::exchange(o.data_, nullptr)) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  ~DeviceBuffer() {
    if (data_) backend_->release(data_);
  }
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  rt::Backend* backend_;
  size_t bytes_;
  void* data_;
};

// One value the kernels write into a graph output: its node, dtype and element count.
struct OutputValue {
  int node;
  ir::DType dtype;
  size_t elements;
};

// The outputs the kernels write (writtenByKernels): the others are filled by the caller after
// the run.
std::vector<OutputValue> writtenOutputs(const ir::Graph& g, const ir::Bindings& bindings) {
  std::vector<OutputValue> out;
  for (size_t j = 0; j < g.outputs().size(); ++j) {
    if (!writtenByKernels(g, j)) continue;
    const int o = g.outputs()[j];
    size_t elements = 1;
    for (int64_t d : ir::concretize(g.node(o).type.shape, bindings))
      elements *= static_cast<size_t>(d);  // bounded: the run's outputs were checked to fit
    out.push_back({o, g.node(o).type.dtype, elements});
  }
  return out;
}

double elementAt(ir::DType t, const uint8_t* p, size_t i) {
  switch (t) {
    case ir::DType::F16: {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      return ir::f16Value(b);
    }
    case ir::DType::BF16: {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      return ir::bf16Value(b);
    }
    case ir::DType::F32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case ir::DType::F64: {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      return d;
    }
    case ir::DType::I32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case ir::DType::I64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return static_cast<double>(v);
    }
    case ir::DType::Bool: return p[i] != 0;
  }
  return 0;
}

// Where `got` differs from `want` by more than the dtype's tolerance: empty when nowhere.
std::string difference(const OutputValue& v, const std::vector<uint8_t>& got,
                       const std::vector<uint8_t>& want, const ir::Graph& g) {
  const double tol = reference::dtypeTolerance(v.dtype);
  for (size_t i = 0; i < v.elements; ++i) {
    const double a = elementAt(v.dtype, got.data(), i), b = elementAt(v.dtype, want.data(), i);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (a == b) continue;  // equal infinities included
    if (std::isfinite(a) && std::isfinite(b) && std::fabs(a - b) <= tol + tol * std::fabs(b))
      continue;
    return fmt::format("{}[{}] is {} where the pick's is {}", g.node(v.node).name, i, a, b);
  }
  return {};
}

// One candidate on its way through tuning.
struct Candidate {
  driver::CandidateTiming timing;
  driver::Build build;
  std::shared_ptr<rt::Executable> executable;
  std::vector<double> times;
};

driver::CandidateTiming timingOf(int k, const driver::Build& b) {
  driver::CandidateTiming t;
  t.candidate = k;
  t.kernels = static_cast<int>(b.plan.kernels.size());
  t.modelSeconds = b.plan.time;
  for (const fusion::Kernel& kernel : b.plan.kernels) t.summaries.push_back(kernel.summary);
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::optional<driver::TunedEntry> loadTunedEntry(rt::PersistentLayers& layers,
                                                 const rt::CacheKey& key,
                                                 const ir::Graph& optimized,
                                                 std::span<const ir::ConcreteInput> signature,
                                                 const target::Target& target,
                                                 const rt::Target& machine) {
  std::optional<std::vector<uint8_t>> bytes = layers.load(key, rt::EntryKind::Tuned);
  if (!bytes) return std::nullopt;
  try {
    driver::TunedEntry e = driver::decodeTunedEntry(*bytes, target);
    const std::string here = driver::machineIdentity(machine);
    STITCH_CHECK(e.record.machine == here, ErrorCode::InvalidArgument,
                 "it was measured on {}, not on this machine ({})", e.record.machine, here);
    driver::validateProgramArtifact(e.artifact, optimized, signature, target);
    return e;
  } catch (const Error& err) {
    layers.rejected(key, fmt::format("graph {}'s tuning entry", optimized.name()), err.what());
    return std::nullopt;
  }
}

TunedSignature autotune(const ir::Graph& optimized, const ir::Bindings& bindings,
                        const target::Target& target, rt::Backend& backend,
                        const driver::Options& options, const driver::AutotuneSettings& settings,
                        fusion::PlanCache* plans, std::span<const reference::TensorView> inputs,
                        void* stream) {
  const Clock::time_point start = Clock::now();
  std::vector<Candidate> candidates;
  {
    Candidate pick;
    pick.build =
        driver::build(optimized, bindings, target, {options.mode, 0}, driver::Stage::Emit, plans);
    pick.executable = backend.load(pick.build.artifact);
    pick.timing = timingOf(0, pick.build);
    candidates.push_back(std::move(pick));
  }
  const Clock::time_point budgetStart = Clock::now();
  const double budget = static_cast<double>(settings.budgetMs) / 1e3;
  bool exhausted = false;  // the search made fewer plans than asked for
  for (int k = 1; k < settings.candidates && !exhausted; ++k) {
    Candidate c;
    c.timing.candidate = k;
    if (secondsSince(budgetStart) > budget) {
      c.timing.outcome = driver::CandidateOutcome::OverBudget;
      c.timing.note = "not built";
      candidates.push_back(std::move(c));
      continue;
    }
    try {
      // Runner-up plans bypass the plan cache, which keeps the classes' picks.
      c.build = driver::build(optimized, bindings, target, {options.mode, k}, driver::Stage::Emit,
                              nullptr);
    } catch (const Error& e) {
      // The pick was built from the same graph and sizes, so the one argument the planner can
      // refuse here is the candidate: past the plans its search saw, the end of the list.
      if (e.code() == ErrorCode::InvalidArgument) {
        exhausted = true;
        continue;
      }
      c.timing.outcome = driver::CandidateOutcome::Failed;
      c.timing.note = e.what();
      log().warn("autotune {}: candidate {} failed to build: {}", optimized.name(), k, e.what());
      candidates.push_back(std::move(c));
      continue;
    }
    c.timing = timingOf(k, c.build);
    try {
      c.executable = backend.load(c.build.artifact);
    } catch (const Error& e) {
      c.timing.outcome = driver::CandidateOutcome::Failed;
      c.timing.note = e.what();
      log().warn("autotune {}: candidate {} failed to load: {}", optimized.name(), k, e.what());
    }
    candidates.push_back(std::move(c));
  }

  TunedSignature out;
  driver::TuningRecord& record = out.record;
  record.machine = driver::machineIdentity(backend.target());
  record.subject = optimized.name() + "(";
  for (size_t i = 0; i < inputs.size(); ++i)
    record.subject += fmt::format("{}{}[{}]", i ? ", " : "", ir::dtypeName(inputs[i].dtype),
                                  fmt::join(inputs[i].shape, ","));
  record.subject += ")";
  record.tunedAt = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  record.budgetMs = settings.budgetMs;
  record.chosen = 0;

  const bool single = candidates.size() == 1;
  if (!single) {
    // Scratch outputs: the pick's, kept for the comparison, and one set every other candidate
    // writes in turn.
    const std::vector<OutputValue> values = writtenOutputs(optimized, bindings);
    std::vector<DeviceBuffer> pickOut, scratch;
    std::vector<rt::BoundValue> pickBound, scratchBound;
    for (size_t i = 0; i < inputs.size(); ++i) {
      pickBound.push_back({optimized.inputs()[i], const_cast<void*>(inputs[i].data)});
      scratchBound.push_back(pickBound.back());
    }
    for (const OutputValue& v : values) {
      const size_t bytes = v.elements * static_cast<size_t>(ir::dtypeBytes(v.dtype));
      pickOut.emplace_back(backend, bytes);
      scratch.emplace_back(backend, bytes);
      pickBound.push_back({v.node, pickOut.back().data()});
      scratchBound.push_back({v.node, scratch.back().data()});
    }
    auto hostCopy = [&](const DeviceBuffer& b) {
      std::vector<uint8_t> h(b.bytes());
      if (!h.empty())
        backend.copy(h.data(), b.data(), h.size(), rt::CopyKind::DeviceToHost, stream);
      return h;
    };
    // First runs: the pick's outputs, then each candidate's against them. The pick's errors are
    // the run's errors (the same inputs would fail it untuned).
    candidates[0].executable->run(pickBound, stream);
    backend.synchronize(stream);
    std::vector<std::vector<uint8_t>> want;
    for (const DeviceBuffer& b : pickOut) want.push_back(hostCopy(b));
    for (size_t c = 1; c < candidates.size(); ++c) {
      Candidate& cand = candidates[c];
      if (!cand.executable) continue;
      try {
        cand.executable->run(scratchBound, stream);
        backend.synchronize(stream);
        for (size_t i = 0; i < values.size() && cand.executable; ++i) {
          std::string why = difference(values[i], hostCopy(scratch[i]), want[i], optimized);
          if (why.empty()) continue;
          cand.timing.outcome = driver::CandidateOutcome::Mismatch;
          cand.timing.note = why;
          cand.executable.reset();
          log().warn("autotune {}: candidate {} is not used: {}", optimized.name(),
                     cand.timing.candidate, why);
        }
      } catch (const Error& e) {
        cand.timing.outcome = driver::CandidateOutcome::Failed;
        cand.timing.note = e.what();
        cand.executable.reset();
      }
    }
    // From here every candidate, the pick too, writes the same scratch outputs (the pick's are
    // read): no candidate finds its outputs in the cache when another's were just written
    // there. A sample is an untimed warm-up run, then a timed batch (the note in
    // api_autotune.h).
    auto sample = [&](Candidate& cand, int runs) {
      cand.executable->run(scratchBound, stream);
      backend.synchronize(stream);
      const Clock::time_point t = Clock::now();
      for (int r = 0; r < runs; ++r) cand.executable->run(scratchBound, stream);
      backend.synchronize(stream);
      return std::max(secondsSince(t), 1e-9) / runs;
    };
    // Runs per sample: enough back to back that a sample lasts kMinSampleSeconds, from one warm
    // run of each.
    std::vector<int> reps(candidates.size(), 1);
    for (size_t c = 0; c < candidates.size(); ++c) {
      if (!candidates[c].executable) continue;
      const double once = sample(candidates[c], 1);
      reps[c] = static_cast<int>(std::clamp(std::ceil(kMinSampleSeconds / once), 1.0,
                                            static_cast<double>(kMaxRunsPerSample)));
    }
    // Interleaved rounds (the note in api_autotune.h).
    for (int round = 0; round < kMaxRounds; ++round) {
      if (round >= kMinRounds && secondsSince(budgetStart) > budget) break;
      for (size_t c = 0; c < candidates.size(); ++c) {
        Candidate& cand = candidates[c];
        if (!cand.executable) continue;
        cand.times.push_back(sample(cand, reps[c]));
        cand.timing.runs += reps[c];
      }
    }
    // The choice, by paired rounds (the note in api_autotune.h): a candidate replaces the pick
    // only if it was faster in most rounds and by more than the margin in the median round.
    const std::vector<double>& pickTimes = candidates[0].times;
    double bestRatio = 1 - kSwitchMargin;
    for (Candidate& cand : candidates) {
      if (!cand.executable) continue;
      cand.timing.medianSeconds = median(cand.times);
      cand.timing.minSeconds = *std::min_element(cand.times.begin(), cand.times.end());
      if (cand.timing.candidate == 0) continue;
      std::vector<double> ratios;
      for (size_t i = 0; i < cand.times.size() && i < pickTimes.size(); ++i)
        ratios.push_back(cand.times[i] / pickTimes[i]);
      const auto wins = std::count_if(ratios.begin(), ratios.end(), [](double r) { return r < 1; });
      const double ratio = median(ratios);
      if (static_cast<double>(wins) >= kSwitchRounds * static_cast<double>(ratios.size()) &&
          ratio < bestRatio) {
        bestRatio = ratio;
        record.chosen = cand.timing.candidate;
      }
    }
  }
  for (Candidate& c : candidates) {
    if (c.timing.candidate == record.chosen) {
      out.build = std::move(c.build);
      out.executable = std::move(c.executable);
    }
    record.candidates.push_back(std::move(c.timing));
  }
  record.seconds = secondsSince(start);
  log().info("autotune {}: candidate {} of {} ({:.1f} ms of tuning)", optimized.name(),
             record.chosen, record.candidates.size(), record.seconds * 1e3);
  return out;
}

}  // namespace stitch::api
