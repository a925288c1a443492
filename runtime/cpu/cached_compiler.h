// Host kernels through the kernel cache (runtime/kernel_cache.h).
//
// The key of a kernel is the hash of its kernel program's text (lowering is cheap and
// deterministic; the program names every load, store, shape and dtype), the target (triple, CPU
// name and features, optimization level) and the library version. A memory hit returns the
// loaded kernel; a disk hit loads object code with ORC (no LLVM optimization or code generation);
// a miss emits LLVM IR, compiles it to an object, stores the object, and loads it.
//
// One process holds at most one loaded copy of each kernel: the symbols in an object are fixed
// when it is compiled, so loading the same object twice into one JIT would define them twice. A
// registry of live kernels (weak references) is consulted before any load.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "runtime/cpu/cpu_kernel.h"
#include "runtime/kernel_cache.h"

namespace stitch::rt::cpu {

// The phases of one planned kernel, in order.
using KernelPhases = std::vector<CompiledKernel>;

class OrcJit;

// Process-wide host compilation state: the JIT and the kernel cache (memory layer of
// `memoryCapacity` kernels; disk layer from STITCH_CACHE / STITCH_CACHE_DIR). Created on first
// use; throws Compile if the JIT cannot be made, InvalidArgument for a bad STITCH_CACHE.
class HostCompiler {
 public:
  static HostCompiler& instance();

  // The compiled phases of kernel k of g under bindings b, through the cache.
  std::shared_ptr<const KernelPhases> compile(const ir::Graph& g, const fusion::Kernel& k,
                                              const ir::Bindings& b);
  CacheStats stats() const;
  // "host-x86_64-unknown-linux-gnu-znver3+avx2,...-O3": the target part of every key.
  const std::string& target() const { return target_; }

 private:
  HostCompiler();
  std::unique_ptr<OrcJit> jit_;
  std::unique_ptr<KernelCache<KernelPhases>> cache_;
  std::string target_;
};

}  // namespace stitch::rt::cpu
