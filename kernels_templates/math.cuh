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
// sin and cos: the vendor libraries reduce huge arguments (Payne-Hanek) through a local array,
// which ptxas reports as a stack frame with spills in every kernel that calls them. Instead the
// argument is reduced by pi/2 in double precision (pi/2 as two doubles: exact enough for any
// |x| < 2^40) and the quarter-period polynomials are evaluated in double; the result is within
// an f32 ulp for f32, and ~1e-15 relative for f64 (DESIGN.md's tolerance is 1e-4).
STITCH_DEVICE double sincos_quadrant(double x, bool cosine) {
  const double k = rint(x * 0.63661977236758134308);  // 2 / pi
  double r = fma(-k, 1.5707963267948965580, x);       // pi/2, high part
  r = fma(-k, 6.1232339957367658e-17, r);             // pi/2, low part
  long long q = static_cast<long long>(k) + (cosine ? 1 : 0);
  const double r2 = r * r;
  const double s =
      r + r * r2 *
              (-1.6666666666666666e-1 +
               r2 * (8.3333333333333333e-3 +
                     r2 * (-1.9841269841269841e-4 +
                           r2 * (2.7557319223985891e-6 +
                                 r2 * (-2.5052108385441719e-8 + r2 * 1.6059043836821615e-10)))));
  const double c =
      1.0 +
      r2 * (-0.5 + r2 * (4.1666666666666667e-2 +
                         r2 * (-1.3888888888888889e-3 +
                               r2 * (2.4801587301587302e-5 +
                                     r2 * (-2.7557319223985891e-7 + r2 * 2.0876756987868099e-9)))));
  switch (q & 3) {
    case 0: return s;
    case 1: return c;
    case 2: return -s;
    default: return -c;
  }
}
STITCH_DEVICE float sin_(float x) { return static_cast<float>(sincos_quadrant(x, false)); }
STITCH_DEVICE double sin_(double x) { return sincos_quadrant(x, false); }
STITCH_DEVICE float cos_(float x) { return static_cast<float>(sincos_quadrant(x, true)); }
STITCH_DEVICE double cos_(double x) { return sincos_quadrant(x, true); }
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
// Written with selects only: ptxas gave the branchy form an 8-byte stack frame (reported as
// spills) in some kernels. Equal operands are combined bitwise so that max(-0, +0) = +0 and
// min(-0, +0) = -0; a NaN operand makes a + b, a NaN.
STITCH_DEVICE float fmaximum(float a, float b) {
  const float m = a == b ? __int_as_float(__float_as_int(a) & __float_as_int(b)) : (a > b ? a : b);
  return (a != a || b != b) ? a + b : m;
}
STITCH_DEVICE double fmaximum(double a, double b) {
  const double m = a == b ? __longlong_as_double(__double_as_longlong(a) & __double_as_longlong(b))
                          : (a > b ? a : b);
  return (a != a || b != b) ? a + b : m;
}
STITCH_DEVICE float fminimum(float a, float b) {
  const float m = a == b ? __int_as_float(__float_as_int(a) | __float_as_int(b)) : (a < b ? a : b);
  return (a != a || b != b) ? a + b : m;
}
STITCH_DEVICE double fminimum(double a, double b) {
  const double m = a == b ? __longlong_as_double(__double_as_longlong(a) | __double_as_longlong(b))
                          : (a < b ? a : b);
  return (a != a || b != b) ? a + b : m;
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
