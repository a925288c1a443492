// The compile driver (design note in driver.h).
#include "driver/driver.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <type_traits>

#include "codegen/gpu/cstyle_emitter.h"
#include "driver/keys.h"
#include "fusion/planner.h"
#include "ir/printer.h"
#include "lower/launch.h"
#include "lower/size_args.h"
#include "passes/pipeline.h"
#include "runtime/backend.h"
#include "runtime/gpu/device_compiler.h"
#include "runtime/gpu/gpu_kernels.h"
#include "support/env.h"
#include "support/error.h"
#include "support/logging.h"
#if defined(STITCH_HAVE_LLVM)
#include "codegen/llvm/llvm_emitter.h"
#endif

namespace stitch::driver {

namespace {

bool isGpu(rt::BackendKind k) { return k == rt::BackendKind::Cuda || k == rt::BackendKind::Hip; }

// The run-time compiler of a GPU target's kind (nullptr and *why when it cannot be opened).
rt::gpu::DeviceCompiler* gpuCompiler(rt::BackendKind k, std::string* why) {
  return k == rt::BackendKind::Hip ? rt::gpu::hiprtcCompiler(why) : rt::gpu::nvrtcCompiler(why);
}

// The emitter's GPU target: the arch's, with what the device measured.
codegen::GpuTarget gpuTargetOf(const rt::Target& t) {
  codegen::GpuTarget g = codegen::gpuTarget(t.arch);
  if (t.processors > 0) g.smCount = t.processors;
  if (t.warpSize > 0) g.warpSize = t.warpSize;
  return g;
}

rt::EntryPoint gpuEntry(const codegen::GpuLaunch& l) {
  rt::EntryPoint e;
  e.symbol = l.function;
  e.grid = l.grid;
  e.block = l.block;
  e.sharedBytes = l.sharedBytes;
  return e;
}

rt::KernelCode emitGpu(const lower::KernelProgram& p, const rt::Target& t, bool aligned) {
  const codegen::GpuTarget target = gpuTargetOf(t);
  const codegen::GpuEmitOptions options{aligned};
  codegen::GpuKernelSource src = codegen::emitGpuKernel(p, target, options);
  rt::KernelCode code;
  code.key = gpuKernelKey(src.source, target, options, t.compiler);
  code.language =
      target.vendor == codegen::GpuVendor::Amd ? rt::CodeLanguage::Hip : rt::CodeLanguage::Cuda;
  code.text = std::move(src.source);
  code.headers = deviceHeaders();
  code.requiresAlignment = aligned;
  for (const codegen::GpuLaunch& l : src.phases) code.phases.push_back(gpuEntry(l));
  if (!src.cooperative.function.empty()) code.cooperative = gpuEntry(src.cooperative);
  return code;
}

rt::KernelCode emitHost(const lower::KernelProgram& p, const rt::Target& t) {
#if defined(STITCH_HAVE_LLVM)
  rt::KernelCode code;
  // Symbols are a function of the key, so an object from the disk cache defines the names this
  // process looks up, and two kernels never define one name in one JIT.
  codegen::NamedIR ir =
      codegen::namedProgramIR(p,
                              [&](const std::string& keyText) {
                                code.key = hostKernelKey(keyText, t.host, t.hostOptions);
                                return fmt::format("stitch_{:016x}", code.key.hash());
                              },
                              {t.hostOptions.streamingStoreBytes});
  const std::string& prefix = ir.prefix;
  code.language = rt::CodeLanguage::LlvmIr;
  code.text = std::move(ir.text);
  // emitProgram names phase i PREFIX_i (llvm_emitter.h).
  for (size_t i = 0; i < p.phases.size(); ++i) {
    rt::EntryPoint e;
    e.symbol = fmt::format("{}_{}", prefix, i);
    // A phase with workers runs worker ranges, each worker its own units in order
    // (kernel_program.h); the host function's [begin, end) is then a range of workers.
    e.units = p.phases[i].workers ? p.phases[i].workers : p.phases[i].units;
    e.grain = p.phases[i].workers ? 1 : p.phases[i].grain;
    code.phases.push_back(std::move(e));
  }
  return code;
#else
  (void)p, (void)t;
  throwError(ErrorCode::BackendUnavailable,
             "cannot emit host code: this build of Stitch has no LLVM (STITCH_ENABLE_LLVM=OFF)");
#endif
}

// Kernel k of the plan lowered under `bindings`: GPU programs carry the launch the planner priced
// (Phase::levels, lower/launch.h), decided for the same machine facts; the emitter prints that
// launch.
lower::KernelProgram lowerFor(const ir::Graph& optimized, const fusion::Kernel& k,
                              const ir::Bindings& bindings, const rt::Target& target,
                              const fusion::HardwareProfile& profile) {
  return isGpu(target.kind)
             ? lower::lowerKernel(optimized, k, bindings, lower::launchTarget(profile))
             : lower::lowerKernel(optimized, k, bindings);
}

// Marks the sizes of p (kernel k lowered under a signature's bindings) that `moved` changes as
// size arguments. A kernel the perturbed sizes cannot lower (a size the graph constrains) keeps
// every size compiled in: the moved program only chooses the arguments, so skipping it is
// always sound.
void markMovedSizes(lower::KernelProgram& p, const ir::Graph& optimized, const fusion::Kernel& k,
                    const ir::Bindings& moved, const rt::Target& target,
                    const fusion::HardwareProfile& profile) {
  try {
    lower::markSizeArgs(p, lowerFor(optimized, k, moved, target, profile));
  } catch (const Error& e) {
    log().debug("kernel {}: sizes compiled in ({})", p.name, e.what());
  }
}

}  // namespace

std::shared_ptr<const std::vector<rt::SourceHeader>> deviceHeaders() {
  static const auto headers = [] {
    auto out = std::make_shared<std::vector<rt::SourceHeader>>();
    for (const codegen::DeviceHeaderText& h : codegen::deviceHeaders())
      out->push_back(rt::SourceHeader{std::string(h.name), std::string(h.text)});
    return std::shared_ptr<const std::vector<rt::SourceHeader>>(std::move(out));
  }();
  return headers;
}

bool shapeClassesEnabled() { return env::getBool("STITCH_SHAPE_CLASSES", true); }

rt::KernelArtifact emitKernel(const lower::KernelProgram& p, const rt::Target& t) {
  rt::KernelArtifact a;
  a.name = p.name;
  for (const lower::Param& q : p.params)
    a.params.push_back(rt::KernelBuffer{q.value, q.scratch, q.dtype, q.elements});
  for (const lower::Phase& ph : p.phases) a.phases.push_back({ph.buffers, ph.numInputs});
  a.sizes = p.sizeArgs.values;
  a.checks = p.checks;
  switch (t.kind) {
    case rt::BackendKind::Cpu: a.forms.push_back(emitHost(p, t)); break;
    case rt::BackendKind::Cuda:
    case rt::BackendKind::Hip:
      // Preferred first: vector accesses need every buffer 16-byte aligned; the second form is
      // for runs whose buffers are not (compiled only when such a run comes).
      a.forms.push_back(emitGpu(p, t, /*aligned=*/true));
      a.forms.push_back(emitGpu(p, t, /*aligned=*/false));
      break;
    case rt::BackendKind::Reference:
      STITCH_INTERNAL(false, "the reference backend runs graphs, not generated code");
  }
  return a;
}

ir::Graph optimize(const ir::Graph& g) {
  ir::verify(g);
  return passes::runPasses(g);
}

fusion::HardwareProfile profileFor(const rt::Target& target) {
  std::string name = "host";
  if (isGpu(target.kind)) name = codegen::costProfileName(gpuTargetOf(target));
  auto profile = fusion::findProfile(name);
  STITCH_INTERNAL(profile.has_value(), "no hardware profile '{}'", name);
  // The emitter's machine (what a device measured, else its arch's nominal figures) replaces the
  // family's, so that the planner prices the launch the emitter makes for this very device: both
  // decide it from these facts (lower/launch.h).
  if (isGpu(target.kind)) {
    const codegen::GpuTarget g = gpuTargetOf(target);
    // Arithmetic rates are per multiprocessor times multiprocessors: another part of the family
    // (an H100 PCIe's 114 SMs) issues proportionally less.
    const double scale = static_cast<double>(g.smCount) / profile->processors;
    profile->flops *= scale;
    profile->expensiveFlops *= scale;
    profile->processors = g.smCount;
    profile->warpSize = g.warpSize;
    // Then what the device itself reports and measured (runtime/gpu/device_profile.h); a field it
    // left 0 keeps the family's figure.
    const rt::DeviceProfile& d = target.device;
    auto take = [](auto& field, auto value) {
      if (value > 0) field = static_cast<std::remove_reference_t<decltype(field)>>(value);
    };
    take(profile->maxThreadsPerProcessor, d.maxThreadsPerProcessor);
    take(profile->maxBlocksPerProcessor, d.maxBlocksPerProcessor);
    take(profile->maxThreadsPerBlock, d.maxThreadsPerBlock);
    take(profile->registersPerProcessor, d.registersPerProcessor);
    take(profile->sharedMemoryPerProcessor, d.sharedMemoryPerProcessor);
    take(profile->sharedMemoryPerBlock, d.sharedMemoryPerBlock);
    take(profile->memoryBandwidth, d.memoryBandwidth);
    if (!d.name.empty())
      profile->description = fmt::format(
          "{} ({}, {} SMs{})", d.name, target.arch, g.smCount,
          d.memoryBandwidth > 0 ? fmt::format(", {:.0f} GB/s measured", d.memoryBandwidth / 1e9)
                                : std::string());
  } else {
    // The cpu backend's machine (runtime/cpu/host_profile.h) over the built-in nominal one; a
    // field it left 0 keeps the built-in figure. Arithmetic scales with cores and SIMD lanes
    // (the per-lane clock stays the built-in's).
    const rt::HostProfile& h = target.hostProfile;
    if (h.threads > 0) {
      const double scale = static_cast<double>(h.threads) / profile->processors;
      profile->flops *= scale;
      profile->expensiveFlops *= scale;
      profile->processors = h.threads;
    }
    if (h.simdWidth > 0) {
      const double scale = static_cast<double>(h.simdWidth) / profile->warpSize;
      profile->flops *= scale;
      profile->expensiveFlops *= scale;
      profile->warpSize = h.simdWidth;
    }
    // "Shared memory" is a core's private L2 (hardware.h).
    if (h.l2Bytes > 0)
      profile->sharedMemoryPerProcessor = profile->sharedMemoryPerBlock = h.l2Bytes;
    if (h.l3Bytes > 0) profile->cacheBytes = h.l3Bytes;
    if (h.memoryBandwidth > 0) profile->memoryBandwidth = h.memoryBandwidth;
    if (!h.model.empty())
      profile->description = fmt::format(
          "{} ({} threads, {} f32 lanes{})", h.model, profile->processors, profile->warpSize,
          h.memoryBandwidth > 0 ? fmt::format(", {:.1f} GB/s measured", h.memoryBandwidth / 1e9)
                                : std::string());
  }
  return *profile;
}

Build build(const ir::Graph& optimized, const ir::Bindings& bindings, const rt::Target& target,
            const Options& options, Stage stage, fusion::PlanCache* plans) {
  Build out;
  fusion::PlannerOptions planner;
  planner.mode = options.mode;
  planner.candidate = options.planCandidate;
  const fusion::HardwareProfile profile = profileFor(target);
  const bool classes = !bindings.empty() && shapeClassesEnabled();
  if (plans && classes) {
    STITCH_INTERNAL(&plans->graph() == &optimized, "a plan cache used for another graph");
    out.plan = plans->plan(bindings, profile, planner, &out.planOrigin);
  } else {
    out.plan = fusion::planGraph(optimized, bindings, profile, planner);
    out.planOrigin.searchedAt = bindings;
  }
  log().debug("graph {} planned for {} ({} fusion): {} kernels for {} ops", optimized.name(),
              target.arch, fusion::modeName(options.mode), out.plan.kernels.size(),
              optimized.numOps());
  if (stage == Stage::Plan) return out;

  rt::ProgramArtifact& a = out.artifact;
  a.name = optimized.name();
  a.external.assign(optimized.inputs().begin(), optimized.inputs().end());
  a.external.insert(a.external.end(), optimized.outputs().begin(), optimized.outputs().end());
  // Shape classes (lower/size_args.h): the emitters read sizes that the signature's symbols move
  // as arguments, so that other sizes of the class share the compiled kernel.
  const ir::Bindings moved = classes ? lower::perturbedBindings(bindings) : ir::Bindings{};
  for (const fusion::Kernel& k : out.plan.kernels) {
    out.programs.push_back(lowerFor(optimized, k, bindings, target, profile));
    if (classes) markMovedSizes(out.programs.back(), optimized, k, moved, target, profile);
    a.kernels.push_back(emitKernel(out.programs.back(), target));
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

rt::Target namedTarget(const std::string& name) {
  rt::Target t;
  if (name == "host") return t;  // kind Cpu, arch "host"
  codegen::GpuTarget g;
  try {
    g = codegen::gpuTarget(name);
  } catch (const Error&) {
    throwError(ErrorCode::InvalidArgument,
               fmt::format("unknown target '{}'; valid targets: host, {} (or another sm_XY with "
                           "XY >= 70)",
                           name, fmt::join(codegen::knownGpuArchs(), ", ")));
  }
  t.kind = g.vendor == codegen::GpuVendor::Amd ? rt::BackendKind::Hip : rt::BackendKind::Cuda;
  t.arch = g.arch;
  return t;
}

rt::Target offlineTarget(const std::string& name, std::string* why) {
  rt::Target t = namedTarget(name);
  if (t.kind == rt::BackendKind::Cpu) return rt::requireBackend(rt::BackendKind::Cpu).target();
  if (rt::gpu::DeviceCompiler* c = gpuCompiler(t.kind, why))
    t.compiler = rt::gpu::compilerId(*c, t.arch);
  return t;
}

CompileReport compileOffline(const rt::KernelArtifact& k, const rt::Target& target) {
  CompileReport r;
  if (!isGpu(target.kind)) {
    auto t0 = std::chrono::steady_clock::now();
    rt::requireBackend(target.kind).compile(k);
    r.compiler = "LLVM ORC";
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }
  std::string why;
  rt::gpu::DeviceCompiler* c = gpuCompiler(target.kind, &why);
  STITCH_CHECK(c != nullptr, ErrorCode::BackendUnavailable, "cannot compile for {}: {}",
               target.arch, why);
  rt::gpu::DeviceBinary bin = rt::gpu::compileCode(k.forms.at(0), target.arch, *c);
  r.compiler = std::string(c->name());
  r.seconds = bin.seconds;
  r.cpuSeconds = bin.cpuSeconds;
  r.registers = bin.registers;
  r.spillBytes = bin.spillBytes;
  r.codeBytes = static_cast<int64_t>(bin.bytes.size());
  return r;
}

}  // namespace stitch::driver
