// Autotuning records: which of a signature's candidate plans ran fastest on a machine, kept in
// the kernel cache's persistent layers with the chosen plan's artifact, so that the fleet tunes a
// signature once.
//
// Design note. The planner ranks partitions with the cost model (fusion/cost_model.h); the model
// is wrong sometimes (BENCHMARKS.md, "Cost model"). With autotuning on (STITCH_AUTOTUNE=1, the
// engine option "autotune"), a program's first run of a signature builds the planner's pick and
// its next K-1 candidates (PlannerOptions::candidate 1..K-1, K = STITCH_AUTOTUNE_CANDIDATES),
// times each on the run's own inputs with scratch outputs (src/api/api_autotune.cpp), and runs the
// fastest. The decision is kept as one persistent entry (EntryKind::Tuned) holding:
//   - the TuningRecord: the machine it was measured on, when, the budget, and per candidate the
//     model's estimate, the measured median and minimum, the runs, what became of it (measured,
//     over budget, outputs off the pick's by more than the reference tolerance, failed to build),
//     and its kernels' summaries (what `stitch tune fit` fits the cost model's parameters to);
//   - the chosen candidate's artifact, exactly what a program entry holds (program_entry.h).
// Its key is the program entry's (the optimized graph, the signature, the target with the
// machine's measured figures, the fusion mode, shape classes, the library's code identity) with
// the kind "tuned-program", K, and the machine's identity; the budget is not in it (a decision
// made under a smaller budget is still a decision). A second process, or a second host whose
// machine profile is the same (the host profile is shared through the remote layer,
// runtime/cpu/host_profile.h), finds the entry and runs the chosen plan with no measurement.
//
// Trust. The layers verify the entry's tag (runtime/disk_entry.h); then decodeTunedEntry checks
// the payload's bounds, the record's consistency (a chosen candidate that was measured, finite
// non-negative times) and the caller checks that its machine is this one and that the artifact is
// a well-formed build of this graph (validateProgramArtifact). An entry that fails any of these
// is stale or foreign: rejected (logged and counted corrupt) and measured again, never run.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "driver/driver.h"
#include "fusion/cost_model.h"
#include "ir/signature.h"
#include "runtime/artifact.h"
#include "runtime/kernel_cache.h"
#include "runtime/target.h"

namespace stitch::driver {

// Bump when the record's encoding or the tuned entry's key parts change.
inline constexpr uint32_t kTunedEntryFormat = 2;

struct AutotuneSettings {
  bool enabled = false;     // STITCH_AUTOTUNE, engine option "autotune" (default off)
  int candidates = 3;       // K: the pick and its next K-1 plans (STITCH_AUTOTUNE_CANDIDATES)
  int64_t budgetMs = 1000;  // per signature: building, compiling and timing the candidates
                            // after the pick (STITCH_AUTOTUNE_BUDGET_MS)
  bool operator==(const AutotuneSettings&) const = default;
};
inline constexpr int kMaxAutotuneCandidates = 16;
inline constexpr int64_t kMaxAutotuneBudgetMs = 600000;

// The settings the environment gives. Throws InvalidArgument naming the variable, its value and
// the valid range for a bad value of any of the three.
AutotuneSettings autotuneFromEnv();
// One engine option's value ("autotune": a boolean; "autotune_candidates": 1 to 16;
// "autotune_budget_ms": 1 to 600000) into s; InvalidArgument otherwise.
void parseAutotuneOption(std::string_view key, const std::string& value, AutotuneSettings& s);

enum class CandidateOutcome : uint8_t {
  Measured,    // timed
  OverBudget,  // the budget was spent before it was built or timed
  Mismatch,    // its outputs differ from the pick's by more than the reference tolerance
  Failed,      // it did not build, compile or run (the reason is in `note`)
};
std::string_view candidateOutcomeName(CandidateOutcome o);

struct CandidateTiming {
  int candidate = 0;  // PlannerOptions::candidate: 0 is the planner's pick
  int kernels = 0;
  double modelSeconds = 0;   // the cost model's estimate of the plan
  double medianSeconds = 0;  // measured, one run of the whole plan; 0 unless Measured
  double minSeconds = 0;
  int runs = 0;
  CandidateOutcome outcome = CandidateOutcome::Measured;
  std::string note;  // why it was not measured, or how far its outputs were off
  std::vector<fusion::KernelSummary> summaries;  // per kernel, for fitting the cost model
};

struct TuningRecord {
  std::string machine;  // machineIdentity() of the target measured on
  // What was measured, in words: the graph's name and its inputs' types ("layer_norm(f32[16,768],
  // f32[768], f32[768])"); `stitch tune fit` names the records whose pick the model misses by it.
  std::string subject;
  int64_t tunedAt = 0;                      // when: seconds since the Unix epoch
  int64_t budgetMs = 0;                     // the budget it was measured under
  double seconds = 0;                       // what tuning took, building and compiling included
  int chosen = 0;                           // the candidate that runs
  std::vector<CandidateTiming> candidates;  // in candidate order, the pick first
  // The record's candidate `chosen` (its entry in candidates).
  const CandidateTiming& chosenTiming() const;
};

// The machine a decision holds for, in words that name it: the backend and arch, and the host's
// CPU model, threads and features, or the device's name and driver.
std::string machineIdentity(const rt::Target& t);

// The key of the tuned entry of `optimized` for a signature on `target`, tuning among
// `candidates` plans (the note above).
rt::CacheKey tunedEntryKey(const ir::Graph& optimized, std::span<const ir::ConcreteInput> signature,
                           const rt::Target& target, const Options& options, int candidates);

// The entry's payload, and back. decodeTunedEntry throws InvalidArgument for bytes that are not a
// well-formed entry (truncated, another format, a record that is not consistent).
std::vector<uint8_t> encodeTunedEntry(const TuningRecord& record,
                                      const rt::ProgramArtifact& artifact);
struct TunedEntry {
  TuningRecord record;
  rt::ProgramArtifact artifact;
};
TunedEntry decodeTunedEntry(std::span<const uint8_t> bytes, const target::Target& target);
// The record of a tuned entry's payload alone, checked as decodeTunedEntry checks it (the artifact
// is skipped, not decoded): what `stitch tune fit` reads of every entry, whatever its target.
TuningRecord decodeTuningRecord(std::span<const uint8_t> bytes);

// The record as text, for STITCH_DUMP=plan and `stitch plan --backend`: one line of what was
// decided and where, then one line per candidate; every line starts with "# ".
std::string tuningText(const TuningRecord& record, bool fromEntry);

}  // namespace stitch::driver
