// Cache keys of kernel code: pure functions of what the compiled bytes depend on.
//
// A key (runtime/kernel_cache.h, CacheKey) is the kernel's code (the LLVM IR, CUDA or HIP source
// the compiler reads: what the compiled bytes are made from, so a key is complete by
// construction), the target attribute by attribute, the compile or emit options, and (added by
// CacheKey itself) the library version and build identity. Keying the code, not the program,
// makes every signature of a shape class one key (lower/size_args.h: sizes read as arguments
// print the same code), and any two programs that print the same code one compile. Each builder
// unpacks its structs with structured bindings naming every member, so a field added to a target
// or an option does not compile until it is part of the key. tests/lower/test_program_key.cpp
// mutates every field one at a time and checks that the key changes.
#pragma once

#include "codegen/gpu/cstyle_emitter.h"
#include "lower/kernel_program.h"
#include "runtime/kernel_cache.h"
#include "runtime/target.h"

namespace stitch::target {

// Host: the code, the JIT's machine (triple, CPU name, every feature, LLVM version) and its
// options (optimization level, the math library and its version, the streaming-store size). The
// code is the program's LLVM IR with neutral function names (codegen::namedProgramIR's keyText):
// what the JIT compiles, so a key is complete by construction, and the one key of every program
// of a shape class (lower/size_args.h: sizes read as arguments print the same IR).
rt::CacheKey hostKernelKey(const std::string& keyText, const rt::HostTarget& target,
                           const rt::HostCompileOptions& options);
// The same from a program, as scheduled (Phase::host): its IR (a build with LLVM only).
rt::CacheKey hostKernelKey(const lower::KernelProgram& p, const rt::HostTarget& target,
                           const rt::HostCompileOptions& options);

// GPU: the source (codegen::emitGpuKernel's text), every field of the GpuTarget the scheduler and
// emitter read (arch, dialect, warp size, multiprocessor count, block limit,
// compute capability; most reach the source too, and are kept so that a key never depends on
// that), the emit options (the alignment assumption), the compiler's name, version and options
// for the arch, and a digest of the device headers the source includes (build constants, like
// the version).
rt::CacheKey gpuKernelKey(const std::string& source, const codegen::GpuTarget& target,
                          const codegen::GpuEmitOptions& options,
                          const rt::GpuCompilerId& compiler);
// The same from a program: its source emitted for target and options, as scheduled for them
// (target/gpu/gpu_schedule.h).
rt::CacheKey gpuKernelKey(const lower::KernelProgram& p, const codegen::GpuTarget& target,
                          const codegen::GpuEmitOptions& options,
                          const rt::GpuCompilerId& compiler);

}  // namespace stitch::target
