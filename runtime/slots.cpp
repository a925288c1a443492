// Slot planning for every backend's arena (design note in slots.h).
#include "runtime/slots.h"

#include <algorithm>

#include "runtime/support/checked.h"
#include "runtime/support/error.h"

namespace stitch::rt {

int64_t SlotPlan::totalBytes() const {
  int64_t total = 0;
  for (int64_t b : slotBytes) total = saturatingAdd(total, b);  // compared to memory, never used
  return total;
}

SlotPlan planSlots(std::span<const SlotStep> steps, std::span<const int> external) {
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
  for (const auto& k : steps) {
    for (const auto& b : k.reads) scan(b);
    for (const auto& b : k.writes) scan(b);
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
  for (int si = 0; si < static_cast<int>(steps.size()); ++si) {
    const auto& k = steps[static_cast<size_t>(si)];
    // Writes first: a step may read what it writes itself (column partials are read back by
    // later units of the worker that stored them: lower/column_partials.h).
    for (const auto& b : k.writes) {
      int key = keyOf(b);
      if (key < 0) continue;
      auto i = static_cast<size_t>(key);
      if (first[i] < 0) first[i] = si;
      last[i] = si;
      auto size = checkedByteSize(b.elements, ir::dtypeBytes(b.dtype));
      STITCH_INTERNAL(size.has_value(), "step {} writes {} elements of {}, past the size limit", si,
                      b.elements, ir::dtypeName(b.dtype));
      bytes[i] = std::max(bytes[i], *size);
    }
    for (const auto& b : k.reads) {
      int key = keyOf(b);
      if (key < 0) continue;
      STITCH_INTERNAL(first[static_cast<size_t>(key)] >= 0,
                      "step {} reads {} {} before any step writes it", si,
                      b.value >= 0 ? "value" : "scratch", b.value >= 0 ? b.value : b.scratch);
      last[static_cast<size_t>(key)] = si;
    }
  }

  std::vector<std::vector<int>> startsAt(steps.size()), endsAt(steps.size());
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
  for (size_t si = 0; si < steps.size(); ++si) {
    for (int key : startsAt[si]) {
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
    // After step si has run, the values it was the last to touch are dead.
    for (int key : endsAt[si]) freeSlots.push_back(slotOf[static_cast<size_t>(key)]);
  }

  for (size_t key = 0; key < numKeys; ++key) {
    if (key < static_cast<size_t>(numValues)) plan.valueSlot[key] = slotOf[key];
    else plan.scratchSlot[key - static_cast<size_t>(numValues)] = slotOf[key];
  }
  return plan;
}

}  // namespace stitch::rt
