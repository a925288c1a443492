// f32 exp and erf as straight-line LLVM IR (the host emitter's two hot transcendentals).
//
// Design note. The emitter calls libm for transcendentals and the JIT maps those calls to SLEEF's
// vector functions (runtime/cpu/math_library.h). Two of them sit on the paths that decide the
// host's speed, and as calls they cost more than the memory traffic around them: exp (softmax,
// log-softmax, cross-entropy, sigmoid, SiLU) and erf (exact GELU). SLEEF's erff16_u10 takes
// 2.3 ns an element on one core of the dev VM (bias + GELU + residual ran at 24% of copy
// bandwidth), expf16_u10 0.28 ns; a call also makes every vector value live across it spill,
// as x86-64 has no callee-saved vector registers. Inline, the loop vectorizer widens these
// polynomials to the host's width like any other arithmetic, in the vector body and the scalar
// remainder alike.
//
// Both are range reduction plus a polynomial or rational function fitted for this code
// (scripts/fit_inline_math.py prints the coefficients and the error):
// - exp: e^x = 2^k e^r, r = x - k ln 2 (Cody-Waite), e^r = 1 + r + r^2 q(r), q of degree 4;
//   2^k is applied in two steps so that subnormal results round once. Within 1 ULP over the
//   normal range (0.99 measured in f32 with FMA); x > 88.72 gives +inf, x < -103.97 gives 0,
//   NaN stays NaN.
// - erf: x P(x^2) / Q(x^2) on |x| <= 4, P and Q of degree 5 (all coefficients positive: no
//   cancellation), +-1 beyond. Within 6 ULP (5.2 measured; absolute error <= 3.2e-7), with full
//   relative accuracy near 0 (unlike 1 - poly * exp(-x^2) forms); NaN stays NaN.
// SLEEF's u10 functions are within 1 ULP; both are far inside DESIGN.md's f32 tolerance
// (1e-4, some 800 ULP), and f16/bf16, computed in f32 and rounded, see at most one ULP of theirs
// change next to a rounding boundary.
//
// Multiply-adds are llvm.fmuladd: fused where the host has FMA (the coefficients were checked
// that way), two roundings where not.
#pragma once

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace stitch::codegen {

// e^x and erf(x) of an f32 value.
llvm::Value* emitExpF32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emitErfF32(llvm::IRBuilderBase& b, llvm::Value* x);

}  // namespace stitch::codegen
