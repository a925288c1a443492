// Slot planning and the kernel loop. The design note is in executor.h.
#include "runtime/cpu/executor.h"

#include <algorithm>
#include <array>

#include "support/checked.h"
#include "support/error.h"

namespace stitch::rt::cpu {

int64_t SlotPlan::totalBytes() const {
  int64_t total = 0;
  for (int64_t b : slotBytes) total = saturatingAdd(total, b);  // compared to memory, never used
  return total;
}

SlotPlan assignSlots(std::span<const CompiledKernel> kernels, std::span<const int> external) {
  // One id space for both kinds of arena resident: values first, then scratch indices.
  int numValues = 0, numScratch = 0;
  auto scan = [&](const KernelBuffer& b) {
    STITCH_INTERNAL(b.value >= 0 || b.scratch >= 0,
                    "a kernel buffer names neither a value nor "
                    "a scratch slot");
    STITCH_INTERNAL(b.elements >= 0, "a kernel buffer has {} elements", b.elements);
    if (b.value >= 0) numValues = std::max(numValues, b.value + 1);
    else numScratch = std::max(numScratch, b.scratch + 1);
  };
  for (const auto& k : kernels) {
    for (const auto& b : k.inputs) scan(b);
    for (const auto& b : k.outputs) scan(b);
  }
  for (int v : external) numValues = std::max(numValues, v + 1);

  const size_t numKeys = static_cast<size_t>(numValues + numScratch);
  std::vector<char> isExternal(static_cast<size_t>(numValues), 0);
  for (int v : external)
    if (v >= 0) isExternal[static_cast<size_t>(v)] = 1;
  auto keyOf = [&](const KernelBuffer& b) -> int {
    if (b.value >= 0) return isExternal[static_cast<size_t>(b.value)] ? -1 : b.value;
    return numValues + b.scratch;
  };

  // Live range of each key: from the kernel that first writes it to the last kernel touching it.
  std::vector<int> first(numKeys, -1), last(numKeys, -1);
  std::vector<int64_t> bytes(numKeys, 0);
  for (int ki = 0; ki < static_cast<int>(kernels.size()); ++ki) {
    const auto& k = kernels[static_cast<size_t>(ki)];
    for (const auto& b : k.inputs) {
      int key = keyOf(b);
      if (key < 0) continue;
      STITCH_INTERNAL(first[static_cast<size_t>(key)] >= 0,
                      "kernel {} reads {} {} before any kernel writes it", ki,
                      b.value >= 0 ? "value" : "scratch", b.value >= 0 ? b.value : b.scratch);
      last[static_cast<size_t>(key)] = ki;
    }
    for (const auto& b : k.outputs) {
      int key = keyOf(b);
      if (key < 0) continue;
      auto i = static_cast<size_t>(key);
      if (first[i] < 0) first[i] = ki;
      last[i] = ki;
      auto size = checkedByteSize(b.elements, ir::dtypeBytes(b.dtype));
      STITCH_INTERNAL(size.has_value(), "kernel {} writes {} elements of {}, past the size limit",
                      ki, b.elements, ir::dtypeName(b.dtype));
      bytes[i] = std::max(bytes[i], *size);
    }
  }

  std::vector<std::vector<int>> startsAt(kernels.size()), endsAt(kernels.size());
  for (size_t key = 0; key < numKeys; ++key) {
    if (first[key] < 0) continue;
    startsAt[static_cast<size_t>(first[key])].push_back(static_cast<int>(key));
    endsAt[static_cast<size_t>(last[key])].push_back(static_cast<int>(key));
  }

  SlotPlan plan;
  plan.valueSlot.assign(static_cast<size_t>(numValues), -1);
  plan.scratchSlot.assign(static_cast<size_t>(numScratch), -1);
  std::vector<int> slotOf(numKeys, -1);
  std::vector<int> freeSlots;
  for (size_t ki = 0; ki < kernels.size(); ++ki) {
    for (int key : startsAt[ki]) {
      int64_t need = bytes[static_cast<size_t>(key)];
      // Best fit: the smallest free slot that is big enough, else the largest one, grown.
      auto best = freeSlots.end();
      for (auto it = freeSlots.begin(); it != freeSlots.end(); ++it) {
        if (best == freeSlots.end()) {
          best = it;
          continue;
        }
        int64_t have = plan.slotBytes[static_cast<size_t>(*it)];
        int64_t bestHave = plan.slotBytes[static_cast<size_t>(*best)];
        bool fits = have >= need, bestFits = bestHave >= need;
        if (fits ? (!bestFits || have < bestHave) : (!bestFits && have > bestHave)) best = it;
      }
      int slot;
      if (best != freeSlots.end()) {
        slot = *best;
        freeSlots.erase(best);
        auto& size = plan.slotBytes[static_cast<size_t>(slot)];
        size = std::max(size, need);
      } else {
        slot = static_cast<int>(plan.slotBytes.size());
        plan.slotBytes.push_back(need);
      }
      slotOf[static_cast<size_t>(key)] = slot;
    }
    // After kernel ki has run, the values it was the last to touch are dead.
    for (int key : endsAt[ki]) freeSlots.push_back(slotOf[static_cast<size_t>(key)]);
  }

  for (size_t key = 0; key < numKeys; ++key) {
    if (key < static_cast<size_t>(numValues)) plan.valueSlot[key] = slotOf[key];
    else plan.scratchSlot[key - static_cast<size_t>(numValues)] = slotOf[key];
  }
  return plan;
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
                ValueBuffers& values, Arena& arena, ThreadPool& pool) {
  arena.prepare(slots.slotBytes);
  values.bindSlots(slots, arena);

  // Buffer lists live on the stack; only a kernel with more buffers than this allocates.
  constexpr size_t kInlineBuffers = 64;
  for (size_t ki = 0; ki < kernels.size(); ++ki) {
    const CompiledKernel& k = kernels[ki];
    STITCH_INTERNAL(k.fn != nullptr, "cpu kernel {} has no code", ki);
    const size_t n = k.inputs.size() + k.outputs.size();
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

    KernelFn fn = k.fn;
    void* const* args = buffers;
    pool.parallelFor(k.units, k.grain,
                     [fn, args](int64_t begin, int64_t end) { fn(args, begin, end); });
  }
}

}  // namespace stitch::rt::cpu
