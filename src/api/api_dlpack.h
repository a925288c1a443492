// DLPack at the C API's boundary: the checks every backend relies on.
//
// Design note. Tensors are checked here, once, for every backend: dtype (lanes 1), device (the
// engine's backend says which it accepts: Backend::checkTensorDevice), compact strides (dims of
// size 1 may have any stride, as PyTorch produces them), size within the limits of
// support/checked.h, non-NULL data; and a run's outputs against its inputs (the aliasing
// contract of stitch_program_run, stitch.h). The backends then see plain compact buffers.
#pragma once

#include <dlpack/dlpack.h>

#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/signature.h"
#include "reference/interpreter.h"
#include "runtime/backend.h"

namespace stitch::api {

// The Stitch dtype of a DLPack dtype (ShapeMismatch naming `what` when there is none).
ir::DType fromDL(DLDataType t, std::string_view what);

// Checks one tensor for `backend` and returns its dtype; `what` names it in messages
// ("input 0 ('x')").
ir::DType checkTensor(const DLTensor& t, const std::string& what, const rt::Backend& backend);

// "input 0 ('x')", "output 1 ('y')".
std::string inputName(const ir::Graph& g, size_t i);
std::string outputName(const ir::Graph& g, size_t i);

// Validates the inputs' count, dtypes and shapes and returns their concrete signature.
std::vector<ir::ConcreteInput> signatureOf(const ir::Graph& g, const DLTensor* inputs, size_t n);

// Enforces stitch_program_run's aliasing contract (stitch.h) and returns, per output, the input
// whose memory it is exactly (-1: none). Kernels read inputs while other units write outputs, so
// any overlap other than an exact one cannot be made correct without copying the input first;
// it is refused rather than silently computed on half-overwritten data. An exact overlap is
// Unsupported on a backend that does not run in place.
std::vector<int> checkAliasing(const ir::Graph& g, std::span<const reference::TensorView> in,
                               std::span<const reference::MutTensorView> out,
                               const rt::Backend& backend);

// The bytes a tensor view covers (bounded by checkTensor to 2^62).
size_t viewBytes(ir::DType dtype, std::span<const int64_t> shape);

}  // namespace stitch::api
