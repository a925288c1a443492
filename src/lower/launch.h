// The launch schedule: how each phase of a kernel program maps onto a GPU's blocks and threads.
//
// Design note. The launch is decided once, here, by the GPU targets' schedule() (src/target/gpu),
// and stored in the program (Phase::levels). Two readers use the same decision:
//   - the CUDA/HIP emitter (codegen/gpu/schedule.h) prints the loops of each phase for it, and
//     launches each phase (or the cooperative entry) with its grid and block;
//   - the planner's group analysis (fusion/group.cpp) asks the target's Scheduler
//     (fusion/schedule.h), which lowers each candidate kernel, schedules it and hands exactly that
//     grid and block to the cost model. So plan search prices the launch that runs, not a guess.
// The decision depends only on the program and a few machine facts (LaunchTarget): the warp
// width, the processor count (it caps grid-stride grids) and the block limit. A fusion profile
// (HardwareProfile) and a codegen target (GpuTarget) both describe them; for the built-in
// profiles and targets they agree (sm_90: 32, 132, 1024; sm_80: 32, 108, 1024; gfx90a: 64, 110,
// 1024), and a runtime with a device reads its own processor count, so the emitter re-decides
// when the program's levels were made for other facts.
//
// The rules (what ran on the H100 and what the emitted code is tuned for), per phase:
//
//   loop phase     each thread takes V consecutive elements (V * element size = 16 bytes where
//                  the accesses allow), grid-stride over the domain; the grid is capped at a few
//                  waves of the machine.
//   reduce phase,  when the innermost non-trivial axis is reduced (row-contiguous): TK lanes per
//   row mapping    row walk it V elements at a time. Short rows: TK <= warp, several rows per
//                  block ("warp per row", segmented shuffles). Long rows: TK = the block ("block
//                  per row": shuffles, then shared memory).
//   reduce phase,  when an outer axis is reduced (adjacent units are adjacent in memory): a block
//   column tiles   owns UX = warp-size units and TK lanes per unit walk the row with stride TK
//                  (a warp reads UX consecutive addresses: coalesced); partials meet in shared
//                  memory. This covers column and middle-axis reductions.
//
// Each lane of a reduce phase walks `items` groups of V elements; when `items` is small the walk
// is fully unrolled and loads are kept in registers across stages (codegen/gpu/schedule.h).
// Every phase of a kernel uses the same block size, so that the phases can also run as one
// cooperative kernel with grid barriers between them: the widest a phase's rows want, but not a
// phase of one unit beside phases of many (a grid barrier's reduction of every row's value runs
// on one block whatever its width, and would size every phase's block). Index arithmetic is 32-bit
// when every index of the kernel fits, else 64-bit.
//
// What the cost model prices (KernelSummary::blocks, threadsPerBlock, gridSyncs; pricedLaunch
// below): a one-phase kernel's launch; for several phases the cooperative launch (the runtime's
// first choice): the common block and the largest phase grid. Every phase is grid-stride over
// its units, so that one grid runs them all. The variant priced is the aligned one (16-byte
// aligned buffers, vector accesses allowed): the runtime's default; an unaligned call may run a
// launch with narrower vectors (its lanes and grids can differ) that the plan did not price.
// With it, the bytes a thread has in flight (KernelSummary::bytesInFlightPerThread) in the phase
// that moves the most data (of phases walking as many elements, the one loading the most): the
// loads of its widest walk (a stage's, or the element walk), each of V elements when
// vectorized, times the groups each lane walks when the walk is unrolled (its loads are then
// issued before their values are used: codegen/gpu/schedule.h). For a kernel
// whose long rows were split (lower/split_rows.h), its phase boundaries, each a grid barrier,
// and the sub-rows its later phases walk again (SplitRole::Rewalk): no register of the first
// walk survives a phase boundary, so those walks load the kernel's inputs again, from the cache
// or from memory.
//
// Dependencies. lower/ reads fusion's data (plan.h: the Kernel it lowers; schedule.h: the priced
// launch); fusion never includes lower/: the planner's group analysis asks the target's Scheduler
// (fusion/schedule.h), which lowers each candidate and decides its launch here.
//
// Cost. Lowering every candidate the search prices makes planning slower (bench/
// bench_planner.cpp, sm_90: 50 ops 1.1 -> 5.1 ms, 1k ops 45 -> 93 ms, 10k ops 101 -> 558 ms on
// the 2-core build machine); the lowering's allocations dominate, not this decision.
#pragma once

#include <cstdint>
#include <vector>

#include "fusion/hardware.h"
#include "fusion/schedule.h"
#include "lower/kernel_program.h"

namespace stitch::lower {

// How an index instruction behaves over the V elements of a group starting at loop index k0
// (a multiple of V): the same for all of them, k0-relative unit stride, or anything else.
enum class IndexKind { Invariant, Unit, Other };

struct IndexInfo {
  IndexKind kind = IndexKind::Other;
  int64_t divisor = 1;  // a known divisor of the index's value at k0
};

// Per instruction of `ph`, for groups of `vec` elements.
std::vector<IndexInfo> analyzeIndices(const Phase& ph, int vec);

// True when instruction `in` of a phase is a load or store that can move `vec` elements at once
// (unit stride over the group, and a multiple of `vec` at its start), given `info` for `vec`.
bool vectorizable(const std::vector<IndexInfo>& info, const Inst& in, int vec);

// The launch facts of a cost-model profile (the planner's view of the machine).
LaunchTarget launchTarget(const fusion::HardwareProfile& hw);

// The launch of every phase of `p` on `t` (one Levels per phase, in order). `aligned`: every
// buffer's base pointer is 16-byte aligned (vector accesses allowed).
std::vector<Levels> decideLaunch(const KernelProgram& p, const LaunchTarget& t, bool aligned);

// Stores decideLaunch(p, t, aligned) in p's Phase::levels.
void scheduleLaunch(KernelProgram& p, const LaunchTarget& t, bool aligned);

// True when p's levels hold the launch decided for (t, aligned).
bool launchDecidedFor(const KernelProgram& p, const LaunchTarget& t, bool aligned);

// The launch the cost model prices (see the note above; fusion/schedule.h), from levels decided by
// scheduleLaunch.
using fusion::PricedLaunch;
PricedLaunch pricedLaunch(const KernelProgram& p);

}  // namespace stitch::lower
