// Properties of a host phase's walks for tiling them (design note in tile_forms.h).
#include "lower/tile_forms.h"

#include <cstdint>
#include <exception>
#include <functional>
#include <numeric>

namespace stitch::lower {

bool isWide(const Accumulator& a) {
  return ir::isFloat(a.dtype) && (a.op == ReduceOp::Sum || a.op == ReduceOp::Mean);
}

bool contiguousWalk(const Phase& ph, const Stage& st) {
  try {
    for (int id : st.body.insts) {
      const Inst& in = ph.insts[static_cast<size_t>(id)];
      if (in.kind != InstKind::Load) continue;
      int64_t step = evalIndex(ph, in.args[0], 0, 1) - evalIndex(ph, in.args[0], 0, 0);
      if (step != 0 && step != 1) return false;
    }
  } catch (const std::exception&) {
    return false;  // an index evalIndex does not know: treated as strided
  }
  return true;
}

bool isIndexKind(InstKind k) {
  return k == InstKind::UnitIndex || k == InstKind::LoopIndex || k == InstKind::IAdd ||
         k == InstKind::IMulC || k == InstKind::IDivC || k == InstKind::IRemC;
}

// Instructions are a DAG whose ids need not be in order (passes such as split_rows append index
// arithmetic), so forms are computed depth first from the operands.
std::optional<std::vector<IndexForm>> tileForms(const Phase& ph, int64_t T, InstKind varying) {
  const size_t n = ph.insts.size();
  std::vector<IndexForm> f(n);
  std::vector<uint8_t> state(n, 0);  // 0 new, 1 in progress, 2 done
  std::function<bool(int)> form = [&](int id) -> bool {
    if (id < 0 || static_cast<size_t>(id) >= n || state[static_cast<size_t>(id)] == 1) return false;
    if (state[static_cast<size_t>(id)] == 2) return true;
    state[static_cast<size_t>(id)] = 1;
    const Inst& in = ph.insts[static_cast<size_t>(id)];
    for (int a : in.args)
      if (a >= 0 && !form(a)) return false;
    // An operand of index arithmetic: its form, or (0, 1) for a value the tile's units share;
    // false for an opaque one.
    auto operand = [&](int a, IndexForm& out) {
      out = f[static_cast<size_t>(a)];
      const InstKind k = ph.insts[static_cast<size_t>(a)].kind;
      if (out.opaque) return false;
      if (isIndexKind(k) || k == InstKind::Const) return true;
      if (out.variant) return false;  // a per-unit load or op inside index arithmetic
      out = IndexForm{0, 1, false};
      return true;
    };
    IndexForm& r = f[static_cast<size_t>(id)];
    const IndexForm opaque{0, 1, true, true};
    IndexForm x, y;
    switch (in.kind) {
      case InstKind::Const:
        r = {0, ir::isInt(in.dtype) ? (in.ivalue < 0 ? -in.ivalue : in.ivalue) : 1, false};
        break;
      case InstKind::UnitIndex:
      case InstKind::LoopIndex:
        r = in.kind == varying ? IndexForm{1, T, true} : IndexForm{0, 1, false};
        break;
      case InstKind::IAdd:
        r = opaque;
        if (!operand(in.args[0], x) || !operand(in.args[1], y)) break;
        if (__builtin_add_overflow(x.slope, y.slope, &r.slope)) {
          r = opaque;
          break;
        }
        r = {r.slope, std::gcd(x.divisor, y.divisor), false};
        break;
      case InstKind::IMulC: {
        r = opaque;
        if (!operand(in.args[0], x)) break;
        int64_t m = in.ivalue < 0 ? -in.ivalue : in.ivalue, slope = 0, divisor = 0;
        if (__builtin_mul_overflow(x.slope, in.ivalue, &slope)) break;
        // Any divisor of B * m will do: keep g when g * m overflows.
        if (__builtin_mul_overflow(x.divisor, m, &divisor)) divisor = x.divisor;
        r = {slope, divisor, false};
        break;
      }
      case InstKind::IDivC:
      case InstKind::IRemC: {
        r = opaque;
        int64_t c = in.ivalue;
        const bool div = in.kind == InstKind::IDivC;
        const Inst& arg = ph.insts[static_cast<size_t>(in.args[0])];
        if (div && f[static_cast<size_t>(in.args[0])].opaque && arg.kind == InstKind::IDivC &&
            arg.ivalue > 0) {
          // (y / a) / c = y / (a c): the form of y's quotient by a c.
          if (__builtin_mul_overflow(arg.ivalue, c, &c) || !operand(arg.args[0], x)) break;
        } else if (!operand(in.args[0], x)) {
          break;
        }
        if (c <= 0) break;
        if (x.slope == 0) {
          r.slope = 0;
          r.opaque = false;
          if (div) r.divisor = x.divisor == 0 ? 0 : (x.divisor % c == 0 ? x.divisor / c : 1);
          else r.divisor = std::gcd(x.divisor, c);
          break;
        }
        // B and every multiple of c are multiples of h = gcd(g, c), so no multiple of c lies in
        // (B, B + s (T - 1)] when s (T - 1) < h: the quotient is B / c and the remainder
        // B % c + s j, with B % c a multiple of h (0 when c divides g).
        const int64_t h = std::gcd(x.divisor, c);
        if (x.slope < 0 || x.slope > (h - 1) / std::max<int64_t>(T - 1, 1)) break;
        const bool cDividesB = h == c;
        if (div) r = {0, cDividesB ? (x.divisor == 0 ? 0 : x.divisor / c) : 1, false};
        else r = {x.slope, cDividesB ? 0 : h, true};
        break;
      }
      case InstKind::Load:
      case InstKind::Store:
        x = f[static_cast<size_t>(in.args[0])];
        r.variant = x.slope != 0 || x.variant;
        break;
      case InstKind::AccRead: r.variant = true; break;
      case InstKind::Accumulate: break;
      case InstKind::Op:
      case InstKind::CheckIndex:
        for (int a : in.args)
          if (a >= 0) r.variant = r.variant || f[static_cast<size_t>(a)].variant;
        break;
    }
    if (isIndexKind(in.kind)) r.variant = r.slope != 0 || r.opaque;
    state[static_cast<size_t>(id)] = 2;
    return true;
  };
  // Only what stores and accumulators use needs a form: the lowering leaves index math it did
  // not use (a coordinate no operand reads), which LLVM deletes.
  std::vector<bool> live(n, false);
  std::function<void(int)> use = [&](int id) {
    if (id < 0 || static_cast<size_t>(id) >= n || live[static_cast<size_t>(id)]) return;
    live[static_cast<size_t>(id)] = true;
    for (int a : ph.insts[static_cast<size_t>(id)].args) use(a);
  };
  std::vector<const Block*> blocks = {&ph.pre, &ph.post, &ph.elems};
  for (const Stage& st : ph.stages) blocks.push_back(&st.body);
  for (const Block* b : blocks)
    for (int id : b->insts) {
      InstKind k = ph.insts[static_cast<size_t>(id)].kind;
      if (k == InstKind::Store || k == InstKind::Accumulate || k == InstKind::CheckIndex) use(id);
    }
  for (const Block* b : blocks)
    for (int id : b->insts) {
      if (!live[static_cast<size_t>(id)]) continue;
      if (!form(id)) return std::nullopt;
      const Inst& in = ph.insts[static_cast<size_t>(id)];
      if ((in.kind == InstKind::Load || in.kind == InstKind::Store) &&
          f[static_cast<size_t>(in.args[0])].opaque)
        return std::nullopt;  // a gather in every tile: nothing to gain
    }
  return f;
}

std::optional<Block> elemsDependencies(const Phase& ph) {
  std::vector<bool> own(ph.insts.size(), false), post(ph.insts.size(), false);
  for (const Block* b : {&ph.pre, &ph.elems})
    for (int id : b->insts) own[static_cast<size_t>(id)] = true;
  for (int id : ph.post.insts) post[static_cast<size_t>(id)] = true;
  std::vector<bool> needed(ph.insts.size(), false);
  std::function<bool(int)> need = [&](int a) {
    if (a < 0 || own[static_cast<size_t>(a)] || needed[static_cast<size_t>(a)]) return true;
    const Inst& in = ph.insts[static_cast<size_t>(a)];
    if (!post[static_cast<size_t>(a)] || !(isIndexKind(in.kind) || in.kind == InstKind::Const))
      return false;
    needed[static_cast<size_t>(a)] = true;
    for (int b : in.args)
      if (!need(b)) return false;
    return true;
  };
  for (int id : ph.elems.insts) {
    const Inst& in = ph.insts[static_cast<size_t>(id)];
    if (in.kind == InstKind::AccRead) return std::nullopt;
    for (int a : in.args)
      if (!need(a)) return std::nullopt;
  }
  Block deps;
  for (int id : ph.post.insts)
    if (needed[static_cast<size_t>(id)]) deps.insts.push_back(id);
  return deps;
}

InstKind tiledIndex(HostTiling tiling) {
  return tiling == HostTiling::Column ? InstKind::UnitIndex : InstKind::LoopIndex;
}

}  // namespace stitch::lower
