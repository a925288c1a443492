// The reference interpreter: the oracle every backend is checked against.
//
// It evaluates a graph node by node on the host, simply and exactly, not fast. Its semantics are
// the definition of each op; a backend that disagrees (beyond the tolerances of `stitch run
// --check`) is wrong. The rules, which every backend must follow:
//
// Numbers
// - Float values are held in f64. Every op computes in f64 and rounds its result once to the
//   output dtype with ir::roundToFloat (f16/bf16/f32: nearest, ties to even), so every value
//   is exactly representable in its dtype. Composites (softmax, log_softmax, layer_norm,
//   rms_norm, gelu, silu) are computed directly in f64, not through their decomposition, and
//   rounded once at the end. Reductions accumulate sequentially in f64, in row-major order.
// - i32 and i64 are held as int64 and computed with two's-complement wrap (through uint64, so
//   no UB); an i32 result is then wrapped to 32 bits (ir::wrapToI32). Integers never pass
//   through double, except when cast to a float dtype.
// - bool is 0/1 (held as int64; read from memory as "byte != 0", written as 0 or 1).
//
// Elementwise
// - Binary ops and select broadcast like NumPy (right-aligned, size-1 dims stretch).
// - Integer div truncates toward zero; x / 0 = 0; INT_MIN / -1 wraps to INT_MIN. Float div is
//   IEEE. pow is float-only (std::pow). abs/neg on ints wrap (abs(INT_MIN) = INT_MIN).
// - maximum/minimum on floats: NaN if either operand is NaN. relu(x) = max(x, 0) with NaN
//   staying NaN; relu(-0.0) = +0.0.
// - Comparisons are IEEE: any comparison with NaN is false, except ne, which is true. eq/ne also
//   compare bools.
// - rsqrt(x) = 1/sqrt(x), reciprocal(x) = 1/x, sigmoid(x) = 1/(1+exp(-x)), erf = std::erf,
//   log1p = std::log1p; the others are their <cmath> function.
// - cast: float->float rounds; float->int is ir::floatToInt (truncate, saturate, NaN -> 0);
//   int->float converts to double and rounds, so an i64 beyond 2^53 may round twice (first to
//   f64, then to the target); int->int wraps; X->bool is x != 0 (NaN -> true); bool->X is 0/1.
//
// Reductions (over the normalized, sorted `axes`, with `keepdims`)
// - Empty reductions: sum 0, prod 1, max -inf (ints: the dtype's minimum), min +inf (ints: the
//   dtype's maximum), mean NaN. Float max/min propagate NaN. mean = f64 sum / count, rounded.
// - Float prod: a running product of nonzero factors that underflows is held at the smallest
//   f64 subnormal of its sign (0 once rounded to f32 or narrower), so only a zero factor makes a
//   product zero: +-inf times nonzero factors is +-inf, and inf with a zero factor is NaN,
//   whatever the order. (A plain f64 product would be NaN or inf depending on whether the factors
//   before the inf underflowed, which no parallel order reproduces.) The backends do the same
//   in their compute type (f32 for f16/bf16/f32).
//
// Layout and sources
// - reshape keeps the row-major data. transpose: out.dim[k] = in.dim[perm[k]]. broadcast_to is
//   NumPy broadcasting. slice uses the normalized starts/steps of inference and the concrete
//   output shape (a slice of a symbolic axis takes the whole axis: ir/infer.h). concat along
//   axis, operands in order.
// - Constant (a scalar) and full: value rounded to the dtype (ints: the exact integer; bool:
//   value != 0). iota: each element is its index along axis, converted like a cast from i64.
//
// Random numbers and gathers
// - random_uniform(seed, offset): element i (row-major) is Philox4x32-10's word i mod 4 for
//   counter (i / 4, offset) and key seed, its top m bits as a fraction in [0, 1) (m = 24 f32,
//   11 f16, 8 bf16, 32 f64), exact in the dtype: the backends give the same bits
//   (support/philox.h).
// - gather(x, index, axis): y[.., j, ..] = x[.., index[.., j, ..], ..]. An index outside [0, n),
//   n the axis length (an empty axis has none inside), fails the evaluation with IndexOutOfRange
//   naming the first such index in element order (support/error.h: the message every backend
//   gives). check_index(index, size=[n]) is index, with the same check.
//
// Composites (over the normalized `axis`)
// - softmax = exp(x - max) / sum(exp(x - max)); log_softmax = x - max - log(sum(exp(x - max))).
//   A row of all -inf (or any NaN, or +inf) gives NaN, as in PyTorch.
// - layer_norm normalizes over the dims axis..end with the population variance (two passes:
//   mean, then mean of squared deviations): (x - mean) / sqrt(var + eps) * gamma + beta.
// - rms_norm: x / sqrt(mean(x^2 over dims axis..end) + eps) * gamma.
// - gelu none: 0.5 x (1 + erf(x / sqrt 2)); tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
//   silu(x) = x * sigmoid(x). The formulas are evaluated literally (so gelu(-inf) is NaN).
// - argmax/argmin: the first index of the row's max/min (ties: the smallest index); a row with
//   a NaN gives its first NaN's index (PyTorch's rule); i64. An empty axis (a symbol bound to 0)
//   gives INT64_MAX, as the decomposition's reduce_min of nothing.
//
// Zero-size dims are allowed everywhere.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ir/graph.h"

namespace stitch::reference {

// A compact row-major tensor in its native encoding (f16/bf16 as uint16 bits, bool as one byte
// 0/1).
struct TensorView {
  ir::DType dtype;
  std::span<const int64_t> shape;
  const void* data;
};
struct MutTensorView {
  ir::DType dtype;
  std::span<const int64_t> shape;
  void* data;
};

// A decoded host tensor: float dtypes in `floats` (each value exactly representable in dtype),
// i32/i64/bool in `ints` (bool as 0/1). Exactly one of the two vectors holds numel() values.
struct HostTensor {
  ir::DType dtype = ir::DType::F32;
  std::vector<int64_t> shape;
  std::vector<double> floats;
  std::vector<int64_t> ints;

  int64_t numel() const;
  // Element i as a double (ints converted; for tests and diagnostics).
  double at(int64_t i) const;
};

// DESIGN.md's tolerance for a backend's result against the oracle's in a dtype:
// |got - want| <= t + t * |want| with t = 1e-4 for f32 and f64, 1e-2 for f16, 4e-2 for bf16; 0 for
// ints and bool (exact). What `--check`, the differential tests and autotuning's comparison of
// plans (src/api/api_autotune.h) allow.
double dtypeTolerance(ir::DType t);

// Reads a native tensor. Throws InvalidArgument for a null data pointer on a non-empty tensor.
HostTensor decode(const TensorView& t);
// Writes t into out in the native encoding; out must have t's dtype and shape (ShapeMismatch).
void encode(const HostTensor& t, const MutTensorView& out);

// Evaluates g on inputs (checked with ir::bindInputs: ShapeMismatch on any disagreement) and
// returns the value of every node, indexed by node id. For plan validation and debugging.
std::vector<HostTensor> evaluateNodes(const ir::Graph& g, std::span<const TensorView> inputs);

// Evaluates g on inputs and writes every output into outputs (caller-allocated; each must match
// the concrete output shape and dtype exactly, else ShapeMismatch naming the output index).
// Outputs are checked before any work, and written only after every node is evaluated, so an
// output may alias an input.
void evaluate(const ir::Graph& g, std::span<const TensorView> inputs,
              std::span<const MutTensorView> outputs);

}  // namespace stitch::reference
