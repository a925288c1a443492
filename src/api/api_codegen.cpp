// Code generation without running: stitch_graph_codegen (`stitch codegen`).
//
// The graph goes through the compile driver exactly as a program's would for the target
// (driver/driver.h): passes, the planner for the target's profile, each kernel lowered and
// emitted once. "source" prints each kernel's preferred form (what a run on such a device
// compiles first); "report" compiles it with the target's compiler (NVRTC for sm_*, hipRTC for
// gfx90a, LLVM ORC for host, through the cpu backend's kernel cache). Nothing is loaded on a
// device, so this runs on a machine with no GPU, and is what CI uses to check that every kernel
// compiles without spills.
#include <fmt/format.h>

#include <array>

#include "api/api_internal.h"
#include "fusion/planner.h"
#include "runtime/support/env.h"

using namespace stitch;

namespace {

constexpr std::array<std::string_view, 4> kCodegenOptions = {"target", "fusion", "emit",
                                                             "plan_candidate"};
constexpr std::array<std::string_view, 2> kEmitChoices = {"report", "source"};

std::string kernelSummary(const ir::Graph& g, const fusion::Kernel& k, size_t index,
                          const lower::KernelProgram& p) {
  return fmt::format("kernel {}: {} ops ({}), {} phase{}", index, k.nodes.size(),
                     ir::opName(g.node(k.dominant).op), p.phases.size(),
                     p.phases.size() == 1 ? "" : "s");
}

std::string codegenText(const api::PlannedGraph& p, const std::string& target,
                        const target::Target& t, bool source) {
  const driver::Build& b = p.build;
  const size_t n = b.plan.kernels.size();
  std::string text = fmt::format("graph {}: {} kernel{} for {}\n", p.optimized.name(), n,
                                 n == 1 ? "" : "s", target);
  for (size_t i = 0; i < n; ++i) {
    std::string summary = kernelSummary(p.optimized, b.plan.kernels[i], i, b.programs[i]);
    const rt::KernelArtifact& k = b.artifact.kernels[i];
    const rt::KernelCode& code = k.forms.at(0);
    if (source) {
      const char* comment = code.language == "llvm-ir" ? ";" : "//";
      text += fmt::format("{} ---- {}\n{}\n", comment, summary, code.text);
      continue;
    }
    target::CompileReport r = t.compile(k);
    if (r.throughCache) {
      text += fmt::format("  {}: compiled (or found in the kernel cache) by {} in {:.1f} ms\n",
                          summary, r.compiler, r.seconds * 1e3);
      continue;
    }
    int block = code.phases.empty() ? 0 : code.phases.front().block;
    text += fmt::format(
        "  {}, block {}: compiled by {} in {:.1f} ms ({:.1f} ms CPU), {} registers, {} bytes "
        "spilled, {} bytes of code\n",
        summary, block, r.compiler, r.seconds * 1e3, r.cpuSeconds * 1e3, r.registers, r.spillBytes,
        r.codeBytes);
  }
  return text;
}

}  // namespace

extern "C" {

stitch_status_t stitch_graph_codegen(stitch_graph_t graph, const char* const* keys,
                                     const char* const* values, size_t num_options,
                                     const char* const* symbols, const int64_t* sizes,
                                     size_t num_symbols, char* buf, size_t capacity,
                                     size_t* needed) {
  STITCH_API_HANDLE(graph);
  if (num_options) {
    STITCH_API_REQUIRE(keys);
    STITCH_API_REQUIRE(values);
  }
  if (num_symbols) {
    STITCH_API_REQUIRE(symbols);
    STITCH_API_REQUIRE(sizes);
  }
  if (capacity) STITCH_API_REQUIRE(buf);
  STITCH_API_GUARD({
    std::string target = "sm_90", emit = "report";
    driver::Options options{fusion::modeFromEnv()};
    for (const auto& [k, v] :
         api::readOptions(keys, values, num_options, kCodegenOptions, "codegen")) {
      if (k == "target") target = v;
      else if (k == "fusion") options.mode = fusion::parseMode(v);
      else if (k == "plan_candidate") options.planCandidate = api::parsePlanCandidate(v);
      else emit = v;
    }
    STITCH_CHECK(std::find(kEmitChoices.begin(), kEmitChoices.end(), emit) != kEmitChoices.end(),
                 ErrorCode::InvalidArgument, "unknown emit '{}'; valid values: {}", emit,
                 env::joinChoices(kEmitChoices));
    configureLoggingFromEnv();
    // The cost model prices the target's family (sm_86 plans as sm_80 would, for instance).
    const std::unique_ptr<target::Target> t = target::makeTarget(target::offlineTarget(target));
    api::PlannedGraph p = api::buildForSizes(graph->graph(), *t, options, symbols, sizes,
                                             num_symbols, driver::Stage::Emit);
    api::copyOut(codegenText(p, target, *t, emit == "source"), buf, capacity, needed);
    return STITCH_OK;
  })
}

}  // extern "C"
