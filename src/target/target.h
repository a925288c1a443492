// Targets: the compile side of a backend, one object per backend behind one interface.
//
// Design note. A backend's runtime half (runtime/backend.h) runs code and describes its machine
// in plain data (rt::Target). Its compile half is a Target of the same name, made from that
// description, and the driver (src/driver) asks it, in data-flow order:
//
//   facts()      the one machine description the planner prices for (fusion::HardwareProfile):
//                the built-in figures of the backend's family with what the backend measured or
//                read of its own machine laid over them, then the cost model's calibration for
//                that machine (rt::CostCalibration, runtime/cost_calibration.h), laid over every
//                target's facts here in the base class (withCalibration) so that no target can
//                forget it;
//   lower()      a planned kernel as a KernelProgram for this machine (lower/kernel_program.h);
//   schedule()   the decisions about how that program runs: the GPU launch of every phase, the
//                host's task grain. A lowered program goes through schedule() before emit(),
//                and the planner prices each candidate kernel on the launch lower() and
//                schedule() make of it (fusion::Scheduler: what is priced is what runs);
//   emit()       the program's code, in the forms this backend compiles (preferred first), each
//                with its canonical cache key (target/keys.h) and entry points;
//   compile()    one kernel's code compiled without running it (`stitch codegen`; the runtime
//                compiles through its kernel cache on load).
//
// Targets are registered by backend name (registerTarget): the built-in ones by the function
// CMake generates from src/target/CMakeLists' list (cmake/registry.cmake), others (a test's) from
// their own folder. Nothing above this interface switches on which target it holds: the driver,
// the C API and program entries see a Target, its name and its code's language. The reference
// target plans (for the oracle's Stage::Plan and `stitch plan`) and generates no code.
//
// Names: a target is found by its backend ("cpu", "cuda", "hip", "reference") or, for planning
// and compiling without a device, by an architecture one of them accepts ("host", "sm_90",
// "gfx90a": namedTarget, offlineTarget).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusion/hardware.h"
#include "fusion/plan.h"
#include "fusion/schedule.h"
#include "ir/graph.h"
#include "ir/shape.h"
#include "lower/kernel_program.h"
#include "runtime/artifact.h"
#include "runtime/target.h"

namespace stitch::target {

// How long compiling one kernel took, and what the compiler reports.
struct CompileReport {
  std::string compiler;  // "nvrtc", "hiprtc", "LLVM ORC"
  double seconds = 0;
  double cpuSeconds = -1;  // GPU: the compiling thread's CPU time (-1 when unknown)
  int registers = -1;      // GPU, -1 when unknown
  int64_t spillBytes = 0;
  int64_t codeBytes = -1;  // -1 when unknown (the host's cached path)
  // Compiled through the backend's kernel cache (a hit compiles nothing): only the time is known.
  bool throughCache = false;
};

// `facts` with the non-zero figures of `c` in place of its own (the rest stand); its description
// then says how many plans the calibration was fitted to.
fusion::HardwareProfile withCalibration(fusion::HardwareProfile facts,
                                        const rt::CostCalibration& c);

class Target : public fusion::Scheduler {
 public:
  virtual ~Target() = default;
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;

  // The backend's name ("cpu"), and the description this target was made from.
  const std::string& name() const { return description_.backend; }
  const rt::Target& description() const { return description_; }
  // The machine the planner prices for (the note above).
  const fusion::HardwareProfile& facts() const { return facts_; }

  // Whether it generates code; the reference target plans only, and lower/emit/compile throw.
  virtual bool generatesCode() const { return true; }
  // The language of its code, as rt::KernelCode::language names it ("llvm-ir", "cuda", "hip").
  virtual std::string_view language() const = 0;
  // Kernel k of a plan of g lowered under `bindings` (sizes of every symbolic dim), not yet
  // scheduled; lowerShapes from every node's concrete shape (ir::concreteShapes).
  lower::KernelProgram lower(const ir::Graph& g, const fusion::Kernel& k,
                             const ir::Bindings& bindings) const;
  virtual lower::KernelProgram lowerShapes(
      const ir::Graph& g, const fusion::Kernel& k,
      const std::vector<std::vector<int64_t>>& shapes) const = 0;
  // Decides how p runs on this machine (the note above), in p.
  virtual void schedule(lower::KernelProgram& p) const = 0;
  // What the planner prices candidates with (fusion/schedule.h): this target itself where the
  // launch is decided on the lowered program (a GPU's), null where it is the plan's mapping (the
  // host: a task per facts().taskElements).
  virtual const fusion::Scheduler* scheduler() const { return this; }
  // fusion::Scheduler: candidate k lowered (lowerShapes) and scheduled (schedule) exactly as the
  // driver will, and the launch that makes (lower::pricedLaunch).
  fusion::PricedLaunch launch(const ir::Graph& g, const fusion::Kernel& k,
                              const std::vector<std::vector<int64_t>>& shapes) const override;
  // The forms of p's code, preferred first (a backend runs the first whose needs hold).
  virtual std::vector<rt::KernelCode> emit(const lower::KernelProgram& p) const = 0;
  // Compiles the first form of k without running it; BackendUnavailable when the compiler
  // cannot be had here.
  virtual CompileReport compile(const rt::KernelArtifact& k) const = 0;
  // Checks, beyond its language, a form read back from a program entry (runtime/kernel_cache.h's
  // persistent layers) that this target's emit() would have made: returns what is wrong, or an
  // empty string.
  virtual std::string checkCode(const rt::KernelCode& code) const {
    (void)code;
    return {};
  }
  // The files its code includes (a GPU's device templates; rt::KernelCode::headers), shared by
  // every kernel: what a form read back from a program entry gets. Null when it has none.
  virtual std::shared_ptr<const std::vector<rt::SourceHeader>> headers() const { return nullptr; }

 protected:
  // `facts` as the target builds them; the description's calibration is laid over them here.
  Target(rt::Target description, fusion::HardwareProfile facts)
      : description_(std::move(description)),
        facts_(withCalibration(std::move(facts), description_.calibration)) {}

 private:
  rt::Target description_;
  fusion::HardwareProfile facts_;
};

// A target as the registry knows it.
struct TargetInfo {
  std::string backend;  // the runtime backend it generates code for (rt::Target::backend)
  // The architecture names it plans and compiles for without a device, for messages and
  // `stitch codegen --target`: "host"; "sm_90, sm_80 (or another sm_XY with XY >= 70)".
  std::string archHelp;
  // The description of architecture `arch` with nothing probed (enough to plan and price), or
  // nullopt when this target does not take that name.
  std::function<std::optional<rt::Target>(std::string_view arch)> named;
  // Completes a named description for compiling without a device (the compiler's identity, or
  // the cpu backend's own JIT machine). Sets *why and leaves it when the compiler cannot be had
  // (source can still be emitted); throws BackendUnavailable when nothing can be done.
  std::function<void(rt::Target& t, std::string* why)> offline;
  // The target for a description of this backend.
  std::function<std::unique_ptr<Target>(const rt::Target& t)> make;
};

// Adds a target; a backend registered twice is an internal error. The built-in ones are
// registered before the first lookup.
void registerTarget(TargetInfo info);

// The target for `description` (by its backend); InvalidArgument when no target is registered
// for that backend.
std::unique_ptr<Target> makeTarget(const rt::Target& description);

// The description named `name` with nothing probed: a backend's architecture ("host", "sm_90",
// another sm_XY, "gfx90a"). InvalidArgument listing the valid names for another name.
rt::Target namedTarget(std::string_view name);

// namedTarget completed for compiling without a device (`stitch codegen`): "host" is the cpu
// backend's JIT (BackendUnavailable in a build without LLVM); a GPU arch gets its nominal warp
// width and multiprocessor count, and the run-time compiler's identity when the compiler can be
// opened (else none, and *why says why: source can still be emitted).
rt::Target offlineTarget(std::string_view name, std::string* why = nullptr);

}  // namespace stitch::target
