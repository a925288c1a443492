// The host compiler: LLVM IR text from the compile driver -> machine code in the JIT.
//
// The driver (src/driver) emits each kernel as LLVM IR text, one function per phase named by its
// artifact's entry points. parseModule() reads it back for the JIT's target; compiledPhase()
// wraps a JIT-ed entry as a CompiledKernel over the phase's buffers. A kernel whose plan needs a
// grid-wide barrier (a global-scheme edge: a second-level reduction) comes as several phases,
// each a CompiledKernel run after the previous one, exchanging values through arena scratch
// slots (KernelBuffer::scratch); independent horizontally packed parts also come as separate
// phases. The kernels keep their code alive through `owner` (which evicts it from the JIT when
// the last one is dropped), so the jit must outlive them.
//
// compileArtifacts() compiles several kernels as one module (one optimizer and code generator
// run: much less per-kernel overhead for many small kernels), bypassing the kernel cache: the
// sweeps of tests and benchmarks use it.
//
// Safe to call from several threads at once on one jit.
#pragma once

#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/artifact.h"
#include "runtime/cpu/cpu_kernel.h"
#include "runtime/cpu/orc_jit.h"

namespace stitch::rt::cpu {

struct CompileStats {
  double parseMs = 0;  // LLVM IR text -> module
  double jitMs = 0;    // optimization and code generation
  int kernels = 0;
  int phases = 0;
};

// The LLVM IR of form `code` as a module named `name` for jit's target (Compile error with
// LLVM's diagnostic when the text does not parse).
llvm::orc::ThreadSafeModule parseModule(const KernelCode& code, const std::string& name,
                                        const OrcJit& jit);

// Phase `phase` of kernel `a`, JIT-compiled as `symbol`, as a CompiledKernel keeping `owner`.
CompiledKernel compiledPhase(const KernelArtifact& a, size_t phase, OrcJit& jit,
                             const std::string& symbol, std::shared_ptr<const void> owner);
// Phase `phase` of kernel `a` run by `fn` (code compiled for `a` or for another artifact with
// its key): the units, grain, buffers and size arguments are a's.
CompiledKernel withCode(const KernelArtifact& a, size_t phase, KernelFn fn,
                        std::shared_ptr<const void> owner);

// Kernels compiled as one module; result i is kernel i's phases (their first form's code).
std::vector<std::vector<CompiledKernel>> compileArtifacts(std::span<const KernelArtifact> kernels,
                                                          OrcJit& jit,
                                                          CompileStats* stats = nullptr);

}  // namespace stitch::rt::cpu
