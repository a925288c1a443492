// Canonical bytes: the encoding cache keys are made of (lower/serialize.h, target/keys.h,
// runtime/kernel_cache.h).
//
// Integers are fixed-width little-endian at their declared width (int: 4 bytes, int64_t: 8),
// enums by their underlying type, bool one byte, double its IEEE-754 bit pattern (so -0.0 and
// 0.0, or two NaN payloads, differ: conservative), strings and vectors prefixed by their length
// as 8 bytes. The bytes do not depend on the host's endianness, compiler or standard library.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "runtime/support/error.h"

namespace stitch {

// Appends canonical bytes to a string used as a byte buffer.
class CanonicalWriter {
 public:
  template <class T>
  requires std::is_integral_v<T>
  void integer(T v) {
    using U = std::make_unsigned_t<T>;
    auto u = static_cast<U>(v);
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  }
  void boolean(bool b) { out_.push_back(b ? '\1' : '\0'); }
  template <class E>
  requires std::is_enum_v<E>
  void enumeration(E e) { integer(static_cast<std::underlying_type_t<E>>(e)); }
  void real(double d) { integer(std::bit_cast<uint64_t>(d)); }
  void length(size_t n) { integer(static_cast<uint64_t>(n)); }
  void string(std::string_view s) {
    length(s.size());
    out_.append(s);
  }

  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads what a CanonicalWriter wrote, checking every length against what is left: malformed or
// truncated bytes throw InvalidArgument (what a cache treats as a corrupt entry), never read past
// the end or allocate more than the bytes could hold.
class CanonicalReader {
 public:
  explicit CanonicalReader(std::string_view bytes) : in_(bytes) {}

  template <class T>
  requires std::is_integral_v<T> T integer() {
    using U = std::make_unsigned_t<T>;
    need(sizeof(T));
    U u = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
      u |= static_cast<U>(static_cast<U>(static_cast<unsigned char>(in_[pos_ + i])) << (8 * i));
    pos_ += sizeof(T);
    return static_cast<T>(u);
  }
  bool boolean() {
    const auto b = integer<uint8_t>();
    if (b > 1) fail("a boolean byte that is neither 0 nor 1");
    return b == 1;
  }
  template <class E>
  requires std::is_enum_v<E> E enumeration() {
    return static_cast<E>(integer<std::underlying_type_t<E>>());
  }
  double real() { return std::bit_cast<double>(integer<uint64_t>()); }
  // A count of items each taking at least `minItemBytes` bytes: checked against what is left.
  size_t length(size_t minItemBytes = 1) {
    const auto n = integer<uint64_t>();
    if (minItemBytes > 0 && n > (in_.size() - pos_) / minItemBytes) fail("a length past the end");
    return static_cast<size_t>(n);
  }
  std::string string() {
    const size_t n = length();
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  bool done() const { return pos_ == in_.size(); }
  // Throws unless every byte was read.
  void finish() const {
    if (!done()) fail("bytes left over after the end");
  }

 private:
  void need(size_t n) const {
    if (n > in_.size() - pos_) fail("truncated");
  }
  [[noreturn]] static void fail(const char* what) {
    throwError(ErrorCode::InvalidArgument, std::string("malformed canonical bytes: ") + what);
  }

  std::string_view in_;
  size_t pos_ = 0;
};

// The canonical bytes of one integer, enum or bool (key parts other than the program).
template <class T>
requires std::is_integral_v<T> || std::is_enum_v<T> std::string canonicalBytes(T v) {
  CanonicalWriter w;
  if constexpr (std::is_same_v<T, bool>) w.boolean(v);
  else if constexpr (std::is_enum_v<T>) w.enumeration(v);
  else w.integer(v);
  return w.take();
}

}  // namespace stitch
