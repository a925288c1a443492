#include "passes/cse.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <variant>

#include "passes/rewriter.h"

namespace stitch::passes {

namespace {

void appendBits(std::string& key, const void* p, size_t n) {
  key.append(static_cast<const char*>(p), n);
}
void appendInt(std::string& key, int64_t v) { appendBits(key, &v, sizeof v); }

void appendShape(std::string& key, const ir::Shape& s) {
  appendInt(key, static_cast<int64_t>(s.size()));
  for (const ir::Dim& d : s) {
    appendInt(key, d.isStatic() ? d.size : -1);
    appendInt(key, static_cast<int64_t>(d.symbol.size()));
    key += d.symbol;
  }
}

// A byte string that is equal for two nodes exactly when they compute the same value: op,
// operands (already in new-graph ids), then every attribute with its kind; doubles by their bits.
std::string keyOf(ir::OpCode op, const std::vector<int>& operands, const ir::Attrs& attrs,
                  ir::DType dtype) {
  std::string key;
  appendInt(key, static_cast<int64_t>(op));
  appendInt(key, static_cast<int64_t>(dtype));  // a constant's dtype is an attribute, but be safe
  appendInt(key, static_cast<int64_t>(operands.size()));
  for (int o : operands) appendInt(key, o);
  for (const ir::Attr& a : attrs.list()) {
    key += a.name;
    key += '\0';
    appendInt(key, static_cast<int64_t>(a.value.index()));
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            appendInt(key, v);
          } else if constexpr (std::is_same_v<T, double>) {
            appendBits(key, &v, sizeof v);
          } else if constexpr (std::is_same_v<T, bool>) {
            appendInt(key, v ? 1 : 0);
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            appendInt(key, static_cast<int64_t>(v.size()));
            for (int64_t i : v) appendInt(key, i);
          } else if constexpr (std::is_same_v<T, ir::Shape>) {
            appendShape(key, v);
          } else if constexpr (std::is_same_v<T, ir::DType>) {
            appendInt(key, static_cast<int64_t>(v));
          } else {
            static_assert(std::is_same_v<T, std::string>);
            appendInt(key, static_cast<int64_t>(v.size()));
            key += v;
          }
        },
        a.value);
  }
  return key;
}

}  // namespace

ir::Graph eliminateCommonSubexpressions(const ir::Graph& g) {
  std::unordered_map<std::string, int> seen;  // key -> new id
  return rewrite(g, [&seen](Rewriter& rw, int id) -> std::optional<int> {
    const ir::Node& n = rw.src().node(id);
    std::vector<int> operands;
    for (int o : n.operands) operands.push_back(rw.mapped(o));
    std::string key = keyOf(n.op, operands, n.attrs, n.type.dtype);
    auto it = seen.find(key);
    if (it != seen.end()) return it->second;
    int copied = rw.copy(id);
    seen.emplace(std::move(key), copied);
    return copied;
  });
}

}  // namespace stitch::passes
