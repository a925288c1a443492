// A fusion plan: the graph's ops partitioned into kernels.
//
// Each kernel has a dominant op that fixes its thread mapping (a row reduction's rows, a loop's
// elements), and every producer->consumer edge inside it carries the stitch scheme that hands
// the value over: registers (local, possibly recomputing it), warp shuffles, shared memory
// (block), or global memory behind a grid barrier (global). Values crossing kernel boundaries go
// through global memory between launches. The plan is for concrete shapes (each input signature
// gets one: searched, or a plan kept for its shape class re-priced at its sizes, plan_cache.h),
// so every size here is a number.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fusion/cost_model.h"
#include "ir/shape.h"

namespace stitch::fusion {

// STITCH_FUSION: stitch (everything), basic (XLA-style: a reduction ends its kernel), off (one
// kernel per op).
enum class Mode { Stitch, Basic, Off };
std::string_view modeName(Mode m);

enum class Scheme { Local, Warp, Block, Global };
std::string_view schemeName(Scheme s);

// How a kernel's work is laid out on the machine.
enum class MappingKind {
  Loop,          // elementwise: one thread per element (vectorized)
  RowReduce,     // reduced axes are the innermost: one warp, block or several blocks per row
  ColumnReduce,  // reduced axes are the outermost: blocks own column tiles, loop over rows
  MiddleReduce,  // reduced axes in between: blocks own (outer, column tile) pairs
  AllReduce,     // every axis reduced: all blocks cooperate, then combine
};
std::string_view mappingKindName(MappingKind k);

// Who cooperates on one row of a reduction.
enum class RowWidth { Thread, Warp, Block, MultiBlock };
std::string_view rowWidthName(RowWidth w);

struct Mapping {
  MappingKind kind = MappingKind::Loop;
  RowWidth width = RowWidth::Thread;
  int64_t domain = 0;     // elements of the dominant op's iteration space
  int64_t rows = 0;       // independent reductions (outputs of the dominant reduce); loops: domain
  int64_t rowLength = 1;  // elements reduced per row
  int64_t blocks = 1;
  int threadsPerBlock = 1;
};

struct Edge {
  int producer;  // node id
  int consumer;  // node id
  Scheme scheme;
  bool recompute = false;  // local: the consumer's threads recompute the value
};

struct Kernel {
  std::vector<int> nodes;  // node ids in topological order; no sources or inputs
  int dominant = -1;       // node id
  Mapping mapping;
  std::vector<Edge> edges;   // every producer->consumer edge inside the kernel
  std::vector<int> inputs;   // values read from global memory (graph inputs, other kernels)
  std::vector<int> outputs;  // values written to global memory
  int horizontalParts = 1;   // independent sub-kernels packed side by side (block ranges)
  // GPU: whether the lowering may split a reduction by stages (lower/split_rows.h: several
  // stages, or a per-element walk that reads the results). The planner prices the kernel both
  // ways and keeps the split only where it is cheaper: its grid barriers and repeated walks cost
  // more than they spread when the unsplit grid already fills the machine.
  bool stagedSplits = true;
  KernelSummary summary;
  KernelCost cost;
};

// Why two kernels with an edge between them were not fused, as a verdict (CutEdge::reason says
// it in words, with the sizes).
enum class CutVerdict {
  Off,         // fusion is off
  Invalid,     // the two are not one valid kernel
  Cycle,       // fusing them would make a cycle through another kernel
  DoesNotPay,  // the fused kernel would cost more than the two
  KeptApart,   // fusing the pair alone would pay, but the search's plan as a whole did better
};
std::string_view cutVerdictName(CutVerdict v);

// A producer->consumer edge between two kernels, and why it was not fused.
struct CutEdge {
  int producer;
  int consumer;
  std::string reason;
  CutVerdict verdict = CutVerdict::Invalid;
};

struct Plan {
  Mode mode = Mode::Stitch;
  std::string target;           // profile name
  ir::Bindings bindings;        // the symbol sizes it was planned for (explain prints them)
  std::vector<Kernel> kernels;  // in an order that respects dependencies
  std::vector<CutEdge> cuts;
  int candidate = 0;  // PlannerOptions::candidate: 0 is the search's pick
  double time = 0;    // s, sum of kernel times
  int64_t bytes = 0;  // global traffic of all kernels
  // The same totals for the unfused plan (one kernel per op), for comparison.
  int unfusedKernels = 0;
  double unfusedTime = 0;
  int64_t unfusedBytes = 0;
};

}  // namespace stitch::fusion
