// FNV-1a 64 (support/hash.h): the reference values, and the streaming form agreeing with the
// one-shot one. The kernel cache's golden key hash (tests/runtime/test_kernel_cache.cpp) checks
// that the values on disk did not change.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>

#include "runtime/support/hash.h"

namespace stitch {
namespace {

// The published FNV-1a 64 test vectors, checked when this file compiles.
static_assert(fnv1a64("") == 0xcbf29ce484222325ULL);
static_assert(fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
static_assert(fnv1a64("foobar") == 0x85944171f73967e8ULL);

TEST(Hash, ReferenceValuesAtRunTime) {
  // The same values through the non-constexpr path (a runtime string, a byte span).
  std::string foobar = "foobar";
  EXPECT_EQ(fnv1a64(foobar), 0x85944171f73967e8ULL);
  std::array<uint8_t, 6> bytes{'f', 'o', 'o', 'b', 'a', 'r'};
  EXPECT_EQ(fnv1a64(bytes), 0x85944171f73967e8ULL);
  EXPECT_EQ(fnv1a64(std::span<const uint8_t>()), kFnv1a64Offset);
}

TEST(Hash, StreamingIsTheHashOfTheConcatenation) {
  EXPECT_EQ(Fnv1a64().text("foo").text("").text("bar").value(), fnv1a64("foobar"));
  std::array<uint8_t, 3> bar{'b', 'a', 'r'};
  EXPECT_EQ(Fnv1a64().text("foo").bytes(bar).value(), fnv1a64("foobar"));
  EXPECT_EQ(Fnv1a64().byte('a').value(), fnv1a64("a"));
}

TEST(Hash, IntegersAreHashedAsLittleEndianBytes) {
  // The same on every host: a cache file named on one machine is found on another.
  std::array<uint8_t, 4> le32{0x01, 0x02, 0x03, 0x04};
  EXPECT_EQ(Fnv1a64().u32(0x04030201u).value(), fnv1a64(le32));
  EXPECT_EQ(Fnv1a64().u32(0x04030201u).value(), 0xbe7a5e775165785dULL);  // computed in Python
  std::array<uint8_t, 8> le64{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};
  EXPECT_EQ(Fnv1a64().u64(0x0807060504030201ULL).value(), fnv1a64(le64));
  // Zero bytes still change the hash: sets {0} and {} of node ids differ.
  EXPECT_NE(Fnv1a64().u32(0).value(), Fnv1a64().value());
}

}  // namespace
}  // namespace stitch
