// Plans kept per shape class: a program that sees many input signatures runs the plan search once
// per class of sizes, not once per signature.
//
// Design note. The search (planner.h) prices candidate partitions for concrete sizes. Most of
// what it decides does not move when a batch or a sequence length does: memory-bound kernels'
// costs grow with their sizes together, so the partition that won at one size wins at its
// neighbours. What does move it is a change of mapping (a row that outgrows a warp or a block,
// a reduction that becomes a multi-block one) or of stitch scheme (a row that no longer fits the
// shared memory its scheme needs): those thresholds fall on powers of two or on machine limits.
//
// The rule, written out:
//   * The class of a signature is each symbol's bucket: 0, 1, or the power-of-two range
//     [2^k, 2^(k+1)) its size falls in; with the hardware profile, the fusion mode and the plan
//     candidate (the cache belongs to one graph).
//   * A class keeps the plans the search made for it: each kernel's node set, and the cost
//     model's decisions at the sizes it was searched for: per kernel its dominant op, mapping
//     kind, row width, horizontal parts and the scheme of every internal edge; per edge between
//     kernels the verdict on fusing its two kernels (not one valid kernel, a cycle, does not
//     pay, or kept apart by the search although fusing the pair alone would pay).
//   * A new signature of a known class re-prices a kept plan's kernels at its own sizes
//     (planKernels: every kernel analyzed again). The plan is used when every kernel is valid
//     and the cost model decides exactly as it did where the search ran. Otherwise the search
//     runs for these sizes and its plan is kept beside the others (at most kVariantsPerClass a
//     class), so a class split by a threshold inside a bucket plans once per side.
//
// The kernels a plan lowers to are a separate matter: their code is shared per kernel shape
// class by the cache keys (lower/size_args.h); a kept plan only saves the search. Re-pricing is
// one analysis per kernel and per op; the search is hundreds to thousands of analyses.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "fusion/hardware.h"
#include "fusion/plan.h"
#include "fusion/planner.h"
#include "ir/graph.h"
#include "ir/shape.h"

namespace stitch::fusion {

struct PlanCacheStats {
  uint64_t searches = 0;  // plans the search made (signatures no kept plan fitted)
  uint64_t reuses = 0;    // signatures that ran a kept plan re-priced at their sizes
  uint64_t classes = 0;   // distinct plan classes seen
};

// The class of `bindings` under the rule above: "B=2^1,S=2^6" (a size 0 or 1 is itself).
std::string planClassName(const ir::Bindings& bindings);

// How a plan's planning ended: searched for these sizes, or a kept plan of the class re-priced
// (then `searchedAt` holds the sizes the search ran at).
struct PlanOrigin {
  bool reused = false;
  ir::Bindings searchedAt;
  std::string className;
};

// The plans of one graph (after the passes), kept per class. Thread-safe; the graph must
// outlive the cache.
class PlanCache {
 public:
  explicit PlanCache(const ir::Graph& g) : graph_(g) {}

  const ir::Graph& graph() const { return graph_; }

  // The plan for the graph under `bindings`: a kept plan of their class re-priced when it fits
  // (see the rule), else planGraph's, kept for the class.
  Plan plan(const ir::Bindings& bindings, const HardwareProfile& hw,
            const PlannerOptions& options = {}, PlanOrigin* origin = nullptr);

  PlanCacheStats stats() const;

  // Plans kept in one class at most; a class with more sides than this plans the rest each time.
  static constexpr size_t kVariantsPerClass = 4;

 private:
  struct Kept {
    std::vector<std::vector<int>> kernels;  // node sets, in the plan's order
    std::string decisions;                  // the cost model's decisions (decisionsOf)
    ir::Bindings searchedAt;
  };

  const ir::Graph& graph_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::vector<Kept>> classes_;
  PlanCacheStats stats_;
};

}  // namespace stitch::fusion
