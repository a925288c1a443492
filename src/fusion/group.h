// Group analysis: can a set of ops run as one kernel, and how?
//
// Three files, one concern each (group_analyzer.h holds what they share): group.cpp decides the
// domain and where each value sits in it (legality) and runs the analysis; group_mapping.cpp maps
// the domain onto the machine and asks the target for the launch (fusion/schedule.h);
// group_work.cpp counts the traffic, work and resources the cost model prices.
//
// This is the planner's single oracle (nvFuser's canSchedule + computeHeuristics in one). Given
// the ops of a candidate kernel it picks the dominant op (the reduction with the largest input,
// else the largest op), takes its iteration space as the kernel's domain, and places every op
// in it:
//   elem     the value has the domain's shape, or its size in other coordinates (a row-major
//            reshape of it: GroupNorm's [N, 256, 16, 16] over a [N, 32, 2048] domain): one per
//            element, evaluated at the domain position's flat index;
//   row      constant along the reduced axes: one per row, broadcast to the row's threads;
//   partial  a broadcast operand computed in the kernel (varies along some reduced axes but not
//            per element), or a smaller value that fits no axis of the domain (a per-channel
//            value over the reshaped view, a half of a concat): each consumer thread recomputes
//            it at its own index (local scheme, recompute);
//   global   a second-level reduction of row values to a scalar (grid barrier);
//   once     a single value computed from global results alone (a mean loss): computed once, in
//            the phase that completes its last barrier;
//   column   a float sum or mean over the kept axes of a row kernel's domain, carried as
//            per-worker partials (lower/column_partials.h);
//   combine  an elementwise value of column results (a bf16 cast of dgamma), computed per column
//            in the combine phase that completes them; a value needing a column result at every
//            element is not one kernel with it.
// Reductions must match the dominant's domain and axes (or be second-level). The lowering reads
// a reduction's result as the current row's whatever the index, so a value computed from a
// reduction of the kernel may only be read in the domain's coordinates: not as a smaller value
// that fits no axis of the domain, not broadcast into a value in other coordinates, not moved
// by transpose, slice or concat (those recompute in-kernel operands at their own index
// arithmetic otherwise: rotary embeddings' halves). Gather must read its data from global
// memory: staging an in-kernel value through a shared-memory tile is not formed by this
// planner. A set whose ops split into independent parts is packed horizontally when every part
// is a valid kernel on its own.
// The result carries the mapping, the scheme of every internal edge, the traffic and work
// (KernelSummary) and its cost; or the reason it cannot be one kernel. On a GPU profile the
// target's Scheduler lowers and schedules the candidate (fusion/schedule.h), so that its grid and
// block are the launch the emitter will use, and that is what the cost prices.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fusion/hardware.h"
#include "fusion/op_class.h"
#include "fusion/plan.h"
#include "fusion/schedule.h"
#include "ir/graph.h"
#include "ir/shape.h"

namespace stitch::fusion {

// What the analysis needs to know about a graph, computed once per plan.
class PlanContext {
 public:
  PlanContext(const ir::Graph& g, const ir::Bindings& bindings, const HardwareProfile& hw,
              Mode mode, const Scheduler* scheduler);

  const ir::Graph& graph;
  const HardwareProfile& hw;
  Mode mode;
  const Scheduler* scheduler;  // the target's (schedule.h); may be null for a host profile
  std::vector<std::vector<int64_t>> shapes;  // concrete, per node
  std::vector<int64_t> numel;
  std::vector<int64_t> bytes;  // numel * dtype size
  std::vector<OpKind> kinds;
  std::vector<std::vector<int>> consumers;  // op consumers, per node
  // Every node's operands, flat (the search's hot loops walk them): node n's i-th operand is
  // operandList[operandStart[n] + i], for i below operandStart[n + 1] - operandStart[n] (one
  // start more than nodes). n stands at consumerIndex[operandStart[n] + i] among that
  // operand's consumers (the search's sibling lookup).
  std::vector<uint32_t> operandStart, consumerIndex;
  std::vector<int> operandList;
  std::span<const int> operandsOf(int n) const {
    return {operandList.data() + operandStart[n], operandStart[n + 1] - operandStart[n]};
  }
  std::vector<bool> isOutput;
  std::vector<bool> live;  // some graph output depends on it
  // Nodes that need a kernel: live ops, plus sources that are graph outputs.
  std::vector<int> planned;
  bool needsKernel(int node) const;

  // Scratch for the analysis: which nodes belong to the group being analyzed (a stamp per
  // analysis) and where. Makes membership O(1); a context is used by one thread at a time.
  mutable std::vector<uint32_t> memberStamp;
  mutable std::vector<uint32_t> memberPos;
  mutable uint32_t stamp = 0;
};

struct GroupResult {
  bool valid = false;
  std::string reason;  // when !valid
  Kernel kernel;       // when valid
};

// Analyzes the kernel made of `nodes` (ids of nodes needing kernels, any order). With explain
// false an invalid result carries no reason (the search only needs the verdict, and formatting
// reasons for every rejected candidate would dominate planning time).
GroupResult analyzeGroup(const PlanContext& ctx, std::vector<int> nodes, bool explain = true);

}  // namespace stitch::fusion
