// SHA-256 and HMAC-SHA-256 (support/sha256.h) against their standards' published test vectors:
// the FIPS 180 examples (NIST's "SHA256.pdf" and the one-million-'a' message) and RFC 4231's seven
// HMAC-SHA-256 cases; the streaming forms against the one-shot ones at every split; and macEqual.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/support/sha256.h"

namespace stitch {
namespace {

std::string hex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

std::vector<uint8_t> repeat(uint8_t byte, size_t n) { return std::vector<uint8_t>(n, byte); }

std::span<const uint8_t> bytesOf(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(Sha256, Fips180Examples) {
  EXPECT_EQ(hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 448 bits: the padding needs a second block.
  EXPECT_EQ(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(
      hex(sha256("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmn"
                 "opqklmnopqrlmnopqrsmnopqrstnopqrstu")),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(hex(sha256(repeat('a', 1000000))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Pieces of any sizes give the digest of their concatenation: every split point of messages
// around the block and padding boundaries (55, 56, 63, 64, 65 bytes), in two and three pieces.
TEST(Sha256, StreamingAgreesWithOneShot) {
  for (size_t n : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 200}) {
    std::vector<uint8_t> msg(n);
    for (size_t i = 0; i < n; ++i) msg[i] = static_cast<uint8_t>(i * 31 + 7);
    const Sha256Digest whole = sha256(msg);
    const std::span<const uint8_t> m(msg);
    for (size_t a = 0; a <= n; ++a) {
      EXPECT_EQ(Sha256().add(m.first(a)).add(m.subspan(a)).finish(), whole) << n << " " << a;
      const size_t b = a + (n - a) / 2;
      EXPECT_EQ(Sha256().add(m.first(a)).add(m.subspan(a, b - a)).add(m.subspan(b)).finish(), whole)
          << n << " " << a << " " << b;
    }
  }
}

struct Rfc4231Case {
  std::vector<uint8_t> key, data;
  std::string mac;  // hex; case 5 lists the first 128 bits only
};

TEST(HmacSha256, Rfc4231Vectors) {
  std::vector<uint8_t> key4;
  for (uint8_t b = 1; b <= 25; ++b) key4.push_back(b);
  auto text = [](std::string_view s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  const std::vector<Rfc4231Case> cases = {
      {repeat(0x0b, 20), text("Hi There"),
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {text("Jefe"), text("what do ya want for nothing?"),
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {repeat(0xaa, 20), repeat(0xdd, 50),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {key4, repeat(0xcd, 50), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {repeat(0x0c, 20), text("Test With Truncation"), "a3b6167473100ee06e0c796c2955552b"},
      // Keys longer than a block are hashed first.
      {repeat(0xaa, 131), text("Test Using Larger Than Block-Size Key - Hash Key First"),
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {repeat(0xaa, 131),
       text("This is a test using a larger than block-size key and a larger than block-size data. "
            "The key needs to be hashed before being used by the HMAC algorithm."),
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Rfc4231Case& c = cases[i];
    const HmacSha256 hmac(c.key);
    const std::string got = hex(hmac.mac(c.data));
    EXPECT_EQ(got.substr(0, c.mac.size()), c.mac) << "RFC 4231 test case " << i + 1;
    // A message in pieces, and the same keyed object used again: the same tag.
    const size_t half = c.data.size() / 2;
    const std::span<const uint8_t> d(c.data);
    EXPECT_EQ(hex(hmac.begin().add(d.first(half)).add(d.subspan(half)).finish()), got);
    EXPECT_EQ(hex(hmac.mac(c.data)), got);
  }
  // The string_view forms are the byte forms.
  EXPECT_EQ(HmacSha256("Jefe").mac(bytesOf("what do ya want for nothing?")),
            HmacSha256(text("Jefe")).mac(text("what do ya want for nothing?")));
}

TEST(HmacSha256, TagsDependOnKeyAndMessage) {
  const Sha256Digest base = HmacSha256("key one").mac(bytesOf("message"));
  EXPECT_NE(HmacSha256("key two").mac(bytesOf("message")), base);
  EXPECT_NE(HmacSha256("key one").mac(bytesOf("messagf")), base);
}

TEST(MacEqual, ComparesWholeStrings) {
  const Sha256Digest a = sha256("a"), b = sha256("b");
  EXPECT_TRUE(macEqual(a, a));
  EXPECT_FALSE(macEqual(a, b));
  Sha256Digest lastDiffers = a;
  lastDiffers[31] ^= 1;
  EXPECT_FALSE(macEqual(a, lastDiffers));
  EXPECT_FALSE(macEqual(std::span<const uint8_t>(a).first(31), a));  // lengths differ
  EXPECT_TRUE(macEqual(std::span<const uint8_t>(), std::span<const uint8_t>()));
}

}  // namespace
}  // namespace stitch
