// The compile driver (src/driver/driver.h): what it hands a backend is what its stages made,
// once per kernel, for every example on every target.
//
// For each example and target (host through the cpu backend's JIT target, sm_90 and gfx90a with
// nothing probed) the build has one kernel program and one artifact per planned kernel; each
// artifact's parameters and phases are its program's; its forms are the emitter's output for
// that program (the host's one LLVM IR module, the GPU's aligned and any-alignment sources), each
// with the key the key builders give for that program and target, and entry points that its
// text defines. A second build is identical (keys, text), and Stage::Plan stops at the plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "codegen/gpu/cstyle_emitter.h"
#include "common/driver_targets.h"
#include "common/example_graphs.h"
#include "driver/driver.h"
#include "runtime/backend.h"
#include "target/gpu/gpu_schedule.h"
#include "target/keys.h"
#if defined(STITCH_HAVE_LLVM)
#include "codegen/llvm/llvm_emitter.h"
#endif

using namespace stitch;

namespace {

ir::Bindings fives(const ir::Graph& g) {
  ir::Bindings b;
  for (const std::string& s : g.symbols()) b[s] = 5;
  return b;
}

// What the emitter and key builder make of program p for target t, form `form`.
void expectForm(const lower::KernelProgram& p, const rt::Target& t, const rt::KernelCode& code,
                size_t form, const std::string& what) {
  EXPECT_EQ(code.phases.size(), p.phases.size()) << what;
  for (const rt::EntryPoint& e : code.phases)
    EXPECT_NE(code.text.find(e.symbol), std::string::npos) << what << ": no " << e.symbol;
  if (t.backend == "cpu") {
#if defined(STITCH_HAVE_LLVM)
    EXPECT_EQ(code.language, "llvm-ir") << what;
    EXPECT_FALSE(code.requiresAlignment) << what;
    rt::CacheKey key = target::hostKernelKey(p, t.host, t.hostOptions);
    EXPECT_EQ(code.key.canonical(), key.canonical()) << what;
    std::string prefix = code.phases.at(0).symbol.substr(0, code.phases.at(0).symbol.rfind('_'));
    EXPECT_EQ(code.text, codegen::programIR(p, prefix)) << what;
    for (size_t i = 0; i < p.phases.size(); ++i) {
      // A phase with workers runs ranges of workers (kernel_program.h).
      const bool workers = p.phases[i].workers > 0;
      EXPECT_EQ(code.phases[i].units, workers ? p.phases[i].workers : p.phases[i].units) << what;
      EXPECT_EQ(code.phases[i].grain, workers ? 1 : p.phases[i].grain) << what;
    }
#endif
    return;
  }
  codegen::GpuTarget g = codegen::gpuTarget(t.arch);
  bool aligned = form == 0;
  EXPECT_EQ(code.requiresAlignment, aligned) << what;
  EXPECT_EQ(code.language, g.dialect) << what;
  codegen::GpuKernelSource src =
      codegen::emitGpuKernel(target::scheduledFor(p, g, aligned), g, {aligned});
  EXPECT_EQ(code.text, src.source) << what;
  EXPECT_EQ(code.key.canonical(), target::gpuKernelKey(p, g, {aligned}, t.compiler).canonical())
      << what;
  ASSERT_EQ(src.phases.size(), code.phases.size()) << what;
  for (size_t i = 0; i < src.phases.size(); ++i) {
    EXPECT_EQ(code.phases[i].symbol, src.phases[i].function) << what;
    EXPECT_EQ(code.phases[i].grid, src.phases[i].grid) << what;
    EXPECT_EQ(code.phases[i].block, src.phases[i].block) << what;
  }
  EXPECT_EQ(code.cooperative.symbol, src.cooperative.function) << what;
}

TEST(Driver, EveryExampleIsBuiltOncePerKernelForEveryTarget) {
  auto examples = testdata::exampleGraphs();
  ASSERT_GT(examples.size(), 10u);
  int kernels = 0;
  for (const rt::Target& t : stitch::testing::driverTargets()) {
    for (const auto& [name, graph] : examples) {
      const std::string what = name + " for " + t.arch;
      ir::Graph g = driver::optimize(graph);
      driver::Build b = driver::build(g, fives(g), t, {});
      ASSERT_EQ(b.programs.size(), b.plan.kernels.size()) << what;
      ASSERT_EQ(b.artifact.kernels.size(), b.plan.kernels.size()) << what;
      std::vector<int> external(g.inputs().begin(), g.inputs().end());
      external.insert(external.end(), g.outputs().begin(), g.outputs().end());
      EXPECT_EQ(b.artifact.external, external) << what;
      std::set<std::string> keys;
      for (size_t k = 0; k < b.programs.size(); ++k) {
        const lower::KernelProgram& p = b.programs[k];
        const rt::KernelArtifact& a = b.artifact.kernels[k];
        ASSERT_EQ(a.params.size(), p.params.size()) << what;
        for (size_t i = 0; i < p.params.size(); ++i) {
          EXPECT_EQ(a.params[i].value, p.params[i].value) << what;
          EXPECT_EQ(a.params[i].scratch, p.params[i].scratch) << what;
          EXPECT_EQ(a.params[i].elements, p.params[i].elements) << what;
          if (p.params[i].value >= 0) {
            EXPECT_FALSE(b.artifact.valueLabels.at(static_cast<size_t>(p.params[i].value)).empty())
                << what;
          }
        }
        ASSERT_EQ(a.phases.size(), p.phases.size()) << what;
        for (size_t i = 0; i < p.phases.size(); ++i) {
          EXPECT_EQ(a.phases[i].params, p.phases[i].buffers) << what;
          EXPECT_EQ(a.phases[i].numInputs, p.phases[i].numInputs) << what;
        }
        ASSERT_EQ(a.forms.size(), t.backend == "cpu" ? 1u : 2u) << what;
        if (t.backend != "cpu") {
          // What the cost model priced is what runs (lower/launch.h): the block, and the grid
          // (several phases: the largest, the cooperative launch's).
          const fusion::KernelSummary& priced = b.plan.kernels[k].summary;
          int64_t grid = 0;
          for (const rt::EntryPoint& e : a.forms[0].phases) {
            EXPECT_EQ(e.block, priced.threadsPerBlock) << what << " kernel " << k;
            grid = std::max(grid, e.grid);
          }
          EXPECT_EQ(grid, priced.blocks) << what << " kernel " << k;
        }
        for (size_t f = 0; f < a.forms.size(); ++f) {
          expectForm(p, t, a.forms[f], f, what + " kernel " + std::to_string(k));
          keys.insert(a.forms[f].key.canonical());
        }
        ++kernels;
      }
      // Forms of one kernel, and distinct kernels, never share a key.
      size_t forms = 0;
      for (const rt::KernelArtifact& a : b.artifact.kernels) forms += a.forms.size();
      std::set<std::string> programs;
      for (const lower::KernelProgram& p : b.programs) programs.insert(lower::printProgram(p));
      if (programs.size() == b.programs.size()) {
        EXPECT_EQ(keys.size(), forms) << what;
      }

      // Deterministic: a second build hands the backend the same code under the same keys.
      driver::Build again = driver::build(g, fives(g), t, {});
      ASSERT_EQ(again.artifact.kernels.size(), b.artifact.kernels.size()) << what;
      for (size_t k = 0; k < b.artifact.kernels.size(); ++k)
        for (size_t f = 0; f < b.artifact.kernels[k].forms.size(); ++f) {
          EXPECT_EQ(again.artifact.kernels[k].forms[f].text, b.artifact.kernels[k].forms[f].text)
              << what;
          EXPECT_EQ(again.artifact.kernels[k].forms[f].key.canonical(),
                    b.artifact.kernels[k].forms[f].key.canonical())
              << what;
        }
    }
  }
  EXPECT_GT(kernels, 30);
}

TEST(Driver, PlanStageStopsAtThePlan) {
  for (const auto& [name, graph] : testdata::exampleGraphs()) {
    ir::Graph g = driver::optimize(graph);
    driver::Build b =
        driver::build(g, fives(g), target::namedTarget("sm_90"), {}, driver::Stage::Plan);
    EXPECT_FALSE(b.plan.kernels.empty()) << name;
    EXPECT_TRUE(b.programs.empty()) << name;
    EXPECT_TRUE(b.artifact.kernels.empty()) << name;
  }
}

TEST(Driver, TargetsAreNamedOrRefused) {
  EXPECT_EQ(target::namedTarget("host").backend, "cpu");
  EXPECT_EQ(target::namedTarget("sm_86").backend, "cuda");
  EXPECT_EQ(target::namedTarget("gfx90a").backend, "hip");
  // sm_86 is priced as its family, sm_80.
  EXPECT_EQ(target::makeTarget(target::namedTarget("sm_86"))->facts().name, "sm_80");
  EXPECT_EQ(target::makeTarget(target::namedTarget("host"))->facts().name, "host");
  try {
    target::namedTarget("tpu");
    ADD_FAILURE() << "tpu was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("host, sm_90"), std::string::npos) << e.what();
  }
}

}  // namespace
