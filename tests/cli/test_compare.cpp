// The --check comparison: DESIGN.md's tolerances, NaN and infinity rules, exact integers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "compare.h"

using namespace stitch::cli;

namespace {

HostTensor f32(std::vector<float> v) {
  HostTensor t(STITCH_F32, {static_cast<int64_t>(v.size())});
  std::memcpy(t.bytes.data(), v.data(), v.size() * 4);
  return t;
}

TEST(Compare, ToleranceTable) {
  EXPECT_EQ(toleranceFor(STITCH_F32).rtol, 1e-4);
  EXPECT_EQ(toleranceFor(STITCH_F16).atol, 1e-2);
  EXPECT_EQ(toleranceFor(STITCH_BF16).rtol, 4e-2);
  EXPECT_EQ(toleranceFor(STITCH_I32).rtol, 0.0);
  EXPECT_EQ(toleranceFor(STITCH_BOOL).atol, 0.0);
}

TEST(Compare, F32WithinAndOutside) {
  EXPECT_TRUE(compare(f32({1.0f, 100.0f}), f32({1.00005f, 100.009f})).ok());
  CompareResult r = compare(f32({1.0f, 100.0f, 3.0f}), f32({1.0f, 100.02f, 3.1f}));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.mismatches, 2);
  EXPECT_EQ(r.firstMismatch, 1);
  EXPECT_NEAR(r.maxAbsErr, 0.1, 1e-6);
}

TEST(Compare, NanAndInfinity) {
  float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(compare(f32({nan, inf, -inf}), f32({nan, inf, -inf})).ok());
  EXPECT_FALSE(compare(f32({nan}), f32({1.0f})).ok());
  EXPECT_FALSE(compare(f32({1.0f}), f32({nan})).ok());
  EXPECT_FALSE(compare(f32({inf}), f32({-inf})).ok());
  EXPECT_FALSE(compare(f32({3e38f}), f32({inf})).ok());
}

TEST(Compare, IntegersAreExact) {
  HostTensor a(STITCH_I32, {2}), b(STITCH_I32, {2});
  int32_t av[2] = {5, 7}, bv[2] = {5, 8};
  std::memcpy(a.bytes.data(), av, 8);
  std::memcpy(b.bytes.data(), bv, 8);
  CompareResult r = compare(a, b);
  EXPECT_EQ(r.mismatches, 1);
  EXPECT_NE(r.describe(a, b).find("exact"), std::string::npos);
}

TEST(Compare, HalfPrecisionTolerances) {
  HostTensor a(STITCH_F16, {1}), b(STITCH_F16, {1});
  uint16_t one = 0x3c00, close = 0x3c08, far = 0x3c40;  // 1.0, 1.0078, 1.0625
  std::memcpy(a.bytes.data(), &one, 2);
  std::memcpy(b.bytes.data(), &close, 2);
  EXPECT_TRUE(compare(a, b).ok());
  std::memcpy(b.bytes.data(), &far, 2);
  EXPECT_FALSE(compare(a, b).ok());
}

TEST(Compare, ShapeOrDTypeDifferenceIsAMismatch) {
  HostTensor a(STITCH_F32, {2}), b(STITCH_F32, {3}), c(STITCH_F64, {2});
  EXPECT_FALSE(compare(a, b).ok());
  EXPECT_FALSE(compare(a, c).ok());
  EXPECT_NE(compare(a, b).describe(a, b).find("f32[2]"), std::string::npos);
}

}  // namespace
