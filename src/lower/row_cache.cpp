// Row caches (design note in row_cache.h).
#include "lower/row_cache.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <tuple>
#include <utility>

namespace stitch::lower {

namespace {

bool commutative(ir::OpCode op) {
  switch (op) {
    case ir::OpCode::Add:
    case ir::OpCode::Mul:
    case ir::OpCode::Maximum:
    case ir::OpCode::Minimum:
    case ir::OpCode::Eq:
    case ir::OpCode::Ne:
    case ir::OpCode::LogicalAnd:
    case ir::OpCode::LogicalOr: return true;
    default: return false;
  }
}

}  // namespace

RowCache rowCache(const Phase& ph, int64_t maxBytes) {
  const size_t n = ph.insts.size();
  RowCache rc;
  rc.storeSlot.assign(n, -1);
  rc.loadSlot.assign(n, -1);
  if (!ph.reduce || ph.rowLength < 2 || ph.stages.empty()) return rc;

  // The walk each instruction belongs to: stage s, or stages.size() for elems; -1 otherwise.
  const int elems = static_cast<int>(ph.stages.size());
  std::vector<int> walk(n, -1);
  for (size_t s = 0; s < ph.stages.size(); ++s)
    for (int id : ph.stages[s].body.insts) walk[static_cast<size_t>(id)] = static_cast<int>(s);
  for (int id : ph.elems.insts) walk[static_cast<size_t>(id)] = elems;

  std::vector<bool> written(ph.buffers.size(), false);
  for (size_t b = static_cast<size_t>(ph.numInputs); b < ph.buffers.size(); ++b)
    for (size_t a = 0; a < ph.buffers.size(); ++a)
      if (ph.buffers[a] == ph.buffers[b]) written[a] = true;

  // Structural classes: the same kind, types and immediates on operands of the same classes.
  // varying: the value changes along the row (depends on the loop index); costly: its
  // computation holds a transcendental; clean: it reads no buffer the phase writes.
  using Key = std::tuple<int, int, int, int, int, int, int, int, int64_t, uint64_t>;
  std::map<Key, int> classes;
  std::vector<int> cls(n, -1);
  std::vector<bool> varying(n, false), costly(n, false), clean(n, true);
  std::function<int(int)> classOf = [&](int id) -> int {
    auto i = static_cast<size_t>(id);
    if (cls[i] >= 0) return cls[i];
    const Inst& in = ph.insts[i];
    int a[3] = {-1, -1, -1};
    for (int k = 0; k < 3; ++k) {
      if (in.args[k] < 0) continue;
      a[k] = classOf(in.args[k]);
      auto ai = static_cast<size_t>(in.args[k]);
      varying[i] = varying[i] || varying[ai];
      costly[i] = costly[i] || costly[ai];
      clean[i] = clean[i] && clean[ai];
    }
    varying[i] = varying[i] || in.kind == InstKind::LoopIndex;
    costly[i] = costly[i] || (in.kind == InstKind::Op && isTranscendental(in.op));
    if (in.kind == InstKind::Load) clean[i] = clean[i] && !written[static_cast<size_t>(in.buffer)];
    // Operand order is the lowering's (ids), not the value's: commutative ones in class order.
    if (in.kind == InstKind::IAdd || (in.kind == InstKind::Op && commutative(in.op)))
      if (a[0] > a[1]) std::swap(a[0], a[1]);
    uint64_t bits = 0;
    std::memcpy(&bits, &in.fvalue, sizeof bits);
    Key key{static_cast<int>(in.kind),
            static_cast<int>(in.dtype),
            static_cast<int>(in.op),
            a[0],
            a[1],
            a[2],
            in.buffer,
            in.acc,
            in.ivalue,
            bits};
    auto [it, fresh] = classes.emplace(key, static_cast<int>(classes.size()));
    (void)fresh;
    return cls[i] = it->second;
  };
  for (size_t i = 0; i < n; ++i) classOf(static_cast<int>(i));

  // The earliest stage computing each class: its instruction there.
  std::map<int, int> first;
  for (const Stage& st : ph.stages)
    for (int id : st.body.insts) first.emplace(cls[static_cast<size_t>(id)], id);

  std::map<int, int> slotOfProducer;
  int64_t bytes = 0;
  auto cacheable = [&](int id) {
    auto i = static_cast<size_t>(id);
    const Inst& in = ph.insts[i];
    if (in.kind != InstKind::Op || !varying[i] || !costly[i] || !clean[i]) return -1;
    auto it = first.find(cls[i]);
    if (it == first.end() || walk[static_cast<size_t>(it->second)] >= walk[i]) return -1;
    return it->second;
  };
  for (int w = 1; w <= elems; ++w) {
    const Block& b = w == elems ? ph.elems : ph.stages[static_cast<size_t>(w)].body;
    std::vector<bool> seen(n, false);
    // From the walk's roots (stores and accumulates) down; a cached value's operands are not
    // needed (unless something else of the walk reads them).
    std::function<void(int)> visit = [&](int id) {
      auto i = static_cast<size_t>(id);
      if (id < 0 || seen[i] || walk[i] != w) return;
      seen[i] = true;
      int producer = cacheable(id);
      if (producer >= 0) {
        auto it = slotOfProducer.find(producer);
        if (it == slotOfProducer.end()) {
          const ir::DType t = ph.insts[static_cast<size_t>(producer)].dtype;
          const int64_t size = t == ir::DType::F64 || t == ir::DType::I64 ? 8 : 4;
          if (bytes + size * ph.rowLength <= maxBytes) {
            bytes += size * ph.rowLength;
            it = slotOfProducer.emplace(producer, static_cast<int>(rc.slots.size())).first;
            rc.slots.push_back({producer, t});
            rc.storeSlot[static_cast<size_t>(producer)] = it->second;
          }
        }
        if (it != slotOfProducer.end()) {
          rc.loadSlot[i] = it->second;
          return;
        }
      }
      for (int a : ph.insts[i].args) visit(a);
    };
    for (int id : b.insts) {
      InstKind k = ph.insts[static_cast<size_t>(id)].kind;
      if (k == InstKind::Store || k == InstKind::Accumulate) visit(id);
    }
  }
  return rc;
}

}  // namespace stitch::lower
