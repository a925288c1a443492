// Host buffers as DLTensors for the C API tests that run graphs (test_numerics.cpp,
// test_index_checks.cpp): a buffer for a graph's input or output with its symbols bound, and
// element access in every dtype (f16/bf16 exactly for the values the tests make).
#pragma once

#include <gtest/gtest.h>
#include <stitch/stitch.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <stitch/stitch.hpp>
#include <string>
#include <vector>

namespace stitch::apitest {

inline float halfToFloat(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
  float v = exp == 0    ? std::ldexp(static_cast<float>(man), -24)
            : exp == 31 ? (man ? NAN : INFINITY)
                        : std::ldexp(static_cast<float>(man | 1024), exp - 25);
  return sign ? -v : v;
}
inline uint16_t floatToHalf(float f) {  // exact for the values used here: [-1, 1] at f16 precision
  if (f == 0) return std::signbit(f) ? 0x8000 : 0;
  int e;
  float m = std::frexp(std::fabs(f), &e);  // f = m * 2^e, m in [0.5, 1)
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (e - 1 < -14) return sign | static_cast<uint16_t>(std::lround(std::ldexp(std::fabs(f), 24)));
  auto man = static_cast<uint16_t>(std::lround(std::ldexp(m, 11)) - 1024);
  return sign | static_cast<uint16_t>((e - 1 + 15) << 10) | man;
}

struct Buffer {
  DLDataType type{};
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  DLTensor tensor() {
    DLTensor t{};
    t.data = bytes.empty() ? nullptr : bytes.data();
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = type;
    t.shape = shape.data();
    return t;
  }
  bool isFloat() const { return type.code == kDLFloat || type.code == kDLBfloat; }
  double at(int64_t i) const {
    const uint8_t* p = bytes.data() + i * (type.bits / 8);
    uint16_t h;
    switch (type.code) {
      case kDLBfloat: {
        std::memcpy(&h, p, 2);
        uint32_t u = static_cast<uint32_t>(h) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
      }
      case kDLFloat:
        if (type.bits == 16) {
          std::memcpy(&h, p, 2);
          return halfToFloat(h);
        }
        if (type.bits == 32) {
          float f;
          std::memcpy(&f, p, 4);
          return f;
        } else {
          double d;
          std::memcpy(&d, p, 8);
          return d;
        }
      default:
        if (type.bits == 32) {
          int32_t v;
          std::memcpy(&v, p, 4);
          return v;
        } else {
          int64_t v;
          std::memcpy(&v, p, 8);
          return static_cast<double>(v);
        }
    }
  }
  void set(int64_t i, double v) {
    uint8_t* p = bytes.data() + i * (type.bits / 8);
    if (type.code == kDLBfloat) {
      auto f = static_cast<float>(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      auto h = static_cast<uint16_t>(u >> 16);  // exact: inputs are made at bf16 precision
      std::memcpy(p, &h, 2);
    } else if (type.code == kDLFloat && type.bits == 16) {
      uint16_t h = floatToHalf(static_cast<float>(v));
      std::memcpy(p, &h, 2);
    } else if (type.code == kDLFloat && type.bits == 32) {
      auto f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
    } else if (type.code == kDLFloat) {
      std::memcpy(p, &v, 8);
    } else if (type.bits == 32) {
      auto x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
    } else {
      auto x = static_cast<int64_t>(v);
      std::memcpy(p, &x, 8);
    }
  }
};

inline DLDataType typeOf(stitch_dtype_t t) {
  switch (t) {
    case STITCH_F16: return {kDLFloat, 16, 1};
    case STITCH_BF16: return {kDLBfloat, 16, 1};
    case STITCH_F32: return {kDLFloat, 32, 1};
    case STITCH_F64: return {kDLFloat, 64, 1};
    case STITCH_I32: return {kDLInt, 32, 1};
    default: return {kDLInt, 64, 1};
  }
}

// A buffer for input (or output) `index` of g with its dims bound by `dims`.
inline Buffer bufferFor(const stitch::Graph& g, bool output, size_t index,
                        const std::map<std::string, int64_t>& dims) {
  const char* name = nullptr;
  stitch_dtype_t dtype{};
  size_t rank = 0;
  stitch_dim_t d[8];
  EXPECT_EQ(stitch_graph_value_info(g.get(), output, index, &name, &dtype, &rank, d, 8), STITCH_OK);
  Buffer b;
  b.type = typeOf(dtype);
  for (size_t k = 0; k < rank; ++k)
    b.shape.push_back(d[k].symbol ? dims.at(d[k].symbol) : d[k].size);
  b.bytes.resize(static_cast<size_t>(b.numel() * (b.type.bits / 8)));
  return b;
}

}  // namespace stitch::apitest
