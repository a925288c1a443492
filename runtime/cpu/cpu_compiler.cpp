#include "runtime/cpu/cpu_compiler.h"

#include <fmt/format.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <atomic>
#include <chrono>

#include "codegen/llvm/llvm_emitter.h"
#include "lower/kernel_program.h"
#include "support/error.h"

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

}  // namespace

CompiledKernel compiledPhase(const lower::KernelProgram& p, size_t phase, OrcJit& jit,
                             const std::string& symbol, std::shared_ptr<const void> owner) {
  auto fn = jit.lookup(symbol);
  if (!fn) throwError(ErrorCode::Compile, "LLVM ORC: " + errorText(fn.takeError()));
  const lower::Phase& ph = p.phases[phase];
  CompiledKernel ck;
  ck.fn = reinterpret_cast<KernelFn>(*fn);
  ck.units = ph.units;
  ck.grain = ph.grain;
  for (size_t j = 0; j < ph.buffers.size(); ++j) {
    const lower::Param& q = p.params[static_cast<size_t>(ph.buffers[j])];
    KernelBuffer kb{q.value, q.scratch, q.dtype, q.elements};
    (static_cast<int>(j) < ph.numInputs ? ck.inputs : ck.outputs).push_back(kb);
  }
  ck.owner = std::move(owner);
  return ck;
}

std::vector<std::vector<CompiledKernel>> compileKernels(const ir::Graph& g,
                                                        const std::vector<fusion::Kernel>& ks,
                                                        const ir::Bindings& b, OrcJit& jit,
                                                        CompileStats* stats) {
  static std::atomic<uint64_t> counter{0};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<lower::KernelProgram> programs;
  for (const fusion::Kernel& k : ks) programs.push_back(lower::lowerKernel(g, k, b));
  double lowerMs = msSince(t0);

  t0 = std::chrono::steady_clock::now();
  auto ctx = std::make_unique<llvm::LLVMContext>();
  uint64_t id = counter.fetch_add(1);
  auto m = std::make_unique<llvm::Module>(fmt::format("stitch_module_{}", id), *ctx);
  m->setDataLayout(jit.dataLayout());
  m->setTargetTriple(jit.triple().str());
  std::vector<std::vector<std::string>> names;
  for (size_t i = 0; i < programs.size(); ++i)
    names.push_back(codegen::emitProgram(programs[i], fmt::format("stitch_{}_k{}", id, i), *m));
  double emitMs = msSince(t0);

  t0 = std::chrono::steady_clock::now();
  auto tracker = jit.addModule(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx)));
  if (!tracker) throwError(ErrorCode::Compile, "LLVM ORC: " + errorText(tracker.takeError()));
  std::shared_ptr<const void> owner(new CodeOwner{&jit, *tracker});
  std::vector<std::vector<CompiledKernel>> out(programs.size());
  for (size_t i = 0; i < programs.size(); ++i) {
    const lower::KernelProgram& p = programs[i];
    for (size_t ph = 0; ph < p.phases.size(); ++ph) {
      out[i].push_back(compiledPhase(p, ph, jit, names[i][ph], owner));
    }
  }
  if (stats) {
    stats->lowerMs += lowerMs;
    stats->emitMs += emitMs;
    stats->jitMs += msSince(t0);
    stats->kernels += static_cast<int>(programs.size());
    for (const auto& p : programs) stats->phases += static_cast<int>(p.phases.size());
  }
  return out;
}

std::vector<CompiledKernel> compileKernel(const ir::Graph& g, const fusion::Kernel& k,
                                          const ir::Bindings& b, OrcJit& jit, CompileStats* stats) {
  return std::move(compileKernels(g, {k}, b, jit, stats)[0]);
}

}  // namespace stitch::rt::cpu
