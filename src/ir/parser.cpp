#include "ir/parser.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <unordered_map>

#include "ir/infer.h"
#include "ir/lexer.h"

namespace stitch::ir {

namespace {

using detail::describe;
using detail::Lexer;
using detail::SourcePos;
using detail::Tok;
using detail::Token;

SourceLoc toLoc(SourcePos p) {
  auto clamp = [](size_t v) { return static_cast<int>(std::min<size_t>(v, INT_MAX)); };
  return SourceLoc{clamp(p.line), clamp(p.col)};
}

std::string posStr(SourcePos p) { return fmt::format("{}:{}", p.line, p.col); }

// Levenshtein distance, for "did you mean" on unknown op names (both short).
size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] =
          std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1] ? 1 : 0)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string unknownOpMessage(const Token& name) {
  std::string msg = fmt::format("unknown op {}", describe(name));
  // Long words are no typo of an op name, and would make the search slow.
  if (name.text.size() > 32) return msg;
  std::string_view best;
  size_t bestDistance = 3;  // suggest only near misses
  for (OpCode op : allOps()) {
    const OpInfo& info = opInfo(op);
    if (!info.inText()) continue;
    size_t d = editDistance(name.text, info.name);
    if (d < bestDistance && d < name.text.size()) {
      best = info.name;
      bestDistance = d;
    }
  }
  if (!best.empty()) msg += fmt::format("; did you mean '{}'?", best);
  return msg;
}

// One argument of an op call, as written.
struct Arg {
  Token tok;  // the value name, the number literal, or the key of key=value
  bool isKey = false;
  AttrValue value;               // key=value: the value
  std::optional<double> number;  // key=NUMBER: the literal's exact double
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view file) : lex_(text, file), file_(file) {}
  std::vector<Graph> parseModule();

 private:
  [[noreturn]] void fail(SourcePos pos, std::string_view msg) const {
    detail::failAt(file_, pos, msg);
  }
  // Reports the peeked token `got` where `what` was expected. Used only where newlines were
  // skipped: a token on a later line then means the line ended early, which is where to point.
  [[noreturn]] void expected(std::string_view what, const Token& got) const;
  Token expect(Tok kind, std::string_view what);
  void skipNewlines();
  // After a list element: consumes ',' (true: another element follows) or `close` (false), with
  // newlines skipped; anything else is an error naming `what`.
  bool listContinues(Tok close, std::string_view what);
  void expectEndOfLine(std::string_view after);

  Graph parseGraph();
  TensorType parseType();
  void parseStatement(GraphBuilder& b);
  void parseReturn(GraphBuilder& b);
  Arg parseArg();
  AttrValue parseAttrValue(Arg& arg);
  void build(GraphBuilder& b, const Token& name, const Token& opTok, OpCode op,
             const std::vector<Arg>& args);

  void checkFresh(const Token& name) const;
  int lookup(const Token& name) const;

  struct NameInfo {
    int id;
    SourcePos pos;
  };

  Lexer lex_;
  std::string_view file_;
  std::unordered_map<std::string, SourcePos> graphNames_;
  std::unordered_map<std::string, NameInfo> names_;  // of the graph being parsed
};

void Parser::expected(std::string_view what, const Token& got) const {
  if (!got.is(Tok::End) && got.pos.line > lex_.lastEnd().line)
    fail(lex_.lastEnd(), fmt::format("expected {} before end of line", what));
  fail(got.pos, fmt::format("expected {}, got {}", what, describe(got)));
}

Token Parser::expect(Tok kind, std::string_view what) {
  if (!lex_.peek().is(kind)) expected(what, lex_.peek());
  return lex_.next();
}

void Parser::skipNewlines() {
  while (lex_.peek().is(Tok::Newline)) lex_.next();
}

void Parser::expectEndOfLine(std::string_view after) {
  Token t = lex_.peek();
  if (t.is(Tok::End)) return;
  if (!t.is(Tok::Newline))
    fail(t.pos, fmt::format("unexpected {} after {} (one statement per line)", describe(t), after));
  lex_.next();
}

std::vector<Graph> Parser::parseModule() {
  std::vector<Graph> graphs;
  for (;;) {
    skipNewlines();
    Token t = lex_.peek();
    if (t.is(Tok::End)) break;
    if (!t.isIdent("graph")) fail(t.pos, fmt::format("expected 'graph', got {}", describe(t)));
    graphs.push_back(parseGraph());
  }
  if (graphs.empty()) fail(lex_.peek().pos, "no graph in file (expected 'graph NAME(PARAMS) {')");
  return graphs;
}

Graph Parser::parseGraph() {
  Token kw = lex_.next();
  Token name = lex_.peek();
  if (!name.is(Tok::Ident))
    fail(name.pos, fmt::format("expected a graph name after 'graph', got {}", describe(name)));
  lex_.next();
  std::string gname(name.text);
  if (auto [it, fresh] = graphNames_.emplace(gname, name.pos); !fresh)
    fail(name.pos,
         fmt::format("duplicate graph name '{}' (first defined at {})", gname, posStr(it->second)));
  GraphBuilder b = [&] {
    try {
      return GraphBuilder(gname);
    } catch (const Error& e) {
      fail(name.pos, e.message());
    }
  }();
  names_.clear();

  expect(Tok::LParen, "'(' after the graph name");
  skipNewlines();
  if (lex_.peek().is(Tok::RParen)) {
    lex_.next();
  } else {
    for (;;) {
      skipNewlines();
      Token p = lex_.peek();
      if (!p.is(Tok::Ident)) expected("a parameter name", p);
      lex_.next();
      checkFresh(p);
      skipNewlines();
      expect(Tok::Colon, fmt::format("':' after parameter '{}'", p.text));
      skipNewlines();
      TensorType type = parseType();
      try {
        int id = b.addInput(std::string(p.text), std::move(type), toLoc(p.pos));
        names_.emplace(std::string(p.text), NameInfo{id, p.pos});
      } catch (const Error& e) {
        fail(p.pos, e.message());
      }
      if (!listContinues(Tok::RParen, "',' or ')' after the parameter")) break;
    }
  }
  skipNewlines();
  expect(Tok::LBrace, "'{' after the parameter list");
  expectEndOfLine("'{'");

  bool returned = false;
  for (;;) {
    skipNewlines();
    Token t = lex_.peek();
    if (t.is(Tok::End))
      fail(t.pos,
           fmt::format("graph '{}' (line {}) is not closed: expected '}}' before end of file",
                       gname, kw.pos.line));
    if (t.is(Tok::RBrace)) {
      lex_.next();
      if (!returned) fail(t.pos, fmt::format("graph {} has no return", gname));
      expectEndOfLine("'}'");
      try {
        return std::move(b).finish();
      } catch (const Error& e) {
        fail(t.pos, e.message());
      }
    }
    if (t.isIdent("graph"))
      fail(t.pos, fmt::format("expected '}}' to close graph '{}' before the next graph", gname));
    if (returned)
      fail(t.pos, fmt::format("statement after return (return must be the last statement of "
                              "graph {})",
                              gname));
    if (t.isIdent("return")) {
      parseReturn(b);
      returned = true;
    } else if (t.is(Tok::Ident)) {
      parseStatement(b);
    } else {
      fail(t.pos, fmt::format("expected a statement (NAME = OP(...)), 'return' or '}}', got {}",
                              describe(t)));
    }
  }
}

TensorType Parser::parseType() {
  Token dt = lex_.peek();
  if (!dt.is(Tok::Ident)) expected("a type such as f32[N, 768]", dt);
  lex_.next();
  std::optional<DType> dtype = parseDType(dt.text);
  if (!dtype)
    fail(dt.pos, fmt::format("unknown dtype {} (valid: f16, bf16, f32, f64, i32, i64, bool)",
                             describe(dt)));
  skipNewlines();
  expect(Tok::LBracket, "'[' after the dtype (a scalar is written f32[])");
  Shape shape;
  skipNewlines();
  if (lex_.peek().is(Tok::RBracket)) {
    lex_.next();
    return TensorType{*dtype, shape};
  }
  for (;;) {
    skipNewlines();
    Token d = lex_.peek();
    if (d.is(Tok::Number) && d.isInt && d.intValue >= 0) shape.push_back(Dim::of(d.intValue));
    else if (d.is(Tok::Ident) && !isReservedWord(d.text))
      shape.push_back(Dim::sym(std::string(d.text)));
    else if (d.is(Tok::Number) || d.is(Tok::Ident))
      fail(d.pos,
           fmt::format("bad dim {}: a dim is a non-negative integer or a symbol", describe(d)));
    else expected("a dim (an integer or a symbol)", d);
    lex_.next();
    if (listContinues(Tok::RBracket, "',' or ']' in the type")) continue;
    return TensorType{*dtype, shape};
  }
}

bool Parser::listContinues(Tok close, std::string_view what) {
  skipNewlines();
  Token sep = lex_.peek();
  if (sep.is(Tok::Comma) || sep.is(close)) {
    lex_.next();
    return sep.is(Tok::Comma);
  }
  expected(what, sep);
}

void Parser::checkFresh(const Token& name) const {
  auto it = names_.find(std::string(name.text));
  if (it != names_.end())
    fail(name.pos, fmt::format("duplicate name '{}' (first defined at {})", name.text,
                               posStr(it->second.pos)));
}

int Parser::lookup(const Token& name) const {
  auto it = names_.find(std::string(name.text));
  if (it == names_.end()) fail(name.pos, fmt::format("undefined value {}", describe(name)));
  return it->second.id;
}

void Parser::parseReturn(GraphBuilder& b) {
  Token kw = lex_.next();
  std::vector<int> outputs;
  for (;;) {
    Token n = lex_.peek();
    if (!n.is(Tok::Ident) || isReservedWord(n.text))
      fail(n.pos, fmt::format("expected a value name after {}, got {}",
                              outputs.empty() ? "'return'" : "','", describe(n)));
    lex_.next();
    outputs.push_back(lookup(n));
    Token sep = lex_.peek();
    if (sep.is(Tok::Comma)) {
      lex_.next();
      continue;
    }
    if (sep.is(Tok::Newline) || sep.is(Tok::End)) break;
    fail(sep.pos,
         fmt::format("expected ',' or end of line after '{}', got {}", n.text, describe(sep)));
  }
  try {
    b.setOutputs(std::move(outputs));
  } catch (const Error& e) {
    fail(kw.pos, e.message());
  }
}

void Parser::parseStatement(GraphBuilder& b) {
  Token name = lex_.next();
  checkFresh(name);
  expect(Tok::Equals, fmt::format("'=' after '{}'", name.text));
  Token opTok = lex_.peek();
  if (!opTok.is(Tok::Ident)) expected("an op name after '='", opTok);
  lex_.next();
  std::optional<OpCode> op = findOp(opTok.text);
  if (!op) fail(opTok.pos, unknownOpMessage(opTok));
  expect(Tok::LParen, fmt::format("'(' after '{}'", opTok.text));

  std::vector<Arg> args;
  bool sawKey = false;
  skipNewlines();
  if (lex_.peek().is(Tok::RParen)) {
    lex_.next();
  } else {
    for (;;) {
      skipNewlines();
      Arg a = parseArg();
      if (!a.isKey && sawKey)
        fail(a.tok.pos,
             fmt::format("positional argument {} after key=value arguments", describe(a.tok)));
      sawKey = sawKey || a.isKey;
      args.push_back(std::move(a));
      if (!listContinues(Tok::RParen, "',' or ')'")) break;
    }
  }
  expectEndOfLine("the statement");
  build(b, name, opTok, *op, args);
}

Arg Parser::parseArg() {
  Arg a;
  Token t = lex_.peek();
  if (t.is(Tok::Number)) {
    a.tok = lex_.next();
    return a;
  }
  if (!t.is(Tok::Ident)) expected("an argument (a value name, a number or key=value)", t);
  a.tok = lex_.next();
  skipNewlines();
  if (lex_.peek().is(Tok::Equals)) {
    lex_.next();
    skipNewlines();
    a.isKey = true;
    a.value = parseAttrValue(a);
    return a;
  }
  if (isReservedWord(a.tok.text))
    fail(a.tok.pos, fmt::format("expected a value name or a number, got {}", describe(a.tok)));
  return a;
}

AttrValue Parser::parseAttrValue(Arg& arg) {
  Token t = lex_.peek();
  if (t.is(Tok::Number)) {
    lex_.next();
    arg.number = t.value;
    if (t.isInt) return t.intValue;
    return t.value;
  }
  if (t.is(Tok::Ident)) {
    lex_.next();
    if (t.text == "true" || t.text == "false") return t.text == "true";
    if (std::optional<DType> d = parseDType(t.text)) return *d;
    return std::string(t.text);
  }
  if (!t.is(Tok::LBracket)) expected(fmt::format("a value after '{}='", arg.tok.text), t);
  lex_.next();
  std::vector<int64_t> ints;
  Shape dims;
  bool anySymbol = false;
  skipNewlines();
  if (lex_.peek().is(Tok::RBracket)) {
    lex_.next();
    return ints;
  }
  for (;;) {
    skipNewlines();
    Token e = lex_.peek();
    if (e.is(Tok::Number) && e.isInt) {
      ints.push_back(e.intValue);
      dims.push_back(Dim::of(e.intValue));
    } else if (e.is(Tok::Ident) && !isReservedWord(e.text)) {
      anySymbol = true;
      dims.push_back(Dim::sym(std::string(e.text)));
    } else if (e.is(Tok::Number) || e.is(Tok::Ident)) {
      fail(e.pos, fmt::format("list element {} is not an integer or a symbol", describe(e)));
    } else {
      expected("a list element (an integer or a symbol)", e);
    }
    lex_.next();
    if (!listContinues(Tok::RBracket, "',' or ']' in the list")) break;
  }
  if (anySymbol) return dims;
  return ints;
}

void Parser::build(GraphBuilder& b, const Token& name, const Token& opTok, OpCode op,
                   const std::vector<Arg>& args) {
  const OpInfo& info = opInfo(op);
  std::vector<const Arg*> positional;
  std::vector<const Arg*> keys;
  for (const Arg& a : args) (a.isKey ? keys : positional).push_back(&a);
  auto isLiteral = [](const Arg* a) { return a->tok.is(Tok::Number); };
  bool anyLiteral = std::any_of(positional.begin(), positional.end(), isLiteral);
  bool takesLiterals = info.cls == OpClass::Binary || info.cls == OpClass::Select;
  // A literal's dtype comes from its partner operand, so the operand count must be right first.
  if (anyLiteral && takesLiterals && positional.size() != static_cast<size_t>(info.arity))
    fail(opTok.pos,
         fmt::format("{} takes {} operands, got {}", info.name, info.arity, positional.size()));

  std::vector<int> operands(positional.size(), -1);
  for (size_t i = 0; i < positional.size(); ++i)
    if (!isLiteral(positional[i])) operands[i] = lookup(positional[i]->tok);
  for (size_t i = 0; i < positional.size(); ++i) {
    const Token& lit = positional[i]->tok;
    if (!isLiteral(positional[i])) continue;
    size_t partner;
    if (info.cls == OpClass::Binary) partner = 1 - i;
    else if (info.cls == OpClass::Select && i >= 1) partner = 3 - i;
    else
      fail(lit.pos, fmt::format("literal {} not allowed as operand {} of {} (literals may be "
                                "operands of binary ops and the 2nd or 3rd operand of select)",
                                describe(lit), i + 1, info.name));
    if (isLiteral(positional[partner]))
      fail(lit.pos, fmt::format("cannot infer the dtype of literal {}: no other operand gives it "
                                "a type",
                                describe(lit)));
    DType dtype = b.graph().node(operands[partner]).type.dtype;
    if (isBool(dtype))
      fail(lit.pos, fmt::format("literal {} cannot be a bool operand of {} (its partner operand "
                                "is bool)",
                                describe(lit), info.name));
    try {
      operands[i] = b.addConstant(lit.value, dtype, toLoc(lit.pos));
    } catch (const Error& e) {
      fail(lit.pos, fmt::format("literal {}: {}", describe(lit), e.message()));
    }
  }

  Attrs attrs;
  for (const Arg* a : keys) {
    std::string key(a->tok.text);
    if (attrs.has(key)) fail(a->tok.pos, fmt::format("attribute '{}' is given twice", key));
    auto spec = std::find_if(info.attrs.begin(), info.attrs.end(),
                             [&](const AttrSpec& s) { return s.name == key; });
    // The exact double of the literal, rather than the builder's int -> double conversion.
    if (a->number && spec != info.attrs.end() && spec->kind == AttrKind::Float)
      attrs.set(key, *a->number);
    else attrs.set(key, a->value);
  }

  try {
    int id =
        b.addOp(op, std::move(operands), std::move(attrs), std::string(name.text), toLoc(name.pos));
    names_.emplace(std::string(name.text), NameInfo{id, name.pos});
  } catch (const OpError& e) {
    SourcePos at = opTok.pos;
    if (e.operand() >= 0 && static_cast<size_t>(e.operand()) < positional.size()) {
      at = positional[static_cast<size_t>(e.operand())]->tok.pos;
    } else if (!e.attr().empty()) {
      for (const Arg* a : keys)
        if (a->tok.text == e.attr()) at = a->tok.pos;
    }
    fail(at, e.message());
  } catch (const Error& e) {
    fail(name.pos, e.message());
  }
}

}  // namespace

std::vector<Graph> parseModule(std::string_view text, std::string_view filename) {
  return Parser(text, filename).parseModule();
}

}  // namespace stitch::ir
