// Every op of ops.def against hand-computed values.
//
// The cases are one table, so a test can check that each op (other than Input and Constant) is
// exercised by at least one case: adding an op to ops.def without a reference test here fails.
// Expected values are literals, or an obviously-correct formula in f64 rounded to the output
// dtype (transcendentals, composites). Exact comparison is the default; composites, whose
// formula here differs from the interpreter's (no max subtraction, one pass), allow 1e-6.
#include <gtest/gtest.h>

#include <functional>
#include <numbers>
#include <set>

#include "ref_helpers.h"
#include "runtime/support/error.h"
#include "runtime/support/philox.h"

namespace stitch::reference::testing {
namespace {

using ir::Attrs;
using ir::Dim;
using ir::OpCode;
constexpr ir::DType F16 = ir::DType::F16, BF16 = ir::DType::BF16, F32 = ir::DType::F32,
                    F64 = ir::DType::F64, I32 = ir::DType::I32, I64 = ir::DType::I64,
                    Bool = ir::DType::Bool;
constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

// Adds the graph's nodes given its inputs; returns the outputs.
using Body = std::function<std::vector<int>(ir::GraphBuilder&, const std::vector<int>&)>;

struct Case {
  std::string name;
  std::vector<std::string> types;  // input types, "f32[N, 3]"
  Body body;
  std::vector<Tensor> inputs;
  std::vector<Tensor> expected;
  double rtol = 0;
};
// gtest prints a failing parameter with this (instead of a byte dump).
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// One op applied to all the inputs, in order.
Body op(OpCode c, Attrs a = {}) {
  return [c, a](ir::GraphBuilder& b, const std::vector<int>& in) {
    return std::vector<int>{b.addOp(c, in, a)};
  };
}
// One op applied to input 0 and a number literal (a Constant node) of dtype t.
Body opConst(OpCode c, double v, ir::DType t) {
  return [=](ir::GraphBuilder& b, const std::vector<int>& in) {
    int k = b.addConstant(v, t);
    return std::vector<int>{b.addOp(c, {in[0], k}, {})};
  };
}

Dims iotaDims(int64_t n) {
  Dims v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k)] = k;
  return v;
}
std::vector<double> iotaF(int64_t n) {
  std::vector<double> v;
  for (int64_t k = 0; k < n; ++k) v.push_back(static_cast<double>(k));
  return v;
}
std::vector<double> mapF(std::vector<double> v, double (*f)(double), ir::DType t) {
  for (double& x : v) x = ir::roundToFloat(f(x), t);
  return v;
}

ir::Graph buildGraph(const Case& c) {
  ir::GraphBuilder b("g");
  std::vector<int> in;
  for (size_t k = 0; k < c.types.size(); ++k)
    in.push_back(b.addInput("x" + std::to_string(k), ty(c.types[k])));
  b.setOutputs(c.body(b, in));
  return std::move(b).finish();
}

// --- The expected values of the composites, straight from their definitions. ---

// softmax / log_softmax of a [A, B, C] tensor over axis 1, without max subtraction.
std::vector<double> softmaxMid(const std::vector<double>& x, int64_t A, int64_t B, int64_t C,
                               bool log) {
  std::vector<double> y(x.size());
  for (int64_t a = 0; a < A; ++a)
    for (int64_t c = 0; c < C; ++c) {
      auto idx = [&](int64_t b) { return static_cast<size_t>((a * B + b) * C + c); };
      double sum = 0;
      for (int64_t b = 0; b < B; ++b) sum += std::exp(x[idx(b)]);
      for (int64_t b = 0; b < B; ++b)
        y[idx(b)] = r32(log ? x[idx(b)] - std::log(sum) : std::exp(x[idx(b)]) / sum);
    }
  return y;
}

// layer_norm (with beta) or rms_norm of rows of n elements, one pass (E[x^2] - E[x]^2).
std::vector<double> normRows(const std::vector<double>& x, const std::vector<double>& gamma,
                             const std::vector<double>* beta, size_t n, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double s = 0, s2 = 0;
    for (size_t k = 0; k < n; ++k) {
      s += x[r * n + k];
      s2 += x[r * n + k] * x[r * n + k];
    }
    double mean = beta ? s / static_cast<double>(n) : 0.0;
    double var = s2 / static_cast<double>(n) - mean * mean;
    for (size_t k = 0; k < n; ++k)
      y[r * n + k] =
          r32((x[r * n + k] - mean) / std::sqrt(var + eps) * gamma[k] + (beta ? (*beta)[k] : 0));
  }
  return y;
}

std::vector<Case> allCases() {
  std::vector<Case> cs;
  auto add = [&](Case c) { cs.push_back(std::move(c)); };
  const double third = 1.0 / 3.0;

  // ---- Unary ----
  add({"neg_f32",
       {"f32[4]"},
       op(OpCode::Neg),
       {T(F32, {4}, {1.5, -2, 0, kNaN})},
       {T(F32, {4}, {-1.5, 2, 0, kNaN})}});
  add({"neg_i32_wraps",
       {"i32[3]"},
       op(OpCode::Neg),
       {Ti(I32, {3}, {5, -3, kI32Min})},
       {Ti(I32, {3}, {-5, 3, kI32Min})}});
  add({"neg_i64_wraps",
       {"i64[2]"},
       op(OpCode::Neg),
       {Ti(I64, {2}, {kI64Min, 7})},
       {Ti(I64, {2}, {kI64Min, -7})}});
  add({"abs_f32",
       {"f32[4]"},
       op(OpCode::Abs),
       {T(F32, {4}, {-1.5, 2, -kInf, kNaN})},
       {T(F32, {4}, {1.5, 2, kInf, kNaN})}});
  add({"abs_i32_wraps",
       {"i32[3]"},
       op(OpCode::Abs),
       {Ti(I32, {3}, {-7, 0, kI32Min})},
       {Ti(I32, {3}, {7, 0, kI32Min})}});
  add({"relu_f32_keeps_nan",
       {"f32[4]"},
       op(OpCode::Relu),
       {T(F32, {4}, {-1, 0.5, kNaN, -kInf})},
       {T(F32, {4}, {0, 0.5, kNaN, 0})}});
  add({"relu_i64",
       {"i64[3]"},
       op(OpCode::Relu),
       {Ti(I64, {3}, {-3, 4, kI64Min})},
       {Ti(I64, {3}, {0, 4, 0})}});
  add({"exp_f64",
       {"f64[4]"},
       op(OpCode::Exp),
       {T(F64, {4}, {0, 1, -kInf, 0.5})},
       {T(F64, {4}, {1, std::exp(1.0), 0, std::exp(0.5)})}});
  add({"log_f32",
       {"f32[4]"},
       op(OpCode::Log),
       {T(F32, {4}, {1, 2, 0, -1})},
       {T(F32, {4}, {0, r32(std::log(2.0)), -kInf, kNaN})}});
  add({"log1p_f64",
       {"f64[3]"},
       op(OpCode::Log1p),
       {T(F64, {3}, {0, 1e-10, -1})},
       {T(F64, {3}, {0, std::log1p(1e-10), -kInf})}});
  add({"sqrt_f32",
       {"f32[3]"},
       op(OpCode::Sqrt),
       {T(F32, {3}, {4, 2, -1})},
       {T(F32, {3}, {2, r32(std::sqrt(2.0)), kNaN})}});
  add({"rsqrt_f32",
       {"f32[4]"},
       op(OpCode::Rsqrt),
       {T(F32, {4}, {4, 0, 0.25, 2})},
       {T(F32, {4}, {0.5, kInf, 2, r32(1 / std::sqrt(2.0))})}});
  add({"tanh_f64",
       {"f64[4]"},
       op(OpCode::Tanh),
       {T(F64, {4}, {0, 1, kInf, -kInf})},
       {T(F64, {4}, {0, std::tanh(1.0), 1, -1})}});
  add({"sigmoid_f32",
       {"f32[4]"},
       op(OpCode::Sigmoid),
       {T(F32, {4}, {0, 2, -kInf, kInf})},
       {T(F32, {4}, {0.5, r32(1 / (1 + std::exp(-2.0))), 0, 1})}});
  add({"erf_f64",
       {"f64[3]"},
       op(OpCode::Erf),
       {T(F64, {3}, {0, 0.5, -kInf})},
       {T(F64, {3}, {0, std::erf(0.5), -1})}});
  add({"sin_f64",
       {"f64[3]"},
       op(OpCode::Sin),
       {T(F64, {3}, {0, 1, -2})},
       {T(F64, {3}, {0, std::sin(1.0), std::sin(-2.0)})}});
  add({"cos_f32",
       {"f32[3]"},
       op(OpCode::Cos),
       {T(F32, {3}, {0, 1, -2})},
       {T(F32, {3},
          mapF(
              {0, 1, -2}, [](double x) { return std::cos(x); }, F32))}});
  add({"reciprocal_f32",
       {"f32[4]"},
       op(OpCode::Reciprocal),
       {T(F32, {4}, {2, 0, -4, 3})},
       {T(F32, {4}, {0.5, kInf, -0.25, r32(third)})}});
  add({"floor_f32",
       {"f32[4]"},
       op(OpCode::Floor),
       {T(F32, {4}, {1.5, -1.5, 2, -0.25})},
       {T(F32, {4}, {1, -2, 2, -1})}});
  add({"ceil_f32",
       {"f32[4]"},
       op(OpCode::Ceil),
       {T(F32, {4}, {1.5, -1.5, 2, -0.25})},
       {T(F32, {4}, {2, -1, 2, 0})}});
  add({"logical_not",
       {"bool[3]"},
       op(OpCode::LogicalNot),
       {Tb({3}, {0, 1, 1})},
       {Tb({3}, {1, 0, 0})}});

  // ---- Binary ----
  add({"add_broadcast_row",
       {"f32[2, 3]", "f32[3]"},
       op(OpCode::Add),
       {T(F32, {2, 3}, {1, 2, 3, 4, 5, 6}), T(F32, {3}, {10, 20, 30})},
       {T(F32, {2, 3}, {11, 22, 33, 14, 25, 36})}});
  add({"add_broadcast_outer",
       {"f32[2, 1]", "f32[1, 3]"},
       op(OpCode::Add),
       {T(F32, {2, 1}, {1, 2}), T(F32, {1, 3}, {10, 20, 30})},
       {T(F32, {2, 3}, {11, 21, 31, 12, 22, 32})}});
  add({"add_i32_wraps_with_scalar",
       {"i32[3]", "i32[]"},
       op(OpCode::Add),
       {Ti(I32, {3}, {kI32Max, kI32Min, 5}), Ti(I32, {}, {1})},
       {Ti(I32, {3}, {kI32Min, kI32Min + 1, 6})}});
  add({"add_i64_wraps_and_is_exact",
       {"i64[2]", "i64[2]"},
       op(OpCode::Add),
       {Ti(I64, {2}, {kI64Max, (int64_t{1} << 62) + 1}), Ti(I64, {2}, {1, 1})},
       {Ti(I64, {2}, {kI64Min, (int64_t{1} << 62) + 2})}});
  add({"add_zero_size",
       {"f32[0, 3]", "f32[3]"},
       op(OpCode::Add),
       {T(F32, {0, 3}, {}), T(F32, {3}, {1, 2, 3})},
       {T(F32, {0, 3}, {})}});
  add({"sub_literal",
       {"f32[3]"},
       opConst(OpCode::Sub, 0.5, F32),
       {T(F32, {3}, {1, 2, 3})},
       {T(F32, {3}, {0.5, 1.5, 2.5})}});
  add({"sub_i32_wraps",
       {"i32[2]", "i32[2]"},
       op(OpCode::Sub),
       {Ti(I32, {2}, {kI32Min, 3}), Ti(I32, {2}, {1, 5})},
       {Ti(I32, {2}, {kI32Max, -2})}});
  add({"mul_i32_wraps",
       {"i32[3]", "i32[3]"},
       op(OpCode::Mul),
       {Ti(I32, {3}, {65536, -3, 46341}), Ti(I32, {3}, {65536, 7, 46341})},
       {Ti(I32, {3}, {0, -21, 46341LL * 46341 - (int64_t{1} << 32)})}});
  add({"mul_bf16",
       {"bf16[2]", "bf16[2]"},
       op(OpCode::Mul),
       {T(BF16, {2}, {1.5, 3}), T(BF16, {2}, {2, third})},
       // 3 * bf16(1/3) = 3 * 0.333984375 = 1.001953125, rounded to bf16: 1.0 (0x3f80).
       {Th(BF16, {2}, {0x4040, 0x3f80})}});
  add({"div_f16_bits",
       {"f16[2]", "f16[2]"},
       op(OpCode::Div),
       {T(F16, {2}, {1, 2}), T(F16, {2}, {3, 3})},
       {Th(F16, {2}, {0x3555, 0x3955})}});
  add({"div_bf16_bits",
       {"bf16[1]", "bf16[1]"},
       op(OpCode::Div),
       {T(BF16, {1}, {1}), T(BF16, {1}, {3})},
       {Th(BF16, {1}, {0x3eab})}});
  add({"div_f32_ieee",
       {"f32[5]", "f32[5]"},
       op(OpCode::Div),
       {T(F32, {5}, {1, 1, -1, 0, 7}), T(F32, {5}, {0, 3, 0, 0, -2})},
       {T(F32, {5}, {kInf, r32(third), -kInf, kNaN, -3.5})}});
  add({"div_i32_truncates",
       {"i32[7]", "i32[7]"},
       op(OpCode::Div),
       {Ti(I32, {7}, {7, -7, 7, -7, 5, kI32Min, 0}), Ti(I32, {7}, {2, 2, -2, -2, 0, -1, 0})},
       {Ti(I32, {7}, {3, -3, -3, 3, 0, kI32Min, 0})}});
  add({"div_i64_edges",
       {"i64[2]", "i64[2]"},
       op(OpCode::Div),
       {Ti(I64, {2}, {kI64Min, kI64Max}), Ti(I64, {2}, {-1, 0})},
       {Ti(I64, {2}, {kI64Min, 0})}});
  add({"maximum_f32_nan",
       {"f32[4]", "f32[4]"},
       op(OpCode::Maximum),
       {T(F32, {4}, {1, kNaN, 3, 5}), T(F32, {4}, {2, 1, kNaN, -kInf})},
       {T(F32, {4}, {2, kNaN, kNaN, 5})}});
  add({"minimum_f32_nan",
       {"f32[4]", "f32[4]"},
       op(OpCode::Minimum),
       {T(F32, {4}, {1, kNaN, 3, 5}), T(F32, {4}, {2, 1, kNaN, -kInf})},
       {T(F32, {4}, {1, kNaN, kNaN, -kInf})}});
  add({"maximum_i64_exact",
       {"i64[2]", "i64[2]"},
       op(OpCode::Maximum),
       {Ti(I64, {2}, {(int64_t{1} << 62) + 1, -5}), Ti(I64, {2}, {int64_t{1} << 62, -4})},
       {Ti(I64, {2}, {(int64_t{1} << 62) + 1, -4})}});
  add({"minimum_i32_broadcast",
       {"i32[2]", "i32[1]"},
       op(OpCode::Minimum),
       {Ti(I32, {2}, {3, -8}), Ti(I32, {1}, {0})},
       {Ti(I32, {2}, {0, -8})}});
  add({"pow_f32",
       {"f32[5]", "f32[5]"},
       op(OpCode::Pow),
       {T(F32, {5}, {2, 4, -8, 2, 0}), T(F32, {5}, {3, 0.5, 0.5, -1, 0})},
       {T(F32, {5}, {8, 2, kNaN, 0.5, 1})}});
  {
    // IEEE comparisons: NaN compares false, except ne.
    Tensor a = T(F32, {4}, {1, 2, kNaN, 3}), b = T(F32, {4}, {1, 3, kNaN, 2});
    std::vector<std::string> ty2 = {"f32[4]", "f32[4]"};
    add({"eq_f32_nan", ty2, op(OpCode::Eq), {a, b}, {Tb({4}, {1, 0, 0, 0})}});
    add({"ne_f32_nan", ty2, op(OpCode::Ne), {a, b}, {Tb({4}, {0, 1, 1, 1})}});
    add({"lt_f32_nan", ty2, op(OpCode::Lt), {a, b}, {Tb({4}, {0, 1, 0, 0})}});
    add({"le_f32_nan", ty2, op(OpCode::Le), {a, b}, {Tb({4}, {1, 1, 0, 0})}});
    add({"gt_f32_nan", ty2, op(OpCode::Gt), {a, b}, {Tb({4}, {0, 0, 0, 1})}});
    add({"ge_f32_nan", ty2, op(OpCode::Ge), {a, b}, {Tb({4}, {1, 0, 0, 1})}});
  }
  add({"eq_bool",
       {"bool[4]", "bool[4]"},
       op(OpCode::Eq),
       {Tb({4}, {0, 1, 1, 0}), Tb({4}, {0, 1, 0, 1})},
       {Tb({4}, {1, 1, 0, 0})}});
  add({"ne_bool",
       {"bool[4]", "bool[4]"},
       op(OpCode::Ne),
       {Tb({4}, {0, 1, 1, 0}), Tb({4}, {0, 1, 0, 1})},
       {Tb({4}, {0, 0, 1, 1})}});
  // 2^53 + 1 and 2^53 are equal as doubles: an exact int compare is needed.
  add({"gt_i64_exact",
       {"i64[2]", "i64[2]"},
       op(OpCode::Gt),
       {Ti(I64, {2}, {(int64_t{1} << 53) + 1, -1}), Ti(I64, {2}, {int64_t{1} << 53, 0})},
       {Tb({2}, {1, 0})}});
  add({"lt_i32_broadcast",
       {"i32[2, 1]", "i32[3]"},
       op(OpCode::Lt),
       {Ti(I32, {2, 1}, {1, 5}), Ti(I32, {3}, {0, 2, 6})},
       {Tb({2, 3}, {0, 1, 1, 0, 0, 1})}});
  add({"logical_and_broadcast",
       {"bool[2, 1]", "bool[2]"},
       op(OpCode::LogicalAnd),
       {Tb({2, 1}, {0, 1}), Tb({2}, {0, 1})},
       {Tb({2, 2}, {0, 0, 0, 1})}});
  add({"logical_or_broadcast",
       {"bool[2, 1]", "bool[2]"},
       op(OpCode::LogicalOr),
       {Tb({2, 1}, {0, 1}), Tb({2}, {0, 1})},
       {Tb({2, 2}, {0, 1, 1, 1})}});

  // ---- select, cast ----
  add({"select_broadcast_all_three",
       {"bool[2, 1]", "f32[1, 3]"},
       [](ir::GraphBuilder& b, const std::vector<int>& in) {
         int k = b.addConstant(-1, F32);
         return std::vector<int>{b.addOp(OpCode::Select, {in[0], in[1], k}, {})};
       },
       {Tb({2, 1}, {1, 0}), T(F32, {1, 3}, {1, 2, 3})},
       {T(F32, {2, 3}, {1, 2, 3, -1, -1, -1})}});
  add({"select_i64",
       {"bool[3]", "i64[3]", "i64[3]"},
       op(OpCode::Select),
       {Tb({3}, {1, 0, 1}), Ti(I64, {3}, {kI64Max, 2, 3}), Ti(I64, {3}, {4, 5, 6})},
       {Ti(I64, {3}, {kI64Max, 5, 3})}});
  auto castTo = [](ir::DType t) { return op(OpCode::Cast, Attrs{{"to", t}}); };
  // f32(1/3) -> f16 0x3555; 65520 is the f16 tie that rounds to inf; 1e-8 underflows to 0.
  add({"cast_f32_to_f16",
       {"f32[4]"},
       castTo(F16),
       {T(F32, {4}, {third, 65520, 1e-8, -0.5})},
       {Th(F16, {4}, {0x3555, 0x7c00, 0x0000, 0xb800})}});
  // 1 + 2^-8 + 2^-30 rounds up to 1 + 2^-7 only when rounded once, straight from f64.
  add({"cast_f64_to_bf16",
       {"f64[2]"},
       castTo(BF16),
       {T(F64, {2}, {third, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30)})},
       {Th(BF16, {2}, {0x3eab, 0x3f81})}});
  add({"cast_f16_to_f32",
       {"f16[2]"},
       castTo(F32),
       {Th(F16, {2}, {0x3555, 0xfc00})},
       {T(F32, {2}, {ir::f16Value(0x3555), -kInf})}});
  add({"cast_bf16_to_f16",
       {"bf16[1]"},
       castTo(F16),
       {Th(BF16, {1}, {0x3eab})},
       {Th(F16, {1}, {0x3558})}});
  add({"cast_f32_to_i32",
       {"f32[5]"},
       castTo(I32),
       {T(F32, {5}, {2.9, -2.9, kNaN, 3e9, -3e9})},
       {Ti(I32, {5}, {2, -2, 0, kI32Max, kI32Min})}});
  add({"cast_f64_to_i64",
       {"f64[4]"},
       castTo(I64),
       {T(F64, {4}, {-1e30, 1e30, 123.99, -0.5})},
       {Ti(I64, {4}, {kI64Min, kI64Max, 123, 0})}});
  add({"cast_f32_to_bool",
       {"f32[5]"},
       castTo(Bool),
       {T(F32, {5}, {0, -0.0, 0.5, kNaN, -kInf})},
       {Tb({5}, {0, 0, 1, 1, 1})}});
  add({"cast_i32_to_f32",
       {"i32[2]"},
       castTo(F32),
       {Ti(I32, {2}, {16777217, -3})},
       {T(F32, {2}, {16777216, -3})}});
  add({"cast_i64_to_f64",
       {"i64[2]"},
       castTo(F64),
       {Ti(I64, {2}, {(int64_t{1} << 53) + 1, -7})},
       {T(F64, {2}, {9007199254740992.0, -7})}});
  // 2049 is an f16 tie between 2048 and 2050: to even, 2048.
  add({"cast_i64_to_f16",
       {"i64[3]"},
       castTo(F16),
       {Ti(I64, {3}, {65520, 2049, -1})},
       {Th(F16, {3}, {0x7c00, 0x6800, 0xbc00})}});
  add({"cast_i64_to_i32_wraps",
       {"i64[3]"},
       castTo(I32),
       {Ti(I64, {3}, {(int64_t{1} << 32) + 5, int64_t{1} << 31, -1})},
       {Ti(I32, {3}, {5, kI32Min, -1})}});
  add({"cast_i32_to_i64",
       {"i32[2]"},
       castTo(I64),
       {Ti(I32, {2}, {-1, kI32Min})},
       {Ti(I64, {2}, {-1, kI32Min})}});
  add({"cast_i32_to_bool",
       {"i32[3]"},
       castTo(Bool),
       {Ti(I32, {3}, {0, 5, -1})},
       {Tb({3}, {0, 1, 1})}});
  add({"cast_bool_to_f32", {"bool[2]"}, castTo(F32), {Tb({2}, {1, 0})}, {T(F32, {2}, {1, 0})}});
  add({"cast_bool_to_i64", {"bool[2]"}, castTo(I64), {Tb({2}, {1, 0})}, {Ti(I64, {2}, {1, 0})}});

  // ---- Reductions. x[i, j, k] = 12 i + 4 j + k over [2, 3, 4]. ----
  Tensor x234 = T(F32, {2, 3, 4}, iotaF(24));
  auto red = [](OpCode c, std::vector<int64_t> axes, bool keep) {
    return op(c, Attrs{{"axes", std::move(axes)}, {"keepdims", keep}});
  };
  add({"reduce_sum_mid_keepdims",
       {"f32[2, 3, 4]"},
       red(OpCode::ReduceSum, {1}, true),
       {x234},
       {T(F32, {2, 1, 4}, {12, 15, 18, 21, 48, 51, 54, 57})}});
  add({"reduce_sum_two_axes",
       {"f32[2, 3, 4]"},
       red(OpCode::ReduceSum, {0, 2}, false),
       {x234},
       {T(F32, {3}, {60, 92, 124})}});
  add({"reduce_sum_default_all",
       {"f32[2, 3, 4]"},
       op(OpCode::ReduceSum),
       {x234},
       {T(F32, {}, {276})}});
  add({"reduce_sum_negative_axis",
       {"f32[2, 3, 4]"},
       red(OpCode::ReduceSum, {-1}, true),
       {x234},
       {T(F32, {2, 3, 1}, {6, 22, 38, 54, 70, 86})}});
  // f16 [2048, 1, 1]: summed in f16 step by step it would stay 2048; in f64, 2050 (0x6801).
  add({"reduce_sum_f16_accumulates_in_f64",
       {"f16[3]"},
       op(OpCode::ReduceSum),
       {T(F16, {3}, {2048, 1, 1})},
       {Th(F16, {}, {0x6801})}});
  add({"reduce_sum_i32_wraps",
       {"i32[2]"},
       op(OpCode::ReduceSum),
       {Ti(I32, {2}, {kI32Max, 2})},
       {Ti(I32, {}, {kI32Min + 1})}});
  add({"reduce_max_nan",
       {"f32[2, 3]"},
       red(OpCode::ReduceMax, {1}, false),
       {T(F32, {2, 3}, {1, kNaN, 3, -kInf, -5, 2})},
       {T(F32, {2}, {kNaN, 2})}});
  add({"reduce_max_two_axes_keepdims",
       {"f32[2, 3, 4]"},
       red(OpCode::ReduceMax, {0, 1}, true),
       {x234},
       {T(F32, {1, 1, 4}, {20, 21, 22, 23})}});
  add({"reduce_min_nan",
       {"f32[2, 3]"},
       red(OpCode::ReduceMin, {1}, true),
       {T(F32, {2, 3}, {1, kNaN, 3, -kInf, -5, 2})},
       {T(F32, {2, 1}, {kNaN, -kInf})}});
  add({"reduce_min_i32",
       {"i32[2, 2]"},
       red(OpCode::ReduceMin, {0}, false),
       {Ti(I32, {2, 2}, {3, -1, -7, 8})},
       {Ti(I32, {2}, {-7, -1})}});
  add({"reduce_prod_f32",
       {"f32[2, 3]"},
       red(OpCode::ReduceProd, {1}, true),
       {T(F32, {2, 3}, {1, 2, 3, 4, 5, 6})},
       {T(F32, {2, 1}, {6, 120})}});
  // A product of nonzero factors that underflows is held at the smallest subnormal, so +-inf
  // after it stays +-inf (a plain f64 product: 1e-200 * 1e-200 = 0, then 0 * inf = NaN); a zero
  // factor with an inf is NaN; the underflowed product alone rounds to (signed) zero.
  add({"reduce_prod_inf_after_underflow",
       {"f64[4, 3]"},
       red(OpCode::ReduceProd, {1}, false),
       {T(F64, {4, 3},
          {1e-200, 1e-200, kInf, -1e-200, 1e-200, kInf, 1e-200, 0, kInf, 1e-200, -1e-200, 0.5})},
       {T(F64, {4}, {kInf, -kInf, kNaN, -std::numeric_limits<double>::denorm_min()})}});
  add({"reduce_prod_i32_wraps",
       {"i32[2, 2]"},
       red(OpCode::ReduceProd, {0}, false),
       {Ti(I32, {2, 2}, {65536, 3, 65536, -4})},
       {Ti(I32, {2}, {0, -12})}});
  add({"reduce_mean_two_axes",
       {"f32[2, 3, 4]"},
       red(OpCode::ReduceMean, {1, 2}, false),
       {x234},
       {T(F32, {2}, {5.5, 17.5})}});
  add({"reduce_mean_keepdims",
       {"f64[2, 3]"},
       red(OpCode::ReduceMean, {0}, true),
       {T(F64, {2, 3}, {1, 2, 3, 4, 5, 7})},
       {T(F64, {1, 3}, {2.5, 3.5, 5})}});
  // Empty reductions: the identities, and NaN for mean.
  Tensor e20 = T(F32, {2, 0}, {});
  add({"reduce_sum_empty",
       {"f32[2, 0]"},
       red(OpCode::ReduceSum, {1}, false),
       {e20},
       {T(F32, {2}, {0, 0})}});
  add({"reduce_prod_empty",
       {"f32[2, 0]"},
       red(OpCode::ReduceProd, {1}, false),
       {e20},
       {T(F32, {2}, {1, 1})}});
  add({"reduce_max_empty",
       {"f32[2, 0]"},
       red(OpCode::ReduceMax, {1}, false),
       {e20},
       {T(F32, {2}, {-kInf, -kInf})}});
  add({"reduce_min_empty",
       {"f32[2, 0]"},
       red(OpCode::ReduceMin, {1}, true),
       {e20},
       {T(F32, {2, 1}, {kInf, kInf})}});
  add({"reduce_mean_empty",
       {"f32[2, 0]"},
       red(OpCode::ReduceMean, {1}, false),
       {e20},
       {T(F32, {2}, {kNaN, kNaN})}});
  add({"reduce_max_empty_i32",
       {"i32[2, 0]"},
       red(OpCode::ReduceMax, {1}, false),
       {Ti(I32, {2, 0}, {})},
       {Ti(I32, {2}, {kI32Min, kI32Min})}});
  add({"reduce_min_empty_i64",
       {"i64[0]"},
       op(OpCode::ReduceMin),
       {Ti(I64, {0}, {})},
       {Ti(I64, {}, {kI64Max})}});

  // ---- Layout ----
  add({"reshape_symbolic",
       {"f32[N, 6]"},
       op(OpCode::Reshape, Attrs{{"shape", ir::Shape{Dim::sym("N"), Dim::of(2), Dim::of(3)}}}),
       {T(F32, {2, 6}, iotaF(12))},
       {T(F32, {2, 2, 3}, iotaF(12))}});
  add({"reshape_minus_one",
       {"i32[2, 6]"},
       op(OpCode::Reshape, Attrs{{"shape", ir::Shape{Dim::of(3), Dim::of(-1)}}}),
       {Ti(I32, {2, 6}, iotaDims(12))},
       {Ti(I32, {3, 4}, iotaDims(12))}});
  {
    // out[a, b, c] = x[b, c, a] for perm [2, 0, 1]; x[i, j, k] = 12 i + 4 j + k.
    Dims want;
    for (int64_t a = 0; a < 4; ++a)
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t c = 0; c < 3; ++c) want.push_back(12 * b + 4 * c + a);
    add({"transpose_3d",
         {"i32[2, 3, 4]"},
         op(OpCode::Transpose, Attrs{{"perm", std::vector<int64_t>{2, 0, -2}}}),
         {Ti(I32, {2, 3, 4}, iotaDims(24))},
         {Ti(I32, {4, 2, 3}, want)}});
  }
  add({"transpose_zero_size",
       {"f32[0, 2]"},
       op(OpCode::Transpose, Attrs{{"perm", std::vector<int64_t>{1, 0}}}),
       {T(F32, {0, 2}, {})},
       {T(F32, {2, 0}, {})}});
  add({"broadcast_to_3d",
       {"f32[3, 1]"},
       op(OpCode::BroadcastTo, Attrs{{"shape", ir::Shape{Dim::of(2), Dim::of(3), Dim::of(2)}}}),
       {T(F32, {3, 1}, {1, 2, 3})},
       {T(F32, {2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3})}});
  auto sliceOp = [](std::vector<int64_t> s, std::vector<int64_t> e, std::vector<int64_t> st) {
    return op(OpCode::Slice,
              Attrs{{"starts", std::move(s)}, {"ends", std::move(e)}, {"steps", std::move(st)}});
  };
  // [-8:-1:3] of 0..9 is [2:9:3]: 2, 5, 8.
  add({"slice_negative_and_step",
       {"i64[10]"},
       sliceOp({-8}, {-1}, {3}),
       {Ti(I64, {10}, iotaDims(10))},
       {Ti(I64, {3}, {2, 5, 8})}});
  // x[r, c] = 5 r + c over [4, 5]; rows 1, 3 and columns 0, 2, 4 (the end 100 clamps).
  add({"slice_2d_steps",
       {"f32[4, 5]"},
       sliceOp({1, 0}, {100, 5}, {2, 2}),
       {T(F32, {4, 5}, iotaF(20))},
       {T(F32, {2, 3}, {5, 7, 9, 15, 17, 19})}});
  add({"slice_symbolic_whole_axis",
       {"f32[N, 4]"},
       sliceOp({0, 1}, {kI64Max, 3}, {1, 1}),
       {T(F32, {2, 4}, iotaF(8))},
       {T(F32, {2, 2}, {1, 2, 5, 6})}});
  add({"slice_empty",
       {"f32[5]"},
       sliceOp({3}, {1}, {1}),
       {T(F32, {5}, iotaF(5))},
       {T(F32, {0}, {})}});
  add({"concat_three_axis1",
       {"f32[2, 1]", "f32[2, 2]", "f32[2, 3]"},
       op(OpCode::Concat, Attrs{{"axis", int64_t{1}}}),
       {T(F32, {2, 1}, {1, 2}), T(F32, {2, 2}, {3, 4, 5, 6}),
        T(F32, {2, 3}, {7, 8, 9, 10, 11, 12})},
       {T(F32, {2, 6}, {1, 3, 4, 7, 8, 9, 2, 5, 6, 10, 11, 12})}});
  add({"concat_with_empty_negative_axis",
       {"i32[0, 2]", "i32[1, 2]", "i32[1, 2]"},
       op(OpCode::Concat, Attrs{{"axis", int64_t{-2}}}),
       {Ti(I32, {0, 2}, {}), Ti(I32, {1, 2}, {1, 2}), Ti(I32, {1, 2}, {3, 4})},
       {Ti(I32, {2, 2}, {1, 2, 3, 4})}});

  // ---- Sources ----
  auto iotaOp = [](ir::Shape s, int64_t axis, ir::DType t) {
    return [=](ir::GraphBuilder& b, const std::vector<int>&) {
      return std::vector<int>{
          b.addOp(OpCode::Iota, {}, Attrs{{"shape", s}, {"axis", axis}, {"dtype", t}})};
    };
  };
  add({"iota_i32_axis1",
       {},
       iotaOp({Dim::of(2), Dim::of(3)}, 1, I32),
       {},
       {Ti(I32, {2, 3}, {0, 1, 2, 0, 1, 2})}});
  add({"iota_f16_axis0",
       {},
       iotaOp({Dim::of(3), Dim::of(2)}, 0, F16),
       {},
       {Th(F16, {3, 2}, {0x0000, 0x0000, 0x3c00, 0x3c00, 0x4000, 0x4000})}});
  add({"iota_symbolic",
       {"f32[N]"},
       iotaOp({Dim::sym("N")}, -1, I64),
       {T(F32, {3}, {0, 0, 0})},
       {Ti(I64, {3}, {0, 1, 2})}});
  auto fullOp = [](ir::Shape s, double v, ir::DType t) {
    return [=](ir::GraphBuilder& b, const std::vector<int>&) {
      return std::vector<int>{
          b.addOp(OpCode::Full, {}, Attrs{{"shape", s}, {"value", v}, {"dtype", t}})};
    };
  };
  add({"full_bf16_bits",
       {},
       fullOp({Dim::of(2), Dim::of(2)}, third, BF16),
       {},
       {Th(BF16, {2, 2}, {0x3eab, 0x3eab, 0x3eab, 0x3eab})}});
  add({"full_i64", {}, fullOp({Dim::of(2)}, -5, I64), {}, {Ti(I64, {2}, {-5, -5})}});
  add({"full_bool", {}, fullOp({Dim::of(3)}, 1, Bool), {}, {Tb({3}, {1, 1, 1})}});
  add({"full_empty", {}, fullOp({Dim::of(0), Dim::of(3)}, 2, F32), {}, {T(F32, {0, 3}, {})}});

  // ---- Composites ----
  std::vector<double> x232 = {0.5, -1, 2, 0, -0.5, 3, 1, 1, 1, 1, 1, 1};
  auto axisOp = [](OpCode c, int64_t axis) { return op(c, Attrs{{"axis", axis}}); };
  add({"softmax_middle_axis",
       {"f32[2, 3, 2]"},
       axisOp(OpCode::Softmax, 1),
       {T(F32, {2, 3, 2}, x232)},
       {T(F32, {2, 3, 2}, softmaxMid(x232, 2, 3, 2, false))},
       1e-6});
  add({"softmax_all_neg_inf_row_is_nan",
       {"f32[2, 2]"},
       axisOp(OpCode::Softmax, -1),
       {T(F32, {2, 2}, {-kInf, -kInf, 0, 0})},
       {T(F32, {2, 2}, {kNaN, kNaN, 0.5, 0.5})}});
  add({"softmax_large_values_are_stable",
       {"f32[3]"},
       op(OpCode::Softmax),
       {T(F32, {3}, {1000, 1000, -kInf})},
       {T(F32, {3}, {0.5, 0.5, 0})}});
  add({"log_softmax_middle_axis",
       {"f32[2, 3, 2]"},
       axisOp(OpCode::LogSoftmax, -2),
       {T(F32, {2, 3, 2}, x232)},
       {T(F32, {2, 3, 2}, softmaxMid(x232, 2, 3, 2, true))},
       1e-6});
  {
    std::vector<double> x = {1, 2, 3, 4, 5, 7, -1, 0.5, 0, 2, 2, -3};
    std::vector<double> gamma = {1, 0.5, 2, -1, 1, 3};
    std::vector<double> beta = {0, 1, -1, 0.25, 0, 0};
    add({"layer_norm_two_dims",
         {"f32[2, 2, 3]", "f32[2, 3]", "f32[2, 3]"},
         op(OpCode::LayerNorm, Attrs{{"axis", int64_t{-2}}, {"eps", 1e-5}}),
         {T(F32, {2, 2, 3}, x), T(F32, {2, 3}, gamma), T(F32, {2, 3}, beta)},
         {T(F32, {2, 2, 3}, normRows(x, gamma, &beta, 6, 1e-5))},
         1e-6});
    std::vector<double> g3 = {1, 2, 0.5};
    add({"rms_norm_last_axis",
         {"f32[4, 3]", "f32[3]"},
         op(OpCode::RmsNorm),
         {T(F32, {4, 3}, x), T(F32, {3}, g3)},
         {T(F32, {4, 3}, normRows(x, g3, nullptr, 3, 1e-6))},
         1e-6});
  }
  std::vector<double> gx = {-1, 0, 1, 2, -3.5};
  add({"gelu_erf",
       {"f32[5]"},
       op(OpCode::Gelu),
       {T(F32, {5}, gx)},
       {T(F32, {5},
          mapF(
              gx, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, F32))},
       1e-6});
  add({"gelu_tanh",
       {"f32[5]"},
       op(OpCode::Gelu, Attrs{{"approximate", std::string("tanh")}}),
       {T(F32, {5}, gx)},
       {T(F32, {5},
          mapF(
              gx,
              [](double v) {
                double c = std::sqrt(2 / std::numbers::pi);
                return 0.5 * v * (1 + std::tanh(c * (v + 0.044715 * v * v * v)));
              },
              F32))},
       1e-6});
  add({"silu",
       {"f32[5]"},
       op(OpCode::Silu),
       {T(F32, {5}, gx)},
       {T(F32, {5},
          mapF(
              gx, [](double v) { return v / (1 + std::exp(-v)); }, F32))},
       1e-6});

  // ---- random_uniform, gather, argmax / argmin ----
  // random_uniform's expected values come from support/philox.h's philoxWord (checked against
  // Random123's known answers in tests/support/test_philox.cpp): the cases check the element ->
  // counter layout and the word -> value mapping of each dtype.
  auto randomOp = [](ir::Shape s, ir::DType t) {
    return [=](ir::GraphBuilder& b, const std::vector<int>& in) {
      return std::vector<int>{
          b.addOp(OpCode::RandomUniform, {in[0], in[1]}, Attrs{{"shape", s}, {"dtype", t}})};
    };
  };
  {
    const int64_t seed = 0x299f31d0a4093822, offset = 0x0370734413198a2e;
    std::vector<double> f32v, f64v;
    std::vector<uint16_t> bf;
    for (uint64_t i = 0; i < 6; ++i) {
      uint32_t w = philoxWord(seed, offset, i);
      f32v.push_back(static_cast<double>(w >> 8) / 16777216.0);
      f64v.push_back(static_cast<double>(w) / 4294967296.0);
      bf.push_back(ir::bf16Bits(static_cast<double>(w >> 24) / 256.0));
    }
    add({"random_uniform_f32",
         {"i64[]", "i64[]"},
         randomOp({Dim::of(2), Dim::of(3)}, F32),
         {Ti(I64, {}, {seed}), Ti(I64, {}, {offset})},
         {T(F32, {2, 3}, f32v)}});
    add({"random_uniform_f64",
         {"i64[]", "i64[]"},
         randomOp({Dim::of(6)}, F64),
         {Ti(I64, {}, {seed}), Ti(I64, {}, {offset})},
         {T(F64, {6}, f64v)}});
    add({"random_uniform_bf16",
         {"i64[]", "i64[]"},
         randomOp({Dim::of(3), Dim::of(2)}, BF16),
         {Ti(I64, {}, {seed}), Ti(I64, {}, {offset})},
         {Th(BF16, {3, 2}, bf)}});
  }
  add({"gather_axis1",
       {"f32[2, 3]", "i64[2, 4]"},
       op(OpCode::Gather, Attrs{{"axis", int64_t{1}}}),
       {T(F32, {2, 3}, {1, 2, 3, 4, 5, 6}), Ti(I64, {2, 4}, {2, 0, 1, 2, 1, 1, 2, 0})},
       {T(F32, {2, 4}, {3, 1, 2, 3, 5, 5, 6, 4})}});
  add({"check_index_passes_its_index",
       {"i32[2, 2]"},
       op(OpCode::CheckIndex, Attrs{{"size", ir::Shape{Dim::of(3)}}}),
       {Ti(I32, {2, 2}, {0, 2, 1, 0})},
       {Ti(I32, {2, 2}, {0, 2, 1, 0})}});
  add({"gather_axis0_i32_index",
       {"i32[3, 2]", "i32[1, 2]"},
       op(OpCode::Gather, Attrs{{"axis", int64_t{-2}}}),
       {Ti(I32, {3, 2}, {10, 11, 20, 21, 30, 31}), Ti(I32, {1, 2}, {2, 1})},
       {Ti(I32, {1, 2}, {30, 21})}});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  add({"argmax_ties_nan_inf",
       {"f32[4, 3]"},
       op(OpCode::Argmax, Attrs{{"axis", int64_t{1}}}),
       {T(F32, {4, 3}, {1, 3, 3, 2, nan, 5, -inf, -inf, -inf, 7, inf, nan})},
       {Ti(I64, {4}, {1, 1, 0, 2})}});
  add({"argmin_keepdims_axis0",
       {"f32[3, 2]"},
       op(OpCode::Argmin, Attrs{{"axis", int64_t{0}}, {"keepdims", true}}),
       {T(F32, {3, 2}, {2, nan, -1, 4, -1, nan})},
       {Ti(I64, {1, 2}, {1, 0})}});
  add({"argmax_int",
       {"i32[2, 3]"},
       op(OpCode::Argmax, Attrs{{"axis", int64_t{-1}}}),
       {Ti(I32, {2, 3}, {kI32Min, kI32Min, kI32Min, 4, 9, 9})},
       {Ti(I64, {2}, {0, 1})}});

  // ---- A small multi-op graph, as a backend would see it: bias + relu, then a row max. ----
  add({"chain_bias_relu_rowmax",
       {"f32[2, 3]", "f32[3]"},
       [](ir::GraphBuilder& b, const std::vector<int>& in) {
         int s = b.addOp(OpCode::Add, {in[0], in[1]}, {});
         int r = b.addOp(OpCode::Relu, {s}, {});
         int m = b.addOp(OpCode::ReduceMax, {r},
                         Attrs{{"axes", std::vector<int64_t>{1}}, {"keepdims", true}});
         return std::vector<int>{r, m};
       },
       {T(F32, {2, 3}, {1, -5, 2, -1, -2, -3}), T(F32, {3}, {0, 1, -1})},
       {T(F32, {2, 3}, {1, 0, 1, 0, 0, 0}), T(F32, {2, 1}, {1, 0})}});
  return cs;
}

class RefOp : public ::testing::TestWithParam<Case> {};

TEST_P(RefOp, MatchesHandComputed) {
  const Case& c = GetParam();
  ir::Graph g = buildGraph(c);
  std::vector<Buffer> in;
  for (const Tensor& t : c.inputs) in.emplace_back(t);
  std::vector<TensorView> views;
  for (const Buffer& b : in) views.push_back(b.view());
  std::vector<Buffer> out;
  for (const Tensor& t : c.expected) out.emplace_back(t.dtype, t.shape);
  std::vector<MutTensorView> outViews;
  for (Buffer& b : out) outViews.push_back(b.mut());
  evaluate(g, views, outViews);
  for (size_t k = 0; k < out.size(); ++k)
    expectTensor(out[k], c.expected[k], c.rtol, c.name + " output " + std::to_string(k));
}

INSTANTIATE_TEST_SUITE_P(Ops, RefOp, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<Case>& p) { return p.param.name; });

// A newly added op must come with a reference test in the table above.
TEST(RefOpCoverage, EveryOpHasACase) {
  std::set<OpCode> seen;
  for (const Case& c : allCases()) {
    ir::Graph g = buildGraph(c);  // named: a temporary would die before the loop body
    for (const ir::Node& n : g.nodes()) seen.insert(n.op);
  }
  for (OpCode op : ir::allOps()) {
    if (op == OpCode::Input || op == OpCode::Constant) continue;
    EXPECT_TRUE(seen.count(op)) << "op '" << ir::opName(op)
                                << "' has no case in test_reference_ops.cpp";
  }
}

// An index outside its range is the evaluation's error, never a clamp: IndexOutOfRange naming
// the graph, the op, the first bad index in element order and the size.
TEST(RefIndexChecks, AnIndexOutOfRangeIsAnError) {
  struct Bad {
    Case c;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {{"g",
        {"f32[2, 3]", "i64[2, 2]"},
        op(OpCode::Gather, Attrs{{"axis", int64_t{1}}}),
        {T(F32, {2, 3}, {1, 2, 3, 4, 5, 6}), Ti(I64, {2, 2}, {0, 3, -1, 9})},
        {T(F32, {2, 2}, {0, 0, 0, 0})}},
       "graph 'g': gather 't0' (axis 1): index 3 is out of bounds for size 3"},
      {{"g",
        {"i32[3]"},
        op(OpCode::CheckIndex, Attrs{{"size", ir::Shape{Dim::of(2)}}}),
        {Ti(I32, {3}, {1, -2, 5})},
        {Ti(I32, {3}, {0, 0, 0})}},
       "graph 'g': check_index 't0': index -2 is out of bounds for size 2"},
      // An empty axis (a symbol bound to 0) has no index in range.
      {{"g",
        {"f32[2, M]", "i64[2, 1]"},
        op(OpCode::Gather, Attrs{{"axis", int64_t{1}}}),
        {T(F32, {2, 0}, {}), Ti(I64, {2, 1}, {0, 0})},
        {T(F32, {2, 1}, {0, 0})}},
       "index 0 is out of bounds for size 0"},
  };
  for (const Bad& b : bad) {
    ir::Graph g = buildGraph(b.c);
    std::vector<Buffer> in;
    for (const Tensor& t : b.c.inputs) in.emplace_back(t);
    std::vector<TensorView> views;
    for (const Buffer& x : in) views.push_back(x.view());
    std::vector<Buffer> out;
    for (const Tensor& t : b.c.expected) out.emplace_back(t.dtype, t.shape);
    std::vector<MutTensorView> outViews;
    for (Buffer& x : out) outViews.push_back(x.mut());
    try {
      evaluate(g, views, outViews);
      ADD_FAILURE() << b.message << ": no error";
    } catch (const ::stitch::Error& e) {
      EXPECT_EQ(e.code(), ::stitch::ErrorCode::IndexOutOfRange);
      EXPECT_NE(e.message().find(b.message), std::string::npos) << e.message();
    }
  }
}

}  // namespace
}  // namespace stitch::reference::testing
