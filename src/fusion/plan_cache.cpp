// Plans kept per shape class (design note in plan_cache.h).
#include "fusion/plan_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>

#include "runtime/support/logging.h"

namespace stitch::fusion {

namespace {

std::string bucketName(int64_t size) {
  if (size <= 1) return std::to_string(size);
  return fmt::format("2^{}", std::bit_width(static_cast<uint64_t>(size)) - 1);
}

// The cost model's decisions in `plan`, in a form two plans of one graph compare equal in exactly
// when every kernel has the same dominant op, mapping kind, row width, horizontal parts and
// internal edges with the same schemes, and every cut edge the same verdict (a pair that could
// not be one kernel at one size and can at another is a decision that moved).
std::string decisionsOf(const Plan& plan) {
  std::string out;
  for (const Kernel& k : plan.kernels) {
    out += fmt::format("{}:{}:{}:{}{}[", k.dominant, mappingKindName(k.mapping.kind),
                       rowWidthName(k.mapping.width), k.horizontalParts,
                       k.stagedSplits ? "" : ":unstaged");
    for (const Edge& e : k.edges)
      out += fmt::format("{}>{}:{}{} ", e.producer, e.consumer, schemeName(e.scheme),
                         e.recompute ? "r" : "");
    out += "]\n";
  }
  for (const CutEdge& c : plan.cuts)
    out += fmt::format("{}>{}:{} ", c.producer, c.consumer, cutVerdictName(c.verdict));
  return out;
}

}  // namespace

std::string planClassName(const ir::Bindings& bindings) {
  std::string out;
  for (const auto& [sym, size] : bindings)
    out += fmt::format("{}{}={}", out.empty() ? "" : ",", sym, bucketName(size));
  return out;
}

Plan PlanCache::plan(const ir::Bindings& bindings, const HardwareProfile& hw,
                     const PlannerOptions& options, PlanOrigin* origin) {
  const std::string className = planClassName(bindings);
  const std::string key =
      fmt::format("{}|{}|{}|{}", className, hw.name, modeName(options.mode), options.candidate);
  std::vector<Kept> kept;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, fresh] = classes_.try_emplace(key);
    if (fresh) ++stats_.classes;
    kept = it->second;
  }
  for (const Kept& k : kept) {
    std::optional<Plan> p = planKernels(graph_, k.kernels, bindings, hw, options);
    if (!p || decisionsOf(*p) != k.decisions) continue;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.reuses;
    }
    if (origin) *origin = PlanOrigin{true, k.searchedAt, className};
    return std::move(*p);
  }
  Plan p = planGraph(graph_, bindings, hw, options);
  Kept mine;
  for (const Kernel& k : p.kernels) {
    mine.kernels.push_back(k.nodes);  // a horizontal kernel lists its parts one after the other
    std::sort(mine.kernels.back().begin(), mine.kernels.back().end());
  }
  mine.decisions = decisionsOf(p);
  mine.searchedAt = bindings;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.searches;
    std::vector<Kept>& variants = classes_[key];
    if (variants.size() < kVariantsPerClass) variants.push_back(std::move(mine));
  }
  if (!kept.empty())
    log().debug("graph {}: class {} split: its {} kept plan{} did not fit, searched again",
                graph_.name(), className, kept.size(), kept.size() == 1 ? "" : "s");
  if (origin) *origin = PlanOrigin{false, bindings, className};
  return p;
}

PlanCacheStats PlanCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace stitch::fusion
