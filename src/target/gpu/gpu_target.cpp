// The cuda and hip targets: kernels for NVIDIA and AMD GPUs, as CUDA or HIP C++ from the one
// C-style emitter (codegen/gpu/cstyle_emitter.h), compiled by NVRTC or hipRTC.
//
// Facts: the built-in profile of the architecture's family (sm_90 for sm_90 and later, sm_80
// for earlier NVIDIA parts, gfx90a) with the emitter's machine laid over it (the device's
// multiprocessors and warp width, else the arch's nominal ones), then what the device reports and
// measured (rt::DeviceProfile). Schedule: the launch of every phase (lower/launch.h), decided for
// the same machine facts the planner priced, for 16-byte aligned buffers; emit() makes that
// aligned form and a form for any alignment (compiled only when a run needs it), whose launch it
// decides first (gpu_schedule.h): the emitter prints launches and decides none.
#include "codegen/gpu/gpu_target.h"

#include <fmt/format.h>

#include <type_traits>

#include "codegen/gpu/cstyle_emitter.h"
#include "lower/launch.h"
#include "runtime/gpu/device_compiler.h"
#include "runtime/gpu/gpu_kernels.h"
#include "runtime/support/error.h"
#include "target/gpu/gpu_schedule.h"
#include "target/keys.h"
#include "target/target.h"

namespace stitch::target {

namespace {

// The run-time compiler of the target's API (nullptr and *why when it cannot be opened).
rt::gpu::DeviceCompiler* compilerFor(const rt::Target& t, std::string* why) {
  return t.backend == "hip" ? rt::gpu::hiprtcCompiler(why) : rt::gpu::nvrtcCompiler(why);
}

// The emitter's GPU target: the arch's, with what the device measured.
codegen::GpuTarget emitterTarget(const rt::Target& t) {
  codegen::GpuTarget g = codegen::gpuTarget(t.arch);
  if (t.processors > 0) g.smCount = t.processors;
  if (t.warpSize > 0) g.warpSize = t.warpSize;
  return g;
}

fusion::HardwareProfile gpuFacts(const rt::Target& target) {
  const codegen::GpuTarget g = emitterTarget(target);
  std::optional<fusion::HardwareProfile> profile = fusion::findProfile(codegen::costProfileName(g));
  STITCH_INTERNAL(profile.has_value(), "no hardware profile for {}", target.arch);
  // The emitter's machine (what a device measured, else its arch's nominal figures) replaces the
  // family's, so that the planner prices the launch the emitter makes for this very device: both
  // decide it from these facts (lower/launch.h). Arithmetic rates are per multiprocessor times
  // multiprocessors: another part of the family (an H100 PCIe's 114 SMs) issues proportionally
  // less.
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
  return *profile;
}

// The device templates as the code's headers: made once, shared by every kernel.
std::shared_ptr<const std::vector<rt::SourceHeader>> deviceHeaders() {
  static const auto headers = [] {
    auto out = std::make_shared<std::vector<rt::SourceHeader>>();
    for (const codegen::DeviceHeaderText& h : codegen::deviceHeaders())
      out->push_back(rt::SourceHeader{std::string(h.name), std::string(h.text)});
    return std::shared_ptr<const std::vector<rt::SourceHeader>>(std::move(out));
  }();
  return headers;
}

rt::EntryPoint entryOf(const codegen::GpuLaunch& l) {
  rt::EntryPoint e;
  e.symbol = l.function;
  e.grid = l.grid;
  e.block = l.block;
  e.sharedBytes = l.sharedBytes;
  return e;
}

class DeviceTarget final : public Target {
 public:
  explicit DeviceTarget(const rt::Target& t)
      : Target(t, gpuFacts(t)), emitter_(emitterTarget(t)), launch_(lower::launchTarget(facts())) {
    STITCH_INTERNAL(emitter_.dialect == t.backend, "architecture {} on backend {}", t.arch,
                    t.backend);
  }

  // The dialect the emitter writes is the language the backend's compiler reads.
  std::string_view language() const override { return emitter_.dialect; }

  lower::KernelProgram lowerShapes(const ir::Graph& g, const fusion::Kernel& k,
                                   const std::vector<std::vector<int64_t>>& shapes) const override {
    return lower::lowerKernelWithShapes(g, k, shapes, &launch_);
  }

  // The launch the planner priced (the aligned variant, the runtime's default: lower/launch.h).
  void schedule(lower::KernelProgram& p) const override {
    lower::scheduleLaunch(p, launch_, /*aligned=*/true);
  }

  std::vector<rt::KernelCode> emit(const lower::KernelProgram& p) const override {
    // Preferred first: vector accesses need every buffer 16-byte aligned; the second form is for
    // runs whose buffers are not (compiled only when such a run comes).
    std::vector<rt::KernelCode> forms;
    for (bool aligned : {true, false}) {
      const codegen::GpuEmitOptions options{aligned};
      codegen::GpuKernelSource src =
          codegen::emitGpuKernel(scheduledFor(p, emitter_, aligned), emitter_, options);
      rt::KernelCode code;
      code.key = gpuKernelKey(src.source, emitter_, options, description().compiler);
      code.language = std::string(language());
      code.text = std::move(src.source);
      code.headers = deviceHeaders();
      code.requiresAlignment = aligned;
      for (const codegen::GpuLaunch& l : src.phases) code.phases.push_back(entryOf(l));
      if (!src.cooperative.function.empty()) code.cooperative = entryOf(src.cooperative);
      forms.push_back(std::move(code));
    }
    return forms;
  }

  CompileReport compile(const rt::KernelArtifact& k) const override {
    std::string why;
    rt::gpu::DeviceCompiler* c = compilerFor(description(), &why);
    STITCH_CHECK(c != nullptr, ErrorCode::BackendUnavailable, "cannot compile for {}: {}",
                 description().arch, why);
    rt::gpu::DeviceBinary bin = rt::gpu::compileCode(k.forms.at(0), description().arch, *c);
    CompileReport r;
    r.compiler = std::string(c->name());
    r.seconds = bin.seconds;
    r.cpuSeconds = bin.cpuSeconds;
    r.registers = bin.registers;
    r.spillBytes = bin.spillBytes;
    r.codeBytes = static_cast<int64_t>(bin.bytes.size());
    return r;
  }

  std::shared_ptr<const std::vector<rt::SourceHeader>> headers() const override {
    return deviceHeaders();
  }

 private:
  codegen::GpuTarget emitter_;
  lower::LaunchTarget launch_;
};

// The description of `arch` for `backend` (its dialect), nothing probed; nullopt for an arch of
// another dialect or none.
std::optional<rt::Target> namedGpu(std::string_view arch, const char* backend) {
  codegen::GpuTarget g;
  try {
    g = codegen::gpuTarget(arch);
  } catch (const Error&) {
    return std::nullopt;
  }
  if (g.dialect != backend) return std::nullopt;
  rt::Target t;
  t.backend = backend;
  t.arch = g.arch;
  return t;
}

void registerGpu(const char* backend, std::string archHelp) {
  TargetInfo info;
  info.backend = backend;
  info.archHelp = std::move(archHelp);
  info.named = [=](std::string_view arch) { return namedGpu(arch, backend); };
  info.offline = [](rt::Target& t, std::string* why) {
    if (rt::gpu::DeviceCompiler* c = compilerFor(t, why))
      t.compiler = rt::gpu::compilerId(*c, t.arch);
  };
  info.make = [](const rt::Target& t) { return std::make_unique<DeviceTarget>(t); };
  registerTarget(std::move(info));
}

}  // namespace

namespace registration {

// Listed in src/target/CMakeLists.txt's built-in targets.
void cuda() { registerGpu("cuda", "sm_90, sm_80 (or another sm_XY with XY >= 70)"); }
void hip() { registerGpu("hip", "gfx90a"); }

}  // namespace registration

}  // namespace stitch::target
