// The GPU schedule of a kernel program, as the CUDA/HIP emitter reads it.
//
// Design note. The launch (block, grid, vector width, lanes and units per block, items, unrolled,
// 64-bit indexing, shared memory: per phase) is decided once, in lower/launch.h, and stored in
// the program's Phase::levels; that is the launch the planner priced (launch.h says what is
// priced for several phases). This module only gathers it for the emitter and adds what is
// specific to the printed code: which loads and stores are vector accesses.
//
// The program must have been scheduled for this target and alignment variant (its levels
// decided for them: target/gpu/gpu_schedule.h); the emitter decides no launch of its own, and
// one scheduled for other machine facts or the other variant is an internal error.
//
// Vector accesses: an access (load or store) is vectorized when its index is unit-stride over
// the V elements of a group and provably a multiple of V at the group's start (lower::
// analyzeIndices), and the kernel's buffers are 16-byte aligned (a run-time fact the caller
// states: it is part of the kernel cache key).
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/gpu/gpu_target.h"
#include "lower/kernel_program.h"

namespace stitch::codegen {

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

// The launch facts of a code generation target.
lower::LaunchTarget launchTarget(const GpuTarget& target);

// The schedule of `p` for `target`: its levels when decided for (target, aligned), else the same
// decision made here. `aligned`: every buffer's base pointer is 16-byte aligned.
KernelSchedule scheduleKernel(const lower::KernelProgram& p, const GpuTarget& target, bool aligned);

}  // namespace stitch::codegen
