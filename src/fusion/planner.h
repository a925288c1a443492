// The fusion planner: from a graph (after the passes) and concrete shapes to a Plan.
//
// Search, in order of cost: a greedy pass merges the pair of kernels (producer->consumer, or two
// independent kernels for horizontal packing) with the best cost gain until none gains; a beam
// search over merge sequences refines it on graphs small enough; Exhaustive enumerates every
// partition (graphs of up to 12 ops) and exists to measure the other two against. Every
// candidate kernel is checked by the group analysis ("can this group be scheduled, with what
// mapping?") and every partition must leave the kernel graph acyclic. Candidates that are the
// same kernel up to a renumbering of nodes (a model's repeated layers) share one analysis
// (cost_memo.h), which keeps planning linear in practice: 100k ops of stacked layers plan in
// about 0.4 s (BENCHMARKS.md, "Planning time").
#pragma once

#include <optional>
#include <vector>

#include "fusion/hardware.h"
#include "fusion/plan.h"
#include "fusion/schedule.h"
#include "ir/graph.h"
#include "ir/shape.h"

namespace stitch::fusion {

enum class Search { Greedy, Beam, Exhaustive };

struct PlannerOptions {
  Mode mode = Mode::Stitch;
  Search search = Search::Beam;
  int beamWidth = 4;
  // Beam search runs on graphs with at most this many ops; larger ones stop after greedy.
  int beamMaxOps = 400;
  // Which plan to return: 0, the best the search found (what Stitch runs); k > 0, the k-th next
  // best distinct partition among every one the search evaluated (its seeds, the greedy result,
  // each beam state), ranked by the cost model. For measuring the model against the hardware
  // (bench/gpu/run.py's cost-model table); InvalidArgument when the search saw fewer plans.
  int candidate = 0;
  // The target's scheduler (schedule.h): required for a GPU profile, whose candidates are priced
  // on the launch it decides; may be null for the host, whose launch is the mapping's.
  const Scheduler* scheduler = nullptr;
  // Whether candidates of the same structure share one analysis (fusion/cost_memo.h). Plans are
  // the same either way; off only where a test checks that.
  bool shareCosts = true;
};

// Plans g for the concrete sizes `bindings` gives its symbols. g must be verified; composites
// should have been decomposed (a composite is planned as one opaque kernel otherwise).
Plan planGraph(const ir::Graph& g, const ir::Bindings& bindings, const HardwareProfile& hw,
               const PlannerOptions& options = {});

// The plan made of `kernels` (node sets, each sorted: a plan's Kernel::nodes, as made for other
// sizes of g) under `bindings`: every kernel analyzed again (mapping, schemes, traffic, cost) and
// the plan's totals and cut reasons for these sizes. nullopt when a kernel is not a valid kernel
// at these sizes (a row that no longer fits where its scheme needs it). The sets must partition
// g's planned ops without a cycle between them (an internal error otherwise). This is how a plan
// is kept for a shape class (plan_cache.h): the search runs once, later sizes re-price its result.
std::optional<Plan> planKernels(const ir::Graph& g, const std::vector<std::vector<int>>& kernels,
                                const ir::Bindings& bindings, const HardwareProfile& hw,
                                const PlannerOptions& options = {});

// Reads STITCH_FUSION (stitch | basic | off); Stitch when unset. Throws InvalidArgument listing
// the valid values otherwise.
Mode modeFromEnv();
// Parses a mode name; throws InvalidArgument listing the valid ones.
Mode parseMode(std::string_view name);

}  // namespace stitch::fusion
