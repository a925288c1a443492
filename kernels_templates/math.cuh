// stitch/math.cuh: the elementwise semantics of the reference interpreter, on the device.
//
// One overload per compute type (float for f16/bf16/f32, double for f64, int/i64 for ints), so
// the emitter prints the same call whatever the dtype. The rules are the reference's
// (src/reference/interpreter.h): maximum/minimum and relu propagate NaN; integer division by zero
// is 0 and INT_MIN / -1 wraps; integer neg/abs/add/sub/mul wrap (computed unsigned: signed
// overflow is undefined in C++); float->int truncates and saturates, NaN -> 0.
#pragma once
#include "stitch/types.cuh"

namespace stitch {

// ---- transcendental functions, by compute type -------------------------------------------------
STITCH_DEVICE float exp_(float x) { return expf(x); }
STITCH_DEVICE double exp_(double x) { return exp(x); }
STITCH_DEVICE float log_(float x) { return logf(x); }
STITCH_DEVICE double log_(double x) { return log(x); }
STITCH_DEVICE float log1p_(float x) { return log1pf(x); }
STITCH_DEVICE double log1p_(double x) { return log1p(x); }
STITCH_DEVICE float tanh_(float x) { return tanhf(x); }
STITCH_DEVICE double tanh_(double x) { return tanh(x); }
STITCH_DEVICE float erf_(float x) { return erff(x); }
STITCH_DEVICE double erf_(double x) { return erf(x); }
STITCH_DEVICE float sin_(float x) { return sinf(x); }
STITCH_DEVICE double sin_(double x) { return sin(x); }
STITCH_DEVICE float cos_(float x) { return cosf(x); }
STITCH_DEVICE double cos_(double x) { return cos(x); }
STITCH_DEVICE float sqrt_(float x) { return sqrtf(x); }
STITCH_DEVICE double sqrt_(double x) { return sqrt(x); }
STITCH_DEVICE float floor_(float x) { return floorf(x); }
STITCH_DEVICE double floor_(double x) { return floor(x); }
STITCH_DEVICE float ceil_(float x) { return ceilf(x); }
STITCH_DEVICE double ceil_(double x) { return ceil(x); }
STITCH_DEVICE float pow_(float x, float y) { return powf(x, y); }
STITCH_DEVICE double pow_(double x, double y) { return pow(x, y); }
STITCH_DEVICE float fabs_(float x) { return fabsf(x); }
STITCH_DEVICE double fabs_(double x) { return fabs(x); }

template <class T>
STITCH_DEVICE T rsqrt_(T x) {
  return T(1) / sqrt_(x);
}
template <class T>
STITCH_DEVICE T sigmoid_(T x) {
  return T(1) / (T(1) + exp_(-x));
}

// ---- NaN-propagating max/min (llvm.maximum semantics: -0 < +0) --------------------------------
STITCH_DEVICE bool negbit(float x) { return __float_as_int(x) < 0; }
STITCH_DEVICE bool negbit(double x) { return __double_as_longlong(x) < 0; }
template <class T>
STITCH_DEVICE T fmaximum(T a, T b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return negbit(a) ? b : a;
  return a > b ? a : b;
}
template <class T>
STITCH_DEVICE T fminimum(T a, T b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return negbit(a) ? a : b;
  return a < b ? a : b;
}
template <class T>
STITCH_DEVICE T frelu(T a) {  // relu(-0) = +0, relu(NaN) = NaN
  return a != a ? a : (a > T(0) ? a : T(0));
}

// ---- integers: two's-complement wrap, the reference's division ---------------------------------
template <class T>
struct Unsigned;
template <>
struct Unsigned<int> {
  typedef u32 type;
};
template <>
struct Unsigned<i64> {
  typedef u64 type;
};
template <class T>
STITCH_DEVICE T iadd(T a, T b) {
  typedef typename Unsigned<T>::type U;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <class T>
STITCH_DEVICE T isub(T a, T b) {
  typedef typename Unsigned<T>::type U;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <class T>
STITCH_DEVICE T imul(T a, T b) {
  typedef typename Unsigned<T>::type U;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}
template <class T>
STITCH_DEVICE T ineg(T a) {
  return isub<T>(T(0), a);
}
template <class T>
STITCH_DEVICE T iabs(T a) {
  return a < T(0) ? ineg(a) : a;
}
template <class T>
STITCH_DEVICE T idiv(T a, T b) {
  if (b == T(0)) return T(0);
  if (b == T(-1)) return ineg(a);
  return a / b;
}
template <class T>
STITCH_DEVICE T imax(T a, T b) {
  return a > b ? a : b;
}
template <class T>
STITCH_DEVICE T imin(T a, T b) {
  return a < b ? a : b;
}

// ---- casts -------------------------------------------------------------------------------------
// float -> int: truncate toward zero, saturate, NaN -> 0.
template <class I, class F>
STITCH_DEVICE I ftoi(F x);
template <>
STITCH_DEVICE int ftoi<int, float>(float x) {
  if (x != x) return 0;
  if (x >= 2147483648.0f) return 2147483647;
  if (x <= -2147483648.0f) return -2147483647 - 1;
  return static_cast<int>(x);
}
template <>
STITCH_DEVICE int ftoi<int, double>(double x) {
  if (x != x) return 0;
  if (x >= 2147483648.0) return 2147483647;
  if (x <= -2147483648.0) return -2147483647 - 1;
  return static_cast<int>(x);
}
template <>
STITCH_DEVICE i64 ftoi<i64, float>(float x) {
  if (x != x) return 0;
  if (x >= 9223372036854775808.0f) return 9223372036854775807ll;
  if (x <= -9223372036854775808.0f) return -9223372036854775807ll - 1;
  return static_cast<i64>(x);
}
template <>
STITCH_DEVICE i64 ftoi<i64, double>(double x) {
  if (x != x) return 0;
  if (x >= 9223372036854775808.0) return 9223372036854775807ll;
  if (x <= -9223372036854775808.0) return -9223372036854775807ll - 1;
  return static_cast<i64>(x);
}

}  // namespace stitch
