// The compile driver (design note in driver.h).
#include "driver/driver.h"

#include <fmt/format.h>

#include "fusion/planner.h"
#include "ir/printer.h"
#include "lower/size_args.h"
#include "passes/pipeline.h"
#include "runtime/support/env.h"
#include "runtime/support/error.h"
#include "runtime/support/logging.h"

namespace stitch::driver {

namespace {

// Marks the sizes of p (kernel k lowered under a signature's bindings) that `moved` changes as
// size arguments. A kernel the perturbed sizes cannot lower (a size the graph constrains) keeps
// every size compiled in: the moved program only chooses the arguments, so skipping it is
// always sound.
void markMovedSizes(lower::KernelProgram& p, const ir::Graph& optimized, const fusion::Kernel& k,
                    const ir::Bindings& moved, const target::Target& target) {
  try {
    lower::markSizeArgs(p, target.lower(optimized, k, moved));
  } catch (const Error& e) {
    log().debug("kernel {}: sizes compiled in ({})", p.name, e.what());
  }
}

}  // namespace

bool shapeClassesEnabled() { return env::getBool("STITCH_SHAPE_CLASSES", true); }

rt::KernelArtifact emitKernel(const lower::KernelProgram& p, const target::Target& target) {
  rt::KernelArtifact a;
  a.name = p.name;
  for (const lower::Param& q : p.params)
    a.params.push_back(rt::KernelBuffer{q.value, q.scratch, q.dtype, q.elements});
  for (const lower::Phase& ph : p.phases) a.phases.push_back({ph.buffers, ph.numInputs});
  a.sizes = p.sizeArgs.values;
  a.checks = p.checks;
  a.forms = target.emit(p);
  return a;
}

ir::Graph optimize(const ir::Graph& g) {
  ir::verify(g);
  return passes::runPasses(g);
}

Build build(const ir::Graph& optimized, const ir::Bindings& bindings, const rt::Target& target,
            const Options& options, Stage stage, fusion::PlanCache* plans) {
  return build(optimized, bindings, *target::makeTarget(target), options, stage, plans);
}

Build build(const ir::Graph& optimized, const ir::Bindings& bindings, const target::Target& target,
            const Options& options, Stage stage, fusion::PlanCache* plans) {
  Build out;
  fusion::PlannerOptions planner;
  planner.mode = options.mode;
  planner.candidate = options.planCandidate;
  planner.scheduler = target.scheduler();
  const fusion::HardwareProfile& profile = target.facts();
  const bool classes = !bindings.empty() && shapeClassesEnabled();
  if (plans && classes) {
    STITCH_INTERNAL(&plans->graph() == &optimized, "a plan cache used for another graph");
    out.plan = plans->plan(bindings, profile, planner, &out.planOrigin);
  } else {
    out.plan = fusion::planGraph(optimized, bindings, profile, planner);
    out.planOrigin.searchedAt = bindings;
  }
  log().debug("graph {} planned for {} ({}, {} fusion): {} kernels for {} ops", optimized.name(),
              target.name(), target.description().arch, fusion::modeName(options.mode),
              out.plan.kernels.size(), optimized.numOps());
  if (stage == Stage::Plan) return out;

  rt::ProgramArtifact& a = out.artifact;
  a.name = optimized.name();
  a.external.assign(optimized.inputs().begin(), optimized.inputs().end());
  a.external.insert(a.external.end(), optimized.outputs().begin(), optimized.outputs().end());
  // Shape classes (lower/size_args.h): the emitters read sizes that the signature's symbols move
  // as arguments, so that other sizes of the class share the compiled kernel.
  const ir::Bindings moved = classes ? lower::perturbedBindings(bindings) : ir::Bindings{};
  for (const fusion::Kernel& k : out.plan.kernels) {
    lower::KernelProgram& p = out.programs.emplace_back(target.lower(optimized, k, bindings));
    if (classes) markMovedSizes(p, optimized, k, moved, target);
    target.schedule(p);
    a.kernels.push_back(emitKernel(p, target));
  }
  // Labels of the values the kernels touch, for messages about their memory.
  a.valueLabels.resize(optimized.nodes().size());
  for (const rt::KernelArtifact& k : a.kernels)
    for (const rt::KernelBuffer& b : k.params)
      if (b.value >= 0 && a.valueLabels[static_cast<size_t>(b.value)].empty()) {
        const ir::Node& n = optimized.node(b.value);
        a.valueLabels[static_cast<size_t>(b.value)] =
            fmt::format("'{}' {}", n.name, ir::typeStr(n.type));
      }
  return out;
}

}  // namespace stitch::driver
