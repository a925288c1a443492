// Kernel programs as CUDA/HIP C++ (design note in cstyle_emitter.h).
#include "codegen/gpu/cstyle_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "runtime/support/error.h"
#include "runtime/support/philox.h"

namespace stitch::codegen {

using ir::DType;
using ir::OpCode;
using lower::Inst;
using lower::InstKind;

namespace {

// ---- types and literals -------------------------------------------------------------------------

std::string storageType(DType t) {
  switch (t) {
    case DType::F16:
    case DType::BF16: return "stitch::u16";
    case DType::F32: return "float";
    case DType::F64: return "double";
    case DType::I32: return "int";
    case DType::I64: return "stitch::i64";
    case DType::Bool: return "stitch::u8";
  }
  return "?";
}

std::string computeType(DType t) {
  switch (t) {
    case DType::F16:
    case DType::BF16:
    case DType::F32: return "float";
    case DType::F64: return "double";
    case DType::I32: return "int";
    case DType::I64: return "stitch::i64";
    case DType::Bool: return "bool";
  }
  return "?";
}

std::string fromStorage(DType t, const std::string& e) {
  switch (t) {
    case DType::F16: return fmt::format("stitch::ld_f16({})", e);
    case DType::BF16: return fmt::format("stitch::ld_bf16({})", e);
    case DType::Bool: return fmt::format("stitch::ld_bool({})", e);
    case DType::F32:
    case DType::F64:
    case DType::I32:
    case DType::I64: break;  // stored as computed
  }
  return e;
}

std::string toStorage(DType t, const std::string& e) {
  switch (t) {
    case DType::F16: return fmt::format("stitch::st_f16({})", e);
    case DType::BF16: return fmt::format("stitch::st_bf16({})", e);
    case DType::Bool: return fmt::format("stitch::st_bool({})", e);
    case DType::F32:
    case DType::F64:
    case DType::I32:
    case DType::I64: break;  // stored as computed
  }
  return e;
}

// An op result of dtype t, computed in f32, rounded to t as the reference rounds every op.
std::string roundTo(DType t, const std::string& e) {
  switch (t) {
    case DType::F16: return fmt::format("stitch::rnd_f16({})", e);
    case DType::BF16: return fmt::format("stitch::rnd_bf16({})", e);
    case DType::F32:
    case DType::F64:
    case DType::I32:
    case DType::I64:
    case DType::Bool: break;  // computed in their own type: nothing to round
  }
  return e;
}

std::string floatLiteral(double v, DType t) {
  bool f64 = t == DType::F64;
  if (std::isnan(v))
    return f64 ? "stitch::f64_bits(0x7ff8000000000000ull)" : "stitch::f32_bits(0x7fc00000u)";
  if (std::isinf(v)) {
    if (f64)
      return v > 0 ? "stitch::f64_bits(0x7ff0000000000000ull)"
                   : "stitch::f64_bits(0xfff0000000000000ull)";
    return v > 0 ? "stitch::f32_bits(0x7f800000u)" : "stitch::f32_bits(0xff800000u)";
  }
  // Hexadecimal literals are exact; the value is already representable in the compute type.
  return fmt::format("{:a}{}", v, f64 ? "" : "f");
}

std::string intLiteral(int64_t v, DType t) {
  if (t == DType::I32) {
    if (v == INT32_MIN) return "(-2147483647 - 1)";
    return fmt::format("{}", v);
  }
  if (v == INT64_MIN) return "(-9223372036854775807ll - 1)";
  return fmt::format("{}ll", v);
}

std::string literal(const Inst& in) {
  if (ir::isFloat(in.dtype)) return floatLiteral(in.fvalue, in.dtype);
  if (in.dtype == DType::Bool) return in.ivalue ? "true" : "false";
  // i64 constants used as indices fit in 32 bits almost always; print them narrow when they do,
  // so 32-bit index arithmetic stays 32-bit.
  if (in.dtype == DType::I64 && in.ivalue >= INT32_MIN && in.ivalue <= INT32_MAX)
    return fmt::format("{}", in.ivalue);
  return intLiteral(in.ivalue, in.dtype);
}

const char* reduceOpName(lower::ReduceOp op) {
  switch (op) {
    case lower::ReduceOp::Sum:
    case lower::ReduceOp::Mean: return "stitch::SumOp";
    case lower::ReduceOp::Max: return "stitch::MaxOp";
    case lower::ReduceOp::Min: return "stitch::MinOp";
    case lower::ReduceOp::Prod: return "stitch::ProdOp";
  }
  return "?";
}

// Float sums and means are "wide": each thread adds its running f32 sum to a double total every
// kFlushItems groups, and the lanes of a unit combine the doubles. A thread that walked a long
// row (a single row of millions of values in one block) in one f32 register would lose the
// small addends once its sum is large; the f32 fast path stays for the adds themselves.
constexpr int kFlushItems = 32;

bool isWide(const lower::Accumulator& a) {
  return ir::isFloat(a.dtype) && (a.op == lower::ReduceOp::Sum || a.op == lower::ReduceOp::Mean);
}

// The C expression of an elementwise op on argument expressions (dtypes of result and arg 0).
std::string castExpr(const std::string& a, DType from, DType to) {
  if (from == to) return a;
  std::string ct = computeType(to);
  if (ir::isFloat(from)) {
    if (ir::isFloat(to)) return roundTo(to, fmt::format("static_cast<{}>({})", ct, a));
    if (ir::isInt(to)) return fmt::format("stitch::ftoi<{}>({})", ct, a);
    return fmt::format("({} != 0)", a);  // NaN -> true, as the reference
  }
  if (from == DType::Bool) return fmt::format("static_cast<{}>({} ? 1 : 0)", ct, a);
  // From an int: through double, as the reference converts.
  if (ir::isFloat(to))
    return roundTo(to, fmt::format("static_cast<{}>(static_cast<double>({}))", ct, a));
  if (to == DType::Bool) return fmt::format("({} != 0)", a);
  return fmt::format("static_cast<{}>({})", ct, a);
}

std::string opExpr(const Inst& in, DType at, const std::vector<std::string>& a) {
  DType t = in.dtype;
  bool fl = ir::isFloat(at);
  std::string ct = computeType(at);
  auto r = [&](const std::string& e) { return roundTo(t, e); };
  auto call = [&](const char* f, int n) {
    std::string s = fmt::format("stitch::{}(", f);
    for (int k = 0; k < n; ++k) s += (k ? ", " : "") + a[static_cast<size_t>(k)];
    return s + ")";
  };
  auto icall = [&](const char* f, int n) {
    std::string s = fmt::format("stitch::{}<{}>(", f, computeType(t));
    for (int k = 0; k < n; ++k) s += (k ? ", " : "") + a[static_cast<size_t>(k)];
    return s + ")";
  };
  switch (in.op) {
    case OpCode::Neg: return fl ? r("(-(" + a[0] + "))") : icall("ineg", 1);  // a may be "-1.0f"
    case OpCode::Abs: return fl ? call("fabs_", 1) : icall("iabs", 1);
    case OpCode::Relu:
      return fl ? call("frelu", 1)
                : fmt::format("stitch::imax<{0}>({1}, {0}(0))", computeType(t), a[0]);
    case OpCode::Exp: return r(call("exp_", 1));
    case OpCode::Log: return r(call("log_", 1));
    case OpCode::Log1p: return r(call("log1p_", 1));
    case OpCode::Tanh: return r(call("tanh_", 1));
    case OpCode::Erf: return r(call("erf_", 1));
    case OpCode::Sin: return r(call("sin_", 1));
    case OpCode::Cos: return r(call("cos_", 1));
    case OpCode::Sqrt: return r(call("sqrt_", 1));
    case OpCode::Rsqrt: return r(call("rsqrt_", 1));
    case OpCode::Sigmoid: return r(call("sigmoid_", 1));
    case OpCode::Reciprocal: return r(fmt::format("({}(1) / {})", ct, a[0]));
    case OpCode::Floor: return call("floor_", 1);
    case OpCode::Ceil: return call("ceil_", 1);
    case OpCode::LogicalNot: return "(!" + a[0] + ")";
    case OpCode::Add: return fl ? r(fmt::format("({} + {})", a[0], a[1])) : icall("iadd", 2);
    case OpCode::Sub: return fl ? r(fmt::format("({} - {})", a[0], a[1])) : icall("isub", 2);
    case OpCode::Mul: return fl ? r(fmt::format("({} * {})", a[0], a[1])) : icall("imul", 2);
    case OpCode::Div: return fl ? r(fmt::format("({} / {})", a[0], a[1])) : icall("idiv", 2);
    case OpCode::Maximum: return fl ? r(call("fmaximum", 2)) : icall("imax", 2);
    case OpCode::Minimum: return fl ? r(call("fminimum", 2)) : icall("imin", 2);
    case OpCode::Pow: return r(call("pow_", 2));
    case OpCode::Eq: return fmt::format("({} == {})", a[0], a[1]);
    case OpCode::Ne: return fmt::format("({} != {})", a[0], a[1]);
    case OpCode::Lt: return fmt::format("({} < {})", a[0], a[1]);
    case OpCode::Le: return fmt::format("({} <= {})", a[0], a[1]);
    case OpCode::Gt: return fmt::format("({} > {})", a[0], a[1]);
    case OpCode::Ge: return fmt::format("({} >= {})", a[0], a[1]);
    case OpCode::LogicalAnd: return fmt::format("({} && {})", a[0], a[1]);
    case OpCode::LogicalOr: return fmt::format("({} || {})", a[0], a[1]);
    case OpCode::Select: return fmt::format("({} ? {} : {})", a[0], a[1], a[2]);
    case OpCode::Cast: return castExpr(a[0], at, t);
    case OpCode::RandomUniform: {
      // args: the flat index, seed, offset (lowering); the value is exact in t (random.cuh).
      std::string args = fmt::format(
          "static_cast<stitch::u64>({}), static_cast<stitch::u64>({}), "
          "static_cast<stitch::u64>({})",
          a[1], a[2], a[0]);
      if (t == DType::F64) return fmt::format("stitch::uniform_f64({})", args);
      return fmt::format("stitch::uniform_f32<{}>({})", uniformBits(t), args);
    }
    // Never an Op instruction: lowering turns sources and layout ops into constants, loads and
    // index arithmetic and reductions into accumulators; composites are decomposed before
    // planning. Listed (no default) so that an op added to ops.def fails to compile here.
    case OpCode::Input:
    case OpCode::Constant:
    case OpCode::Full:
    case OpCode::Iota:
    case OpCode::ReduceSum:
    case OpCode::ReduceMax:
    case OpCode::ReduceMin:
    case OpCode::ReduceMean:
    case OpCode::ReduceProd:
    case OpCode::Reshape:
    case OpCode::Transpose:
    case OpCode::BroadcastTo:
    case OpCode::Slice:
    case OpCode::Concat:
    case OpCode::Softmax:
    case OpCode::LogSoftmax:
    case OpCode::LayerNorm:
    case OpCode::RmsNorm:
    case OpCode::Gelu:
    case OpCode::Silu:
    case OpCode::Argmax:
    case OpCode::Argmin:
    case OpCode::Gather:
    case OpCode::CheckIndex: break;  // lowered to InstKind::CheckIndex
  }
  throwError(ErrorCode::Internal,
             fmt::format("gpu emitter: {} is not an elementwise op", ir::opName(in.op)));
}

// ---- dialects -----------------------------------------------------------------------------------

// What differs between CUDA and HIP at the level of the translation unit. Everything else is in
// the device templates, keyed on STITCH_TARGET_HIP.
class Dialect {
 public:
  virtual ~Dialect() = default;
  virtual std::string prelude() const = 0;
};

class CudaDialect final : public Dialect {
 public:
  std::string prelude() const override { return "// CUDA C++, compiled by NVRTC\n"; }
};

class HipDialect final : public Dialect {
 public:
  std::string prelude() const override {
    return "// HIP C++, compiled by hipRTC\n#define STITCH_TARGET_HIP 1\n";
  }
};

// ---- one phase ----------------------------------------------------------------------------------

class PhaseEmitter {
 public:
  PhaseEmitter(const lower::KernelProgram& p, const lower::Phase& ph,
               const lower::PhaseSizeArgs* sizes, const PhaseSchedule& s, const KernelSchedule& ks,
               std::string& out)
      : p_(p), ph_(ph), sizes_(sizes), s_(s), ks_(ks), out_(out) {
    idx_ = ks.index64 ? "stitch::i64" : "int";
    uidx_ = ks.index64 ? "stitch::u64" : "stitch::u32";
    outer_.assign(ph.insts.size(), false);
  }

  void emitFunction(int index, const std::string& params);

  // A size of the phase as the code reads it: `value` compiled in, or the size argument `arg`
  // (lower/size_args.h) when arg >= 0.
  std::string size(int arg, int64_t value);
  // ceil(size / d) for a compile-time d >= 1: folded when the size is compiled in.
  std::string ceilDiv(int arg, int64_t value, int64_t d);

 private:
  const Inst& inst(int id) const { return ph_.insts[static_cast<size_t>(id)]; }
  bool isIndexKind(InstKind k) const {
    return k == InstKind::UnitIndex || k == InstKind::LoopIndex || k == InstKind::IAdd ||
           k == InstKind::IMulC || k == InstKind::IDivC || k == InstKind::IRemC;
  }
  std::string name(int id) {
    const Inst& in = inst(id);
    return in.kind == InstKind::Const ? constant(id) : fmt::format("v{}", id);
  }
  // The argument of an instruction's ivalue (Const i64, IMulC, IDivC, IRemC), or -1.
  int immArg(int id) const { return sizes_ ? sizes_->insts.at(static_cast<size_t>(id)) : -1; }
  std::string constant(int id) {
    const Inst& in = inst(id);
    return immArg(id) >= 0 ? size(immArg(id), in.ivalue) : literal(in);
  }
  std::string buffer(int b) const {
    return fmt::format("p{}", ph_.buffers[static_cast<size_t>(b)]);
  }
  // CheckIndex `id` of index `k` (stitch/check.cuh; the bound may be a size argument).
  std::string checkExpr(int id, const std::string& k) {
    const Inst& in = inst(id);
    return fmt::format("stitch::check_index(stitch_status, {}, {}, {})", in.check, k,
                       size(immArg(id), in.ivalue));
  }
  std::string typeOf(int id) const {
    return isIndexKind(inst(id).kind) ? idx_ : computeType(inst(id).dtype);
  }
  void line(const std::string& s) {
    out_.append(static_cast<size_t>(indent_) * 2, ' ');
    out_ += s;
    out_ += '\n';
  }
  // The index expression `id` with the loop index replaced by `k0` (values of enclosing blocks
  // by name). Index expressions are small trees of integer instructions.
  std::string exprAt(int id, const std::string& k0);
  std::string indexExpr(int id, const std::vector<std::string>& a);
  void emitInst(int id);
  // One group of V elements starting at k0 (declared by the caller), bounded by `limit`.
  void emitGroup(const lower::Block& b, const std::string& limit);
  void partialGroup(const std::string& statement, const std::string& limit);
  void emitLoopPhase();
  void emitReducePhase();
  // wide: the stage's wide accumulators, flushed into their double totals (w<n>) as it goes.
  void emitRowWalk(const lower::Block& b, const std::vector<int>& wide = {});
  // Whether `id` is computed from index instructions and constants only (no load, no
  // accumulator): an expression exprAt can print at any position.
  bool indexOnly(int id) const;
  std::string cacheKey(int loadId);
  void planCache();

  const lower::KernelProgram& p_;
  const lower::Phase& ph_;
  const lower::PhaseSizeArgs* sizes_;  // null: every size compiled in
  std::set<int> used_;                 // the size arguments the body reads
  const PhaseSchedule& s_;
  const KernelSchedule& ks_;
  std::string& out_;
  std::string idx_, uidx_;
  int indent_ = 1;
  std::vector<bool> outer_;  // emitted in an enclosing block: referenced by name
  std::string storeGuard_;   // condition under which stores happen ("" = always)
  // Register caching (unrolled reduce phases): per load, the cache it fills or reads.
  std::map<int, int> fills_, reads_;
  std::map<int, DType> cacheType_;
};

std::string PhaseEmitter::size(int arg, int64_t value) {
  if (arg < 0) return fmt::format("{}", value);
  used_.insert(arg);
  return fmt::format("S{}", arg);
}

std::string PhaseEmitter::ceilDiv(int arg, int64_t value, int64_t d) {
  if (arg < 0) return fmt::format("{}", (value + d - 1) / d);
  if (d == 1) return size(arg, value);
  return fmt::format("(({} + {}) / {})", size(arg, value), d - 1, d);
}

std::string PhaseEmitter::indexExpr(int id, const std::vector<std::string>& a) {
  const Inst& in = inst(id);
  const int arg = immArg(id);
  switch (in.kind) {
    case InstKind::IAdd: return fmt::format("({} + {})", a[0], a[1]);
    case InstKind::IMulC: return fmt::format("({} * {})", a[0], size(arg, in.ivalue));
    // Operands of divisions are never negative: unsigned division is cheaper.
    case InstKind::IDivC:
    case InstKind::IRemC: {
      const std::string divisor = arg >= 0 ? fmt::format("static_cast<{}>({})", uidx_, size(arg, 0))
                                           : fmt::format("{}u", in.ivalue);
      return fmt::format("static_cast<{}>(static_cast<{}>({}) {} {})", idx_, uidx_, a[0],
                         in.kind == InstKind::IDivC ? '/' : '%', divisor);
    }
    case InstKind::Const:
    case InstKind::UnitIndex:
    case InstKind::LoopIndex:
    case InstKind::Load:
    case InstKind::Store:
    case InstKind::AccRead:
    case InstKind::Accumulate:
    case InstKind::Op:
    case InstKind::CheckIndex: break;
  }
  throwError(ErrorCode::Internal, "gpu emitter: not an index instruction");
}

std::string PhaseEmitter::exprAt(int id, const std::string& k0) {
  const Inst& in = inst(id);
  if (outer_[static_cast<size_t>(id)]) return name(id);
  std::vector<std::string> a;
  for (int x : in.args)
    if (x >= 0) a.push_back(exprAt(x, k0));
  switch (in.kind) {
    case InstKind::Const: return constant(id);
    case InstKind::UnitIndex: return "unit";
    case InstKind::LoopIndex: return k0;
    case InstKind::IAdd:
    case InstKind::IMulC:
    case InstKind::IDivC:
    case InstKind::IRemC: return indexExpr(id, a);
    case InstKind::Op: return opExpr(in, inst(in.args[0]).dtype, a);
    case InstKind::CheckIndex: return checkExpr(id, a[0]);
    case InstKind::Load:
    case InstKind::Store:
    case InstKind::AccRead:
    case InstKind::Accumulate: break;
  }
  throwError(ErrorCode::Internal,
             fmt::format("gpu emitter: instruction %{} is not an index expression", id));
}

void PhaseEmitter::emitInst(int id) {
  const Inst& in = inst(id);
  std::vector<std::string> a;
  for (int x : in.args)
    if (x >= 0) a.push_back(name(x));
  std::string v = fmt::format("v{}", id);
  switch (in.kind) {
    case InstKind::Const: return;  // printed inline where used
    case InstKind::UnitIndex: line(fmt::format("const {} {} = unit;", idx_, v)); return;
    case InstKind::LoopIndex: line(fmt::format("const {} {} = k;", idx_, v)); return;
    case InstKind::IAdd:
    case InstKind::IMulC:
    case InstKind::IDivC:
    case InstKind::IRemC: line(fmt::format("const {} {} = {};", idx_, v, indexExpr(id, a))); return;
    case InstKind::Load: {
      std::string ct = computeType(in.dtype);
      if (auto it = reads_.find(id); it != reads_.end()) {
        line(fmt::format("const {} {} = c{}[it * {} + v];", ct, v, it->second, s_.vec));
        return;
      }
      if (s_.vectorAccess[static_cast<size_t>(id)])
        line(fmt::format("const {} {} = {};", ct, v,
                         fromStorage(in.dtype, fmt::format("L{}[v]", id))));
      else
        line(fmt::format("const {} {} = {};", ct, v,
                         fromStorage(in.dtype, fmt::format("{}[{}]", buffer(in.buffer), a[0]))));
      if (auto it = fills_.find(id); it != fills_.end())
        line(fmt::format("c{}[it * {} + v] = {};", it->second, s_.vec, v));
      return;
    }
    case InstKind::Store: {
      std::string value = toStorage(in.dtype, a[1]);
      if (s_.vectorAccess[static_cast<size_t>(id)]) {
        line(fmt::format("W{}[v] = {};", id, value));
        return;
      }
      std::string st = fmt::format("{}[{}] = {};", buffer(in.buffer), a[0], value);
      line(storeGuard_.empty() ? st : fmt::format("if ({}) {}", storeGuard_, st));
      return;
    }
    case InstKind::AccRead:
      // The final value (double for wide accumulators), rounded once to the read's dtype.
      line(fmt::format(
          "const {0} {1} = {2};", computeType(in.dtype), v,
          roundTo(in.dtype, fmt::format("static_cast<{}>(f{})", computeType(in.dtype), in.acc))));
      return;
    case InstKind::Accumulate: {
      const lower::Accumulator& acc = ph_.accs[static_cast<size_t>(in.acc)];
      line(fmt::format("a{0} = {1}::apply(a{0}, {2});", in.acc, reduceOpName(acc.op), a[0]));
      return;
    }
    case InstKind::Op:
      line(fmt::format("const {} {} = {};", typeOf(id), v, opExpr(in, inst(in.args[0]).dtype, a)));
      return;
    case InstKind::CheckIndex:
      line(fmt::format("const {} {} = {};", typeOf(id), v, checkExpr(id, a[0])));
      return;
  }
}

// The tail of a domain or row, where a group is cut short: element by element. Unrolled, so the
// group's arrays are indexed by constants and stay in registers.
void PhaseEmitter::partialGroup(const std::string& statement, const std::string& limit) {
  line("else {");
  ++indent_;
  line("#pragma unroll");
  line(fmt::format("for (int v = 0; v < {}; ++v)", s_.vec));
  line(fmt::format("  if (k0 + v < {}) {}", limit, statement));
  --indent_;
  line("}");
}

void PhaseEmitter::emitGroup(const lower::Block& b, const std::string& limit) {
  const int V = s_.vec;
  line(fmt::format("const bool full = k0 + {} <= {};", V, limit));
  // Vector loads before the element loop, vector store buffers after it.
  std::vector<int> vstores;
  for (int id : b.insts) {
    const Inst& in = inst(id);
    if (!s_.vectorAccess[static_cast<size_t>(id)]) continue;
    if (in.kind == InstKind::Load && !reads_.count(id)) {
      std::string st = storageType(in.dtype);
      std::string base = exprAt(in.args[0], "k0");
      line(fmt::format("{} L{}[{}];", st, id, V));
      line(fmt::format("if (full) stitch::load_vec<{}>({} + {}, L{});", V, buffer(in.buffer), base,
                       id));
      partialGroup(fmt::format("L{}[v] = {}[{} + v];", id, buffer(in.buffer), base), limit);
    } else if (in.kind == InstKind::Store) {
      line(fmt::format("{} W{}[{}];", storageType(in.dtype), id, V));
      vstores.push_back(id);
    }
  }
  line("#pragma unroll");
  line(fmt::format("for (int v = 0; v < {}; ++v) {{", V));
  ++indent_;
  line(fmt::format("const {} k = k0 + v;", idx_));
  line(fmt::format("if (k < {}) {{", limit));
  ++indent_;
  for (int id : b.insts) emitInst(id);
  --indent_;
  line("}");
  --indent_;
  line("}");
  for (int id : vstores) {
    const Inst& in = inst(id);
    std::string base = exprAt(in.args[0], "k0");
    std::string guard = storeGuard_.empty() ? "" : fmt::format("if ({}) ", storeGuard_);
    line(fmt::format("{}{{", guard));
    ++indent_;
    line(fmt::format("if (full) stitch::store_vec<{}>({} + {}, W{});", V, buffer(in.buffer), base,
                     id));
    partialGroup(fmt::format("{}[{} + v] = W{}[v];", buffer(in.buffer), base, id), limit);
    --indent_;
    line("}");
  }
}

void PhaseEmitter::emitLoopPhase() {
  const int V = s_.vec;
  storeGuard_.clear();
  line("(void)smem;");
  line(
      fmt::format("for ({0} g = static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x;; g += "
                  "static_cast<{0}>(gridDim.x) * {1}) {{",
                  idx_, ks_.block));
  ++indent_;
  const std::string total = size(sizes_ ? sizes_->total : -1, ph_.total);
  line(fmt::format("const {} k0 = g * {};", idx_, V));
  line(fmt::format("if (k0 >= {}) break;", total));
  emitGroup(ph_.elems, total);
  --indent_;
  line("}");
}

bool PhaseEmitter::indexOnly(int id) const {
  const Inst& in = inst(id);
  if (outer_[static_cast<size_t>(id)] || in.kind == InstKind::Const) return true;
  if (!isIndexKind(in.kind) && in.kind != InstKind::Op) return false;
  for (int x : in.args)
    if (x >= 0 && !indexOnly(x)) return false;
  return true;
}

std::string PhaseEmitter::cacheKey(int loadId) {
  const Inst& in = inst(loadId);
  // A gathered load (its index read from memory) is not a position of the row walk: not cached.
  if (!indexOnly(in.args[0])) return {};
  return fmt::format("{}@{}", in.buffer, exprAt(in.args[0], "k"));
}

// Loads repeated across the row walks (stages, then the element walk) of an unrolled reduce
// phase: the first walk keeps what it loads in registers (c<n>[items * V]), later walks read it.
void PhaseEmitter::planCache() {
  if (!s_.unrolled) return;
  std::vector<const lower::Block*> walks;
  for (const lower::Stage& st : ph_.stages) walks.push_back(&st.body);
  walks.push_back(&ph_.elems);
  std::map<std::string, std::pair<int, size_t>> first;  // key -> (load id, walk)
  std::map<std::string, int> cacheOf;
  for (size_t w = 0; w < walks.size(); ++w) {
    for (int id : walks[w]->insts) {
      if (inst(id).kind != InstKind::Load) continue;
      std::string key = cacheKey(id);
      if (key.empty()) continue;
      auto it = first.find(key);
      if (it == first.end()) {
        first.emplace(key, std::make_pair(id, w));
        continue;
      }
      if (it->second.second == w) continue;
      int c;
      if (auto ci = cacheOf.find(key); ci != cacheOf.end()) {
        c = ci->second;
      } else {
        c = static_cast<int>(cacheOf.size());
        cacheOf.emplace(key, c);
        fills_[it->second.first] = c;
        cacheType_[c] = inst(id).dtype;
      }
      reads_[id] = c;
    }
  }
}

void PhaseEmitter::emitRowWalk(const lower::Block& b, const std::vector<int>& wide) {
  const int V = s_.vec;
  std::string it = s_.unrolled ? "int" : idx_;
  const int rowArg = sizes_ ? sizes_->rowLength : -1;
  const std::string rowLength = size(rowArg, ph_.rowLength);
  // An unrolled walk's trip count is compiled in (a decision of the class); a loop's follows the
  // row length.
  const std::string items = s_.unrolled ? fmt::format("{}", s_.items)
                                        : ceilDiv(rowArg, ph_.rowLength, int64_t{s_.lanes} * V);
  // Wide accumulators of a long walk: chunks of kFlushItems groups, each chunk's f32 sums added
  // to the doubles after it (a nested loop: a test for the flush inside the walk made ptxas
  // spill).
  const bool chunked = !s_.unrolled && !wide.empty() && s_.items > kFlushItems;
  if (chunked) {
    line(fmt::format("for ({0} it0 = 0; it0 < {1}; it0 += {2}) {{", idx_, items, kFlushItems));
    ++indent_;
    // Bounded unrolling: hipRTC unrolls a loop of at most 32 trips fully and spills.
    line("#pragma unroll 4");
    line(fmt::format("for ({0} it = it0; it < it0 + {1} && it < {2}; ++it) {{", it, kFlushItems,
                     items));
  } else {
    if (s_.unrolled) line("#pragma unroll");
    line(fmt::format("for ({0} it = 0; it < {1}; ++it) {{", it, items));
  }
  ++indent_;
  line(fmt::format("const {0} k0 = (static_cast<{0}>(it) * {1} + lane) * {2};", idx_, s_.lanes, V));
  if (!s_.unrolled) line(fmt::format("if (k0 >= {}) break;", rowLength));
  emitGroup(b, rowLength);
  --indent_;
  line("}");
  for (int a : wide) line(fmt::format("w{0} += static_cast<double>(a{0});", a));
  if (chunked) {
    for (int a : wide) line(fmt::format("a{} = 0;", a));
    --indent_;
    line("}");
  }
}

void PhaseEmitter::emitReducePhase() {
  const int UX = s_.unitsPerBlock, TK = s_.lanes;
  if (ph_.units == 0) {
    // No rows (an empty kept extent): nothing to write, and no row to read (the inactive lanes
    // below would compute on row -1).
    line("(void)smem;");
    return;
  }
  line("const int tid = threadIdx.x;");
  line(s_.rowMajor ? fmt::format("const int lane = tid % {};", TK)
                   : fmt::format("const int lane = tid / {};", UX));
  line(s_.rowMajor ? fmt::format("const int ux = tid / {};", TK)
                   : fmt::format("const int ux = tid % {};", UX));
  const int unitsArg = sizes_ ? sizes_->units : -1;
  const std::string units = size(unitsArg, ph_.units);
  // The virtual blocks: one per UX unit slots (the launch's grid may be smaller: blocks stride).
  const std::string blocks =
      ph_.workers ? fmt::format("{}", s_.blocks) : ceilDiv(unitsArg, ph_.units, UX);
  line(fmt::format("for ({0} vb = blockIdx.x; vb < {1}; vb += gridDim.x) {{", idx_, blocks));
  ++indent_;
  if (ph_.workers == 0) {
    line(fmt::format("{} unit = vb * {} + ux;", idx_, UX));
    line(fmt::format("const bool active = unit < {};", units));
  } else {
    // Unit slot w is worker w: units w, w + W, ... in order, or with workerBlocks the units
    // w * per + trip (kernel_program.h). Every thread of the block makes the same number of
    // trips (the row reductions synchronize the block).
    const int64_t W = ph_.workers;
    const std::string per = ceilDiv(unitsArg, ph_.units, W);
    line(fmt::format("const {} w = vb * {} + ux;", idx_, UX));
    line(fmt::format("for ({0} trip = 0; trip < {1}; ++trip) {{", idx_, per));
    ++indent_;
    line(ph_.workerBlocks ? fmt::format("{} unit = w * {} + trip;", idx_, per)
                          : fmt::format("{} unit = w + trip * {};", idx_, W));
    line(fmt::format("const bool active = w < {} && unit < {};", W, units));
  }
  // Lanes past the last unit compute on the last one (in bounds) and store nothing.
  line(unitsArg >= 0 ? fmt::format("if (!active) unit = {} - 1;", units)
                     : fmt::format("if (!active) unit = {};", ph_.units - 1));
  storeGuard_ = "active";
  for (int id : ph_.pre.insts) {
    emitInst(id);
    outer_[static_cast<size_t>(id)] = true;
  }
  for (int id : ph_.post.insts) outer_[static_cast<size_t>(id)] = true;  // for cache keys
  planCache();
  for (int id : ph_.post.insts) outer_[static_cast<size_t>(id)] = false;
  for (auto [c, t] : cacheType_)
    line(fmt::format("{} c{}[{}];", computeType(t), c, s_.items * s_.vec));
  for (size_t si = 0; si < ph_.stages.size(); ++si) {
    const lower::Stage& st = ph_.stages[si];
    std::vector<int> wide;
    for (int a : st.accs) {
      const lower::Accumulator& acc = ph_.accs[static_cast<size_t>(a)];
      std::string ct = computeType(acc.dtype);
      line(fmt::format("{0} a{1} = {2}::identity<{0}>();", ct, a, reduceOpName(acc.op)));
      if (isWide(acc)) {
        line(fmt::format("double w{} = 0;", a));
        wide.push_back(a);
      }
    }
    emitRowWalk(st.body, wide);
    for (int a : st.accs) {
      const lower::Accumulator& acc = ph_.accs[static_cast<size_t>(a)];
      // Wide accumulators combine their lanes' totals in double.
      std::string ct = isWide(acc) ? "double" : computeType(acc.dtype);
      std::string var = fmt::format("{}{}", isWide(acc) ? "w" : "a", a);
      line(fmt::format(
          "{0} = stitch::unit_reduce<{1}, {2}, {3}, {4}>({0}, reinterpret_cast<{5}*>(smem));", var,
          reduceOpName(acc.op), s_.rowMajor ? "true" : "false", UX, TK, ct));
      std::string fin = var;
      if (acc.op == lower::ReduceOp::Mean)
        fin = fmt::format(
            "{} / static_cast<{}>({})", var, ct,
            size(sizes_ ? sizes_->accCounts.at(static_cast<size_t>(a)) : -1, acc.count));
      line(fmt::format("const {} f{} = {};", ct, a, fin));
    }
  }
  storeGuard_ = "active && lane == 0";
  for (int id : ph_.post.insts) {
    emitInst(id);
    outer_[static_cast<size_t>(id)] = true;
  }
  storeGuard_ = "active";
  if (!ph_.elems.insts.empty()) emitRowWalk(ph_.elems);
  if (ph_.workers != 0) {
    --indent_;
    line("}");
  }
  --indent_;
  line("}");
}

void PhaseEmitter::emitFunction(int index, const std::string& params) {
  out_ += fmt::format("static STITCH_DEVICE void stitch_phase{}({}, unsigned char* smem) {{\n",
                      index, params);
  const size_t body = out_.size();
  if (ph_.reduce) emitReducePhase();
  else emitLoopPhase();
  // The size arguments the body read, as index-typed locals (the kernel takes them as i64).
  std::string locals;
  for (int k : used_)
    locals += fmt::format("  const {0} S{1} = static_cast<{0}>(s{1});\n", idx_, k);
  out_.insert(body, locals);
  out_ += "}\n\n";
}

}  // namespace

std::vector<std::string_view> deviceIncludes(const lower::KernelProgram& p,
                                             const KernelSchedule& ks) {
  bool reduce = false, vec = false, random = false, check = false;
  for (size_t i = 0; i < p.phases.size(); ++i) {
    const PhaseSchedule& s = ks.phases[i];
    reduce = reduce || s.reduce;
    vec = vec ||
          std::find(s.vectorAccess.begin(), s.vectorAccess.end(), true) != s.vectorAccess.end();
    for (const Inst& in : p.phases[i].insts) {
      random = random || (in.kind == InstKind::Op && in.op == OpCode::RandomUniform);
      check = check || in.kind == InstKind::CheckIndex;
    }
  }
  // math.cuh (with types.cuh) is in every kernel: conversions, rounding and the op semantics.
  std::vector<std::string_view> headers = {"stitch/math.cuh"};
  if (reduce) headers.push_back("stitch/reduce.cuh");
  if (vec) headers.push_back("stitch/vec.cuh");
  if (random) headers.push_back("stitch/random.cuh");
  if (check) headers.push_back("stitch/check.cuh");
  if (p.phases.size() > 1) headers.push_back("stitch/grid.cuh");  // stitch_all's barrier
  return headers;
}

GpuKernelSource emitGpuKernel(const lower::KernelProgram& p, const GpuTarget& target,
                              const GpuEmitOptions& options) {
  GpuKernelSource r;
  r.schedule = scheduleKernel(p, target, options.aligned);
  const KernelSchedule& ks = r.schedule;
  std::unique_ptr<Dialect> dialect;
  if (target.dialect == "hip") dialect = std::make_unique<HipDialect>();
  else dialect = std::make_unique<CudaDialect>();

  std::vector<bool> written(p.params.size(), false);
  for (const lower::Phase& ph : p.phases)
    for (size_t b = static_cast<size_t>(ph.numInputs); b < ph.buffers.size(); ++b)
      written[static_cast<size_t>(ph.buffers[b])] = true;
  std::string params, args;
  for (size_t i = 0; i < p.params.size(); ++i) {
    params += fmt::format("{}{}{}* __restrict__ p{}", i ? ", " : "", written[i] ? "" : "const ",
                          storageType(p.params[i].dtype), i);
    args += fmt::format("{}p{}", i ? ", " : "", i);
  }
  if (p.params.empty()) {
    params = "int unused";
    args = "0";
  }
  // A program with index checks takes their status words next (stitch/check.cuh).
  if (!p.checks.empty()) {
    params += ", stitch::i64* __restrict__ stitch_status";
    args += ", stitch_status";
  }
  // Size arguments (lower/size_args.h) follow the buffers, by value. A 32-bit kernel's sizes fit
  // in 32 bits: its schedule chose 32-bit indices for these very values.
  const lower::SizeArgs& sizes = p.sizeArgs;
  for (size_t k = 0; k < sizes.values.size(); ++k) {
    STITCH_INTERNAL(ks.index64 || (sizes.values[k] >= INT32_MIN && sizes.values[k] <= INT32_MAX),
                    "size argument {} = {} in a kernel with 32-bit indices", k, sizes.values[k]);
    params += fmt::format(", const stitch::i64 s{}", k);
    args += fmt::format(", s{}", k);
  }

  std::string& out = r.source;
  out += dialect->prelude();
  out += fmt::format("// {} phase(s), {} threads per block, {}-bit indices, {}\n", p.phases.size(),
                     ks.block, ks.index64 ? 64 : 32, ks.aligned ? "16-byte aligned" : "unaligned");
  for (std::string_view h : deviceIncludes(p, ks)) out += fmt::format("#include \"{}\"\n", h);
  out += "\n";
  for (size_t i = 0; i < p.phases.size(); ++i) {
    const PhaseSchedule& s = ks.phases[i];
    const lower::Phase& ph = p.phases[i];
    const lower::PhaseSizeArgs* pa = sizes.phases.empty() ? nullptr : &sizes.phases.at(i);
    // Sizes read as arguments are named, not printed: every signature of a shape class prints
    // this same text (the cache key is the text, target/keys.h).
    auto sz = [&](int arg, int64_t value) {
      return arg >= 0 ? fmt::format("s{}", arg) : fmt::format("{}", value);
    };
    out += fmt::format(
        "// phase {} ({}): {}\n", i, ph.name,
        !s.reduce
            ? fmt::format("loop over {} elements, {} per group", sz(pa ? pa->total : -1, ph.total),
                          s.vec)
            : fmt::format(
                  "{} units of {}, {} per block, {} lanes each ({}), {}{} per lane{}",
                  sz(pa ? pa->units : -1, ph.units), sz(pa ? pa->rowLength : -1, ph.rowLength),
                  s.unitsPerBlock, s.lanes, s.rowMajor ? "row" : "column tile",
                  s.unrolled || !pa || pa->rowLength < 0 ? fmt::format("{} groups of ", s.items)
                                                         : std::string("groups of "),
                  s.vec, s.unrolled ? ", unrolled" : ""));
    PhaseEmitter(p, ph, pa, s, ks, out).emitFunction(static_cast<int>(i), params);
  }
  int smemWords = std::max(1, (ks.sharedBytes + 7) / 8);
  auto entry = [&](const std::string& name, const std::string& extra,
                   const std::vector<size_t>& phases) {
    out += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}{}) {{\n", ks.block,
                       name, params, extra);
    out += fmt::format("  __shared__ double smem[{}];\n", smemWords);
    for (size_t k = 0; k < phases.size(); ++k) {
      if (k) out += "  stitch::grid_barrier(stitch_bar);\n";
      out += fmt::format("  stitch_phase{}({}, reinterpret_cast<unsigned char*>(smem));\n",
                         phases[k], args);
    }
    out += "}\n\n";
  };
  std::vector<size_t> all;
  for (size_t i = 0; i < p.phases.size(); ++i) {
    std::string name = fmt::format("stitch_p{}", i);
    entry(name, "", {i});
    r.phases.push_back(GpuLaunch{name, ks.phases[i].blocks, ks.block, smemWords * 8});
    all.push_back(i);
  }
  if (p.phases.size() > 1) {
    entry("stitch_all", ", stitch::u32* __restrict__ stitch_bar", all);
    int64_t grid = 1;
    for (const GpuLaunch& l : r.phases) grid = std::max(grid, l.grid);
    r.cooperative = GpuLaunch{"stitch_all", grid, ks.block, smemWords * 8};
  }
  return r;
}

}  // namespace stitch::codegen
