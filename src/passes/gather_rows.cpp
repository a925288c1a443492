#include "passes/gather_rows.h"

#include <cstdint>
#include <limits>

#include "passes/rewriter.h"

namespace stitch::passes {

using ir::DType;
using ir::OpCode;

bool readsInputInPlace(const ir::Graph& g, int v) {
  for (;;) {
    const ir::Node& n = g.node(v);
    switch (n.op) {
      case OpCode::Input: return true;
      case OpCode::Reshape:
      case OpCode::Slice:
      case OpCode::Transpose:
      case OpCode::BroadcastTo: v = n.operands[0]; break;
      default: return false;
    }
  }
}

ir::Graph gatherRowsToReductions(const ir::Graph& g) {
  return rewrite(g, [](Rewriter& rw, int id) -> std::optional<int> {
    const ir::Node& n = rw.src().node(id);
    if (n.op != OpCode::Gather) return std::nullopt;
    auto axis = static_cast<size_t>(n.attrs.getInt("axis"));
    const ir::Node& data = rw.src().node(n.operands[0]);
    const ir::Dim& len = data.type.shape[axis];
    DType t = data.type.dtype;
    if (readsInputInPlace(rw.src(), n.operands[0]) || ir::isBool(t) ||
        !n.type.shape[axis].isOne() || !len.isStatic() || len.size == 0)
      return std::nullopt;
    int x = rw.mapped(n.operands[0]);
    int k = rw.mapped(n.operands[1]);
    // The check keeps gather's error: named after the gather, so the message points at it.
    k = rw.add(OpCode::CheckIndex, {k}, {{"size", ir::Shape{len}}},
               rw.freshName(n.name + "_index"));
    if (rw.node(k).type.dtype != DType::I64) k = rw.add(OpCode::Cast, {k}, {{"to", DType::I64}});
    int i = rw.add(
        OpCode::Iota, {},
        {{"shape", data.type.shape}, {"axis", static_cast<int64_t>(axis)}, {"dtype", DType::I64}});
    double lowest = ir::isFloat(t)    ? -std::numeric_limits<double>::infinity()
                    : t == DType::I32 ? -2147483648.0
                                      : -9223372036854775808.0;
    int picked = rw.add(OpCode::Select, {rw.add(OpCode::Eq, {i, k}), x, rw.constant(lowest, t)});
    return rw.add(OpCode::ReduceMax, {picked},
                  {{"axes", std::vector<int64_t>{static_cast<int64_t>(axis)}}, {"keepdims", true}},
                  n.name);
  });
}

}  // namespace stitch::passes
