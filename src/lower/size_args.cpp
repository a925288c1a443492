// Size arguments (design note in size_args.h).
#include "lower/size_args.h"

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <utility>

namespace stitch::lower {

namespace {

bool sameInst(const Inst& a, const Inst& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.op == b.op && a.args[0] == b.args[0] &&
         a.args[1] == b.args[1] && a.args[2] == b.args[2] && a.buffer == b.buffer &&
         a.acc == b.acc && a.check == b.check;
}

// Whether two lowerings of one kernel have the same structure, so that their sizes correspond
// field for field.
bool aligned(const KernelProgram& a, const KernelProgram& b) {
  if (a.phases.size() != b.phases.size() || a.params.size() != b.params.size()) return false;
  for (size_t i = 0; i < a.phases.size(); ++i) {
    const Phase& x = a.phases[i];
    const Phase& y = b.phases[i];
    if (x.reduce != y.reduce || x.insts.size() != y.insts.size() ||
        x.accs.size() != y.accs.size() || x.buffers != y.buffers || x.workers != y.workers ||
        x.stages.size() != y.stages.size())
      return false;
    for (size_t j = 0; j < x.insts.size(); ++j)
      if (!sameInst(x.insts[j], y.insts[j])) return false;
  }
  return true;
}

// Per instruction: whether its value changes along the inner loop (it reads LoopIndex).
std::vector<bool> perElement(const Phase& ph) {
  std::vector<int8_t> state(ph.insts.size(), -1);
  auto visit = [&](auto&& self, int id) -> bool {
    int8_t& s = state[static_cast<size_t>(id)];
    if (s >= 0) return s == 1;
    s = 0;  // SSA: no cycles; a guard all the same
    const Inst& in = ph.insts[static_cast<size_t>(id)];
    bool varies = in.kind == InstKind::LoopIndex;
    for (int a : in.args)
      if (a >= 0 && self(self, a)) varies = true;
    s = varies ? 1 : 0;
    return varies;
  };
  std::vector<bool> out(ph.insts.size());
  for (size_t id = 0; id < ph.insts.size(); ++id) out[id] = visit(visit, static_cast<int>(id));
  return out;
}

// Per instruction: whether a store or an accumulation uses it. The lowering leaves index math no
// operand reads (a coordinate of the domain), which LLVM deletes: a division there costs nothing,
// so its divisor can be an argument without splitting the class.
std::vector<bool> used(const Phase& ph) {
  std::vector<bool> live(ph.insts.size(), false);
  for (size_t id = ph.insts.size(); id-- > 0;) {
    const Inst& in = ph.insts[id];
    if (in.kind == InstKind::Store || in.kind == InstKind::Accumulate ||
        in.kind == InstKind::CheckIndex)
      live[id] = true;
    if (!live[id]) continue;
    for (int a : in.args)
      if (a >= 0) live[static_cast<size_t>(a)] = true;
  }
  return live;
}

// Hands out argument indices, one per distinct (value, moved value) pair.
class Arguments {
 public:
  explicit Arguments(SizeArgs& out) : out_(out) {}
  // The argument for a size with `value` here and `moved` in the moved program, or -1 when it
  // did not move.
  int operator()(int64_t value, int64_t moved) {
    if (value == moved) return -1;
    auto [it, added] = index_.try_emplace({value, moved}, static_cast<int>(out_.values.size()));
    if (added) out_.values.push_back(value);
    return it->second;
  }

 private:
  SizeArgs& out_;
  std::map<std::pair<int64_t, int64_t>, int> index_;
};

}  // namespace

ir::Bindings perturbedBindings(const ir::Bindings& b) {
  ir::Bindings out;
  int64_t i = 0;
  for (const auto& [name, size] : b) {
    ++i;
    // 0 and 1 stay: an empty axis or a size-1 axis (which broadcasts) lowers to other code, so
    // those sizes are classes of their own, with their other sizes free to move.
    out[name] = size <= 1 ? size : size + 64 * i;
  }
  return out;
}

bool markSizeArgs(KernelProgram& p, const KernelProgram& moved) {
  p.sizeArgs = SizeArgs{};
  if (!aligned(p, moved)) return false;
  SizeArgs args;
  Arguments arg(args);
  for (size_t i = 0; i < p.phases.size(); ++i) {
    const Phase& x = p.phases[i];
    const Phase& y = moved.phases[i];
    PhaseSizeArgs pa;
    pa.units = arg(x.units, y.units);
    if (!x.reduce) {
      pa.chunk = arg(x.chunk, y.chunk);
      pa.total = arg(x.total, y.total);
    } else {
      pa.rowLength = arg(x.rowLength, y.rowLength);
    }
    const std::vector<bool> varies = perElement(x);
    const std::vector<bool> live = used(x);
    pa.insts.assign(x.insts.size(), -1);
    for (size_t j = 0; j < x.insts.size(); ++j) {
      const Inst& in = x.insts[j];
      // A check's bound is a compare per element: an argument costs nothing there.
      const bool index =
          in.kind == InstKind::IMulC || in.kind == InstKind::CheckIndex ||
          (in.kind == InstKind::Const && in.dtype == ir::DType::I64) ||
          ((in.kind == InstKind::IDivC || in.kind == InstKind::IRemC) && (!varies[j] || !live[j]));
      if (index) pa.insts[j] = arg(in.ivalue, y.insts[j].ivalue);
    }
    pa.accCounts.assign(x.accs.size(), -1);
    for (size_t a = 0; a < x.accs.size(); ++a)
      pa.accCounts[a] = arg(x.accs[a].count, y.accs[a].count);
    args.phases.push_back(std::move(pa));
  }
  if (args.values.empty()) return true;  // nothing moved: every size stays compiled in
  p.sizeArgs = std::move(args);
  return true;
}

std::string sizeArgsText(const KernelProgram& p) {
  std::string out = "[";
  for (size_t k = 0; k < p.sizeArgs.values.size(); ++k)
    out += fmt::format("{}s{}={}", k ? ", " : "", k, p.sizeArgs.values[k]);
  return out + "]";
}

}  // namespace stitch::lower
