// Helpers shared by the reference interpreter tests: tensors written as literal values, native
// buffers for them, and a parser for "f32[N, 3]" types so graphs read like the text format.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "reference/interpreter.h"

namespace stitch::reference::testing {

using Dims = std::vector<int64_t>;

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// A tensor given by value: floats as doubles, ints/bools as int64. For f16/bf16, `bits` may hold
// the expected bit patterns, which are then compared bit for bit.
struct Tensor {
  ir::DType dtype = ir::DType::F32;
  Dims shape;
  std::vector<double> f;
  std::vector<int64_t> i;
  std::vector<uint16_t> bits;

  HostTensor host() const {
    HostTensor h;
    h.dtype = dtype;
    h.shape = shape;
    h.floats = f;
    h.ints = i;
    return h;
  }
};

inline Tensor T(ir::DType t, Dims shape, std::vector<double> v) {
  Tensor r{t, std::move(shape), {}, {}, {}};
  // Inputs must be representable in their dtype; rounding here keeps literals like 0.1 usable.
  for (double x : v) r.f.push_back(ir::roundToFloat(x, t));
  return r;
}
inline Tensor Ti(ir::DType t, Dims shape, std::vector<int64_t> v) {
  return Tensor{t, std::move(shape), {}, std::move(v), {}};
}
inline Tensor Tb(Dims shape, std::vector<int64_t> v) {
  return Tensor{ir::DType::Bool, std::move(shape), {}, std::move(v), {}};
}
// f16 / bf16 given by bit patterns.
inline Tensor Th(ir::DType t, Dims shape, std::vector<uint16_t> bits) {
  Tensor r{t, std::move(shape), {}, {}, bits};
  for (uint16_t b : bits) r.f.push_back(t == ir::DType::F16 ? ir::f16Value(b) : ir::bf16Value(b));
  return r;
}
inline double r32(double x) { return ir::roundToFloat(x, ir::DType::F32); }

// A native row-major buffer holding a tensor.
struct Buffer {
  ir::DType dtype;
  Dims shape;
  std::vector<std::byte> bytes;

  explicit Buffer(const Tensor& t) : dtype(t.dtype), shape(t.shape) {
    bytes.resize(static_cast<size_t>(t.host().numel() * ir::dtypeBytes(t.dtype)));
    encode(t.host(), mut());
  }
  Buffer(ir::DType t, Dims s) : dtype(t), shape(std::move(s)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    bytes.resize(static_cast<size_t>(n * ir::dtypeBytes(t)));
  }
  TensorView view() const { return {dtype, shape, bytes.data()}; }
  MutTensorView mut() { return {dtype, shape, bytes.data()}; }
  uint16_t bits16(size_t e) const {
    uint16_t v;
    std::memcpy(&v, bytes.data() + 2 * e, 2);
    return v;
  }
};

// "f32[N, 3]" -> TensorType; "f32[]" is a scalar.
inline ir::TensorType ty(std::string_view s) {
  auto open = s.find('[');
  ir::TensorType t;
  t.dtype = *ir::parseDType(s.substr(0, open));
  std::string_view dims = s.substr(open + 1, s.size() - open - 2);
  while (!dims.empty()) {
    auto comma = dims.find(',');
    std::string d(dims.substr(0, comma));
    d.erase(0, d.find_first_not_of(' '));
    if (std::isdigit(static_cast<unsigned char>(d[0])) || d[0] == '-')
      t.shape.push_back(ir::Dim::of(std::stoll(d)));
    else t.shape.push_back(ir::Dim::sym(d));
    dims = comma == std::string_view::npos ? std::string_view{} : dims.substr(comma + 1);
  }
  return t;
}

// Compares an output with its expected value: exact when rtol is 0 (NaN matches NaN; f16/bf16
// with `bits` bit for bit), else |got - want| <= rtol * (1 + |want|).
inline void expectTensor(const Buffer& got, const Tensor& want, double rtol,
                         const std::string& what) {
  ASSERT_EQ(got.dtype, want.dtype) << what;
  ASSERT_EQ(got.shape, want.shape) << what;
  HostTensor h = decode(got.view());
  int64_t n = h.numel();
  ASSERT_EQ(static_cast<size_t>(n), ir::isFloat(want.dtype) ? want.f.size() : want.i.size())
      << what << ": the expected tensor has the wrong element count";
  for (int64_t e = 0; e < n; ++e) {
    auto k = static_cast<size_t>(e);
    if (!want.bits.empty()) {
      EXPECT_EQ(got.bits16(k), want.bits[k]) << what << " element " << e << std::hex;
    } else if (ir::isFloat(want.dtype)) {
      double g = h.floats[k], w = want.f[k];
      if (std::isnan(w)) EXPECT_TRUE(std::isnan(g)) << what << " element " << e << ": got " << g;
      else if (rtol == 0 || std::isinf(w)) EXPECT_EQ(g, w) << what << " element " << e;
      else EXPECT_NEAR(g, w, rtol * (1 + std::fabs(w))) << what << " element " << e;
    } else {
      EXPECT_EQ(h.ints[k], want.i[k]) << what << " element " << e;
    }
  }
}

}  // namespace stitch::reference::testing
