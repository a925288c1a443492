// Type and shape inference, one function per op family (see ops.def).
//
// Messages name the problem with both sides ("dtypes f32 and f16 differ", "shapes [4, 8] and [3]
// do not broadcast") and are thrown as OpError pointing at the operand or attribute concerned.
#include "ir/infer.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "runtime/support/checked.h"

namespace stitch::ir {

namespace {

[[noreturn]] void fail(std::string msg, int operand = -1, std::string attr = {}) {
  throw OpError(std::move(msg), operand, std::move(attr));
}

const TensorType& operand(std::span<const TensorType* const> ops, size_t i) { return *ops[i]; }

void requireFloat(const TensorType& t, int index, std::string_view what = "operand") {
  if (!isFloat(t.dtype))
    fail(fmt::format("{} has dtype {}, but a float dtype (f16, bf16, f32, f64) is required", what,
                     dtypeName(t.dtype)),
         index);
}

void requireNumeric(const TensorType& t, int index) {
  if (isBool(t.dtype))
    fail(fmt::format("operand has dtype bool, but a numeric dtype is required"), index);
}

void requireBool(const TensorType& t, int index) {
  if (!isBool(t.dtype))
    fail(fmt::format("operand has dtype {}, but bool is required", dtypeName(t.dtype)), index);
}

void requireSameDType(const TensorType& a, const TensorType& b, int indexB) {
  if (a.dtype != b.dtype)
    fail(fmt::format("operand dtypes {} and {} differ (no implicit promotion; use cast)",
                     dtypeName(a.dtype), dtypeName(b.dtype)),
         indexB);
}

Shape broadcastOrFail(const Shape& a, const Shape& b, int indexB) {
  auto s = broadcastShapes(a, b);
  if (!s) fail(fmt::format("shapes {} and {} do not broadcast", shapeStr(a), shapeStr(b)), indexB);
  return *s;
}

int axisOrFail(int64_t axis, size_t rank, std::string_view attr) {
  auto a = normalizeAxis(axis, rank);
  if (!a)
    fail(fmt::format("axis {} is out of range for rank {} (valid: {} to {})", axis, rank,
                     -static_cast<int64_t>(rank), static_cast<int64_t>(rank) - 1),
         -1, std::string(attr));
  return *a;
}

// Checks that `value` fits dtype t (integral and in range for ints, 0 or 1 for bool).
void checkValueFits(double value, DType t, std::string_view attr) {
  if (isFloat(t)) return;
  if (!std::isfinite(value) || value != std::trunc(value))
    fail(fmt::format("value {} is not an integer, but the dtype is {}", formatDouble(value),
                     dtypeName(t)),
         -1, std::string(attr));
  double lo = t == DType::I32 ? -2147483648.0 : t == DType::I64 ? -9223372036854775808.0 : 0.0;
  double hi = t == DType::I32 ? 2147483647.0 : t == DType::I64 ? 9223372036854775807.0 : 1.0;
  if (value < lo || value > hi || (t == DType::I64 && value == hi))
    fail(fmt::format("value {} is out of range for {}", formatDouble(value), dtypeName(t)), -1,
         std::string(attr));
}

void checkShapeAttr(const Shape& s, std::string_view attr, bool allowMinusOne) {
  int minusOnes = 0;
  for (const Dim& d : s) {
    if (d.isSymbolic()) continue;
    if (d.size == -1 && allowMinusOne) {
      if (++minusOnes > 1) fail("at most one -1 is allowed in shape=", -1, std::string(attr));
      continue;
    }
    if (d.size < 0)
      fail(fmt::format("dim {} in {}= is negative", d.size, attr), -1, std::string(attr));
  }
}

TensorType unary(std::span<const TensorType* const> ops) { return operand(ops, 0); }

TensorType binary(std::span<const TensorType* const> ops, DType result) {
  const TensorType& a = operand(ops, 0);
  const TensorType& b = operand(ops, 1);
  requireSameDType(a, b, 1);
  return TensorType{result, broadcastOrFail(a.shape, b.shape, 1)};
}

// Normalizes axes= (default: all axes) and keepdims= (default false); returns the sorted axes.
std::vector<int64_t> normalizeReduceAttrs(const Shape& in, Attrs& attrs) {
  std::vector<int64_t> axes;
  if (const AttrValue* v = attrs.find("axes")) {
    std::set<int> seen;
    for (int64_t a : std::get<std::vector<int64_t>>(*v)) {
      int n = axisOrFail(a, in.size(), "axes");
      if (!seen.insert(n).second)
        fail(fmt::format("axis {} appears twice in axes=", a), -1, "axes");
      axes.push_back(n);
    }
    std::sort(axes.begin(), axes.end());
  } else {
    for (size_t i = 0; i < in.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  attrs.set("axes", axes);
  if (!attrs.has("keepdims")) attrs.set("keepdims", false);
  return axes;
}

TensorType reduce(const TensorType& in, Attrs& attrs) {
  std::vector<int64_t> axes = normalizeReduceAttrs(in.shape, attrs);
  bool keep = attrs.getBool("keepdims");
  Shape out;
  for (size_t i = 0; i < in.shape.size(); ++i) {
    bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
    if (!reduced) out.push_back(in.shape[i]);
    else if (keep) out.push_back(Dim::of(1));
  }
  return TensorType{in.dtype, out};
}

void normalizeAxisAttr(const Shape& in, Attrs& attrs, int64_t defaultAxis) {
  int64_t axis = attrs.has("axis") ? attrs.getInt("axis") : defaultAxis;
  attrs.set("axis", static_cast<int64_t>(axisOrFail(axis, in.size(), "axis")));
}

void normalizeEps(Attrs& attrs, double defaultEps) {
  if (!attrs.has("eps")) attrs.set("eps", defaultEps);
  double eps = attrs.getFloat("eps");
  if (!(eps >= 0.0) || std::isinf(eps))
    fail(fmt::format("eps={} must be finite and >= 0", formatDouble(eps)), -1, "eps");
}

// gamma/beta of a normalization must have the normalized dims x.shape[axis:].
void checkNormParam(const TensorType& x, const TensorType& p, int axis, int index,
                    std::string_view what) {
  if (p.dtype != x.dtype)
    fail(fmt::format("{} has dtype {} but x has {}", what, dtypeName(p.dtype), dtypeName(x.dtype)),
         index);
  Shape want(x.shape.begin() + axis, x.shape.end());
  if (p.shape != want)
    fail(fmt::format("{} has shape {} but the normalized dims of x {} are {}", what,
                     shapeStr(p.shape), shapeStr(x.shape), shapeStr(want)),
         index);
}

}  // namespace

TensorType inferNothing(std::span<const TensorType* const>, Attrs&) {
  STITCH_INTERNAL(false, "input nodes have no inference");
}

TensorType inferConstant(std::span<const TensorType* const>, Attrs& attrs) {
  DType t = attrs.getDType("dtype");
  checkValueFits(attrs.getFloat("value"), t, "value");
  return TensorType{t, {}};
}

TensorType inferUnaryNumeric(std::span<const TensorType* const> ops, Attrs&) {
  requireNumeric(operand(ops, 0), 0);
  return unary(ops);
}
TensorType inferUnaryFloat(std::span<const TensorType* const> ops, Attrs&) {
  requireFloat(operand(ops, 0), 0);
  return unary(ops);
}
TensorType inferUnaryBool(std::span<const TensorType* const> ops, Attrs&) {
  requireBool(operand(ops, 0), 0);
  return unary(ops);
}
TensorType inferGelu(std::span<const TensorType* const> ops, Attrs& attrs) {
  requireFloat(operand(ops, 0), 0);
  if (!attrs.has("approximate")) attrs.set("approximate", std::string("none"));
  return unary(ops);
}

TensorType inferBinaryNumeric(std::span<const TensorType* const> ops, Attrs&) {
  requireNumeric(operand(ops, 0), 0);
  requireNumeric(operand(ops, 1), 1);
  return binary(ops, operand(ops, 0).dtype);
}
TensorType inferBinaryFloat(std::span<const TensorType* const> ops, Attrs&) {
  requireFloat(operand(ops, 0), 0);
  requireFloat(operand(ops, 1), 1);
  return binary(ops, operand(ops, 0).dtype);
}
TensorType inferBinaryBool(std::span<const TensorType* const> ops, Attrs&) {
  requireBool(operand(ops, 0), 0);
  requireBool(operand(ops, 1), 1);
  return binary(ops, DType::Bool);
}
TensorType inferCompareAny(std::span<const TensorType* const> ops, Attrs&) {
  return binary(ops, DType::Bool);
}
TensorType inferCompareNumeric(std::span<const TensorType* const> ops, Attrs&) {
  requireNumeric(operand(ops, 0), 0);
  requireNumeric(operand(ops, 1), 1);
  return binary(ops, DType::Bool);
}

TensorType inferSelect(std::span<const TensorType* const> ops, Attrs&) {
  const TensorType& c = operand(ops, 0);
  const TensorType& a = operand(ops, 1);
  const TensorType& b = operand(ops, 2);
  if (!isBool(c.dtype))
    fail(fmt::format("select's condition has dtype {}, but bool is required", dtypeName(c.dtype)),
         0);
  requireSameDType(a, b, 2);
  Shape s = broadcastOrFail(c.shape, a.shape, 1);
  return TensorType{a.dtype, broadcastOrFail(s, b.shape, 2)};
}

TensorType inferCast(std::span<const TensorType* const> ops, Attrs& attrs) {
  return TensorType{attrs.getDType("to"), operand(ops, 0).shape};
}

TensorType inferReduceNumeric(std::span<const TensorType* const> ops, Attrs& attrs) {
  requireNumeric(operand(ops, 0), 0);
  return reduce(operand(ops, 0), attrs);
}
TensorType inferReduceFloat(std::span<const TensorType* const> ops, Attrs& attrs) {
  requireFloat(operand(ops, 0), 0);
  return reduce(operand(ops, 0), attrs);
}

TensorType inferReshape(std::span<const TensorType* const> ops, Attrs& attrs) {
  const TensorType& in = operand(ops, 0);
  Shape target = attrs.getDims("shape");
  checkShapeAttr(target, "shape", /*allowMinusOne=*/true);
  ElementCount have = elementCount(in.shape);
  auto minusOne = std::find_if(target.begin(), target.end(),
                               [](const Dim& d) { return d.isStatic() && d.size == -1; });
  if (minusOne == target.end()) {
    if (elementCount(target) != have)
      fail(fmt::format("cannot reshape {} to {}: element counts differ", shapeStr(in.shape),
                       shapeStr(target)),
           -1, "shape");
    return TensorType{in.dtype, target};
  }
  // Infer the -1: have / (the rest of target), which must be a static size or a single symbol.
  Shape rest;
  for (auto it = target.begin(); it != target.end(); ++it)
    if (it != minusOne) rest.push_back(*it);
  ElementCount given = elementCount(rest);
  std::vector<std::string> left = have.symbols;
  for (const std::string& s : given.symbols) {
    auto it = std::find(left.begin(), left.end(), s);
    if (it == left.end())
      fail(fmt::format("cannot reshape {} to {}: symbol {} does not divide the element count",
                       shapeStr(in.shape), shapeStr(target), s),
           -1, "shape");
    left.erase(it);
  }
  if (given.coefficient == 0 || have.coefficient % given.coefficient != 0)
    fail(fmt::format("cannot reshape {} to {}: element counts differ", shapeStr(in.shape),
                     shapeStr(target)),
         -1, "shape");
  int64_t q = have.coefficient / given.coefficient;
  Dim inferred;
  if (left.empty()) inferred = Dim::of(q);
  else if (left.size() == 1 && q == 1) inferred = Dim::sym(left[0]);
  else
    fail(fmt::format("cannot reshape {} to {}: the -1 would be a product of dims; name them",
                     shapeStr(in.shape), shapeStr(target)),
         -1, "shape");
  *minusOne = inferred;
  attrs.set("shape", target);
  return TensorType{in.dtype, target};
}

TensorType inferTranspose(std::span<const TensorType* const> ops, Attrs& attrs) {
  const TensorType& in = operand(ops, 0);
  const auto& perm = attrs.getInts("perm");
  if (perm.size() != in.shape.size())
    fail(fmt::format("perm={} has {} entries but the operand has rank {}", attrValueStr(perm),
                     perm.size(), in.shape.size()),
         -1, "perm");
  std::vector<int64_t> norm;
  std::vector<bool> seen(perm.size(), false);
  Shape out;
  for (int64_t p : perm) {
    auto a = normalizeAxis(p, in.shape.size());
    if (!a || seen[*a])
      fail(fmt::format("perm={} is not a permutation of the axes 0..{}", attrValueStr(perm),
                       static_cast<int64_t>(in.shape.size()) - 1),
           -1, "perm");
    seen[*a] = true;
    norm.push_back(*a);
    out.push_back(in.shape[*a]);
  }
  attrs.set("perm", norm);
  return TensorType{in.dtype, out};
}

TensorType inferBroadcastTo(std::span<const TensorType* const> ops, Attrs& attrs) {
  const TensorType& in = operand(ops, 0);
  const Shape& target = attrs.getDims("shape");
  checkShapeAttr(target, "shape", /*allowMinusOne=*/false);
  bool ok = target.size() >= in.shape.size();
  for (size_t i = 0; ok && i < in.shape.size(); ++i) {
    const Dim& d = in.shape[in.shape.size() - 1 - i];
    const Dim& t = target[target.size() - 1 - i];
    ok = d == t || d.isOne();
  }
  if (!ok)
    fail(fmt::format("cannot broadcast shape {} to {}", shapeStr(in.shape), shapeStr(target)), -1,
         "shape");
  return TensorType{in.dtype, target};
}

TensorType inferSlice(std::span<const TensorType* const> ops, Attrs& attrs) {
  const TensorType& in = operand(ops, 0);
  size_t rank = in.shape.size();
  std::vector<int64_t> starts = attrs.getInts("starts");
  std::vector<int64_t> ends = attrs.getInts("ends");
  std::vector<int64_t> steps =
      attrs.has("steps") ? attrs.getInts("steps") : std::vector<int64_t>(rank, 1);
  for (auto [name, list] : {std::pair{"starts", &starts}, {"ends", &ends}, {"steps", &steps}})
    if (list->size() != rank)
      fail(fmt::format("{}= has {} entries but the operand has rank {}", name, list->size(), rank),
           -1, name);
  Shape out;
  for (size_t i = 0; i < rank; ++i) {
    if (steps[i] <= 0) fail(fmt::format("steps= entry {} must be positive", steps[i]), -1, "steps");
    const Dim& d = in.shape[i];
    if (d.isSymbolic()) {
      // A dim is a size or a symbol, never an expression of one: the slice must take the whole
      // axis. Its end clamps to the axis (Python semantics), so any end at or past the largest
      // size the axis can have says so; exporters write 2^31 - 1 or 2^63 - 1 for "to the end".
      // An end below 2^62 (no tensor has that many elements) is kept as written, and
      // bindInputs checks the symbol's size against it (signature.h).
      auto whole = [&](const char* attr, std::string_view want) {
        fail(fmt::format("slice along symbolic dim {} (axis {}) must take the whole axis ({} "
                         "here): start 0, step 1 and an end of at least {} (ends past the axis "
                         "clamp to it)",
                         d.symbol, i, want, kSymbolicSliceEnd),
             -1, attr);
      };
      if (starts[i] != 0) whole("starts", fmt::format("start {}", starts[i]));
      if (steps[i] != 1) whole("steps", fmt::format("step {}", steps[i]));
      if (ends[i] < kSymbolicSliceEnd) whole("ends", fmt::format("end {}", ends[i]));
      if (ends[i] >= kMaxTensorBytes) ends[i] = INT64_MAX;
      out.push_back(d);
      continue;
    }
    // Python semantics: negative indices count from the end; both ends clamp to [0, n].
    auto clampIndex = [n = d.size](int64_t v) {
      if (v < 0) v = std::max<int64_t>(v + n, 0);
      return std::min(v, n);
    };
    int64_t s = clampIndex(starts[i]);
    int64_t e = clampIndex(ends[i]);
    e = std::max(e, s);
    starts[i] = s;
    ends[i] = e;
    // ceil((e - s) / step), written so that a huge step cannot overflow.
    out.push_back(Dim::of(e == s ? 0 : (e - s - 1) / steps[i] + 1));
  }
  attrs.set("starts", starts);
  attrs.set("ends", ends);
  attrs.set("steps", steps);
  return TensorType{in.dtype, out};
}

TensorType inferConcat(std::span<const TensorType* const> ops, Attrs& attrs) {
  const TensorType& first = operand(ops, 0);
  int axis = axisOrFail(attrs.getInt("axis"), first.shape.size(), "axis");
  attrs.set("axis", static_cast<int64_t>(axis));
  Shape out = first.shape;
  int64_t total = 0;
  for (size_t k = 0; k < ops.size(); ++k) {
    const TensorType& t = operand(ops, k);
    int idx = static_cast<int>(k);
    requireSameDType(first, t, idx);
    if (t.shape.size() != first.shape.size())
      fail(fmt::format("concat operands have ranks {} and {}", first.shape.size(), t.shape.size()),
           idx);
    for (size_t i = 0; i < t.shape.size(); ++i) {
      if (static_cast<int>(i) == axis) continue;
      if (t.shape[i] != first.shape[i])
        fail(fmt::format("concat operand shapes {} and {} differ outside axis {}",
                         shapeStr(first.shape), shapeStr(t.shape), axis),
             idx);
    }
    const Dim& d = t.shape[axis];
    if (d.isSymbolic())
      fail(fmt::format("concat along symbolic dim {} is not supported (the axis must be static)",
                       d.symbol),
           idx);
    if (__builtin_add_overflow(total, d.size, &total))
      fail(fmt::format("concat result size along axis {} overflows int64", axis), idx);
  }
  out[axis] = Dim::of(total);
  return TensorType{first.dtype, out};
}

TensorType inferFull(std::span<const TensorType* const>, Attrs& attrs) {
  const Shape& s = attrs.getDims("shape");
  checkShapeAttr(s, "shape", false);
  DType t = attrs.getDType("dtype");
  checkValueFits(attrs.getFloat("value"), t, "value");
  return TensorType{t, s};
}

TensorType inferIota(std::span<const TensorType* const>, Attrs& attrs) {
  const Shape& s = attrs.getDims("shape");
  checkShapeAttr(s, "shape", false);
  DType t = attrs.getDType("dtype");
  if (isBool(t)) fail("iota needs a numeric dtype, not bool", -1, "dtype");
  attrs.set("axis", static_cast<int64_t>(axisOrFail(attrs.getInt("axis"), s.size(), "axis")));
  return TensorType{t, s};
}

TensorType inferSoftmax(std::span<const TensorType* const> ops, Attrs& attrs) {
  const TensorType& x = operand(ops, 0);
  requireFloat(x, 0);
  normalizeAxisAttr(x.shape, attrs, -1);
  return x;
}

TensorType inferLayerNorm(std::span<const TensorType* const> ops, Attrs& attrs) {
  const TensorType& x = operand(ops, 0);
  requireFloat(x, 0);
  normalizeAxisAttr(x.shape, attrs, -1);
  normalizeEps(attrs, 1e-5);
  int axis = static_cast<int>(attrs.getInt("axis"));
  checkNormParam(x, operand(ops, 1), axis, 1, "gamma");
  checkNormParam(x, operand(ops, 2), axis, 2, "beta");
  return x;
}

TensorType inferRmsNorm(std::span<const TensorType* const> ops, Attrs& attrs) {
  const TensorType& x = operand(ops, 0);
  requireFloat(x, 0);
  normalizeAxisAttr(x.shape, attrs, -1);
  normalizeEps(attrs, 1e-6);
  checkNormParam(x, operand(ops, 1), static_cast<int>(attrs.getInt("axis")), 1, "gamma");
  return x;
}

TensorType inferRandomUniform(std::span<const TensorType* const> ops, Attrs& attrs) {
  const char* what[] = {"seed", "offset"};
  for (int i = 0; i < 2; ++i) {
    const TensorType& t = operand(ops, static_cast<size_t>(i));
    if (t.dtype != DType::I64 || !t.shape.empty())
      fail(fmt::format("random_uniform's {} has type {}{}, but an i64 scalar (i64[]) is required",
                       what[i], dtypeName(t.dtype), shapeStr(t.shape)),
           i);
  }
  Shape s = attrs.getDims("shape");  // a copy: set() below may move the attribute storage
  checkShapeAttr(s, "shape", false);
  if (!attrs.has("dtype")) attrs.set("dtype", DType::F32);
  DType t = attrs.getDType("dtype");
  if (!isFloat(t))
    fail(fmt::format("random_uniform draws floats; dtype {} is not f16, bf16, f32 or f64",
                     dtypeName(t)),
         -1, "dtype");
  return TensorType{t, s};
}

TensorType inferGather(std::span<const TensorType* const> ops, Attrs& attrs) {
  const TensorType& x = operand(ops, 0);
  const TensorType& index = operand(ops, 1);
  if (!isInt(index.dtype))
    fail(fmt::format("gather's index has dtype {}, but i32 or i64 is required",
                     dtypeName(index.dtype)),
         1);
  if (index.shape.size() != x.shape.size())
    fail(fmt::format("gather's index {} and data {} differ in rank", shapeStr(index.shape),
                     shapeStr(x.shape)),
         1);
  int axis = axisOrFail(attrs.getInt("axis"), x.shape.size(), "axis");
  attrs.set("axis", static_cast<int64_t>(axis));
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (static_cast<int>(d) != axis && !(index.shape[d] == x.shape[d]))
      fail(fmt::format("gather's index {} and data {} differ on axis {} (only the gathered axis "
                       "{} may differ)",
                       shapeStr(index.shape), shapeStr(x.shape), d, axis),
           1);
  const Dim& n = x.shape[static_cast<size_t>(axis)];
  if (n.isStatic() && n.size == 0 && elementCount(index.shape).coefficient != 0)
    fail(fmt::format("gather from data {} reads an empty axis {}", shapeStr(x.shape), axis), 0);
  return TensorType{x.dtype, index.shape};
}

TensorType inferCheckIndex(std::span<const TensorType* const> ops, Attrs& attrs) {
  const TensorType& index = operand(ops, 0);
  if (!isInt(index.dtype))
    fail(fmt::format("check_index's index has dtype {}, but i32 or i64 is required",
                     dtypeName(index.dtype)),
         0);
  const Shape& size = attrs.getDims("size");
  if (size.size() != 1)
    fail(fmt::format("size= holds {} dims, but exactly one (the bound n of [0, n)) is required",
                     size.size()),
         -1, "size");
  checkShapeAttr(size, "size", /*allowMinusOne=*/false);
  return index;
}

TensorType inferArgReduce(std::span<const TensorType* const> ops, Attrs& attrs) {
  const TensorType& x = operand(ops, 0);
  requireNumeric(x, 0);
  int axis = axisOrFail(attrs.getInt("axis"), x.shape.size(), "axis");
  attrs.set("axis", static_cast<int64_t>(axis));
  if (!attrs.has("keepdims")) attrs.set("keepdims", false);
  const Dim& n = x.shape[static_cast<size_t>(axis)];
  if (n.isStatic() && n.size == 0)
    fail(fmt::format("arg-reduction over the empty axis {} of {} has no answer", axis,
                     shapeStr(x.shape)),
         0);
  Shape out;
  for (size_t i = 0; i < x.shape.size(); ++i) {
    if (static_cast<int>(i) != axis) out.push_back(x.shape[i]);
    else if (attrs.getBool("keepdims")) out.push_back(Dim::of(1));
  }
  return TensorType{DType::I64, out};
}

}  // namespace stitch::ir
