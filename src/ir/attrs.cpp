#include "ir/attrs.h"

#include <charconv>
#include <cmath>

#include "runtime/support/error.h"

namespace stitch::ir {

std::string_view attrKindName(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "integer";
    case AttrKind::Float: return "number";
    case AttrKind::Bool: return "boolean";
    case AttrKind::Ints: return "integer list";
    case AttrKind::Dims: return "shape list";
    case AttrKind::DType: return "dtype";
    case AttrKind::Ident: return "identifier";
  }
  return "?";
}

bool Attr::operator==(const Attr& o) const {
  if (name != o.name) return false;
  const double* a = std::get_if<double>(&value);
  const double* b = std::get_if<double>(&o.value);
  if (a && b && std::isnan(*a) && std::isnan(*b)) return true;
  return value == o.value;
}

void Attrs::set(std::string name, AttrValue v) {
  for (Attr& a : list_) {
    if (a.name == name) {
      a.value = std::move(v);
      return;
    }
  }
  list_.push_back(Attr{std::move(name), std::move(v)});
}

const AttrValue* Attrs::find(std::string_view name) const {
  for (const Attr& a : list_)
    if (a.name == name) return &a.value;
  return nullptr;
}

namespace {
template <class T>
const T& getAs(const Attrs& attrs, std::string_view name) {
  const AttrValue* v = attrs.find(name);
  STITCH_INTERNAL(v != nullptr, "attribute {} missing", name);
  const T* t = std::get_if<T>(v);
  STITCH_INTERNAL(t != nullptr, "attribute {} has the wrong kind", name);
  return *t;
}
}  // namespace

int64_t Attrs::getInt(std::string_view n) const { return getAs<int64_t>(*this, n); }
double Attrs::getFloat(std::string_view n) const { return getAs<double>(*this, n); }
bool Attrs::getBool(std::string_view n) const { return getAs<bool>(*this, n); }
const std::vector<int64_t>& Attrs::getInts(std::string_view n) const {
  return getAs<std::vector<int64_t>>(*this, n);
}
const Shape& Attrs::getDims(std::string_view n) const { return getAs<Shape>(*this, n); }
DType Attrs::getDType(std::string_view n) const { return getAs<DType>(*this, n); }
const std::string& Attrs::getIdent(std::string_view n) const {
  return getAs<std::string>(*this, n);
}

std::string formatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string attrValueStr(const AttrValue& v) {
  struct Visitor {
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return formatDouble(d); }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(const std::vector<int64_t>& l) const {
      std::string out = "[";
      for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + std::to_string(l[i]);
      return out + "]";
    }
    std::string operator()(const Shape& s) const { return shapeStr(s); }
    std::string operator()(DType t) const { return std::string(dtypeName(t)); }
    std::string operator()(const std::string& s) const { return s; }
  };
  return std::visit(Visitor{}, v);
}

}  // namespace stitch::ir
