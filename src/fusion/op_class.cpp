#include "fusion/op_class.h"

#include <algorithm>
#include <cstdint>

namespace stitch::fusion {

using ir::OpCode;

std::string_view opKindName(OpKind k) {
  switch (k) {
    case OpKind::Input: return "input";
    case OpKind::Source: return "source";
    case OpKind::Cheap: return "elementwise";
    case OpKind::Expensive: return "elementwise (expensive)";
    case OpKind::Reduce: return "reduce";
    case OpKind::Reshape: return "reshape";
    case OpKind::BroadcastTo: return "broadcast";
    case OpKind::DataMovement: return "data movement";
    case OpKind::Composite: return "composite";
  }
  return "?";
}

OpKind classify(OpCode op) {
  switch (op) {
    case OpCode::Input: return OpKind::Input;
    case OpCode::Constant:
    case OpCode::Full:
    case OpCode::Iota: return OpKind::Source;
    case OpCode::Neg:
    case OpCode::Abs:
    case OpCode::Relu:
    case OpCode::Floor:
    case OpCode::Ceil:
    case OpCode::LogicalNot:
    case OpCode::Add:
    case OpCode::Sub:
    case OpCode::Mul:
    case OpCode::Maximum:
    case OpCode::Minimum:
    case OpCode::Eq:
    case OpCode::Ne:
    case OpCode::Lt:
    case OpCode::Le:
    case OpCode::Gt:
    case OpCode::Ge:
    case OpCode::LogicalAnd:
    case OpCode::LogicalOr:
    case OpCode::Select:
    case OpCode::Cast:
    case OpCode::CheckIndex: return OpKind::Cheap;  // a compare; the error path is cold
    case OpCode::Exp:
    case OpCode::Log:
    case OpCode::Log1p:
    case OpCode::Sqrt:
    case OpCode::Rsqrt:
    case OpCode::Tanh:
    case OpCode::Sigmoid:
    case OpCode::Erf:
    case OpCode::Sin:
    case OpCode::Cos:
    case OpCode::Reciprocal:
    case OpCode::Div:
    case OpCode::Pow:
    case OpCode::RandomUniform: return OpKind::Expensive;  // ten rounds of 32-bit products
    case OpCode::ReduceSum:
    case OpCode::ReduceMax:
    case OpCode::ReduceMin:
    case OpCode::ReduceMean:
    case OpCode::ReduceProd: return OpKind::Reduce;
    case OpCode::Reshape: return OpKind::Reshape;
    case OpCode::BroadcastTo: return OpKind::BroadcastTo;
    case OpCode::Transpose:
    case OpCode::Slice:
    case OpCode::Concat:
    case OpCode::Gather: return OpKind::DataMovement;
    case OpCode::Softmax:
    case OpCode::LogSoftmax:
    case OpCode::LayerNorm:
    case OpCode::RmsNorm:
    case OpCode::Gelu:
    case OpCode::Silu:
    case OpCode::Argmax:
    case OpCode::Argmin: return OpKind::Composite;
  }
  return OpKind::Composite;
}

std::string_view reduceKindName(ReduceKind k) {
  switch (k) {
    case ReduceKind::Row: return "row";
    case ReduceKind::Column: return "column";
    case ReduceKind::Middle: return "middle";
    case ReduceKind::All: return "all";
  }
  return "?";
}

ReduceKind reduceKind(std::span<const int64_t> shape, std::span<const int64_t> axes) {
  int firstKept = -1, lastKept = -1, firstReduced = -1, lastReduced = -1;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    if (shape[i] == 1) continue;
    bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    int& first = reduced ? firstReduced : firstKept;
    int& last = reduced ? lastReduced : lastKept;
    if (first < 0) first = i;
    last = i;
  }
  if (firstKept < 0) return ReduceKind::All;
  if (firstReduced < 0 || firstReduced > lastKept) return ReduceKind::Row;
  if (lastReduced < firstKept) return ReduceKind::Column;
  return ReduceKind::Middle;
}

}  // namespace stitch::fusion
