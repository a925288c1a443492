// The cpu target: kernels for the host, as LLVM IR the cpu backend's ORC JIT compiles.
//
// Facts: the built-in host profile (fusion/hardware.cpp) with the cpu backend's own machine laid
// over it (rt::HostProfile: threads, SIMD width, caches, the bandwidth it measured). Schedule
// (host_schedule.h): every choice of how a phase runs, made on the lowered program: its task
// grain (a task covers facts().taskElements elements; a phase with workers runs one worker per
// unit instead, lower/column_partials.h), its tiles, prefetch, row caches, interleaving and the
// buffers it streams past the backend's streaming-store size (rt::HostCompileOptions). Emit: the
// LLVM emitter carries the schedule out (codegen/llvm/llvm_emitter.h).
#include <fmt/format.h>

#include <chrono>

#include "runtime/backend.h"
#include "runtime/support/error.h"
#include "target/cpu/host_schedule.h"
#include "target/keys.h"
#include "target/target.h"
#if defined(STITCH_HAVE_LLVM)
#include "codegen/llvm/llvm_emitter.h"
#endif

namespace stitch::target {

namespace {

// The built-in host profile with what the cpu backend measured and read of its machine
// (runtime/cpu/host_profile.h) laid over it; a field it left 0 keeps the built-in figure.
fusion::HardwareProfile hostFacts(const rt::Target& t) {
  std::optional<fusion::HardwareProfile> profile = fusion::findProfile("host");
  STITCH_INTERNAL(profile.has_value(), "no built-in host profile");
  // Arithmetic scales with cores and SIMD lanes (the per-lane clock stays the built-in's).
  const rt::HostProfile& h = t.hostProfile;
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
  // "Shared memory" is a core's private L2 (fusion/hardware.h).
  if (h.l2Bytes > 0) profile->sharedMemoryPerProcessor = profile->sharedMemoryPerBlock = h.l2Bytes;
  if (h.l3Bytes > 0) profile->cacheBytes = h.l3Bytes;
  if (h.memoryBandwidth > 0) profile->memoryBandwidth = h.memoryBandwidth;
  if (!h.model.empty())
    profile->description = fmt::format(
        "{} ({} threads, {} f32 lanes{})", h.model, profile->processors, profile->warpSize,
        h.memoryBandwidth > 0 ? fmt::format(", {:.1f} GB/s measured", h.memoryBandwidth / 1e9)
                              : std::string());
  return *profile;
}

class CpuTarget final : public Target {
 public:
  explicit CpuTarget(const rt::Target& t) : Target(t, hostFacts(t)) {}

  std::string_view language() const override { return "llvm-ir"; }

  lower::KernelProgram lowerShapes(const ir::Graph& g, const fusion::Kernel& k,
                                   const std::vector<std::vector<int64_t>>& shapes) const override {
    return lower::lowerKernelWithShapes(g, k, shapes, nullptr);
  }
  // A host kernel's launch is its plan's mapping: a task per facts().taskElements.
  const fusion::Scheduler* scheduler() const override { return nullptr; }

  // Grain, tiles, prefetch, row caches, interleaving and streaming stores (host_schedule.h).
  void schedule(lower::KernelProgram& p) const override {
    cpu::scheduleHost(p, facts().taskElements, description().hostOptions.streamingStoreBytes);
  }

  std::vector<rt::KernelCode> emit(const lower::KernelProgram& p) const override {
#if defined(STITCH_HAVE_LLVM)
    const rt::Target& t = description();
    rt::KernelCode code;
    // Symbols are a function of the key, so an object from the disk cache defines the names this
    // process looks up, and two kernels never define one name in one JIT.
    codegen::NamedIR ir = codegen::namedProgramIR(p, [&](const std::string& keyText) {
      code.key = hostKernelKey(keyText, t.host, t.hostOptions);
      return fmt::format("stitch_{:016x}", code.key.hash());
    });
    code.language = std::string(language());
    code.text = std::move(ir.text);
    // namedProgramIR names phase i PREFIX_i (llvm_emitter.h).
    for (size_t i = 0; i < p.phases.size(); ++i) {
      rt::EntryPoint e;
      e.symbol = fmt::format("{}_{}", ir.prefix, i);
      // A phase with workers runs worker ranges, each worker its own units in order
      // (kernel_program.h); the host function's [begin, end) is then a range of workers.
      e.units = p.phases[i].workers ? p.phases[i].workers : p.phases[i].units;
      e.grain = p.phases[i].workers ? 1 : p.phases[i].grain;
      code.phases.push_back(std::move(e));
    }
    std::vector<rt::KernelCode> forms;
    forms.push_back(std::move(code));
    return forms;
#else
    (void)p;
    throwError(ErrorCode::BackendUnavailable,
               "cannot emit host code: this build of Stitch has no LLVM (STITCH_ENABLE_LLVM=OFF)");
#endif
  }

  CompileReport compile(const rt::KernelArtifact& k) const override {
    CompileReport r;
    auto t0 = std::chrono::steady_clock::now();
    rt::requireBackend(name()).compile(k);
    r.compiler = "LLVM ORC";
    r.throughCache = true;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }

  std::string checkCode(const rt::KernelCode& code) const override {
    // Host symbols are named after the code's key (emit above), so that two codes never define
    // one name in the JIT.
    for (size_t i = 0; i < code.phases.size(); ++i)
      if (code.phases[i].symbol != fmt::format("stitch_{:016x}_{}", code.key.hash(), i))
        return fmt::format("phase {}'s symbol {} is not the one its key names", i,
                           code.phases[i].symbol);
    if (!code.cooperative.symbol.empty()) return "it has a cooperative entry on the host";
    return {};
  }
};

}  // namespace

namespace registration {

// Listed in src/target/CMakeLists.txt's built-in targets.
void cpu() {
  TargetInfo info;
  info.backend = "cpu";
  info.archHelp = "host";
  info.named = [](std::string_view arch) -> std::optional<rt::Target> {
    if (arch != "host") return std::nullopt;
    rt::Target t;  // backend "cpu", arch "host": the built-in host profile, nothing probed
    return t;
  };
  // The cpu backend's own JIT: its machine and options are what the code is compiled for.
  info.offline = [](rt::Target& t, std::string*) { t = rt::requireBackend("cpu").target(); };
  info.make = [](const rt::Target& t) { return std::make_unique<CpuTarget>(t); };
  registerTarget(std::move(info));
}

}  // namespace registration

}  // namespace stitch::target
