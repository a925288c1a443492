#include "ir/printer.h"

#include <cstdint>
#include <unordered_set>

namespace stitch::ir {

namespace {

// The literal text of a constant: integers for integer dtypes, else the round-tripping double.
std::string literalText(const Node& c) {
  double v = c.attrs.getFloat("value");
  // The builder checked that an integer-dtype constant is integral and in range.
  if (isInt(c.type.dtype)) return std::to_string(static_cast<int64_t>(v));
  return formatDouble(v);
}

// Whether the parser would read operand `i` of `user` back as a literal of this constant: only
// binary ops and select's 2nd/3rd operand take literals, and only with a non-literal partner
// (which gives the literal its dtype).
bool literalPosition(const Graph& g, const Node& user, size_t i) {
  const OpInfo& info = opInfo(user.op);
  size_t partner;
  if (info.cls == OpClass::Binary && user.operands.size() == 2) partner = 1 - i;
  else if (info.cls == OpClass::Select && user.operands.size() == 3 && i >= 1) partner = 3 - i;
  else return false;
  return g.node(user.operands[partner]).op != OpCode::Constant;
}

}  // namespace

std::string printGraph(const Graph& g) {
  auto nodes = g.nodes();
  // Decide which constants print inline and which need a `full` statement of their own.
  std::vector<bool> needsStatement(nodes.size(), false);
  for (const Node& n : nodes) {
    for (size_t i = 0; i < n.operands.size(); ++i) {
      auto c = static_cast<size_t>(n.operands[i]);
      if (nodes[c].op != OpCode::Constant) continue;
      if (isBool(nodes[c].type.dtype) || !literalPosition(g, n, i)) needsStatement[c] = true;
    }
  }
  for (int o : g.outputs())
    if (g.node(o).op == OpCode::Constant) needsStatement[static_cast<size_t>(o)] = true;

  std::unordered_set<std::string> taken;
  for (const Node& n : nodes) taken.insert(n.name);
  std::vector<std::string> names(nodes.size());
  int nextFresh = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    names[i] = nodes[i].name;
    if (!needsStatement[i]) continue;
    do names[i] = "c" + std::to_string(nextFresh++);
    while (taken.count(names[i]));
    taken.insert(names[i]);
  }
  auto operandText = [&](int id) {
    auto k = static_cast<size_t>(id);
    return nodes[k].op == OpCode::Constant && !needsStatement[k] ? literalText(nodes[k]) : names[k];
  };

  std::string out = "graph " + g.name() + "(";
  for (size_t k = 0; k < g.inputs().size(); ++k) {
    const Node& in = g.node(g.inputs()[k]);
    out += (k ? ", " : "") + in.name + ": " + typeStr(in.type);
  }
  out += ") {\n";
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.op == OpCode::Input) continue;
    if (n.op == OpCode::Constant) {
      if (needsStatement[i])
        out += "  " + names[i] + " = full(shape=[], value=" + literalText(n) +
               ", dtype=" + std::string(dtypeName(n.type.dtype)) + ")\n";
      continue;
    }
    out += "  " + names[i] + " = " + std::string(opName(n.op)) + "(";
    bool first = true;
    for (int o : n.operands) {
      out += (first ? "" : ", ") + operandText(o);
      first = false;
    }
    for (const Attr& a : n.attrs.list()) {
      out += (first ? "" : ", ") + a.name + "=" + attrValueStr(a.value);
      first = false;
    }
    out += ")\n";
  }
  out += "  return ";
  for (size_t k = 0; k < g.outputs().size(); ++k)
    out += (k ? ", " : "") + names[static_cast<size_t>(g.outputs()[k])];
  return out + "\n}\n";
}

std::string printModule(std::span<const Graph> graphs) {
  std::string out;
  for (size_t i = 0; i < graphs.size(); ++i) out += (i ? "\n" : "") + printGraph(graphs[i]);
  return out;
}

}  // namespace stitch::ir
