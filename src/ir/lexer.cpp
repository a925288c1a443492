#include "ir/lexer.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>

#include "runtime/support/error.h"

namespace stitch::ir::detail {

namespace {

bool isAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentChar(char c) { return isAlpha(c) || isDigit(c); }

// Source text quoted for a message: at most 32 bytes, non-printable bytes as \xNN, so a message
// stays one readable line whatever the input holds.
std::string quote(std::string_view s) {
  constexpr size_t kMax = 32;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
    else out += fmt::format("\\x{:02x}", c);
  }
  if (s.size() > kMax) out += "...";
  return out + "'";
}

}  // namespace

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::Newline: return "end of line";
    case Tok::End: return "end of file";
    default: return quote(t.text);
  }
}

void failAt(std::string_view file, SourcePos pos, std::string_view message) {
  throwError(ErrorCode::Parse,
             fmt::format("{}:{}:{}: error: {}", file, pos.line, pos.col, message));
}

const Token& Lexer::peek() {
  if (!hasPeeked_) {
    peeked_ = lex();
    hasPeeked_ = true;
  }
  return peeked_;
}

Token Lexer::next() {
  Token t = peek();
  hasPeeked_ = false;
  if (!t.is(Tok::Newline) && !t.is(Tok::End)) lastEnd_ = {t.pos.line, t.pos.col + t.text.size()};
  return t;
}

Token Lexer::lex() {
  // Skip blanks and comments; a comment runs to the newline, which is still a token.
  while (offset_ < text_.size()) {
    char c = text_[offset_];
    if (c == ' ' || c == '\t' || c == '\r') {
      ++offset_;
    } else if (c == '#') {
      while (offset_ < text_.size() && text_[offset_] != '\n') ++offset_;
    } else {
      break;
    }
  }
  size_t start = offset_;
  Token t;
  t.pos = posAt(start);
  if (start >= text_.size()) return t;  // End

  auto single = [&](Tok k) {
    ++offset_;
    t.kind = k;
    t.text = text_.substr(start, 1);
    return t;
  };
  char c = text_[start];
  char c1 = start + 1 < text_.size() ? text_[start + 1] : '\0';
  switch (c) {
    case '\n': {
      Token nl = single(Tok::Newline);
      ++line_;
      lineStart_ = offset_;
      return nl;
    }
    case '(': return single(Tok::LParen);
    case ')': return single(Tok::RParen);
    case '[': return single(Tok::LBracket);
    case ']': return single(Tok::RBracket);
    case '{': return single(Tok::LBrace);
    case '}': return single(Tok::RBrace);
    case ',': return single(Tok::Comma);
    case ':': return single(Tok::Colon);
    case '=': return single(Tok::Equals);
    default: break;
  }
  if (isAlpha(c)) {
    while (offset_ < text_.size() && isIdentChar(text_[offset_])) ++offset_;
    t.text = text_.substr(start, offset_ - start);
    if (t.text == "inf" || t.text == "nan") return lexNumber(start);
    t.kind = Tok::Ident;
    return t;
  }
  if (isDigit(c) || (c == '.' && isDigit(c1))) return lexNumber(start);
  if (c == '-') {
    bool negInf = text_.substr(start + 1, 3) == "inf" &&
                  (start + 4 >= text_.size() || !isIdentChar(text_[start + 4]));
    char c2 = start + 2 < text_.size() ? text_[start + 2] : '\0';
    if (isDigit(c1) || (c1 == '.' && isDigit(c2)) || negInf) return lexNumber(start);
  }
  failAt(file_, t.pos, fmt::format("unexpected character {}", quote(text_.substr(start, 1))));
}

// A number starting at `start`: [-] (digits [. digits] | . digits) [(e|E) [+|-] digits], or
// [-]inf, or nan. Anything glued on after it (`1x`, `1.2.3`) makes the whole run malformed.
Token Lexer::lexNumber(size_t start) {
  Token t;
  t.kind = Tok::Number;
  t.pos = posAt(start);
  size_t p = start;
  auto at = [&](size_t i) { return i < text_.size() ? text_[i] : '\0'; };
  bool negative = at(p) == '-';
  if (negative) ++p;
  bool special = false;  // inf or nan
  bool integral = true;
  bool malformed = false;
  if (text_.substr(p, 3) == "inf" || text_.substr(p, 3) == "nan") {
    special = true;
    integral = false;
    p += 3;
  } else {
    while (isDigit(at(p))) ++p;
    if (at(p) == '.') {
      integral = false;
      ++p;
      while (isDigit(at(p))) ++p;
    }
    if (at(p) == 'e' || at(p) == 'E') {
      integral = false;
      ++p;
      if (at(p) == '+' || at(p) == '-') ++p;
      if (!isDigit(at(p))) malformed = true;
      while (isDigit(at(p))) ++p;
    }
  }
  if (isIdentChar(at(p)) || at(p) == '.') malformed = true;
  if (malformed) {
    while (isIdentChar(at(p)) || at(p) == '.' || at(p) == '+' || at(p) == '-') ++p;
    failAt(file_, t.pos, fmt::format("malformed number {}", quote(text_.substr(start, p - start))));
  }
  offset_ = p;
  t.text = text_.substr(start, p - start);

  if (special) {
    double inf = std::numeric_limits<double>::infinity();
    t.value =
        t.text.back() == 'n' ? std::numeric_limits<double>::quiet_NaN() : (negative ? -inf : inf);
    return t;
  }
  const char* first = t.text.data();
  const char* last = first + t.text.size();
  if (integral) {
    auto r = std::from_chars(first, last, t.intValue);
    t.isInt = r.ec == std::errc{};
  }
  // from_chars rejects a leading '+' but accepts '-'; the token never starts with '+'.
  auto r = std::from_chars(first, last, t.value);
  // Overflow to inf and underflow to zero both lose the written value: refuse rather than guess.
  if (r.ec == std::errc::result_out_of_range)
    failAt(file_, t.pos, fmt::format("number {} out of range", quote(t.text)));
  if (r.ec != std::errc{} || r.ptr != last)
    failAt(file_, t.pos, fmt::format("malformed number {}", quote(t.text)));
  return t;
}

}  // namespace stitch::ir::detail
