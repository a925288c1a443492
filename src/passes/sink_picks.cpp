#include "passes/sink_picks.h"

#include <cstdint>
#include <unordered_map>

#include "passes/gather_rows.h"
#include "passes/rewriter.h"

namespace stitch::passes {

namespace {

using ir::DType;
using ir::OpClass;
using ir::OpCode;
using ir::Shape;

bool isElementwise(OpCode op) {
  OpClass c = ir::opInfo(op).cls;
  return c == OpClass::Unary || c == OpClass::Binary || c == OpClass::Select || c == OpClass::Cast;
}

// Evaluates old values at a pick along `axis` of the shape `full` they broadcast to: `index` (a
// new value of the picked shape, `full` but along `axis`) says which element of each row.
class Sinker {
 public:
  Sinker(Rewriter& rw, const Shape& full, size_t axis) : rw_(rw), full_(full), axis_(axis) {}

  // True when old value v has size 1 along the axis (or lacks it): the pick is v itself.
  bool perRow(int v) const {
    const Shape& s = rw_.src().node(v).type.shape;
    auto lead = full_.size() - s.size();  // v's dims align with full's last s.size()
    return axis_ < lead || s[axis_ - lead].isOne();
  }

  // Whether the pick of old value v can be computed without v in memory.
  bool sinkable(int v) {
    if (auto it = sinkable_.find(v); it != sinkable_.end()) return it->second;
    const ir::Node& n = rw_.src().node(v);
    bool ok = perRow(v) || readsInputInPlace(rw_.src(), v);
    if (!ok && isElementwise(n.op)) {
      ok = true;
      for (int o : n.operands) ok = ok && sinkable(o);
    }
    return sinkable_[v] = ok;
  }

  // The pick of sinkable old value v, not per row, at `index`, named `name` (fresh when empty).
  // It has index's shape: an elementwise value full along the axis has an operand that is.
  int build(int v, int index, const std::string& name = {}) {
    if (auto it = built_.find(v); it != built_.end()) return it->second;
    const ir::Node& n = rw_.src().node(v);
    if (isElementwise(n.op)) {
      std::vector<int> operands;
      for (int o : n.operands) operands.push_back(perRow(o) ? rw_.mapped(o) : build(o, index));
      return built_[v] = rw_.add(n.op, std::move(operands), n.attrs, name);
    }
    // A view of an input: read in place, at the index.
    int x = rw_.mapped(v);
    if (!(n.type.shape == full_)) x = rw_.add(OpCode::BroadcastTo, {x}, {{"shape", full_}});
    return built_[v] =
               rw_.add(OpCode::Gather, {x, index}, {{"axis", static_cast<int64_t>(axis_)}}, name);
  }

 private:
  Rewriter& rw_;
  const Shape& full_;
  size_t axis_;
  std::unordered_map<int, bool> sinkable_;
  std::unordered_map<int, int> built_;
};

// The conjuncts of a logical_and tree.
void conjuncts(const ir::Graph& g, int v, std::vector<int>& out) {
  const ir::Node& n = g.node(v);
  if (n.op == OpCode::LogicalAnd) {
    conjuncts(g, n.operands[0], out);
    conjuncts(g, n.operands[1], out);
  } else {
    out.push_back(v);
  }
}

bool isZero(const ir::Node& n) {
  return n.op == OpCode::Constant && n.attrs.getFloat("value") == 0.0;
}

// Whether old value k is checked to lie in [0, n) before anything reads it: a check_index of size
// n, through casts.
bool checkedBelow(const ir::Graph& g, int k, const ir::Dim& n) {
  const ir::Node* node = &g.node(k);
  while (node->op == OpCode::Cast) node = &g.node(node->operands[0]);
  return node->op == OpCode::CheckIndex && node->attrs.getDims("size").at(0) == n;
}

// A one-hot pick, reduce_sum(select(and(eq(iota, k), masks...), v, 0), axes=[a]), as the header
// describes; nullopt when node `id` is not one or v does not sink.
std::optional<int> sinkPick(Rewriter& rw, int id) {
  const ir::Graph& g = rw.src();
  const ir::Node& n = g.node(id);
  if (n.op != OpCode::ReduceSum || n.attrs.getInts("axes").size() != 1) return std::nullopt;
  const ir::Node& sel = g.node(n.operands[0]);
  if (sel.op != OpCode::Select || !isZero(g.node(sel.operands[2])) || ir::isBool(sel.type.dtype))
    return std::nullopt;
  const Shape& full = sel.type.shape;
  auto axis = static_cast<size_t>(n.attrs.getInts("axes")[0]);
  Sinker sink(rw, full, axis);
  std::vector<int> terms;
  conjuncts(g, sel.operands[0], terms);
  int k = -1;
  std::vector<int> masks;  // per-row conjuncts
  for (int c : terms) {
    const ir::Node& t = g.node(c);
    if (sink.perRow(c)) {
      masks.push_back(c);
      continue;
    }
    if (t.op != OpCode::Eq || k >= 0) return std::nullopt;
    for (int side = 0; side < 2 && k < 0; ++side) {
      const ir::Node& i = g.node(t.operands[side]);
      int other = t.operands[1 - side];
      if (i.op == OpCode::Iota && i.type.shape == full &&
          static_cast<size_t>(i.attrs.getInt("axis")) == axis && sink.perRow(other))
        k = other;
    }
    if (k < 0) return std::nullopt;
  }
  // A float k (an f32 iota compared with a float) picks only at integral values: not a gather.
  int v = sel.operands[1];
  if (k < 0 || !ir::isInt(g.node(k).type.dtype) || sink.perRow(v) || !sink.sinkable(v))
    return std::nullopt;

  // The index, in [0, n): checked before, or clamped where the mask then discards the value.
  const ir::Dim& len = full[axis];
  DType kt = g.node(k).type.dtype;
  int index = rw.mapped(k);
  std::vector<int> keep;
  for (int m : masks) keep.push_back(rw.mapped(m));
  if (!checkedBelow(g, k, len)) {
    if (!len.isStatic()) return std::nullopt;
    int in = rw.add(OpCode::LogicalAnd,
                    {rw.add(OpCode::Ge, {index, rw.constant(0, kt)}),
                     rw.add(OpCode::Lt, {index, rw.constant(static_cast<double>(len.size), kt)})});
    keep.push_back(in);
    index = rw.add(OpCode::Select, {in, index, rw.constant(0, kt)});
  }
  Shape picked = full;
  picked[axis] = ir::Dim::of(1);
  if (!(rw.node(index).type.shape == picked))
    index = rw.add(OpCode::BroadcastTo, {index}, {{"shape", picked}});

  // The last node takes the reduction's name.
  bool keepdims = n.attrs.getBool("keepdims");
  int r = sink.build(v, index, keep.empty() && keepdims ? n.name : std::string());
  if (!keep.empty()) {
    int mask = keep[0];
    for (size_t i = 1; i < keep.size(); ++i) mask = rw.add(OpCode::LogicalAnd, {mask, keep[i]});
    r = rw.add(OpCode::Select, {mask, r, rw.constant(0, sel.type.dtype)}, {},
               keepdims ? n.name : std::string());
  }
  if (keepdims) return r;
  Shape out = full;
  out.erase(out.begin() + static_cast<std::ptrdiff_t>(axis));
  return rw.add(OpCode::Reshape, {r}, {{"shape", out}}, n.name);
}

// gather(v, k) of an elementwise v: the gather moves to v's leaves (header).
std::optional<int> sinkGather(Rewriter& rw, int id) {
  const ir::Graph& g = rw.src();
  const ir::Node& n = g.node(id);
  if (n.op != OpCode::Gather || !isElementwise(g.node(n.operands[0]).op)) return std::nullopt;
  const Shape& full = g.node(n.operands[0]).type.shape;
  auto axis = static_cast<size_t>(n.attrs.getInt("axis"));
  Sinker sink(rw, full, axis);
  int v = n.operands[0];
  if (sink.perRow(v) || !sink.sinkable(v)) return std::nullopt;
  // The gather's own check stays, named after it, so a bad index names the gather.
  int index = rw.add(OpCode::CheckIndex, {rw.mapped(n.operands[1])}, {{"size", Shape{full[axis]}}},
                     rw.freshName(n.name + "_index"));
  return sink.build(v, index, n.name);
}

}  // namespace

ir::Graph sinkPicks(const ir::Graph& g) {
  return rewrite(g, [](Rewriter& rw, int id) -> std::optional<int> {
    if (auto r = sinkPick(rw, id)) return r;
    return sinkGather(rw, id);
  });
}

}  // namespace stitch::passes
