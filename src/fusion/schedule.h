// What the planner asks the target about a candidate kernel: the launch that would run, priced.
//
// Design note. The planner prices what is launched. On a GPU the launch of a kernel (grid, block,
// vector width, lanes, unrolling: lower/launch.h) is decided on its lowered program, which this
// folder does not build: the planner hands each candidate to the target's Scheduler
// (PlannerOptions::scheduler; src/target), which lowers and schedules it exactly as the driver
// will (Target::lower, Target::schedule) and returns the launch's figures, and the cost model
// prices those (group.cpp, applyLaunch). The planner never includes the lowering: the arrows run
// target -> lower -> fusion, and the plan's data (plan.h) is what lower/ reads.
//
// A host kernel's launch is its mapping's (a task per HardwareProfile::taskElements): no scheduler
// is needed, and a target may leave it null. A GPU profile planned without one is an internal
// error: its prices would be a guess of the launch, not the launch.
//
// Column partials (lower/column_partials.h) are sized here, once, for both readers: the lowering
// deals a rows phase to columnPartialWorkers() workers and the planner prices those partials.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "fusion/hardware.h"
#include "fusion/plan.h"
#include "ir/graph.h"
#include "runtime/support/dtype.h"

namespace stitch::fusion {

// The launch the cost model prices: a one-phase kernel's launch; for several phases the
// cooperative launch (the runtime's first choice): the common block and the largest phase grid,
// and the bytes a thread has in flight in the phase that moves the most data (lower/launch.h).
struct PricedLaunch {
  int64_t blocks = 1;
  int threadsPerBlock = 1;
  int64_t bytesInFlightPerThread = 0;
  // The phase boundaries: grid barriers of the cooperative launch (or launches, one per phase).
  int barriers = 0;
  // Whether long rows were split (lower/split_rows.h); the bytes of the kernel's inputs that the
  // phases walking sub-rows again load after an earlier phase loaded them, once per phase, and
  // the bytes of the distinct inputs among them (whether a cache holds them from one walk to the
  // next).
  bool split = false;
  bool staged = false;  // some phase walks sub-rows again (a split by stages)
  int64_t rewalkBytes = 0;
  int64_t rewalkSpan = 0;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // The launch of candidate kernel k of g (`shapes`: every node's concrete shape) as the target
  // will schedule it, on its own machine: the profile the planner prices for is the target's
  // facts().
  virtual PricedLaunch launch(const ir::Graph& g, const Kernel& k,
                              const std::vector<std::vector<int64_t>>& shapes) const = 0;
};

// The number of workers a rows phase of `units` rows of `rowLength` elements deals its column
// partials to (lower/column_partials.h): at most one per kRowsPerWorker rows, the partial budget,
// and what the machine runs at once (`gpuProcessors` > 0: a GPU's multiprocessors; 0: the host,
// whose workers take blocks of rows); 0 when there are no rows.
int64_t columnPartialWorkers(int64_t units, int64_t rowLength, int gpuProcessors);

// At most this many partial elements per program phase (8 MiB of f32), unless one row needs more.
inline constexpr int64_t kPartialBudget = int64_t{1} << 21;
// At least this many rows per worker (but one worker at least).
inline constexpr int64_t kRowsPerWorker = 8;

// The dtype partials are kept in: the compute type of a float dtype (f32 for f16/bf16/f32).
ir::DType partialDType(ir::DType t);

}  // namespace stitch::fusion
