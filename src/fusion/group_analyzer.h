// The group analysis's internals (design note in group.h), shared by its three files:
// group.cpp (the domain and where each value sits: legality; the whole analysis, run()),
// group_mapping.cpp (the mapping of the domain onto the machine, and the launch the target
// schedules for it) and group_work.cpp (the traffic, work and resources the cost model prices).
// Nothing outside them includes this header.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fusion/group.h"
#include "fusion/schedule.h"
#include "runtime/support/checked.h"
#include "runtime/support/error.h"

namespace stitch::fusion::analysis {

// How a value sits in the kernel's domain (see group.h).
// Column: a float sum or mean of a domain value over the kept axes in a row kernel, carried as
// per-worker column partials and a combine phase (lower/column_partials.h).
// Combine: an elementwise value of column results (a bf16 cast of dgamma), one per column,
// computed in the combine phase that completes them.
// Once: a single value computed from second-level results alone (a mean loss from a sum and a
// count), computed once, in the phase that completes its last barrier.
enum class Place { Elem, Row, Partial, Global, Column, Combine, Once };

inline std::string shapeText(std::span<const int64_t> s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Dims here are a planned value's (or a part of one): within kMaxTensorBytes (support/checked.h).
inline int64_t product(std::span<const int64_t> dims) {
  auto n = checkedElementCount(dims);
  STITCH_INTERNAL(n.has_value(), "dims {} were not size-checked", shapeText(dims));
  return *n;
}

// a and b are sizes (<= 2^62), so a + b - 1 cannot overflow.
inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The analysis of one connected part with one domain.
class Analyzer {
 public:
  Analyzer(const PlanContext& ctx, const std::vector<int>& nodes, bool explain)
      : ctx_(ctx), nodes_(nodes), explain_(explain), places_(nodes.size(), Place::Elem) {
    stamp_ = ++ctx.stamp;
    for (size_t i = 0; i < nodes.size(); ++i) {
      ctx.memberStamp[nodes[i]] = stamp_;
      ctx.memberPos[nodes[i]] = static_cast<uint32_t>(i);
    }
  }

  // Fills `out` and returns true, or sets reason_ and returns false.
  bool run(Kernel& out);
  const std::string& reason() const { return reason_; }

 private:
  // Membership and positions from the context's stamped scratch. Only one Analyzer is live at
  // a time (analyses never nest), so the stamp of this one is current throughout.
  bool in(int n) const { return ctx_.memberStamp[n] == stamp_; }
  size_t pos(int n) const { return ctx_.memberPos[n]; }
  Place& place(int n) { return places_[pos(n)]; }
  // Reasons are formatted only when asked for: the search rejects many candidates and only
  // needs to know that they failed.
  template <class F>
  bool fail(F&& why) {
    if (explain_) reason_ = why();
    return false;
  }
  const std::string& name(int n) const { return ctx_.graph.node(n).name; }
  bool chooseDomain();
  bool isColumnReduction(int n) const;
  bool placeNodes();
  bool placeValue(int n);
  // Whether an operand of n in this kernel is a column result (Column or Combine).
  bool readsColumn(int n) const;
  bool placeCombine(int n);
  // Whether n is computed (through values of this kernel) from one of its reductions.
  bool readsReduction(int n);
  void layOut(Kernel& k);
  // `launch`: the lowered candidate's launch (GPU profiles), or null.
  void countWork(Kernel& k, const PricedLaunch* launch);

  const PlanContext& ctx_;
  const std::vector<int>& nodes_;
  bool explain_;
  uint32_t stamp_ = 0;
  std::vector<Place> places_;  // by position in nodes_
  std::vector<bool> reads_;    // readsReduction, by position (filled on first use)
  std::string reason_;

  int dominant_ = -1;
  std::vector<int64_t> domain_;
  std::vector<bool> reduced_;  // per domain axis (size-1 axes never count as reduced)
  MappingKind kind_ = MappingKind::Loop;
  int64_t rows_ = 0, rowLength_ = 1;
  int64_t lanesPerRow_ = 1;  // threads cooperating on one row (column) of the reduction
  bool hasGlobalReduce_ = false;
};

// The launch the target schedules for k (GPU profiles), or nullopt: the mapping's own (host).
std::optional<PricedLaunch> scheduledLaunch(const PlanContext& ctx, const Kernel& k);
// k's grid, block and barriers from the launch that runs.
void applyLaunch(Kernel& k, const PricedLaunch& launch);
// The stitch scheme a mapping's width gives its internal edges.
Scheme communicationScheme(const Mapping& m);

}  // namespace stitch::fusion::analysis
