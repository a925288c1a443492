// Slot planning and the kernel loop. The design note is in executor.h.
#include "runtime/cpu/executor.h"

#include <algorithm>
#include <array>

#include "runtime/index_checks.h"
#include "runtime/support/checked.h"
#include "runtime/support/error.h"

namespace stitch::rt::cpu {

int64_t kernelBytes(const CompiledKernel& k) {
  int64_t bytes = 0;
  for (const auto* list : {&k.inputs, &k.outputs})
    for (const KernelBuffer& b : *list)
      bytes = saturatingAdd(bytes, saturatingMul(b.elements, ir::dtypeBytes(b.dtype)));
  return bytes;
}

bool runsInline(const CompiledKernel& k) { return kernelBytes(k) <= kInlineBytes; }

SlotPlan assignSlots(std::span<const CompiledKernel> kernels, std::span<const int> external) {
  std::vector<SlotStep> steps;
  steps.reserve(kernels.size());
  for (const CompiledKernel& k : kernels) steps.push_back({k.inputs, k.outputs});
  return planSlots(steps, external);
}

void ValueBuffers::clear() {
  std::fill(values_.begin(), values_.end(), nullptr);
  std::fill(scratch_.begin(), scratch_.end(), nullptr);
}

void ValueBuffers::bind(int id, void* data) {
  STITCH_INTERNAL(id >= 0, "binding value id {}", id);
  if (static_cast<size_t>(id) >= values_.size()) values_.resize(static_cast<size_t>(id) + 1);
  values_[static_cast<size_t>(id)] = data;
}

void ValueBuffers::bindSlots(const SlotPlan& plan, const Arena& arena) {
  if (values_.size() < plan.valueSlot.size()) values_.resize(plan.valueSlot.size());
  if (scratch_.size() < plan.scratchSlot.size()) scratch_.resize(plan.scratchSlot.size());
  for (size_t v = 0; v < plan.valueSlot.size(); ++v)
    if (plan.valueSlot[v] >= 0) values_[v] = arena.slot(plan.valueSlot[v]);
  for (size_t s = 0; s < plan.scratchSlot.size(); ++s)
    if (plan.scratchSlot[s] >= 0) scratch_[s] = arena.slot(plan.scratchSlot[s]);
}

void* ValueBuffers::value(int id) const {
  return id >= 0 && static_cast<size_t>(id) < values_.size() ? values_[static_cast<size_t>(id)]
                                                             : nullptr;
}

void* ValueBuffers::scratch(int index) const {
  return index >= 0 && static_cast<size_t>(index) < scratch_.size()
             ? scratch_[static_cast<size_t>(index)]
             : nullptr;
}

void runKernels(std::span<const CompiledKernel> kernels, const SlotPlan& slots,
                ValueBuffers& values, Arena& arena, ThreadPool& pool, std::string_view program) {
  arena.prepare(slots.slotBytes);
  values.bindSlots(slots, arena);
  // The index checks' status words, this run's own (codegen/llvm/llvm_emitter.h).
  std::array<int64_t, kCheckStatusWords> status{};

  // Buffer lists live on the stack; only a kernel with more buffers than this allocates.
  constexpr size_t kInlineBuffers = 64;
  for (size_t ki = 0; ki < kernels.size(); ++ki) {
    const CompiledKernel& k = kernels[ki];
    STITCH_INTERNAL(k.fn != nullptr, "cpu kernel {} has no code", ki);
    const size_t n =
        k.inputs.size() + k.outputs.size() + (k.sizes.empty() ? 0 : 1) + (k.checks.empty() ? 0 : 1);
    std::array<void*, kInlineBuffers> inlineBuffers;
    std::vector<void*> heapBuffers;
    void** buffers = inlineBuffers.data();
    if (n > kInlineBuffers) {
      heapBuffers.resize(n);
      buffers = heapBuffers.data();
    }
    size_t i = 0;
    auto gather = [&](const KernelBuffer& b) {
      void* p = values[b];
      // DLPack allows a null data pointer for an empty tensor.
      STITCH_INTERNAL(p != nullptr || b.elements == 0, "cpu kernel {}: {} {} has no buffer", ki,
                      b.value >= 0 ? "value" : "scratch", b.value >= 0 ? b.value : b.scratch);
      buffers[i++] = p;
    };
    for (const auto& b : k.inputs) gather(b);
    for (const auto& b : k.outputs) gather(b);
    if (!k.sizes.empty()) buffers[i++] = const_cast<int64_t*>(k.sizes.data());
    if (!k.checks.empty()) buffers[i++] = status.data();

    KernelFn fn = k.fn;
    void* const* args = buffers;
    if (k.serial) {
      if (k.units > 0) fn(args, 0, k.units);  // as parallelFor runs a loop with no units
    } else {
      pool.parallelFor(k.units, k.grain,
                       [fn, args](int64_t begin, int64_t end) { fn(args, begin, end); });
    }
    // The pool's return orders the tasks' writes before this read. Later kernels may read what
    // a failed check left, so the run stops here.
    if (status[0] != 0) throwCheckFailure(status, k.checks, program, ki);
  }
}

}  // namespace stitch::rt::cpu
