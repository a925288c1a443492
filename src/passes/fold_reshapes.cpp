#include "passes/fold_reshapes.h"

#include <algorithm>
#include <cstdint>

#include "passes/rewriter.h"

namespace stitch::passes {

namespace {

bool isIdentityPerm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

}  // namespace

ir::Graph foldReshapes(const ir::Graph& g) {
  return rewrite(g, [](Rewriter& rw, int id) -> std::optional<int> {
    const ir::Node& n = rw.src().node(id);
    if (ir::opInfo(n.op).cls != ir::OpClass::Layout || n.op == ir::OpCode::Concat)
      return std::nullopt;
    int x = rw.mapped(n.operands[0]);
    // Every fold below keeps the operand's values; the result must then also have its type.
    bool sameType = rw.node(x).type == n.type;
    switch (n.op) {
      case ir::OpCode::Reshape: {
        if (sameType) return x;
        const ir::Node& in = rw.node(x);
        // Operands are mapped, so a chain of reshapes collapses in one pass, front to back.
        if (in.op == ir::OpCode::Reshape) {
          int root = in.operands[0];
          if (rw.node(root).type == n.type) return root;  // reshape(reshape(x)) back to x's shape
          return rw.add(ir::OpCode::Reshape, {in.operands[0]}, n.attrs, n.name);
        }
        return std::nullopt;
      }
      case ir::OpCode::BroadcastTo: return sameType ? std::optional<int>(x) : std::nullopt;
      case ir::OpCode::Transpose:
        return isIdentityPerm(n.attrs.getInts("perm")) ? std::optional<int>(x) : std::nullopt;
      case ir::OpCode::Slice: {
        const auto& starts = n.attrs.getInts("starts");
        const auto& steps = n.attrs.getInts("steps");
        bool whole = sameType &&
                     std::all_of(starts.begin(), starts.end(), [](int64_t s) { return s == 0; }) &&
                     std::all_of(steps.begin(), steps.end(), [](int64_t s) { return s == 1; });
        return whole ? std::optional<int>(x) : std::nullopt;
      }
      default: return std::nullopt;
    }
  });
}

}  // namespace stitch::passes
