// The device templates' arithmetic, compiled for the host: kernels_templates/{types,math,vec}.cuh
// included under a small shim that supplies the CUDA/HIP intrinsics they use, so their semantics
// are checked on every CI run, without a GPU: sin/cos (own argument reduction), NaN- and
// signed-zero-exact maximum/minimum, integer wrap and division, saturating float->int, f16/bf16
// rounding (the HIP spelling, _Float16, which g++ supports on x86-64), and the vector groups'
// packing. The GPU run tests (label gpu) check the same code on a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "runtime/support/dtype.h"
#include "runtime/support/philox.h"

// ---- the shim -----------------------------------------------------------------------------------
#define STITCH_TARGET_HIP 1
#define __device__
#define __forceinline__ inline
namespace shim {
inline float i2f(int x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
inline int f2i(float x) {
  int i;
  std::memcpy(&i, &x, 4);
  return i;
}
inline double ll2d(long long x) {
  double d;
  std::memcpy(&d, &x, 8);
  return d;
}
inline long long d2ll(double x) {
  long long i;
  std::memcpy(&i, &x, 8);
  return i;
}
}  // namespace shim
inline float __int_as_float(int x) { return shim::i2f(x); }
inline int __float_as_int(float x) { return shim::f2i(x); }
inline float __uint_as_float(unsigned x) { return shim::i2f(static_cast<int>(x)); }
inline unsigned __float_as_uint(float x) { return static_cast<unsigned>(shim::f2i(x)); }
inline double __longlong_as_double(long long x) { return shim::ll2d(x); }
inline long long __double_as_longlong(double x) { return shim::d2ll(x); }
using std::fma;
using std::rint;

#include "stitch/math.cuh"
#include "stitch/random.cuh"
#include "stitch/vec.cuh"

namespace {

float f32(double x) { return static_cast<float>(x); }

TEST(DeviceTemplates, SinCosMatchLibm) {
  double worst = 0;
  for (int i = -200000; i <= 200000; ++i) {
    double x = i * 1e-3 * (i % 7 == 0 ? 1000.0 : 1.0);  // up to +-2e5, and +-200 densely
    float xf = f32(x);
    float s = stitch::sin_(xf), c = stitch::cos_(xf);
    worst =
        std::max({worst, std::fabs(s - std::sin(double(xf))), std::fabs(c - std::cos(double(xf)))});
    double sd = stitch::sin_(x), cd = stitch::cos_(x);
    EXPECT_NEAR(sd, std::sin(x), 1e-12) << x;
    EXPECT_NEAR(cd, std::cos(x), 1e-12) << x;
  }
  EXPECT_LT(worst, 2e-7);  // within an f32 ulp of 1
  EXPECT_EQ(stitch::sin_(0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(stitch::sin_(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(std::isnan(stitch::cos_(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_NEAR(stitch::sin_(1e9f), std::sin(double(1e9f)), 1e-6);
}

TEST(DeviceTemplates, MaximumMinimumPropagateNanAndOrderZeros) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(stitch::fmaximum(nan, 1.0f)));
  EXPECT_TRUE(std::isnan(stitch::fmaximum(1.0f, nan)));
  EXPECT_TRUE(std::isnan(stitch::fminimum(nan, 1.0f)));
  EXPECT_TRUE(std::isnan(stitch::fminimum(2.0, std::nan(""))));
  EXPECT_EQ(stitch::fmaximum(1.0f, 2.0f), 2.0f);
  EXPECT_EQ(stitch::fminimum(1.0f, 2.0f), 1.0f);
  EXPECT_FALSE(std::signbit(stitch::fmaximum(-0.0f, 0.0f)));
  EXPECT_FALSE(std::signbit(stitch::fmaximum(0.0f, -0.0f)));
  EXPECT_TRUE(std::signbit(stitch::fminimum(-0.0f, 0.0f)));
  EXPECT_TRUE(std::signbit(stitch::fminimum(0.0, -0.0)));
  EXPECT_FALSE(std::signbit(stitch::frelu(-0.0f)));
  EXPECT_TRUE(std::isnan(stitch::frelu(nan)));
  EXPECT_EQ(stitch::frelu(-3.0f), 0.0f);
}

TEST(DeviceTemplates, IntegersWrapAndDivideAsTheReference) {
  const int mn = std::numeric_limits<int>::min();
  EXPECT_EQ(stitch::idiv<int>(7, 0), 0);
  EXPECT_EQ(stitch::idiv<int>(mn, -1), mn);
  EXPECT_EQ(stitch::idiv<int>(-7, 2), -3);
  EXPECT_EQ(stitch::iadd<int>(std::numeric_limits<int>::max(), 1), mn);
  EXPECT_EQ(stitch::iabs<int>(mn), mn);
  EXPECT_EQ((stitch::ftoi<int, float>(3e9f)), std::numeric_limits<int>::max());
  EXPECT_EQ((stitch::ftoi<int, float>(-3e9f)), mn);
  EXPECT_EQ((stitch::ftoi<int, float>(std::nanf(""))), 0);
  EXPECT_EQ((stitch::ftoi<stitch::i64, double>(-2.9)), -2);
}

TEST(DeviceTemplates, HalfAndBfloatRoundToNearestEven) {
  // Every 20th f32 bit pattern: the device rounding must equal the reference's.
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 20 * 65537 + 1) {
    float x;
    uint32_t u = static_cast<uint32_t>(b);
    std::memcpy(&x, &u, 4);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(stitch::rnd_bf16(x)));
      continue;
    }
    EXPECT_EQ(stitch::rnd_bf16(x),
              static_cast<float>(stitch::ir::roundToFloat(x, stitch::ir::DType::BF16)))
        << x;
    EXPECT_EQ(stitch::rnd_f16(x),
              static_cast<float>(stitch::ir::roundToFloat(x, stitch::ir::DType::F16)))
        << x;
  }
}

template <class S, int V>
void roundTrip(const S (&want)[V]) {
  alignas(16) S mem[V];
  stitch::store_vec<V>(mem, want);
  EXPECT_EQ(std::memcmp(mem, want, sizeof(mem)), 0);
  S got[V];
  stitch::load_vec<V>(mem, got);
  EXPECT_EQ(std::memcmp(got, want, sizeof(got)), 0);
}

TEST(DeviceTemplates, VectorGroupsKeepEveryByte) {
  roundTrip<float, 4>({1.5f, -2.0f, 3e-38f, -0.0f});
  roundTrip<double, 2>({1e300, -0.0});
  roundTrip<stitch::u16, 8>({1, 0xFFFF, 0x8000, 7, 0, 0x1234, 0xABCD, 2});
  roundTrip<stitch::u16, 4>({0xFFFF, 1, 0x7FFF, 0x8001});
  roundTrip<stitch::u8, 8>({0, 1, 0xFF, 0x80, 3, 4, 5, 6});
  roundTrip<stitch::u8, 4>({1, 0, 1, 1});
  roundTrip<stitch::u8, 2>({0xFF, 1});
  roundTrip<int, 4>({-1, 0, std::numeric_limits<int>::min(), 42});
  roundTrip<stitch::i64, 2>({-1, std::numeric_limits<stitch::i64>::min()});
}

TEST(DeviceTemplates, PhiloxMatchesTheHostDefinitionBitForBit) {
  const uint64_t seeds[] = {0, 1, 0xffffffffull, 0x123456789abcdef0ull, ~0ull};
  const uint64_t offsets[] = {0, 7, 0x100000000ull, ~0ull};
  for (uint64_t seed : seeds)
    for (uint64_t offset : offsets)
      for (uint64_t i : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{4},
                         uint64_t{1} << 33, (uint64_t{1} << 62) - 1}) {
        ASSERT_EQ(stitch::philox_word(seed, offset, i), stitch::philoxWord(seed, offset, i))
            << seed << " " << offset << " " << i;
        float f = stitch::uniform_f32<24>(seed, offset, i);
        EXPECT_EQ(double(f), stitch::philoxUniform(seed, offset, i, stitch::ir::DType::F32));
        EXPECT_EQ(double(stitch::uniform_f32<8>(seed, offset, i)),
                  stitch::philoxUniform(seed, offset, i, stitch::ir::DType::BF16));
        EXPECT_EQ(stitch::uniform_f64(seed, offset, i),
                  stitch::philoxUniform(seed, offset, i, stitch::ir::DType::F64));
      }
}

}  // namespace
