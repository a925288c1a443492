#include "runtime/support/dtype.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace stitch::ir {

namespace {

constexpr std::array<std::string_view, kNumDTypes> kNames = {"f16", "bf16", "f32", "f64",
                                                             "i32", "i64",  "bool"};
constexpr std::array<int, kNumDTypes> kBytes = {2, 2, 4, 8, 4, 8, 1};

// IEEE-style binary format: `mant` explicit mantissa bits, normal exponents in [emin, emax].
struct Format {
  int mant;
  int emin;
  int emax;
};

// Rounds to the nearest integer, ties to even, independently of the current rounding mode.
double roundHalfEven(double v) {
  double r = std::floor(v);
  double diff = v - r;
  if (diff > 0.5 || (diff == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  return r;
}

double roundToFormat(double x, Format f) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0) return x;
  double a = std::fabs(x);
  int e;
  std::frexp(a, &e);               // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;                 // a in [2^exp, 2^(exp+1))
  if (exp < f.emin) exp = f.emin;  // subnormal: fixed spacing 2^(emin - mant)
  // Scaling by a power of two is exact in f64 for every format we round to.
  double q = roundHalfEven(std::ldexp(a, f.mant - exp));
  double r = std::ldexp(q, exp - f.mant);
  double maxFinite = std::ldexp(2.0 - std::ldexp(1.0, -f.mant), f.emax);
  if (r > maxFinite) r = std::numeric_limits<double>::infinity();
  return std::copysign(r, x);
}

constexpr Format kF16{10, -14, 15};
constexpr Format kBF16{7, -126, 127};
constexpr Format kF32{23, -126, 127};

}  // namespace

std::string_view dtypeName(DType t) { return kNames[static_cast<int>(t)]; }

std::optional<DType> parseDType(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kNames[i] == name) return static_cast<DType>(i);
  return std::nullopt;
}

int dtypeBytes(DType t) { return kBytes[static_cast<int>(t)]; }

double roundToFloat(double x, DType t) {
  switch (t) {
    case DType::F16: return roundToFormat(x, kF16);
    case DType::BF16: return roundToFormat(x, kBF16);
    case DType::F32: return roundToFormat(x, kF32);
    case DType::F64: return x;
    case DType::I32:
    case DType::I64:
    case DType::Bool: break;
  }
  return x;
}

uint16_t f16Bits(double v) {
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return 0x7e00;
  double a = std::fabs(v);
  if (std::isinf(a)) return sign | 0x7c00;
  if (a == 0.0) return sign;
  int e;
  std::frexp(a, &e);
  int exp = e - 1;
  if (exp < -14) return sign | static_cast<uint16_t>(std::ldexp(a, 24));  // subnormal
  auto mant = static_cast<uint16_t>(std::ldexp(a, 10 - exp) - 1024.0);
  return sign | static_cast<uint16_t>((exp + 15) << 10) | mant;
}

double f16Value(uint16_t bits) {
  double sign = (bits & 0x8000) ? -1.0 : 1.0;
  int exp = (bits >> 10) & 0x1f;
  int mant = bits & 0x3ff;
  if (exp == 0x1f)
    return mant ? std::numeric_limits<double>::quiet_NaN()
                : sign * std::numeric_limits<double>::infinity();
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

uint16_t bf16Bits(double v) {
  if (std::isnan(v)) return 0x7fc0;
  auto f = static_cast<float>(v);  // exact: v is representable in bf16, hence in f32
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16);
}

double bf16Value(uint16_t bits) {
  return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(bits) << 16));
}

int64_t floatToInt(double x, DType t) {
  if (std::isnan(x)) return 0;
  double lo = t == DType::I32 ? -2147483648.0 : -9223372036854775808.0;
  double hi = t == DType::I32 ? 2147483647.0 : 9223372036854775807.0;
  double v = std::trunc(x);
  if (v <= lo) return t == DType::I32 ? INT32_MIN : INT64_MIN;
  if (v >= hi) return t == DType::I32 ? INT32_MAX : INT64_MAX;
  return static_cast<int64_t>(v);
}

}  // namespace stitch::ir
