// Type and shape inference for every op (one function per family, named in ops.def).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ir/ops.h"
#include "runtime/support/error.h"

namespace stitch::ir {

// An inference error. `operand` (>= 0) or `attr` (non-empty) says what it is about, so the
// parser can point at that argument's column.
class OpError : public Error {
 public:
  OpError(std::string message, int operand = -1, std::string attr = {})
      : Error(ErrorCode::InvalidGraph, std::move(message)),
        operand_(operand),
        attr_(std::move(attr)) {}
  int operand() const { return operand_; }
  const std::string& attr() const { return attr_; }

 private:
  int operand_;
  std::string attr_;
};

// slice along a symbolic axis must take the whole axis (a dim is never an expression of a
// symbol): start 0, step 1 and an end of at least kSymbolicSliceEnd (2^31 - 1, the "to the end"
// of exporters that write int32; ends clamp to the axis). Inference keeps such an end as
// written, and bindInputs (signature.h) rejects a size past it; an end of at least
// kMaxTensorBytes (support/checked.h: no axis is longer) becomes INT64_MAX.
inline constexpr int64_t kSymbolicSliceEnd = 2147483647;

#define STITCH_INFER_FN(Name) \
  TensorType Name(std::span<const TensorType* const> operands, Attrs& attrs);
STITCH_INFER_FN(inferNothing)
STITCH_INFER_FN(inferConstant)
STITCH_INFER_FN(inferUnaryNumeric)
STITCH_INFER_FN(inferUnaryFloat)
STITCH_INFER_FN(inferUnaryBool)
STITCH_INFER_FN(inferBinaryNumeric)
STITCH_INFER_FN(inferBinaryFloat)
STITCH_INFER_FN(inferBinaryBool)
STITCH_INFER_FN(inferCompareAny)
STITCH_INFER_FN(inferCompareNumeric)
STITCH_INFER_FN(inferSelect)
STITCH_INFER_FN(inferCast)
STITCH_INFER_FN(inferReduceNumeric)
STITCH_INFER_FN(inferReduceFloat)
STITCH_INFER_FN(inferReshape)
STITCH_INFER_FN(inferTranspose)
STITCH_INFER_FN(inferBroadcastTo)
STITCH_INFER_FN(inferSlice)
STITCH_INFER_FN(inferConcat)
STITCH_INFER_FN(inferFull)
STITCH_INFER_FN(inferIota)
STITCH_INFER_FN(inferSoftmax)
STITCH_INFER_FN(inferLayerNorm)
STITCH_INFER_FN(inferRmsNorm)
STITCH_INFER_FN(inferGelu)
STITCH_INFER_FN(inferRandomUniform)
STITCH_INFER_FN(inferGather)
STITCH_INFER_FN(inferCheckIndex)
STITCH_INFER_FN(inferArgReduce)
#undef STITCH_INFER_FN

}  // namespace stitch::ir
