// Kernel programs: one fused kernel lowered to explicit loops, loads, stores and index math.
//
// Design note. A KernelProgram is what every backend prints (LLVM IR for the host now, CUDA/HIP
// C++ later); it is GPU-shaped but backend-neutral, and as simple as the planner's semantics
// allow:
//
// - Every value is "evaluated at an index of its own output shape". An elementwise op at flat
//   index i reads its operands at the NumPy-broadcast index; reshape keeps the flat index;
//   transpose, slice, concat and broadcast_to are index arithmetic (concat: a select over the
//   parts, each read at a clamped, always in-bounds index; on the host a loop over a concat's
//   shape walks one box of it per part instead, one phase each, where the concat is its part).
//   So loads and stores carry explicit flat-index expressions built from the unit index and the
//   inner loop index, and no layout op ever moves data.
// - A kernel runs as one or more phases. A phase is one grid: `units` independent parallel units
//   (a GPU block, a host task's share), each running the same body. Loop phases: a unit is a
//   chunk of `chunk` consecutive elements of the domain. Reduce phases: a unit is one row of the
//   dominant reduction (the kept coordinates), the inner loop runs over the row's reduced
//   coordinates. (Block/warp/thread levels split a unit's inner loop on a GPU; on the host the
//   loop is the vector loop, so the program records them but the host emitter ignores them.)
// - Stages are separated by reductions: stage s loops over the row and accumulates every row
//   reduction of depth s (in registers: memory scope Register); row values are then available
//   to later stages and to the per-row block `post`; a final loop `elems` stores the
//   per-element outputs. Elementwise values needed again after a reduction are recomputed from
//   global memory (a row sits in L1/L2 on the host: the honest CPU choice; a GPU emitter may
//   stage them in shared memory instead), except costly ones (a transcendental: softmax's exp),
//   which the host emitter keeps in a row array (lower/row_cache.h). Partial values (broadcast
//   operands computed in the kernel) are recomputed per use.
// - A second-level ("global") reduction needs a grid barrier. It is lowered as phase
//   boundaries: phase A stores its operand (a row value) per row into an arena scratch buffer,
//   phase B (one unit) reduces the scratch, and the later phases read the result from scratch.
//   The first phase A also stores every output that no second-level reduction feeds, so a loss
//   and a gradient beside it walk the rows once; an output computed from the reduced result
//   walks them again in the last phase.
// - A column reduction of the domain in a row kernel (layer norm's dgamma beside its dx) cannot
//   wait for a row: each worker of the rows phase keeps per-column partial sums of its rows in a
//   scratch buffer, and a combine phase reduces them (lower/column_partials.h) and computes the
//   elementwise values of the results the kernel also has (a bf16 cast of dgamma). The inputs
//   are read once.
// - Horizontally packed parts (independent sub-kernels) become separate phases too: phases run
//   one after the other, which is always legal.
// - Indices read from data are checked where they are read (InstKind::CheckIndex): a gather's,
//   and a check_index's. A check of a value that is the row's own in a reduce phase (a label
//   against its row of logits) and needs none of the row's reductions is evaluated once per row
//   in `pre`; the row's walks find it there.
//
// Instructions are SSA, numbered per phase; a block lists the ids it defines, in order. Values
// are typed by IR dtype and computed in the compute type: f16/bf16/f32 in f32 (f16/bf16 results
// rounded to their dtype, nearest-even, after every op, as the reference rounds every op), f64
// in f64, ints in their width with two's-complement wrap, bool as i1; index math is i64.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusion/plan.h"
#include "ir/graph.h"
#include "ir/shape.h"

namespace stitch::lower {

enum class InstKind : uint8_t {
  Const,       // dtype, fvalue (floats) or ivalue (ints, bool)
  UnitIndex,   // i64: the unit (row, or chunk) this body runs for
  LoopIndex,   // i64: the inner loop index (the flat element for loop phases)
  IAdd,        // i64 a + b
  IMulC,       // i64 a * imm
  IDivC,       // i64 a / imm (a >= 0, imm > 0)
  IRemC,       // i64 a % imm (a >= 0, imm > 0)
  Load,        // buffer, a = flat index; value in the compute type of dtype
  Store,       // buffer, a = flat index, b = value
  AccRead,     // the final value of accumulator `acc` (after its stage)
  Accumulate,  // acc <- combine(acc, a); only in a stage body
  Op,          // an elementwise IR op (unary, binary, compare, select, cast) on args
  // i64: args[0] (an i64 index) when it lies in [0, ivalue), else 0, so that what it addresses
  // stays in bounds; an index outside also records the run's index error for
  // KernelProgram::checks[check] (the emitters' contract: after the kernel, the program's error
  // slot names the check, one offending index and ivalue; the runtime turns it into
  // IndexOutOfRange). Pure otherwise (hash-consed like any value), but a root for liveness: it
  // is evaluated wherever its block runs even when no store reads it.
  CheckIndex,
};

enum class MemScope : uint8_t { Global, Shared, Register };

// What splitting long rows (lower/split_rows.h) made of a phase. Not read by the emitters: the
// planner prices a split kernel's phase boundaries and the walks it repeats from it
// (lower/launch.h).
enum class SplitRole : uint8_t {
  None,     // not a split's
  Walk,     // sub-rows walked for the first time: the (first) stage's partials
  Rewalk,   // sub-rows an earlier phase walked: a later stage's partials, or the per-element
            // block after the results; its loads of the kernel's inputs come from memory again,
            // not from registers of the earlier walk
  Combine,  // the partials of each row reduced, then its per-row block
};
enum class ReduceOp : uint8_t { Sum, Mean, Max, Min, Prod };

struct Inst {
  InstKind kind = InstKind::Const;
  ir::DType dtype = ir::DType::I64;  // result dtype (Store: the stored value's)
  ir::OpCode op = ir::OpCode::Add;   // for Op
  int args[3] = {-1, -1, -1};
  int buffer = -1;  // Load/Store: position in the phase's buffers
  int acc = -1;     // AccRead/Accumulate
  int check = -1;   // CheckIndex: position in KernelProgram::checks
  int64_t ivalue = 0;
  double fvalue = 0;
};

// A kernel parameter: a buffer in global memory.
struct Param {
  int value = -1;    // node id in the planned graph, or -1 for scratch
  int scratch = -1;  // scratch slot when value == -1
  ir::DType dtype = ir::DType::F32;
  int64_t elements = 0;
  MemScope scope = MemScope::Global;
};

struct Accumulator {
  int node = -1;  // the reduction
  ReduceOp op = ReduceOp::Sum;
  ir::DType dtype = ir::DType::F32;  // the reduction's dtype; accumulated in its compute type
  int64_t count = 1;                 // elements per row (mean divides by it)
  int stage = 0;
  MemScope scope = MemScope::Register;
};

struct Block {
  std::vector<int> insts;
};

struct Stage {
  std::vector<int> accs;  // accumulators filled by this stage's loop over the row
  Block body;
};

// The machine facts a GPU launch depends on (lower/launch.h).
struct LaunchTarget {
  int warpSize = 32;
  int processors = 1;  // SMs or CUs: caps grid-stride grids
  int maxThreadsPerBlock = 1024;
};

// The parallel levels of a phase. The host uses `units` only (a task runs a range of units).
// The GPU launch fields are filled by scheduleLaunch (lower/launch.h), which the planner prices
// and the CUDA/HIP emitter reads; `processors` is 0 until then.
struct Levels {
  int64_t units = 0;        // grid: independent units
  int threadsPerBlock = 1;  // block (the same in every phase of a kernel)
  int warpSize = 1;         // warp
  int64_t elementsPerThread = 1;
  int64_t blocks = 0;          // the grid this phase wants when launched alone
  int vectorWidth = 1;         // V: elements per group (16 bytes where the accesses allow)
  int lanes = 1;               // reduce: threads per unit, a power of two
  int unitsPerBlock = 1;       // reduce: units a block runs at once
  int64_t items = 1;           // reduce: groups of V each lane walks along the row
  bool unrolled = false;       // reduce: the items loop is unrolled, loads kept in registers
  bool rowMajor = true;        // reduce: lanes adjacent along the row; false: column tiles
  bool index64 = false;        // the kernel needs 64-bit index arithmetic
  int sharedBytes = 0;         // the kernel's static shared memory (max over its phases)
  int processors = 0;          // the LaunchTarget decided for (with warpSize, maxThreadsPerBlock)
  int maxThreadsPerBlock = 0;  //
  bool aligned = false;        // decided for 16-byte aligned buffers (vector accesses allowed)
};

// How the host walks a phase: the cpu target's schedule() decides it (src/target/cpu/
// host_schedule.h), the LLVM emitter carries it out. Default: plain loops, nothing prefetched or
// streamed, no row caches (what an unscheduled program, or a GPU one, holds).
enum class HostTiling : uint8_t {
  None,
  Column,   // reduce: tiles of `tile` adjacent units walk the rows together (lower/tile_forms.h)
  Element,  // loop: the element loop in tiles of `tile` elements
  Row,      // reduce: the walks over a row in tiles of `tile` positions
};
struct HostSchedule {
  HostTiling tiling = HostTiling::None;
  int64_t tile = 0;
  int interleave = 0;         // loop phases: the element loop's interleave count (0: LLVM's)
  int64_t rowCacheBytes = 0;  // reduce phases: row caches up to this many bytes (lower/row_cache.h)
  std::vector<int> prefetched;  // the first stage's loads next-row prefetch covers (ids)
  std::vector<int> streamed;    // positions in `buffers` written with streaming stores
};

struct Phase {
  std::string name;
  bool reduce = false;  // false: loop phase (unit = chunk of elements)
  int64_t units = 0;
  int64_t grain = 1;      // units per host task worth its dispatch: the cpu target's schedule()
  int64_t chunk = 1;      // loop phases: elements per unit
  int64_t total = 0;      // loop phases: elements in the domain
  int64_t rowLength = 0;  // reduce phases: inner loop extent
  // Reduce phases: 0, or the number of workers the units are dealt to. Worker w runs units w,
  // w + workers, w + 2 * workers, ... one after the other (one host task, one GPU unit slot), so
  // a unit may read what earlier units of its worker stored: the per-worker column partials of
  // a column reduction stitched into a row kernel (lower/column_partials.h).
  int64_t workers = 0;
  // With workers: worker w runs the contiguous units [w * per, (w + 1) * per), per =
  // ceil(units / workers), instead (the host's dealing: a core walks consecutive rows, one
  // stream for the prefetchers, rather than jumping workers rows at a time; no difference was
  // measurable on the loaded dev VM). GPUs deal round robin, so that the unit slots running at
  // once read adjacent rows.
  bool workerBlocks = false;
  SplitRole split = SplitRole::None;
  Levels levels;
  std::vector<int64_t> domain;
  std::vector<bool> reduced;  // per domain axis
  std::vector<int> buffers;   // program params; the first `numInputs` are read, the rest written
  int numInputs = 0;
  std::vector<Inst> insts;
  std::vector<Accumulator> accs;
  Block pre;                  // reduce phases: once per unit
  std::vector<Stage> stages;  // reduce phases: loops over the row, in order
  Block post;                 // reduce phases: per unit after the stages (row stores)
  Block elems;                // the element loop (loop phases: the whole body)
  HostSchedule host;          // the host's walk (the cpu target's schedule())
};

// Run-time sizes (lower/size_args.h): which sizes of a phase its kernel reads from the kernel's
// size arguments instead of compiling them in. Each field is an argument index into
// SizeArgs::values, or -1: the size is compiled in.
struct PhaseSizeArgs {
  int units = -1;
  int chunk = -1;
  int total = -1;
  int rowLength = -1;
  std::vector<int> insts;      // per instruction: its ivalue (Const i64, IMulC, IDivC, IRemC,
                               // CheckIndex)
  std::vector<int> accCounts;  // per accumulator: its count (a mean's divisor)
};

// A program's size arguments: empty (every size compiled in, the program's code is for its
// sizes only), or one PhaseSizeArgs per phase and the arguments' values for these sizes. The
// values fields name are also still in the fields (a program stays complete and runnable as
// it is); an emitter that reads the arguments makes one code for every program of the class.
struct SizeArgs {
  std::vector<int64_t> values;
  std::vector<PhaseSizeArgs> phases;
};

struct KernelProgram {
  std::string name;
  std::vector<Param> params;
  std::vector<Phase> phases;  // run in order
  int scratchSlots = 0;
  SizeArgs sizeArgs;
  // The index checks its CheckIndex instructions record, by `check`: what an error names
  // (ir::indexCheckLabel, "gather 'y' (axis 1)"). Not read by the emitters: the code records a
  // check's position only, so programs that differ in names share code.
  std::vector<std::string> checks;
};

// Lowers kernel k of plan-ready graph g (after the passes) under concrete `bindings`, for the
// host: column partials dealt to workers in blocks, a concat's domain walked one part per phase,
// views keeping their coordinates (kernel_program.cpp). The overloads with a LaunchTarget lower
// for a GPU, which keeps none of these (unmeasured on a device so far).
KernelProgram lowerKernel(const ir::Graph& g, const fusion::Kernel& k, const ir::Bindings& b);
// The same for a GPU with the machine facts `target` (column partials' workers and long rows'
// splits are sized for it); the launch of its phases is then decided by scheduleLaunch
// (lower/launch.h), the GPU targets' schedule().
KernelProgram lowerKernel(const ir::Graph& g, const fusion::Kernel& k, const ir::Bindings& b,
                          const LaunchTarget& target);
// The same from the concrete shape of every node of g (ir::concreteShapes), as the planner has
// them; `target` may be null (the host's lowering).
KernelProgram lowerKernelWithShapes(const ir::Graph& g, const fusion::Kernel& k,
                                    const std::vector<std::vector<int64_t>>& shapes,
                                    const LaunchTarget* target);

// Whether `op` is a transcendental (exp log log1p tanh erf sin cos pow sigmoid): tens of
// instructions an element on a host, where the other ops are one or a few.
bool isTranscendental(ir::OpCode op);

// Human-readable text of a program, for dumps and tests.
std::string printProgram(const KernelProgram& p);

// Interprets the index instructions of a phase (Const, UnitIndex, LoopIndex, IAdd, IMulC, IDivC,
// IRemC, and Op on i64 Maximum/Minimum/Lt/Select) for given unit/loop indices; returns the
// value of inst `id`. For unit tests of the index math.
int64_t evalIndex(const Phase& ph, int id, int64_t unit, int64_t loop);

}  // namespace stitch::lower
