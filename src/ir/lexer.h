// The tokenizer of the `.stitch` text format (internal to the parser).
//
// Tokens are made on demand, one ahead, so the first error in a file is the one reported even when
// it is a bad character far below. Newlines are tokens (they end statements); the parser skips
// them where they carry no meaning (inside parentheses and brackets). Number literals are decoded
// here, once: `inf`, `nan` and a leading `-` are part of the number token, so `-1e-5` and `-inf`
// are single tokens and no expression grammar is needed. Positions are 1-based; a column counts
// bytes (a tab is one column), which is what editors' "go to column" needs for ASCII sources.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace stitch::ir::detail {

struct SourcePos {
  size_t line = 1;
  size_t col = 1;
};

enum class Tok : uint8_t {
  Ident,
  Number,
  LParen,
  RParen,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Comma,
  Colon,
  Equals,
  Newline,
  End,
};

struct Token {
  Tok kind = Tok::End;
  std::string_view text;  // a view into the source; empty for End
  SourcePos pos;
  // Number tokens: isInt when written without '.', exponent, inf or nan and it fits int64
  // (then intValue holds it). value is the literal as a double in every case; "-0" is -0.0.
  bool isInt = false;
  int64_t intValue = 0;
  double value = 0;

  bool is(Tok k) const { return kind == k; }
  bool isIdent(std::string_view s) const { return kind == Tok::Ident && text == s; }
};

// How a token is named in a message: 'text' (shortened and escaped), "end of line", "end of file".
std::string describe(const Token& t);

// Throws stitch::Error(ErrorCode::Parse) with "FILE:LINE:COL: error: MESSAGE".
[[noreturn]] void failAt(std::string_view file, SourcePos pos, std::string_view message);

class Lexer {
 public:
  Lexer(std::string_view text, std::string_view filename) : text_(text), file_(filename) {}

  const Token& peek();
  Token next();
  // Just after the last non-newline token consumed: where a missing token should have been.
  SourcePos lastEnd() const { return lastEnd_; }
  std::string_view filename() const { return file_; }

 private:
  Token lex();
  Token lexNumber(size_t start);
  SourcePos posAt(size_t offset) const { return {line_, offset - lineStart_ + 1}; }

  std::string_view text_;
  std::string_view file_;
  size_t offset_ = 0;
  size_t line_ = 1;
  size_t lineStart_ = 0;
  bool hasPeeked_ = false;
  Token peeked_;
  SourcePos lastEnd_;
};

}  // namespace stitch::ir::detail
