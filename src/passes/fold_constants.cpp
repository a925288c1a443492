#include "passes/fold_constants.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "passes/rewriter.h"
#include "reference/interpreter.h"

namespace stitch::passes {

namespace {

using ir::OpCode;

// Operands bigger than this are not evaluated at compile time.
constexpr int64_t kMaxOperandElements = 4096;

bool isSource(OpCode op) {
  return op == OpCode::Constant || op == OpCode::Full || op == OpCode::Iota;
}

bool smallStatic(const ir::Shape& s) {
  int64_t n = 1;
  for (const ir::Dim& d : s) {
    if (d.isSymbolic()) return false;
    n *= d.size;
    if (n > kMaxOperandElements) return false;
  }
  return true;
}

// The scalar value of node n of the new graph, whose operands are all sources: evaluated on a
// graph of just those sources and n.
std::optional<double> evaluateScalar(const ir::Graph& g, const ir::Node& n) {
  ir::GraphBuilder b("fold");
  std::vector<int> operands;
  for (int o : n.operands) {
    const ir::Node& src = g.node(o);
    operands.push_back(src.op == OpCode::Constant
                           ? b.addConstant(src.attrs.getFloat("value"), src.type.dtype)
                           : b.addOp(src.op, {}, src.attrs));
  }
  int r = b.addOp(n.op, operands, n.attrs);
  b.setOutputs({r});
  ir::Graph tiny = std::move(b).finish();
  std::vector<reference::HostTensor> values = reference::evaluateNodes(tiny, {});
  double v = values.back().at(0);
  if (n.type.dtype == ir::DType::I64 && std::fabs(v) > 9007199254740992.0) return std::nullopt;
  return v;
}

bool isOutput(const ir::Graph& g, int id) {
  return std::find(g.outputs().begin(), g.outputs().end(), id) != g.outputs().end();
}

}  // namespace

ir::Graph foldConstants(const ir::Graph& g) {
  return rewrite(g, [](Rewriter& rw, int id) -> std::optional<int> {
    const ir::Node& n = rw.src().node(id);
    // An index check stays: a constant out of range is the run's error, not the compile's.
    if (n.op == OpCode::Constant || n.op == OpCode::CheckIndex || !n.type.shape.empty())
      return std::nullopt;
    bool output = isOutput(rw.src(), id);
    if (output && n.op == OpCode::Full) return std::nullopt;  // already the folded form
    for (int o : n.operands) {
      const ir::Node& src = rw.node(rw.mapped(o));
      if (!isSource(src.op) || !smallStatic(src.type.shape)) return std::nullopt;
    }
    // Build the node in the new graph's terms (mapped operands) to evaluate it.
    ir::Node mappedNode = n;
    for (int& o : mappedNode.operands) o = rw.mapped(o);
    std::optional<double> v = evaluateScalar(rw.graph(), mappedNode);
    if (!v) return std::nullopt;
    if (output)
      return rw.add(OpCode::Full, {},
                    {{"shape", ir::Shape{}}, {"value", *v}, {"dtype", n.type.dtype}}, n.name);
    return rw.constant(*v, n.type.dtype);
  });
}

}  // namespace stitch::passes
