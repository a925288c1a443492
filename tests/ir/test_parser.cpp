// The .stitch parser and printer together: every op round-trips (parse -> print -> parse gives
// an equal graph, and printing is stable), plus the grammar's corners (DESIGN.md contract).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/design_layer_norm.h"
#include "ir/parser.h"
#include "ir/printer.h"

using namespace stitch::ir;

namespace {

// parse -> print -> parse gives equal graphs, and print(parse(print(parse(t)))) == print(parse(t)).
void expectRoundTrip(const std::string& text) {
  std::vector<Graph> g1 = parseModule(text, "in.stitch");
  std::string p1 = printModule(g1);
  std::vector<Graph> g2 = parseModule(p1, "printed.stitch");
  EXPECT_TRUE(g1 == g2) << "input:\n" << text << "printed:\n" << p1;
  EXPECT_EQ(printModule(g2), p1);
}

std::string unaryGraph(const std::string& op, const std::string& type) {
  return "graph g_" + op + "(x: " + type + ") {\n  y = " + op + "(x)\n  return y\n}\n";
}

std::string binaryGraph(const std::string& op, const std::string& dtype) {
  return "graph g_" + op + "(a: " + dtype + "[N, 4], b: " + dtype + "[4]) {\n  y = " + op +
         "(a, b)\n  return y\n}\n";
}

// One small graph per op (several for some), in ops.def order.
std::vector<std::string> opTable() {
  std::vector<std::string> t;
  for (const char* op : {"neg", "abs", "relu"}) {
    t.push_back(unaryGraph(op, "f32[N, 4]"));
    t.push_back(unaryGraph(op, "i32[3]"));
  }
  for (const char* op : {"exp", "log", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin",
                         "cos", "reciprocal", "floor", "ceil", "silu"})
    t.push_back(unaryGraph(op, "f16[2, M]"));
  t.push_back(unaryGraph("logical_not", "bool[4]"));
  for (const char* op : {"add", "sub", "mul", "div", "maximum", "minimum"}) {
    t.push_back(binaryGraph(op, "f32"));
    t.push_back(binaryGraph(op, "i64"));
  }
  t.push_back(binaryGraph("pow", "bf16"));
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"}) t.push_back(binaryGraph(op, "f64"));
  t.push_back(binaryGraph("eq", "bool"));
  t.push_back(binaryGraph("logical_and", "bool"));
  t.push_back(binaryGraph("logical_or", "bool"));
  t.push_back(R"(graph sel(c: bool[N, 1], a: f32[N, 4], b: f32[4]) {
  y = select(c, a, b)
  return y
}
)");
  t.push_back(R"(graph casts(x: f32[N]) {
  h = cast(x, to=f16)
  i = cast(h, to=i32)
  b = cast(i, to=bool)
  return h, i, b
}
)");
  for (const char* op : {"reduce_sum", "reduce_max", "reduce_min", "reduce_mean", "reduce_prod"})
    t.push_back(std::string("graph r(x: f32[N, 4, 8]) {\n  a = ") + op + "(x)\n  b = " + op +
                "(x, axes=[-1, 0], keepdims=true)\n  c = " + op +
                "(x, keepdims=false, axes=[1])\n  return a, b, c\n}\n");
  t.push_back(R"(graph layout(x: f32[N, 4, 8]) {
  r0 = reshape(x, shape=[N, 32])
  r1 = reshape(r0, shape=[-1, 8, 4])
  r2 = reshape(r1, shape=[N, -1])
  r3 = reshape(x, shape=[2, N, 16])
  t = transpose(x, perm=[2, 0, 1])
  t2 = transpose(x, perm=[-1, -2, 0])
  b = broadcast_to(x, shape=[3, N, 4, 8])
  s = slice(x, starts=[0, 1, -4], ends=[9223372036854775807, 3, 8], steps=[1, 1, 2])
  s2 = slice(x, starts=[0, 0, 0], ends=[9223372036854775807, 100, -1])
  s3 = slice(x, starts=[0, 0, 4], ends=[2147483647, 2147483647, 2147483647])
  c = concat(x, x, s2, axis=-1)
  c1 = concat(x, axis=1)
  return r2, r3, t, t2, b, s, s3, c, c1
}
)");
  t.push_back(R"(graph sources(x: f32[N, 4]) {
  f = full(shape=[N, 4], value=0.5, dtype=f32)
  f2 = full(shape=[], value=-inf, dtype=f64)
  f3 = full(shape=[2, 3], value=7, dtype=i32)
  f4 = full(shape=[2], value=1, dtype=bool)
  i = iota(shape=[N, 4], axis=-1, dtype=i64)
  i2 = iota(shape=[8], axis=0, dtype=f16)
  y = add(x, f)
  return y, f2, f3, f4, i, i2
}
)");
  t.push_back(R"(graph training(x: f32[N, 4, 8], seed: i64[], off: i64[], i: i32[N, 2, 8]) {
  u = random_uniform(seed, off, shape=[N, 4, 8])
  u2 = random_uniform(seed, off, shape=[3], dtype=bf16)
  g = gather(x, i, axis=1)
  g2 = gather(x, i, axis=-2)
  a = argmax(x, axis=-1)
  a2 = argmin(x, axis=0, keepdims=true)
  c = check_index(i, size=[4])
  c2 = check_index(i, size=[N])
  return u, u2, g, g2, a, a2, c, c2
}
)");
  t.push_back(R"(graph composites(x: f32[N, 4, 8], g: f32[8], g2: f32[4, 8], b2: f32[4, 8]) {
  s = softmax(x)
  s1 = softmax(x, axis=1)
  l = log_softmax(x, axis=-1)
  n = layer_norm(x, g, g)
  n2 = layer_norm(x, g2, b2, axis=1, eps=1e-3)
  r = rms_norm(x, g)
  r2 = rms_norm(x, g2, axis=-2, eps=0)
  e = gelu(x)
  e2 = gelu(x, approximate=tanh)
  return s, s1, l, n, n2, r, r2, e, e2
}
)");
  return t;
}

const char* kLayerNorm = stitch::testdata::kDesignLayerNorm;

}  // namespace

TEST(RoundTrip, EveryOp) {
  std::set<OpCode> covered;
  for (const std::string& text : opTable()) {
    SCOPED_TRACE(text);
    expectRoundTrip(text);
    for (const Graph& g : parseModule(text, "t.stitch"))
      for (const Node& n : g.nodes()) covered.insert(n.op);
  }
  // A new op in ops.def fails here until it has a round-trip entry above.
  for (OpCode op : allOps())
    if (opInfo(op).inText()) {
      EXPECT_TRUE(covered.count(op)) << "no round-trip test for " << opName(op);
    }
}

TEST(RoundTrip, DesignLayerNormExample) {
  expectRoundTrip(kLayerNorm);
  std::vector<Graph> gs = parseModule(kLayerNorm, "ln.stitch");
  ASSERT_EQ(gs.size(), 1u);
  const Graph& g = gs[0];
  EXPECT_EQ(g.name(), "layer_norm");
  EXPECT_EQ(g.inputs().size(), 3u);
  EXPECT_EQ(g.symbols(), std::vector<std::string>{"N"});
  EXPECT_EQ(g.numOps(), 9u);
  ASSERT_EQ(g.outputs().size(), 1u);
  const Node& y = g.node(g.outputs()[0]);
  EXPECT_EQ(y.name, "y");
  EXPECT_EQ(typeStr(y.type), "f32[N, 768]");
  // Axes are normalized: axes=[-1] reads back as [1].
  EXPECT_EQ(g.node(*g.find("var")).attrs.getInts("axes"), std::vector<int64_t>{1});
  // The literal became an f32 scalar constant just before `ve`.
  int ve = *g.find("ve");
  const Node& lit = g.node(ve - 1);
  EXPECT_EQ(lit.op, OpCode::Constant);
  EXPECT_EQ(typeStr(lit.type), "f32[]");
  EXPECT_EQ(lit.attrs.getFloat("value"), 1e-5);
  EXPECT_EQ(g.node(ve).operands, (std::vector<int>{*g.find("var"), ve - 1}));
  // Locations: the statement's name, 1-based.
  EXPECT_EQ(g.node(*g.find("mean")).loc.line, 3);
  EXPECT_EQ(g.node(*g.find("mean")).loc.col, 3);
  EXPECT_EQ(g.node(*g.find("gamma")).loc.line, 2);
  EXPECT_EQ(g.node(*g.find("gamma")).loc.col, 34);
  EXPECT_EQ(lit.loc.col, 19);
}

TEST(RoundTrip, MultiGraphFileWithComments) {
  const char* text = R"(
# two graphs

graph first(x: f32[4]) {   # trailing comment
  # a comment line

  y = neg(x)   # another

  return y
}
# between graphs
graph second(a: i32[B, 3],
             b: i32[3]) {
  c = add(a,
          b)
  return c, a, c
}
)";
  expectRoundTrip(text);
  std::vector<Graph> gs = parseModule(text, "m.stitch");
  ASSERT_EQ(gs.size(), 2u);
  EXPECT_EQ(gs[0].name(), "first");
  EXPECT_EQ(gs[1].name(), "second");
  // An input may be returned, and a value twice.
  EXPECT_EQ(gs[1].outputs().size(), 3u);
  EXPECT_EQ(gs[1].outputs()[0], gs[1].outputs()[2]);
  EXPECT_EQ(gs[1].outputs()[1], gs[1].inputs()[0]);
  // printModule separates graphs with one blank line.
  std::string p = printModule(gs);
  EXPECT_NE(p.find("}\n\ngraph second("), std::string::npos) << p;
}

TEST(RoundTrip, ZeroParametersAndBraceOnNextLine) {
  const char* text = "graph g()\n{\n  f = full(shape=[2], value=3, dtype=f32)\n  return f\n}";
  expectRoundTrip(text);
  EXPECT_EQ(printModule(parseModule(text, "z")),
            "graph g() {\n  f = full(shape=[2], value=3, dtype=f32)\n  return f\n}\n");
}

TEST(RoundTrip, SymbolsInTypesAndShapeLists) {
  const char* text = R"(graph sym(x: f32[B, S, 64], m: f32[S]) {
  r = reshape(x, shape=[B, S, 8, 8])
  b = broadcast_to(m, shape=[B, S])
  f = full(shape=[B, 1, S], value=0, dtype=f32)
  i = iota(shape=[S, B], axis=1, dtype=i32)
  return r, b, f, i
}
)";
  expectRoundTrip(text);
  const Graph g = parseModule(text, "s")[0];
  EXPECT_EQ(typeStr(g.node(*g.find("r")).type), "f32[B, S, 8, 8]");
  EXPECT_EQ(typeStr(g.node(*g.find("f")).type), "f32[B, 1, S]");
  EXPECT_EQ(typeStr(g.node(*g.find("i")).type), "i32[S, B]");
}

TEST(RoundTrip, LiteralsInBinaryOpsAndSelect) {
  const char* text = R"(graph lits(x: f16[4], n: i32[4], c: bool[4]) {
  a = add(x, 2)
  b = sub(0.5, x)
  d = mul(n, -3)
  e = maximum(x, -inf)
  f = minimum(inf, x)
  g = add(x, nan)
  h = div(x, -1e-5)
  i = pow(x, .5)
  j = lt(n, 7)
  k = select(c, x, 0)
  l = select(c, -1, x)
  m = select(c, n, 2)
  o = add(x, 2.)
  p = add(x, 1E+3)
  q = mul(x, -0)
  return a, b, d, e, f, g, h, i, j, k, l, m, o, p, q
}
)";
  expectRoundTrip(text);
  const Graph g = parseModule(text, "l")[0];
  auto literalOf = [&](const char* name, size_t operand) {
    const Node& n = g.node(*g.find(name));
    const Node& c = g.node(n.operands[operand]);
    EXPECT_EQ(c.op, OpCode::Constant) << name;
    return c;
  };
  EXPECT_EQ(literalOf("a", 1).attrs.getFloat("value"), 2.0);
  EXPECT_EQ(literalOf("a", 1).type.dtype, DType::F16);
  EXPECT_EQ(literalOf("b", 0).attrs.getFloat("value"), 0.5);
  EXPECT_EQ(literalOf("d", 1).type.dtype, DType::I32);
  EXPECT_EQ(literalOf("d", 1).attrs.getFloat("value"), -3.0);
  EXPECT_EQ(literalOf("e", 1).attrs.getFloat("value"), -INFINITY);
  EXPECT_EQ(literalOf("f", 0).attrs.getFloat("value"), INFINITY);
  EXPECT_TRUE(std::isnan(literalOf("g", 1).attrs.getFloat("value")));
  EXPECT_EQ(literalOf("h", 1).attrs.getFloat("value"), -1e-5);
  EXPECT_EQ(literalOf("i", 1).attrs.getFloat("value"), 0.5);
  EXPECT_EQ(literalOf("j", 1).type.dtype, DType::I32);
  EXPECT_EQ(typeStr(g.node(*g.find("j")).type), "bool[4]");
  EXPECT_EQ(literalOf("k", 2).type.dtype, DType::F16);
  EXPECT_EQ(literalOf("l", 1).type.dtype, DType::F16);
  EXPECT_EQ(literalOf("m", 2).type.dtype, DType::I32);
  EXPECT_EQ(literalOf("o", 1).attrs.getFloat("value"), 2.0);
  EXPECT_EQ(literalOf("p", 1).attrs.getFloat("value"), 1000.0);
  EXPECT_TRUE(std::signbit(literalOf("q", 1).attrs.getFloat("value")));
  // Integer-dtype literals print as integers; special values by name.
  std::string p = printModule(std::vector<Graph>{g});
  for (const char* s :
       {"d = mul(n, -3)", "e = maximum(x, -inf)", "f = minimum(inf, x)", "g = add(x, nan)",
        "h = div(x, -1e-05)", "m = select(c, n, 2)", "l = select(c, -1, x)", "q = mul(x, -0)"})
    EXPECT_NE(p.find(s), std::string::npos) << s << "\n" << p;
}

TEST(RoundTrip, AttributeNumbers) {
  const char* text = R"(graph attrs(x: f32[4]) {
  a = full(shape=[4], value=-0, dtype=f32)
  b = full(shape=[4], value=99999999999999999999, dtype=f32)
  c = full(shape=[4], value=nan, dtype=f64)
  d = full(shape=[4], value=1e+300, dtype=f64)
  e = full(shape=[4], value=5e-324, dtype=f64)
  f = full(shape=[4], value=-9223372036854775808, dtype=i64)
  g = layer_norm(x, x, x, eps=0.000001)
  return a, b, c, d, e, f, g
}
)";
  expectRoundTrip(text);
  const Graph g = parseModule(text, "a")[0];
  auto value = [&](const char* n) { return g.node(*g.find(n)).attrs.getFloat("value"); };
  EXPECT_TRUE(std::signbit(value("a")));
  EXPECT_EQ(value("b"), 1e20);  // too big for int64: read as a float
  EXPECT_TRUE(std::isnan(value("c")));
  EXPECT_EQ(value("d"), 1e300);
  EXPECT_EQ(value("e"), 5e-324);
  EXPECT_EQ(value("f"), -9223372036854775808.0);
  EXPECT_EQ(g.node(*g.find("g")).attrs.getFloat("eps"), 1e-6);
}

TEST(ParseSyntax, WhitespaceAndLineEndings) {
  // CRLF line ends, tabs, no final newline, a statement's arguments over several lines.
  const char* text = "graph g(x:f32[ 4 ],y:f32[4]){\r\n\tz=add(\r\n  x ,\n y\n)\r\n\treturn z\r\n}";
  const Graph g = parseModule(text, "w")[0];
  EXPECT_EQ(g.numOps(), 1u);
  EXPECT_EQ(g.node(*g.find("z")).loc.line, 2);
  EXPECT_EQ(g.node(*g.find("z")).loc.col, 2);
}
