#include "passes/decompose.h"

#include <limits>
#include <numeric>

#include "passes/rewriter.h"
#include "runtime/support/error.h"

namespace stitch::passes {

namespace {

using ir::DType;
using ir::OpCode;

// Emits one composite's primitives into the rewriter.
class Decomposer {
 public:
  Decomposer(Rewriter& rw, const ir::Node& n) : rw_(rw), n_(n) {
    DType t = n.type.dtype;
    upcast_ = t == DType::F16 || t == DType::BF16;
    compute_ = upcast_ ? DType::F32 : t;
  }

  int run() {
    int x = operand(0);
    int y = -1;
    switch (n_.op) {
      case OpCode::Softmax: y = softmax(x, /*log=*/false); break;
      case OpCode::LogSoftmax: y = softmax(x, /*log=*/true); break;
      case OpCode::LayerNorm: {
        // One cast per statement: the order of nodes must not depend on argument evaluation.
        int gamma = operand(1);
        int beta = operand(2);
        y = norm(x, gamma, beta);
        break;
      }
      case OpCode::RmsNorm: {
        int gamma = operand(1);
        y = norm(x, gamma, -1);
        break;
      }
      case OpCode::Gelu: y = gelu(x); break;
      case OpCode::Silu: y = bin(OpCode::Mul, x, un(OpCode::Sigmoid, x), finalName()); break;
      case OpCode::Argmax: y = argReduce(x, /*max=*/true); break;
      case OpCode::Argmin: y = argReduce(x, /*max=*/false); break;
      default: STITCH_INTERNAL(false, "{} is not a composite", ir::opName(n_.op));
    }
    if (upcast_) y = rw_.add(OpCode::Cast, {y}, {{"to", n_.type.dtype}}, n_.name);
    return y;
  }

 private:
  // Operand i in the compute dtype.
  int operand(size_t i) {
    int v = rw_.mapped(n_.operands[i]);
    return upcast_ ? rw_.add(OpCode::Cast, {v}, {{"to", compute_}}) : v;
  }
  // The name of the last primitive: the composite's own, unless a cast back follows it.
  std::string finalName() const { return upcast_ ? std::string() : n_.name; }

  int un(OpCode op, int a) { return rw_.add(op, {a}); }
  int bin(OpCode op, int a, int b, std::string name = {}) {
    return rw_.add(op, {a, b}, {}, std::move(name));
  }
  int binLit(OpCode op, int a, double v, std::string name = {}) {
    return bin(op, a, rw_.constant(v, compute_), std::move(name));
  }
  int reduce(OpCode op, int a, std::vector<int64_t> axes) {
    return rw_.add(op, {a}, {{"axes", std::move(axes)}, {"keepdims", true}});
  }

  int softmax(int x, bool log) {
    std::vector<int64_t> axes = {n_.attrs.getInt("axis")};
    int d = bin(OpCode::Sub, x, reduce(OpCode::ReduceMax, x, axes));
    int e = un(OpCode::Exp, d);
    int s = reduce(OpCode::ReduceSum, e, axes);
    if (log) return bin(OpCode::Sub, d, un(OpCode::Log, s), finalName());
    return bin(OpCode::Div, e, s, finalName());
  }

  // argmax/argmin as two chained reductions over the axis, so they stitch like softmax's:
  //   m   = reduce_max(xs)                    xs: x with NaN replaced by -inf (argmin: +inf)
  //   key = select(isnan(x), i - B, select(xs == m, i, B))     i: iota along the axis, B = 2^62
  //   r   = reduce_min(key);  result = r < 0 ? r + B : r
  // The first NaN wins (its key is negative), else the first index of the extreme (ties: the
  // smallest i). Indices are below 2^62 (support/checked.h), so the keys cannot collide.
  int argReduce(int x, bool max) {
    const ir::TensorType xt = rw_.node(x).type;  // a copy: add() grows the node list
    int64_t axis = n_.attrs.getInt("axis");
    std::vector<int64_t> axes = {axis};
    bool fl = ir::isFloat(xt.dtype);
    const double big = 4611686018427387904.0;  // 2^62
    int nan = -1, xs = x;
    if (fl) {
      nan = rw_.add(OpCode::Ne, {x, x});
      double inf =
          max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
      xs = rw_.add(OpCode::Select, {nan, rw_.constant(inf, xt.dtype), x});
    }
    int m = reduce(max ? OpCode::ReduceMax : OpCode::ReduceMin, xs, axes);
    int i = rw_.add(OpCode::Iota, {}, {{"shape", xt.shape}, {"axis", axis}, {"dtype", DType::I64}});
    int bigV = rw_.constant(big, DType::I64);
    int key = rw_.add(OpCode::Select, {bin(OpCode::Eq, xs, m), i, bigV});
    if (fl) key = rw_.add(OpCode::Select, {nan, bin(OpCode::Sub, i, bigV), key});
    bool keep = n_.attrs.getBool("keepdims");
    int r = rw_.add(OpCode::ReduceMin, {key}, {{"axes", axes}, {"keepdims", keep}},
                    fl ? std::string() : n_.name);
    if (!fl) return r;
    int negative = bin(OpCode::Lt, r, rw_.constant(0, DType::I64));
    return rw_.add(OpCode::Select, {negative, bin(OpCode::Add, r, bigV), r}, {}, n_.name);
  }

  // layer_norm when beta >= 0, else rms_norm.
  int norm(int x, int gamma, int beta) {
    auto rank = static_cast<int64_t>(n_.type.shape.size());
    std::vector<int64_t> axes(static_cast<size_t>(rank - n_.attrs.getInt("axis")));
    std::iota(axes.begin(), axes.end(), n_.attrs.getInt("axis"));
    int centered = x;
    if (beta >= 0) centered = bin(OpCode::Sub, x, reduce(OpCode::ReduceMean, x, axes));
    int var = reduce(OpCode::ReduceMean, bin(OpCode::Mul, centered, centered), axes);
    int rstd = un(OpCode::Rsqrt, binLit(OpCode::Add, var, n_.attrs.getFloat("eps")));
    int scaled = bin(OpCode::Mul, bin(OpCode::Mul, centered, rstd), gamma,
                     beta >= 0 ? std::string() : finalName());
    return beta >= 0 ? bin(OpCode::Add, scaled, beta, finalName()) : scaled;
  }

  int gelu(int x) {
    int inner;
    if (n_.attrs.getIdent("approximate") == "tanh") {
      int cube = bin(OpCode::Mul, bin(OpCode::Mul, x, x), x);
      int arg = bin(OpCode::Add, x, binLit(OpCode::Mul, cube, 0.044715));
      inner = un(OpCode::Tanh, binLit(OpCode::Mul, arg, 0.7978845608028654));
    } else {
      inner = un(OpCode::Erf, binLit(OpCode::Mul, x, 0.7071067811865476));
    }
    int half =
        binLit(OpCode::Mul, bin(OpCode::Mul, x, binLit(OpCode::Add, inner, 1.0)), 0.5, finalName());
    return half;
  }

  Rewriter& rw_;
  const ir::Node& n_;
  bool upcast_ = false;
  DType compute_ = DType::F32;
};

}  // namespace

ir::Graph decomposeComposites(const ir::Graph& g) {
  return rewrite(g, [](Rewriter& rw, int id) -> std::optional<int> {
    const ir::Node& n = rw.src().node(id);
    if (ir::opInfo(n.op).cls != ir::OpClass::Composite) return std::nullopt;
    return Decomposer(rw, n).run();
  });
}

}  // namespace stitch::passes
