// The host JIT: an LLVM ORC LLJIT in the style of the Kaleidoscope JIT.
//
// Fallible setup is in Create(); the constructor cannot fail. Code is generated for the host
// (JITTargetMachineBuilder::detectHost, with its CPU name and features, and STITCH_CPU_FEATURES'
// changes to those features: cpuFeaturesFromEnv below) after the new pass
// manager's O3 pipeline (or the level given), run in an IR transform layer with the host's
// TargetMachine so the vectorizer knows the vector width, and SLEEF's vector functions known to
// it (vector_math.h). Every module added gets a resource tracker of its own, so its code can be
// evicted. libm's and SLEEF's functions are bound by address; other symbols not defined by a module
// (memcpy, ...) resolve from the running process.
//
// The kernel cache hook: compileToObject() runs the same pipeline on a module and returns the
// relocatable object bytes (captured through an llvm::ObjectCache, notifyObjectCompiled) without
// keeping the code; loadObject() later adds such bytes directly (addObjectFile), skipping the
// optimizer and the code generator.
//
// Thread safety: LLJIT itself is thread-safe; this wrapper's state (the captured objects) is
// guarded by a mutex, and the optimizer's TargetMachine is used under a lock too.
#pragma once

#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/Support/Error.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace stitch::rt::cpu {

class ObjectCapture;

// STITCH_CPU_FEATURES: LLVM target features turned on (+name) or off (-name) over the host's, for
// every JIT made in the process: "-avx512f" makes code for an AVX2 host on an AVX-512 one (to
// measure what such hosts run, or to share a disk cache with them: the features are part of
// every host cache key, hostTargetOf). A comma list; each name must be a feature LLVM knows for
// the host's target, else an InvalidArgument error naming it. Turning off a feature turns off
// those that imply it (LLVM's rule); turning on one the host lacks makes code that may not run.
inline constexpr const char* kCpuFeaturesEnv = "STITCH_CPU_FEATURES";
std::vector<std::string> cpuFeaturesFromEnv();

class OrcJit {
 public:
  // optLevel: 0..3, the new pass manager's O0..O3 pipeline and the code generator's level.
  static llvm::Expected<std::unique_ptr<OrcJit>> Create(int optLevel = 3);
  ~OrcJit();
  OrcJit(const OrcJit&) = delete;
  OrcJit& operator=(const OrcJit&) = delete;

  const llvm::DataLayout& dataLayout() const { return jit_->getDataLayout(); }
  const llvm::Triple& triple() const { return jit_->getTargetTriple(); }
  int optLevel() const { return optLevel_; }
  // The math library the code calls ("sleef 3.5.1"): another version may have other functions.
  const std::string& mathLibrary() const { return mathLibrary_; }

  // Adds a module under a fresh resource tracker (compiled on first lookup).
  llvm::Expected<llvm::orc::ResourceTrackerSP> addModule(llvm::orc::ThreadSafeModule m);
  // The address of a JIT-ed symbol (compiling its module if needed).
  llvm::Expected<void*> lookup(std::string_view name);
  // Evicts everything a tracker owns.
  llvm::Error remove(const llvm::orc::ResourceTrackerSP& rt);

  // Optimizes and compiles `m` to a relocatable object and returns its bytes; the code is not
  // kept. `symbol` is any symbol `m` defines (looked up to force compilation).
  llvm::Expected<std::vector<char>> compileToObject(llvm::orc::ThreadSafeModule m,
                                                    std::string_view symbol);
  // Adds object bytes from compileToObject under a fresh resource tracker.
  llvm::Expected<llvm::orc::ResourceTrackerSP> loadObject(const std::vector<char>& object,
                                                          std::string_view name);

 private:
  OrcJit(std::unique_ptr<llvm::orc::LLJIT> jit, std::unique_ptr<ObjectCapture> capture,
         int optLevel, std::string mathLibrary);

  std::unique_ptr<ObjectCapture> capture_;  // outlives the JIT, which points at it
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  int optLevel_;
  std::string mathLibrary_;
};

// Initializes LLVM's native target, asm printer and parser once per process (thread-safe).
void initializeNativeTarget();

}  // namespace stitch::rt::cpu
