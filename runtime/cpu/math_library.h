// The host backend's math library: SLEEF (https://sleef.org, Debian's libsleef-dev 3.5.1).
//
// Why SLEEF: it is packaged by Debian (and most distributions), maintained, has one function per
// operation in scalar form and at every x86 vector width (SSE 4 x f32 / 2 x f64, AVX 8 / 4,
// AVX-512 16 / 8), documents the error bound of each (the _u10 functions are within 1.0 ULP,
// the _u35 ones 3.5 ULP, over the whole input range, with C99's special values), and its vector
// entry points dispatch at run time to the best code for the running CPU (FMA or not, AVX2 or
// AVX). glibc's libmvec has exp/log/sin/cos/pow only (no erf, tanh or log1p), documented to
// 4 ULP, and is not the code of the scalar libm functions that run in a loop's remainder.
//
// The contract between the LLVM emitter (src/codegen/llvm, which includes this header) and the
// JIT: the emitter calls the scalar _u10 function of every transcendental but sqrt (exp log log1p
// tanh erf sin cos pow; sigmoid through exp); the JIT (vector_math.h) binds every name below to its
// address and tells the loop vectorizer the vector version of each scalar one at each width the
// host has, so a vectorized loop body and its scalar remainder compute the same functions within
// the same 1.0 ULP bound. u10 everywhere: DESIGN.md's tolerances (f32 rtol = atol = 1e-4, f64 1e-4,
// f16 1e-2, bf16 4e-2; the reference interpreter computes in f64 with libm and rounds once) are at
// least 800 f32 ULPs, so 1 ULP (or the 3.5 of u35) is far inside them; in f64, u10 keeps results
// within 1 ULP of the exact value, as close as the reference's libm. f16/bf16 compute in f32 and
// round to their dtype: a 1-ULP f32 error changes that rounding only for values next to a rounding
// boundary, and then by one f16/bf16 ULP. The price of one bound everywhere: a loop the vectorizer
// leaves scalar (a strided walk, a loop it finds unprofitable) calls SLEEF's scalar functions,
// which are slower than glibc's scalar libm (about 1.5-2x with FMA; vector_math.h has the figures).
#pragma once

#include <string>
#include <string_view>

// Every SLEEF function the emitter calls: X(name, arity). Scalar and vector names follow from it
// (sleefScalarName, sleefVectorName).
#define STITCH_SLEEF_FUNCTIONS(X) \
  X(exp, 1)                       \
  X(log, 1)                       \
  X(log1p, 1)                     \
  X(tanh, 1)                      \
  X(erf, 1)                       \
  X(sin, 1)                       \
  X(cos, 1)                       \
  X(pow, 2)

namespace stitch::rt::cpu {

// Sleef_expf_u10 (f32) / Sleef_exp_u10 (f64).
inline std::string sleefScalarName(std::string_view base, bool f32) {
  return "Sleef_" + std::string(base) + (f32 ? "f" : "") + "_u10";
}

// Sleef_expf16_u10 (16 x f32) / Sleef_expd8_u10 (8 x f64).
inline std::string sleefVectorName(std::string_view base, bool f32, int lanes) {
  return "Sleef_" + std::string(base) + (f32 ? "f" : "d") + std::to_string(lanes) + "_u10";
}

}  // namespace stitch::rt::cpu
