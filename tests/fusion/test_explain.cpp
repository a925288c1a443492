// Explaining a plan: a hand-made two-kernel plan of a layer norm, checked in all three formats.
// The JSON is parsed back by a small strict parser below (no third-party JSON library), and the
// DOT is checked structurally (balanced braces outside strings, one cluster per kernel).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/design_layer_norm.h"
#include "fusion/explain.h"
#include "ir/parser.h"

using namespace stitch;
using namespace stitch::fusion;

namespace {

// ---------------------------------------------------------------------------------------------
// A strict JSON parser (RFC 8259), enough to check the writer's output.

struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> fields;

  bool has(std::string_view key) const {
    for (const auto& [k, v] : fields)
      if (k == key) return true;
    return false;
  }
  const Json& operator[](std::string_view key) const {
    for (const auto& [k, v] : fields)
      if (k == key) return v;
    throw std::runtime_error("no key " + std::string(key));
  }
  const Json& operator[](size_t i) const { return items.at(i); }
};

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : s_(text) {}

  Json parse() {
    Json v = value();
    skipSpace();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("JSON: " + what + " at offset " + std::to_string(i_));
  }
  void skipSpace() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }
  bool eat(char c) {
    skipSpace();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  bool literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  Json value() {
    skipSpace();
    if (i_ >= s_.size()) fail("unexpected end");
    Json v;
    char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.kind = Json::Object;
      if (eat('}')) return v;
      do {
        skipSpace();
        std::string key = stringLiteral();
        for (const auto& f : v.fields)
          if (f.first == key) fail("duplicate key " + key);
        expect(':');
        v.fields.emplace_back(std::move(key), value());
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++i_;
      v.kind = Json::Array;
      if (eat(']')) return v;
      do v.items.push_back(value());
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::String;
      v.string = stringLiteral();
    } else if (literal("true")) {
      v.kind = Json::Bool;
      v.boolean = true;
    } else if (literal("false")) {
      v.kind = Json::Bool;
    } else if (literal("null")) {
      v.kind = Json::Null;
    } else {
      v.kind = Json::Number;
      v.number = numberLiteral();
    }
    return v;
  }

  std::string stringLiteral() {
    if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string");
    ++i_;
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("raw control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (i_ + 4 > s_.size()) fail("short \\u escape");
          unsigned cp = std::stoul(std::string(s_.substr(i_, 4)), nullptr, 16);
          i_ += 4;
          if (cp >= 0x80) fail("test parser handles only ASCII \\u escapes");
          out += static_cast<char>(cp);
          break;
        }
        default: fail("bad escape");
      }
    }
  }

  double numberLiteral() {
    size_t start = i_;
    auto digits = [&] {
      size_t from = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ - from;
    };
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') ++i_;
    else if (digits() == 0) fail("bad value");
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (digits() == 0) fail("bad fraction");
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (digits() == 0) fail("bad exponent");
    }
    return std::stod(std::string(s_.substr(start, i_ - start)));
  }

  std::string_view s_;
  size_t i_ = 0;
};

TEST(JsonParserSelfCheck, RejectsWhatJsonRejects) {
  EXPECT_NO_THROW(JsonParser(R"({"a": [1, -2.5e-3, true, null, "x\"y"]})").parse());
  for (const char* bad : {"{", "[1,]", "{\"a\" 1}", "\"a\nb\"", "01", "1.", "inf", "NaN", "{} x",
                          "{\"a\": 1, \"a\": 2}"})
    EXPECT_THROW(JsonParser(bad).parse(), std::runtime_error) << bad;
}

// ---------------------------------------------------------------------------------------------
// The plan under test.

constexpr const char* kLayerNorm = stitch::testdata::kDesignLayerNorm;

// A reason with every character that needs escaping somewhere.
constexpr const char* kOddReason = "basic mode: \"reduce ends a kernel\"\\ and\tso on\nline two";

struct ExplainTest : ::testing::Test {
  ir::Graph g = ir::parseModule(kLayerNorm, "layer_norm.stitch").at(0);
  Plan plan = makePlan();

  int id(const char* name) const { return g.find(name).value(); }

  Plan makePlan() const {
    Plan p;
    p.mode = Mode::Stitch;
    p.target = "sm_90";
    p.bindings = {{"N", 4096}};

    Kernel k0;
    for (const char* n : {"mean", "xc", "sq", "var", "ve", "rstd", "xn"}) k0.nodes.push_back(id(n));
    k0.dominant = id("var");
    k0.mapping = {MappingKind::RowReduce, RowWidth::Warp, 4096 * 768, 4096, 768, 4096, 32};
    k0.edges = {
        {id("mean"), id("xc"), Scheme::Warp, false},  {id("xc"), id("sq"), Scheme::Local, false},
        {id("sq"), id("var"), Scheme::Local, false},  {id("var"), id("ve"), Scheme::Warp, false},
        {id("ve"), id("rstd"), Scheme::Local, false}, {id("xc"), id("xn"), Scheme::Local, true},
        {id("rstd"), id("xn"), Scheme::Local, false}};
    k0.inputs = {id("x")};
    k0.outputs = {id("xn")};
    k0.summary.bytesRead = 4096 * 768 * 4;
    k0.summary.bytesWritten = 4096 * 768 * 4;
    k0.cost = {9.5e-6, 2e-6, 7.25e-6, 0.5e-6, 0.25e-6, 0.97, true, {}};

    Kernel k1;
    k1.nodes = {id("y0"), id("y")};
    k1.dominant = id("y");
    k1.mapping = {MappingKind::Loop, RowWidth::Thread, 4096 * 768, 4096 * 768, 1, 3072, 256};
    k1.edges = {{id("y0"), id("y"), Scheme::Local, false}};
    k1.inputs = {id("xn"), id("gamma"), id("beta")};
    k1.outputs = {id("y")};
    k1.summary.bytesRead = 4096 * 768 * 4 + 2 * 768 * 4;
    k1.summary.bytesWritten = 4096 * 768 * 4;
    k1.cost = {8.0e-6, 2e-6, 6.0e-6, 0.1e-6, 0, 0.99, true, {}};

    p.kernels = {k0, k1};
    p.cuts = {{id("xn"), id("y0"), kOddReason}};
    p.time = 17.5e-6;
    p.bytes = k0.summary.bytesRead + k0.summary.bytesWritten + k1.summary.bytesRead +
              k1.summary.bytesWritten;
    p.unfusedKernels = 9;
    p.unfusedTime = 70e-6;
    p.unfusedBytes = 200'000'000;
    return p;
  }
};

bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

TEST_F(ExplainTest, TextCarriesTheKeyFacts) {
  std::string t = explainText(g, plan);
  EXPECT_TRUE(contains(t, "plan layer_norm (N=4096): mode stitch, target sm_90, 2 kernels")) << t;
  EXPECT_TRUE(contains(t,
                       "kernel 0: 7 ops, dominant var (reduce_mean), mapping row_reduce "
                       "warp-per-row, rows 4096 x length 768, 4096 blocks x 32 threads"))
      << t;
  EXPECT_TRUE(contains(t,
                       "kernel 1: 2 ops, dominant y (add), mapping loop, 3145728 elements, "
                       "3072 blocks x 256 threads"))
      << t;
  EXPECT_TRUE(contains(t, "xc   = sub(x, mean)")) << t;
  EXPECT_TRUE(contains(t, "[mean: warp]")) << t;
  EXPECT_TRUE(contains(t, "[xc: local]")) << t;
  EXPECT_TRUE(contains(t, "[xc: local, recompute; rstd: local]")) << t;
  EXPECT_TRUE(contains(t, "ve   = add(var, 1e-05)")) << t;  // constants inline
  // Inputs and outputs with sizes, N deduced from the row count.
  EXPECT_TRUE(contains(t, "in:   x f32[N, 768] 12.6 MB")) << t;
  EXPECT_TRUE(contains(t, "gamma f32[768] 3.1 KB")) << t;
  EXPECT_TRUE(contains(t, "out:  y f32[N, 768] 12.6 MB")) << t;
  EXPECT_TRUE(contains(t,
                       "cost: 25.2 MB, 9.50 µs (launch 2.00, memory 7.25, compute 0.50, "
                       "sync 0.25 µs; efficiency 0.97)"))
      << t;
  EXPECT_TRUE(contains(t,
                       "totals: 2 kernels, 50.3 MB, 17.5 µs; unfused: 9 kernels, 200 MB, "
                       "70.0 µs (4.0x)"))
      << t;
  // Reasons stay on their line: control characters become spaces.
  EXPECT_TRUE(contains(t,
                       "cut edges:\n  xn -> y0: basic mode: \"reduce ends a kernel\"\\ and so on "
                       "line two\n"))
      << t;
  // Each op line's scheme column starts at the same place within a kernel.
  size_t a = t.find("[mean: warp]") - t.rfind('\n', t.find("[mean: warp]"));
  size_t b = t.find("[ve: local]") - t.rfind('\n', t.find("[ve: local]"));
  EXPECT_EQ(a, b) << t;
}

TEST_F(ExplainTest, JsonParsesBackWithTheRequiredKeys) {
  std::string text = explainJson(g, plan);
  Json j;
  ASSERT_NO_THROW(j = JsonParser(text).parse()) << text;
  ASSERT_EQ(j.kind, Json::Object);
  EXPECT_EQ(j["graph"].string, "layer_norm");
  EXPECT_EQ(j["mode"].string, "stitch");
  EXPECT_EQ(j["target"].string, "sm_90");
  EXPECT_EQ(j["bindings"]["N"].number, 4096);

  const Json& ks = j["kernels"];
  ASSERT_EQ(ks.kind, Json::Array);
  ASSERT_EQ(ks.items.size(), 2u);
  const Json& k0 = ks[0];
  for (const char* key : {"ops", "op_kinds", "dominant", "mapping", "edges", "inputs", "outputs",
                          "bytes", "time_us", "cost"})
    EXPECT_TRUE(k0.has(key)) << key;
  ASSERT_EQ(k0["ops"].items.size(), 7u);
  EXPECT_EQ(k0["ops"][0].string, "mean");
  EXPECT_EQ(k0["op_kinds"][0].string, "reduce_mean");
  EXPECT_EQ(k0["dominant"].string, "var");
  EXPECT_EQ(k0["mapping"]["kind"].string, "row_reduce");
  EXPECT_EQ(k0["mapping"]["width"].string, "warp");
  EXPECT_EQ(k0["mapping"]["rows"].number, 4096);
  EXPECT_EQ(k0["mapping"]["row_length"].number, 768);
  ASSERT_EQ(k0["edges"].items.size(), 7u);
  const Json& e = k0["edges"][5];
  EXPECT_EQ(e["from"].string, "xc");
  EXPECT_EQ(e["to"].string, "xn");
  EXPECT_EQ(e["scheme"].string, "local");
  EXPECT_TRUE(e["recompute"].boolean);
  EXPECT_EQ(k0["inputs"][0]["name"].string, "x");
  EXPECT_EQ(k0["inputs"][0]["type"].string, "f32[N, 768]");
  EXPECT_EQ(k0["inputs"][0]["bytes"].number, 4096.0 * 768 * 4);
  EXPECT_EQ(k0["bytes"].number, 2.0 * 4096 * 768 * 4);
  EXPECT_DOUBLE_EQ(k0["time_us"].number, 9.5);
  EXPECT_DOUBLE_EQ(k0["cost"]["memory_us"].number, 7.25);
  EXPECT_DOUBLE_EQ(k0["cost"]["efficiency"].number, 0.97);
  EXPECT_EQ(ks[1]["mapping"]["kind"].string, "loop");
  // What the cost model was told a thread keeps in flight (one vector load unless set).
  EXPECT_EQ(k0["summary"]["bytes_in_flight_per_thread"].number, 16);

  ASSERT_EQ(j["cuts"].items.size(), 1u);
  EXPECT_EQ(j["cuts"][0]["from"].string, "xn");
  EXPECT_EQ(j["cuts"][0]["to"].string, "y0");
  EXPECT_EQ(j["cuts"][0]["reason"].string, kOddReason);  // escaped, and back
  EXPECT_EQ(j["totals"]["kernels"].number, 2);
  EXPECT_EQ(j["totals"]["bytes"].number, static_cast<double>(plan.bytes));
  EXPECT_DOUBLE_EQ(j["totals"]["time_us"].number, 17.5);
  EXPECT_EQ(j["unfused"]["kernels"].number, 9);
  EXPECT_EQ(j["unfused"]["bytes"].number, 200'000'000);
  EXPECT_DOUBLE_EQ(j["unfused"]["time_us"].number, 70);
}

TEST_F(ExplainTest, InfeasibleKernelsAndUnknownSizesStayValid) {
  // An infeasible kernel costs +inf, which JSON cannot write: it becomes null.
  plan.kernels[1].cost = {std::numeric_limits<double>::infinity(),  2e-6, 0, 0, 0, 1, false,
                          "needs 300 KB of shared memory per block"};
  plan.time = std::numeric_limits<double>::infinity();
  plan.target = "sm_90 \"custom\"";
  // A plan made without bindings: sizes of N-shaped values are unknown, not guessed.
  plan.bindings.clear();

  std::string text = explainJson(g, plan);
  Json j;
  ASSERT_NO_THROW(j = JsonParser(text).parse()) << text;
  EXPECT_EQ(j["target"].string, "sm_90 \"custom\"");
  EXPECT_EQ(j["kernels"][1]["time_us"].kind, Json::Null);
  EXPECT_FALSE(j["kernels"][1]["cost"]["feasible"].boolean);
  EXPECT_EQ(j["totals"]["time_us"].kind, Json::Null);
  EXPECT_TRUE(j["bindings"].fields.empty());
  EXPECT_EQ(j["kernels"][0]["inputs"][0]["bytes"].kind, Json::Null);
  EXPECT_EQ(j["kernels"][1]["inputs"][1]["bytes"].number, 768 * 4);  // gamma: static

  std::string t = explainText(g, plan);
  EXPECT_TRUE(contains(t, "INFEASIBLE: needs 300 KB of shared memory per block")) << t;
  EXPECT_TRUE(contains(t, "inf µs")) << t;
  EXPECT_TRUE(contains(t, "(n/a)")) << t;
  EXPECT_TRUE(contains(t, "in:   x f32[N, 768]\n")) << t;
}

// Counts `{` and `}` outside double-quoted strings; -1 if a string is left open or `}` comes first.
int braceDepthAtEnd(const std::string& dot) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < dot.size(); ++i) {
    char c = dot[i];
    if (inString) {
      if (c == '\\') ++i;
      else if (c == '"') inString = false;
      continue;
    }
    if (c == '"') inString = true;
    else if (c == '{') ++depth;
    else if (c == '}' && --depth < 0) return -1;
  }
  return inString ? -1 : depth;
}

size_t count(const std::string& s, std::string_view part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

TEST_F(ExplainTest, DotIsWellFormed) {
  std::string dot = explainDot(g, plan);
  EXPECT_EQ(dot.rfind("digraph \"layer_norm\" {", 0), 0u) << dot;
  EXPECT_EQ(braceDepthAtEnd(dot), 0) << dot;
  EXPECT_EQ(count(dot, "subgraph cluster_"), plan.kernels.size()) << dot;
  EXPECT_TRUE(contains(dot, "label=\"kernel 0: row_reduce warp-per-row\\n9.50 µs\"")) << dot;
  // Ops carry name and op; inputs are plain nodes outside the clusters.
  EXPECT_TRUE(contains(dot, "n" + std::to_string(id("mean")) + " [label=\"mean\\nreduce_mean\"]"))
      << dot;
  EXPECT_TRUE(contains(dot, "n0 [shape=plain, label=\"x\\nf32[N, 768]\"]")) << dot;
  // Internal edges carry their scheme; the cut edge is dashed, global memory, with its reason.
  std::string mean = "n" + std::to_string(id("mean")), xc = "n" + std::to_string(id("xc"));
  std::string xn = "n" + std::to_string(id("xn")), y0 = "n" + std::to_string(id("y0"));
  EXPECT_TRUE(contains(dot, mean + " -> " + xc + " [label=\"warp\"]")) << dot;
  EXPECT_TRUE(contains(dot, xc + " -> " + xn + " [label=\"local, recompute\"]")) << dot;
  EXPECT_TRUE(
      contains(dot, xn + " -> " + y0 + " [style=dashed, label=\"global memory\", tooltip=\""))
      << dot;
  EXPECT_TRUE(contains(dot, "\\\"reduce ends a kernel\\\"\\\\ and")) << dot;  // quotes escaped
  EXPECT_FALSE(contains(dot, "\nline two")) << dot;                           // newline escaped
}

TEST(PlanNames, EveryEnumHasItsName) {
  EXPECT_EQ(modeName(Mode::Stitch), "stitch");
  EXPECT_EQ(modeName(Mode::Basic), "basic");
  EXPECT_EQ(modeName(Mode::Off), "off");
  EXPECT_EQ(schemeName(Scheme::Local), "local");
  EXPECT_EQ(schemeName(Scheme::Warp), "warp");
  EXPECT_EQ(schemeName(Scheme::Block), "block");
  EXPECT_EQ(schemeName(Scheme::Global), "global");
  EXPECT_EQ(mappingKindName(MappingKind::Loop), "loop");
  EXPECT_EQ(mappingKindName(MappingKind::RowReduce), "row_reduce");
  EXPECT_EQ(mappingKindName(MappingKind::ColumnReduce), "column_reduce");
  EXPECT_EQ(mappingKindName(MappingKind::MiddleReduce), "middle_reduce");
  EXPECT_EQ(mappingKindName(MappingKind::AllReduce), "all_reduce");
  EXPECT_EQ(rowWidthName(RowWidth::Thread), "thread");
  EXPECT_EQ(rowWidthName(RowWidth::Warp), "warp");
  EXPECT_EQ(rowWidthName(RowWidth::Block), "block");
  EXPECT_EQ(rowWidthName(RowWidth::MultiBlock), "multi_block");
}

TEST_F(ExplainTest, APlanReferringToMissingNodesIsAnInternalError) {
  plan.cuts.push_back({id("y"), 999, "no such node"});
  EXPECT_THROW(explainText(g, plan), Error);
  EXPECT_THROW(explainJson(g, plan), Error);
  EXPECT_THROW(explainDot(g, plan), Error);
}

}  // namespace
