// pow with a constant exponent that is an integer or a half-integer, |e| <= 16, becomes
// multiplications, sqrt and a reciprocal, on every backend: pow is a transcendental call (exp and
// log inside), a product is one instruction, and x^2, x^3 (GELU's tanh form), x^-1, x^0.5, x^-0.5
// are common in real models.
//
//   x^n (n > 0 integer)  by repeated squaring (x^13 = x^8 * x^4 * x): at most 8 products
//   x^(n + 0.5)          x^n * sqrt(x);  x^0.5 = sqrt(x)
//   x^-e                 reciprocal(x^e);  x^-0.5 = rsqrt(x)
//   x^1 = x; x^0 = full(1) of x's shape (1 even for NaN, as pow says; only for static shapes)
//
// The exponent is a constant when it is a Constant, a full, or a broadcast_to/reshape of one
// (after constant folding, which runs first in each round of the pipeline); only pows whose result
// has x's shape are rewritten, so a broadcast by the exponent stays a pow.
//
// Semantics kept: pow of a negative x with a half-integer exponent is NaN, as sqrt of a negative
// is. pow(-inf, +-(n + 0.5)) is pow(+inf, ...) (+inf or +0) and pow(-0, +-(n + 0.5)) is
// pow(+0, ...) (+0 or +inf), where sqrt(-inf) is NaN and 1/sqrt(-0) is -inf: a half-integer
// power takes x = -inf or -0 as its magnitude first (a select). Integer powers are exact products,
// signs and infinities included; a negative power whose x^n overflows gives 0 where pow gives a
// subnormal (below 1.2e-38 in f32, far inside the reference tolerances). f16 and bf16 compute in
// f32 and round once at the end (as decomposed composites do), so the expansion's products do not
// add one f16 rounding each; in f32 the products' error is at most about 15 ULP (x^16's four
// squarings), within DESIGN.md's f32 tolerance (1e-4 relative) by far.
#pragma once

#include "ir/graph.h"

namespace stitch::passes {

ir::Graph expandPowers(const ir::Graph& g);

}  // namespace stitch::passes
