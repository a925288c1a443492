#include "fusion/group.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <span>

#include "fusion/cost_model.h"
#include "fusion/group_analyzer.h"
#include "fusion/schedule.h"
#include "ir/signature.h"
#include "runtime/support/checked.h"
#include "runtime/support/error.h"

namespace stitch::fusion {

using ir::OpCode;

PlanContext::PlanContext(const ir::Graph& g, const ir::Bindings& bindings,
                         const HardwareProfile& profile, Mode m, const Scheduler* s)
    : graph(g), hw(profile), mode(m), scheduler(s) {
  shapes = ir::concreteShapes(g, bindings);
  size_t n = g.nodes().size();
  numel.resize(n);
  bytes.resize(n);
  kinds.resize(n);
  consumers.resize(n);
  isOutput.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = g.nodes()[i];
    // bindInputs (or the planning entry points) checked the sizes; a caller that did not gets an
    // error here, not a wrapped count (a negative count once made chooseDomain index shapes[-1]).
    TensorSize size =
        requireTensorSize(shapes[i], ir::dtypeBytes(node.type.dtype),
                          fmt::format("value '{}'", node.name), ErrorCode::ShapeMismatch);
    numel[i] = size.elements;
    bytes[i] = size.bytes;
    kinds[i] = classify(node.op);
    operandStart.push_back(static_cast<uint32_t>(consumerIndex.size()));
    for (int o : node.operands) {
      if (consumers[o].empty() || consumers[o].back() != static_cast<int>(i))
        consumers[o].push_back(static_cast<int>(i));
      consumerIndex.push_back(static_cast<uint32_t>(consumers[o].size() - 1));
      operandList.push_back(o);
    }
  }
  operandStart.push_back(static_cast<uint32_t>(operandList.size()));
  for (int o : g.outputs()) isOutput[o] = true;
  // Values no output depends on are not planned (the passes remove them anyway).
  live.assign(n, false);
  for (int o : g.outputs()) live[o] = true;
  for (size_t i = n; i-- > 0;)
    if (live[i])
      for (int o : g.nodes()[i].operands) live[o] = true;
  for (size_t i = 0; i < n; ++i)
    if (needsKernel(static_cast<int>(i))) planned.push_back(static_cast<int>(i));
  memberStamp.assign(n, 0);
  memberPos.assign(n, 0);
}

bool PlanContext::needsKernel(int node) const {
  if (!live[node]) return false;
  OpKind k = kinds[node];
  if (k == OpKind::Input) return false;
  if (k == OpKind::Source) return isOutput[node];  // otherwise computed in place by its users
  return true;
}

namespace analysis {

bool Analyzer::chooseDomain() {
  // The reduction with the largest input; of equal ones a row reduction, so that column
  // reductions of the same data are carried beside it as column partials (lowering picks alike).
  int64_t best = -1;
  bool bestRow = false;
  for (int n : nodes_) {
    if (ctx_.kinds[n] != OpKind::Reduce) continue;
    const ir::Node& r = ctx_.graph.node(n);
    int64_t size = ctx_.numel[r.operands[0]];
    bool row = reduceKind(ctx_.shapes[r.operands[0]], r.attrs.getInts("axes")) == ReduceKind::Row;
    if (size > best || (size == best && row && !bestRow)) best = size, bestRow = row, dominant_ = n;
  }
  if (dominant_ >= 0) {
    const ir::Node& d = ctx_.graph.node(dominant_);
    domain_ = ctx_.shapes[d.operands[0]];
    reduced_.assign(domain_.size(), false);
    for (int64_t a : d.attrs.getInts("axes"))
      if (domain_[a] != 1) reduced_[a] = true;
    std::vector<int64_t> axes;
    for (size_t i = 0; i < domain_.size(); ++i)
      if (reduced_[i]) axes.push_back(static_cast<int64_t>(i));
    rowLength_ = 1;
    for (size_t i = 0; i < domain_.size(); ++i)
      if (reduced_[i]) rowLength_ *= domain_[i];
    rows_ = product(domain_) / std::max<int64_t>(rowLength_, 1);
    switch (reduceKind(domain_, axes)) {
      case ReduceKind::Row: kind_ = MappingKind::RowReduce; break;
      case ReduceKind::Column: kind_ = MappingKind::ColumnReduce; break;
      case ReduceKind::Middle: kind_ = MappingKind::MiddleReduce; break;
      case ReduceKind::All: kind_ = MappingKind::AllReduce; break;
    }
    return true;
  }
  for (int n : nodes_)
    if (ctx_.numel[n] > best) best = ctx_.numel[n], dominant_ = n;
  domain_ = ctx_.shapes[dominant_];
  reduced_.assign(domain_.size(), false);
  rows_ = product(domain_);
  rowLength_ = 1;
  kind_ = MappingKind::Loop;
  return true;
}

// Places a non-reduction value by its shape relative to the domain.
bool Analyzer::placeValue(int n) {
  const std::vector<int64_t>& s = ctx_.shapes[n];
  int64_t total = product(domain_);
  size_t rank = domain_.size();
  bool aligned = s.size() <= rank || std::all_of(s.begin(), s.end() - static_cast<long>(rank),
                                                 [](int64_t d) { return d == 1; });
  bool variesAll = true, variesReduced = false;
  for (size_t i = 0; aligned && i < rank; ++i) {
    int64_t sd = i + s.size() >= rank ? s[i + s.size() - rank] : 1;
    if (sd == domain_[i]) {
      if (domain_[i] != 1 && reduced_[i]) variesReduced = true;
      continue;
    }
    if (sd != 1) aligned = false;
    else if (domain_[i] != 1) variesAll = false;
  }
  if (aligned) {
    if (variesAll) place(n) = Place::Elem;
    else if (kind_ != MappingKind::Loop && !variesReduced) place(n) = Place::Row;
    else place(n) = Place::Partial;
    return true;
  }
  // A value of the domain's size in other coordinates (GroupNorm's [N, 256, 16, 16] view of a
  // [N, 32, 2048] domain) is evaluated at the domain position's flat index: reshape keeps the
  // flat index, and an elementwise op or broadcast_to of this size reads its full-size operands
  // at the same flat index, so those belong to the position's row under any mapping. Its
  // smaller operands are read in its own coordinates, which say nothing about rows: they must
  // not be computed from a reduction of the kernel, whose result is the current row's whatever
  // the index (a broadcast of a row value to the domain's size in other coordinates is not
  // the position's row: [N, 2, 2] reduced over axis 1 and a per-row value broadcast to
  // [2, N, 1, 2]).
  if (ctx_.numel[n] == total) {
    for (int o : ctx_.graph.node(n).operands)
      if (in(o) && ctx_.numel[o] < total && (ctx_.kinds[o] == OpKind::Reduce || readsReduction(o)))
        return fail([&] {
          return fmt::format(
              "{} has shape {}, the size of the kernel's domain {} in other coordinates, and "
              "broadcasts {} ({}), which is computed from a reduction of the kernel: its index "
              "there does not name the row",
              name(n), shapeText(s), shapeText(domain_), name(o), shapeText(ctx_.shapes[o]));
        });
    place(n) = Place::Elem;
    return true;
  }
  // The dominant's result without keepdims: the kept dims in order, one value per row.
  if (kind_ != MappingKind::Loop && ctx_.numel[n] == rows_) {
    std::vector<int64_t> kept;
    for (size_t i = 0; i < rank; ++i)
      if (!reduced_[i]) kept.push_back(domain_[i]);
    std::vector<int64_t> a, b;
    for (int64_t d : kept)
      if (d != 1) a.push_back(d);
    for (int64_t d : s)
      if (d != 1) b.push_back(d);
    if (a == b) {
      place(n) = Place::Row;
      return true;
    }
  }
  // A smaller value that fits no axis of the domain: a broadcast operand of a reshaped value
  // (gamma [256, 1, 1] over the [N, 256, 16, 16] view of a [N, 32, 2048] domain), a half of a
  // concat or a slice. Each consumer evaluates it at its own index (recompute), which is right
  // for any index as long as nothing it reads is a reduction of this kernel: a reduction's
  // result is read as the current row's accumulator whatever the index, and the index of such
  // a value says nothing about which row it belongs to.
  if (ctx_.numel[n] < total && !readsReduction(n)) {
    place(n) = Place::Partial;
    return true;
  }
  return fail([&] {
    return fmt::format(
        "{} has shape {}, which does not fit the kernel's domain {}{}", name(n), shapeText(s),
        shapeText(domain_),
        ctx_.numel[n] < total ? " and is computed from a reduction of the kernel" : "");
  });
}

// A float sum or mean of a domain-shaped value over exactly the kept axes of a row kernel: the
// form lower/kernel_program.cpp carries as column partials.
bool Analyzer::isColumnReduction(int n) const {
  const ir::Node& node = ctx_.graph.node(n);
  if (kind_ != MappingKind::RowReduce || !ir::isFloat(node.type.dtype) ||
      (node.op != OpCode::ReduceSum && node.op != OpCode::ReduceMean) ||
      ctx_.shapes[node.operands[0]] != domain_)
    return false;
  std::vector<bool> mask(domain_.size(), false);
  for (int64_t a : node.attrs.getInts("axes")) mask[static_cast<size_t>(a)] = true;
  for (size_t a = 0; a < domain_.size(); ++a)
    if (domain_[a] != 1 && mask[a] == reduced_[a]) return false;
  return true;
}

bool Analyzer::readsColumn(int n) const {
  for (int o : ctx_.graph.node(n).operands)
    if (in(o) && (places_[pos(o)] == Place::Column || places_[pos(o)] == Place::Combine))
      return true;
  return false;
}

// A value read from a column result runs in the combine phase, one unit per column
// (lower/column_partials.h): after the rows, where a column's partials meet. That phase has the
// column results and the kernel's inputs, nothing the row walk computed. So the value must be
// elementwise in the column results' coordinates (their size: an operand of that size is then
// read at the same flat index, NumPy's broadcasting cannot stretch it), and its other operands
// column results too, or values recomputed from the inputs at its index (a cast of gamma).
bool Analyzer::placeCombine(int n) {
  const ir::Node& node = ctx_.graph.node(n);
  int column = -1;
  for (int o : node.operands)
    if (in(o) && (place(o) == Place::Column || place(o) == Place::Combine)) column = o;
  const OpKind k = ctx_.kinds[n];
  if ((k != OpKind::Cheap && k != OpKind::Expensive && k != OpKind::Reshape) ||
      ctx_.numel[n] != rowLength_)
    return fail([&] {
      return fmt::format(
          "{} ({}, {}) reads {}, a column reduction's result, which is complete only after every "
          "row: only elementwise values of its {} columns run in the combine phase that "
          "completes it",
          name(n), ir::opName(node.op), shapeText(ctx_.shapes[n]), name(column), rowLength_);
    });
  for (int o : node.operands) {
    if (!in(o) || place(o) == Place::Column || place(o) == Place::Combine) continue;
    if (place(o) == Place::Partial && !readsReduction(o)) continue;  // recomputed per column
    return fail([&] {
      return fmt::format(
          "{} combines {}, a column reduction's result, with {}, a value of the kernel's row "
          "walk: the combine phase runs after the rows and has only the column results and the "
          "kernel's inputs",
          name(n), name(column), name(o));
    });
  }
  place(n) = Place::Combine;
  return true;
}

bool Analyzer::readsReduction(int n) {
  if (reads_.empty()) {
    // nodes_ is in topological order (ids), so operands come first.
    reads_.assign(nodes_.size(), false);
    for (int m : nodes_)
      for (int o : ctx_.graph.node(m).operands)
        if (in(o) && (ctx_.kinds[o] == OpKind::Reduce || reads_[pos(o)])) reads_[pos(m)] = true;
  }
  return reads_[pos(n)];
}

bool Analyzer::placeNodes() {
  const ir::Node& dom = ctx_.graph.node(dominant_);
  for (int n : nodes_) {
    const ir::Node& node = ctx_.graph.node(n);
    OpKind k = ctx_.kinds[n];
    if (k == OpKind::Composite && nodes_.size() > 1)
      return fail([&] {
        return fmt::format("{} ({}) is a composite; it is planned alone until decomposed",
                           node.name, ir::opName(node.op));
      });
    // Transpose, slice, concat and gather read their operands elsewhere than their own index
    // (gather at a computed one along its axis): an operand computed in the kernel is
    // recomputed there (a rotary embedding's halves, a gathered view of an input), unless it is
    // computed from a reduction of the kernel, whose result is the current row's whatever the
    // index (see placeValue). Gather's index operand is read where the gather is. Staging
    // through a shared-memory tile is not formed.
    if (k == OpKind::DataMovement)
      for (int o :
           node.op == OpCode::Gather ? std::span(node.operands).first(1) : std::span(node.operands))
        if (in(o) && (ctx_.kinds[o] == OpKind::Reduce || readsReduction(o)))
          return fail([&] {
            return fmt::format(
                "{} ({}) would {} {} from this kernel's registers, and it is computed from a "
                "reduction; staging it through a shared-memory tile is not formed by this planner",
                node.name, ir::opName(node.op), node.op == OpCode::Gather ? "gather" : "move",
                name(o));
          });
    if (k != OpKind::Reduce && readsColumn(n)) {
      if (!placeCombine(n)) return false;
      continue;
    }
    if (k != OpKind::Reduce && ctx_.numel[n] == 1) {
      bool global = false, rows = false;
      for (int o : node.operands) {
        if (!in(o)) continue;
        if (place(o) == Place::Global || place(o) == Place::Once) global = true;
        else rows = true;
      }
      if (global && !rows) {
        place(n) = Place::Once;
        continue;
      }
    }
    if (k != OpKind::Reduce) {
      if (!placeValue(n)) return false;
      continue;
    }
    int input = node.operands[0];
    bool sameDomain = ctx_.shapes[input] == domain_;
    bool sameAxes = sameDomain;
    if (sameDomain) {
      std::vector<bool> r(domain_.size(), false);
      for (int64_t a : node.attrs.getInts("axes"))
        if (domain_[a] != 1) r[a] = true;
      sameAxes = r == reduced_;
    }
    if (n == dominant_ || sameAxes) {
      if (in(input) && place(input) != Place::Elem)
        return fail([&] {
          return fmt::format("{} reduces {}, which is not one value per element", node.name,
                             name(input));
        });
      place(n) = Place::Row;
      continue;
    }
    // A column reduction beside a row reduction of the same domain (lower/column_partials.h).
    if (isColumnReduction(n)) {
      if (ctx_.mode != Mode::Stitch)
        return fail([&] {
          return fmt::format("{} mode does not stitch a column reduction into a row kernel",
                             modeName(ctx_.mode));
        });
      if (in(input) && place(input) != Place::Elem)
        return fail([&] {
          return fmt::format("{} reduces {}, which is not one value per element", node.name,
                             name(input));
        });
      place(n) = Place::Column;
      continue;
    }
    // A second-level reduction: every row's value combined into one (a grid barrier).
    if (in(input) && place(input) == Place::Row && ctx_.numel[n] == 1 &&
        kind_ != MappingKind::Loop) {
      if (ctx_.mode != Mode::Stitch)
        return fail([&] {
          return fmt::format("{} mode does not stitch across a grid barrier", modeName(ctx_.mode));
        });
      place(n) = Place::Global;
      hasGlobalReduce_ = true;
      continue;
    }
    return fail([&] {
      return fmt::format("{} reduces {} over other axes than the kernel's dominant {} ({})",
                         node.name, shapeText(ctx_.shapes[input]), dom.name, shapeText(domain_));
    });
  }
  return true;
}

bool Analyzer::run(Kernel& k) {
  if (ctx_.mode == Mode::Off && nodes_.size() > 1)
    return fail([] { return std::string("fusion is off (STITCH_FUSION=off): one kernel per op"); });
  chooseDomain();
  if (!placeNodes()) return false;
  int reductions = 0;
  for (int n : nodes_) reductions += ctx_.kinds[n] == OpKind::Reduce;
  if (ctx_.mode == Mode::Basic && reductions > 1)
    return fail([] { return std::string("basic mode allows one reduction per kernel"); });

  k.nodes = nodes_;
  k.dominant = dominant_;
  k.edges.reserve(2 * nodes_.size());
  k.inputs.reserve(nodes_.size());
  layOut(k);
  // Edges and their schemes.
  const ir::Graph& g = ctx_.graph;
  for (int c : nodes_) {
    size_t first = k.edges.size();  // this consumer's edges start here
    for (int p : g.node(c).operands) {
      if (!in(p)) continue;
      // An operand used twice (mul(x, x)) is one edge.
      if (std::any_of(k.edges.begin() + static_cast<long>(first), k.edges.end(),
                      [&](const Edge& e) { return e.producer == p; }))
        continue;
      Edge e{p, c, Scheme::Local, false};
      // A column result is read in registers of the combine phase that completes it; placement
      // admitted only consumers that run there.
      STITCH_INTERNAL(place(p) != Place::Column || place(c) == Place::Combine,
                      "{} reads column reduction {} outside the combine phase", name(c), name(p));
      if (ctx_.kinds[p] == OpKind::Reduce && place(p) != Place::Column) {
        if (ctx_.mode == Mode::Basic)
          return fail([&] {
            return fmt::format("basic mode: the consumers of reduction {} start a new kernel",
                               name(p));
          });
        e.scheme = place(p) == Place::Global ? Scheme::Global : communicationScheme(k.mapping);
      } else if (place(p) == Place::Partial) {
        e.recompute = true;
      }
      k.edges.push_back(e);
    }
  }
  // Inputs and outputs of the kernel.
  for (int n : nodes_)
    for (int o : g.node(n).operands)
      if (!in(o) && ctx_.kinds[o] != OpKind::Source &&
          std::find(k.inputs.begin(), k.inputs.end(), o) == k.inputs.end())
        k.inputs.push_back(o);
  for (int n : nodes_) {
    bool escapes = ctx_.isOutput[n];
    for (int c : ctx_.consumers[n]) escapes = escapes || (!in(c) && ctx_.live[c]);
    if (!escapes) continue;
    if (place(n) == Place::Partial)
      return fail([&] {
        return fmt::format(
            "{} ({}) is smaller than the kernel's domain {} and varies along "
            "its reduced axes: no thread owns its store",
            name(n), shapeText(ctx_.shapes[n]), shapeText(domain_));
      });
    k.outputs.push_back(n);
  }
  // A split by stages is a choice of the kernel (Kernel::stagedSplits): priced both ways, the
  // cheaper kept.
  Kernel unstaged;
  std::optional<PricedLaunch> launch = scheduledLaunch(ctx_, k);
  if (launch && launch->staged) {
    unstaged = k;
    unstaged.stagedSplits = false;
  }
  countWork(k, launch ? &*launch : nullptr);
  if (launch) applyLaunch(k, *launch);
  k.cost = estimateKernel(k.summary, ctx_.hw);
  if (!unstaged.stagedSplits) {
    launch = scheduledLaunch(ctx_, unstaged);
    countWork(unstaged, launch ? &*launch : nullptr);
    if (launch) applyLaunch(unstaged, *launch);
    unstaged.cost = estimateKernel(unstaged.summary, ctx_.hw);
    if (unstaged.cost.feasible && (!k.cost.feasible || unstaged.cost.time < k.cost.time))
      k = std::move(unstaged);
  }
  if (!k.cost.feasible) return fail([&] { return k.cost.infeasibleReason; });
  return true;
}

// Splits nodes into parts connected by producer->consumer edges inside the set.
// `nodes` is sorted; union-find over positions.
std::vector<std::vector<int>> connectedParts(const PlanContext& ctx,
                                             const std::vector<int>& nodes) {
  std::vector<size_t> parent(nodes.size());
  std::iota(parent.begin(), parent.end(), size_t{0});
  auto find = [&](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (size_t i = 0; i < nodes.size(); ++i)
    for (int o : ctx.graph.node(nodes[i]).operands) {
      auto it = std::lower_bound(nodes.begin(), nodes.end(), o);
      if (it != nodes.end() && *it == o)
        parent[find(static_cast<size_t>(it - nodes.begin()))] = find(i);
    }
  std::vector<std::vector<int>> out;
  std::vector<int> partOf(nodes.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    size_t r = find(i);
    if (partOf[r] < 0) {
      partOf[r] = static_cast<int>(out.size());
      out.emplace_back();
    }
    out[partOf[r]].push_back(nodes[i]);
  }
  return out;
}

// Packs independent kernels side by side in one launch: block ranges, one launch overhead.
Kernel packHorizontally(const PlanContext& ctx, std::vector<Kernel> parts) {
  Kernel k;
  size_t biggest = 0;
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i].mapping.domain > parts[biggest].mapping.domain) biggest = i;
  k.dominant = parts[biggest].dominant;
  k.mapping = parts[biggest].mapping;
  k.horizontalParts = static_cast<int>(parts.size());
  // The parts were priced each with or without its split by stages; one flag serves them all.
  for (const Kernel& p : parts) k.stagedSplits = k.stagedSplits && p.stagedSplits;
  KernelSummary& s = k.summary;
  s.blocks = 0;
  s.threadsPerBlock = 0;
  s.registersPerThread = 0;
  for (const Kernel& p : parts) {
    k.nodes.insert(k.nodes.end(), p.nodes.begin(), p.nodes.end());
    k.edges.insert(k.edges.end(), p.edges.begin(), p.edges.end());
    for (int i : p.inputs)
      if (std::find(k.inputs.begin(), k.inputs.end(), i) == k.inputs.end()) k.inputs.push_back(i);
    k.outputs.insert(k.outputs.end(), p.outputs.begin(), p.outputs.end());
    const KernelSummary& q = p.summary;
    s.bytesRead = saturatingAdd(s.bytesRead, q.bytesRead);
    s.bytesWritten = saturatingAdd(s.bytesWritten, q.bytesWritten);
    s.cheapOps = saturatingAdd(s.cheapOps, q.cheapOps);
    s.expensiveOps = saturatingAdd(s.expensiveOps, q.expensiveOps);
    s.recomputeCheapOps = saturatingAdd(s.recomputeCheapOps, q.recomputeCheapOps);
    s.recomputeExpensiveOps = saturatingAdd(s.recomputeExpensiveOps, q.recomputeExpensiveOps);
    s.blocks = saturatingAdd(s.blocks, q.blocks);
    s.threadsPerBlock = std::max(s.threadsPerBlock, q.threadsPerBlock);
    s.sharedMemoryPerBlock = std::max(s.sharedMemoryPerBlock, q.sharedMemoryPerBlock);
    s.registersPerThread = std::max(s.registersPerThread, q.registersPerThread);
    s.blockSyncs = std::max(s.blockSyncs, q.blockSyncs);
    s.gridSyncs += q.gridSyncs;
  }
  std::sort(k.nodes.begin(), k.nodes.end());
  k.mapping.blocks = s.blocks;
  if (const std::optional<PricedLaunch> launch = scheduledLaunch(ctx, k)) applyLaunch(k, *launch);
  k.cost = estimateKernel(s, ctx.hw);
  return k;
}

}  // namespace analysis

using analysis::Analyzer;
using analysis::connectedParts;
using analysis::packHorizontally;

GroupResult analyzeGroup(const PlanContext& ctx, std::vector<int> nodes, bool explain) {
  if (!std::is_sorted(nodes.begin(), nodes.end())) std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  STITCH_INTERNAL(!nodes.empty(), "empty kernel");
  GroupResult r;
  Analyzer whole(ctx, nodes, explain);
  if (whole.run(r.kernel)) {
    r.valid = true;
    return r;
  }
  r.reason = whole.reason();
  if (ctx.mode == Mode::Off) return r;
  std::vector<std::vector<int>> parts = connectedParts(ctx, nodes);
  if (parts.size() < 2) return r;
  // Independent parts: a horizontal kernel if each part is a kernel on its own.
  std::vector<Kernel> kernels;
  for (const std::vector<int>& part : parts) {
    Kernel k;
    Analyzer a(ctx, part, explain);
    if (!a.run(k)) {
      r.reason = a.reason();
      return r;
    }
    kernels.push_back(std::move(k));
  }
  r.kernel = packHorizontally(ctx, std::move(kernels));
  if (!r.kernel.cost.feasible) {
    r.reason = r.kernel.cost.infeasibleReason;
    return r;
  }
  r.valid = true;
  r.reason.clear();
  return r;
}

}  // namespace stitch::fusion
