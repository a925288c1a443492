// The random-graph generator. Structure: inputs are made first (the text format declares them in
// the header, so making one later would break the print/parse round trip), then "patterns" are
// drawn until the op budget is spent exactly. A pattern is a small idiom (a guarded unary, a
// reduction fed back into its operand, a cast chain, ...) of a known maximum op count; one is
// drawn only if it fits the budget left, and falls back to a one-op form otherwise. Every op is
// valid by construction: the generator reasons about shapes itself rather than trying and
// catching builder errors, since a failed op after its literal constant was made would leave an
// unused constant behind (which the printer drops, breaking the round trip).
#include "testing/random_graph.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>

#include "ir/shape.h"
#include "ir/signature.h"

namespace stitch::testing {

namespace {

using ir::Attrs;
using ir::Dim;
using ir::DType;
using ir::OpCode;
using ir::Shape;

// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, and the same on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); the modulo bias is irrelevant at these sizes.
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }
  int range(int lo, int hi) { return lo + below(hi - lo + 1); }
  bool chance(int percent) { return below(100) < percent; }
  // Uniform in [0, 1), from the top 53 bits: exact, so identical everywhere.
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(below(static_cast<int>(v.size())))];
  }

 private:
  uint64_t s_;
};

constexpr int64_t kMaxElements = 4096;
// Bound used for a symbolic dim when estimating sizes; randomBindings binds symbols to 1..8.
constexpr int64_t kSymbolBound = 8;

int64_t maxElements(const Shape& s) {
  int64_t n = 1;
  for (const Dim& d : s) n *= d.isStatic() ? d.size : kSymbolBound;
  return n;
}

bool allStatic(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](const Dim& d) { return d.isStatic(); });
}

class Generator {
 public:
  Generator(uint64_t seed, const RandomGraphOptions& o)
      : rng_(seed), opt_(o), b_("random_" + std::to_string(seed)) {}

  ir::Graph run() {
    makeInputs();
    int lo = std::max(1, opt_.minOps);
    int hi = std::max(lo, opt_.maxOps);
    left_ = rng_.range(lo, hi);
    while (left_ > 0) step();
    chooseOutputs();
    return std::move(b_).finish();
  }

 private:
  // --- Building blocks ----------------------------------------------------------------------

  const ir::TensorType& type(int v) const { return b_.graph().node(v).type; }
  DType dt(int v) const { return type(v).dtype; }
  const Shape& shape(int v) const { return type(v).shape; }
  int rank(int v) const { return static_cast<int>(shape(v).size()); }

  int op(OpCode code, std::vector<int> operands, Attrs attrs = {}) {
    int id = b_.addOp(code, std::move(operands), std::move(attrs));
    --left_;
    values_.push_back(id);
    return id;
  }
  // A binary op with a scalar literal operand (on the right unless litFirst).
  int opLit(OpCode code, int x, double value, bool litFirst = false) {
    int c = b_.addConstant(value, dt(x));
    return litFirst ? op(code, {c, x}) : op(code, {x, c});
  }

  // A value satisfying pred, biased toward recent ones so chains form; -1 if none.
  template <class Pred>
  int pickValue(Pred pred) {
    std::vector<int> ok;
    for (int v : values_)
      if (pred(v)) ok.push_back(v);
    if (ok.empty()) return -1;
    if (rng_.chance(60)) {
      size_t k = std::min<size_t>(ok.size(), 3);
      return ok[ok.size() - 1 - static_cast<size_t>(rng_.below(static_cast<int>(k)))];
    }
    return rng_.pick(ok);
  }
  int pickFloat(int minRank = 0) {
    return pickValue([&](int v) { return ir::isFloat(dt(v)) && rank(v) >= minRank; });
  }
  int pickF32(int minRank = 0) {
    return pickValue([&](int v) { return dt(v) == DType::F32 && rank(v) >= minRank; });
  }

  // A float literal from a small set of friendly values.
  double literal() {
    static const std::vector<double> kValues = {0.5, 2.0, -1.5, 0.25, 3.0, -0.75, 1.0, 0.125};
    return rng_.pick(kValues);
  }

  // --- Inputs and outputs -------------------------------------------------------------------

  void makeInputs() {
    int r = rng_.range(1, 4);
    static const std::vector<int64_t> kDims = {1, 2, 3, 4, 4, 5, 6, 7, 8, 8};
    Shape p;
    for (int i = 0; i < r; ++i) p.push_back(Dim::of(rng_.pick(kDims)));
    if (opt_.symbolic) {
      if (rng_.chance(75)) p[0] = Dim::sym("N");
      if (r >= 2 && rng_.chance(50)) p[static_cast<size_t>(r - 1)] = Dim::sym("M");
    }
    int n = rng_.range(1, 4);
    addInput({DType::F32, p});
    for (int i = 1; i < n; ++i) {
      int k = rng_.below(100);
      if (k < 35) {
        addInput({DType::F32, p});
      } else if (k < 60) {
        // A row vector: the trailing dims (gamma-like).
        size_t from = static_cast<size_t>(rng_.below(r));
        addInput({DType::F32, Shape(p.begin() + static_cast<long>(from), p.end())});
      } else if (k < 75) {
        // A column vector: leading dims, trailing ones 1.
        Shape c = p;
        for (size_t j = 1; j < c.size(); ++j) c[j] = Dim::of(1);
        if (c.size() == 1) c.push_back(Dim::of(1));
        addInput({DType::F32, c});
      } else if (k < 87) {
        addInput({DType::I32, p});
      } else if (k < 94) {
        addInput({rng_.chance(50) ? DType::F16 : DType::BF16, p});
      } else {
        addInput({DType::Bool, p});
      }
    }
  }
  void addInput(ir::TensorType t) {
    int id = b_.addInput("x" + std::to_string(b_.graph().inputs().size()), std::move(t));
    values_.push_back(id);
  }

  void chooseOutputs() {
    std::vector<int> outs = {values_.back()};
    int extra = rng_.below(3);
    for (int i = 0; i < extra; ++i) {
      int v = rng_.pick(values_);
      bool isInput = b_.graph().node(v).op == OpCode::Input;
      // Inputs may be returned, but rarely: it is an edge case, not the common shape.
      if (isInput && !rng_.chance(10)) continue;
      if (std::find(outs.begin(), outs.end(), v) == outs.end()) outs.push_back(v);
    }
    b_.setOutputs(outs);
  }

  // --- Patterns -----------------------------------------------------------------------------

  void step() {
    int k = rng_.below(100);
    if (k < 14) unaryPattern();
    else if (k < 30) binaryPattern();
    else if (k < 46) reducePattern();
    else if (k < 52) castPattern();
    else if (k < 59) selectPattern();
    else if (k < 63) intPattern();
    else if (k < 65) sourcePattern();
    else if (k < 71) trainingPattern();
    else if (k < 73) manualSoftmaxPattern();
    else if (k < 85 && opt_.layout) layoutPattern();
    else if (opt_.composites) compositePattern();
    else unaryPattern();
  }

  // Unary float ops, guarded against NaN/inf where the domain asks for it.
  void unaryPattern() {
    int x = pickFloat();
    if (x < 0) return intPattern();
    int k = rng_.below(20);
    if (k < 4 && left_ >= 3) {
      // log(abs(x) + 1), rsqrt(abs(x) + 0.5), reciprocal(abs(x) + 0.5).
      static const std::vector<OpCode> kOps = {OpCode::Log, OpCode::Rsqrt, OpCode::Reciprocal};
      OpCode f = rng_.pick(kOps);
      int a = op(OpCode::Abs, {x});
      int s = opLit(OpCode::Add, a, f == OpCode::Log ? 1.0 : 0.5, rng_.chance(30));
      op(f, {s});
    } else if (k < 8 && left_ >= 2) {
      // sqrt(abs(x)), log1p(abs(x)), exp(tanh(x)).
      int pickIt = rng_.below(3);
      if (pickIt == 2) op(OpCode::Exp, {op(OpCode::Tanh, {x})});
      else op(pickIt == 0 ? OpCode::Sqrt : OpCode::Log1p, {op(OpCode::Abs, {x})});
    } else if (k == 8) {
      // Occasionally unguarded: NaN for negative inputs must be handled too.
      op(rng_.chance(50) ? OpCode::Log : OpCode::Exp, {x});
    } else {
      static const std::vector<OpCode> kSafe = {
          OpCode::Neg, OpCode::Abs, OpCode::Relu, OpCode::Tanh,  OpCode::Sigmoid,
          OpCode::Erf, OpCode::Sin, OpCode::Cos,  OpCode::Floor, OpCode::Ceil};
      op(rng_.pick(kSafe), {x});
    }
  }

  // A partner of x for a binary op: same dtype, broadcastable, result not too big.
  int partnerOf(int x) {
    return pickValue([&](int v) {
      if (dt(v) != dt(x)) return false;
      auto s = ir::broadcastShapes(shape(x), shape(v));
      return s && maxElements(*s) <= kMaxElements;
    });
  }

  void binaryPattern() {
    int x = pickFloat();
    if (x < 0) return intPattern();
    static const std::vector<OpCode> kOps = {OpCode::Add, OpCode::Sub, OpCode::Mul, OpCode::Maximum,
                                             OpCode::Minimum};
    int k = rng_.below(10);
    if (k < 3) {
      // x op literal (a scalar broadcast), either side.
      // Draws are sequenced one per statement: argument evaluation order is unspecified.
      OpCode f = rng_.pick(kOps);
      double v = literal();
      opLit(f, x, v, rng_.chance(30));
      return;
    }
    if (k == 3) {
      // pow with a literal exponent; a non-integral one needs a positive base.
      if (rng_.chance(50) || left_ < 3) {
        opLit(OpCode::Pow, x, rng_.chance(50) ? 2.0 : 3.0);
      } else {
        int a = opLit(OpCode::Add, op(OpCode::Abs, {x}), 0.5);
        opLit(OpCode::Pow, a, 0.5);
      }
      return;
    }
    int y = partnerOf(x);
    if (k < 6 && left_ >= 3) {
      // Division by abs(y) + 0.5.
      int a = opLit(OpCode::Add, op(OpCode::Abs, {y}), 0.5);
      if (rng_.chance(50)) op(OpCode::Div, {x, a});
      else op(OpCode::Div, {a, x});
      return;
    }
    if (rng_.chance(50)) op(rng_.pick(kOps), {x, y});
    else op(rng_.pick(kOps), {y, x});
  }

  // Reductions of every axis kind, often fed back into an elementwise op with their operand.
  void reducePattern() {
    int x = pickValue([&](int v) { return !ir::isBool(dt(v)) && rank(v) >= 1; });
    if (x < 0) return unaryPattern();
    bool isF = ir::isFloat(dt(x));
    static const std::vector<OpCode> kFloat = {OpCode::ReduceSum, OpCode::ReduceMax,
                                               OpCode::ReduceMin, OpCode::ReduceMean,
                                               OpCode::ReduceProd};
    static const std::vector<OpCode> kInt = {OpCode::ReduceSum, OpCode::ReduceMax,
                                             OpCode::ReduceMin};
    OpCode kind = isF ? rng_.pick(kFloat) : rng_.pick(kInt);
    int r = rank(x);
    std::vector<int64_t> axes;
    int how = rng_.below(4);  // 0 row, 1 column, 2 middle, 3 all
    if (how == 2 && r < 3) how = rng_.below(2);
    int cnt = r > 1 ? rng_.range(1, r - 1) : 1;
    if (how == 0) {
      for (int i = r - cnt; i < r; ++i) axes.push_back(rng_.chance(30) ? i - r : i);
    } else if (how == 1) {
      for (int i = 0; i < cnt; ++i) axes.push_back(i);
    } else if (how == 2) {
      axes.push_back(rng_.range(1, r - 2));
    } else {
      for (int i = 0; i < r; ++i) axes.push_back(i);
    }
    bool keep = rng_.chance(50);
    Attrs attrs;
    // "all axes" is written both ways: explicit and by omitting axes=.
    if (!(how == 3 && rng_.chance(50))) attrs.set("axes", axes);
    attrs.set("keepdims", keep);
    int red = op(kind, {x}, attrs);
    if (left_ < 1 || !rng_.chance(65)) return;
    // Feed back: the reduced value meets its operand in an elementwise op (x - max(x), ...).
    int small = red;
    bool leadingOnly = how == 1 || how == 3;
    if (!keep && !leadingOnly) {
      if (left_ < 2) return;
      // Restore the reduced dims as 1s so it broadcasts against x.
      Shape s = shape(x);
      for (int64_t a : axes) s[static_cast<size_t>(a < 0 ? a + r : a)] = Dim::of(1);
      small = op(OpCode::Reshape, {red}, {{"shape", s}});
    } else if (keep && left_ >= 2 && rng_.chance(25)) {
      small = op(OpCode::BroadcastTo, {red}, {{"shape", shape(x)}});
    }
    static const std::vector<OpCode> kBack = {OpCode::Sub, OpCode::Add, OpCode::Mul,
                                              OpCode::Maximum};
    if (isF && kind != OpCode::ReduceProd && left_ >= 3 && rng_.chance(25)) {
      // x / (abs(r) + 0.5): the normalization shape.
      int a = opLit(OpCode::Add, op(OpCode::Abs, {small}), 0.5);
      op(OpCode::Div, {x, a});
    } else {
      op(rng_.pick(kBack), {x, small});
    }
  }

  // The softmax idiom written out: max, sub, exp, sum, div over a random axis.
  void manualSoftmaxPattern() {
    int x = pickF32(1);
    if (x < 0 || left_ < 5) return reducePattern();
    int64_t axis = rng_.below(rank(x));
    Attrs a{{"axes", std::vector<int64_t>{axis}}, {"keepdims", true}};
    int m = op(OpCode::ReduceMax, {x}, a);
    int e = op(OpCode::Exp, {op(OpCode::Sub, {x, m})});
    int s = op(OpCode::ReduceSum, {e}, a);
    op(OpCode::Div, {e, s});
  }

  // f32 -> f16/bf16 -> (work) -> f32, and f32 <-> i32.
  void castPattern() {
    int x = pickF32();
    if (x < 0 || left_ < 2) return unaryPattern();
    int k = rng_.below(10);
    if (k < 7) {
      DType low = rng_.chance(50) ? DType::F16 : DType::BF16;
      int c = op(OpCode::Cast, {x}, {{"to", low}});
      if (left_ >= 2) {
        if (opt_.composites && left_ >= 3 && rng_.chance(30) && rank(c) >= 1)
          c = op(rng_.chance(50) ? OpCode::Softmax : OpCode::Silu, {c});
        else if (rng_.chance(50)) c = opLit(OpCode::Mul, c, literal());
        else c = op(OpCode::Tanh, {c});
      }
      if (left_ >= 1) op(OpCode::Cast, {c}, {{"to", DType::F32}});
    } else {
      // Scale first so truncation gives a spread of integers, not all zeros.
      int s = opLit(OpCode::Mul, x, 8.0);
      if (left_ < 1) return;
      int i = op(OpCode::Cast, {s}, {{"to", DType::I32}});
      if (left_ >= 1) op(OpCode::Cast, {i}, {{"to", DType::F32}});
    }
  }

  void selectPattern() {
    int x = pickValue([&](int v) { return !ir::isBool(dt(v)); });
    if (x < 0 || left_ < 2) return unaryPattern();
    int cond = -1;
    if (rng_.chance(25)) {
      cond = pickValue([&](int v) {
        if (!ir::isBool(dt(v))) return false;
        auto s = ir::broadcastShapes(shape(x), shape(v));
        return s && maxElements(*s) <= kMaxElements;
      });
    }
    if (cond < 0) {
      static const std::vector<OpCode> kCmp = {OpCode::Gt, OpCode::Lt, OpCode::Ge,
                                               OpCode::Le, OpCode::Eq, OpCode::Ne};
      OpCode c = rng_.pick(kCmp);
      int y = partnerOf(x);
      if (y != x && rng_.chance(60)) cond = op(c, {x, y});
      else cond = opLit(c, x, ir::isFloat(dt(x)) ? 0.0 : 1.0);
    }
    if (left_ >= 3 && rng_.chance(30)) {
      if (rng_.chance(50)) {
        cond = op(OpCode::LogicalNot, {cond});
      } else {
        int other = opLit(OpCode::Gt, x, ir::isFloat(dt(x)) ? 0.25 : -2.0);
        cond = op(rng_.chance(50) ? OpCode::LogicalAnd : OpCode::LogicalOr, {cond, other});
      }
    }
    if (left_ < 1) return;
    int y = partnerOf(x);
    auto fits = ir::broadcastShapes(shape(cond), shape(y));
    if (y != x && fits && maxElements(*fits) <= kMaxElements && rng_.chance(50)) {
      op(OpCode::Select, {cond, x, y});
    } else {
      // A -inf fill (attention masking) is kept rare: downstream arithmetic turns it into NaN.
      double v = ir::isFloat(dt(x)) && rng_.chance(5) ? -INFINITY : rng_.chance(50) ? 0.0 : -1.0;
      int c = b_.addConstant(v, dt(x));
      if (rng_.chance(50)) op(OpCode::Select, {cond, x, c});
      else op(OpCode::Select, {cond, c, x});
    }
  }

  void intPattern() {
    int x = pickValue([&](int v) { return dt(v) == DType::I32; });
    if (x < 0) {
      int f = pickF32();
      if (f < 0 || left_ < 2) {
        if (f < 0) f = pickFloat();
        if (f < 0) {
          // Only bool values so far (cannot happen: input 0 is f32); stay total anyway.
          op(OpCode::LogicalNot, {values_.front()});
          return;
        }
        op(OpCode::Neg, {f});
        return;
      }
      x = op(OpCode::Cast, {opLit(OpCode::Mul, f, 8.0)}, {{"to", DType::I32}});
      if (left_ < 1) return;
    }
    int k = rng_.below(10);
    if (k < 3) {
      static const std::vector<OpCode> kUn = {OpCode::Neg, OpCode::Abs, OpCode::Relu};
      op(rng_.pick(kUn), {x});
    } else if (k < 5) {
      static const std::vector<int> kLits = {2, 3, -1, 5};
      static const std::vector<OpCode> kOps = {OpCode::Add, OpCode::Mul,     OpCode::Div,
                                               OpCode::Sub, OpCode::Maximum, OpCode::Minimum};
      OpCode f = rng_.pick(kOps);
      int v = rng_.pick(kLits);
      opLit(f, x, v, rng_.chance(25));
    } else if (k < 8) {
      int y = partnerOf(x);
      static const std::vector<OpCode> kOps = {OpCode::Add,     OpCode::Sub,     OpCode::Mul,
                                               OpCode::Maximum, OpCode::Minimum, OpCode::Div};
      op(rng_.pick(kOps), {x, y});
    } else {
      op(OpCode::Cast, {x}, {{"to", DType::F32}});
    }
  }

  // iota and full, combined with a value of the same shape.
  void sourcePattern() {
    int x = pickF32();
    if (x < 0 || left_ < 2) return unaryPattern();
    int k = rng_.below(10);
    if (k < 4 && rank(x) >= 1 && left_ >= 3) {
      int64_t axis = rng_.below(rank(x));
      if (rng_.chance(50)) {
        int io = op(OpCode::Iota, {}, {{"shape", shape(x)}, {"axis", axis}, {"dtype", DType::F32}});
        int sc = opLit(OpCode::Mul, io, 0.25);
        op(OpCode::Add, {x, sc});
      } else {
        // A mask from iota: where the index equals a given one.
        int io = op(OpCode::Iota, {}, {{"shape", shape(x)}, {"axis", axis}, {"dtype", DType::I32}});
        int eq = opLit(OpCode::Eq, io, 1.0);
        int c = b_.addConstant(0.0, DType::F32);
        op(OpCode::Select, {eq, x, c});
      }
    } else {
      // full of the whole shape, a row, or a scalar.
      Shape s;
      int w = rng_.below(3);
      if (w == 0) s = shape(x);
      else if (w == 1 && rank(x) >= 1) s = Shape(shape(x).end() - 1, shape(x).end());
      int f = op(OpCode::Full, {}, {{"shape", s}, {"value", literal()}, {"dtype", DType::F32}});
      static const std::vector<OpCode> kOps = {OpCode::Add, OpCode::Mul, OpCode::Sub};
      op(rng_.pick(kOps), {x, f});
    }
  }

  // The ops of training graphs: dropout (random_uniform with seed and offset from `full`
  // scalars), gather (of a same-shaped index, or of one index per row from a reduction, which
  // becomes a one-hot reduction when the data is computed, or that pick written as a one-hot row
  // sum, which sinks to a gather when the data is an input's; indices kept in range by
  // minimum(abs(...)), or argmax along a symbolic axis; or such an index checked by check_index,
  // as a label) and argmax/argmin.
  void trainingPattern() {
    int x = pickF32(1);
    if (x < 0) return unaryPattern();
    int k = rng_.below(5);
    int64_t axis = rng_.below(rank(x));
    // argmax/argmin are composites: only where the options ask for them (the planner's own
    // tests plan graphs that no pass has decomposed).
    if (k == 2 && !opt_.composites) k = 3;
    if (k == 3 && rank(x) < 2) k = 0;
    // The ops each needs: dropout 6, a gather 5 (and one each for a per-row index and for
    // exp(x) as its data, where they fit), argmax 2, the backward 5, a label 6.
    static constexpr int kOps[] = {6, 5, 2, 5, 6};
    if (left_ < kOps[k]) return unaryPattern();
    if (k == 3) {
      // A normalization's backward: a row statistic, a value from it per element, and column
      // reductions of that value and of x over the kept axes (column partials in one kernel).
      int last = rank(x) - 1;
      std::vector<int64_t> kept;
      for (int a = 0; a < last; ++a) kept.push_back(a);
      int r =
          op(OpCode::ReduceMean, {x}, {{"axes", std::vector<int64_t>{last}}, {"keepdims", true}});
      int g = op(OpCode::Mul, {op(OpCode::Sub, {x, r}), x});
      op(OpCode::ReduceSum, {g}, {{"axes", kept}, {"keepdims", rng_.chance(50)}});
      op(rng_.chance(50) ? OpCode::ReduceSum : OpCode::ReduceMean, {x},
         {{"axes", kept}, {"keepdims", rng_.chance(50)}});
    } else if (k == 0) {
      auto scalar = [&](double v) {
        return op(OpCode::Full, {}, {{"shape", Shape{}}, {"value", v}, {"dtype", DType::I64}});
      };
      int seed = scalar(static_cast<double>(rng_.below(1000)));
      int offset = scalar(static_cast<double>(rng_.below(4)));
      int u = op(OpCode::RandomUniform, {seed, offset}, {{"shape", shape(x)}});
      int keep = opLit(OpCode::Ge, u, 0.25);
      op(OpCode::Select,
         {keep, opLit(OpCode::Mul, x, 1.0 / 0.75), b_.addConstant(0.0, DType::F32)});
    } else if (k == 1 || k == 4) {
      // Indices in range: one outside fails the run (index errors have tests of their own).
      const ir::Dim n = shape(x)[static_cast<size_t>(axis)];
      const bool label = k == 4;  // check_index of an index (a label), used as a value
      // One index per row, along the axis; a gather of computed data.
      const bool perRow = !label && rng_.chance(50) && left_ >= 6;
      const bool exp = !label && rng_.chance(50) && left_ >= (perRow ? 7 : 6);
      const DType it = rng_.chance(50) ? DType::I32 : DType::I64;
      int index;
      if (n.isStatic()) {
        int src = x;
        if (perRow)
          src = op(OpCode::ReduceMax, {x},
                   {{"axes", std::vector<int64_t>{axis}}, {"keepdims", true}});
        // Not 8: a mean of a softmax (1 / n) times 8 is an integer, which rounding can leave on
        // either side of the cast.
        index = op(OpCode::Cast, {opLit(OpCode::Mul, src, 7.3)}, {{"to", it}});
        index = opLit(OpCode::Minimum, op(OpCode::Abs, {index}), static_cast<double>(n.size - 1));
      } else if (opt_.composites) {
        // A symbolic axis: the argmax along it (a composite) is always in range.
        index = op(OpCode::Argmax, {x}, {{"axis", axis}, {"keepdims", true}});
        if (!perRow && !label) index = op(OpCode::BroadcastTo, {index}, {{"shape", shape(x)}});
        if (it != DType::I64) index = op(OpCode::Cast, {index}, {{"to", it}});
      } else {
        // ... or its first position (symbols are bound to 1..8).
        Shape s = shape(x);
        if (perRow) s[static_cast<size_t>(axis)] = ir::Dim::of(1);
        index = op(OpCode::Full, {}, {{"shape", s}, {"value", 0.0}, {"dtype", it}});
      }
      if (label) {
        op(OpCode::Cast, {op(OpCode::CheckIndex, {index}, {{"size", Shape{n}}})},
           {{"to", DType::F32}});
        return;
      }
      int data = exp ? op(OpCode::Exp, {x}) : x;
      if (perRow && rng_.chance(40) && left_ >= 3) {
        // The same pick as a one-hot row sum, as losses write it (passes/sink_picks.h).
        int cls = op(OpCode::Iota, {}, {{"shape", shape(data)}, {"axis", axis}, {"dtype", it}});
        int hit = op(OpCode::Eq, {cls, index});
        int picked = op(OpCode::Select, {hit, data, b_.addConstant(0.0, DType::F32)});
        op(OpCode::ReduceSum, {picked},
           {{"axes", std::vector<int64_t>{axis}}, {"keepdims", rng_.chance(50)}});
        return;
      }
      op(OpCode::Gather, {data, index}, {{"axis", rng_.chance(30) ? axis - rank(x) : axis}});
    } else {
      int a = op(rng_.chance(50) ? OpCode::Argmax : OpCode::Argmin, {x},
                 {{"axis", axis}, {"keepdims", rng_.chance(50)}});
      op(OpCode::Cast, {a}, {{"to", DType::F32}});
    }
  }

  void layoutPattern() {
    int k = rng_.below(6);
    if (k == 0) reshapePattern();
    else if (k == 1) transposePattern();
    else if (k == 2) slicePattern();
    else if (k == 3) concatPattern();
    else if (k == 4) broadcastPattern();
    else reshapePattern();
  }

  void reshapePattern() {
    int x = pickValue([](int) { return true; });
    Shape s = shape(x);
    int k = rng_.below(5);
    // Candidates: adjacent static dims to merge, static dims to split, unit dims to drop.
    std::vector<size_t> merge, split, unit;
    for (size_t i = 0; i < s.size(); ++i) {
      if (i + 1 < s.size() && s[i].isStatic() && s[i + 1].isStatic()) merge.push_back(i);
      if (s[i].isStatic() && s[i].size >= 4 && s[i].size % 2 == 0) split.push_back(i);
      if (s[i].isOne()) unit.push_back(i);
    }
    Shape t = s;
    if (k == 0 && !merge.empty()) {
      size_t i = rng_.pick(merge);
      t[i] = Dim::of(s[i].size * s[i + 1].size);
      t.erase(t.begin() + static_cast<long>(i) + 1);
    } else if (k == 1 && !split.empty() && s.size() < 4) {
      size_t i = rng_.pick(split);
      t[i] = Dim::of(2);
      t.insert(t.begin() + static_cast<long>(i) + 1, Dim::of(s[i].size / 2));
    } else if (k == 2 && !unit.empty()) {
      t.erase(t.begin() + static_cast<long>(rng_.pick(unit)));
    } else if (k == 3 && allStatic(s) && !s.empty()) {
      // Flatten everything, sometimes written with -1.
      t = {Dim::of(rng_.chance(40) ? -1 : maxElements(s))};
    } else if (s.size() < 4) {
      t.insert(t.begin() + rng_.below(static_cast<int>(s.size()) + 1), Dim::of(1));
    }
    int r = op(OpCode::Reshape, {x}, {{"shape", t}});
    // Sometimes unflatten right back (reshape of reshape, foldable).
    if (left_ >= 1 && rng_.chance(25)) op(OpCode::Reshape, {r}, {{"shape", s}});
  }

  void transposePattern() {
    int x = pickValue([&](int v) { return rank(v) >= 2; });
    if (x < 0) return reshapePattern();
    std::vector<int64_t> perm(static_cast<size_t>(rank(x)));
    std::iota(perm.begin(), perm.end(), 0);
    if (!rng_.chance(10)) {  // 10%: the identity, which foldReshapes removes
      for (size_t i = perm.size() - 1; i > 0; --i)
        std::swap(perm[i], perm[static_cast<size_t>(rng_.below(static_cast<int>(i) + 1))]);
    }
    op(OpCode::Transpose, {x}, {{"perm", perm}});
  }

  void slicePattern() {
    int x = pickValue([&](int v) { return rank(v) >= 1; });
    if (x < 0) return reshapePattern();
    const Shape& s = shape(x);
    std::vector<int64_t> starts, ends, steps;
    bool whole = rng_.chance(10);
    std::vector<size_t> cuttable;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i].isStatic() && s[i].size >= 2) cuttable.push_back(i);
    size_t cut = cuttable.empty() || whole ? s.size() : rng_.pick(cuttable);
    for (size_t i = 0; i < s.size(); ++i) {
      if (i != cut) {
        starts.push_back(0);
        ends.push_back(s[i].isStatic() && rng_.chance(50) ? s[i].size : INT64_MAX);
        steps.push_back(1);
        continue;
      }
      int64_t n = s[i].size;
      int64_t st = rng_.below(static_cast<int>(n - 1));
      int64_t en = rng_.range(static_cast<int>(st) + 1, static_cast<int>(n));
      // Python-style negative indices, sometimes.
      starts.push_back(rng_.chance(20) ? st - n : st);
      ends.push_back(en < n && rng_.chance(20) ? en - n : en);
      steps.push_back(rng_.chance(30) ? 2 : 1);
    }
    op(OpCode::Slice, {x}, {{"starts", starts}, {"ends", ends}, {"steps", steps}});
  }

  void concatPattern() {
    int x = pickValue([&](int v) {
      return rank(v) >= 1 && maxElements(shape(v)) * 2 <= kMaxElements &&
             std::any_of(shape(v).begin(), shape(v).end(),
                         [](const Dim& d) { return d.isStatic(); });
    });
    if (x < 0 || left_ < 1) return reshapePattern();
    std::vector<int64_t> axes;
    for (int i = 0; i < rank(x); ++i)
      if (shape(x)[static_cast<size_t>(i)].isStatic()) axes.push_back(i);
    int64_t axis = rng_.pick(axes);
    int y = pickValue([&](int v) { return type(v) == type(x); });
    if (y == x && left_ >= 2 && !ir::isBool(dt(x))) y = op(OpCode::Neg, {x});
    op(OpCode::Concat, {x, y}, {{"axis", rng_.chance(30) ? axis - rank(x) : axis}});
  }

  void broadcastPattern() {
    int x = pickValue([&](int v) { return maxElements(shape(v)) <= kMaxElements / 8; });
    if (x < 0) return transposePattern();
    Shape t = shape(x);
    for (Dim& d : t)
      if (d.isOne() && rng_.chance(70)) d = Dim::of(rng_.range(2, 4));
    if (t.size() < 4 && (t == shape(x) ? !rng_.chance(10) : rng_.chance(50)))
      t.insert(t.begin(), Dim::of(rng_.range(2, 3)));
    if (maxElements(t) > kMaxElements) {
      t = shape(x);
      if (t.size() < 4) t.insert(t.begin(), Dim::of(2));
    }
    op(OpCode::BroadcastTo, {x}, {{"shape", t}});
  }

  // gamma/beta for a norm over x.shape[axis:]: an existing value of that type, or a full.
  int normParam(const ir::TensorType& want, double value) {
    int p = pickValue([&](int v) { return type(v) == want; });
    if (p >= 0 && rng_.chance(70)) return p;
    return op(OpCode::Full, {}, {{"shape", want.shape}, {"value", value}, {"dtype", want.dtype}});
  }

  void compositePattern() {
    int x = pickFloat(1);
    if (x < 0) return unaryPattern();
    int k = rng_.below(6);
    int64_t axis = rng_.below(rank(x));
    if (rng_.chance(30)) axis -= rank(x);
    if (k == 0) op(OpCode::Softmax, {x}, {{"axis", axis}});
    else if (k == 1) op(OpCode::LogSoftmax, {x}, {{"axis", axis}});
    else if (k == 2)
      op(OpCode::Gelu, {x}, {{"approximate", std::string(rng_.chance(50) ? "none" : "tanh")}});
    else if (k == 3) op(OpCode::Silu, {x});
    else if (left_ >= 3) {
      int64_t a = axis < 0 ? axis + rank(x) : axis;
      ir::TensorType want{dt(x), Shape(shape(x).begin() + a, shape(x).end())};
      int gamma = normParam(want, 1.5);
      if (k == 4) {
        int beta = normParam(want, -0.25);
        Attrs attrs{{"axis", axis}};
        if (rng_.chance(50)) attrs.set("eps", 1e-5);
        op(OpCode::LayerNorm, {x, gamma, beta}, attrs);
      } else {
        Attrs attrs{{"axis", axis}};
        if (rng_.chance(50)) attrs.set("eps", 1e-6);
        op(OpCode::RmsNorm, {x, gamma}, attrs);
      }
    } else {
      op(OpCode::Silu, {x});
    }
  }

  Rng rng_;
  RandomGraphOptions opt_;
  ir::GraphBuilder b_;
  std::vector<int> values_;  // inputs and op results (never constants)
  int left_ = 0;             // ops still to make
};

}  // namespace

ir::Graph randomGraph(uint64_t seed, const RandomGraphOptions& options) {
  return Generator(seed, options).run();
}

ir::Bindings randomBindings(const ir::Graph& g, uint64_t seed) {
  Rng rng(seed ^ 0x5bd1e995b1a5ed5dULL);
  ir::Bindings b;
  for (const std::string& s : g.symbols()) b[s] = rng.range(1, static_cast<int>(kSymbolBound));
  return b;
}

std::vector<reference::HostTensor> randomInputs(const ir::Graph& g, const ir::Bindings& b,
                                                uint64_t seed) {
  Rng rng(seed ^ 0x2545f4914f6cdd1dULL);
  std::vector<reference::HostTensor> out;
  for (int id : g.inputs()) {
    const ir::Node& n = g.node(id);
    reference::HostTensor t;
    t.dtype = n.type.dtype;
    t.shape = ir::concretize(n.type.shape, b);
    int64_t count = t.numel();
    for (int64_t e = 0; e < count; ++e) {
      if (ir::isFloat(t.dtype))
        t.floats.push_back(ir::roundToFloat(rng.unit() * 2.0 - 1.0, t.dtype));
      else if (ir::isBool(t.dtype)) t.ints.push_back(rng.below(2));
      else t.ints.push_back(rng.range(-8, 8));
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace stitch::testing
