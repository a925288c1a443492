#include "ir/graph.h"

#include <algorithm>
#include <set>

#include "ir/infer.h"
#include "runtime/support/checked.h"

namespace stitch::ir {

namespace {

// The static part of a value's size must fit the limit (support/checked.h): with symbolic dims
// the value can then still overflow only through its bindings, which bindInputs checks.
void checkStaticSize(const TensorType& t, std::string_view what) {
  std::vector<int64_t> dims;
  for (const Dim& d : t.shape)
    if (d.isStatic()) dims.push_back(d.size);
  STITCH_CHECK(checkedTensorSize(dims, dtypeBytes(t.dtype)).has_value(), ErrorCode::InvalidGraph,
               "{} has type {}, {} than the limit of 2^62 bytes per tensor", what, typeStr(t),
               t.shape.size() == dims.size() ? "larger" : "with static dims alone larger");
}

}  // namespace

bool isIdentifier(std::string_view s) {
  if (s.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(s[0])) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

bool isReservedWord(std::string_view s) {
  return s == "graph" || s == "return" || s == "inf" || s == "nan" || s == "true" || s == "false";
}

std::string indexCheckLabel(const Node& n) {
  if (n.op == OpCode::Gather)
    return fmt::format("gather '{}' (axis {})", n.name, n.attrs.getInt("axis"));
  return fmt::format("{} '{}'", opName(n.op), n.name);
}

std::optional<int> Graph::find(std::string_view name) const {
  auto it = byName_.find(std::string(name));
  if (it == byName_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Graph::symbols() const {
  std::vector<std::string> out;
  for (int id : inputs_)
    for (const Dim& d : nodes_[id].type.shape)
      if (d.isSymbolic() && std::find(out.begin(), out.end(), d.symbol) == out.end())
        out.push_back(d.symbol);
  return out;
}

size_t Graph::numOps() const {
  return static_cast<size_t>(std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) {
    return n.op != OpCode::Input && n.op != OpCode::Constant;
  }));
}

bool Graph::operator==(const Graph& o) const {
  if (name_ != o.name_ || inputs_ != o.inputs_ || outputs_ != o.outputs_ ||
      nodes_.size() != o.nodes_.size())
    return false;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& a = nodes_[i];
    const Node& b = o.nodes_[i];
    if (a.op != b.op || a.operands != b.operands || !(a.attrs == b.attrs) || a.type != b.type ||
        a.name != b.name)
      return false;
  }
  return true;
}

GraphBuilder::GraphBuilder(std::string name) {
  STITCH_CHECK(isIdentifier(name) && !isReservedWord(name), ErrorCode::InvalidGraph,
               "'{}' is not a valid graph name (an identifier)", name);
  g_.name_ = std::move(name);
}

GraphBuilder::GraphBuilder(Graph g) : g_(std::move(g)) {}

void GraphBuilder::checkName(const std::string& name) const {
  STITCH_CHECK(isIdentifier(name), ErrorCode::InvalidGraph, "'{}' is not a valid name", name);
  STITCH_CHECK(!isReservedWord(name), ErrorCode::InvalidGraph, "'{}' is a reserved word", name);
  STITCH_CHECK(!g_.find(name), ErrorCode::InvalidGraph, "duplicate name '{}'", name);
}

std::string GraphBuilder::freshName() {
  for (;;) {
    std::string n = "t" + std::to_string(nextTemp_++);
    if (!g_.find(n)) return n;
  }
}

int GraphBuilder::addInput(std::string name, TensorType type, SourceLoc loc) {
  checkName(name);
  for (const Dim& d : type.shape) {
    if (d.isSymbolic())
      STITCH_CHECK(isIdentifier(d.symbol) && !isReservedWord(d.symbol), ErrorCode::InvalidGraph,
                   "'{}' is not a valid symbolic dim name", d.symbol);
    else
      STITCH_CHECK(d.size >= 0, ErrorCode::InvalidGraph, "dim {} of input '{}' is negative", d.size,
                   name);
  }
  checkStaticSize(type, fmt::format("input '{}'", name));
  int id = static_cast<int>(g_.nodes_.size());
  g_.byName_.emplace(name, id);
  g_.nodes_.push_back(Node{OpCode::Input, {}, {}, std::move(type), std::move(name), loc});
  g_.inputs_.push_back(id);
  return id;
}

int GraphBuilder::addConstant(double value, DType dtype, SourceLoc loc) {
  Attrs attrs{{"value", value}, {"dtype", dtype}};
  TensorType t = inferConstant({}, attrs);
  int id = static_cast<int>(g_.nodes_.size());
  g_.nodes_.push_back(Node{OpCode::Constant, {}, std::move(attrs), t, {}, loc});
  return id;
}

namespace {

// Checks given attributes against the op's schema and converts loose kinds.
Attrs checkAttrs(const OpInfo& info, Attrs given) {
  Attrs out;
  for (const Attr& a : given.list()) {
    auto spec = std::find_if(info.attrs.begin(), info.attrs.end(),
                             [&](const AttrSpec& s) { return s.name == a.name; });
    if (spec == info.attrs.end()) {
      std::string valid;
      for (const AttrSpec& s : info.attrs)
        valid += (valid.empty() ? "" : ", ") + std::string(s.name);
      throw OpError(fmt::format("{} has no attribute '{}' (valid: {})", info.name, a.name,
                                valid.empty() ? "none" : valid),
                    -1, a.name);
    }
    if (out.has(a.name))
      throw OpError(fmt::format("attribute '{}' is given twice", a.name), -1, a.name);
    AttrValue v = a.value;
    AttrKind have = kindOf(v);
    if (spec->kind == AttrKind::Float && have == AttrKind::Int)
      v = static_cast<double>(std::get<int64_t>(v));
    else if (spec->kind == AttrKind::Dims && have == AttrKind::Ints) {
      Shape s;
      for (int64_t i : std::get<std::vector<int64_t>>(v)) s.push_back(Dim::of(i));
      v = s;
    } else if (spec->kind == AttrKind::Ints && have == AttrKind::Dims) {
      const Shape& s = std::get<Shape>(v);
      auto sym = std::find_if(s.begin(), s.end(), [](const Dim& d) { return d.isSymbolic(); });
      if (sym != s.end())
        throw OpError(
            fmt::format("attribute '{}' takes integers, not the symbol {}", a.name, sym->symbol),
            -1, a.name);
      std::vector<int64_t> ints;
      for (const Dim& d : s) ints.push_back(d.size);
      v = ints;
    } else if (spec->kind == AttrKind::Ident && have == AttrKind::Ident) {
      const auto& id = std::get<std::string>(v);
      if (!spec->choices.empty() &&
          std::find(spec->choices.begin(), spec->choices.end(), id) == spec->choices.end()) {
        std::string valid;
        for (auto c : spec->choices) valid += (valid.empty() ? "" : ", ") + std::string(c);
        throw OpError(fmt::format("{}={} is not valid (valid: {})", a.name, id, valid), -1, a.name);
      }
    } else if (spec->kind != have) {
      throw OpError(
          fmt::format("attribute '{}' of {} takes a {}, but got the {} {}", a.name, info.name,
                      attrKindName(spec->kind), attrKindName(have), attrValueStr(a.value)),
          -1, a.name);
    }
    out.set(a.name, std::move(v));
  }
  for (const AttrSpec& s : info.attrs)
    if (s.required && !out.has(s.name))
      throw OpError(
          fmt::format("{} needs the attribute '{}' ({})", info.name, s.name, attrKindName(s.kind)));
  return out;
}

// Orders attributes as the schema lists them, so equal nodes have equal attribute lists.
Attrs canonicalOrder(const OpInfo& info, const Attrs& attrs) {
  Attrs out;
  for (const AttrSpec& s : info.attrs)
    if (const AttrValue* v = attrs.find(s.name)) out.set(std::string(s.name), *v);
  return out;
}

}  // namespace

int GraphBuilder::addOp(OpCode op, std::vector<int> operands, Attrs attrs, std::string name,
                        SourceLoc loc) {
  const OpInfo& info = opInfo(op);
  STITCH_CHECK(info.inText(), ErrorCode::InvalidGraph, "'{}' cannot be added as an op", info.name);
  if (info.arity >= 0 && operands.size() != static_cast<size_t>(info.arity))
    throw OpError(fmt::format("{} takes {} operand{}, got {}", info.name, info.arity,
                              info.arity == 1 ? "" : "s", operands.size()));
  if (info.arity < 0 && operands.empty())
    throw OpError(fmt::format("{} takes one or more operands, got none", info.name));
  std::vector<const TensorType*> types;
  for (size_t i = 0; i < operands.size(); ++i) {
    int id = operands[i];
    if (id < 0 || static_cast<size_t>(id) >= g_.nodes_.size())
      throw OpError(fmt::format("operand {} refers to value {}, which does not exist", i, id),
                    static_cast<int>(i));
    types.push_back(&g_.nodes_[id].type);
  }
  Attrs checked = checkAttrs(info, std::move(attrs));
  // Symbols in shape lists must be bound by some input, or nothing could give them a size.
  for (const Attr& a : checked.list()) {
    if (const Shape* s = std::get_if<Shape>(&a.value))
      for (const Dim& d : *s)
        if (d.isSymbolic() && !isInputSymbol(d.symbol))
          throw OpError(
              fmt::format("symbol {} in {}= is not a dim of any graph input", d.symbol, a.name), -1,
              a.name);
  }
  TensorType type = info.infer(types, checked);
  checked = canonicalOrder(info, checked);
  if (name.empty()) name = freshName();
  else checkName(name);
  checkStaticSize(type, fmt::format("the result of {} '{}'", info.name, name));
  int id = static_cast<int>(g_.nodes_.size());
  g_.byName_.emplace(name, id);
  g_.nodes_.push_back(
      Node{op, std::move(operands), std::move(checked), std::move(type), std::move(name), loc});
  return id;
}

bool GraphBuilder::isInputSymbol(const std::string& symbol) const {
  for (int id : g_.inputs_)
    for (const Dim& d : g_.nodes_[id].type.shape)
      if (d.symbol == symbol) return true;
  return false;
}

void GraphBuilder::setOutputs(std::vector<int> outputs) {
  STITCH_CHECK(!outputs.empty(), ErrorCode::InvalidGraph, "a graph needs at least one output");
  for (int id : outputs)
    STITCH_CHECK(id >= 0 && static_cast<size_t>(id) < g_.nodes_.size(), ErrorCode::InvalidGraph,
                 "output value {} does not exist", id);
  g_.outputs_ = std::move(outputs);
}

Graph GraphBuilder::finish() && {
  verify(g_);
  return std::move(g_);
}

void verify(const Graph& g) {
  auto bad = [&](const std::string& msg) {
    throwError(ErrorCode::InvalidGraph, fmt::format("graph {}: {}", g.name(), msg));
  };
  if (!isIdentifier(g.name())) bad("invalid graph name");
  std::set<std::string> names;
  std::vector<int> inputs;
  auto nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.op == OpCode::Constant) {
      if (!n.name.empty()) bad(fmt::format("constant node {} has a name", i));
    } else if (!isIdentifier(n.name) || isReservedWord(n.name) || !names.insert(n.name).second) {
      bad(fmt::format("node {} has an invalid or duplicate name '{}'", i, n.name));
    }
    for (int o : n.operands)
      if (o < 0 || static_cast<size_t>(o) >= i)
        bad(fmt::format("node '{}' uses value {}, which is not defined before it", n.name, o));
    try {
      checkStaticSize(n.type, fmt::format("node '{}'", n.name));
    } catch (const Error& e) {
      bad(e.message());
    }
    if (n.op == OpCode::Input) {
      inputs.push_back(static_cast<int>(i));
      continue;
    }
    // Re-running inference must reproduce the stored type and attributes exactly.
    std::vector<const TensorType*> types;
    for (int o : n.operands) types.push_back(&nodes[o].type);
    const OpInfo& info = opInfo(n.op);
    if (info.arity >= 0 && n.operands.size() != static_cast<size_t>(info.arity))
      bad(fmt::format("node '{}' ({}) has {} operands", n.name, info.name, n.operands.size()));
    Attrs attrs = n.attrs;
    TensorType t;
    try {
      t = info.infer(types, attrs);
    } catch (const Error& e) {
      bad(fmt::format("node '{}' ({}): {}", n.name, info.name, e.message()));
    }
    if (t != n.type)
      bad(fmt::format("node '{}' has type {} but its op gives {}", n.name, typeStr(n.type),
                      typeStr(t)));
    if (!(canonicalOrder(info, attrs) == n.attrs))
      bad(fmt::format("node '{}' has unnormalized attributes", n.name));
  }
  if (std::vector<int>(g.inputs().begin(), g.inputs().end()) != inputs)
    bad("the input list does not match the input nodes");
  if (g.outputs().empty()) bad("no outputs (missing return)");
  for (int o : g.outputs())
    if (o < 0 || static_cast<size_t>(o) >= nodes.size())
      bad(fmt::format("output value {} does not exist", o));
}

}  // namespace stitch::ir
