#include "ir/signature.h"

#include <algorithm>

#include "runtime/support/checked.h"
#include "runtime/support/error.h"

namespace stitch::ir {

Bindings bindInputs(const Graph& g, std::span<const ConcreteInput> inputs) {
  STITCH_CHECK(inputs.size() == g.inputs().size(), ErrorCode::ShapeMismatch,
               "graph {} takes {} inputs, but {} were given", g.name(), g.inputs().size(),
               inputs.size());
  Bindings b;
  std::map<std::string, std::string> boundBy;  // symbol -> where it was bound, for messages
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& n = g.node(g.inputs()[i]);
    const ConcreteInput& in = inputs[i];
    STITCH_CHECK(in.dtype == n.type.dtype, ErrorCode::ShapeMismatch,
                 "input {} ('{}') has dtype {}, but the graph declares {}", i, n.name,
                 dtypeName(in.dtype), typeStr(n.type));
    STITCH_CHECK(in.shape.size() == n.type.shape.size(), ErrorCode::ShapeMismatch,
                 "input {} ('{}') has rank {}, but the graph declares {}", i, n.name,
                 in.shape.size(), typeStr(n.type));
    for (size_t a = 0; a < in.shape.size(); ++a) {
      const Dim& d = n.type.shape[a];
      int64_t size = in.shape[a];
      STITCH_CHECK(size >= 0, ErrorCode::ShapeMismatch, "input {} ('{}') dim {} is negative ({})",
                   i, n.name, a, size);
      if (d.isStatic()) {
        STITCH_CHECK(size == d.size, ErrorCode::ShapeMismatch,
                     "input {} ('{}') dim {} is {}, but the graph declares {}", i, n.name, a, size,
                     typeStr(n.type));
        continue;
      }
      std::string where = fmt::format("input {} ('{}') dim {}", i, n.name, a);
      auto [it, inserted] = b.emplace(d.symbol, size);
      if (inserted) {
        boundBy[d.symbol] = where;
        continue;
      }
      STITCH_CHECK(it->second == size, ErrorCode::ShapeMismatch,
                   "symbolic dim {} is bound to {} by {} but to {} by {}", d.symbol, it->second,
                   boundBy[d.symbol], size, where);
    }
  }
  checkValueSizes(g, b);
  checkSymbolicSlices(g, b);
  return b;
}

void checkSymbolicSlices(const Graph& g, const Bindings& b) {
  if (b.empty()) return;
  for (const Node& n : g.nodes()) {
    if (n.op != OpCode::Slice) continue;
    const Node& in = g.node(n.operands[0]);
    const std::vector<int64_t>& ends = n.attrs.getInts("ends");
    for (size_t a = 0; a < in.type.shape.size(); ++a) {
      const Dim& d = in.type.shape[a];
      if (!d.isSymbolic() || ends[a] == INT64_MAX) continue;
      auto bound = b.find(d.symbol);
      if (bound == b.end()) continue;  // not bound here: nothing to check yet
      int64_t size = bound->second;
      STITCH_CHECK(size <= ends[a], ErrorCode::ShapeMismatch,
                   "slice '{}' takes axis {} of '{}' ({}) to its end, written as {}, but {}={} is "
                   "longer: the result would be a prefix of the axis, which its type {} does not "
                   "say",
                   n.name, a, in.name, typeStr(in.type), ends[a], d.symbol, size, typeStr(n.type));
    }
  }
}

void checkValueSizes(const Graph& g, const Bindings& b) {
  // Static shapes were checked when the graph was built; only symbols can make a value too large.
  if (b.empty()) return;
  std::vector<int64_t> dims;
  for (const Node& n : g.nodes()) {
    if (std::none_of(n.type.shape.begin(), n.type.shape.end(),
                     [](const Dim& d) { return d.isSymbolic(); }))
      continue;
    dims = concretize(n.type.shape, b);
    if (checkedTensorSize(dims, dtypeBytes(n.type.dtype))) continue;
    std::string bound;
    for (const auto& [sym, size] : b)
      bound += fmt::format("{}{}={}", bound.empty() ? "" : ", ", sym, size);
    requireTensorSize(
        dims, dtypeBytes(n.type.dtype),
        fmt::format("with {}, {} '{}' ({})", bound, n.op == OpCode::Input ? "input" : "value",
                    n.name, typeStr(n.type)),
        ErrorCode::ShapeMismatch);
  }
}

std::vector<std::vector<int64_t>> concreteShapes(const Graph& g, const Bindings& b) {
  std::vector<std::vector<int64_t>> out;
  out.reserve(g.nodes().size());
  for (const Node& n : g.nodes()) out.push_back(concretize(n.type.shape, b));
  return out;
}

}  // namespace stitch::ir
