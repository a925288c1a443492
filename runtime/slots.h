// Where a program's intermediates live: one slot planner for every backend's arena.
//
// Design. Before the first run of an input signature, planSlots() plans the arena over the steps
// of a run (host: every phase of every kernel; GPU: every kernel, whose phases may run as one
// cooperative launch): every value a step touches that is not in the caller's memory (graph
// inputs and outputs are) and every kernel scratch index gets a slot, and a slot is handed to a
// later value once the last step touching its current value has run (liveness over the step
// sequence; best fit among free slots). Two values share a slot only if no step lies in both of
// their live ranges, so a step never reads and writes one slot through two buffers.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/artifact.h"

namespace stitch::rt {

struct SlotPlan {
  std::vector<int64_t> slotBytes;  // bytes per arena slot
  std::vector<int> valueSlot;      // by node id: the arena slot, or -1 (caller's memory, unused)
  std::vector<int> scratchSlot;    // by kernel scratch index: the arena slot, or -1 (unused)
  int64_t totalBytes() const;      // saturating: compared with memory sizes, never allocated
};

// One step of a run: the buffers it reads and the buffers it writes.
struct SlotStep {
  std::span<const KernelBuffer> reads;
  std::span<const KernelBuffer> writes;
};

// Plans the arena for `steps` (in run order). `external` lists the values that live in the
// caller's memory; every other value a step reads must be written by an earlier step (else
// Internal: the sequence is malformed). Sizes are elements * dtype bytes, the largest seen for a
// value.
SlotPlan planSlots(std::span<const SlotStep> steps, std::span<const int> external);

}  // namespace stitch::rt
