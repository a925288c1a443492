#include "runtime/cpu/cached_compiler.h"

#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>

#include "runtime/cost_calibration.h"
#include "runtime/cpu/cpu_compiler.h"
#include "runtime/cpu/host_profile.h"
#include "runtime/cpu/orc_jit.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/support/error.h"
#include "runtime/support/logging.h"

namespace stitch::rt::cpu {

namespace {

std::string errorText(llvm::Error e) { return llvm::toString(std::move(e)); }

// Evicts a loaded object's code when the last kernel using it is dropped.
struct LoadedCode {
  OrcJit* jit;
  llvm::orc::ResourceTrackerSP tracker;
  ~LoadedCode() { llvm::consumeError(jit->remove(tracker)); }
};

}  // namespace

HostTarget hostTargetOf(const OrcJit& jit) {
  // The JIT's target machine is made by JITTargetMachineBuilder::detectHost from these same
  // queries (every feature, "+" or "-"), then STITCH_CPU_FEATURES' changes (orc_jit.h), applied
  // here the same way. StringMap iterates in hash order: sorted here.
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  for (const std::string& f : cpuFeaturesFromEnv()) host[f.substr(1)] = f[0] == '+';
  std::vector<std::string> features;
  for (const auto& f : host) features.push_back((f.second ? "+" : "-") + f.first().str());
  std::sort(features.begin(), features.end());
  HostTarget t;
  t.triple = jit.triple().str();
  t.cpu = llvm::sys::getHostCPUName().str();
  for (const std::string& f : features) t.features += (t.features.empty() ? "" : ",") + f;
  t.llvmVersion = LLVM_VERSION_STRING;
  return t;
}

HostCompileOptions hostOptionsOf(const OrcJit& jit) {
  return HostCompileOptions{jit.optLevel(), jit.mathLibrary()};
}

HostCompiler& HostCompiler::instance() {
  static HostCompiler compiler(/*memoryCapacity=*/4096, DiskCache::fromEnv(), remoteFromEnv());
  return compiler;
}

HostCompiler::HostCompiler(size_t memoryCapacity, std::unique_ptr<DiskCache> disk,
                           std::shared_ptr<RemoteCache> remote) {
  initializeNativeTarget();
  auto jit = OrcJit::Create(3);
  if (!jit) throwError(ErrorCode::Compile, "LLVM ORC: " + errorText(jit.takeError()));
  jit_ = std::move(*jit);
  target_.backend = "cpu";
  target_.arch = "host";
  target_.host = hostTargetOf(*jit_);
  target_.hostOptions = hostOptionsOf(*jit_);
  // The planner prices this very machine (target::Target::facts): the threads kernels run on, and
  // the bandwidth they reach, measured once per machine (host_profile.h).
  target_.hostProfile = probeHostProfile(sharedPool().threads(), target_.host);
  target_.hostOptions.streamingStoreBytes = hostStreamingStoreBytes(target_.hostProfile);
  // And with the cost model fitted to this machine's measured plans, if any (cost_calibration.h).
  target_.calibration = probeCostCalibration(target_);
  cache_ = std::make_unique<KernelCache<KernelPhases>>(memoryCapacity, std::move(disk),
                                                       std::move(remote));
}

// Out of line: OrcJit is complete here. The cache (declared after the JIT) goes first.
HostCompiler::~HostCompiler() = default;

CacheStats HostCompiler::stats() const {
  CacheStats s = cache_->stats();
  classes_.addTo(s);
  return s;
}

std::shared_ptr<const KernelPhases> HostCompiler::compile(const KernelArtifact& a) {
  const KernelCode& code = a.forms.at(0);
  const CacheKey& key = code.key;
  const std::string name = fmt::format("stitch_{:016x}", key.hash());

  auto compileObject = [&]() -> std::vector<uint8_t> {
    auto obj = jit_->compileToObject(parseModule(code, name, *jit_), code.phases.at(0).symbol);
    if (!obj) throwError(ErrorCode::Compile, "LLVM ORC: " + errorText(obj.takeError()));
    log().debug("compiled host kernel {} ({} phases, {} bytes of object code)", name,
                code.phases.size(), obj->size());
    return std::vector<uint8_t>(obj->begin(), obj->end());
  };
  auto load = [&](const std::vector<uint8_t>& bytes) -> std::shared_ptr<KernelPhases> {
    const std::string canon = key.canonical();
    std::lock_guard<std::mutex> lock(liveMu_);
    if (auto existing = live_[canon].lock()) return existing;
    auto tracker = jit_->loadObject(std::vector<char>(bytes.begin(), bytes.end()), name);
    if (!tracker) throwError(ErrorCode::Compile, "LLVM ORC: " + errorText(tracker.takeError()));
    std::shared_ptr<const void> owner(new LoadedCode{jit_.get(), *tracker});
    auto phases = std::make_shared<KernelPhases>();
    for (size_t ph = 0; ph < code.phases.size(); ++ph)
      phases->push_back(compiledPhase(a, ph, *jit_, code.phases[ph].symbol, owner));
    live_[canon] = phases;
    if (live_.size() >= liveSweepAt_) {
      std::erase_if(live_, [](const auto& e) { return e.second.expired(); });
      liveSweepAt_ = std::max<size_t>(64, 2 * live_.size());
    }
    return phases;
  };
  std::shared_ptr<const KernelPhases> loaded = cache_->getOrCompile(key, compileObject, load);
  classes_.note(key, a.sizes);
  // The code may have been loaded for another artifact of its shape class: the units, buffers
  // and size arguments are this artifact's (only the functions and their owner are shared).
  auto phases = std::make_shared<KernelPhases>();
  for (size_t ph = 0; ph < loaded->size(); ++ph)
    phases->push_back(withCode(a, ph, (*loaded)[ph].fn, (*loaded)[ph].owner));
  return phases;
}

}  // namespace stitch::rt::cpu
