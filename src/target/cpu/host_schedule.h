// The cpu target's schedule: every choice of how a host kernel program runs, made on the lowered
// program before the LLVM emitter carries it out (Phase::grain, Phase::host).
//
// Design note. The emitter only emits; what it is to emit is decided here, per phase:
//   grain     units per thread-pool task, so that a task covers `taskElements` elements (a loop
//             phase's units are chunks of elements, a reduce phase's rows);
//   tiles     column tiles for column and middle-axis reductions (adjacent units walk the rows
//             together, the inner loop contiguous in memory), element tiles for loops whose
//             operands broadcast along inner axes (a bias at i % C), row tiles for walks whose
//             index divides the row position (GroupNorm's channel); each only where
//             lower/tile_forms.h proves the tile's index arithmetic affine, largest tile first;
//   prefetch  next-row prefetch of a row phase's long contiguous rows;
//   row caches the budget for keeping a row's values between walks (lower/row_cache.h);
//   interleave the element loop's interleave count where transcendentals make it latency-bound;
//   streaming the buffers a phase only writes, stored non-temporally where it moves more than
//             `streamingStoreBytes` and waits on memory (runtime/cpu/streaming_stores.h).
// Every figure behind these choices was measured on the development VM; the comments in
// host_schedule.cpp say where and what.
#pragma once

#include <cstdint>

#include "lower/kernel_program.h"

namespace stitch::target::cpu {

// Schedules every phase of p for a host whose tasks cover `taskElements` elements and whose JIT
// streams the stores of phases past `streamingStoreBytes` (0: never).
void scheduleHost(lower::KernelProgram& p, int64_t taskElements, int64_t streamingStoreBytes);

}  // namespace stitch::target::cpu
