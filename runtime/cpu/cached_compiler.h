// Host kernels through the kernel cache (runtime/kernel_cache.h).
//
// The key of a kernel (hostKernelKey, a pure function) is the canonical serialization of its
// kernel program (lower/serialize.h: every field, lowering is cheap and deterministic), the host
// target attribute by attribute (triple, CPU name, the full sorted feature string, LLVM version),
// the compile options (optimization level, whether libmvec may be called) and the library
// version. A memory hit returns the loaded kernel; a disk hit loads object code with ORC (no LLVM
// optimization or code generation); a miss emits LLVM IR, compiles it to an object, stores the
// object, and loads it. The loaded kernel binds the program's graph values (Param::value) to its
// buffers, so those are part of the key too: they are program fields like any other.
//
// One JIT holds at most one loaded copy of each kernel: the symbols in an object are fixed when
// it is compiled ("stitch_<key hash>_<phase>"), so loading the same object twice into one JIT
// would define them twice. A registry of live kernels (weak references, keyed by the full
// canonical key, never by its hash) is consulted before any load. Two different keys with one
// hash in one JIT would make the second load fail with a duplicate-symbol error: a Compile
// error, never another kernel's code.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "lower/kernel_program.h"
#include "runtime/cpu/cpu_kernel.h"
#include "runtime/kernel_cache.h"

namespace stitch::rt::cpu {

// The phases of one planned kernel, in order.
using KernelPhases = std::vector<CompiledKernel>;

class OrcJit;

// The machine host code is generated for: every attribute the object code depends on.
struct HostTarget {
  std::string triple;       // "x86_64-unknown-linux-gnu"
  std::string cpu;          // "znver3"
  std::string features;     // every feature LLVM reports for the host, "+avx2,-avx512f,...", sorted
  std::string llvmVersion;  // another LLVM may generate other code for the same IR
};

// How host code is compiled.
struct HostCompileOptions {
  int optLevel = 3;
  bool vectorMath = false;  // the vectorizer may call glibc's libmvec
};

// The cache key of program p compiled for target with options. Pure: no JIT, no environment, so
// it is testable anywhere; HostCompiler uses exactly this.
CacheKey hostKernelKey(const lower::KernelProgram& p, const HostTarget& target,
                       const HostCompileOptions& options);

// The target and options of a JIT.
HostTarget hostTargetOf(const OrcJit& jit);
HostCompileOptions hostOptionsOf(const OrcJit& jit);

// Host compilation state: a JIT and its kernel cache. Throws Compile if the JIT cannot be made.
class HostCompiler {
 public:
  // The process-wide compiler: a memory layer of 4096 kernels, the disk layer from STITCH_CACHE /
  // STITCH_CACHE_DIR. Created on first use; throws InvalidArgument for a bad STITCH_CACHE.
  static HostCompiler& instance();

  // A compiler with a JIT and caches of its own (tests: a fresh memory layer over a given disk
  // layer is what a new process sees). disk may be null (memory only).
  HostCompiler(size_t memoryCapacity, std::unique_ptr<DiskCache> disk);
  ~HostCompiler();
  HostCompiler(const HostCompiler&) = delete;
  HostCompiler& operator=(const HostCompiler&) = delete;

  // The compiled phases of kernel k of g under bindings b, through the cache.
  std::shared_ptr<const KernelPhases> compile(const ir::Graph& g, const fusion::Kernel& k,
                                              const ir::Bindings& b);
  CacheStats stats() const;
  const HostTarget& target() const { return target_; }
  const HostCompileOptions& options() const { return options_; }

 private:
  std::unique_ptr<OrcJit> jit_;
  std::unique_ptr<KernelCache<KernelPhases>> cache_;
  HostTarget target_;
  HostCompileOptions options_;
  // Live kernels of this JIT by canonical key (see the note above); expired entries are swept
  // when the map has doubled since the last sweep.
  std::mutex liveMu_;
  std::map<std::string, std::weak_ptr<KernelPhases>> live_;
  size_t liveSweepAt_ = 64;
};

}  // namespace stitch::rt::cpu
