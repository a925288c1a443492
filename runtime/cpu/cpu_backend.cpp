// The cpu backend (design note in cpu_backend.h).
#include "runtime/cpu/cpu_backend.h"

#include <fmt/format.h>

#include "runtime/cpu/arena.h"
#include "runtime/cpu/cached_compiler.h"
#include "runtime/cpu/executor.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/host_backend.h"
#include "runtime/support/checked.h"
#include "runtime/support/memory.h"

namespace stitch::rt::cpu {

namespace {

class CpuExecutable final : public Executable {
 public:
  explicit CpuExecutable(const ProgramArtifact& program) : name_(program.name) {
    HostCompiler& compiler = HostCompiler::instance();
    for (const KernelArtifact& k : program.kernels) {
      compiled_.push_back(compiler.compile(k));
      for (const CompiledKernel& ck : *compiled_.back()) {
        kernels_.push_back(ck);
        kernels_.back().serial = runsInline(ck);  // small: no pool (executor.h)
      }
    }
    slots_ = assignSlots(kernels_, program.external);
    checkArenaFits(program);
  }

  void run(std::span<const BoundValue> bound, void*) override {
    ArenaPool::Lease arena = arenas_.acquire();
    thread_local ValueBuffers values;
    values.clear();
    for (const BoundValue& b : bound) values.bind(b.value, b.data);
    runKernels(kernels_, slots_, values, *arena, sharedPool(), name_);
  }

 private:
  // The intermediates must fit the machine (support/memory.h); refused before the first run,
  // with the largest of them named.
  void checkArenaFits(const ProgramArtifact& program) const {
    int64_t total = slots_.totalBytes();
    if (total <= hostMemoryBytes()) return;
    int largest = -1;
    int64_t largestBytes = 0;
    for (const CompiledKernel& k : kernels_)
      for (const KernelBuffer& b : k.outputs) {
        int64_t bytes = saturatingMul(b.elements, ir::dtypeBytes(b.dtype));
        bool inArena = b.value >= 0 && static_cast<size_t>(b.value) < slots_.valueSlot.size() &&
                       slots_.valueSlot[static_cast<size_t>(b.value)] >= 0;
        if (inArena && bytes > largestBytes) largest = b.value, largestBytes = bytes;
      }
    std::string what = fmt::format("graph {} on the cpu backend: its intermediates", program.name);
    if (largest >= 0 && static_cast<size_t>(largest) < program.valueLabels.size())
      what +=
          fmt::format(" (the largest, {}, takes {})",
                      program.valueLabels[static_cast<size_t>(largest)], bytesText(largestBytes));
    checkHostMemory(total, what);
  }

  std::string name_;                                           // the graph's, for messages
  std::vector<std::shared_ptr<const KernelPhases>> compiled_;  // keeps the code alive
  std::vector<CompiledKernel> kernels_;                        // every phase, in order
  SlotPlan slots_;
  ArenaPool arenas_;
};

class CpuBackend final : public HostMemoryBackend {
 public:
  std::string_view name() const override { return "cpu"; }
  // The JIT is made on first use (it is what the first compile needs anyway).
  const Target& target() const override { return HostCompiler::instance().target(); }
  std::shared_ptr<const void> compile(const KernelArtifact& kernel) override {
    return HostCompiler::instance().compile(kernel);
  }
  std::shared_ptr<Executable> load(const ProgramArtifact& program) override {
    return std::make_shared<CpuExecutable>(program);
  }
  CacheStats cacheStats() const override { return HostCompiler::instance().stats(); }
  PersistentLayers* persistentLayers() override { return &HostCompiler::instance().layers(); }
};

}  // namespace

std::unique_ptr<Backend> makeCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace stitch::rt::cpu

namespace stitch::rt::registration {

// Listed in runtime/CMakeLists.txt's built-in backends (with LLVM; without, cpu_unavailable.cpp).
void cpu() {
  registerBackend({"cpu", /*autoRank=*/20, [](std::string*) { return cpu::makeCpuBackend(); }});
}

}  // namespace stitch::rt::registration
