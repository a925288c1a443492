#include "runtime/cpu/cpu_compiler.h"

#include <fmt/format.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Linker/Linker.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>

#include <atomic>
#include <chrono>
#include <map>

#include "runtime/support/error.h"

namespace stitch::rt::cpu {

namespace {

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string errorText(llvm::Error e) { return llvm::toString(std::move(e)); }

// Evicts the module's code when the last kernel using it is dropped.
struct CodeOwner {
  OrcJit* jit;
  llvm::orc::ResourceTrackerSP tracker;
  ~CodeOwner() { llvm::consumeError(jit->remove(tracker)); }
};

std::unique_ptr<llvm::Module> parse(const KernelCode& code, const std::string& name,
                                    llvm::LLVMContext& ctx, const OrcJit& jit) {
  STITCH_INTERNAL(code.language == "llvm-ir", "the cpu backend was handed {} code, not LLVM IR",
                  code.language);
  llvm::SMDiagnostic diag;
  std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(code.text, diag, ctx);
  if (!m) {
    std::string text;
    llvm::raw_string_ostream os(text);
    diag.print(name.c_str(), os);
    throwError(ErrorCode::Internal, "the driver's LLVM IR does not parse: " + os.str());
  }
  m->setModuleIdentifier(name);
  m->setDataLayout(jit.dataLayout());
  m->setTargetTriple(jit.triple().str());
  return m;
}

}  // namespace

llvm::orc::ThreadSafeModule parseModule(const KernelCode& code, const std::string& name,
                                        const OrcJit& jit) {
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m = parse(code, name, *ctx, jit);
  return llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx));
}

CompiledKernel compiledPhase(const KernelArtifact& a, size_t phase, OrcJit& jit,
                             const std::string& symbol, std::shared_ptr<const void> owner) {
  auto fn = jit.lookup(symbol);
  if (!fn) throwError(ErrorCode::Compile, "LLVM ORC: " + errorText(fn.takeError()));
  return withCode(a, phase, reinterpret_cast<KernelFn>(*fn), std::move(owner));
}

CompiledKernel withCode(const KernelArtifact& a, size_t phase, KernelFn fn,
                        std::shared_ptr<const void> owner) {
  const PhaseBuffers& ph = a.phases.at(phase);
  const EntryPoint& e = a.forms.at(0).phases.at(phase);
  CompiledKernel ck;
  ck.fn = fn;
  ck.units = e.units;
  ck.grain = e.grain;
  for (size_t j = 0; j < ph.params.size(); ++j)
    (static_cast<int>(j) < ph.numInputs ? ck.inputs : ck.outputs)
        .push_back(a.params.at(static_cast<size_t>(ph.params[j])));
  ck.sizes = a.sizes;
  ck.checks = a.checks;
  ck.owner = std::move(owner);
  return ck;
}

std::vector<std::vector<CompiledKernel>> compileArtifacts(std::span<const KernelArtifact> kernels,
                                                          OrcJit& jit, CompileStats* stats) {
  static std::atomic<uint64_t> counter{0};
  const uint64_t id = counter.fetch_add(1);
  auto t0 = std::chrono::steady_clock::now();
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m = std::make_unique<llvm::Module>(fmt::format("stitch_module_{}", id), *ctx);
  m->setDataLayout(jit.dataLayout());
  m->setTargetTriple(jit.triple().str());
  // Entry symbols are named after the kernel's key: renamed with this module's id, so that
  // modules compiled here (outside the cache's one-copy-per-JIT registry) never define one name
  // twice in a JIT. Kernels with one key are one code: linked once.
  auto local = [&](const std::string& symbol) { return fmt::format("{}_m{}", symbol, id); };
  {
    // Scoped: the linker tracks the module's metadata, and must be gone before the module is
    // handed to the JIT, which compiles and frees it (its destructor once walked freed metadata
    // and spun, 1 run in 20).
    llvm::Linker linker(*m);
    std::map<std::string, bool> linked;
    for (const KernelArtifact& k : kernels) {
      const KernelCode& code = k.forms.at(0);
      if (!linked.emplace(code.key.canonical(), true).second) continue;
      std::unique_ptr<llvm::Module> km = parse(code, k.name, *ctx, jit);
      for (const EntryPoint& e : code.phases) {
        llvm::Function* f = km->getFunction(e.symbol);
        STITCH_INTERNAL(f != nullptr, "kernel {} has no function {}", k.name, e.symbol);
        f->setName(local(e.symbol));
      }
      if (linker.linkInModule(std::move(km)))
        throwError(ErrorCode::Internal, "cannot link the LLVM IR of kernel " + k.name);
    }
  }
  double parseMs = msSince(t0);

  t0 = std::chrono::steady_clock::now();
  auto tracker = jit.addModule(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx)));
  if (!tracker) throwError(ErrorCode::Compile, "LLVM ORC: " + errorText(tracker.takeError()));
  std::shared_ptr<const void> owner(new CodeOwner{&jit, *tracker});
  std::vector<std::vector<CompiledKernel>> out(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    const KernelArtifact& k = kernels[i];
    for (size_t ph = 0; ph < k.phases.size(); ++ph)
      out[i].push_back(compiledPhase(k, ph, jit, local(k.forms.at(0).phases.at(ph).symbol), owner));
  }
  if (stats) {
    stats->parseMs += parseMs;
    stats->jitMs += msSince(t0);
    stats->kernels += static_cast<int>(kernels.size());
    for (const KernelArtifact& k : kernels) stats->phases += static_cast<int>(k.phases.size());
  }
  return out;
}

}  // namespace stitch::rt::cpu
