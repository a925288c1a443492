#include "fusion/plan_eval.h"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>

#include "ir/signature.h"
#include "runtime/support/error.h"

namespace stitch::fusion {

namespace {

ir::Shape staticShape(const std::vector<int64_t>& dims) {
  ir::Shape s;
  for (int64_t d : dims) s.push_back(ir::Dim::of(d));
  return s;
}

// The node's attributes with every symbol in a shape list replaced by its size.
ir::Attrs concreteAttrs(const ir::Attrs& attrs, const ir::Bindings& b) {
  ir::Attrs out;
  for (const ir::Attr& a : attrs.list()) {
    if (const ir::Shape* s = std::get_if<ir::Shape>(&a.value))
      out.set(a.name, staticShape(ir::concretize(*s, b)));
    else out.set(a.name, a.value);
  }
  return out;
}

struct Buffer {
  ir::DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  reference::TensorView view() const { return {dtype, shape, bytes.data()}; }
};

}  // namespace

ir::Graph kernelGraph(const ir::Graph& g, const Kernel& k, const ir::Bindings& bindings,
                      std::vector<int>* inputs) {
  ir::GraphBuilder b("kernel");
  std::unordered_map<int, int> local;  // original node id -> node id in the kernel graph
  auto shapes = ir::concreteShapes(g, bindings);
  for (int i : k.inputs) {
    const ir::Node& n = g.node(i);
    local[i] = b.addInput(n.name, {n.type.dtype, staticShape(shapes[i])});
    if (inputs) inputs->push_back(i);
  }
  // Sources are recreated where they are used; then the kernel's own nodes in order.
  std::function<int(int)> valueOf = [&](int id) -> int {
    if (auto it = local.find(id); it != local.end()) return it->second;
    const ir::Node& n = g.node(id);
    int made;
    if (n.op == ir::OpCode::Constant) {
      made = b.addConstant(n.attrs.getFloat("value"), n.attrs.getDType("dtype"));
    } else {
      STITCH_INTERNAL(n.op == ir::OpCode::Full || n.op == ir::OpCode::Iota ||
                          std::binary_search(k.nodes.begin(), k.nodes.end(), id),
                      "kernel reads {} without it being an input", n.name);
      std::vector<int> ops;
      for (int o : n.operands) ops.push_back(valueOf(o));
      made = b.addOp(n.op, ops, concreteAttrs(n.attrs, bindings), n.name);
    }
    local[id] = made;
    return made;
  };
  for (int n : k.nodes) valueOf(n);
  std::vector<int> outs;
  for (int o : k.outputs) outs.push_back(local.at(o));
  b.setOutputs(outs);
  return std::move(b).finish();
}

std::vector<reference::HostTensor> evaluatePlan(const ir::Graph& g, const Plan& plan,
                                                std::span<const reference::TensorView> inputs) {
  std::vector<ir::ConcreteInput> sig;
  for (const auto& t : inputs) sig.push_back({t.dtype, t.shape});
  ir::Bindings bindings = ir::bindInputs(g, sig);
  std::map<int, Buffer> values;  // materialized values by original node id
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& t = inputs[i];
    Buffer buf{t.dtype, {t.shape.begin(), t.shape.end()}, {}};
    reference::HostTensor h = reference::decode(t);
    buf.bytes.resize(static_cast<size_t>(h.numel() * ir::dtypeBytes(t.dtype)));
    reference::encode(h, {t.dtype, buf.shape, buf.bytes.data()});
    values[g.inputs()[i]] = std::move(buf);
  }
  auto store = [&](int id, const reference::HostTensor& h) {
    Buffer buf{h.dtype, h.shape, {}};
    buf.bytes.resize(static_cast<size_t>(h.numel() * ir::dtypeBytes(h.dtype)));
    reference::encode(h, {h.dtype, buf.shape, buf.bytes.data()});
    values[id] = std::move(buf);
  };
  for (const Kernel& k : plan.kernels) {
    std::vector<int> order;
    ir::Graph kg = kernelGraph(g, k, bindings, &order);
    std::vector<reference::TensorView> in;
    for (int id : order) {
      auto it = values.find(id);
      STITCH_INTERNAL(it != values.end(), "kernel reads {} before any kernel wrote it",
                      g.node(id).name);
      in.push_back(it->second.view());
    }
    std::vector<reference::HostTensor> all = reference::evaluateNodes(kg, in);
    for (size_t i = 0; i < k.outputs.size(); ++i) store(k.outputs[i], all[kg.outputs()[i]]);
  }
  // Outputs that no kernel writes: graph inputs returned as they are, or sources (planned as
  // kernels only when they are outputs, so already stored).
  std::vector<reference::HostTensor> out;
  for (int o : g.outputs()) {
    auto it = values.find(o);
    STITCH_INTERNAL(it != values.end(), "no kernel writes output {}", g.node(o).name);
    out.push_back(reference::decode(it->second.view()));
  }
  return out;
}

}  // namespace stitch::fusion
