// Op attributes: the `key=value` arguments of the text format.
//
// Each op declares an attribute schema (ops.def). The graph builder checks given attributes
// against it (unknown key, wrong kind, missing required one), converts where the text format is
// loose (an int where a float is wanted, an int list where a shape list is wanted), and the op's
// inference fills every default, so a node's attributes are complete and normalized (axes
// non-negative and explicit). Printing a node therefore round-trips to the same node.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ir/shape.h"
#include "runtime/support/dtype.h"

namespace stitch::ir {

// The order matches AttrValue's alternatives.
enum class AttrKind : uint8_t { Int, Float, Bool, Ints, Dims, DType, Ident };
std::string_view attrKindName(AttrKind k);

using AttrValue =
    std::variant<int64_t, double, bool, std::vector<int64_t>, Shape, DType, std::string>;

inline AttrKind kindOf(const AttrValue& v) { return static_cast<AttrKind>(v.index()); }

struct Attr {
  std::string name;
  AttrValue value;
  // Values compare with ==, except that NaN equals NaN: structural equality must be reflexive,
  // or a graph holding a `nan` literal would differ from itself and fail verify().
  bool operator==(const Attr& o) const;
};

// A small ordered list of attributes (ops have at most five).
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<Attr> list) : list_(list) {}

  void set(std::string name, AttrValue v);
  const AttrValue* find(std::string_view name) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }

  // Typed access to an attribute known to exist (an internal error otherwise).
  int64_t getInt(std::string_view name) const;
  double getFloat(std::string_view name) const;
  bool getBool(std::string_view name) const;
  const std::vector<int64_t>& getInts(std::string_view name) const;
  const Shape& getDims(std::string_view name) const;
  DType getDType(std::string_view name) const;
  const std::string& getIdent(std::string_view name) const;

  std::span<const Attr> list() const { return list_; }
  bool empty() const { return list_.empty(); }
  bool operator==(const Attrs&) const = default;

 private:
  std::vector<Attr> list_;
};

// One attribute of an op's schema.
struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  bool required;
  // For Ident attributes: the allowed identifiers.
  std::span<const std::string_view> choices = {};
};

// Text of a value as the text format writes it ("[1, 2]", "true", "f32", "1e-05").
std::string attrValueStr(const AttrValue& v);

// Shortest text that reads back as exactly the same double ("inf", "-inf", "nan" for those).
std::string formatDouble(double v);

}  // namespace stitch::ir
