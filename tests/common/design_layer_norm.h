// DESIGN.md's layer normalization example, verbatim: the text-format contract's own sample, shared
// by the parser, fuzzer and explain tests.
#pragma once

namespace stitch::testdata {

inline constexpr const char* kDesignLayerNorm = R"(# Layer normalization over the last axis.
graph layer_norm(x: f32[N, 768], gamma: f32[768], beta: f32[768]) {
  mean = reduce_mean(x, axes=[1], keepdims=true)
  xc   = sub(x, mean)
  sq   = mul(xc, xc)
  var  = reduce_mean(sq, axes=[-1], keepdims=true)
  ve   = add(var, 1e-5)
  rstd = rsqrt(ve)
  xn   = mul(xc, rstd)
  y0   = mul(xn, gamma)
  y    = add(y0, beta)
  return y
}
)";

}  // namespace stitch::testdata
