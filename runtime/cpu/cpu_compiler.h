// The host compiler: a planned kernel -> kernel program -> LLVM IR -> machine code.
//
// compileKernel lowers kernel k (src/lower), emits one LLVM function per phase of its program
// (src/codegen/llvm) into one module, and JIT-compiles it with `jit`. A kernel whose plan needs
// a grid-wide barrier (a global-scheme edge: a second-level reduction) comes back as several
// phases, each a CompiledKernel run after the previous one, exchanging values through arena
// scratch slots (KernelBuffer::scratch); independent horizontally packed parts also come back as
// separate phases. The kernels keep their code alive through `owner` (which evicts it from the
// JIT when the last one is dropped), so the jit must outlive them.
//
// Safe to call from several threads at once on one jit.
#pragma once

#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "lower/kernel_program.h"
#include "runtime/cpu/cpu_kernel.h"
#include "runtime/cpu/orc_jit.h"

namespace stitch::rt::cpu {

struct CompileStats {
  double lowerMs = 0;  // kernel program
  double emitMs = 0;   // LLVM IR
  double jitMs = 0;    // optimization and code generation
  int kernels = 0;
  int phases = 0;
};

// Phase `phase` of program p, JIT-compiled as `symbol`, as a CompiledKernel keeping `owner`.
CompiledKernel compiledPhase(const lower::KernelProgram& p, size_t phase, OrcJit& jit,
                             const std::string& symbol, std::shared_ptr<const void> owner);

std::vector<CompiledKernel> compileKernel(const ir::Graph& g, const fusion::Kernel& k,
                                          const ir::Bindings& b, OrcJit& jit,
                                          CompileStats* stats = nullptr);

// Several kernels of one graph in one module (one optimizer and code generator run: much less
// per-kernel overhead for many small kernels); result i is kernel i's phases.
std::vector<std::vector<CompiledKernel>> compileKernels(const ir::Graph& g,
                                                        const std::vector<fusion::Kernel>& ks,
                                                        const ir::Bindings& b, OrcJit& jit,
                                                        CompileStats* stats = nullptr);

}  // namespace stitch::rt::cpu
