// The compile driver: one function from a graph, an input signature and a target to everything
// a backend needs.
//
// Design note. Where each stage lives, in data-flow order:
//
//   src/ir        graphs, the .stitch text format, shapes and signatures
//   src/passes    graph rewrites (decompose, fold, CSE, DCE): optimize()
//   src/fusion    the planner and its cost model: which ops share a kernel, priced per launch
//   src/lower     a planned kernel -> a KernelProgram (loops, loads, stores, index math)
//   src/codegen   a KernelProgram -> CUDA/HIP C++ (gpu/) or LLVM IR (llvm/)
//   src/driver    this module: runs the stages above once per kernel and packs the result into
//                 artifacts with their cache keys (keys.h)
//   runtime/      backends (backend.h): compile artifacts through the kernel cache, load, run
//   src/api       the C API: checks DLPack arguments, asks the driver, hands artifacts to the
//                 engine's backend
//
// The dependency arrows point down that list and never back: api -> driver -> {codegen, lower,
// fusion, passes, ir}; api -> runtime; driver -> runtime only for the plain data it fills
// (runtime/artifact.h, runtime/target.h, runtime/kernel_cache.h's CacheKey). Nothing under
// runtime/ includes fusion/, lower/, codegen/ or driver/, or sees an ir::Graph: a backend knows
// the artifacts it is given and the target it describes, nothing more.
//
// build() plans the graph for the target's hardware profile (fusion::planGraph), lowers each
// kernel once (lower::lowerKernel), emits each once per form (host: LLVM IR; GPU: source for
// 16-byte aligned buffers and for any alignment) and keys each form. Program runs, code
// generation (`stitch codegen`), plan explanation (`stitch plan`, Stage::Plan) and the
// STITCH_DUMP files all come from it, so what is dumped or printed is what runs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fusion/hardware.h"
#include "fusion/plan.h"
#include "fusion/plan_cache.h"
#include "ir/graph.h"
#include "lower/kernel_program.h"
#include "runtime/artifact.h"
#include "runtime/target.h"

namespace stitch::codegen {
struct GpuTarget;
}

namespace stitch::driver {

// Verifies g and runs the graph passes: what planning and code generation see.
ir::Graph optimize(const ir::Graph& g);

struct Options {
  fusion::Mode mode = fusion::Mode::Stitch;
  int planCandidate = 0;  // fusion::PlannerOptions::candidate: 0 is the search's pick
};

enum class Stage {
  Plan,  // the plan only (explain)
  Emit,  // the plan, the kernel programs and their artifacts
};

// A graph built for one target under one input signature.
struct Build {
  fusion::Plan plan;                           // plan.bindings: the sizes it was built for
  fusion::PlanOrigin planOrigin;               // searched, or a class's kept plan re-priced
  std::vector<lower::KernelProgram> programs;  // per kernel of the plan (Stage::Emit)
  rt::ProgramArtifact artifact;                // the same kernels as code (Stage::Emit)
};

// `optimized` (from optimize()) planned for `target` under `bindings` (sizes of every symbolic
// dim: ir::bindInputs), and with Stage::Emit lowered, emitted and keyed. With `plans` (a cache of
// `optimized`'s plans, kept per shape class: fusion/plan_cache.h) the plan comes through it;
// without, the search runs. STITCH_SHAPE_CLASSES=0 turns both the plan cache and the kernels'
// size arguments off.
Build build(const ir::Graph& optimized, const ir::Bindings& bindings, const rt::Target& target,
            const Options& options, Stage stage = Stage::Emit, fusion::PlanCache* plans = nullptr);

// Whether shape classes are on (STITCH_SHAPE_CLASSES, default on): plans kept per plan class and
// sizes as kernel arguments (lower/size_args.h).
bool shapeClassesEnabled();

// The device templates as GPU kernel code's headers (rt::KernelCode::headers): made once, shared
// by every kernel.
std::shared_ptr<const std::vector<rt::SourceHeader>> deviceHeaders();

// One kernel program as an artifact for `target`: what build() makes of each kernel.
rt::KernelArtifact emitKernel(const lower::KernelProgram& p, const rt::Target& target);

// The hardware profile a target's plans are priced for: the built-in host profile with the cpu
// backend's own figures laid over it (threads, SIMD width, L2, measured bandwidth:
// rt::HostProfile), or the GPU's family with the target's own figures laid over it (its
// multiprocessors and warp width; with a device, the limits it reports and the bandwidth it
// measured: rt::DeviceProfile). A zero field keeps the built-in figure.
fusion::HardwareProfile profileFor(const rt::Target& target);

// The target named `name` ("host", or a GPU arch: "sm_90", "sm_80", another sm_XY, "gfx90a")
// with nothing probed: enough to plan and price (Stage::Plan). InvalidArgument for another name.
rt::Target namedTarget(const std::string& name);

// namedTarget completed for compiling without a device (`stitch codegen`): "host" is the cpu
// backend's JIT (BackendUnavailable in a build without LLVM); a GPU arch gets its nominal warp
// width and multiprocessor count, and the run-time compiler's identity when the compiler can be
// opened (else none, and *why says why: source can still be emitted).
rt::Target offlineTarget(const std::string& name, std::string* why = nullptr);

// How long compiling one kernel took, and what the compiler reports.
struct CompileReport {
  std::string compiler;  // "nvrtc", "hiprtc", "LLVM ORC"
  double seconds = 0;
  double cpuSeconds = -1;  // GPU: the compiling thread's CPU time (-1 when unknown)
  int registers = -1;      // GPU, -1 when unknown
  int64_t spillBytes = 0;
  int64_t codeBytes = -1;  // -1 when unknown (the host's cached path)
};

// Compiles kernel `k` (its first form) for an offline target: GPU with the run-time compiler
// (no device), host through the cpu backend's kernel cache.
CompileReport compileOffline(const rt::KernelArtifact& k, const rt::Target& target);

}  // namespace stitch::driver
