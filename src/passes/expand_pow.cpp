#include "passes/expand_pow.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "passes/rewriter.h"

namespace stitch::passes {

namespace {

using ir::DType;
using ir::OpCode;

// The largest |exponent| expanded: x^16 is four squarings.
constexpr double kMaxExponent = 16;

// The value of new node id when it is a constant of any shape (a full, a broadcast or reshape of
// a constant), else nullopt.
std::optional<double> constantValue(const Rewriter& rw, int id) {
  const ir::Node& n = rw.node(id);
  switch (n.op) {
    case OpCode::Constant:
    case OpCode::Full: return n.attrs.getFloat("value");
    case OpCode::BroadcastTo:
    case OpCode::Reshape: return constantValue(rw, n.operands.at(0));
    default: return std::nullopt;
  }
}

bool staticShape(const ir::Shape& s) {
  for (const ir::Dim& d : s)
    if (d.isSymbolic()) return false;
  return true;
}

// x^n for an integer n >= 1 by repeated squaring; the last product made is named `name`
// (x^1 makes none).
int integerPower(Rewriter& rw, int x, int64_t n, const std::string& name) {
  std::optional<int> result;
  int square = x;
  while (true) {
    bool topBit = (n >> 1) == 0;
    if (n & 1)
      result = result ? rw.add(OpCode::Mul, {*result, square}, {}, topBit ? name : "") : square;
    n >>= 1;
    if (n == 0) return *result;
    // A power of two is its last square.
    bool last = (n >> 1) == 0 && !result;
    square = rw.add(OpCode::Mul, {square, square}, {}, last ? name : "");
  }
}

// The expansion of pow node n (its old id `id`) whose exponent is e, or nullopt to keep it.
std::optional<int> expand(Rewriter& rw, int id, double e) {
  const ir::Node& n = rw.src().node(id);
  int x = rw.mapped(n.operands[0]);
  // A copy: rw.add grows the graph under construction, which would leave a reference dangling.
  const ir::TensorType xt = rw.node(x).type;
  if (!(xt.shape == n.type.shape)) return std::nullopt;  // the exponent broadcasts x
  if (e == 1) return x;
  if (e == 0) {
    if (!staticShape(xt.shape)) return std::nullopt;
    return rw.add(OpCode::Full, {}, {{"shape", xt.shape}, {"value", 1.0}, {"dtype", xt.dtype}},
                  n.name);
  }
  bool low = xt.dtype == DType::F16 || xt.dtype == DType::BF16;
  DType compute = low ? DType::F32 : xt.dtype;
  if (low) x = rw.add(OpCode::Cast, {x}, {{"to", compute}});
  double magnitude = std::fabs(e);
  auto whole = static_cast<int64_t>(std::floor(magnitude));
  bool half = magnitude != static_cast<double>(whole);
  if (half) {
    // -inf and -0 as their magnitudes (see the header).
    double inf = std::numeric_limits<double>::infinity();
    int isNegInf = rw.add(OpCode::Eq, {x, rw.constant(-inf, compute)});
    int isZero = rw.add(OpCode::Eq, {x, rw.constant(0.0, compute)});
    int cond = rw.add(OpCode::LogicalOr, {isNegInf, isZero});
    x = rw.add(OpCode::Select, {cond, rw.add(OpCode::Abs, {x}), x});
  }
  // The last op made keeps the pow's name (an output keeps its name): the cast back if any.
  std::string name = low ? std::string() : n.name;
  int y;
  if (half && whole == 0) {
    y = rw.add(e < 0 ? OpCode::Rsqrt : OpCode::Sqrt, {x}, {}, name);
  } else {
    y = integerPower(rw, x, whole, half || e < 0 ? std::string() : name);
    if (half) y = rw.add(OpCode::Mul, {y, rw.add(OpCode::Sqrt, {x})}, {}, e < 0 ? "" : name);
    if (e < 0) y = rw.add(OpCode::Reciprocal, {y}, {}, name);
  }
  if (low) y = rw.add(OpCode::Cast, {y}, {{"to", xt.dtype}}, n.name);
  return y;
}

}  // namespace

ir::Graph expandPowers(const ir::Graph& g) {
  return rewrite(g, [](Rewriter& rw, int id) -> std::optional<int> {
    const ir::Node& n = rw.src().node(id);
    if (n.op != OpCode::Pow) return std::nullopt;
    std::optional<double> e = constantValue(rw, rw.mapped(n.operands[1]));
    if (!e || std::fabs(*e) > kMaxExponent || std::floor(*e * 2) != *e * 2) return std::nullopt;
    return expand(rw, id, *e);
  });
}

}  // namespace stitch::passes
