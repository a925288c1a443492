// The target registry (design note in target.h).
#include "target/target.h"

#include <fmt/format.h>

#include <deque>
#include <mutex>

#include "ir/signature.h"
#include "lower/launch.h"
#include "runtime/support/error.h"

namespace stitch::target {

// Defined by the file CMake generates from the list of built-in targets (src/target/CMakeLists
// via runtime/CMakeLists.txt's driver library): calls each one's register function.
void registerBuiltinTargets();

namespace {

class Registry;
// The registry being made (its initialization registers the built-in targets into it); seen only
// by the initializing thread.
thread_local Registry* building = nullptr;

class Registry {
 public:
  static Registry& get() {
    if (building) return *building;
    static Registry* r = [] {
      static Registry made;
      building = &made;
      registerBuiltinTargets();
      building = nullptr;
      return &made;
    }();
    return *r;
  }

  void add(TargetInfo info) {
    std::lock_guard<std::mutex> lock(mu_);
    STITCH_INTERNAL(!info.backend.empty() && info.named && info.offline && info.make,
                    "target '{}' is registered without a name or a factory", info.backend);
    for (const TargetInfo& t : targets_)
      STITCH_INTERNAL(t.backend != info.backend, "target '{}' registered twice", info.backend);
    targets_.push_back(std::move(info));
  }

  // Entries are never removed or changed: a pointer stays valid.
  const TargetInfo* byBackend(std::string_view backend) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const TargetInfo& t : targets_)
      if (t.backend == backend) return &t;
    return nullptr;
  }

  std::vector<const TargetInfo*> all() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<const TargetInfo*> out;
    for (const TargetInfo& t : targets_) out.push_back(&t);
    return out;
  }

 private:
  std::mutex mu_;
  std::deque<TargetInfo> targets_;
};

}  // namespace

lower::KernelProgram Target::lower(const ir::Graph& g, const fusion::Kernel& k,
                                   const ir::Bindings& bindings) const {
  return lowerShapes(g, k, ir::concreteShapes(g, bindings));
}

fusion::PricedLaunch Target::launch(const ir::Graph& g, const fusion::Kernel& k,
                                    const std::vector<std::vector<int64_t>>& shapes) const {
  lower::KernelProgram p = lowerShapes(g, k, shapes);
  schedule(p);
  return lower::pricedLaunch(p);
}

fusion::HardwareProfile withCalibration(fusion::HardwareProfile facts,
                                        const rt::CostCalibration& c) {
  const auto& [memoryBandwidth, cacheBandwidth, memoryLatency, launchOverhead, flops,
               expensiveFlops, gridSyncTime, samples] = c;
  bool any = false;
  auto take = [&](double& field, double value) {
    if (value > 0) {
      field = value;
      any = true;
    }
  };
  take(facts.memoryBandwidth, memoryBandwidth);
  take(facts.cacheBandwidth, cacheBandwidth);
  take(facts.memoryLatency, memoryLatency);
  take(facts.launchOverhead, launchOverhead);
  take(facts.flops, flops);
  take(facts.expensiveFlops, expensiveFlops);
  take(facts.gridSyncTime, gridSyncTime);
  if (any)
    facts.description += fmt::format("; cost model calibrated on {} measured plan{}", samples,
                                     samples == 1 ? "" : "s");
  return facts;
}

void registerTarget(TargetInfo info) { Registry::get().add(std::move(info)); }

std::unique_ptr<Target> makeTarget(const rt::Target& description) {
  const TargetInfo* info = Registry::get().byBackend(description.backend);
  STITCH_CHECK(info != nullptr, ErrorCode::InvalidArgument,
               "no code generation target is registered for backend '{}'", description.backend);
  return info->make(description);
}

rt::Target namedTarget(std::string_view name) {
  std::vector<const TargetInfo*> targets = Registry::get().all();
  std::string valid;
  for (const TargetInfo* t : targets) {
    if (std::optional<rt::Target> d = t->named(name)) return *d;
    if (!t->archHelp.empty()) valid += (valid.empty() ? "" : ", ") + t->archHelp;
  }
  throwError(ErrorCode::InvalidArgument,
             fmt::format("unknown target '{}'; valid targets: {}", name, valid));
}

rt::Target offlineTarget(std::string_view name, std::string* why) {
  rt::Target t = namedTarget(name);
  const TargetInfo* info = Registry::get().byBackend(t.backend);
  STITCH_INTERNAL(info != nullptr, "target '{}' names backend '{}', which has no target", name,
                  t.backend);
  std::string reason;
  info->offline(t, &reason);
  if (why) *why = reason;
  return t;
}

}  // namespace stitch::target
