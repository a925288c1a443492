#include "ir/shape.h"

#include <algorithm>

#include "runtime/support/error.h"

namespace stitch::ir {

std::string shapeStr(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += s[i].str();
  }
  return out + "]";
}

std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim* da = i < rank - a.size() ? nullptr : &a[i - (rank - a.size())];
    const Dim* db = i < rank - b.size() ? nullptr : &b[i - (rank - b.size())];
    if (!da) out[i] = *db;
    else if (!db) out[i] = *da;
    else if (*da == *db) out[i] = *da;
    else if (da->isOne()) out[i] = *db;
    else if (db->isOne()) out[i] = *da;
    else return std::nullopt;
  }
  return out;
}

ElementCount elementCount(const Shape& s) {
  ElementCount c;
  for (const Dim& d : s) {
    if (d.isSymbolic()) c.symbols.push_back(d.symbol);
    // Dims come from user text or the C API: a product past int64 is an error, not UB.
    else if (__builtin_mul_overflow(c.coefficient, d.size, &c.coefficient))
      throwError(ErrorCode::InvalidGraph,
                 fmt::format("the element count of {} overflows int64", shapeStr(s)));
  }
  std::sort(c.symbols.begin(), c.symbols.end());
  return c;
}

std::vector<int64_t> concretize(const Shape& s, const Bindings& b) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const Dim& d : s) {
    if (d.isStatic()) {
      out.push_back(d.size);
      continue;
    }
    auto it = b.find(d.symbol);
    STITCH_INTERNAL(it != b.end(), "symbol {} is unbound", d.symbol);
    out.push_back(it->second);
  }
  return out;
}

std::optional<int> normalizeAxis(int64_t axis, size_t rank) {
  auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) return std::nullopt;
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

}  // namespace stitch::ir
