// The GPU schedule of a kernel program: how each phase's units and loops map onto threads.
//
// Design note. A KernelProgram says what a unit computes (one row of the dominant reduction, or
// a chunk of a loop); the schedule decides who computes it, per phase:
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
// Each lane of a reduce phase walks `items` groups of V elements. When `items` is small the walk
// is fully unrolled and every value loaded in one stage is kept in registers for the later
// stages (AStitch's register stitching: a layer norm reads its row from DRAM once, not three
// times); otherwise later stages re-read the row, which then mostly hits L1/L2.
//
// Every phase of a kernel uses the same block size, so that the phases can also run as one
// cooperative kernel with grid barriers between them. Index arithmetic is 32-bit when every
// index of the kernel fits (divisions by constants are several times cheaper), else 64-bit.
//
// Vector accesses: an access (load or store) is vectorized when its index is unit-stride over
// the V elements of a group and provably a multiple of V at the group's start (indexKind /
// divisibility below), and the kernel's buffers are 16-byte aligned (a run-time fact the caller
// states: it is part of the kernel cache key).
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/gpu/gpu_target.h"
#include "lower/kernel_program.h"

namespace stitch::codegen {

// How an index instruction behaves over the V elements of a group starting at loop index k0
// (a multiple of V): the same for all of them, k0-relative unit stride, or anything else.
enum class IndexKind { Invariant, Unit, Other };

struct IndexInfo {
  IndexKind kind = IndexKind::Other;
  int64_t divisor = 1;  // a known divisor of the index's value at k0
};

// Per instruction of `ph`, for groups of `vec` elements.
std::vector<IndexInfo> analyzeIndices(const lower::Phase& ph, int vec);

struct PhaseSchedule {
  bool reduce = false;
  bool rowMajor = true;   // reduce: lanes adjacent along the row; false: column tiles
  int vec = 1;            // V: elements per group
  int lanes = 1;          // TK: threads per unit (reduce), power of two
  int unitsPerBlock = 1;  // UX
  int64_t items = 1;      // groups per lane along the row (reduce) or per thread (unused: loop)
  bool unrolled = false;  // items loop unrolled; loads kept in registers across stages
  int64_t blocks = 1;     // the grid this phase wants when launched alone
  std::vector<bool> vectorAccess;  // per instruction: a vectorized load/store
};

struct KernelSchedule {
  int block = 256;  // threads per block, every phase
  bool index64 = false;
  bool aligned = false;
  int sharedBytes = 0;  // static shared memory of the kernel (max over phases)
  std::vector<PhaseSchedule> phases;
};

// Schedules `p` for `target`; `aligned`: every buffer's base pointer is 16-byte aligned.
KernelSchedule scheduleKernel(const lower::KernelProgram& p, const GpuTarget& target, bool aligned);

}  // namespace stitch::codegen
