// f32 exp, erf, tanh, log and log1p as LLVM IR (design note and accuracy in inline_math.h;
// coefficients from scripts/fit_inline_math.py).
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

llvm::Value* f32Bits(llvm::IRBuilderBase& b, llvm::Value* x) {
  return b.CreateBitCast(x, b.getInt32Ty());
}

llvm::Value* infinity(llvm::IRBuilderBase& b, bool negative) {
  return llvm::ConstantFP::getInfinity(b.getFloatTy(), negative);
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

llvm::Value* emitTanhF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  // tanh(9) = 1 - 3.05e-8 rounds to the last f32 below 1, and from 9.01 on tanh rounds to 1:
  // the quotient is fitted on [-9, 9] and past that the result is +-1 exactly.
  llvm::Value* xc = clamp(b, x, -9.0f, 9.0f);
  llvm::Value* t = b.CreateFMul(xc, xc);
  llvm::Value* p = polynomial(b, t,
                              {1.0f, 0.13381056487560272f, 0.003495624987408519f,
                               2.0609682906069793e-05f, 1.3355479389076663e-08f});
  llvm::Value* q = polynomial(b, t,
                              {1.0f, 0.467143714427948f, 0.025877123698592186f,
                               0.00032856949837878346f, 7.776895927236183e-07f});
  llvm::Value* y = clamp(b, b.CreateFMul(xc, b.CreateFDiv(p, q)), -1.0f, 1.0f);
  y = b.CreateSelect(b.CreateFCmpOGT(x, f32(b, 9.0f)), f32(b, 1.0f), y);
  return b.CreateSelect(b.CreateFCmpOLT(x, f32(b, -9.0f)), f32(b, -1.0f), y);
}

namespace {

// log(x) for x > 0 finite (subnormals included); other inputs give an unspecified finite value
// that emitLogF32 replaces.
llvm::Value* logPositive(llvm::IRBuilderBase& b, llvm::Value* x) {
  // A subnormal is scaled by 2^23 into the normal range first (its exponent field is 0).
  llvm::Value* subnormal = b.CreateFCmpOLT(x, f32(b, 1.17549435e-38f));
  llvm::Value* xs = b.CreateSelect(subnormal, b.CreateFMul(x, f32(b, 8388608.0f)), x);
  // x = 2^e m with m in [sqrt(1/2), sqrt(2)): e counts how far the bits are from those of
  // sqrt(1/2) in whole exponents, and m keeps x's mantissa under the exponent of 2^0 or 2^-1.
  llvm::Value* bits = f32Bits(b, xs);
  llvm::Value* e = b.CreateAShr(b.CreateSub(bits, b.getInt32(0x3F3504F3)), 23);
  llvm::Value* m = b.CreateBitCast(b.CreateSub(bits, b.CreateShl(e, 23)), b.getFloatTy());
  e = b.CreateSub(e, b.CreateSelect(subnormal, b.getInt32(23), b.getInt32(0)));
  llvm::Value* ef = b.CreateSIToFP(e, b.getFloatTy());
  // log(m) = log1p(f) = f + f^2 q(f), f = m - 1 exact (Sterbenz).
  llvm::Value* f = b.CreateFSub(m, f32(b, 1.0f));
  llvm::Value* q = polynomial(
      b, f,
      {-0.49999991059303284f, 0.33333951234817505f, -0.25001755356788635f, 0.19962072372436523f,
       -0.16570508480072021f, 0.14917974174022675f, -0.14307519793510437f, 0.08734837174415588f});
  llvm::Value* y = fmuladd(b, b.CreateFMul(f, f), q, f);
  // + e ln 2 in two parts (Cody-Waite, as exp), the small one first.
  y = fmuladd(b, ef, f32(b, 1.42860682030941723e-6f), y);
  return fmuladd(b, ef, f32(b, 0.693145751953125f), y);
}

}  // namespace

llvm::Value* emitLogF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  llvm::Value* y = logPositive(b, x);
  // +0 and -0 give -inf; +inf and NaN pass through; below 0 (-inf included) NaN.
  llvm::Value* finitePositive =
      b.CreateAnd(b.CreateFCmpOGT(x, f32(b, 0.0f)), b.CreateFCmpOLT(x, infinity(b, false)));
  llvm::Value* other =
      b.CreateSelect(b.CreateFCmpOLT(x, f32(b, 0.0f)), llvm::ConstantFP::getNaN(b.getFloatTy()), x);
  other = b.CreateSelect(b.CreateFCmpOEQ(x, f32(b, 0.0f)), infinity(b, true), other);
  return b.CreateSelect(finitePositive, y, other);
}

llvm::Value* emitLog1pF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  // log1p(x) = log(u) + (x - (u - 1)) / u, u = 1 + x rounded: the quotient puts back what
  // rounding u lost (u - 1 is exact). That is below half an ULP of u, so 1 / u to within
  // (u - 1)^2 will do: 2 - u where u < 2 (no division, which cost as much as the log on AVX2);
  // past 2 the correction is below half an ULP of log(u) and is dropped. Where u is 1, x is the
  // answer (to within x^2 / 2).
  llvm::Value* u = b.CreateFAdd(x, f32(b, 1.0f));
  llvm::Value* lost = b.CreateFSub(x, b.CreateFSub(u, f32(b, 1.0f)));
  llvm::Value* inverse =
      b.CreateSelect(b.CreateFCmpOLT(u, f32(b, 2.0f)), b.CreateFSub(f32(b, 2.0f), u), f32(b, 0.0f));
  llvm::Value* y = fmuladd(b, lost, inverse, emitLogF32(b, u));
  y = b.CreateSelect(b.CreateFCmpOEQ(u, f32(b, 1.0f)), x, y);
  // -1 gives log(0) = -inf; +inf would give inf + (inf - inf) * 0: +inf is passed through.
  // Below -1 the log is NaN already, NaN stays NaN.
  return b.CreateSelect(b.CreateFCmpOEQ(x, infinity(b, false)), x, y);
}

}  // namespace stitch::codegen
