// Philox4x32-10 against Random123's published known-answer vectors (kat_vectors, the three
// "philox4x32 10" lines), and the uniform mapping's range and exactness.
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "runtime/support/philox.h"

namespace stitch {
namespace {

struct Kat {
  std::array<uint32_t, 4> counter;
  std::array<uint32_t, 2> key;
  std::array<uint32_t, 4> expected;
};

TEST(Philox, KnownAnswers) {
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) EXPECT_EQ(philox4x32(k.counter, k.key), k.expected);
  static_assert(philox4x32({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5u);
}

TEST(Philox, ElementWordsFollowTheCounterLayout) {
  // Element i reads word i % 4 of the block with counter (i / 4, offset) and key seed.
  uint64_t seed = 0x299f31d0a4093822ull, offset = 0x0370734413198a2eull;
  for (uint64_t block : {uint64_t{0}, uint64_t{1}, uint64_t{0x85a308d3243f6a88} >> 2}) {
    auto words = philox4x32({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                             static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)},
                            {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
    for (uint64_t w = 0; w < 4; ++w) EXPECT_EQ(philoxWord(seed, offset, block * 4 + w), words[w]);
  }
}

TEST(Philox, UniformValuesAreExactFractionsBelowOne) {
  using ir::DType;
  for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
    double sum = 0;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      double u = philoxUniform(42, 3, static_cast<uint64_t>(i), t);
      ASSERT_GE(u, 0.0);
      ASSERT_LT(u, 1.0);
      ASSERT_EQ(ir::roundToFloat(u, t), u) << "not exact in " << ir::dtypeName(t);
      sum += u;
    }
    EXPECT_NEAR(sum / n, 0.5, 0.01) << ir::dtypeName(t);
  }
  // Different offsets and seeds give different streams.
  EXPECT_NE(philoxWord(1, 0, 5), philoxWord(1, 1, 5));
  EXPECT_NE(philoxWord(1, 0, 5), philoxWord(2, 0, 5));
}

}  // namespace
}  // namespace stitch
