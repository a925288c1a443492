// Exact rounding to f16 / bf16 / f32 and the integer conversion rules.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "runtime/support/dtype.h"

using namespace stitch::ir;

TEST(DType, NamesRoundTrip) {
  for (int i = 0; i < kNumDTypes; ++i) {
    auto t = static_cast<DType>(i);
    EXPECT_EQ(parseDType(dtypeName(t)), t);
  }
  EXPECT_FALSE(parseDType("f8").has_value());
  EXPECT_EQ(dtypeBytes(DType::BF16), 2);
  EXPECT_EQ(dtypeBytes(DType::Bool), 1);
}

TEST(DType, F16RoundsToNearestEven) {
  // 1 + 2^-11 is exactly halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1).
  EXPECT_EQ(roundToFloat(1.0 + std::ldexp(1.0, -11), DType::F16), 1.0);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even): rounds up.
  EXPECT_EQ(roundToFloat(1.0 + 3 * std::ldexp(1.0, -11), DType::F16), 1.0 + std::ldexp(1.0, -9));
  // Just above the halfway point rounds up.
  EXPECT_EQ(roundToFloat(1.0 + std::ldexp(1.0, -11) + 1e-12, DType::F16),
            1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(roundToFloat(0.1, DType::F16), 0.0999755859375);
  EXPECT_EQ(roundToFloat(65504.0, DType::F16), 65504.0);
  EXPECT_EQ(roundToFloat(65519.99, DType::F16), 65504.0);
  EXPECT_TRUE(std::isinf(roundToFloat(65520.0, DType::F16)));  // the tie rounds to even = inf
  // Subnormals: spacing 2^-24.
  EXPECT_EQ(roundToFloat(std::ldexp(1.0, -25), DType::F16), 0.0);  // tie to even 0
  EXPECT_EQ(roundToFloat(3 * std::ldexp(1.0, -25), DType::F16), std::ldexp(1.0, -23));
  EXPECT_EQ(roundToFloat(-1.5 * std::ldexp(1.0, -24), DType::F16), -std::ldexp(1.0, -23));
  EXPECT_TRUE(std::isnan(roundToFloat(NAN, DType::F16)));
}

TEST(DType, BF16RoundsToNearestEven) {
  EXPECT_EQ(roundToFloat(1.0 + std::ldexp(1.0, -8), DType::BF16), 1.0);
  EXPECT_EQ(roundToFloat(1.0 + 3 * std::ldexp(1.0, -8), DType::BF16), 1.0 + std::ldexp(1.0, -6));
  EXPECT_EQ(roundToFloat(3.14159, DType::BF16), 3.140625);
  EXPECT_TRUE(std::isinf(roundToFloat(3.4e38, DType::BF16)));
}

TEST(DType, NoDoubleRoundingThroughF32) {
  // 1 + 2^-8 + 2^-30 rounds up in bf16, but through f32 it would first become 1 + 2^-8 (a tie)
  // and then round down to 1.
  double x = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  EXPECT_EQ(roundToFloat(x, DType::BF16), 1.0 + std::ldexp(1.0, -7));
}

TEST(DType, F32MatchesHardwareRounding) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    double x = std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng),
                          std::uniform_int_distribution<int>(-150, 130)(rng));
    EXPECT_EQ(roundToFloat(x, DType::F32), static_cast<double>(static_cast<float>(x))) << x;
  }
}

TEST(DType, HalfBitPatternsRoundTrip) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    double v = f16Value(static_cast<uint16_t>(b));
    if (std::isnan(v)) continue;
    EXPECT_EQ(f16Bits(v), b);
    EXPECT_EQ(roundToFloat(v, DType::F16), v);
    double w = bf16Value(static_cast<uint16_t>(b));
    if (std::isnan(w)) continue;
    EXPECT_EQ(bf16Bits(w), b);
  }
  EXPECT_EQ(f16Bits(1.0), 0x3c00);
  EXPECT_EQ(bf16Bits(1.0), 0x3f80);
}

TEST(DType, FloatToIntTruncatesAndSaturates) {
  EXPECT_EQ(floatToInt(2.9, DType::I32), 2);
  EXPECT_EQ(floatToInt(-2.9, DType::I32), -2);
  EXPECT_EQ(floatToInt(1e20, DType::I32), INT32_MAX);
  EXPECT_EQ(floatToInt(-1e20, DType::I64), INT64_MIN);
  EXPECT_EQ(floatToInt(NAN, DType::I64), 0);
  EXPECT_EQ(wrapToI32(int64_t{1} << 31), INT32_MIN);
}
