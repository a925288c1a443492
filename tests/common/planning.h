// Planner options for tests that plan with a built-in profile directly (fusion::planGraph): a
// GPU profile is priced on the launch its target schedules (fusion/schedule.h), so the options
// carry the scheduler of the target whose facts that profile is (namedTarget(profile name));
// a host profile needs none.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "fusion/planner.h"
#include "target/target.h"

namespace stitch::testing {

// The scheduler of the target named after built-in profile `hw` (null for the host's).
inline const fusion::Scheduler* schedulerFor(const fusion::HardwareProfile& hw) {
  if (!hw.isGpu) return nullptr;
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<target::Target>> targets;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<target::Target>& t = targets[hw.name];
  if (!t) t = target::makeTarget(target::namedTarget(hw.name));
  return t->scheduler();
}

// `options` with the scheduler for `hw`.
inline fusion::PlannerOptions plannerOptions(fusion::PlannerOptions options,
                                             const fusion::HardwareProfile& hw) {
  options.scheduler = schedulerFor(hw);
  return options;
}

}  // namespace stitch::testing
