// Code generation without running: stitch_graph_codegen (`stitch codegen`).
//
// The graph goes through the passes and the planner exactly as a program's would for the target's
// profile; each kernel is lowered and emitted, then compiled by the target's compiler (NVRTC for
// sm_*, hipRTC for gfx90a, LLVM ORC for host). Nothing is loaded on a device, so this runs on a
// machine with no GPU, and is what CI uses to check that every kernel compiles without spills.
#include <fmt/format.h>

#include <array>
#include <chrono>

#include "api/api_internal.h"
#include "codegen/gpu/cstyle_emitter.h"
#include "fusion/hardware.h"
#include "fusion/planner.h"
#include "lower/kernel_program.h"
#include "passes/pipeline.h"
#include "runtime/gpu/device_compiler.h"
#include "runtime/gpu/gpu_kernels.h"
#include "support/env.h"
#if defined(STITCH_HAVE_LLVM)
#include "codegen/llvm/llvm_emitter.h"
#include "runtime/cpu/cached_compiler.h"
#endif

using namespace stitch;

namespace {

constexpr std::array<std::string_view, 3> kCodegenOptions = {"target", "fusion", "emit"};
constexpr std::array<std::string_view, 2> kEmitChoices = {"report", "source"};

std::string kernelSummary(const ir::Graph& g, const fusion::Kernel& k, size_t index,
                          const lower::KernelProgram& p) {
  return fmt::format("kernel {}: {} ops ({}), {} phase{}", index, k.nodes.size(),
                     ir::opName(g.node(k.dominant).op), p.phases.size(),
                     p.phases.size() == 1 ? "" : "s");
}

std::string codegenGpu(const ir::Graph& g, const fusion::Plan& plan, const ir::Bindings& b,
                       const std::string& target, bool source) {
  codegen::GpuTarget t = codegen::gpuTarget(target);
  std::string text = fmt::format("graph {}: {} kernel{} for {}\n", g.name(), plan.kernels.size(),
                                 plan.kernels.size() == 1 ? "" : "s", target);
  rt::gpu::DeviceCompiler* compiler = nullptr;
  if (!source) {
    std::string why;
    compiler = t.vendor == codegen::GpuVendor::Amd ? rt::gpu::hiprtcCompiler(&why)
                                                   : rt::gpu::nvrtcCompiler(&why);
    STITCH_CHECK(compiler != nullptr, ErrorCode::BackendUnavailable, "cannot compile for {}: {}",
                 target, why);
  }
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const fusion::Kernel& k = plan.kernels[i];
    lower::KernelProgram p = lower::lowerKernel(g, k, b);
    if (source) {
      codegen::GpuKernelSource src = codegen::emitGpuKernel(p, t);
      text += fmt::format("// ---- {}\n{}\n", kernelSummary(g, k, i, p), src.source);
      continue;
    }
    rt::gpu::CompiledProgram c = rt::gpu::compileProgram(p, t, *compiler, /*aligned=*/true);
    text += fmt::format(
        "  {}, block {}: compiled by {} in {:.1f} ms, {} registers, {} bytes spilled, {} bytes of "
        "code\n",
        kernelSummary(g, k, i, p), c.source.schedule.block, compiler->name(),
        c.binary.seconds * 1e3, c.binary.registers, c.binary.spillBytes, c.binary.bytes.size());
  }
  return text;
}

std::string codegenHost(const ir::Graph& g, const fusion::Plan& plan, const ir::Bindings& b,
                        bool source) {
#if defined(STITCH_HAVE_LLVM)
  std::string text = fmt::format("graph {}: {} kernel{} for host\n", g.name(), plan.kernels.size(),
                                 plan.kernels.size() == 1 ? "" : "s");
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const fusion::Kernel& k = plan.kernels[i];
    lower::KernelProgram p = lower::lowerKernel(g, k, b);
    if (source) {
      text += fmt::format("; ---- {}\n{}\n", kernelSummary(g, k, i, p),
                          codegen::programIR(p, fmt::format("stitch_k{}", i)));
      continue;
    }
    auto t0 = std::chrono::steady_clock::now();
    auto phases = rt::cpu::HostCompiler::instance().compile(g, k, b);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    text += fmt::format("  {}: compiled (or found in the kernel cache) by LLVM ORC in {:.1f} ms\n",
                        kernelSummary(g, k, i, p), ms);
  }
  return text;
#else
  (void)g, (void)plan, (void)b, (void)source;
  throwError(ErrorCode::BackendUnavailable,
             "cannot compile for host: this build of Stitch has no LLVM (STITCH_ENABLE_LLVM=OFF)");
#endif
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
    fusion::Mode mode = fusion::modeFromEnv();
    for (const auto& [k, v] :
         api::readOptions(keys, values, num_options, kCodegenOptions, "codegen")) {
      if (k == "target") target = v;
      else if (k == "fusion") mode = fusion::parseMode(v);
      else emit = v;
    }
    STITCH_CHECK(std::find(kEmitChoices.begin(), kEmitChoices.end(), emit) != kEmitChoices.end(),
                 ErrorCode::InvalidArgument, "unknown emit '{}'; valid values: {}", emit,
                 env::joinChoices(kEmitChoices));
    // The cost model prices the target's family (sm_86 plans as sm_80 would, for instance).
    std::string profileName = "host";
    if (target != "host") profileName = codegen::costProfileName(codegen::gpuTarget(target));
    api::PlannedGraph p =
        api::planForSizes(graph->graph(), profileName, mode, symbols, sizes, num_symbols);
    bool source = emit == "source";
    std::string text = target == "host"
                           ? codegenHost(p.optimized, p.plan, p.bindings, source)
                           : codegenGpu(p.optimized, p.plan, p.bindings, target, source);
    api::copyOut(text, buf, capacity, needed);
    return STITCH_OK;
  })
}

}  // extern "C"
