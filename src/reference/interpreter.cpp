// The reference interpreter (semantics in interpreter.h).
//
// One switch over OpCode, with no default, gives each op its meaning in a line or two: the
// per-element arithmetic is a lambda handed to a few shape helpers (elementwise with
// broadcasting, strided gather for layout ops, reduction, per-row composites). Every layout
// op is a gather through a table of source offsets, computed by one odometer, so broadcasting,
// transpose and slice share one obviously-correct index computation.
#include "reference/interpreter.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numbers>
#include <type_traits>

#include "ir/signature.h"
#include "runtime/support/checked.h"
#include "runtime/support/error.h"
#include "runtime/support/memory.h"
#include "runtime/support/philox.h"

namespace stitch::reference {

using ir::DType;
using ir::OpCode;
using Dims = std::vector<int64_t>;

namespace {

// Shapes reach here through bindInputs, which checked every value's size; decode() and encode()
// take caller shapes directly, so this checks again rather than trusting them.
int64_t product(std::span<const int64_t> shape) {
  auto n = checkedElementCount(shape);
  STITCH_CHECK(n.has_value(), ErrorCode::ShapeMismatch,
               "a tensor of shape {} has more than 2^62 elements (or a negative dim)",
               dimsText(shape));
  return *n;
}

std::string dimsStr(std::span<const int64_t> s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

Dims contiguousStrides(std::span<const int64_t> shape) {
  Dims s(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;) s[k - 1] = s[k] * shape[k];
  return s;
}

// For every element of `shape` in row-major order: base + sum_k index[k] * strides[k].
Dims gatherOffsets(std::span<const int64_t> shape, std::span<const int64_t> strides, int64_t base) {
  Dims out(static_cast<size_t>(product(shape)));
  if (out.empty()) return out;
  Dims idx(shape.size(), 0);
  int64_t off = base;
  for (int64_t& o : out) {
    o = off;
    // Odometer step: bump the last axis; on wrap, rewind it and carry left.
    for (size_t k = shape.size(); k-- > 0;) {
      if (++idx[k] < shape[k]) {
        off += strides[k];
        break;
      }
      off -= strides[k] * (shape[k] - 1);
      idx[k] = 0;
    }
  }
  return out;
}

// Strides that read a tensor of shape `in` broadcast to `out` (NumPy: right-aligned; a size-1
// dim, or a missing leading dim, reads the same element again: stride 0).
Dims broadcastStrides(std::span<const int64_t> in, std::span<const int64_t> out) {
  Dims inStrides = contiguousStrides(in);
  Dims s(out.size(), 0);
  size_t lead = out.size() - in.size();
  for (size_t k = 0; k < in.size(); ++k) s[lead + k] = in[k] == 1 ? 0 : inStrides[k];
  return s;
}

// Source offsets of `in` broadcast to `out`; empty when no broadcasting is needed (identity).
Dims broadcastOffsets(std::span<const int64_t> in, std::span<const int64_t> out) {
  if (std::equal(in.begin(), in.end(), out.begin(), out.end())) return {};
  return gatherOffsets(out, broadcastStrides(in, out), 0);
}

inline size_t offsetAt(const Dims& offsets, int64_t e) {
  return static_cast<size_t>(offsets.empty() ? e : offsets[static_cast<size_t>(e)]);
}

// Integer arithmetic wraps (two's complement) through uint64: defined behaviour, same bits.
inline int64_t wrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t wrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
inline int64_t truncDiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrapSub(0, a);  // INT64_MIN / -1 would trap; the wrapped answer is INT64_MIN
  return a / b;
}

// An integer result brought into its dtype: i32 wraps to 32 bits, bool becomes 0/1.
inline int64_t fitInt(int64_t v, DType t) {
  if (t == DType::I32) return ir::wrapToI32(v);
  if (t == DType::Bool) return v != 0;
  return v;
}

inline double nanOr(double a, double b, double r) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN() : r;
}

HostTensor makeTensor(DType t, Dims shape) {
  HostTensor r;
  r.dtype = t;
  auto n = static_cast<size_t>(product(shape));
  r.shape = std::move(shape);
  if (ir::isFloat(t)) r.floats.resize(n);
  else r.ints.resize(n);
  return r;
}

// Marks "this op has no float form" or "no integer form": the IR rejects such operands, so
// reaching one is a bug.
struct NoOp {};

template <class FloatFn, class IntFn>
HostTensor unary(const HostTensor& x, DType outT, FloatFn f, IntFn i) {
  HostTensor r = makeTensor(outT, x.shape);
  if (ir::isFloat(x.dtype)) {
    if constexpr (std::is_same_v<FloatFn, NoOp>) {
      STITCH_INTERNAL(false, "non-float unary op on {}", ir::dtypeName(x.dtype));
    } else {
      for (size_t e = 0; e < x.floats.size(); ++e)
        r.floats[e] = ir::roundToFloat(f(x.floats[e]), outT);
    }
  } else {
    if constexpr (std::is_same_v<IntFn, NoOp>) {
      STITCH_INTERNAL(false, "float-only unary op on {}", ir::dtypeName(x.dtype));
    } else {
      for (size_t e = 0; e < x.ints.size(); ++e) r.ints[e] = fitInt(i(x.ints[e]), outT);
    }
  }
  return r;
}

template <class Fn>
HostTensor unaryFloat(const HostTensor& x, Fn f) {
  return unary(x, x.dtype, f, NoOp{});
}

// Elementwise binary op with broadcasting; the result has dtype outT and shape `shape`.
// FloatFn and IntFn give the result for float and for integer/bool operands.
template <class FloatFn, class IntFn>
HostTensor binary(const HostTensor& a, const HostTensor& b, const Dims& shape, DType outT,
                  FloatFn f, IntFn i) {
  HostTensor r = makeTensor(outT, shape);
  Dims oa = broadcastOffsets(a.shape, shape);
  Dims ob = broadcastOffsets(b.shape, shape);
  int64_t n = product(shape);
  if (ir::isFloat(a.dtype)) {
    if constexpr (std::is_same_v<FloatFn, NoOp>) {
      STITCH_INTERNAL(false, "non-float binary op on {}", ir::dtypeName(a.dtype));
    } else {
      for (int64_t e = 0; e < n; ++e) {
        auto v = f(a.floats[offsetAt(oa, e)], b.floats[offsetAt(ob, e)]);
        // Comparisons map floats to a bool (int64 0/1); arithmetic keeps a double.
        if constexpr (std::is_same_v<decltype(v), double>)
          r.floats[static_cast<size_t>(e)] = ir::roundToFloat(v, outT);
        else r.ints[static_cast<size_t>(e)] = fitInt(v, outT);
      }
    }
  } else {
    if constexpr (std::is_same_v<IntFn, NoOp>) {
      STITCH_INTERNAL(false, "float-only binary op on {}", ir::dtypeName(a.dtype));
    } else {
      for (int64_t e = 0; e < n; ++e)
        r.ints[static_cast<size_t>(e)] =
            fitInt(i(a.ints[offsetAt(oa, e)], b.ints[offsetAt(ob, e)]), outT);
    }
  }
  return r;
}

// A comparison: one generic predicate serves doubles (IEEE) and int64 alike; result bool.
template <class Pred>
HostTensor compare(const HostTensor& a, const HostTensor& b, const Dims& shape, Pred p) {
  return binary(
      a, b, shape, DType::Bool, [&](double x, double y) -> int64_t { return p(x, y); },
      [&](int64_t x, int64_t y) -> int64_t { return p(x, y); });
}

HostTensor select(const HostTensor& c, const HostTensor& a, const HostTensor& b,
                  const Dims& shape) {
  HostTensor r = makeTensor(a.dtype, shape);
  Dims oc = broadcastOffsets(c.shape, shape);
  Dims oa = broadcastOffsets(a.shape, shape);
  Dims ob = broadcastOffsets(b.shape, shape);
  int64_t n = product(shape);
  for (int64_t e = 0; e < n; ++e) {
    bool take = c.ints[offsetAt(oc, e)] != 0;
    size_t src = take ? offsetAt(oa, e) : offsetAt(ob, e);
    auto dst = static_cast<size_t>(e);
    if (ir::isFloat(a.dtype)) r.floats[dst] = (take ? a : b).floats[src];
    else r.ints[dst] = (take ? a : b).ints[src];
  }
  return r;
}

HostTensor cast(const HostTensor& x, DType to) {
  HostTensor r = makeTensor(to, x.shape);
  bool fromFloat = ir::isFloat(x.dtype);
  for (size_t e = 0; e < static_cast<size_t>(x.numel()); ++e) {
    if (fromFloat) {
      double v = x.floats[e];
      if (ir::isFloat(to)) r.floats[e] = ir::roundToFloat(v, to);
      else if (ir::isInt(to)) r.ints[e] = ir::floatToInt(v, to);
      else r.ints[e] = v != 0.0;  // NaN != 0: true
    } else {
      int64_t v = x.ints[e];
      // int -> float goes through double: exact up to 2^53, beyond that it may round twice.
      if (ir::isFloat(to)) r.floats[e] = ir::roundToFloat(static_cast<double>(v), to);
      else r.ints[e] = fitInt(v, to);
    }
  }
  return r;
}

// Copies x's elements at `offsets` (one per output element) into a tensor of shape `shape`.
HostTensor gather(const HostTensor& x, const Dims& shape, const Dims& offsets) {
  HostTensor r = makeTensor(x.dtype, shape);
  for (size_t e = 0; e < offsets.size(); ++e) {
    auto src = static_cast<size_t>(offsets[e]);
    if (ir::isFloat(x.dtype)) r.floats[e] = x.floats[src];
    else r.ints[e] = x.ints[src];
  }
  return r;
}

enum class ReduceKind { Sum, Max, Min, Prod, Mean };

// A product step: a product of nonzero factors that underflows is held at the smallest subnormal
// of its sign (see the header), so only a zero factor makes a product zero.
double stickyMul(double s, double v) {
  double r = s * v;
  if (r == 0.0 && s != 0.0 && v != 0.0)
    r = std::copysign(std::numeric_limits<double>::denorm_min(), r);
  return r;
}

HostTensor reduce(const HostTensor& x, const std::vector<int64_t>& axes, const Dims& outShape,
                  ReduceKind kind) {
  // Each input element's output offset: the output laid out as x's shape with reduced dims of
  // size 1 (the same row-major order with or without keepdims), read with stride 0 along them.
  Dims kept = x.shape;
  for (int64_t a : axes) kept[static_cast<size_t>(a)] = 1;
  Dims strides = contiguousStrides(kept);
  for (int64_t a : axes) strides[static_cast<size_t>(a)] = 0;
  Dims dst = gatherOffsets(x.shape, strides, 0);
  int64_t count = 1;
  for (int64_t a : axes) count *= x.shape[static_cast<size_t>(a)];

  HostTensor r = makeTensor(x.dtype, outShape);
  if (ir::isFloat(x.dtype)) {
    constexpr double inf = std::numeric_limits<double>::infinity();
    double init = kind == ReduceKind::Prod  ? 1.0
                  : kind == ReduceKind::Max ? -inf
                  : kind == ReduceKind::Min ? inf
                                            : 0.0;
    std::vector<double> acc(r.floats.size(), init);
    for (size_t e = 0; e < dst.size(); ++e) {
      double& s = acc[static_cast<size_t>(dst[e])];
      double v = x.floats[e];
      switch (kind) {
        case ReduceKind::Sum:
        case ReduceKind::Mean: s += v; break;
        case ReduceKind::Prod: s = stickyMul(s, v); break;
        case ReduceKind::Max: s = nanOr(s, v, std::max(s, v)); break;
        case ReduceKind::Min: s = nanOr(s, v, std::min(s, v)); break;
      }
    }
    for (size_t o = 0; o < acc.size(); ++o) {
      double v = kind == ReduceKind::Mean ? acc[o] / static_cast<double>(count) : acc[o];
      r.floats[o] = ir::roundToFloat(v, x.dtype);
    }
  } else {
    STITCH_INTERNAL(kind != ReduceKind::Mean, "reduce_mean on {}", ir::dtypeName(x.dtype));
    bool i32 = x.dtype == DType::I32;
    int64_t lo = i32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
    int64_t hi = i32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
    int64_t init = kind == ReduceKind::Prod  ? 1
                   : kind == ReduceKind::Max ? lo
                   : kind == ReduceKind::Min ? hi
                                             : 0;
    std::vector<int64_t> acc(r.ints.size(), init);
    for (size_t e = 0; e < dst.size(); ++e) {
      int64_t& s = acc[static_cast<size_t>(dst[e])];
      int64_t v = x.ints[e];
      switch (kind) {
        case ReduceKind::Sum:
        case ReduceKind::Mean: s = wrapAdd(s, v); break;
        case ReduceKind::Prod: s = wrapMul(s, v); break;
        case ReduceKind::Max: s = std::max(s, v); break;
        case ReduceKind::Min: s = std::min(s, v); break;
      }
    }
    for (size_t o = 0; o < acc.size(); ++o) r.ints[o] = fitInt(acc[o], x.dtype);
  }
  return r;
}

// A shape split at `axis` into outer (dims before), n (the axis) and inner (dims after).
struct AxisSplit {
  int64_t outer, n, inner;
};
AxisSplit splitAt(const Dims& shape, int64_t axis) {
  auto a = static_cast<size_t>(axis);
  return {product(std::span(shape).first(a)), shape[a], product(std::span(shape).subspan(a + 1))};
}

HostTensor softmax(const HostTensor& x, int64_t axis, bool log) {
  HostTensor r = makeTensor(x.dtype, x.shape);
  auto [outer, n, inner] = splitAt(x.shape, axis);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto idx = [&](int64_t k) { return static_cast<size_t>((o * n + k) * inner + i); };
      // A plain max (NaN skipped by std::max) suffices: a NaN anywhere poisons the sum below.
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < n; ++k) m = std::max(m, x.floats[idx(k)]);
      double sum = 0.0;
      for (int64_t k = 0; k < n; ++k) sum += std::exp(x.floats[idx(k)] - m);
      for (int64_t k = 0; k < n; ++k) {
        double v = x.floats[idx(k)] - m;
        double y = log ? v - std::log(sum) : std::exp(v) / sum;
        r.floats[idx(k)] = ir::roundToFloat(y, x.dtype);
      }
    }
  }
  return r;
}

// layer_norm (beta non-null) or rms_norm over the dims axis..end: rows of `inner` elements.
HostTensor normalize(const HostTensor& x, const HostTensor& gamma, const HostTensor* beta,
                     int64_t axis, double eps) {
  HostTensor r = makeTensor(x.dtype, x.shape);
  auto a = static_cast<size_t>(axis);
  int64_t inner = product(std::span(x.shape).subspan(a));
  int64_t outer = product(std::span(x.shape).first(a));
  auto nd = static_cast<double>(inner);
  for (int64_t o = 0; o < outer; ++o) {
    const double* row = x.floats.data() + o * inner;
    double* out = r.floats.data() + o * inner;
    if (beta) {
      double mean = 0.0;
      for (int64_t k = 0; k < inner; ++k) mean += row[k];
      mean /= nd;
      double var = 0.0;
      for (int64_t k = 0; k < inner; ++k) var += (row[k] - mean) * (row[k] - mean);
      var /= nd;
      double rstd = 1.0 / std::sqrt(var + eps);
      for (int64_t k = 0; k < inner; ++k) {
        auto kk = static_cast<size_t>(k);
        double y = (row[k] - mean) * rstd * gamma.floats[kk] + beta->floats[kk];
        out[k] = ir::roundToFloat(y, x.dtype);
      }
    } else {
      double ms = 0.0;
      for (int64_t k = 0; k < inner; ++k) ms += row[k] * row[k];
      ms /= nd;
      double rstd = 1.0 / std::sqrt(ms + eps);
      for (int64_t k = 0; k < inner; ++k)
        out[k] = ir::roundToFloat(row[k] * rstd * gamma.floats[static_cast<size_t>(k)], x.dtype);
    }
  }
  return r;
}

// A scalar or `full`: the attribute value in the dtype.
HostTensor filled(DType t, const Dims& shape, double value) {
  HostTensor r = makeTensor(t, shape);
  if (ir::isFloat(t)) std::fill(r.floats.begin(), r.floats.end(), ir::roundToFloat(value, t));
  else if (ir::isInt(t)) std::fill(r.ints.begin(), r.ints.end(), static_cast<int64_t>(value));
  else std::fill(r.ints.begin(), r.ints.end(), value != 0.0);
  return r;
}

HostTensor iota(DType t, const Dims& shape, int64_t axis) {
  HostTensor idx = makeTensor(DType::I64, shape);
  auto [outer, n, inner] = splitAt(shape, axis);
  size_t e = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i) idx.ints[e++] = k;
  return cast(idx, t);
}

// random_uniform: support/philox.h defines the bits; the value is exact in its dtype.
HostTensor randomUniform(const HostTensor& seed, const HostTensor& offset, DType t,
                         const Dims& shape) {
  HostTensor r = makeTensor(t, shape);
  auto s = static_cast<uint64_t>(seed.ints.at(0));
  auto o = static_cast<uint64_t>(offset.ints.at(0));
  for (size_t e = 0; e < r.floats.size(); ++e) r.floats[e] = philoxUniform(s, o, e, t);
  return r;
}

// Every index in [0, n), or the run's index error naming the first one outside (in element
// order) and the op that read it.
void checkIndices(const HostTensor& index, int64_t n, const ir::Graph& g, const ir::Node& node) {
  for (int64_t k : index.ints)
    if (k < 0 || k >= n) throwIndexError(g.name(), ir::indexCheckLabel(node), k, n);
}

// Take-along-axis; an index outside [0, n) is an error (checkIndices).
HostTensor gatherAlong(const HostTensor& x, const HostTensor& index, int64_t axis,
                       const Dims& shape) {
  auto [outer, m, inner] = splitAt(shape, axis);
  int64_t n = x.shape[static_cast<size_t>(axis)];
  Dims offsets(static_cast<size_t>(product(shape)));
  size_t e = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < m; ++j)
      for (int64_t i = 0; i < inner; ++i, ++e) offsets[e] = (o * n + index.ints[e]) * inner + i;
  return gather(x, shape, offsets);
}

// argmax / argmin along axis: the first index of the extreme; any NaN wins (its first index), as
// in PyTorch. An empty axis (only possible with a symbolic dim bound to 0) gives INT64_MAX, as
// the decomposition's reduce_min of nothing does.
HostTensor argReduce(const HostTensor& x, int64_t axis, bool max, DType t, const Dims& shape) {
  auto [outer, n, inner] = splitAt(x.shape, axis);
  HostTensor r = makeTensor(t, shape);
  bool fl = ir::isFloat(x.dtype);
  size_t e = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i, ++e) {
      int64_t best = n > 0 ? 0 : std::numeric_limits<int64_t>::max();
      for (int64_t k = 0; k < n; ++k) {
        auto at = static_cast<size_t>((o * n + k) * inner + i);
        auto bt = static_cast<size_t>((o * n + best) * inner + i);
        if (fl) {
          double v = x.floats[at], b = x.floats[bt];
          if (std::isnan(b)) break;
          if (std::isnan(v) || (max ? v > b : v < b)) best = k;
        } else if (max ? x.ints[at] > x.ints[bt] : x.ints[at] < x.ints[bt]) {
          best = k;
        }
      }
      r.ints[e] = best;
    }
  return r;
}

HostTensor concat(std::span<const HostTensor* const> parts, int64_t axis, const Dims& shape) {
  HostTensor r = makeTensor(parts[0]->dtype, shape);
  AxisSplit split = splitAt(shape, axis);
  int64_t outer = split.outer, inner = split.inner;
  size_t e = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const HostTensor* p : parts) {
      int64_t chunk = p->shape[static_cast<size_t>(axis)] * inner;
      auto src = static_cast<size_t>(o * chunk);
      for (int64_t k = 0; k < chunk; ++k, ++e) {
        if (ir::isFloat(r.dtype)) r.floats[e] = p->floats[src + static_cast<size_t>(k)];
        else r.ints[e] = p->ints[src + static_cast<size_t>(k)];
      }
    }
  }
  return r;
}

double gelu(double x, bool tanhForm) {
  if (tanhForm) {
    const double c = std::sqrt(2.0 / std::numbers::pi);
    return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

class Evaluator {
 public:
  Evaluator(const ir::Graph& g, std::span<const TensorView> inputs) : g_(g), inputs_(inputs) {
    std::vector<ir::ConcreteInput> concrete;
    for (const TensorView& t : inputs) concrete.push_back({t.dtype, t.shape});
    bindings_ = ir::bindInputs(g, concrete);
    shapes_ = ir::concreteShapes(g, bindings_);
    for (size_t i = 0; i < g.inputs().size(); ++i)
      inputIndex_[static_cast<size_t>(g.inputs()[i])] = i;
    checkMemory();
  }

  // Every value is kept, as 8-byte doubles or int64s, and the largest may need a table of 8-byte
  // offsets beside it: refuse, naming the largest value, rather than be killed half-way.
  void checkMemory() const {
    int64_t total = 0, largest = 0;
    size_t largestId = 0;
    for (size_t id = 0; id < shapes_.size(); ++id) {
      int64_t bytes = saturatingMul(product(shapes_[id]), 8);
      total = saturatingAdd(total, bytes);
      if (bytes > largest) largest = bytes, largestId = id;
    }
    total = saturatingAdd(total, largest);
    if (total <= hostMemoryBytes()) return;
    const ir::Node& n = g_.nodes()[largestId];
    checkHostMemory(total, fmt::format("evaluating graph {} on the reference backend (its largest "
                                       "value, '{}' {}{}, takes {} as 8-byte numbers)",
                                       g_.name(), n.name, ir::dtypeName(n.type.dtype),
                                       dimsStr(shapes_[largestId]), bytesText(largest)));
  }

  std::vector<HostTensor> run() {
    values_.reserve(g_.nodes().size());
    for (size_t id = 0; id < g_.nodes().size(); ++id) {
      HostTensor v = eval(g_.nodes()[id], shapes_[id], id);
      STITCH_INTERNAL(v.shape == shapes_[id] && v.dtype == g_.nodes()[id].type.dtype,
                      "node {} evaluated to {} {}, expected {}", id, ir::dtypeName(v.dtype),
                      dimsStr(v.shape), ir::typeStr(g_.nodes()[id].type));
      values_.push_back(std::move(v));
    }
    return std::move(values_);
  }

 private:
  const HostTensor& arg(const ir::Node& n, size_t i) const {
    return values_[static_cast<size_t>(n.operands[i])];
  }

  HostTensor eval(const ir::Node& n, const Dims& shape, size_t id) {
    DType t = n.type.dtype;
    const ir::Attrs& at = n.attrs;
    switch (n.op) {
      case OpCode::Input: {
        auto it = inputIndex_.find(id);
        STITCH_INTERNAL(it != inputIndex_.end(), "input node {} is not a graph input", id);
        return decode(inputs_[it->second]);
      }
      case OpCode::Constant: return filled(t, shape, at.getFloat("value"));

      case OpCode::Neg:
        return unary(
            arg(n, 0), t, [](double x) { return -x; }, [](int64_t x) { return wrapSub(0, x); });
      case OpCode::Abs:
        return unary(
            arg(n, 0), t, [](double x) { return std::fabs(x); },
            [](int64_t x) { return x < 0 ? wrapSub(0, x) : x; });
      case OpCode::Relu:
        return unary(
            arg(n, 0), t, [](double x) { return std::isnan(x) ? x
                                                : x > 0.0     ? x
                                                              : 0.0; },
            [](int64_t x) { return std::max<int64_t>(x, 0); });
      case OpCode::Exp: return unaryFloat(arg(n, 0), [](double x) { return std::exp(x); });
      case OpCode::Log: return unaryFloat(arg(n, 0), [](double x) { return std::log(x); });
      case OpCode::Log1p: return unaryFloat(arg(n, 0), [](double x) { return std::log1p(x); });
      case OpCode::Sqrt: return unaryFloat(arg(n, 0), [](double x) { return std::sqrt(x); });
      case OpCode::Rsqrt: return unaryFloat(arg(n, 0), [](double x) { return 1.0 / std::sqrt(x); });
      case OpCode::Tanh: return unaryFloat(arg(n, 0), [](double x) { return std::tanh(x); });
      case OpCode::Sigmoid: return unaryFloat(arg(n, 0), sigmoid);
      case OpCode::Erf: return unaryFloat(arg(n, 0), [](double x) { return std::erf(x); });
      case OpCode::Sin: return unaryFloat(arg(n, 0), [](double x) { return std::sin(x); });
      case OpCode::Cos: return unaryFloat(arg(n, 0), [](double x) { return std::cos(x); });
      case OpCode::Reciprocal: return unaryFloat(arg(n, 0), [](double x) { return 1.0 / x; });
      case OpCode::Floor: return unaryFloat(arg(n, 0), [](double x) { return std::floor(x); });
      case OpCode::Ceil: return unaryFloat(arg(n, 0), [](double x) { return std::ceil(x); });
      case OpCode::LogicalNot:
        return unary(arg(n, 0), t, NoOp{}, [](int64_t x) -> int64_t { return x == 0; });

      case OpCode::Add:
        return binary(
            arg(n, 0), arg(n, 1), shape, t, [](double x, double y) { return x + y; }, wrapAdd);
      case OpCode::Sub:
        return binary(
            arg(n, 0), arg(n, 1), shape, t, [](double x, double y) { return x - y; }, wrapSub);
      case OpCode::Mul:
        return binary(
            arg(n, 0), arg(n, 1), shape, t, [](double x, double y) { return x * y; }, wrapMul);
      case OpCode::Div:
        return binary(
            arg(n, 0), arg(n, 1), shape, t, [](double x, double y) { return x / y; }, truncDiv);
      case OpCode::Maximum:
        return binary(
            arg(n, 0), arg(n, 1), shape, t,
            [](double x, double y) { return nanOr(x, y, std::max(x, y)); },
            [](int64_t x, int64_t y) { return std::max(x, y); });
      case OpCode::Minimum:
        return binary(
            arg(n, 0), arg(n, 1), shape, t,
            [](double x, double y) { return nanOr(x, y, std::min(x, y)); },
            [](int64_t x, int64_t y) { return std::min(x, y); });
      case OpCode::Pow:
        return binary(
            arg(n, 0), arg(n, 1), shape, t, [](double x, double y) { return std::pow(x, y); },
            NoOp{});
      case OpCode::Eq:
        return compare(arg(n, 0), arg(n, 1), shape, [](auto x, auto y) { return x == y; });
      case OpCode::Ne:
        return compare(arg(n, 0), arg(n, 1), shape, [](auto x, auto y) { return x != y; });
      case OpCode::Lt:
        return compare(arg(n, 0), arg(n, 1), shape, [](auto x, auto y) { return x < y; });
      case OpCode::Le:
        return compare(arg(n, 0), arg(n, 1), shape, [](auto x, auto y) { return x <= y; });
      case OpCode::Gt:
        return compare(arg(n, 0), arg(n, 1), shape, [](auto x, auto y) { return x > y; });
      case OpCode::Ge:
        return compare(arg(n, 0), arg(n, 1), shape, [](auto x, auto y) { return x >= y; });
      case OpCode::LogicalAnd:
        return binary(arg(n, 0), arg(n, 1), shape, t, NoOp{},
                      [](int64_t x, int64_t y) -> int64_t { return x != 0 && y != 0; });
      case OpCode::LogicalOr:
        return binary(arg(n, 0), arg(n, 1), shape, t, NoOp{},
                      [](int64_t x, int64_t y) -> int64_t { return x != 0 || y != 0; });

      case OpCode::Select: return select(arg(n, 0), arg(n, 1), arg(n, 2), shape);
      case OpCode::Cast: return cast(arg(n, 0), t);

      case OpCode::ReduceSum: return reduce(arg(n, 0), at.getInts("axes"), shape, ReduceKind::Sum);
      case OpCode::ReduceMax: return reduce(arg(n, 0), at.getInts("axes"), shape, ReduceKind::Max);
      case OpCode::ReduceMin: return reduce(arg(n, 0), at.getInts("axes"), shape, ReduceKind::Min);
      case OpCode::ReduceMean:
        return reduce(arg(n, 0), at.getInts("axes"), shape, ReduceKind::Mean);
      case OpCode::ReduceProd:
        return reduce(arg(n, 0), at.getInts("axes"), shape, ReduceKind::Prod);

      case OpCode::Reshape: {
        HostTensor r = arg(n, 0);
        r.shape = shape;
        return r;
      }
      case OpCode::Transpose: {
        const HostTensor& x = arg(n, 0);
        Dims in = contiguousStrides(x.shape);
        Dims strides;
        for (int64_t p : at.getInts("perm")) strides.push_back(in[static_cast<size_t>(p)]);
        return gather(x, shape, gatherOffsets(shape, strides, 0));
      }
      case OpCode::BroadcastTo: {
        const HostTensor& x = arg(n, 0);
        return gather(x, shape, gatherOffsets(shape, broadcastStrides(x.shape, shape), 0));
      }
      case OpCode::Slice: {
        // Inference normalized starts (non-negative, clamped) and the output shape holds the
        // counts, so ends are not needed (on a symbolic axis they are only past its end).
        const HostTensor& x = arg(n, 0);
        Dims in = contiguousStrides(x.shape);
        const auto& starts = at.getInts("starts");
        const auto& steps = at.getInts("steps");
        Dims strides(shape.size());
        int64_t base = 0;
        for (size_t k = 0; k < shape.size(); ++k) {
          strides[k] = in[k] * steps[k];
          if (shape[k] > 0) base += starts[k] * in[k];
        }
        return gather(x, shape, gatherOffsets(shape, strides, base));
      }
      case OpCode::Concat: {
        std::vector<const HostTensor*> parts;
        for (size_t i = 0; i < n.operands.size(); ++i) parts.push_back(&arg(n, i));
        return concat(parts, at.getInt("axis"), shape);
      }

      case OpCode::RandomUniform: return randomUniform(arg(n, 0), arg(n, 1), t, shape);
      case OpCode::Gather: {
        const int64_t axis = at.getInt("axis");
        checkIndices(arg(n, 1), arg(n, 0).shape[static_cast<size_t>(axis)], g_, n);
        return gatherAlong(arg(n, 0), arg(n, 1), axis, shape);
      }
      case OpCode::CheckIndex: {
        checkIndices(arg(n, 0), ir::concretize(at.getDims("size"), bindings_).at(0), g_, n);
        return arg(n, 0);
      }
      case OpCode::Argmax: return argReduce(arg(n, 0), at.getInt("axis"), true, t, shape);
      case OpCode::Argmin: return argReduce(arg(n, 0), at.getInt("axis"), false, t, shape);

      case OpCode::Full: return filled(t, shape, at.getFloat("value"));
      case OpCode::Iota: return iota(t, shape, at.getInt("axis"));

      case OpCode::Softmax: return softmax(arg(n, 0), at.getInt("axis"), /*log=*/false);
      case OpCode::LogSoftmax: return softmax(arg(n, 0), at.getInt("axis"), /*log=*/true);
      case OpCode::LayerNorm:
        return normalize(arg(n, 0), arg(n, 1), &arg(n, 2), at.getInt("axis"), at.getFloat("eps"));
      case OpCode::RmsNorm:
        return normalize(arg(n, 0), arg(n, 1), nullptr, at.getInt("axis"), at.getFloat("eps"));
      case OpCode::Gelu: {
        bool tanhForm = at.getIdent("approximate") == "tanh";
        return unaryFloat(arg(n, 0), [tanhForm](double x) { return gelu(x, tanhForm); });
      }
      case OpCode::Silu: return unaryFloat(arg(n, 0), [](double x) { return x * sigmoid(x); });
    }
    STITCH_INTERNAL(false, "unknown op code {}", static_cast<int>(n.op));
  }

  const ir::Graph& g_;
  std::span<const TensorView> inputs_;
  ir::Bindings bindings_;
  std::vector<Dims> shapes_;
  std::map<size_t, size_t> inputIndex_;  // node id -> position in inputs
  std::vector<HostTensor> values_;
};

}  // namespace

int64_t HostTensor::numel() const { return product(shape); }

double HostTensor::at(int64_t i) const {
  auto k = static_cast<size_t>(i);
  return ir::isFloat(dtype) ? floats.at(k) : static_cast<double>(ints.at(k));
}

HostTensor decode(const TensorView& t) {
  HostTensor r = makeTensor(t.dtype, Dims(t.shape.begin(), t.shape.end()));
  auto n = static_cast<size_t>(r.numel());
  STITCH_CHECK(t.data != nullptr || n == 0, ErrorCode::InvalidArgument,
               "tensor of shape {} has no data (null pointer)", dimsStr(t.shape));
  // memcpy per element: the caller's buffer need not be aligned for its dtype.
  auto load = [&]<class T>(size_t e, T) {
    T v;
    std::memcpy(&v, static_cast<const char*>(t.data) + e * sizeof(T), sizeof(T));
    return v;
  };
  for (size_t e = 0; e < n; ++e) {
    switch (t.dtype) {
      case DType::F16: r.floats[e] = ir::f16Value(load(e, uint16_t{})); break;
      case DType::BF16: r.floats[e] = ir::bf16Value(load(e, uint16_t{})); break;
      case DType::F32: r.floats[e] = load(e, float{}); break;
      case DType::F64: r.floats[e] = load(e, double{}); break;
      case DType::I32: r.ints[e] = load(e, int32_t{}); break;
      case DType::I64: r.ints[e] = load(e, int64_t{}); break;
      case DType::Bool: r.ints[e] = load(e, uint8_t{}) != 0; break;
    }
  }
  return r;
}

void encode(const HostTensor& t, const MutTensorView& out) {
  STITCH_CHECK(out.dtype == t.dtype && std::ranges::equal(out.shape, t.shape),
               ErrorCode::ShapeMismatch, "cannot write a {} {} tensor into a {} {} buffer",
               ir::dtypeName(t.dtype), dimsStr(t.shape), ir::dtypeName(out.dtype),
               dimsStr(out.shape));
  auto n = static_cast<size_t>(t.numel());
  STITCH_CHECK(out.data != nullptr || n == 0, ErrorCode::InvalidArgument,
               "output tensor of shape {} has no data (null pointer)", dimsStr(out.shape));
  auto store = [&]<class T>(size_t e, T v) {
    std::memcpy(static_cast<char*>(out.data) + e * sizeof(T), &v, sizeof(T));
  };
  for (size_t e = 0; e < n; ++e) {
    switch (t.dtype) {
      case DType::F16: store(e, ir::f16Bits(t.floats[e])); break;
      case DType::BF16: store(e, ir::bf16Bits(t.floats[e])); break;
      case DType::F32: store(e, static_cast<float>(t.floats[e])); break;  // exact: representable
      case DType::F64: store(e, t.floats[e]); break;
      case DType::I32: store(e, static_cast<int32_t>(t.ints[e])); break;
      case DType::I64: store(e, t.ints[e]); break;
      case DType::Bool: store(e, static_cast<uint8_t>(t.ints[e] != 0)); break;
    }
  }
}

std::vector<HostTensor> evaluateNodes(const ir::Graph& g, std::span<const TensorView> inputs) {
  return Evaluator(g, inputs).run();
}

void evaluate(const ir::Graph& g, std::span<const TensorView> inputs,
              std::span<const MutTensorView> outputs) {
  // Check the outputs before the work, so a misuse fails fast and leaves outputs untouched.
  std::vector<ir::ConcreteInput> concrete;
  for (const TensorView& t : inputs) concrete.push_back({t.dtype, t.shape});
  ir::Bindings b = ir::bindInputs(g, concrete);
  STITCH_CHECK(outputs.size() == g.outputs().size(), ErrorCode::ShapeMismatch,
               "graph {} has {} outputs, but {} output tensors were given", g.name(),
               g.outputs().size(), outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ir::Node& n = g.node(g.outputs()[i]);
    Dims want = ir::concretize(n.type.shape, b);
    STITCH_CHECK(outputs[i].dtype == n.type.dtype, ErrorCode::ShapeMismatch,
                 "output {} ('{}') has dtype {}, but the graph produces {}", i, n.name,
                 ir::dtypeName(outputs[i].dtype), ir::dtypeName(n.type.dtype));
    STITCH_CHECK(std::ranges::equal(outputs[i].shape, want), ErrorCode::ShapeMismatch,
                 "output {} ('{}') has shape {}, but the graph produces {} (concretely {})", i,
                 n.name, dimsStr(outputs[i].shape), ir::typeStr(n.type), dimsStr(want));
  }
  std::vector<HostTensor> values = evaluateNodes(g, inputs);
  for (size_t i = 0; i < outputs.size(); ++i)
    encode(values[static_cast<size_t>(g.outputs()[i])], outputs[i]);
}

double dtypeTolerance(ir::DType t) {
  switch (t) {
    case ir::DType::F16: return 1e-2;
    case ir::DType::BF16: return 4e-2;
    case ir::DType::F32:
    case ir::DType::F64: return 1e-4;
    case ir::DType::I32:
    case ir::DType::I64:
    case ir::DType::Bool: return 0.0;
  }
  return 0.0;
}

}  // namespace stitch::reference
