// Row caches: per-element values that one walk over a reduce phase's row computes and a later
// walk needs again.
//
// Why. The lowering recomputes an elementwise value needed after a reduction (kernel_program.h's
// design note): softmax's e = exp(x - max) in the walk that sums it and again in the walk that
// stores e / sum; cross-entropy's the same. Loads are cheap to repeat (the row sits in L1/L2 on a
// host), transcendentals are not: the second exp was a third of a host softmax's compute. So a
// backend may keep such a value in a row-sized buffer written where it is first computed and
// read in the later walks: the host emitter keeps it in a stack array (softmax went from 70% to
// ~90% of copy bandwidth on the dev VM); a GPU emitter could use shared memory (AStitch's
// "shared memory stitching"; the CUDA/HIP emitter does not yet).
//
// rowCache() picks the values: an instruction of a later walk (a later stage or the elems block)
// that the earliest stage computing the same value (structurally: same op on the same operands,
// the loop index and the row's values alike) already has, when the value varies along the row
// and its computation holds a transcendental (exp log log1p tanh erf sin cos pow sigmoid), and
// it reads no buffer the phase writes. Only the outermost such value of a walk is loaded, not its
// cached operands too. Slots are kept in order while their rows fit `maxBytes` (rowLength
// elements in the compute type each: f32 for f16/bf16/f32, 8 bytes for 64-bit types).
#pragma once

#include <cstdint>
#include <vector>

#include "lower/kernel_program.h"

namespace stitch::lower {

struct RowCache {
  struct Slot {
    int producer = -1;  // the instruction (of the earliest stage body) whose value is kept
    ir::DType dtype = ir::DType::F32;
  };
  std::vector<Slot> slots;
  std::vector<int> storeSlot;  // per instruction: the slot its value is stored to, or -1
  std::vector<int> loadSlot;   // per instruction: the slot its value is loaded from, or -1
};

// The row cache of reduce phase `ph` (empty for loop phases and rows of one stage without
// elems): at most `maxBytes` of rows.
RowCache rowCache(const Phase& ph, int64_t maxBytes);

}  // namespace stitch::lower
