// f32 exp and erf as LLVM IR (design note and accuracy in inline_math.h; coefficients from
// scripts/fit_inline_math.py).
#include "codegen/llvm/inline_math.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <initializer_list>

namespace stitch::codegen {

namespace {

llvm::Value* f32(llvm::IRBuilderBase& b, float v) {
  return llvm::ConstantFP::get(b.getFloatTy(), static_cast<double>(v));
}

llvm::Value* fmuladd(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y, llvm::Value* z) {
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, z});
}

// c[0] + c[1] t + c[2] t^2 + ... by Horner's rule.
llvm::Value* polynomial(llvm::IRBuilderBase& b, llvm::Value* t, std::initializer_list<float> c) {
  const float* hi = c.end() - 1;
  llvm::Value* acc = f32(b, *hi);
  for (const float* p = hi; p-- != c.begin();) acc = fmuladd(b, acc, t, f32(b, *p));
  return acc;
}

// x clamped to [lo, hi] by ordered compares, so that NaN passes through (minnum/maxnum would
// turn it into a bound).
llvm::Value* clamp(llvm::IRBuilderBase& b, llvm::Value* x, float lo, float hi) {
  x = b.CreateSelect(b.CreateFCmpOLT(x, f32(b, lo)), f32(b, lo), x);
  return b.CreateSelect(b.CreateFCmpOGT(x, f32(b, hi)), f32(b, hi), x);
}

// 2^k as an f32, for k in [-126, 127] (an i32 value).
llvm::Value* pow2(llvm::IRBuilderBase& b, llvm::Value* k) {
  return b.CreateBitCast(b.CreateShl(b.CreateAdd(k, b.getInt32(127)), 23), b.getFloatTy());
}

}  // namespace

llvm::Value* emitExpF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  // e^-103.97 is below half the smallest subnormal, e^88.73 above the largest float: the bounds
  // keep k in [-150, 128], where the two-step scale below is exact until its last multiply.
  x = clamp(b, x, -104.0f, 89.0f);
  // k = rint(x / ln 2) by the shifter trick: adding 1.5 * 2^23 rounds to an integer in the low
  // mantissa bits (no float-to-int conversion, which LLVM makes poison for NaN).
  const float shifter = 12582912.0f;
  llvm::Value* t = fmuladd(b, x, f32(b, 1.44269504088896341f), f32(b, shifter));
  llvm::Value* k = b.CreateFSub(t, f32(b, shifter));
  llvm::Value* ki = b.CreateSub(b.CreateBitCast(t, b.getInt32Ty()), b.getInt32(0x4B400000));
  // r = x - k ln 2 in two steps: ln2_hi has 12 significant bits, so k * ln2_hi is exact.
  llvm::Value* r = fmuladd(b, k, f32(b, -0.693145751953125f), x);
  r = fmuladd(b, k, f32(b, -1.42860682030941723e-6f), r);
  llvm::Value* q = polynomial(b, r,
                              {0.4999999403953552f, 0.1666652113199234f, 0.04166838899254799f,
                               0.008368710055947304f, 0.001381461275741458f});
  llvm::Value* p = b.CreateFAdd(fmuladd(b, b.CreateFMul(r, r), q, r), f32(b, 1.0f));
  // p * 2^k as (p * 2^k1) * 2^k2, k1 = k >> 1: both factors are normal floats for every k in
  // [-150, 128], so a subnormal result is rounded once, and 2^128 overflows to +inf.
  llvm::Value* k1 = b.CreateAShr(ki, 1);
  llvm::Value* k2 = b.CreateSub(ki, k1);
  return b.CreateFMul(b.CreateFMul(p, pow2(b, k1)), pow2(b, k2));
}

llvm::Value* emitErfF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  llvm::Value* xc = clamp(b, x, -4.0f, 4.0f);
  llvm::Value* t = b.CreateFMul(xc, xc);
  llvm::Value* p =
      polynomial(b, t,
                 {1.1283791065216064f, 0.19353212416172028f, 0.05309973657131195f,
                  0.0038827054668217897f, 0.0002845381968654692f, 1.986711367862881e-06f});
  llvm::Value* q =
      polynomial(b, t,
                 {1.0f, 0.504845917224884f, 0.11534438282251358f, 0.015205984003841877f,
                  0.0011853912146762013f, 3.741797627299093e-05f});
  // Near +-4 the quotient may land an ULP past 1: clamp, NaN passing through.
  return clamp(b, b.CreateFMul(xc, b.CreateFDiv(p, q)), -1.0f, 1.0f);
}

}  // namespace stitch::codegen
