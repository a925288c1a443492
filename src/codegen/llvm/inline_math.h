// f32 exp, erf, tanh, log and log1p as straight-line LLVM IR (the host emitter's transcendentals
// on the paths that decide its speed).
//
// Design note. The emitter calls libm for transcendentals and the JIT maps those calls to SLEEF's
// vector functions (runtime/cpu/math_library.h). As calls they cost more than the memory traffic
// around them: exp (softmax, log-softmax, cross-entropy, sigmoid, SiLU), erf (exact GELU), tanh
// (the tanh-approximated GELU of GPT-2 and its backward), log and log1p (log-softmax's and
// cross-entropy's logsumexp, softplus, BCE). SLEEF's erff16_u10 takes 2.3 ns an element on one
// core of the dev VM (bias + GELU + residual ran at 24% of copy bandwidth), expf16_u10 0.28 ns;
// on a host without AVX-512 SLEEF's AVX2 tanh took 8.3x the time of a copy of its bytes and log
// 4.7x. A call also makes every vector value live across it spill, as x86-64 has no
// callee-saved vector registers. Inline, the loop vectorizer widens these polynomials to the
// host's width (AVX2 or AVX-512 alike) like any other arithmetic, in the vector body and the
// scalar remainder alike.
//
// Each is a range reduction plus a polynomial or rational function fitted for this code
// (scripts/fit_inline_math.py prints the coefficients and the error):
// - exp: e^x = 2^k e^r, r = x - k ln 2 (Cody-Waite), e^r = 1 + r + r^2 q(r), q of degree 4;
//   2^k is applied in two steps so that subnormal results round once. Within 1 ULP over the
//   normal range (0.99 measured in f32 with FMA); x > 88.72 gives +inf, x < -103.97 gives 0,
//   NaN stays NaN.
// - erf: x P(x^2) / Q(x^2) on |x| <= 4, P and Q of degree 5 (all coefficients positive: no
//   cancellation), +-1 beyond. Within 6 ULP (5.2 measured; absolute error <= 3.2e-7), with full
//   relative accuracy near 0 (unlike 1 - poly * exp(-x^2) forms); NaN stays NaN.
// - tanh: x P(x^2) / Q(x^2) on |x| <= 9, P and Q of degree 4, +-1 beyond (tanh(9) is the last
//   f32 below 1). Within 6 ULP (5.3 measured with FMA, 5.9 without), full relative accuracy
//   near 0 (no 1 - 2 / (e^2x + 1) cancellation); NaN stays NaN.
// - log: x = 2^e m, m in [sqrt(1/2), sqrt(2)) by integer arithmetic on the bits (subnormals
//   scaled by 2^23 first), log m = f + f^2 q(f), f = m - 1, q of degree 7, plus e ln 2 in two
//   parts. Within 2 ULP (1.13 measured); 0 gives -inf, below 0 NaN, +inf and NaN pass through.
// - log1p: log(u) + (x - (u - 1)) / u, u = 1 + x rounded (the quotient restores what rounding u
//   lost; 1 / u as 2 - u, accurate enough for a correction below half an ULP, and no division);
//   x where u is 1. Within 3 ULP (1.73 measured); -1 gives -inf.
// SLEEF's u10 functions are within 1 ULP; all are far inside DESIGN.md's f32 tolerance
// (1e-4, some 800 ULP) and PyTorch's (rtol 1.3e-6, some 10 ULP), and f16/bf16, computed in f32
// and rounded, see at most one ULP of theirs change next to a rounding boundary. f64 keeps
// libm / SLEEF.
//
// Multiply-adds are llvm.fmuladd: fused where the host has FMA (the coefficients were checked
// that way), two roundings where not.
#pragma once

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace stitch::codegen {

// e^x, erf(x), tanh(x), log(x) and log1p(x) of an f32 value.
llvm::Value* emitExpF32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitErfF32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitTanhF32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitLogF32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitLog1pF32(llvm::IRBuilderBase& b, llvm::Value* x);

}  // namespace stitch::codegen
