// Host kernels through the kernel cache (runtime/kernel_cache.h).
//
// The key of a kernel comes with its artifact (the driver builds it: target/keys.h, from the
// kernel's LLVM IR with neutral names, this compiler's HostTarget and HostCompileOptions, and the
// library version). A memory hit returns the loaded kernel; a disk hit loads object code with ORC
// (no LLVM optimization or code generation); a miss parses the artifact's LLVM IR, compiles it to
// an object, stores the object, and loads it. The artifacts of one shape class (lower/
// size_args.h) have one key: the compiled code is shared, and compile() pairs it with each
// artifact's own units, buffers and size arguments.
//
// One JIT holds at most one loaded copy of each kernel: the symbols in an object are fixed when
// it is emitted ("stitch_<key hash>_<phase>"), so loading the same object twice into one JIT
// would define them twice. A registry of live kernels (weak references, keyed by the full
// canonical key, never by its hash) is consulted before any load. Two different keys with one
// hash in one JIT would make the second load fail with a duplicate-symbol error: a Compile
// error, never another kernel's code.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/artifact.h"
#include "runtime/cpu/cpu_kernel.h"
#include "runtime/cpu/host_profile.h"
#include "runtime/kernel_cache.h"
#include "runtime/target.h"

namespace stitch::rt::cpu {

// The phases of one planned kernel, in order.
using KernelPhases = std::vector<CompiledKernel>;

class OrcJit;

// The target and options of a JIT.
HostTarget hostTargetOf(const OrcJit& jit);
HostCompileOptions hostOptionsOf(const OrcJit& jit);

// Host compilation state: a JIT and its kernel cache. Throws Compile if the JIT cannot be made.
class HostCompiler {
 public:
  // The process-wide compiler: a memory layer of 4096 kernels, the disk layer from STITCH_CACHE /
  // STITCH_CACHE_DIR, the remote layer from STITCH_REMOTE_CACHE. Created on first use; throws
  // InvalidArgument for a bad STITCH_CACHE.
  static HostCompiler& instance();

  // A compiler with a JIT and caches of its own (tests: a fresh memory layer over a given disk
  // layer is what a new process sees). disk may be null (memory only), remote null (none).
  HostCompiler(size_t memoryCapacity, std::unique_ptr<DiskCache> disk,
               std::shared_ptr<RemoteCache> remote = nullptr);
  ~HostCompiler();
  HostCompiler(const HostCompiler&) = delete;
  HostCompiler& operator=(const HostCompiler&) = delete;

  // The compiled phases of kernel `a` (its first form), through the cache.
  std::shared_ptr<const KernelPhases> compile(const KernelArtifact& a);
  CacheStats stats() const;
  // The kernel cache's disk and remote layers.
  PersistentLayers& layers() { return cache_->layers(); }
  // What the driver generates code for: this JIT's machine and options.
  const Target& target() const { return target_; }

 private:
  std::unique_ptr<OrcJit> jit_;
  std::unique_ptr<KernelCache<KernelPhases>> cache_;
  Target target_;
  // Live kernels of this JIT by canonical key (see the note above); expired entries are swept
  // when the map has doubled since the last sweep.
  std::mutex liveMu_;
  std::map<std::string, std::weak_ptr<KernelPhases>> live_;
  size_t liveSweepAt_ = 64;
  ShapeClassCounter classes_;
};

}  // namespace stitch::rt::cpu
