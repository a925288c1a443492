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
//   src/target    one Target per backend (target.h): the machine's facts, the schedule, the
//                 emitted code and its cache keys (keys.h), offline compiles
//   src/driver    this module: runs the stages above once per kernel through the target and
//                 packs the result into artifacts
//   runtime/      backends (backend.h): compile artifacts through the kernel cache, load, run
//   src/api       the C API: checks DLPack arguments, asks the driver, hands artifacts to the
//                 engine's backend
//
// The dependency arrows point down that list and never back: api -> driver -> target ->
// {codegen, lower, fusion, passes, ir}; api -> runtime; driver -> runtime only for the plain data
// it fills (runtime/artifact.h, runtime/target.h, runtime/kernel_cache.h's CacheKey). The driver
// holds no branch on which target it builds for. Nothing under
// runtime/ includes fusion/, lower/, codegen/ or driver/, or sees an ir::Graph: a backend knows
// the artifacts it is given and the target it describes, nothing more.
//
// build() plans the graph for the target's facts (fusion::planGraph), and has the target lower,
// schedule and emit each kernel once (Target::lower, schedule, emit: every form, each keyed).
// Program runs, code generation (`stitch codegen`), plan explanation (`stitch plan`, Stage::Plan)
// and the STITCH_DUMP files all come from it, so what is dumped or printed is what runs.
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
#include "target/target.h"

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
  std::vector<lower::KernelProgram> programs;  // per kernel of the plan (Stage::Emit), scheduled
  rt::ProgramArtifact artifact;                // the same kernels as code (Stage::Emit)
};

// `optimized` (from optimize()) planned for `target` under `bindings` (sizes of every symbolic
// dim: ir::bindInputs), and with Stage::Emit lowered, scheduled, emitted and keyed. With `plans`
// (a cache of `optimized`'s plans, kept per shape class: fusion/plan_cache.h) the plan comes
// through it; without, the search runs. STITCH_SHAPE_CLASSES=0 turns both the plan cache and the
// kernels' size arguments off.
Build build(const ir::Graph& optimized, const ir::Bindings& bindings, const target::Target& target,
            const Options& options, Stage stage = Stage::Emit, fusion::PlanCache* plans = nullptr);
// The same for the target made from a backend's description (target::makeTarget).
Build build(const ir::Graph& optimized, const ir::Bindings& bindings, const rt::Target& target,
            const Options& options, Stage stage = Stage::Emit, fusion::PlanCache* plans = nullptr);

// Whether shape classes are on (STITCH_SHAPE_CLASSES, default on): plans kept per plan class and
// sizes as kernel arguments (lower/size_args.h).
bool shapeClassesEnabled();

// One scheduled kernel program as an artifact for `target`: what build() makes of each kernel.
rt::KernelArtifact emitKernel(const lower::KernelProgram& p, const target::Target& target);

}  // namespace stitch::driver
