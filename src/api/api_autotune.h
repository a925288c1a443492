// Measuring a signature's candidate plans on the engine's backend (driver/tuning.h has the
// design note of autotuning and of the records it keeps).
//
// How one signature is tuned (autotune()):
//   - The planner's pick (candidate 0, through the program's plan cache) is built and loaded;
//     the budget (AutotuneSettings::budgetMs) starts then and covers the rest, building and
//     compiling included: candidates 1..K-1 are built (the search's k-th next best distinct plans)
//     and loaded until the plans run out or the budget is spent.
//   - Each runs on the run's own inputs (read only: no step of an artifact writes a graph input,
//     program_entry.h) and writes scratch outputs allocated on the backend's device, never the
//     caller's: the caller's outputs are written once, by the chosen plan, after tuning.
//   - A candidate's first outputs are compared with the pick's under the reference tolerance of
//     their dtype (|a - b| <= t + t * |b|: f32 1e-4, f16 1e-2, bf16 4e-2, exact for ints and
//     bools, NaN equal to NaN). One that differs more is never chosen (recorded as such, with the
//     worst element): tuning must not change results beyond what a check allows.
//   - Then rounds: each round takes one sample of every candidate, in candidate order, so that
//     drifts of the machine's speed fall on every candidate alike; at least kMinRounds rounds,
//     then until the budget is spent, at most kMaxRounds. A sample is one untimed run, then a
//     batch of runs back to back and one synchronize of the stream, divided by the runs: as many
//     runs as make it last about kMinSampleSeconds (from one warm timed run before the rounds; at
//     most kMaxRunsPerSample), because one run of a kernel of a few microseconds is timed mostly
//     by the clock, the wake-up of the thread pool and, on a GPU, the synchronize. Each
//     candidate's time is the median of its samples; its timed runs are counted in the record.
//   - The samples are warm, as `stitch run --iters` and a training loop's steady state are, and
//     alike for every candidate: the other candidates ran in between, so a batch's first run
//     would find the caches full of their data; and every candidate writes the same scratch
//     outputs. On the CPU VM, timing the pick cold into outputs of its own (so that the run
//     before it had evicted them) priced a 70 us plan at 100-220 us in a round of four and
//     chose plans 1.3-1.9x slower (BENCHMARKS.md, "Autotuning").
//   - The pick is kept unless another candidate beats it round by round: faster in at least
//     kSwitchRounds of the rounds, and by more than kSwitchMargin in the median round (of the
//     ratios of its sample to the pick's sample of the same round); of those, the one with the
//     lowest median ratio runs. Rounds are paired because the machine's speed drifts between
//     them (the development VM's bandwidth moves by tens of percent within minutes: comparing
//     medians over rounds let a drift choose), and a plan the model ranks lower must win clearly,
//     not by the noise of a few samples.
#pragma once

#include <memory>
#include <optional>
#include <span>

#include "driver/driver.h"
#include "driver/tuning.h"
#include "fusion/plan_cache.h"
#include "ir/graph.h"
#include "reference/interpreter.h"
#include "runtime/backend.h"
#include "runtime/persistent_layers.h"
#include "target/target.h"

namespace stitch::api {

inline constexpr int kMinRounds = 3;
inline constexpr int kMaxRounds = 25;
inline constexpr double kSwitchMargin = 0.02;
inline constexpr double kSwitchRounds = 0.75;
inline constexpr double kMinSampleSeconds = 1e-3;
inline constexpr int kMaxRunsPerSample = 1000;

struct TunedSignature {
  driver::TuningRecord record;
  driver::Build build;                         // the chosen candidate's
  std::shared_ptr<rt::Executable> executable;  // its kernels, loaded
};

// The decision of the tuned entry `key` when it is one for this machine (`machine`, the
// backend's description), graph and signature; nullopt when there is none, and when it is stale
// or foreign: measured elsewhere, malformed, or an artifact that is not a build of this graph
// (rejected: logged at warn and counted corrupt; the caller measures again and rewrites it).
std::optional<driver::TunedEntry> loadTunedEntry(rt::PersistentLayers& layers,
                                                 const rt::CacheKey& key,
                                                 const ir::Graph& optimized,
                                                 std::span<const ir::ConcreteInput> signature,
                                                 const target::Target& target,
                                                 const rt::Target& machine);

// Tunes `optimized` for the signature of `inputs` (sizes `bindings`) on `backend` (the note
// above). Errors of the pick itself (it does not build, or its run fails on these inputs) are
// thrown, as the untuned run would have thrown them; the other candidates' are recorded.
TunedSignature autotune(const ir::Graph& optimized, const ir::Bindings& bindings,
                        const target::Target& target, rt::Backend& backend,
                        const driver::Options& options, const driver::AutotuneSettings& settings,
                        fusion::PlanCache* plans, std::span<const reference::TensorView> inputs,
                        void* stream);

}  // namespace stitch::api
