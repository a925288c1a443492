#include "passes/rewriter.h"

#include "runtime/support/error.h"

namespace stitch::passes {

Rewriter::Rewriter(const ir::Graph& src)
    : src_(src), b_(src.name()), map_(src.nodes().size(), kDrop) {
  for (const ir::Node& n : src.nodes())
    if (!n.name.empty()) oldNames_.insert(n.name);
}

int Rewriter::mapped(int oldId) const {
  int id = map_.at(static_cast<size_t>(oldId));
  STITCH_INTERNAL(id != kDrop, "value {} ('{}') was dropped but is still used", oldId,
                  src_.node(oldId).name);
  return id;
}

std::string Rewriter::freshName() {
  for (;;) {
    std::string n = "t" + std::to_string(nextFresh_++);
    if (!oldNames_.count(n) && !b_.graph().find(n)) return n;
  }
}

std::string Rewriter::freshName(const std::string& base) {
  auto taken = [&](const std::string& n) { return oldNames_.count(n) || b_.graph().find(n); };
  if (!taken(base)) return base;
  for (int k = 1;; ++k)
    if (std::string n = base + "_" + std::to_string(k); !taken(n)) return n;
}

int Rewriter::add(ir::OpCode op, std::vector<int> operands, ir::Attrs attrs, std::string name) {
  if (name.empty()) name = freshName();
  return b_.addOp(op, std::move(operands), std::move(attrs), std::move(name));
}

int Rewriter::constant(double value, ir::DType dtype) { return b_.addConstant(value, dtype); }

int Rewriter::copy(int oldId) {
  const ir::Node& n = src_.node(oldId);
  switch (n.op) {
    case ir::OpCode::Input: return b_.addInput(n.name, n.type, n.loc);
    case ir::OpCode::Constant:
      return b_.addConstant(n.attrs.getFloat("value"), n.type.dtype, n.loc);
    default: break;
  }
  std::vector<int> operands;
  for (int o : n.operands) operands.push_back(mapped(o));
  return b_.addOp(n.op, std::move(operands), n.attrs, n.name, n.loc);
}

ir::Graph Rewriter::run(const Visit& visit) && {
  for (size_t i = 0; i < map_.size(); ++i) {
    int oldId = static_cast<int>(i);
    // Inputs are the signature: always copied, in order, whatever the visitor would do.
    std::optional<int> to =
        src_.node(oldId).op == ir::OpCode::Input ? std::nullopt : visit(*this, oldId);
    map_[i] = to ? *to : copy(oldId);
  }
  std::vector<int> outputs;
  for (int o : src_.outputs()) outputs.push_back(mapped(o));
  b_.setOutputs(std::move(outputs));
  return std::move(b_).finish();
}

ir::Graph rewrite(const ir::Graph& g, const Rewriter::Visit& visit) {
  return Rewriter(g).run(visit);
}

}  // namespace stitch::passes
