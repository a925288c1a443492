// Shapes with static and symbolic dims.
//
// A dim is a static size (>= 0) or a symbol: a name bound to a size at run time, equal wherever it
// appears in a graph. Shape inference is exact over this domain: two dims are known equal only if
// both are the same static size or the same symbol. Where equality cannot be proven (a symbol
// against a static size other than 1, two different symbols), inference reports an error rather
// than guessing; the run-time binding then never needs to re-check inferred shapes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace stitch::ir {

struct Dim {
  int64_t size = 0;    // when static
  std::string symbol;  // non-empty when symbolic

  static Dim of(int64_t n) { return Dim{n, {}}; }
  static Dim sym(std::string s) { return Dim{0, std::move(s)}; }
  bool isStatic() const { return symbol.empty(); }
  bool isSymbolic() const { return !symbol.empty(); }
  bool isOne() const { return isStatic() && size == 1; }
  bool operator==(const Dim& o) const = default;
  std::string str() const { return isStatic() ? std::to_string(size) : symbol; }
};

using Shape = std::vector<Dim>;

// "[N, 768]".
std::string shapeStr(const Shape& s);

// NumPy broadcasting of a and b; nullopt if they do not broadcast.
std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b);

// The element count as coefficient * product(symbols), symbols sorted.
struct ElementCount {
  int64_t coefficient = 1;
  std::vector<std::string> symbols;
  bool operator==(const ElementCount&) const = default;
};
ElementCount elementCount(const Shape& s);

// Symbol -> size, bound from the actual input tensors at run time.
using Bindings = std::map<std::string, int64_t>;

// The concrete sizes of s under bindings; every symbol of s must be bound.
std::vector<int64_t> concretize(const Shape& s, const Bindings& b);

// Normalizes a possibly negative axis against rank; nullopt when out of range.
std::optional<int> normalizeAxis(int64_t axis, size_t rank);

}  // namespace stitch::ir
