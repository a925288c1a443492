// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for authenticating kernel cache entries.
//
// Design note. A cache entry holds native code, so a checksum (support/hash.h) is not enough: one
// who can write the cache directory or the Redis server recomputes it. Entries carry an
// HMAC-SHA-256 over their bytes under a secret key instead (runtime/cache_secret.h), which only a
// holder of the key can make. Written here, in one small file, rather than taken from a crypto
// library: Stitch links no TLS or crypto library, two functions do not justify one, and both are
// short, fixed and checked against their standards' test vectors (FIPS 180 examples, RFC 4231;
// tests/support/test_sha256.cpp). Only what the cache needs is here: no other hash, no
// encryption, no key derivation.
//
// Speed: a portable byte-order-independent loop, one 64-byte block at a time, about 340 MB/s of
// one core (the development VM's EPYC, CPU time; no SHA-NI instructions, which OpenSSL uses at
// 2 GB/s there): 41 us for a typical 14 KB cache entry, against the 10-100 ms compile it saves.
// The time depends on the lengths only, never on the bytes; tags are compared with macEqual, in
// time independent of where they differ.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace stitch {

using Sha256Digest = std::array<uint8_t, 32>;

// Streaming SHA-256: finish() is the digest of everything added, in order; adding pieces one by
// one gives the digest of their concatenation. finish() may be called once.
class Sha256 {
 public:
  Sha256();
  Sha256& add(std::span<const uint8_t> bytes);
  Sha256& add(std::string_view text);
  Sha256Digest finish();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes added
};

Sha256Digest sha256(std::span<const uint8_t> bytes);
Sha256Digest sha256(std::string_view text);

// HMAC-SHA-256 with a fixed key. The key's two padded blocks are hashed once, when the object is
// made; mac() copies that state, so one HmacSha256 serves any number of messages, from any number
// of threads (it is never modified after construction).
class HmacSha256 {
 public:
  explicit HmacSha256(std::span<const uint8_t> key);
  explicit HmacSha256(std::string_view key);

  // A message in progress: add its pieces, then finish() for the tag.
  class Message {
   public:
    Message& add(std::span<const uint8_t> bytes) {
      inner_.add(bytes);
      return *this;
    }
    Message& add(std::string_view text) {
      inner_.add(text);
      return *this;
    }
    Sha256Digest finish();

   private:
    friend class HmacSha256;
    Message(const Sha256& inner, const Sha256& outer) : inner_(inner), outer_(outer) {}
    Sha256 inner_, outer_;
  };
  Message begin() const { return Message(inner_, outer_); }
  Sha256Digest mac(std::span<const uint8_t> message) const { return begin().add(message).finish(); }

 private:
  Sha256 inner_, outer_;  // after the key XOR ipad / opad blocks
};

// Whether two byte strings are equal, in time that depends only on their lengths (not on where
// they first differ), so that comparing a received tag with the right one says nothing about how
// much of it was right.
bool macEqual(std::span<const uint8_t> a, std::span<const uint8_t> b);

}  // namespace stitch
