// The host backend's math library: glibc's libm for scalar code, SLEEF (https://sleef.org,
// Debian's libsleef-dev 3.5.1) for vectorized loops.
//
// Why SLEEF for vectors: it is packaged by Debian (and most distributions), maintained, has every
// function the IR needs at every x86 vector width (SSE 4 x f32 / 2 x f64, AVX 8 / 4, AVX-512
// 16 / 8), documents the error bound of each (the _u10 functions are within 1.0 ULP, the _u35
// ones 3.5 ULP, over the whole input range, with C99's special values), and its vector entry
// points dispatch at run time to the best code for the running CPU (FMA or not, AVX2 or AVX).
// glibc's libmvec has exp/log/sin/cos/pow only (no erf, tanh or log1p), documented to 4 ULP.
//
// Why libm for scalars: a loop the vectorizer leaves scalar (a broadcast's i % n index it cannot
// bound for its overlap checks, a strided walk) calls the scalar function per element, and
// SLEEF's scalar functions are 1.5 to 5 times slower than glibc's (measured on this machine:
// erff 31-46 ns against 19, tanhf 22-50 against 14, expf 7-16 against 3.3): bias + GELU(erf) +
// residual ran 3.5x slower with them. So the scalar code (such loops, and a vectorized loop's
// remainder) calls glibc's erff/tanhf/expf/... and the vector body SLEEF's _u10 functions.
//
// The contract between the LLVM emitter (src/codegen/llvm, which includes this header) and the
// JIT: the emitter calls the libm function of every transcendental but sqrt (exp log log1p tanh
// erf sin cos pow; sigmoid through exp), marked pure, except f32 exp and erf, which it emits as
// inline polynomial code (src/codegen/llvm/inline_math.h: as calls they cost more than the
// memory traffic of softmax and exact GELU; the functions stay bound for f64); the JIT
// (vector_math.h) binds those names and SLEEF's vector functions to their addresses and tells the
// loop vectorizer the vector version of each libm function at each width the host has.
//
// Accuracy: SLEEF's u10 functions are within 1.0 ULP; glibc lists known maximum errors of 1 to 2
// ULP for these functions on x86-64. DESIGN.md's tolerances (f32 rtol = atol = 1e-4, f64 1e-4,
// f16 1e-2, bf16 4e-2; the reference interpreter computes in f64 with libm and rounds once) are
// at least 800 f32 ULPs, so either is far inside them (u35's 3.5 ULP would be too; u10 is used
// so the vector body is no worse than the scalar code). Measured against the function computed
// in double (OrcJit.TranscendentalsCallSleefVectorFunctionsWithinTheirBound), vectorized and
// scalar, every one is within 3 ULP. f16/bf16 compute in f32 and round to their dtype: a 1-ULP f32
// error changes that rounding only for values next to a rounding boundary, and then by one
// f16/bf16 ULP.
#pragma once

#include <string>
#include <string_view>

// Every transcendental the emitter calls: X(name, arity). Scalar (libm) and vector (SLEEF)
// names follow from it (mathScalarName, sleefVectorName).
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

// expf (f32) / exp (f64): glibc's libm.
inline std::string mathScalarName(std::string_view base, bool f32) {
  return std::string(base) + (f32 ? "f" : "");
}

// Sleef_expf16_u10 (16 x f32) / Sleef_expd8_u10 (8 x f64).
inline std::string sleefVectorName(std::string_view base, bool f32, int lanes) {
  return "Sleef_" + std::string(base) + (f32 ? "f" : "d") + std::to_string(lanes) + "_u10";
}

}  // namespace stitch::rt::cpu
