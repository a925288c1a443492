// The op registry, generated from ops.def.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "ir/attrs.h"

namespace stitch::ir {

enum class OpCode : uint16_t {
#define STITCH_OP(Id, Name, Class, Arity, Attrs, Infer) Id,
#include "ir/ops.def"
};

// Every op's code, in ops.def order.
std::span<const OpCode> allOps();

enum class OpClass : uint8_t {
  Source,
  Unary,
  Binary,
  Select,
  Cast,
  Random,
  Gather,
  IndexCheck,
  Reduce,
  Layout,
  Composite
};

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;
  bool operator==(const TensorType&) const = default;
};
// "f32[N, 768]".
std::string typeStr(const TensorType& t);

// Inference: from operand types and checked attributes to the result type, with the attributes
// completed and normalized in place. Errors are thrown as OpError (infer.h).
using InferFn = TensorType (*)(std::span<const TensorType* const> operands, Attrs& attrs);

struct OpInfo {
  OpCode code;
  std::string_view name;
  OpClass cls;
  int arity;  // -1: one or more
  std::span<const AttrSpec> attrs;
  InferFn infer;
  // Ops written as NAME(...) in the text format (Input and Constant are not).
  bool inText() const { return code != OpCode::Input && code != OpCode::Constant; }
};

const OpInfo& opInfo(OpCode op);
inline std::string_view opName(OpCode op) { return opInfo(op).name; }
// The op written `name` in text, or nullopt.
std::optional<OpCode> findOp(std::string_view name);

}  // namespace stitch::ir
