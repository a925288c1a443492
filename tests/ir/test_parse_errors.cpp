// Malformed .stitch inputs: each must fail with ErrorCode::Parse, at the exact LINE:COL of the
// problem, with a message that names it. Then a seeded mutation fuzzer: no input may crash the
// parser or make it throw anything but a located Parse error.
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>

#include "common/design_layer_norm.h"
#include "ir/parser.h"
#include "ir/printer.h"

using namespace stitch::ir;

namespace {

struct BadCase {
  const char* what;
  std::string text;
  int line;
  int col;
  std::vector<const char*> mentions;
};

// A graph `g(PARAMS)` whose body is BODY (lines indented by the caller).
std::string graph(const std::string& params, const std::string& body) {
  return "graph g(" + params + ") {\n" + body + "}\n";
}

std::vector<BadCase> badCases() {
  const std::string x4 = "x: f32[4]";
  return {
      {"unknown op", graph(x4, "  y = foo(x)\n  return y\n"), 2, 7, {"unknown op 'foo'"}},
      {"slice of a symbolic axis ending inside it",
       graph("x: f32[N, 4]", "  y = slice(x, starts=[0, 0], ends=[100, 4])\n  return y\n"),
       2,
       31,
       {"symbolic dim N (axis 0) must take the whole axis (end 100 here)",
        "an end of at least 2147483647"}},
      {"slice of a symbolic axis from 1",
       graph("x: f32[N, 4]", "  y = slice(x, starts=[1, 0], ends=[2147483647, 4])\n  return y\n"),
       2,
       16,
       {"(start 1 here)"}},
      {"slice of a symbolic axis with a step",
       graph("x: f32[N, 4]",
             "  y = slice(x, starts=[0, 0], ends=[2147483647, 4], steps=[2, 1])\n  return y\n"),
       2,
       53,
       {"(step 2 here)"}},
      {"unknown op near miss",
       graph(x4, "  y = sofmax(x)\n  return y\n"),
       2,
       7,
       {"unknown op 'sofmax'", "did you mean 'softmax'"}},
      {"random seed not an i64 scalar",
       graph("s: i32[], o: i64[]", "  u = random_uniform(s, o, shape=[4])\n  return u\n"),
       2,
       22,
       {"seed", "i32[]", "i64 scalar"}},
      {"random of an int dtype",
       graph("o: i64[]", "  u = random_uniform(o, o, shape=[4], dtype=i32)\n  return u\n"),
       2,
       39,
       {"dtype i32"}},
      {"gather with a float index",
       graph("x: f32[4, 2], f: f32[4, 1]", "  y = gather(x, f, axis=1)\n  return y\n"),
       2,
       17,
       {"index has dtype f32", "i32 or i64"}},
      {"gather index differs off the axis",
       graph("x: f32[4, 2], i: i64[3, 1]", "  y = gather(x, i, axis=1)\n  return y\n"),
       2,
       17,
       {"[3, 1]", "[4, 2]", "differ on axis 0"}},
      {"check_index of a float",
       graph("f: f32[4, 1]", "  y = check_index(f, size=[3])\n  return y\n"),
       2,
       19,
       {"check_index's index has dtype f32", "i32 or i64"}},
      {"check_index with two dims",
       graph("i: i64[4]", "  y = check_index(i, size=[3, 2])\n  return y\n"),
       2,
       22,
       {"size= holds 2 dims", "exactly one"}},
      {"check_index of a negative size",
       graph("i: i64[4]", "  y = check_index(i, size=[-3])\n  return y\n"),
       2,
       22,
       {"dim -3 in size= is negative"}},
      {"argmax axis out of range",
       graph("x: f32[4, 2]", "  y = argmax(x, axis=3)\n  return y\n"),
       2,
       17,
       {"axis 3 is out of range"}},
      {"dtype mismatch",
       graph("x: f32[4], h: f16[4]", "  y = add(x, h)\n  return y\n"),
       2,
       14,
       {"f32 and f16"}},
      {"shapes do not broadcast",
       graph("x: f32[4, 8], z: f32[3]", "  y = mul(x, z)\n  return y\n"),
       2,
       14,
       {"[4, 8] and [3]", "broadcast"}},
      {"undefined name",
       graph(x4, "  y = add(x, q)\n  return y\n"),
       2,
       14,
       {"undefined value 'q'"}},
      {"duplicate name (param)",
       graph(x4, "  x = neg(x)\n  return x\n"),
       2,
       3,
       {"duplicate name 'x'", "1:9"}},
      {"duplicate name (value)",
       graph(x4, "  y = neg(x)\n  y = abs(x)\n  return y\n"),
       3,
       3,
       {"duplicate name 'y'", "2:3"}},
      {"duplicate parameter",
       "graph g(x: f32[4], x: f32[4]) {\n  return x\n}\n",
       1,
       20,
       {"duplicate name 'x'"}},
      {"axis out of range",
       graph("x: f32[4, 8]", "  y = softmax(x, axis=2)\n  return y\n"),
       2,
       18,
       {"axis 2", "out of range"}},
      {"bad permutation",
       graph("x: f32[4, 8]", "  y = transpose(x, perm=[0, 0])\n  return y\n"),
       2,
       20,
       {"not a permutation"}},
      {"reshape element count",
       graph("x: f32[4, 8]", "  y = reshape(x, shape=[3, 8])\n  return y\n"),
       2,
       18,
       {"[4, 8]", "[3, 8]", "element counts differ"}},
      {"wrong attribute type",
       graph(x4, "  y = cast(x, to=1)\n  return y\n"),
       2,
       15,
       {"'to'", "dtype"}},
      {"unknown attribute",
       graph(x4, "  y = neg(x, axis=1)\n  return y\n"),
       2,
       14,
       {"no attribute 'axis'"}},
      {"missing required attribute",
       graph(x4, "  y = cast(x)\n  return y\n"),
       2,
       7,
       {"needs the attribute 'to'"}},
      {"attribute given twice",
       graph(x4, "  y = concat(x, axis=0, axis=0)\n  return y\n"),
       2,
       25,
       {"'axis' is given twice"}},
      {"bad identifier attribute",
       graph(x4, "  y = gelu(x, approximate=fast)\n  return y\n"),
       2,
       15,
       {"approximate=fast", "none, tanh"}},
      {"wrong operand count",
       graph(x4, "  y = add(x)\n  return y\n"),
       2,
       7,
       {"add takes 2 operands, got 1"}},
      {"missing return", graph(x4, "  y = neg(x)\n"), 3, 1, {"graph g has no return"}},
      {"return of an undefined name", graph(x4, "  return q\n"), 2, 10, {"undefined value 'q'"}},
      {"empty return", graph(x4, "  return\n"), 2, 9, {"expected a value name after 'return'"}},
      {"statement after return",
       graph(x4, "  return x\n  z = neg(x)\n"),
       3,
       3,
       {"statement after return"}},
      {"unknown dtype", graph("x: f8[4]", "  return x\n"), 1, 12, {"unknown dtype 'f8'", "f16"}},
      {"negative dim", graph("x: f32[-1]", "  return x\n"), 1, 16, {"bad dim '-1'"}},
      {"fractional dim", graph("x: f32[2.5]", "  return x\n"), 1, 16, {"bad dim '2.5'"}},
      {"type without brackets",
       graph("x: f32", "  return x\n"),
       1,
       15,
       {"expected '['", "got ')'"}},
      {"unterminated graph",
       "graph g(x: f32[4]) {\n  y = neg(x)\n  return y\n",
       4,
       1,
       {"graph 'g'", "not closed", "end of file"}},
      {"next graph before '}'",
       "graph g(x: f32[4]) {\n  return x\ngraph h(x: f32[4]) {\n",
       3,
       1,
       {"expected '}' to close graph 'g'"}},
      {"missing ')'",
       graph(x4, "  y = neg(x\n  return y\n"),
       2,
       12,
       {"expected ',' or ')' before end of line"}},
      {"missing ','",
       graph("x: f32[4]", "  y = add(x x)\n  return y\n"),
       2,
       13,
       {"expected ',' or ')', got 'x'"}},
      {"missing '='", graph(x4, "  y neg(x)\n  return y\n"), 2, 5, {"expected '=' after 'y'"}},
      {"missing '('", graph(x4, "  y = neg x\n  return y\n"), 2, 11, {"expected '(' after 'neg'"}},
      {"missing '{'",
       "graph g(x: f32[4])\n  return x\n}\n",
       1,
       19,
       {"expected '{' after the parameter list"}},
      {"junk after statement",
       graph(x4, "  y = neg(x) z\n  return y\n"),
       2,
       14,
       {"unexpected 'z' after the statement"}},
      {"junk after '}'", "graph g(x: f32[4]) {\n  return x\n} x\n", 3, 3, {"unexpected 'x'"}},
      {"literal with no typed operand",
       graph(x4, "  y = add(1, 2)\n  return y\n"),
       2,
       11,
       {"cannot infer the dtype of literal '1'"}},
      {"non-integer literal for i32",
       graph("n: i32[4]", "  y = add(n, 1.5)\n  return y\n"),
       2,
       14,
       {"1.5", "not an integer", "i32"}},
      {"literal for a bool operand",
       graph("b: bool[4]", "  y = logical_and(b, 1)\n  return y\n"),
       2,
       22,
       {"bool operand"}},
      {"literal as a unary operand",
       graph(x4, "  y = neg(1)\n  return y\n"),
       2,
       11,
       {"literal '1' not allowed as operand 1 of neg"}},
      {"literal as select's condition",
       graph(x4, "  y = select(1, x, x)\n  return y\n"),
       2,
       14,
       {"not allowed as operand 1 of select"}},
      {"positional after keyword",
       graph(x4, "  y = concat(x, axis=0, x)\n  return y\n"),
       2,
       25,
       {"positional argument 'x' after key=value"}},
      {"empty file", "", 1, 1, {"no graph"}},
      {"only comments", "# nothing\n\n", 3, 1, {"no graph"}},
      {"junk at top level", "foo\n", 1, 1, {"expected 'graph', got 'foo'"}},
      {"duplicate graph name",
       "graph g(x: f32[]) {\n  return x\n}\ngraph g(x: f32[]) {\n  return x\n}\n",
       4,
       7,
       {"duplicate graph name 'g'", "1:7"}},
      {"number out of range",
       graph(x4, "  y = add(x, 1e999)\n  return y\n"),
       2,
       14,
       {"'1e999' out of range"}},
      {"number underflows",
       graph(x4, "  y = add(x, 1e-400)\n  return y\n"),
       2,
       14,
       {"out of range"}},
      {"malformed number",
       graph(x4, "  y = add(x, 1e)\n  return y\n"),
       2,
       14,
       {"malformed number '1e'"}},
      {"bad character",
       graph(x4, "  y = neg(x) @\n  return y\n"),
       2,
       14,
       {"unexpected character '@'"}},
      {"NUL byte",
       graph(x4, std::string("  y = neg(\0x)\n  return y\n", 25)),
       2,
       11,
       {"unexpected character '\\x00'"}},
      {"symbol in shape= not bound",
       graph(x4, "  y = broadcast_to(x, shape=[M, 4])\n  return y\n"),
       2,
       23,
       {"symbol M"}},
      {"layer_norm gamma shape",
       graph("x: f32[N, 768], gamma: f32[512], beta: f32[768]",
             "  y = layer_norm(x, gamma, beta)\n  return y\n"),
       2,
       21,
       {"gamma has shape [512]", "[768]"}},
      {"select with a non-bool condition",
       graph("c: f32[4], a: f32[4]", "  y = select(c, a, a)\n  return y\n"),
       2,
       14,
       {"f32", "bool is required"}},
      {"reserved word as a name",
       graph(x4, "  true = neg(x)\n  return true\n"),
       2,
       3,
       {"reserved word"}},
      {"float in a list",
       graph(x4, "  y = transpose(x, perm=[0.5])\n  return y\n"),
       2,
       26,
       {"list element '0.5'"}},
      {"element count overflow",
       graph(x4, "  y = reshape(x, shape=[9223372036854775807, 2])\n  return y\n"),
       2,
       3,
       {"overflows int64"}},
      {"concat size overflow",
       // bool[2^62] is the largest tensor (2^62 bytes); two of them overflow concat's sum.
       graph("x: bool[4611686018427387904]", "  y = concat(x, x, axis=0)\n  return y\n"),
       2,
       17,
       {"overflows int64"}},
      {"unclosed list",
       graph(x4, "  y = transpose(x, perm=[0\n  return y\n"),
       2,
       27,
       {"expected ',' or ']'"}},
  };
}

}  // namespace

TEST(ParseErrors, PointAtTheProblem) {
  const std::vector<BadCase> cases = badCases();
  EXPECT_GE(cases.size(), 25u);
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    try {
      parseModule(c.text, "bad.stitch");
      ADD_FAILURE() << "parsed without error:\n" << c.text;
    } catch (const stitch::Error& e) {
      EXPECT_EQ(e.code(), stitch::ErrorCode::Parse);
      std::string prefix =
          "bad.stitch:" + std::to_string(c.line) + ":" + std::to_string(c.col) + ": error: ";
      EXPECT_EQ(e.message().rfind(prefix, 0), 0u) << e.message();
      for (const char* m : c.mentions)
        EXPECT_NE(e.message().find(m), std::string::npos)
            << "'" << m << "' not in: " << e.message();
    }
  }
}

TEST(ParseErrors, MessageIsOneLine) {
  // Whatever the input holds, the message quotes it escaped and shortened.
  std::string text = "graph g(x: f32[4]) {\n  y = " + std::string(10000, 'a') + "\x01(x)\n}\n";
  try {
    parseModule(text, "f");
    FAIL();
  } catch (const stitch::Error& e) {
    EXPECT_EQ(e.message().find('\n'), std::string::npos);
    EXPECT_LT(e.message().size(), 200u) << e.message();
  }
}

namespace {

const char* kSeeds[] = {
    stitch::testdata::kDesignLayerNorm,
    R"(graph a(x: f16[B, S, 64], c: bool[S], n: i32[4]) {
  r = reshape(x, shape=[B, S, 8, -1])
  t = transpose(r, perm=[0, 2, 1, 3])
  rm = reduce_max(x, axes=[2])
  s = select(c, 0.5, rm)
  m = maximum(x, -inf)
  k = slice(n, starts=[1], ends=[-1], steps=[2])
  f = full(shape=[B, 1], value=nan, dtype=f32)
  i = iota(shape=[S, 4], axis=1, dtype=i64)
  j = concat(n, n, axis=0)
  g = gelu(x, approximate=tanh)
  l = layer_norm(x, x, x, axis=0, eps=1e-6)
  return t, m, k, f, i, j, g
}

graph b() {
  z = full(shape=[], value=2, dtype=i32)
  return z
}
)",
};

}  // namespace

TEST(ParseFuzz, MutatedInputsFailCleanly) {
  const std::regex located(R"(^fuzz\.stitch:\d+:\d+: error: )");
  static const char kAlphabet[] = "abxyz019_-.e()[]{},:=# \n\t\r\0\x7f\xff@";
  const std::string alphabet(kAlphabet, sizeof kAlphabet - 1);
  for (const char* seed : kSeeds) ASSERT_NO_THROW(parseModule(seed, "seed.stitch")) << seed;
  std::mt19937 rng(20261122);
  int parsed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text = kSeeds[iter % std::size(kSeeds)];
    int mutations = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < mutations && !text.empty(); ++m) {
      size_t at = rng() % text.size();
      char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 5) {
        case 0: text.erase(at, 1 + rng() % 3); break;
        case 1: text.insert(at, 1, c); break;
        case 2: text[at] = c; break;
        case 3: text.resize(at); break;
        default: text.insert(at, text.substr(rng() % text.size(), rng() % 16)); break;
      }
    }
    try {
      std::vector<Graph> gs = parseModule(text, "fuzz.stitch");
      ++parsed;
      // Whatever parses must also survive the round trip.
      std::string printed = printModule(gs);
      EXPECT_TRUE(parseModule(printed, "printed.stitch") == gs) << text;
    } catch (const stitch::Error& e) {
      EXPECT_EQ(e.code(), stitch::ErrorCode::Parse) << e.message();
      EXPECT_TRUE(std::regex_search(e.message(), located)) << e.message();
    } catch (...) {
      ADD_FAILURE() << "unexpected exception for:\n" << text;
    }
  }
  // The mutations should leave some inputs valid, or the round-trip half tests nothing.
  EXPECT_GT(parsed, 0);
}

TEST(ParseFuzz, DegenerateInputs) {
  for (const std::string& text :
       {std::string(100000, '('), "graph g(" + std::string(100000, '['), std::string(50000, '\n'),
        "graph g(x: f32[4]) {\n  y = add(x, " + std::string(5000, '9') + ")\n  return y\n}\n",
        std::string("\0\0\0", 3), std::string("\xef\xbb\xbfgraph"), std::string(100000, '-')}) {
    try {
      parseModule(text, "fuzz.stitch");
      ADD_FAILURE() << "parsed";
    } catch (const stitch::Error& e) {
      EXPECT_EQ(e.code(), stitch::ErrorCode::Parse) << e.message();
    }
  }
}
