#include "runtime/cpu/cached_compiler.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/TargetParser/Host.h>

#include <map>
#include <mutex>

#include "codegen/llvm/llvm_emitter.h"
#include "lower/kernel_program.h"
#include "runtime/cpu/cpu_compiler.h"
#include "runtime/cpu/orc_jit.h"
#include "support/error.h"
#include "support/logging.h"

namespace stitch::rt::cpu {

namespace {

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string errorText(llvm::Error e) { return llvm::toString(std::move(e)); }

// Evicts a loaded object's code when the last kernel using it is dropped.
struct LoadedCode {
  OrcJit* jit;
  llvm::orc::ResourceTrackerSP tracker;
  ~LoadedCode() { llvm::consumeError(jit->remove(tracker)); }
};

std::string hostTarget(const OrcJit& jit) {
  std::string features;
  for (const auto& f : llvm::sys::getHostCPUFeatures())
    if (f.second) features += (features.empty() ? "" : ",") + f.first().str();
  return fmt::format("host-{}-{}-{}-O{}", jit.triple().str(), llvm::sys::getHostCPUName().str(),
                     fnv1a(features), jit.optLevel());
}

}  // namespace

HostCompiler& HostCompiler::instance() {
  static HostCompiler compiler;
  return compiler;
}

HostCompiler::HostCompiler() {
  initializeNativeTarget();
  auto jit = OrcJit::Create(3);
  if (!jit) throwError(ErrorCode::Compile, "LLVM ORC: " + errorText(jit.takeError()));
  jit_ = std::move(*jit);
  target_ = hostTarget(*jit_);
  cache_ = KernelCache<KernelPhases>::fromEnv(/*memoryCapacity=*/4096);
}

CacheStats HostCompiler::stats() const { return cache_->stats(); }

std::shared_ptr<const KernelPhases> HostCompiler::compile(const ir::Graph& g,
                                                          const fusion::Kernel& k,
                                                          const ir::Bindings& b) {
  lower::KernelProgram program = lower::lowerKernel(g, k, b);
  // Names do not change what a program computes: they stay out of its fingerprint.
  lower::KernelProgram unnamed = program;
  unnamed.name.clear();
  for (lower::Phase& ph : unnamed.phases) ph.name.clear();
  std::string text = lower::printProgram(unnamed);
  uint64_t fingerprint = fnv1a(text);
  std::string prefix = fmt::format("stitch_{:016x}", fingerprint);

  CacheKey key;
  key.graphFingerprint = fingerprint;
  for (const lower::Param& q : program.params)
    key.inputs.push_back({q.dtype, {q.elements}, {}, 64});
  key.target = target_;

  // One loaded copy per kernel per process (see the header).
  static std::mutex liveMu;
  static std::map<uint64_t, std::weak_ptr<KernelPhases>> live;

  auto compileObject = [&]() -> std::vector<uint8_t> {
    auto ctx = std::make_unique<llvm::LLVMContext>();
    auto m = std::make_unique<llvm::Module>(prefix, *ctx);
    m->setDataLayout(jit_->dataLayout());
    m->setTargetTriple(jit_->triple().str());
    std::vector<std::string> names = codegen::emitProgram(program, prefix, *m);
    auto obj = jit_->compileToObject(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx)),
                                     names.at(0));
    if (!obj) throwError(ErrorCode::Compile, "LLVM ORC: " + errorText(obj.takeError()));
    log().debug("compiled host kernel {} ({} phases, {} bytes of object code)", prefix,
                program.phases.size(), obj->size());
    return std::vector<uint8_t>(obj->begin(), obj->end());
  };
  auto load = [&](const std::vector<uint8_t>& bytes) -> std::shared_ptr<KernelPhases> {
    std::lock_guard<std::mutex> lock(liveMu);
    if (auto existing = live[fingerprint].lock()) return existing;
    auto tracker = jit_->loadObject(std::vector<char>(bytes.begin(), bytes.end()), prefix);
    if (!tracker) throwError(ErrorCode::Compile, "LLVM ORC: " + errorText(tracker.takeError()));
    std::shared_ptr<const void> owner(new LoadedCode{jit_.get(), *tracker});
    auto phases = std::make_shared<KernelPhases>();
    // emitProgram names phase i PREFIX_i (llvm_emitter.h).
    for (size_t ph = 0; ph < program.phases.size(); ++ph)
      phases->push_back(compiledPhase(program, ph, *jit_, fmt::format("{}_{}", prefix, ph), owner));
    live[fingerprint] = phases;
    return phases;
  };
  return cache_->getOrCompile(key, compileObject, load);
}

}  // namespace stitch::rt::cpu
