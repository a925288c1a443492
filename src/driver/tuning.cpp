// Autotuning records (design note in tuning.h).
//
// Structs are unpacked with structured bindings that name every member, in the encoder and the
// decoder alike, so that a member added to a record or to fusion::KernelSummary does not compile
// until both handle it (the rule of lower/serialize.h).
#include "driver/tuning.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <optional>

#include "driver/program_entry.h"
#include "runtime/support/canonical.h"
#include "runtime/support/env.h"
#include "runtime/support/hash.h"

namespace stitch::driver {

namespace {

constexpr const char* kAutotuneEnv = "STITCH_AUTOTUNE";
constexpr const char* kCandidatesEnv = "STITCH_AUTOTUNE_CANDIDATES";
constexpr const char* kBudgetEnv = "STITCH_AUTOTUNE_BUDGET_MS";

void writeSummary(CanonicalWriter& w, const fusion::KernelSummary& k) {
  const auto& [bytesRead, bytesWritten, cheapOps, expensiveOps, recomputeCheapOps,
               recomputeExpensiveOps, blocks, threadsPerBlock, sharedMemoryPerBlock,
               registersPerThread, bytesInFlightPerThread, blockSyncs, gridSyncs] = k;
  for (int64_t v : {bytesRead, bytesWritten, cheapOps, expensiveOps, recomputeCheapOps,
                    recomputeExpensiveOps, blocks, sharedMemoryPerBlock, bytesInFlightPerThread})
    w.integer(v);
  for (int v : {threadsPerBlock, registersPerThread, blockSyncs, gridSyncs}) w.integer(v);
}

fusion::KernelSummary readSummary(CanonicalReader& r) {
  fusion::KernelSummary k;
  auto& [bytesRead, bytesWritten, cheapOps, expensiveOps, recomputeCheapOps, recomputeExpensiveOps,
         blocks, threadsPerBlock, sharedMemoryPerBlock, registersPerThread, bytesInFlightPerThread,
         blockSyncs, gridSyncs] = k;
  for (int64_t* v :
       {&bytesRead, &bytesWritten, &cheapOps, &expensiveOps, &recomputeCheapOps,
        &recomputeExpensiveOps, &blocks, &sharedMemoryPerBlock, &bytesInFlightPerThread}) {
    *v = r.integer<int64_t>();
    STITCH_CHECK(*v >= 0, ErrorCode::InvalidArgument, "a kernel summary with a negative count");
  }
  for (int* v : {&threadsPerBlock, &registersPerThread, &blockSyncs, &gridSyncs}) {
    *v = r.integer<int>();
    STITCH_CHECK(*v >= 0, ErrorCode::InvalidArgument, "a kernel summary with a negative count");
  }
  STITCH_CHECK(blocks >= 1 && threadsPerBlock >= 1, ErrorCode::InvalidArgument,
               "a kernel summary with no blocks or no threads");
  return k;
}

// A time of the record: finite and not negative.
double readSeconds(CanonicalReader& r) {
  const double s = r.real();
  STITCH_CHECK(std::isfinite(s) && s >= 0, ErrorCode::InvalidArgument,
               "a tuning record with the time {}", s);
  return s;
}

std::string formatSeconds(double s) {
  if (s >= 1e-3) return fmt::format("{:.4g} ms", s * 1e3);
  return fmt::format("{:.4g} us", s * 1e6);
}

}  // namespace

AutotuneSettings autotuneFromEnv() {
  AutotuneSettings s;
  s.enabled = env::getBool(kAutotuneEnv, s.enabled);
  s.candidates =
      static_cast<int>(env::getInt(kCandidatesEnv, 1, kMaxAutotuneCandidates, s.candidates));
  s.budgetMs = env::getInt(kBudgetEnv, 1, kMaxAutotuneBudgetMs, s.budgetMs);
  return s;
}

void parseAutotuneOption(std::string_view key, const std::string& value, AutotuneSettings& s) {
  auto integer = [&](int64_t lo, int64_t hi) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    STITCH_CHECK(ec == std::errc() && end == value.data() + value.size() && v >= lo && v <= hi,
                 ErrorCode::InvalidArgument, "{} '{}' is not valid: an integer from {} to {}", key,
                 value, lo, hi);
    return v;
  };
  if (key == "autotune") {
    std::optional<bool> b = env::parseBool(value);
    STITCH_CHECK(b.has_value(), ErrorCode::InvalidArgument,
                 "autotune '{}' is not valid: a boolean (1, true, yes, on, 0, false, no, off)",
                 value);
    s.enabled = *b;
  } else if (key == "autotune_candidates") {
    s.candidates = static_cast<int>(integer(1, kMaxAutotuneCandidates));
  } else {
    STITCH_INTERNAL(key == "autotune_budget_ms", "not an autotune option: {}", key);
    s.budgetMs = integer(1, kMaxAutotuneBudgetMs);
  }
}

std::string_view candidateOutcomeName(CandidateOutcome o) {
  switch (o) {
    case CandidateOutcome::Measured: return "measured";
    case CandidateOutcome::OverBudget: return "over budget";
    case CandidateOutcome::Mismatch: return "outputs differ";
    case CandidateOutcome::Failed: return "failed";
  }
  return "?";
}

const CandidateTiming& TuningRecord::chosenTiming() const {
  for (const CandidateTiming& c : candidates)
    if (c.candidate == chosen) return c;
  throwError(
      ErrorCode::InvalidArgument,
      fmt::format("a tuning record that chose candidate {}, which it does not hold", chosen));
}

std::string machineIdentity(const rt::Target& t) {
  if (t.device.name.empty() && !t.hostProfile.model.empty()) {
    const rt::HostProfile& h = t.hostProfile;
    // The full feature list is long; its hash names it exactly enough for a comparison, and the
    // key holds the list itself.
    return fmt::format("{} {}: {}, {} threads, {} ({:016x})", t.backend, t.arch, h.model, h.threads,
                       t.host.cpu, fnv1a64(t.host.features));
  }
  if (!t.device.name.empty())
    return fmt::format("{} {}: {}, driver {}", t.backend, t.arch, t.device.name, t.device.driver);
  return fmt::format("{} {}", t.backend, t.arch);
}

rt::CacheKey tunedEntryKey(const ir::Graph& optimized, std::span<const ir::ConcreteInput> signature,
                           const rt::Target& target, const Options& options, int candidates) {
  rt::CacheKey key =
      signatureEntryKey("tuned-program", kTunedEntryFormat, optimized, signature, target, options);
  key.add("autotune-candidates", canonicalBytes(candidates))
      .add("machine", machineIdentity(target));
  return key;
}

std::vector<uint8_t> encodeTunedEntry(const TuningRecord& record,
                                      const rt::ProgramArtifact& artifact) {
  const auto& [machine, subject, tunedAt, budgetMs, seconds, chosen, candidates] = record;
  CanonicalWriter w;
  w.integer(kTunedEntryFormat);
  w.string(machine);
  w.string(subject);
  w.integer(tunedAt);
  w.integer(budgetMs);
  w.real(seconds);
  w.integer(chosen);
  w.length(candidates.size());
  for (const CandidateTiming& c : candidates) {
    const auto& [candidate, kernels, modelSeconds, medianSeconds, minSeconds, runs, outcome, note,
                 summaries] = c;
    w.integer(candidate);
    w.integer(kernels);
    w.real(modelSeconds);
    w.real(medianSeconds);
    w.real(minSeconds);
    w.integer(runs);
    w.enumeration(outcome);
    w.string(note);
    w.length(summaries.size());
    for (const fusion::KernelSummary& k : summaries) writeSummary(w, k);
  }
  const std::vector<uint8_t> code = encodeProgramArtifact(artifact);
  w.string(std::string_view(reinterpret_cast<const char*>(code.data()), code.size()));
  const std::string& bytes = w.bytes();
  return {bytes.begin(), bytes.end()};
}

namespace {

// The record at the start of a tuned entry's payload, checked; r is left at the artifact.
TuningRecord readRecord(CanonicalReader& r) {
  const auto format = r.integer<uint32_t>();
  STITCH_CHECK(format == kTunedEntryFormat, ErrorCode::InvalidArgument,
               "a tuned entry of format {} (this library reads {})", format, kTunedEntryFormat);
  TuningRecord record;
  auto& [machine, subject, tunedAt, budgetMs, seconds, chosen, candidates] = record;
  machine = r.string();
  subject = r.string();
  tunedAt = r.integer<int64_t>();
  budgetMs = r.integer<int64_t>();
  seconds = readSeconds(r);
  chosen = r.integer<int>();
  // A candidate takes at least its fixed fields' 45 bytes.
  candidates.resize(r.length(45));
  int previous = -1;
  for (CandidateTiming& c : candidates) {
    auto& [candidate, kernels, modelSeconds, medianSeconds, minSeconds, runs, outcome, note,
           summaries] = c;
    candidate = r.integer<int>();
    STITCH_CHECK(candidate > previous, ErrorCode::InvalidArgument,
                 "a tuning record whose candidates are not in increasing order");
    previous = candidate;
    kernels = r.integer<int>();
    modelSeconds = r.real();  // +inf for a plan the model cannot price: not checked
    medianSeconds = readSeconds(r);
    minSeconds = readSeconds(r);
    runs = r.integer<int>();
    outcome = r.enumeration<CandidateOutcome>();
    STITCH_CHECK(outcome <= CandidateOutcome::Failed, ErrorCode::InvalidArgument,
                 "a tuning record with an unknown outcome");
    note = r.string();
    summaries.resize(r.length(60));
    for (fusion::KernelSummary& k : summaries) k = readSummary(r);
    STITCH_CHECK(kernels >= 0 && runs >= 0, ErrorCode::InvalidArgument,
                 "a tuning record with a negative count");
  }
  STITCH_CHECK(!candidates.empty() && candidates.front().candidate == 0, ErrorCode::InvalidArgument,
               "a tuning record without the planner's pick");
  const CandidateTiming& c = record.chosenTiming();
  STITCH_CHECK(c.outcome == CandidateOutcome::Measured || candidates.size() == 1,
               ErrorCode::InvalidArgument, "a tuning record that chose candidate {}, which was {}",
               chosen, candidateOutcomeName(c.outcome));
  return record;
}

}  // namespace

TunedEntry decodeTunedEntry(std::span<const uint8_t> bytes, const target::Target& target) {
  CanonicalReader r(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  TunedEntry e;
  e.record = readRecord(r);
  const std::string code = r.string();
  r.finish();
  e.artifact = decodeProgramArtifact(
      std::span(reinterpret_cast<const uint8_t*>(code.data()), code.size()), target);
  return e;
}

TuningRecord decodeTuningRecord(std::span<const uint8_t> bytes) {
  CanonicalReader r(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  TuningRecord record = readRecord(r);
  (void)r.string();  // the artifact, whole but not decoded: that needs the target it was made for
  r.finish();
  return record;
}

std::string tuningText(const TuningRecord& t, bool fromEntry) {
  std::string out;
  if (t.candidates.size() == 1) {
    out = fmt::format(
        "# plan: the cost model's pick, the only candidate the search made (not "
        "measured{})\n",
        fromEntry ? "; from the tuning entry" : "");
    return out;
  }
  char when[32] = "?";
  const std::time_t at = static_cast<std::time_t>(t.tunedAt);
  std::tm tm{};
  if (gmtime_r(&at, &tm)) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  out = fmt::format(
      "# plan: autotuned: candidate {} ({}) measured fastest of {} on {}, {}; tuning took {} "
      "(budget {} ms){}\n",
      t.chosen, t.chosen == 0 ? "the cost model's pick" : "not the cost model's pick",
      t.candidates.size(), t.machine, when, formatSeconds(t.seconds), t.budgetMs,
      fromEntry ? "; this process read the decision from the tuning entry, measuring nothing" : "");
  for (const CandidateTiming& c : t.candidates) {
    std::string measured =
        c.outcome == CandidateOutcome::Measured
            ? fmt::format("measured median {} (min {}, {} runs)", formatSeconds(c.medianSeconds),
                          formatSeconds(c.minSeconds), c.runs)
            : std::string(candidateOutcomeName(c.outcome));
    if (!c.note.empty()) measured += " (" + c.note + ")";
    out += fmt::format("#   candidate {}{}: {} kernel{}, model {}, {}\n", c.candidate,
                       c.candidate == t.chosen ? " (runs)" : "", c.kernels,
                       c.kernels == 1 ? "" : "s", formatSeconds(c.modelSeconds), measured);
  }
  return out;
}

}  // namespace stitch::driver
