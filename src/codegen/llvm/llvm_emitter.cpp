// KernelProgram -> LLVM IR (contract in llvm_emitter.h).
#include "codegen/llvm/llvm_emitter.h"

#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "codegen/llvm/inline_math.h"
#include "lower/row_cache.h"
#include "lower/tile_forms.h"
#include "runtime/cpu/math_library.h"
#include "runtime/cpu/streaming_stores.h"
#include "runtime/support/error.h"
#include "runtime/support/philox.h"

namespace stitch::codegen {

using ir::DType;
using ir::OpCode;
using lower::contiguousWalk;
using lower::IndexForm;
using lower::Inst;
using lower::InstKind;
using lower::isIndexKind;
using lower::isWide;
using lower::kContiguousBlock;
using lower::kStridedBlock;

namespace {

// Next-row prefetch (see PhaseEmitter::prefetchNext; which loads: Phase::host.prefetched):
// prefetched this many row positions at a time during the second walk.
constexpr int64_t kPrefetchBlock = 256;
constexpr int64_t kCacheLine = 64;

// Column tiles (Phase::host, HostTiling::Column). A column or middle-axis reduction gives each
// unit a walk down memory with a large stride; in a column tile, a tile of adjacent units walks
// the rows together, the inner loop over the tile's units reading contiguous memory (vectorized)
// into per-unit accumulator arrays. Each unit keeps the blocks of the unit-at-a-time loop (512
// elements summed in the compute type, then into an f64 total), summed in row order within a
// block where that loop kept several partial sums in vector lanes. The tile's code computes
// index arithmetic once per tile at its first unit t and gives each use the value at unit t + j
// as B + slope * j: the forms lower/tile_forms.h proves, for the tile the schedule chose. Element
// and row tiles walk their elements and row positions the same way.

class PhaseEmitter {
 public:
  // `args`: the phase's size arguments (lower/size_args.h), or null when every size is compiled
  // in; `numArgs` of the program's.
  // `rowMultiple` > 1: the function is only called when the row-length argument is a multiple
  // of it, and reads it as one (see kRowMultiple).
  PhaseEmitter(llvm::Module& m, const lower::Phase& ph, const lower::PhaseSizeArgs* args,
               size_t numArgs, int64_t rowMultiple = 1)
      : C_(m.getContext()),
        M_(m),
        B_(C_),
        ph_(ph),
        args_(args),
        numArgs_(numArgs),
        rowMultiple_(rowMultiple) {}

  void emit(const std::string& name,
            llvm::GlobalValue::LinkageTypes linkage = llvm::Function::ExternalLinkage);

 private:
  llvm::Type* ctype(DType t) {
    switch (t) {
      case DType::F16:
      case DType::BF16:
      case DType::F32: return B_.getFloatTy();
      case DType::F64: return B_.getDoubleTy();
      case DType::I32: return B_.getInt32Ty();
      case DType::I64: return B_.getInt64Ty();
      case DType::Bool: return B_.getInt1Ty();
    }
    return nullptr;
  }
  llvm::Type* mtype(DType t) {
    switch (t) {
      case DType::F16:
      case DType::BF16: return B_.getInt16Ty();
      case DType::Bool: return B_.getInt8Ty();
      case DType::F32:
      case DType::F64:
      case DType::I32:
      case DType::I64: break;  // stored as computed
    }
    return ctype(t);
  }
  DType dtypeOf(int id) const { return ph_.insts[static_cast<size_t>(id)].dtype; }
  // An operand's value: in a column tile, an index instruction's value at the current unit
  // (B + slope * j); ix() is the value at the tile's first unit, which index arithmetic uses.
  llvm::Value* val(int id) const {
    llvm::Value* j = valsJ_.empty() ? nullptr : valsJ_[static_cast<size_t>(id)];
    return j ? j : vals_[static_cast<size_t>(id)];
  }
  llvm::Value* ix(int id) const { return vals_[static_cast<size_t>(id)]; }
  llvm::Value* i64(int64_t v) { return B_.getInt64(static_cast<uint64_t>(v)); }
  // A size as a value: argument `arg`'s (loaded in the entry block) or the constant `v`. Sizes
  // are only read here where the code uses them as values; decisions keep reading the fields,
  // and come out in the code (size_args.h).
  llvm::Value* size(int64_t v, int arg) {
    return arg < 0 ? i64(v) : argVals_[static_cast<size_t>(arg)];
  }
  llvm::Value* units() { return size(ph_.units, args_ ? args_->units : -1); }
  llvm::Value* rowLength() { return size(ph_.rowLength, args_ ? args_->rowLength : -1); }
  // An instruction's immediate (Const i64, IMulC, IDivC, IRemC).
  llvm::Value* imm(int id) {
    const Inst& in = ph_.insts[static_cast<size_t>(id)];
    return size(in.ivalue, args_ ? args_->insts[static_cast<size_t>(id)] : -1);
  }

  llvm::Value* intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args) {
    return B_.CreateIntrinsic(id, {args[0]->getType()}, args);
  }
  // A call to libm's `base` (runtime/cpu/math_library.h) at the type of args[0].
  llvm::Value* math(const char* base, std::vector<llvm::Value*> args) {
    llvm::Type* t = args[0]->getType();
    std::vector<llvm::Type*> params(args.size(), t);
    llvm::FunctionCallee f = M_.getOrInsertFunction(rt::cpu::mathScalarName(base, t->isFloatTy()),
                                                    llvm::FunctionType::get(t, params, false));
    // Pure (we never read errno): the loop vectorizer may widen the call, to the SLEEF vector
    // function the JIT maps it to.
    if (auto* fn = llvm::dyn_cast<llvm::Function>(f.getCallee())) {
      fn->setDoesNotAccessMemory();
      fn->setDoesNotThrow();
      fn->setWillReturn();
    }
    llvm::CallInst* call = B_.CreateCall(f, args);
    call->setDoesNotAccessMemory();
    return call;
  }
  // e^a: inline for f32 (codegen/llvm/inline_math.h), libm's exp for f64.
  llvm::Value* exp(llvm::Value* a) {
    return a->getType()->isFloatTy() ? emitExpF32(B_, a) : math("exp", {a});
  }
  // Rounds an f32 compute value to f16/bf16 (nearest even) and back; identity for other types.
  llvm::Value* round(llvm::Value* v, DType t) {
    if (t == DType::F16)
      return B_.CreateFPExt(B_.CreateFPTrunc(v, B_.getHalfTy()), B_.getFloatTy());
    if (t == DType::BF16) return fromBf16Bits(bf16Bits32(v));
    return v;
  }
  // The f32 value of bf16 `bits` (in the low 16 bits of an i32), remembered as exact in bf16.
  llvm::Value* fromBf16Bits(llvm::Value* bits) {
    llvm::Value* f = B_.CreateBitCast(B_.CreateShl(bits, 16), B_.getFloatTy());
    exactBf16_[f] = bits;
    return f;
  }
  // bf16 bits (in the low 16 bits of an i32) of an f32 value, round to nearest even.
  llvm::Value* bf16Bits32(llvm::Value* v) {
    if (auto it = exactBf16_.find(v); it != exactBf16_.end()) return it->second;
    llvm::Value* bits = B_.CreateBitCast(v, B_.getInt32Ty());
    llvm::Value* lsb = B_.CreateAnd(B_.CreateLShr(bits, 16), 1);
    llvm::Value* rounded =
        B_.CreateLShr(B_.CreateAdd(B_.CreateAdd(bits, B_.getInt32(0x7FFF)), lsb), 16);
    llvm::Value* quiet = B_.CreateLShr(B_.CreateOr(bits, B_.getInt32(0x00400000)), 16);
    llvm::Value* isNan = B_.CreateFCmpUNO(v, v);
    return B_.CreateSelect(isNan, quiet, rounded);
  }
  llvm::Value* load(const Inst& in) {
    llvm::Value* p =
        B_.CreateGEP(mtype(in.dtype), bufs_[static_cast<size_t>(in.buffer)], val(in.args[0]));
    llvm::Value* raw = B_.CreateLoad(mtype(in.dtype), p);
    switch (in.dtype) {
      case DType::F16:
        return B_.CreateFPExt(B_.CreateBitCast(raw, B_.getHalfTy()), B_.getFloatTy());
      case DType::BF16: return fromBf16Bits(B_.CreateZExt(raw, B_.getInt32Ty()));
      case DType::Bool: return B_.CreateICmpNE(raw, B_.getInt8(0));
      case DType::F32:
      case DType::F64:
      case DType::I32:
      case DType::I64: break;  // stored as computed
    }
    return raw;
  }
  void store(const Inst& in) {
    llvm::Value* v = val(in.args[1]);
    switch (in.dtype) {
      case DType::F16:
        v = B_.CreateBitCast(B_.CreateFPTrunc(v, B_.getHalfTy()), B_.getInt16Ty());
        break;
      case DType::BF16: v = B_.CreateTrunc(bf16Bits32(v), B_.getInt16Ty()); break;
      case DType::Bool: v = B_.CreateZExt(v, B_.getInt8Ty()); break;
      case DType::F32:
      case DType::F64:
      case DType::I32:
      case DType::I64: break;  // stored as computed
    }
    llvm::Value* p =
        B_.CreateGEP(mtype(in.dtype), bufs_[static_cast<size_t>(in.buffer)], val(in.args[0]));
    B_.CreateStore(v, p);
  }
  llvm::Value* constant(int id) {
    const Inst& in = ph_.insts[static_cast<size_t>(id)];
    llvm::Type* t = ctype(in.dtype);
    if (ir::isFloat(in.dtype)) return llvm::ConstantFP::get(t, in.fvalue);
    if (in.dtype == DType::Bool) return B_.getInt1(in.ivalue != 0);
    if (in.dtype == DType::I64) return imm(id);
    return llvm::ConstantInt::get(t, static_cast<uint64_t>(in.ivalue), true);
  }
  llvm::Value* cast(llvm::Value* x, DType from, DType to);
  llvm::Value* op(const Inst& in);
  llvm::Value* uniform(llvm::Value* index, llvm::Value* seed, llvm::Value* offset, DType t);
  // The type an accumulator is held in: the compute type, except float products, held in f64
  // as the reference multiplies (the loop is scalar anyway): an f32 product of [-1, 1] values
  // underflows after ~100 factors, an f64 one after ~700, and it rounds once at the end.
  llvm::Type* accType(const lower::Accumulator& a) {
    if (ir::isFloat(a.dtype) && a.op == lower::ReduceOp::Prod) return B_.getDoubleTy();
    return ctype(a.dtype);
  }
  llvm::Value* accInit(const lower::Accumulator& a);
  llvm::Value* accCombine(const lower::Accumulator& a, llvm::Value* acc, llvm::Value* v);
  void emitBlock(const lower::Block& b);
  // Index checks (InstKind::CheckIndex): per check of the program this phase evaluates, the
  // largest index that fell outside its bound (unsigned, so a negative one is larger than any
  // bound; 0 while none did), an unsigned-max reduction the loop vectorizer keeps in registers,
  // so a check costs a compare, a select and a max an element and no branch in the loop; the
  // function records a failure into the status words once, at its end.
  void initChecks(llvm::Value* buffers);
  llvm::Value* checkIndex(const Inst& in, int id);
  void recordChecks();
  void emitStage(const lower::Stage& st);
  void emitColumnTiles(llvm::Value* begin, llvm::Value* end);
  // fn(t, jlo, jhi) for each tile of tile_ indices (aligned to tile_) meeting [lo, hi): its
  // first index t and the offsets [jlo, jhi) in it that lie in [lo, hi).
  void tiles(llvm::Value* lo, llvm::Value* hi,
             const std::function<void(llvm::Value*, llvm::Value*, llvm::Value*)>& fn);
  void walkRow(const lower::Stage& st, const std::function<void(llvm::Value*)>& step,
               const std::function<void()>& flush, bool prefetch);
  // A walk over row positions [lo, hi) in blocks of kPrefetchBlock, each preceded by
  // prefetchNext over the block (prefetch) or a plain rowLoop (not).
  void walk(llvm::Value* lo, llvm::Value* hi, const std::function<void(llvm::Value*)>& step,
            bool prefetch);
  void prefetchNext(llvm::Value* lo, llvm::Value* hi);
  // Index instruction `id` emitted at the given unit and row position (null: not index math).
  llvm::Value* indexAt(int id, llvm::Value* unit, llvm::Value* k, std::vector<llvm::Value*>& memo);
  // The running value of accumulator a (wide ones: the block's) and a wide one's f64 total: in a
  // column tile, the current unit's element of the tile's arrays.
  llvm::Value* accSlot(int a) {
    if (!tileJ_ || rowTiles_) return accSlots_[static_cast<size_t>(a)];
    return B_.CreateGEP(accType(ph_.accs[static_cast<size_t>(a)]),
                        accTiles_[static_cast<size_t>(a)], tileJ_);
  }
  llvm::Value* wideSlot(int a) {
    if (!tileJ_ || rowTiles_) return wideSlots_[static_cast<size_t>(a)];
    return B_.CreateGEP(B_.getDoubleTy(), wideTiles_[static_cast<size_t>(a)], tileJ_);
  }
  void initAccs(const lower::Stage& st);
  void flushWide(const lower::Stage& st);
  void finishAccs(const lower::Stage& st);
  // A counted loop; `interleave` > 0 asks LLVM to interleave it so many times (kInterleave).
  void loop(llvm::Value* lo, llvm::Value* hi, const std::function<void(llvm::Value*)>& body,
            int interleave = 0);
  // A walk over row positions [lo, hi): a plain loop, or row tiles (body(t) with tileJ_ = j).
  void rowLoop(llvm::Value* lo, llvm::Value* hi, const std::function<void(llvm::Value*)>& body) {
    if (!rowTiles_) return loop(lo, hi, body);
    tiles(lo, hi, [&](llvm::Value* t, llvm::Value* jlo, llvm::Value* jhi) {
      loop(jlo, jhi, [&](llvm::Value* j) {
        tileJ_ = j;
        body(t);
        tileJ_ = nullptr;
      });
    });
  }

  llvm::LLVMContext& C_;
  llvm::Module& M_;
  llvm::IRBuilder<> B_;
  const lower::Phase& ph_;
  const lower::PhaseSizeArgs* args_;
  size_t numArgs_;
  int64_t rowMultiple_;
  std::vector<llvm::Value*> argVals_;  // the size arguments, loaded in the entry block
  llvm::Value* status_ = nullptr;      // the index checks' status words (initChecks)
  // Per check of the program (null where this phase does not evaluate it): the largest failing
  // index, and whether any was checked (only where the bound may be 0); one of its instructions.
  std::vector<llvm::AllocaInst*> checkMax_, checkSeen_;
  std::vector<int> checkInst_;
  // Whether CheckIndex `id`'s bound may be 0: compiled in as 0, or a size argument.
  bool boundMayBeZero(int id) const {
    return ph_.insts[static_cast<size_t>(id)].ivalue == 0 ||
           (args_ && args_->insts[static_cast<size_t>(id)] >= 0);
  }
  std::vector<llvm::Value*> vals_;
  // f32 values known exact in bf16 (a bf16 load's, a result rounded to bf16), with their bits.
  // Every bf16 op rounds its result (as PyTorch does), so its store would round it a second
  // time: about 8 more vector instructions an element, which LLVM does not fold (the NaN select
  // hides that the second rounding changes nothing).
  std::unordered_map<llvm::Value*, llvm::Value*> exactBf16_;
  std::vector<llvm::Value*> bufs_;
  std::vector<llvm::AllocaInst*> accSlots_;   // the running value (wide accs: the block's)
  std::vector<llvm::AllocaInst*> wideSlots_;  // wide accs: the f64 total of the blocks
  std::vector<llvm::Value*> accFinal_;        // after the stage: f64 for wide accs (mean divided)
  // Column tiles (see tileForms): the proven index forms, each unit's accumulators, the
  // current unit's offset j in the tile (null outside a tile's per-unit loops) and the index
  // values at unit t + j.
  std::vector<IndexForm> forms_;
  int64_t tile_ = 0;
  lower::Block elemsDeps_;  // column tiles: the post block's index math the elems block reads
  bool rowTiles_ = false;   // forms_ are row tiles': tileJ_ is a position in the row
  std::vector<llvm::AllocaInst*> accTiles_;
  std::vector<llvm::AllocaInst*> wideTiles_;
  llvm::Value* tileJ_ = nullptr;
  std::vector<llvm::Value*> valsJ_;
  llvm::Value* unit_ = nullptr;
  llvm::Value* loopIndex_ = nullptr;
  // Next-row prefetch: the first stage's contiguous row loads of long rows (their ids), and
  // the unit the current one's worker runs next (null where rows are not walked one at a time).
  std::vector<int> prefetched_;
  llvm::Value* nextUnit_ = nullptr;
  // Row caches (reduce phases walked a row at a time): the plan and a row array per slot.
  lower::RowCache cache_;
  std::vector<llvm::AllocaInst*> rowArrays_;
  // Slot `slot`'s element at the current row position (a row tile's t + j).
  llvm::Value* rowSlot(int slot) {
    llvm::Value* k = tileJ_ ? B_.CreateAdd(loopIndex_, tileJ_, "", true, true) : loopIndex_;
    llvm::AllocaInst* a = rowArrays_[static_cast<size_t>(slot)];
    return B_.CreateGEP(a->getAllocatedType(), a, k);
  }
};

llvm::Value* PhaseEmitter::cast(llvm::Value* x, DType from, DType to) {
  if (from == to) return x;
  llvm::Type* t = ctype(to);
  if (ir::isFloat(from)) {
    if (ir::isFloat(to)) {
      llvm::Value* y = x;
      if (x->getType() != t) y = t->isDoubleTy() ? B_.CreateFPExt(x, t) : B_.CreateFPTrunc(x, t);
      return round(y, to);
    }
    if (ir::isInt(to))
      return B_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {t, x->getType()}, {x});
    return B_.CreateFCmpUNE(x, llvm::ConstantFP::get(x->getType(), 0.0));
  }
  if (from == DType::Bool) {
    if (ir::isFloat(to)) return B_.CreateUIToFP(x, t);
    return B_.CreateZExt(x, t);
  }
  // From an int.
  if (ir::isFloat(to)) {
    llvm::Value* d = B_.CreateSIToFP(x, B_.getDoubleTy());
    if (!t->isDoubleTy()) d = B_.CreateFPTrunc(d, t);
    return round(d, to);
  }
  if (to == DType::Bool) return B_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
  return B_.CreateSExtOrTrunc(x, t);
}

// random_uniform at flat index `index` (i64) from i64 seed and offset: Philox4x32-10 on 32-bit
// words (support/philox.h), the 32x32->64 products as zext multiplies, which the vectorizer
// widens like any integer arithmetic; then the top bits as an exact fraction.
llvm::Value* PhaseEmitter::uniform(llvm::Value* index, llvm::Value* seed, llvm::Value* offset,
                                   DType t) {
  llvm::Type* i32 = B_.getInt32Ty();
  llvm::Type* i64 = B_.getInt64Ty();
  auto lo = [&](llvm::Value* v) { return B_.CreateTrunc(v, i32); };
  auto hi = [&](llvm::Value* v) { return B_.CreateTrunc(B_.CreateLShr(v, 32), i32); };
  auto c32 = [&](uint32_t v) { return llvm::ConstantInt::get(i32, v); };
  llvm::Value* q = B_.CreateLShr(index, 2);
  llvm::Value* c[4] = {lo(q), hi(q), lo(offset), hi(offset)};
  llvm::Value* k[2] = {lo(seed), hi(seed)};
  for (int r = 0; r < kPhiloxRounds; ++r) {
    if (r > 0) {
      k[0] = B_.CreateAdd(k[0], c32(kPhiloxW0));
      k[1] = B_.CreateAdd(k[1], c32(kPhiloxW1));
    }
    llvm::Value* p0 =
        B_.CreateMul(llvm::ConstantInt::get(i64, kPhiloxM0), B_.CreateZExt(c[0], i64));
    llvm::Value* p1 =
        B_.CreateMul(llvm::ConstantInt::get(i64, kPhiloxM1), B_.CreateZExt(c[2], i64));
    llvm::Value* n0 = B_.CreateXor(B_.CreateXor(hi(p1), c[1]), k[0]);
    llvm::Value* n2 = B_.CreateXor(B_.CreateXor(hi(p0), c[3]), k[1]);
    c[0] = n0;
    c[1] = lo(p1);
    c[2] = n2;
    c[3] = lo(p0);
  }
  llvm::Value* w = B_.CreateTrunc(B_.CreateAnd(index, 3), i32);
  llvm::Value* word = c[3];
  for (int j = 2; j >= 0; --j)
    word = B_.CreateSelect(B_.CreateICmpEQ(w, c32(static_cast<uint32_t>(j))), c[j], word);
  int m = uniformBits(t);
  llvm::Type* ft = ctype(t);
  llvm::Value* bits = B_.CreateLShr(word, static_cast<uint64_t>(32 - m));
  // u < 2^m converts exactly (uitofp), and the scale is a power of two.
  return B_.CreateFMul(B_.CreateUIToFP(bits, ft),
                       llvm::ConstantFP::get(ft, 1.0 / static_cast<double>(uint64_t{1} << m)));
}

llvm::Value* PhaseEmitter::op(const Inst& in) {
  DType t = in.dtype;
  llvm::Value* a = val(in.args[0]);
  llvm::Value* b = in.args[1] >= 0 ? val(in.args[1]) : nullptr;
  DType at = dtypeOf(in.args[0]);
  bool fl = ir::isFloat(at);
  auto r = [&](llvm::Value* v) { return round(v, t); };
  llvm::Type* ty = a->getType();
  auto one = [&] { return llvm::ConstantFP::get(ty, 1.0); };
  switch (in.op) {
    case OpCode::Neg:
      return fl ? r(B_.CreateFNeg(a)) : B_.CreateSub(llvm::ConstantInt::get(ty, 0), a);
    case OpCode::Abs:
      if (fl) return intrinsic(llvm::Intrinsic::fabs, {a});
      return B_.CreateSelect(B_.CreateICmpSLT(a, llvm::ConstantInt::get(ty, 0)),
                             B_.CreateSub(llvm::ConstantInt::get(ty, 0), a), a);
    case OpCode::Relu:
      if (fl) return intrinsic(llvm::Intrinsic::maximum, {a, llvm::ConstantFP::get(ty, 0.0)});
      return intrinsic(llvm::Intrinsic::smax, {a, llvm::ConstantInt::get(ty, 0)});
    case OpCode::Exp: return r(exp(a));
    case OpCode::Log: return r(ty->isFloatTy() ? emitLogF32(B_, a) : math("log", {a}));
    case OpCode::Log1p: return r(ty->isFloatTy() ? emitLog1pF32(B_, a) : math("log1p", {a}));
    case OpCode::Tanh: return r(ty->isFloatTy() ? emitTanhF32(B_, a) : math("tanh", {a}));
    case OpCode::Erf: return r(ty->isFloatTy() ? emitErfF32(B_, a) : math("erf", {a}));
    case OpCode::Sin: return r(math("sin", {a}));
    case OpCode::Cos: return r(math("cos", {a}));
    case OpCode::Sqrt: return r(intrinsic(llvm::Intrinsic::sqrt, {a}));
    case OpCode::Rsqrt: return r(B_.CreateFDiv(one(), intrinsic(llvm::Intrinsic::sqrt, {a})));
    case OpCode::Sigmoid:
      return r(B_.CreateFDiv(one(), B_.CreateFAdd(one(), exp(B_.CreateFNeg(a)))));
    case OpCode::Reciprocal: return r(B_.CreateFDiv(one(), a));
    case OpCode::Floor: return intrinsic(llvm::Intrinsic::floor, {a});
    case OpCode::Ceil: return intrinsic(llvm::Intrinsic::ceil, {a});
    case OpCode::LogicalNot: return B_.CreateNot(a);
    case OpCode::Add: return fl ? r(B_.CreateFAdd(a, b)) : B_.CreateAdd(a, b);
    case OpCode::Sub: return fl ? r(B_.CreateFSub(a, b)) : B_.CreateSub(a, b);
    case OpCode::Mul: return fl ? r(B_.CreateFMul(a, b)) : B_.CreateMul(a, b);
    case OpCode::Div: {
      if (fl) return r(B_.CreateFDiv(a, b));
      llvm::Value* zero = llvm::ConstantInt::get(ty, 0);
      llvm::Value* minus1 = llvm::ConstantInt::get(ty, static_cast<uint64_t>(-1), true);
      llvm::Value* isZero = B_.CreateICmpEQ(b, zero);
      llvm::Value* isM1 = B_.CreateICmpEQ(b, minus1);
      llvm::Value* safe =
          B_.CreateSelect(B_.CreateOr(isZero, isM1), llvm::ConstantInt::get(ty, 1), b);
      llvm::Value* q = B_.CreateSDiv(a, safe);
      return B_.CreateSelect(isZero, zero, B_.CreateSelect(isM1, B_.CreateSub(zero, a), q));
    }
    case OpCode::Maximum:
      return fl ? r(intrinsic(llvm::Intrinsic::maximum, {a, b}))
                : intrinsic(llvm::Intrinsic::smax, {a, b});
    case OpCode::Minimum:
      return fl ? r(intrinsic(llvm::Intrinsic::minimum, {a, b}))
                : intrinsic(llvm::Intrinsic::smin, {a, b});
    case OpCode::Pow: return r(math("pow", {a, b}));
    case OpCode::Eq: return fl ? B_.CreateFCmpOEQ(a, b) : B_.CreateICmpEQ(a, b);
    case OpCode::Ne: return fl ? B_.CreateFCmpUNE(a, b) : B_.CreateICmpNE(a, b);
    case OpCode::Lt: return fl ? B_.CreateFCmpOLT(a, b) : B_.CreateICmpSLT(a, b);
    case OpCode::Le: return fl ? B_.CreateFCmpOLE(a, b) : B_.CreateICmpSLE(a, b);
    case OpCode::Gt: return fl ? B_.CreateFCmpOGT(a, b) : B_.CreateICmpSGT(a, b);
    case OpCode::Ge: return fl ? B_.CreateFCmpOGE(a, b) : B_.CreateICmpSGE(a, b);
    case OpCode::LogicalAnd: return B_.CreateAnd(a, b);
    case OpCode::LogicalOr: return B_.CreateOr(a, b);
    case OpCode::Select: return B_.CreateSelect(a, b, val(in.args[2]));
    case OpCode::Cast: return cast(a, at, t);
    case OpCode::RandomUniform: return uniform(a, b, val(in.args[2]), t);
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
    case OpCode::CheckIndex: break;
  }
  throwError(ErrorCode::Internal,
             fmt::format("llvm emitter: {} is not an elementwise op", ir::opName(in.op)));
}

llvm::Value* PhaseEmitter::accInit(const lower::Accumulator& a) {
  llvm::Type* t = accType(a);
  if (ir::isFloat(a.dtype)) {
    double inf = std::numeric_limits<double>::infinity();
    switch (a.op) {
      case lower::ReduceOp::Sum:
      case lower::ReduceOp::Mean: return llvm::ConstantFP::get(t, 0.0);
      case lower::ReduceOp::Prod: return llvm::ConstantFP::get(t, 1.0);
      case lower::ReduceOp::Max: return llvm::ConstantFP::get(t, -inf);
      case lower::ReduceOp::Min: return llvm::ConstantFP::get(t, inf);
    }
  }
  unsigned bits = t->getIntegerBitWidth();
  switch (a.op) {
    case lower::ReduceOp::Sum:
    case lower::ReduceOp::Mean: return llvm::ConstantInt::get(t, 0);
    case lower::ReduceOp::Prod: return llvm::ConstantInt::get(t, 1);
    case lower::ReduceOp::Max:
      return llvm::ConstantInt::get(C_, llvm::APInt::getSignedMinValue(bits));
    case lower::ReduceOp::Min:
      return llvm::ConstantInt::get(C_, llvm::APInt::getSignedMaxValue(bits));
  }
  return nullptr;
}

llvm::Value* PhaseEmitter::accCombine(const lower::Accumulator& a, llvm::Value* acc,
                                      llvm::Value* v) {
  bool fl = ir::isFloat(a.dtype);
  // Float sums and products may be reassociated: the vectorizer then keeps several partial
  // accumulators (the reference sums in f64, so no f32 order is "the" answer; partial sums are
  // usually closer to it than one long sequential chain).
  auto reassoc = [](llvm::Value* x) {
    llvm::cast<llvm::Instruction>(x)->setHasAllowReassoc(true);
    return x;
  };
  switch (a.op) {
    case lower::ReduceOp::Sum:
    case lower::ReduceOp::Mean: return fl ? reassoc(B_.CreateFAdd(acc, v)) : B_.CreateAdd(acc, v);
    case lower::ReduceOp::Prod: {
      if (!fl) return B_.CreateMul(acc, v);
      // A product of nonzero factors that underflows is held at the smallest subnormal of its
      // sign, so that only a zero factor makes it zero: +-inf times such a product stays +-inf
      // (the reference's rule) whatever the order and grouping of the factors, which vector
      // lanes and split rows change. The select keeps the loop scalar: products are rare.
      llvm::Value* r = B_.CreateFMul(acc, v);
      llvm::Type* t = r->getType();
      llvm::Value* zero = llvm::ConstantFP::get(t, 0.0);
      llvm::Value* underflow =
          B_.CreateAnd(B_.CreateFCmpOEQ(r, zero),
                       B_.CreateAnd(B_.CreateFCmpUNE(acc, zero), B_.CreateFCmpUNE(v, zero)));
      llvm::Value* tiny = intrinsic(
          llvm::Intrinsic::copysign,
          {t->isDoubleTy() ? llvm::ConstantFP::get(t, std::numeric_limits<double>::denorm_min())
                           : llvm::ConstantFP::get(t, std::numeric_limits<float>::denorm_min()),
           r});
      return B_.CreateSelect(underflow, tiny, r);
    }
    // Float max and min treat -0 and +0 as equal (nsz), as ATen's vector max does: LLVM then
    // lowers llvm.maximum to a max, a NaN test and a blend a vector, without the two more that
    // order signed zeros (attention softmax's max walk: 31 -> 19 us in cache, dev VM). Only the
    // sign of a zero result may differ from the reference's.
    case lower::ReduceOp::Max: {
      llvm::Value* r = intrinsic(fl ? llvm::Intrinsic::maximum : llvm::Intrinsic::smax, {acc, v});
      if (fl) llvm::cast<llvm::Instruction>(r)->setHasNoSignedZeros(true);
      return r;
    }
    case lower::ReduceOp::Min: {
      llvm::Value* r = intrinsic(fl ? llvm::Intrinsic::minimum : llvm::Intrinsic::smin, {acc, v});
      if (fl) llvm::cast<llvm::Instruction>(r)->setHasNoSignedZeros(true);
      return r;
    }
  }
  return nullptr;
}

void PhaseEmitter::emitBlock(const lower::Block& b) {
  for (int id : b.insts) {
    const Inst& in = ph_.insts[static_cast<size_t>(id)];
    llvm::Value* v = nullptr;
    if (int slot = cache_.loadSlot.empty() ? -1 : cache_.loadSlot[static_cast<size_t>(id)];
        slot >= 0) {
      vals_[static_cast<size_t>(id)] = B_.CreateLoad(ctype(in.dtype), rowSlot(slot));
      continue;
    }
    switch (in.kind) {
      case InstKind::Const: v = constant(id); break;
      case InstKind::UnitIndex: v = unit_; break;
      case InstKind::LoopIndex: v = loopIndex_; break;
      case InstKind::IAdd: v = B_.CreateAdd(ix(in.args[0]), ix(in.args[1]), "", false, true); break;
      case InstKind::IMulC: v = B_.CreateMul(ix(in.args[0]), imm(id), "", false, true); break;
      case InstKind::IDivC: v = B_.CreateUDiv(ix(in.args[0]), imm(id)); break;
      case InstKind::IRemC: v = B_.CreateURem(ix(in.args[0]), imm(id)); break;
      case InstKind::Load: v = load(in); break;
      case InstKind::Store: store(in); break;
      case InstKind::AccRead: {
        // The accumulator's final value (f64 for wide ones), rounded once to the read's dtype.
        v = accFinal_[static_cast<size_t>(in.acc)];
        llvm::Type* t = ctype(in.dtype);
        if (v->getType() != t) v = t->isDoubleTy() ? B_.CreateFPExt(v, t) : B_.CreateFPTrunc(v, t);
        v = round(v, in.dtype);
        break;
      }
      case InstKind::Accumulate: {
        const lower::Accumulator& a = ph_.accs[static_cast<size_t>(in.acc)];
        llvm::Value* slot = accSlot(in.acc);
        llvm::Value* acc = B_.CreateLoad(accType(a), slot);
        llvm::Value* x = val(in.args[0]);
        if (x->getType() != acc->getType()) x = B_.CreateFPExt(x, acc->getType());
        B_.CreateStore(accCombine(a, acc, x), slot);
        break;
      }
      case InstKind::Op: v = op(in); break;
      case InstKind::CheckIndex: v = checkIndex(in, id); break;
    }
    vals_[static_cast<size_t>(id)] = v;
    if (int slot = cache_.storeSlot.empty() ? -1 : cache_.storeSlot[static_cast<size_t>(id)];
        slot >= 0)
      B_.CreateStore(v, rowSlot(slot));
    if (tileJ_ && isIndexKind(in.kind) && forms_[static_cast<size_t>(id)].opaque) {
      // Opaque index math: at this j, from its operands' values at j.
      llvm::Value* a = val(in.args[0]);
      llvm::Value* vj = nullptr;
      switch (in.kind) {
        case InstKind::IAdd: vj = B_.CreateAdd(a, val(in.args[1]), "", false, true); break;
        case InstKind::IMulC: vj = B_.CreateMul(a, imm(id), "", false, true); break;
        case InstKind::IDivC: vj = B_.CreateUDiv(a, imm(id)); break;
        case InstKind::IRemC: vj = B_.CreateURem(a, imm(id)); break;
        default: break;  // UnitIndex and LoopIndex are never opaque
      }
      valsJ_[static_cast<size_t>(id)] = vj;
    } else if (tileJ_ && isIndexKind(in.kind)) {
      const int64_t slope = forms_[static_cast<size_t>(id)].slope;
      valsJ_[static_cast<size_t>(id)] =
          slope == 0
              ? nullptr
              : B_.CreateAdd(v, B_.CreateMul(tileJ_, i64(slope), "", true, true), "", true, true);
    }
  }
}

void PhaseEmitter::initChecks(llvm::Value* buffers) {
  for (size_t id = 0; id < ph_.insts.size(); ++id) {
    const Inst& in = ph_.insts[id];
    if (in.kind != InstKind::CheckIndex) continue;
    const auto c = static_cast<size_t>(in.check);
    if (checkInst_.size() <= c) checkInst_.resize(c + 1, -1);
    if (checkInst_[c] < 0) checkInst_[c] = static_cast<int>(id);
  }
  if (checkInst_.empty()) return;
  // The status pointer follows the buffers and the size arguments' pointer.
  llvm::Type* ptr = B_.getPtrTy();
  status_ = B_.CreateLoad(
      ptr, B_.CreateConstGEP1_64(ptr, buffers, ph_.buffers.size() + (args_ ? 1 : 0)), "status");
  for (int id : checkInst_) {
    llvm::AllocaInst* max = nullptr;
    llvm::AllocaInst* seen = nullptr;
    if (id >= 0) {
      max = B_.CreateAlloca(B_.getInt64Ty(), nullptr, "check_max");
      B_.CreateStore(i64(0), max);
      if (boundMayBeZero(id)) {
        seen = B_.CreateAlloca(B_.getInt1Ty(), nullptr, "check_seen");
        B_.CreateStore(B_.getInt1(false), seen);
      }
    }
    checkMax_.push_back(max);
    checkSeen_.push_back(seen);
  }
}

// One unsigned max an element (the compare and select hoist out of a row's walk when the index
// is the row's, a label's): the largest failing index, 0 while none has failed. An index of 0
// fails only against a bound of 0, which `seen` (kept where the bound may be 0) tells apart.
llvm::Value* PhaseEmitter::checkIndex(const Inst& in, int id) {
  llvm::Value* k = val(in.args[0]);
  llvm::Value* ok = B_.CreateICmpULT(k, imm(id));
  const auto c = static_cast<size_t>(in.check);
  llvm::Value* max = B_.CreateLoad(B_.getInt64Ty(), checkMax_[c]);
  B_.CreateStore(intrinsic(llvm::Intrinsic::umax, {max, B_.CreateSelect(ok, i64(0), k)}),
                 checkMax_[c]);
  if (checkSeen_[c]) B_.CreateStore(B_.getInt1(true), checkSeen_[c]);
  return B_.CreateSelect(ok, k, i64(0));
}

void PhaseEmitter::recordChecks() {
  llvm::Function* f = B_.GetInsertBlock()->getParent();
  for (size_t c = 0; c < checkInst_.size(); ++c) {
    if (checkInst_[c] < 0) continue;
    auto* record = llvm::BasicBlock::Create(C_, "check_record", f);
    auto* store = llvm::BasicBlock::Create(C_, "check_store", f);
    auto* next = llvm::BasicBlock::Create(C_, "check_next", f);
    llvm::Value* max = B_.CreateLoad(B_.getInt64Ty(), checkMax_[c]);
    llvm::Value* bound = imm(checkInst_[c]);
    llvm::Value* bad = B_.CreateICmpNE(max, i64(0));
    if (checkSeen_[c])
      bad = B_.CreateOr(bad, B_.CreateAnd(B_.CreateLoad(B_.getInt1Ty(), checkSeen_[c]),
                                          B_.CreateICmpEQ(bound, i64(0))));
    B_.CreateCondBr(bad, record, next);
    // The first failing check of the run claims the words (status[0] = check + 1).
    B_.SetInsertPoint(record);
    llvm::Value* claim = B_.CreateAtomicCmpXchg(
        status_, i64(0), i64(static_cast<int64_t>(c) + 1), llvm::MaybeAlign(8),
        llvm::AtomicOrdering::SequentiallyConsistent, llvm::AtomicOrdering::SequentiallyConsistent);
    B_.CreateCondBr(B_.CreateExtractValue(claim, 1), store, next);
    B_.SetInsertPoint(store);
    B_.CreateStore(max, B_.CreateConstGEP1_64(B_.getInt64Ty(), status_, 1));
    B_.CreateStore(bound, B_.CreateConstGEP1_64(B_.getInt64Ty(), status_, 2));
    B_.CreateBr(next);
    B_.SetInsertPoint(next);
  }
}

void PhaseEmitter::loop(llvm::Value* lo, llvm::Value* hi,
                        const std::function<void(llvm::Value*)>& body, int interleave) {
  llvm::Function* f = B_.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = B_.GetInsertBlock();
  llvm::BasicBlock* header = llvm::BasicBlock::Create(C_, "loop", f);
  llvm::BasicBlock* bodyBB = llvm::BasicBlock::Create(C_, "body", f);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(C_, "exit", f);
  B_.CreateBr(header);
  B_.SetInsertPoint(header);
  llvm::PHINode* i = B_.CreatePHI(B_.getInt64Ty(), 2, "i");
  i->addIncoming(lo, pre);
  B_.CreateCondBr(B_.CreateICmpSLT(i, hi), bodyBB, exit);
  B_.SetInsertPoint(bodyBB);
  body(i);
  llvm::Value* next = B_.CreateAdd(i, i64(1), "", true, true);
  i->addIncoming(next, B_.GetInsertBlock());
  llvm::BranchInst* latch = B_.CreateBr(header);
  if (interleave > 0) {
    llvm::Metadata* count[] = {llvm::MDString::get(C_, "llvm.loop.interleave.count"),
                               llvm::ConstantAsMetadata::get(B_.getInt32(interleave))};
    llvm::MDNode* id = llvm::MDNode::getDistinct(C_, {nullptr, llvm::MDNode::get(C_, count)});
    id->replaceOperandWith(0, id);  // a loop ID names itself
    latch->setMetadata(llvm::LLVMContext::MD_loop, id);
  }
  B_.SetInsertPoint(exit);
}

void PhaseEmitter::initAccs(const lower::Stage& st) {
  for (int a : st.accs) {
    const lower::Accumulator& acc = ph_.accs[static_cast<size_t>(a)];
    B_.CreateStore(accInit(acc), accSlot(a));
    if (isWide(acc)) B_.CreateStore(llvm::ConstantFP::get(B_.getDoubleTy(), 0.0), wideSlot(a));
  }
}

// Adds the block's sums of the wide accumulators to their totals and restarts the blocks.
void PhaseEmitter::flushWide(const lower::Stage& st) {
  for (int a : st.accs) {
    const lower::Accumulator& acc = ph_.accs[static_cast<size_t>(a)];
    if (!isWide(acc)) continue;
    llvm::Value* slot = accSlot(a);
    llvm::Value* total = wideSlot(a);
    llvm::Value* part = B_.CreateLoad(accType(acc), slot);
    if (!part->getType()->isDoubleTy()) part = B_.CreateFPExt(part, B_.getDoubleTy());
    B_.CreateStore(B_.CreateFAdd(B_.CreateLoad(B_.getDoubleTy(), total), part), total);
    B_.CreateStore(accInit(acc), slot);
  }
}

// The accumulators' final values (wide ones: the f64 total, means divided), for AccRead.
void PhaseEmitter::finishAccs(const lower::Stage& st) {
  for (int ai : st.accs) {
    const lower::Accumulator& a = ph_.accs[static_cast<size_t>(ai)];
    llvm::Value* v;
    if (isWide(a)) {
      v = B_.CreateLoad(B_.getDoubleTy(), wideSlot(ai));
      if (a.op == lower::ReduceOp::Mean) {
        const int arg = args_ ? args_->accCounts[static_cast<size_t>(ai)] : -1;
        v = B_.CreateFDiv(v, arg < 0
                                 ? llvm::ConstantFP::get(v->getType(), static_cast<double>(a.count))
                                 : B_.CreateSIToFP(size(a.count, arg), v->getType()));
      }
    } else {
      v = B_.CreateLoad(accType(a), accSlot(ai));
    }
    accFinal_[static_cast<size_t>(ai)] = v;
  }
}

// The walk over a row: step(k) for k in [0, rowLength). Wide accumulators sum blocks in the
// compute type (vectorized when contiguous: the loop has a constant trip count and reassociable
// adds) and add each block's sum to an f64 total (flush), so the error stays that of a block
// (O(block / lanes) roundings) for any row length. A row of at most one block is one loop, as
// it would be without blocking.
void PhaseEmitter::walkRow(const lower::Stage& st, const std::function<void(llvm::Value*)>& step,
                           const std::function<void()>& flush, bool prefetch) {
  bool wide = false;
  for (int a : st.accs) wide = wide || isWide(ph_.accs[static_cast<size_t>(a)]);
  const int64_t n = ph_.rowLength;
  const int64_t kBlock = contiguousWalk(ph_, st) ? kContiguousBlock : kStridedBlock;
  if (!wide || n <= kBlock) {
    walk(i64(0), rowLength(), step, prefetch);
  } else if (args_ && args_->rowLength >= 0) {
    // A row length known at run time: the same blocks, the count and the rest computed.
    llvm::Value* len = rowLength();
    llvm::Value* full = B_.CreateUDiv(len, i64(kBlock));
    loop(i64(0), full, [&](llvm::Value* blk) {
      llvm::Value* base = B_.CreateMul(blk, i64(kBlock), "", true, true);
      walk(base, B_.CreateAdd(base, i64(kBlock), "", true, true), step, prefetch);
      flush();
    });
    walk(B_.CreateMul(full, i64(kBlock), "", true, true), len, step, prefetch);
  } else {
    loop(i64(0), i64(n / kBlock), [&](llvm::Value* blk) {
      llvm::Value* base = B_.CreateMul(blk, i64(kBlock), "", true, true);
      walk(base, B_.CreateAdd(base, i64(kBlock), "", true, true), step, prefetch);
      flush();
    });
    if (n % kBlock != 0) walk(i64(n / kBlock * kBlock), i64(n), step, prefetch);
  }
  flush();
}

void PhaseEmitter::walk(llvm::Value* lo, llvm::Value* hi,
                        const std::function<void(llvm::Value*)>& step, bool prefetch) {
  if (!prefetch) return rowLoop(lo, hi, step);
  const int64_t B = kPrefetchBlock;
  llvm::Value* blocks = B_.CreateUDiv(B_.CreateAdd(B_.CreateSub(hi, lo), i64(B - 1)), i64(B));
  loop(i64(0), blocks, [&](llvm::Value* b) {
    llvm::Value* blo = B_.CreateAdd(lo, B_.CreateMul(b, i64(B), "", true, true), "", true, true);
    llvm::Value* bhi = B_.CreateAdd(blo, i64(B), "", true, true);
    bhi = B_.CreateSelect(B_.CreateICmpSLT(bhi, hi), bhi, hi);
    prefetchNext(blo, bhi);
    rowLoop(blo, bhi, step);
  });
}

// Next-row prefetch. A row reduction's first walk streams its row from memory; the later walks
// (softmax's exp and division, cross-entropy's) find it in cache and are bound by arithmetic.
// One thread runs them one after the other, so its memory traffic and its arithmetic never
// overlap: cross-entropy over 128 KB rows took the sum of the two (6.5 ms for its max walk at
// 1.6 ms plus the rest in cache at 3.2 ms, dev VM). Long rows are past what the hardware
// prefetchers run ahead, so the second walk prefetches the next row's lines into L2, a block
// of the walk at a time: the next row's first walk then reads cache while this one computes.
void PhaseEmitter::prefetchNext(llvm::Value* lo, llvm::Value* hi) {
  for (int id : prefetched_) {
    const Inst& in = ph_.insts[static_cast<size_t>(id)];
    std::vector<llvm::Value*> memo(ph_.insts.size(), nullptr);
    llvm::Value* at = indexAt(in.args[0], nextUnit_, lo, memo);
    if (!at) continue;
    llvm::Value* base = B_.CreateGEP(mtype(in.dtype), bufs_[static_cast<size_t>(in.buffer)], at);
    const int64_t bytes = ir::dtypeBytes(in.dtype);
    llvm::Value* lines = B_.CreateUDiv(
        B_.CreateAdd(B_.CreateMul(B_.CreateSub(hi, lo), i64(bytes)), i64(kCacheLine - 1)),
        i64(kCacheLine));
    loop(i64(0), lines, [&](llvm::Value* j) {
      llvm::Value* p =
          B_.CreateGEP(B_.getInt8Ty(), base, B_.CreateMul(j, i64(kCacheLine), "", true, true));
      // read, locality 2 (x86: prefetcht1, into L2), data
      B_.CreateIntrinsic(llvm::Intrinsic::prefetch, {p->getType()},
                         {p, B_.getInt32(0), B_.getInt32(2), B_.getInt32(1)});
    });
  }
}

llvm::Value* PhaseEmitter::indexAt(int id, llvm::Value* unit, llvm::Value* k,
                                   std::vector<llvm::Value*>& memo) {
  llvm::Value*& v = memo[static_cast<size_t>(id)];
  if (v) return v;
  const Inst& in = ph_.insts[static_cast<size_t>(id)];
  auto arg = [&](int i) { return indexAt(in.args[i], unit, k, memo); };
  switch (in.kind) {
    case InstKind::Const:
      if (in.dtype != DType::I64) return nullptr;
      return v = imm(id);
    case InstKind::UnitIndex: return v = unit;
    case InstKind::LoopIndex: return v = k;
    case InstKind::IAdd: {
      llvm::Value* a = arg(0);
      llvm::Value* b = arg(1);
      return v = (a && b) ? B_.CreateAdd(a, b) : nullptr;
    }
    case InstKind::IMulC: {
      llvm::Value* a = arg(0);
      return v = a ? B_.CreateMul(a, imm(id)) : nullptr;
    }
    case InstKind::IDivC: {
      llvm::Value* a = arg(0);
      return v = a ? B_.CreateUDiv(a, imm(id)) : nullptr;
    }
    case InstKind::IRemC: {
      llvm::Value* a = arg(0);
      return v = a ? B_.CreateURem(a, imm(id)) : nullptr;
    }
    default: return nullptr;  // a gathered index (a load) or an op: no prefetch
  }
}

// One stage of one unit: the walk over the row, then the accumulators' final values.
void PhaseEmitter::emitStage(const lower::Stage& st) {
  initAccs(st);
  walkRow(
      st,
      [&](llvm::Value* k) {
        loopIndex_ = k;
        emitBlock(st.body);
      },
      [&] { flushWide(st); }, nextUnit_ && ph_.stages.size() > 1 && &st == &ph_.stages[1]);
  finishAccs(st);
}

// Units [begin, end) of a column phase, a tile of tile_ units at a time (see tileForms): tiles
// are aligned to tile_ in unit space, so the first and last may be partial. Every per-unit step
// is an inner loop over the tile's units; the unit's own pre block is recomputed where its
// values are used (it holds index arithmetic and per-unit loads, hoisted by LLVM when invariant).
void PhaseEmitter::tiles(llvm::Value* lo, llvm::Value* hi,
                         const std::function<void(llvm::Value*, llvm::Value*, llvm::Value*)>& fn) {
  const int64_t T = tile_;
  llvm::Value* firstTile = B_.CreateUDiv(lo, i64(T));
  llvm::Value* endTile = B_.CreateUDiv(B_.CreateAdd(hi, i64(T - 1)), i64(T));
  loop(firstTile, endTile, [&](llvm::Value* tileNo) {
    llvm::Value* t = B_.CreateMul(tileNo, i64(T), "", true, true);
    llvm::Value* jlo = B_.CreateSelect(B_.CreateICmpSGT(lo, t), B_.CreateSub(lo, t), i64(0));
    llvm::Value* rest = B_.CreateSub(hi, t);
    fn(t, jlo, B_.CreateSelect(B_.CreateICmpSLT(rest, i64(T)), rest, i64(T)));
  });
}

void PhaseEmitter::emitColumnTiles(llvm::Value* begin, llvm::Value* end) {
  const lower::Stage& st = ph_.stages[0];
  tiles(begin, end, [&](llvm::Value* t, llvm::Value* jlo, llvm::Value* jhi) {
    auto perUnit = [&](const std::function<void()>& fn) {
      loop(jlo, jhi, [&](llvm::Value* j) {
        tileJ_ = j;
        unit_ = t;
        fn();
        tileJ_ = nullptr;
      });
    };
    perUnit([&] { initAccs(st); });
    walkRow(
        st,
        [&](llvm::Value* k) {
          loopIndex_ = k;
          perUnit([&] {
            emitBlock(ph_.pre);
            emitBlock(st.body);
            emitBlock(elemsDeps_);  // elems reads nothing of the stage (elemsDependencies)
            emitBlock(ph_.elems);
          });
        },
        [&] { perUnit([&] { flushWide(st); }); }, false);
    perUnit([&] {
      finishAccs(st);
      emitBlock(ph_.pre);
      emitBlock(ph_.post);
    });
  });
}

void PhaseEmitter::emit(const std::string& name, llvm::GlobalValue::LinkageTypes linkage) {
  llvm::Type* ptr = B_.getPtrTy();
  auto* fty =
      llvm::FunctionType::get(B_.getVoidTy(), {ptr, B_.getInt64Ty(), B_.getInt64Ty()}, false);
  llvm::Function* f = llvm::Function::Create(fty, linkage, name, M_);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  f->addFnAttr(llvm::Attribute::NoFree);
  llvm::Argument* buffers = f->getArg(0);
  llvm::Argument* begin = f->getArg(1);
  llvm::Argument* end = f->getArg(2);
  buffers->addAttr(llvm::Attribute::NoAlias);
  buffers->addAttr(llvm::Attribute::ReadOnly);
  B_.SetInsertPoint(llvm::BasicBlock::Create(C_, "entry", f));
  // A param the phase both reads and writes (column partials: partial[w, k] read, added to and
  // stored back) is one pointer value: through two loaded pointers, LLVM's vectorizer checks at
  // run time that they are far apart, finds them equal and runs the scalar loop.
  for (size_t i = 0; i < ph_.buffers.size(); ++i) {
    auto same = std::find(ph_.buffers.begin(), ph_.buffers.begin() + static_cast<std::ptrdiff_t>(i),
                          ph_.buffers[i]);
    bufs_.push_back(same != ph_.buffers.begin() + static_cast<std::ptrdiff_t>(i)
                        ? bufs_[static_cast<size_t>(same - ph_.buffers.begin())]
                        : B_.CreateLoad(ptr, B_.CreateConstGEP1_64(ptr, buffers, i)));
  }
  // The size arguments: a pointer after the phase's buffers, to the program's values.
  if (args_) {
    llvm::Value* sizes =
        B_.CreateLoad(ptr, B_.CreateConstGEP1_64(ptr, buffers, ph_.buffers.size()), "sizes");
    for (size_t k = 0; k < numArgs_; ++k)
      argVals_.push_back(B_.CreateLoad(B_.getInt64Ty(),
                                       B_.CreateConstGEP1_64(B_.getInt64Ty(), sizes, k),
                                       fmt::format("size{}", k)));
    // The same value with its low bits known clear: the row loops' trip counts are then
    // multiples of the vector loop's step, and LLVM drops their remainder loops.
    if (rowMultiple_ > 1 && args_->rowLength >= 0) {
      llvm::Value*& v = argVals_[static_cast<size_t>(args_->rowLength)];
      v = B_.CreateAnd(v, i64(-rowMultiple_), "row_length");
    }
  }
  initChecks(buffers);
  vals_.assign(ph_.insts.size(), nullptr);
  for (const lower::Accumulator& a : ph_.accs) {
    accSlots_.push_back(B_.CreateAlloca(accType(a)));
    wideSlots_.push_back(isWide(a) ? B_.CreateAlloca(B_.getDoubleTy()) : nullptr);
    accFinal_.push_back(nullptr);
  }
  // The walk the cpu target's schedule chose (Phase::host; lower/tile_forms.h's forms for it).
  const lower::HostSchedule& host = ph_.host;
  if (host.tiling != lower::HostTiling::None) {
    std::optional<std::vector<IndexForm>> forms =
        lower::tileForms(ph_, host.tile, lower::tiledIndex(host.tiling));
    STITCH_INTERNAL(forms.has_value(), "phase {} was scheduled in tiles of {} it has no forms for",
                    ph_.name, host.tile);
    forms_ = std::move(*forms);
    tile_ = host.tile;
    rowTiles_ = host.tiling == lower::HostTiling::Row;
    valsJ_.assign(ph_.insts.size(), nullptr);
  }
  if (host.tiling == lower::HostTiling::Column) {
    std::optional<lower::Block> deps = lower::elemsDependencies(ph_);
    STITCH_INTERNAL(deps.has_value(), "phase {} was scheduled in column tiles it cannot run",
                    ph_.name);
    elemsDeps_ = std::move(*deps);
  }
  if (host.tiling == lower::HostTiling::Column || host.tiling == lower::HostTiling::Element) {
    for (const lower::Accumulator& a : ph_.accs) {
      accTiles_.push_back(B_.CreateAlloca(accType(a), i64(tile_)));
      wideTiles_.push_back(isWide(a) ? B_.CreateAlloca(B_.getDoubleTy(), i64(tile_)) : nullptr);
    }
  }
  prefetched_ = host.prefetched;
  if (ph_.reduce && host.rowCacheBytes > 0) {
    cache_ = lower::rowCache(ph_, host.rowCacheBytes);
    for (const lower::RowCache::Slot& s : cache_.slots)
      rowArrays_.push_back(B_.CreateAlloca(ctype(s.dtype), rowLength()));
  }
  if (!ph_.reduce) {
    llvm::Value* chunk = size(ph_.chunk, args_ ? args_->chunk : -1);
    llvm::Value* total = size(ph_.total, args_ ? args_->total : -1);
    llvm::Value* lo = B_.CreateMul(begin, chunk);
    llvm::Value* hi = B_.CreateMul(end, chunk);
    hi = B_.CreateSelect(B_.CreateICmpSLT(hi, total), hi, total);
    const int interleave = host.interleave;
    if (!forms_.empty()) {
      tiles(lo, hi, [&](llvm::Value* t, llvm::Value* jlo, llvm::Value* jhi) {
        loop(
            jlo, jhi,
            [&](llvm::Value* j) {
              tileJ_ = j;
              loopIndex_ = t;
              emitBlock(ph_.elems);
              tileJ_ = nullptr;
            },
            interleave);
      });
    } else {
      loop(
          lo, hi,
          [&](llvm::Value* i) {
            loopIndex_ = i;
            emitBlock(ph_.elems);
          },
          interleave);
    }
  } else {
    // The unit after u in its worker's order, kept in range (the last prefetches itself).
    const int64_t stride = ph_.workers != 0 && !ph_.workerBlocks ? ph_.workers : 1;
    auto row = [&](llvm::Value* u) {
      unit_ = u;
      if (!prefetched_.empty()) {
        llvm::Value* next = B_.CreateAdd(u, i64(stride), "", true, true);
        nextUnit_ = B_.CreateSelect(B_.CreateICmpSLT(next, units()), next, u);
      }
      emitBlock(ph_.pre);
      for (const lower::Stage& st : ph_.stages) emitStage(st);
      emitBlock(ph_.post);
      if (!ph_.elems.insts.empty())
        walk(
            i64(0), rowLength(),
            [&](llvm::Value* k) {
              loopIndex_ = k;
              emitBlock(ph_.elems);
            },
            nextUnit_ && ph_.stages.size() == 1);
      nextUnit_ = nullptr;
    };
    if (!forms_.empty() && !rowTiles_) {
      emitColumnTiles(begin, end);
    } else if (ph_.workers == 0) {
      loop(begin, end, row);
    } else {
      // [begin, end) are workers; worker w runs units w, w + W, ... in order (workers <= units),
      // or with workerBlocks the units [w * per, min((w + 1) * per, units)).
      const int64_t W = ph_.workers;
      llvm::Value* n = units();
      llvm::Value* per = B_.CreateUDiv(B_.CreateAdd(n, i64(W - 1)), i64(W));
      loop(begin, end, [&](llvm::Value* w) {
        if (ph_.workerBlocks) {
          llvm::Value* lo = B_.CreateMul(w, per, "", true, true);
          llvm::Value* hi = B_.CreateAdd(lo, per, "", true, true);
          loop(lo, B_.CreateSelect(B_.CreateICmpSLT(hi, n), hi, n), row);
          return;
        }
        llvm::Value* trips = B_.CreateSDiv(B_.CreateSub(B_.CreateAdd(n, i64(W - 1)), w), i64(W));
        loop(i64(0), trips, [&](llvm::Value* j) {
          row(B_.CreateAdd(w, B_.CreateMul(j, i64(W), "", true, true), "", true, true));
        });
      });
    }
  }
  recordChecks();
  B_.CreateRetVoid();
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyFunction(*f, &os))
    throwError(ErrorCode::Internal,
               fmt::format("llvm emitter: invalid function {}: {}", name, err));
}

// Row lengths that are a multiple of this are the ones a specialized kernel walks without a
// remainder loop (the f32 vector loop's step on AVX-512: 16 lanes, unrolled 4 times; f64's 32
// divides it), and the common ones (sequence lengths of 128, 256, 384, 512). A class kernel's
// reduce phase that reads its row length as an argument is emitted twice: for row lengths that
// are such a multiple, reading the argument as one, and for any; its entry point calls the one
// the argument selects. One code serves the whole class still (the choice is made at run time),
// and an attention softmax over rows of 256 ran 1.07x its specialized kernel's time without it
// (BENCHMARKS.md, "Shape classes").
constexpr int64_t kRowMultiple = 64;

// The entry point of a phase emitted as `multiple` and `any` (above): loads the row-length
// argument and calls the function for it.
void emitRowDispatch(llvm::Module& m, const std::string& name, size_t numBuffers, int rowArg,
                     llvm::Function* multiple, llvm::Function* any) {
  llvm::LLVMContext& c = m.getContext();
  llvm::IRBuilder<> b(c);
  llvm::Function* f =
      llvm::Function::Create(multiple->getFunctionType(), llvm::Function::ExternalLinkage, name, m);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  f->addFnAttr(llvm::Attribute::NoFree);
  f->getArg(0)->addAttr(llvm::Attribute::NoAlias);
  f->getArg(0)->addAttr(llvm::Attribute::ReadOnly);
  b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", f));
  llvm::Type* ptr = b.getPtrTy();
  llvm::Value* sizes = b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, f->getArg(0), numBuffers));
  llvm::Value* row = b.CreateLoad(
      b.getInt64Ty(), b.CreateConstGEP1_64(b.getInt64Ty(), sizes, rowArg), "row_length");
  llvm::Value* low = b.CreateAnd(row, b.getInt64(kRowMultiple - 1));
  auto* yes = llvm::BasicBlock::Create(c, "multiple", f);
  auto* no = llvm::BasicBlock::Create(c, "any", f);
  b.CreateCondBr(b.CreateICmpEQ(low, b.getInt64(0)), yes, no);
  for (auto [block, callee] : {std::pair{yes, multiple}, std::pair{no, any}}) {
    b.SetInsertPoint(block);
    b.CreateCall(callee, {f->getArg(0), f->getArg(1), f->getArg(2)});
    b.CreateRetVoid();
  }
}

}  // namespace

std::vector<std::string> emitProgram(const lower::KernelProgram& p, const std::string& prefix,
                                     llvm::Module& m) {
  std::vector<std::string> names;
  for (size_t i = 0; i < p.phases.size(); ++i) {
    std::string name = fmt::format("{}_{}", prefix, i);
    const lower::SizeArgs& a = p.sizeArgs;
    const lower::Phase& ph = p.phases[i];
    const lower::PhaseSizeArgs* args = a.values.empty() ? nullptr : &a.phases[i];
    std::vector<llvm::Function*> made;
    if (args && ph.reduce && args->rowLength >= 0) {
      // Internal: the names are the module's own, so every module may use them.
      PhaseEmitter(m, ph, args, a.values.size(), kRowMultiple)
          .emit(name + "_multiple", llvm::Function::InternalLinkage);
      PhaseEmitter(m, ph, args, a.values.size())
          .emit(name + "_any", llvm::Function::InternalLinkage);
      emitRowDispatch(m, name, ph.buffers.size(), args->rowLength,
                      m.getFunction(name + "_multiple"), m.getFunction(name + "_any"));
      made = {m.getFunction(name), m.getFunction(name + "_multiple"), m.getFunction(name + "_any")};
    } else {
      PhaseEmitter(m, ph, args, a.values.size()).emit(name);
      made = {m.getFunction(name)};
    }
    // On every function the phase's stores may end up in after inlining.
    std::string streamed;
    for (int b : ph.host.streamed) streamed += fmt::format("{}{}", streamed.empty() ? "" : ",", b);
    if (!streamed.empty())
      for (llvm::Function* f : made) f->addFnAttr(rt::cpu::kStreamingBuffersAttr, streamed);
    names.push_back(name);
  }
  return names;
}

namespace {

std::string printModule(const llvm::Module& m) {
  std::string text;
  llvm::raw_string_ostream os(text);
  m.print(os, nullptr);
  return text;
}

}  // namespace

std::string programIR(const lower::KernelProgram& p, const std::string& prefix) {
  llvm::LLVMContext ctx;
  llvm::Module m(prefix, ctx);
  emitProgram(p, prefix, m);
  return printModule(m);
}

NamedIR namedProgramIR(const lower::KernelProgram& p,
                       const std::function<std::string(const std::string&)>& prefixFor) {
  static const std::string kNeutral = "stitch_kernel";
  llvm::LLVMContext ctx;
  llvm::Module m(kNeutral, ctx);
  emitProgram(p, kNeutral, m);
  NamedIR out;
  out.keyText = printModule(m);
  out.prefix = prefixFor(out.keyText);
  // Every function emitProgram named after the prefix: the entries (PREFIX_i) and the versions
  // of a phase they dispatch to (PREFIX_i_multiple, PREFIX_i_any), as programIR(p, prefix) names
  // them.
  const std::string neutral = kNeutral + "_";
  for (llvm::Function& f : m.functions())
    if (f.getName().starts_with(neutral))
      f.setName(out.prefix + "_" + f.getName().substr(neutral.size()).str());
  m.setModuleIdentifier(out.prefix);
  m.setSourceFileName(out.prefix);
  out.text = printModule(m);
  return out;
}

}  // namespace stitch::codegen
