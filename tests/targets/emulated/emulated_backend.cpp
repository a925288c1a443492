// The "emulated" backend and target: a test-only backend, added as a new backend is (README,
// "Layout"): this folder, registered from here, with no switch or list outside it edited.
//
// Design note. It is a GPU with no GPU: the compile side is a Target (src/target/target.h) that
// plans, lowers and schedules for an sm_80-like machine and emits CUDA through the one C-style
// emitter, exactly as the cuda target does; the run side is a Backend (runtime/backend.h) that
// compiles a program's kernels with the host C++ compiler into one shared library
// (tests/gpu/gpu_emulator.h: each block's threads as fibers), and runs them on host memory. So a
// program built and run through the registries by the name "emulated" checks, against the
// reference, that the interfaces carry everything a backend needs: facts, schedule, emit, keys,
// compile, load, run, memory. It is never picked by "auto" (its rank is negative).
//
// It runs the code form that needs no alignment (callers' buffers are the C API's, of any
// alignment), each launch cut to a few blocks that the grid-stride loops cover, one run at a time
// (the emulated shared memory is one static per kernel). Each load compiles its program's kernels
// again: it has no kernel cache, and so no persistent layers.
#include <dlpack/dlpack.h>
#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>

#include "codegen/gpu/cstyle_emitter.h"
#include "codegen/gpu/gpu_target.h"
#include "common/temp_dir.h"
#include "gpu/gpu_emulator.h"
#include "lower/launch.h"
#include "runtime/host_backend.h"
#include "runtime/index_checks.h"
#include "runtime/support/error.h"
#include "target/gpu/gpu_schedule.h"
#include "target/keys.h"
#include "target/target.h"

namespace stitch::emulated {

namespace {

constexpr const char* kName = "emulated";
constexpr const char* kArch = "sm_80";  // the dialect and schedule it emulates
constexpr int64_t kMaxGrid = 8;         // blocks a launch runs (the kernels grid-stride)

// Compiler identity for the keys: what the code is compiled by.
rt::GpuCompilerId compilerId() { return {"host c++", STITCH_TEST_CXX, {"-std=c++20", "-O1"}}; }

// ---- The compile side --------------------------------------------------------------------------

fusion::HardwareProfile emulatedFacts() {
  std::optional<fusion::HardwareProfile> p = fusion::findProfile(kArch);
  STITCH_INTERNAL(p.has_value(), "no built-in {} profile", kArch);
  p->description = "emulated sm_80 (host fibers)";
  return *p;
}

class EmulatedTarget final : public target::Target {
 public:
  explicit EmulatedTarget(const rt::Target& t)
      : Target(t, emulatedFacts()),
        emitter_(codegen::gpuTarget(kArch)),
        launch_(lower::launchTarget(facts())) {}

  std::string_view language() const override { return "cuda"; }
  lower::KernelProgram lowerShapes(const ir::Graph& g, const fusion::Kernel& k,
                                   const std::vector<std::vector<int64_t>>& shapes) const override {
    return lower::lowerKernelWithShapes(g, k, shapes, &launch_);
  }
  void schedule(lower::KernelProgram& p) const override {
    lower::scheduleLaunch(p, launch_, /*aligned=*/false);
  }
  std::vector<rt::KernelCode> emit(const lower::KernelProgram& p) const override {
    const codegen::GpuEmitOptions options{/*aligned=*/false};
    codegen::GpuKernelSource src = codegen::emitGpuKernel(
        target::scheduledFor(p, emitter_, options.aligned), emitter_, options);
    rt::KernelCode code;
    code.key = target::gpuKernelKey(src.source, emitter_, options, compilerId());
    code.language = "cuda";
    code.text = std::move(src.source);
    for (const codegen::GpuLaunch& l : src.phases) {
      rt::EntryPoint e;
      e.symbol = l.function;
      e.grid = l.grid;
      e.block = l.block;
      e.sharedBytes = l.sharedBytes;
      code.phases.push_back(std::move(e));
    }
    return {std::move(code)};
  }
  target::CompileReport compile(const rt::KernelArtifact& k) const override;

 private:
  codegen::GpuTarget emitter_;
  lower::LaunchTarget launch_;
};

// ---- The run side ------------------------------------------------------------------------------

class EmulatedExecutable final : public rt::Executable {
 public:
  explicit EmulatedExecutable(const rt::ProgramArtifact& program)
      : program_(program), emulator_(compile(program_, dir_)) {}

  void run(std::span<const rt::BoundValue> bound, void*) override {
    std::lock_guard<std::mutex> lock(mu_);
    // Intermediates and scratch: a buffer each for this run, as large as any kernel declares it.
    std::map<std::pair<bool, int>, std::vector<std::byte>> own;
    std::map<int, void*> caller;
    for (const rt::BoundValue& b : bound) caller[b.value] = b.data;
    auto pointer = [&](const rt::KernelBuffer& p) -> void* {
      if (p.value >= 0)
        if (auto it = caller.find(p.value); it != caller.end()) return it->second;
      std::vector<std::byte>& mem = own[{p.value < 0, p.value < 0 ? p.scratch : p.value}];
      const size_t bytes = static_cast<size_t>(p.elements * ir::dtypeBytes(p.dtype));
      if (mem.size() < bytes) mem.resize(bytes);
      return mem.data();
    };
    for (const rt::KernelArtifact& k : program_.kernels)
      for (const rt::KernelBuffer& p : k.params) pointer(p);  // sized before any is handed out
    for (size_t ki = 0; ki < program_.kernels.size(); ++ki) {
      const rt::KernelArtifact& k = program_.kernels[ki];
      std::vector<void*> pointers;
      for (const rt::KernelBuffer& p : k.params) pointers.push_back(pointer(p));
      std::array<int64_t, rt::kCheckStatusWords> status{};
      if (!k.checks.empty()) pointers.push_back(status.data());
      emulator_.launch(k, pointers, kMaxGrid);
      if (status[0] != 0) rt::throwCheckFailure(status, k.checks, program_.name, ki);
    }
  }

 private:
  static gputest::Emulator compile(const rt::ProgramArtifact& program,
                                   const stitch::testing::TempDir& dir) {
    const rt::ProgramArtifact* programs[] = {&program};
    try {
      return gputest::Emulator(programs, /*form=*/0, dir.path().string());
    } catch (const std::exception& e) {
      throwError(ErrorCode::Compile, fmt::format("emulated backend: {}", e.what()));
    }
  }

  rt::ProgramArtifact program_;
  stitch::testing::TempDir dir_{"stitch-emulated"};  // its sources and library, removed with it
  gputest::Emulator emulator_;
  std::mutex mu_;
};

class EmulatedBackend final : public rt::HostMemoryBackend {
 public:
  EmulatedBackend() {
    target_.backend = kName;
    target_.arch = kArch;
    target_.compiler = compilerId();
  }
  std::string_view name() const override { return kName; }
  const rt::Target& target() const override { return target_; }
  std::shared_ptr<const void> compile(const rt::KernelArtifact& kernel) override {
    rt::ProgramArtifact one;
    one.name = kernel.name;
    one.kernels = {kernel};
    return std::make_shared<EmulatedExecutable>(one);
  }
  std::shared_ptr<rt::Executable> load(const rt::ProgramArtifact& program) override {
    return std::make_shared<EmulatedExecutable>(program);
  }
  rt::CacheStats cacheStats() const override { return {}; }
  rt::PersistentLayers* persistentLayers() override { return nullptr; }

 private:
  rt::Target target_;
};

target::CompileReport EmulatedTarget::compile(const rt::KernelArtifact& k) const {
  auto t0 = std::chrono::steady_clock::now();
  rt::requireBackend(kName).compile(k);
  target::CompileReport r;
  r.compiler = "host c++";
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// Registered when the test executable starts: this file is linked into it, not into the library.
[[maybe_unused]] const bool registered = [] {
  rt::registerBackend(
      {kName, /*autoRank=*/-1, [](std::string*) { return std::make_unique<EmulatedBackend>(); }});
  target::TargetInfo info;
  info.backend = kName;
  info.archHelp = kName;
  info.named = [](std::string_view arch) -> std::optional<rt::Target> {
    if (arch != kName) return std::nullopt;
    return rt::requireBackend(kName).target();
  };
  info.offline = [](rt::Target&, std::string*) {};
  info.make = [](const rt::Target& t) { return std::make_unique<EmulatedTarget>(t); };
  target::registerTarget(std::move(info));
  return true;
}();

}  // namespace

}  // namespace stitch::emulated
