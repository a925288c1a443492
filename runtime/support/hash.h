// FNV-1a 64: Stitch's one hash function.
//
// Used where a hash must be the same on every machine, compiler and run: a kernel cache key's
// hash names its file on disk and its Redis value (runtime/kernel_cache.h), and STITCH_DUMP files
// are named by their signature's hash. Used too in in-memory tables (the planner's cost cache),
// where any hash would do and one is easier to trust than two. Not cryptographic: whoever needs
// certainty compares the hashed bytes (cache entries keep their whole key and compare it on
// load), and whoever needs to know who wrote them checks a MAC (support/sha256.h).
//
// Integers are hashed as their little-endian bytes, so a hash is the same on every host; the
// byte-at-a-time loop is the reference algorithm (http://www.isthe.com/chongo/tech/comp/fnv/),
// so values can be checked against any other implementation. Everything is constexpr: the tests
// check the reference values at compile time.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace stitch {

inline constexpr uint64_t kFnv1a64Offset = 0xcbf29ce484222325ULL;
inline constexpr uint64_t kFnv1a64Prime = 0x100000001b3ULL;

// Streaming form: value() is the hash of everything added so far, in order; adding pieces one
// by one gives the hash of their concatenation.
class Fnv1a64 {
 public:
  constexpr Fnv1a64& byte(uint8_t b) {
    h_ = (h_ ^ b) * kFnv1a64Prime;
    return *this;
  }
  constexpr Fnv1a64& bytes(std::span<const uint8_t> bs) {
    for (uint8_t b : bs) byte(b);
    return *this;
  }
  constexpr Fnv1a64& text(std::string_view s) {
    for (char c : s) byte(static_cast<uint8_t>(c));
    return *this;
  }
  constexpr Fnv1a64& u32(uint32_t v) {
    for (int k = 0; k < 32; k += 8) byte(static_cast<uint8_t>(v >> k));
    return *this;
  }
  constexpr Fnv1a64& u64(uint64_t v) {
    for (int k = 0; k < 64; k += 8) byte(static_cast<uint8_t>(v >> k));
    return *this;
  }
  constexpr uint64_t value() const { return h_; }

 private:
  uint64_t h_ = kFnv1a64Offset;
};

constexpr uint64_t fnv1a64(std::span<const uint8_t> bytes) {
  return Fnv1a64().bytes(bytes).value();
}
constexpr uint64_t fnv1a64(std::string_view text) { return Fnv1a64().text(text).value(); }

}  // namespace stitch
