// Lowering a fused kernel to a KernelProgram (design note in kernel_program.h).
//
// One recursive function, `value(node, index)`, gives the instruction computing a node at a flat
// index of its own shape; everything else (units, stages, stores, phases for grid barriers and
// horizontal parts) arranges where it is called. Instructions are hash-consed per scope, so the
// same index or value asked for twice is one instruction.
#include "lower/kernel_program.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

#include "fusion/op_class.h"
#include "ir/signature.h"
#include "lower/column_partials.h"
#include "lower/launch.h"
#include "lower/split_rows.h"
#include "runtime/support/checked.h"
#include "runtime/support/error.h"

namespace stitch::lower {

using ir::OpCode;

namespace {

using Dims = std::vector<int64_t>;

// Shapes here are planned values' (or parts of them), size-checked by bindInputs: within 2^62
// (support/checked.h), so strides and the index arithmetic below fit in int64.
int64_t product(const Dims& d) {
  auto n = checkedElementCount(d);
  STITCH_INTERNAL(n.has_value(), "lowering: dims [{}] were not size-checked", fmt::join(d, ", "));
  return *n;
}

Dims stridesOf(const Dims& shape) {
  Dims s(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;) s[k - 1] = s[k] * shape[k];
  return s;
}

// From the op's class in ops.def, so that a reduction added there is one here too.
bool isReduce(OpCode op) { return ir::opInfo(op).cls == ir::OpClass::Reduce; }

// Called for isReduce ops only. A reduction added to ops.def but not here fails at its first
// lowering (not silently as a product); the default stands for the ~50 non-reduce ops.
ReduceOp reduceOpOf(OpCode op) {
  switch (op) {
    case OpCode::ReduceSum: return ReduceOp::Sum;
    case OpCode::ReduceMax: return ReduceOp::Max;
    case OpCode::ReduceMin: return ReduceOp::Min;
    case OpCode::ReduceMean: return ReduceOp::Mean;
    case OpCode::ReduceProd: return ReduceOp::Prod;
    default: break;
  }
  throwError(ErrorCode::Internal,
             fmt::format("lowering: reduction {} has no accumulator op", ir::opName(op)));
}

// A flat index into some shape, with its coordinates when they are known (else computed on
// demand by division).
struct Index {
  int flat = -1;
  std::vector<int> coords;
  bool known = false;
  // A view's index (a reshape's operand, a value of the domain's size in another shape): the
  // coordinates of the same flat index in the shape it was viewed from, when they were known.
  // coordsOf takes the trailing axes the two shapes share from them ([B, T, C] and [B * T, C]
  // share C): the same instructions, not a remainder of the flat index, which the host
  // emitter's tile proofs follow and which a box's known coordinate survives (walkBox). Host
  // programs only (PhaseBuilder::keepViews): the GPU emitter's register use was tuned on the
  // remainders (a random graph's kernel spilled 8 bytes on sm_80 with the shared coordinates),
  // and no device has measured the difference yet.
  std::vector<int> viaCoords;
  std::vector<int64_t> viaShape;
};

// The index at flat position `flat`, its coordinates not yet known.
Index flatIndex(int flat) {
  Index r;
  r.flat = flat;
  return r;
}

// Index `idx` of a value of shape `shape`, as the index of a view of it in another shape (the
// same flat index, the coordinates kept for coordsOf when `keep`).
Index viewIndex(const Index& idx, const std::vector<int64_t>& shape, bool keep) {
  Index r = flatIndex(idx.flat);
  if (!keep) return r;
  if (idx.known) {
    r.viaCoords = idx.coords;
    r.viaShape = shape;
  } else {
    r.viaCoords = idx.viaCoords;
    r.viaShape = idx.viaShape;
  }
  return r;
}

using CseKey = std::tuple<int, int, int, int, int, int, int, int, int, int64_t, uint64_t>;

// The value of dim d in the signature whose node shapes are `shapes`: a static size, or a
// symbol's, read off a graph input that has it (attributes may name input symbols only).
int64_t concreteDim(const ir::Graph& g, const std::vector<Dims>& shapes, const ir::Dim& d) {
  if (d.isStatic()) return d.size;
  for (int in : g.inputs()) {
    const ir::Shape& s = g.node(in).type.shape;
    for (size_t a = 0; a < s.size(); ++a)
      if (s[a] == d) return shapes[static_cast<size_t>(in)][a];
  }
  throwError(ErrorCode::Internal,
             fmt::format("lowering: symbol {} is not a dim of any graph input", d.symbol));
}

struct Scope {
  Block* block;
  std::map<CseKey, int> cse;
  std::map<std::pair<int, int>, int> memo;  // (node, flat index inst) -> value inst
};

class PhaseBuilder {
 public:
  // `checks` collects the nodes whose index checks the program records (KernelProgram::checks,
  // by position), across the program's phases.
  PhaseBuilder(const ir::Graph& g, const std::vector<Dims>& shapes, Phase& ph,
               const std::map<int, int>& materialized, const std::vector<bool>& inKernel,
               std::vector<int>& checks)
      : g_(g),
        shapes_(shapes),
        ph_(ph),
        materialized_(materialized),
        inKernel_(inKernel),
        checks_(checks) {}

  // Builds the phase: domain, reduced axes, the values to store (node, program param).
  void build(const std::vector<std::pair<int, int>>& stores);
  // Builds the combine phase of column partials (lower/column_partials.h): a unit per column
  // reduces the `workers` partials of each of `partials`, then stores `stores` (node, program
  // param): column results, and values computed from them at the column's index.
  void buildCombine(int64_t workers, int64_t rowLength, const std::vector<ColumnPartial>& partials,
                    const std::vector<std::pair<int, int>>& stores);
  // Column reductions of the domain (node, partials param) the rows phase carries as per-worker
  // partials over `workers` workers (lower/column_partials.h). Before build.
  void carryColumns(std::vector<std::pair<int, int>> columns, int64_t workers, bool blocks) {
    columns_ = std::move(columns);
    workers_ = workers;
    workerBlocks_ = blocks;
  }
  // Views keep their coordinates (Index::viaCoords). Before build.
  void keepViews() { views_ = true; }
  // The phase walks only the box of its domain whose coordinate along `axis` lies in
  // [begin, end) (a part of a concat, see concatBoxes); in a reduce phase `axis` is a kept one.
  // Before build.
  void walkBox(size_t axis, int64_t begin, int64_t end) { box_ = Box{axis, begin, end}; }
  // The phase's domain refines the kernel's (`domain`, `reduced`: an axis split in two, the same
  // positions; see concatBoxes): the kernel's row reductions are those of its domain. Before
  // build.
  void refines(Dims domain, std::vector<bool> reduced) {
    kernelDomain_ = std::move(domain);
    kernelReduced_ = std::move(reduced);
  }

  std::vector<int> inputParams;   // program params read, by position
  std::vector<int> outputParams;  // program params written, by position

 private:
  int add(Inst in);
  int constI(int64_t v) {
    Inst in;
    in.kind = InstKind::Const;
    in.ivalue = v;
    return add(in);
  }
  int kindOnly(InstKind k) {
    Inst in;
    in.kind = k;
    return add(in);
  }
  const Inst& inst(int id) const { return ph_.insts[static_cast<size_t>(id)]; }
  bool isConst(int id, int64_t* v) const {
    const Inst& in = inst(id);
    if (in.kind != InstKind::Const || in.dtype != ir::DType::I64) return false;
    *v = in.ivalue;
    return true;
  }
  // Index k (any int dtype) checked against [0, n) for `node`'s check: the CheckIndex value, i64.
  int checkIndex(int k, int64_t n, int node) {
    if (inst(k).dtype != ir::DType::I64) k = op(OpCode::Cast, ir::DType::I64, k);
    auto it = std::find(checks_.begin(), checks_.end(), node);
    if (it == checks_.end()) it = checks_.insert(it, node);
    Inst in;
    in.kind = InstKind::CheckIndex;
    in.args[0] = k;
    in.ivalue = n;
    in.check = static_cast<int>(it - checks_.begin());
    return add(in);
  }
  int iadd(int a, int b);
  int imulc(int a, int64_t c);
  int idivc(int a, int64_t c);
  int iremc(int a, int64_t c);
  int op(OpCode code, ir::DType t, int a, int b = -1, int c = -1) {
    Inst in;
    in.kind = InstKind::Op;
    in.op = code;
    in.dtype = t;
    in.args[0] = a;
    in.args[1] = b;
    in.args[2] = c;
    return add(in);
  }
  std::vector<int> coordsOf(Index& idx, const Dims& shape);
  int flatOf(const std::vector<int>& coords, const Dims& shape);
  Index makeIndex(std::vector<int> coords, const Dims& shape) {
    Index r;
    r.flat = flatOf(coords, shape);
    r.coords = std::move(coords);
    r.known = true;
    return r;
  }
  Index broadcastIndex(Index& from, const Dims& fromShape, const Dims& toShape);
  int value(int node, Index idx);
  int valueUncached(int node, Index& idx);
  int load(int param, ir::DType t, int flat);
  void store(int param, ir::DType t, int flat, int v);
  bool isRowReduction(int node) const;
  // The index of `node` at domain position `pos`; perElem: it varies along the reduced axes.
  Index fromDomain(int node, Index& pos, bool* perElem);
  void push(Block* b) { scopes_.push_back(Scope{b, {}, {}}); }
  void pop() { scopes_.pop_back(); }
  // Buffers, absolute store positions and levels, once the blocks are built.
  void finish();

  const ir::Graph& g_;
  const std::vector<Dims>& shapes_;
  Phase& ph_;
  const std::map<int, int>& materialized_;
  const std::vector<bool>& inKernel_;
  std::vector<Scope> scopes_;
  std::map<int, int> accOf_;  // row reduction node -> accumulator
  int unit_ = -1;
  bool views_ = false;
  int row_ = -1;  // reduce phases: the domain row the unit stands for (unit_ but in a box)
  std::vector<std::pair<int, int>> columns_;
  int64_t workers_ = 0;
  bool workerBlocks_ = false;
  std::vector<int>& checks_;
  struct Box {
    size_t axis;
    int64_t begin, end;
  };
  std::optional<Box> box_;
  Dims kernelDomain_;  // empty: the phase's own
  std::vector<bool> kernelReduced_;
  // The domain coordinate along the box's axis (an instruction whose value lies in
  // [begin, end)): a concat read at exactly this coordinate reads one part, no select.
  int boxCoord_ = -1;
};

int PhaseBuilder::add(Inst in) {
  bool pure = in.kind != InstKind::Store && in.kind != InstKind::Accumulate;
  CseKey key{};
  if (pure) {
    uint64_t fbits;
    std::memcpy(&fbits, &in.fvalue, sizeof fbits);
    key = CseKey{static_cast<int>(in.kind),
                 static_cast<int>(in.dtype),
                 static_cast<int>(in.op),
                 in.args[0],
                 in.args[1],
                 in.args[2],
                 in.buffer,
                 in.acc,
                 in.check,
                 in.ivalue,
                 fbits};
    for (size_t s = scopes_.size(); s-- > 0;)
      if (auto it = scopes_[s].cse.find(key); it != scopes_[s].cse.end()) return it->second;
  }
  int id = static_cast<int>(ph_.insts.size());
  ph_.insts.push_back(in);
  scopes_.back().block->insts.push_back(id);
  if (pure) scopes_.back().cse[key] = id;
  return id;
}

int PhaseBuilder::iadd(int a, int b) {
  int64_t x, y;
  bool ca = isConst(a, &x), cb = isConst(b, &y);
  if (ca && cb) return constI(x + y);
  if (ca && x == 0) return b;
  if (cb && y == 0) return a;
  Inst in;
  in.kind = InstKind::IAdd;
  in.args[0] = std::min(a, b);
  in.args[1] = std::max(a, b);
  return add(in);
}

int PhaseBuilder::imulc(int a, int64_t c) {
  int64_t x;
  if (isConst(a, &x)) return constI(x * c);
  if (c == 1) return a;
  if (c == 0) return constI(0);
  Inst in;
  in.kind = InstKind::IMulC;
  in.args[0] = a;
  in.ivalue = c;
  return add(in);
}

int PhaseBuilder::idivc(int a, int64_t c) {
  int64_t x;
  if (isConst(a, &x)) return constI(x / c);
  if (c == 1) return a;
  Inst in;
  in.kind = InstKind::IDivC;
  in.args[0] = a;
  in.ivalue = c;
  return add(in);
}

int PhaseBuilder::iremc(int a, int64_t c) {
  int64_t x;
  if (isConst(a, &x)) return constI(x % c);
  if (c == 1) return constI(0);
  Inst in;
  in.kind = InstKind::IRemC;
  in.args[0] = a;
  in.ivalue = c;
  return add(in);
}

std::vector<int> PhaseBuilder::coordsOf(Index& idx, const Dims& shape) {
  if (idx.known) return idx.coords;
  if (!idx.viaShape.empty()) {
    // Trailing axes of equal size have equal coordinates (both shapes hold the same number of
    // elements, row-major); size-1 axes have coordinate 0. The leading rest is split from its
    // own flat index.
    const Dims& vs = idx.viaShape;
    std::vector<int> c(shape.size());
    size_t i = shape.size(), j = vs.size();
    while (i > 0 && j > 0) {
      if (shape[i - 1] == 1) {
        c[--i] = constI(0);
      } else if (vs[j - 1] == 1) {
        --j;
      } else if (shape[i - 1] == vs[j - 1]) {
        c[i - 1] = idx.viaCoords[j - 1];
        --i, --j;
      } else {
        break;
      }
    }
    if (i > 0) {
      Index rest =
          flatIndex(flatOf(std::vector<int>(idx.viaCoords.begin(), idx.viaCoords.begin() + j),
                           Dims(vs.begin(), vs.begin() + static_cast<long>(j))));
      std::vector<int> lead =
          coordsOf(rest, Dims(shape.begin(), shape.begin() + static_cast<long>(i)));
      std::copy(lead.begin(), lead.end(), c.begin());
    }
    idx.coords = c;
    idx.known = true;
    return c;
  }
  std::vector<int> c(shape.size());
  int rest = idx.flat;
  for (size_t k = shape.size(); k-- > 0;) {
    if (k == 0) {
      c[k] = shape[k] == 1 ? constI(0) : rest;  // rest < shape[0] for in-range indices
    } else {
      c[k] = iremc(rest, std::max<int64_t>(shape[k], 1));
      rest = idivc(rest, std::max<int64_t>(shape[k], 1));
    }
  }
  idx.coords = c;
  idx.known = true;
  return c;
}

int PhaseBuilder::flatOf(const std::vector<int>& coords, const Dims& shape) {
  Dims st = stridesOf(shape);
  int flat = constI(0);
  for (size_t k = 0; k < shape.size(); ++k)
    if (shape[k] != 1) flat = iadd(flat, imulc(coords[k], st[k]));
  return flat;
}

Index PhaseBuilder::broadcastIndex(Index& from, const Dims& fromShape, const Dims& toShape) {
  if (fromShape == toShape) return from;
  if (product(toShape) == 1) return makeIndex(std::vector<int>(toShape.size(), constI(0)), toShape);
  std::vector<int> c = coordsOf(from, fromShape);
  std::vector<int> out(toShape.size());
  size_t lead = fromShape.size() - toShape.size();
  for (size_t j = 0; j < toShape.size(); ++j) out[j] = toShape[j] == 1 ? constI(0) : c[lead + j];
  return makeIndex(std::move(out), toShape);
}

int PhaseBuilder::load(int param, ir::DType t, int flat) {
  auto it = std::find(inputParams.begin(), inputParams.end(), param);
  int pos = static_cast<int>(it - inputParams.begin());
  if (it == inputParams.end()) inputParams.push_back(param);
  Inst in;
  in.kind = InstKind::Load;
  in.dtype = t;
  in.buffer = pos;
  in.args[0] = flat;
  return add(in);
}

void PhaseBuilder::store(int param, ir::DType t, int flat, int v) {
  auto it = std::find(outputParams.begin(), outputParams.end(), param);
  int pos = static_cast<int>(it - outputParams.begin());
  if (it == outputParams.end()) outputParams.push_back(param);
  Inst in;
  in.kind = InstKind::Store;
  in.dtype = t;
  in.buffer = pos;  // made absolute (after the inputs) when the phase is finished
  in.args[0] = flat;
  in.args[1] = v;
  add(in);
}

bool PhaseBuilder::isRowReduction(int node) const {
  const ir::Node& n = g_.node(node);
  if (!isReduce(n.op) || materialized_.count(node) || !ph_.reduce) return false;
  const bool refined = !kernelDomain_.empty();
  const Dims& d = refined ? kernelDomain_ : ph_.domain;
  if (shapes_[n.operands[0]] != d) return false;
  std::vector<bool> r(d.size(), false);
  for (int64_t a : n.attrs.getInts("axes"))
    if (d[static_cast<size_t>(a)] != 1) r[static_cast<size_t>(a)] = true;
  return r == (refined ? kernelReduced_ : ph_.reduced);
}

int PhaseBuilder::value(int node, Index idx) {
  std::pair<int, int> key{node, idx.flat};
  for (size_t s = scopes_.size(); s-- > 0;)
    if (auto it = scopes_[s].memo.find(key); it != scopes_[s].memo.end()) return it->second;
  int v = valueUncached(node, idx);
  scopes_.back().memo[key] = v;
  return v;
}

int PhaseBuilder::valueUncached(int node, Index& idx) {
  const ir::Node& n = g_.node(node);
  const Dims& shape = shapes_[node];
  ir::DType t = n.type.dtype;
  if (auto it = materialized_.find(node); it != materialized_.end())
    return load(it->second, t, idx.flat);
  auto operand = [&](int k) {
    int o = n.operands[static_cast<size_t>(k)];
    return value(o, broadcastIndex(idx, shape, shapes_[o]));
  };
  switch (ir::opInfo(n.op).cls) {
    case ir::OpClass::Source: {
      if (n.op == OpCode::Input)
        throwError(ErrorCode::Internal,
                   fmt::format("lowering: input {} is not a kernel input", n.name));
      if (n.op == OpCode::Iota) {
        std::vector<int> c = coordsOf(idx, shape);
        return op(OpCode::Cast, t, c[static_cast<size_t>(n.attrs.getInt("axis"))]);
      }
      double v = n.attrs.getFloat("value");
      Inst in;
      in.kind = InstKind::Const;
      in.dtype = t;
      if (ir::isFloat(t)) in.fvalue = ir::roundToFloat(v, t);
      else if (ir::isInt(t)) in.ivalue = static_cast<int64_t>(v);
      else in.ivalue = v != 0.0;
      return add(in);
    }
    case ir::OpClass::Unary:
    case ir::OpClass::Cast: return op(n.op, t, operand(0));
    case ir::OpClass::Binary: return op(n.op, t, operand(0), operand(1));
    case ir::OpClass::Select: return op(n.op, t, operand(0), operand(1), operand(2));
    case ir::OpClass::Random:
      // The counter is the element's flat index in the result (support/philox.h).
      return op(n.op, t, idx.flat, operand(0), operand(1));
    case ir::OpClass::Gather: {
      // The data is read where the index operand points along `axis` (the planner keeps the data
      // in memory: it is a kernel input, so this is one load), the index checked: one outside
      // the axis fails the run, and the load reads position 0 instead. An empty axis has no
      // position to read: every index fails, and the value is a 0 that nothing may see.
      const Dims& inShape = shapes_[n.operands[0]];
      auto axis = static_cast<size_t>(n.attrs.getInt("axis"));
      std::vector<int> c = coordsOf(idx, shape);
      int k = checkIndex(operand(1), inShape[axis], node);
      if (inShape[axis] == 0) {
        // The check is a root of its own (kernel_program.h): it runs though nothing reads it.
        Inst zero;
        zero.kind = InstKind::Const;
        zero.dtype = t;
        return add(zero);
      }
      c[axis] = k;
      return value(n.operands[0], makeIndex(std::move(c), inShape));
    }
    case ir::OpClass::IndexCheck: {
      int k = checkIndex(operand(0), concreteDim(g_, shapes_, n.attrs.getDims("size").at(0)), node);
      return t == ir::DType::I64 ? k : op(OpCode::Cast, t, k);
    }
    case ir::OpClass::Reduce: {
      if (auto it = accOf_.find(node); it != accOf_.end()) {
        Inst in;
        in.kind = InstKind::AccRead;
        in.dtype = t;
        in.acc = it->second;
        return add(in);
      }
      // A reduction over size-1 axes only is its input at the same place.
      const Dims& inShape = shapes_[n.operands[0]];
      std::vector<bool> red(inShape.size(), false);
      int64_t count = 1;
      for (int64_t a : n.attrs.getInts("axes")) {
        red[static_cast<size_t>(a)] = true;
        count *= inShape[static_cast<size_t>(a)];
      }
      STITCH_CHECK(count == 1, ErrorCode::Unsupported,
                   "lowering: reduction {} is neither a row reduction of its kernel nor "
                   "materialized",
                   n.name);
      std::vector<int> c = coordsOf(idx, shape);
      bool keep = n.attrs.getBool("keepdims");
      std::vector<int> in(inShape.size());
      size_t j = 0;
      for (size_t a = 0; a < inShape.size(); ++a) {
        if (red[a]) {
          in[a] = constI(0);
          if (keep) ++j;
        } else {
          in[a] = c[j++];
        }
      }
      int x = value(n.operands[0], makeIndex(std::move(in), inShape));
      // Mean over one element is the element (x / 1); the others are the element itself.
      return x;
    }
    case ir::OpClass::Layout: break;
    case ir::OpClass::Composite:
      throwError(ErrorCode::Unsupported,
                 fmt::format("lowering: composite {} ({}) must be decomposed first", n.name,
                             ir::opName(n.op)));
  }
  int src = n.operands[0];
  const Dims& inShape = shapes_[src];
  switch (n.op) {
    case OpCode::Reshape: return value(src, viewIndex(idx, shape, views_));
    case OpCode::BroadcastTo: return value(src, broadcastIndex(idx, shape, inShape));
    case OpCode::Transpose: {
      std::vector<int> c = coordsOf(idx, shape);
      const auto& perm = n.attrs.getInts("perm");
      std::vector<int> in(inShape.size());
      for (size_t k = 0; k < perm.size(); ++k) in[static_cast<size_t>(perm[k])] = c[k];
      return value(src, makeIndex(std::move(in), inShape));
    }
    case OpCode::Slice: {
      std::vector<int> c = coordsOf(idx, shape);
      const auto& starts = n.attrs.getInts("starts");
      const auto& steps = n.attrs.getInts("steps");
      std::vector<int> in(inShape.size());
      for (size_t k = 0; k < in.size(); ++k) in[k] = iadd(imulc(c[k], steps[k]), constI(starts[k]));
      return value(src, makeIndex(std::move(in), inShape));
    }
    case OpCode::Concat: {
      std::vector<int> c = coordsOf(idx, shape);
      auto axis = static_cast<size_t>(n.attrs.getInt("axis"));
      if (box_ && c[axis] == boxCoord_) {
        // Read at the walked box's coordinate: the part holding the whole box, at its own index.
        int64_t offset = 0;
        for (int o : n.operands) {
          int64_t len = shapes_[o][axis];
          if (offset <= box_->begin && box_->end <= offset + len) {
            std::vector<int> in = c;
            in[axis] = iadd(c[axis], constI(-offset));
            return value(o, makeIndex(std::move(in), shapes_[o]));
          }
          offset += len;
        }
      }
      int result = -1;
      int64_t offset = 0;
      std::vector<std::pair<int64_t, int>> parts;  // (end along axis, value)
      for (int o : n.operands) {
        int64_t len = shapes_[o][axis];
        if (len > 0) {
          std::vector<int> in = c;
          int local = iadd(c[axis], constI(-offset));
          local = op(OpCode::Maximum, ir::DType::I64, local, constI(0));
          local = op(OpCode::Minimum, ir::DType::I64, local, constI(len - 1));
          in[axis] = local;
          parts.emplace_back(offset + len, value(o, makeIndex(std::move(in), shapes_[o])));
        }
        offset += len;
      }
      if (parts.empty()) {
        Inst z;
        z.kind = InstKind::Const;
        z.dtype = t;
        return add(z);
      }
      result = parts.back().second;
      for (size_t j = parts.size() - 1; j-- > 0;) {
        int cond = op(OpCode::Lt, ir::DType::Bool, c[axis], constI(parts[j].first));
        result = op(OpCode::Select, t, cond, parts[j].second, result);
      }
      return result;
    }
    default: break;
  }
  throwError(ErrorCode::Internal, fmt::format("lowering: unhandled op {}", ir::opName(n.op)));
}

Index PhaseBuilder::fromDomain(int node, Index& pos, bool* perElem) {
  const Dims& s = shapes_[node];
  const Dims& d = ph_.domain;
  size_t rank = d.size();
  if (isRowReduction(node)) {  // one value per row, whatever its shape looks like
    *perElem = false;
    return flatIndex(row_);
  }
  bool aligned = s.size() <= rank || std::all_of(s.begin(), s.end() - static_cast<long>(rank),
                                                 [](int64_t x) { return x == 1; });
  for (size_t i = 0; aligned && i < rank; ++i) {
    int64_t sd = i + s.size() >= rank ? s[i + s.size() - rank] : 1;
    aligned = sd == d[i] || sd == 1;
  }
  if (aligned && product(s) == product(d)) {
    // Only size-1 dims differ: the same flat index (keeps loop indices contiguous).
    *perElem = false;
    for (size_t i = 0; i < rank; ++i)
      if (d[i] != 1 && ph_.reduced[i]) *perElem = true;
    if (s == d) return pos;
    return viewIndex(pos, d, views_);
  }
  if (aligned) {
    *perElem = false;
    std::vector<int> c = coordsOf(pos, d);
    std::vector<int> out(s.size());
    for (size_t j = 0; j < s.size(); ++j) {
      if (j + rank < s.size()) {
        out[j] = constI(0);
        continue;
      }
      size_t i = j + rank - s.size();
      if (s[j] == 1 && d[i] != 1) {
        out[j] = constI(0);
      } else {
        out[j] = c[i];
        if (d[i] != 1 && ph_.reduced[i]) *perElem = true;
      }
    }
    return makeIndex(std::move(out), s);
  }
  if (product(s) == product(d)) {
    *perElem = true;
    return viewIndex(pos, d, views_);
  }
  int64_t rows = 1;
  for (size_t i = 0; i < rank; ++i)
    if (!ph_.reduced[i]) rows *= d[i];
  STITCH_INTERNAL(ph_.reduce && product(s) == rows, "lowering: {} does not fit the domain",
                  g_.node(node).name);
  *perElem = false;
  return flatIndex(row_);
}

void PhaseBuilder::build(const std::vector<std::pair<int, int>>& stores) {
  const Dims& d = ph_.domain;
  Dims st = stridesOf(d);
  if (!ph_.reduce) {
    Dims walk = d;
    if (box_) walk[box_->axis] = box_->end - box_->begin;
    ph_.total = product(walk);
    ph_.chunk = 1024;
    ph_.units = (ph_.total + ph_.chunk - 1) / ph_.chunk;
    push(&ph_.elems);
    Index pos = flatIndex(kindOnly(InstKind::LoopIndex));
    if (box_) {
      // The loop index walks the box; values are read at the domain position it stands for.
      std::vector<int> c = coordsOf(pos, walk);
      c[box_->axis] = iadd(c[box_->axis], constI(box_->begin));
      boxCoord_ = c[box_->axis];
      pos = makeIndex(std::move(c), d);
    }
    for (auto [node, param] : stores) {
      bool perElem;
      Index idx = fromDomain(node, pos, &perElem);
      int v = value(node, idx);
      store(param, g_.node(node).type.dtype, idx.flat, v);
    }
    pop();
  } else {
    Dims keptDims, redDims;
    for (size_t i = 0; i < d.size(); ++i) (ph_.reduced[i] ? redDims : keptDims).push_back(d[i]);
    ph_.units = product(keptDims);
    ph_.rowLength = product(redDims);
    push(&ph_.pre);
    unit_ = kindOnly(InstKind::UnitIndex);
    row_ = unit_;
    Index u = flatIndex(unit_);
    std::vector<int> kept;
    if (box_) {
      // The units walk the box's rows (the box's axis is a kept one); values are read at the
      // domain row each stands for.
      size_t axis = 0;  // the box's axis among the kept ones
      for (size_t i = 0; i < box_->axis; ++i) axis += ph_.reduced[i] ? 0 : 1;
      Dims walk = keptDims;
      walk[axis] = box_->end - box_->begin;
      ph_.units = product(walk);
      kept = coordsOf(u, walk);
      kept[axis] = iadd(kept[axis], constI(box_->begin));
      boxCoord_ = kept[axis];
      row_ = flatOf(kept, keptDims);
    } else {
      kept = coordsOf(u, keptDims);
    }
    auto positionAt = [&](const std::vector<int>& red) {
      std::vector<int> c(d.size());
      size_t a = 0, b = 0;
      for (size_t i = 0; i < d.size(); ++i) c[i] = ph_.reduced[i] ? red[b++] : kept[a++];
      return makeIndex(std::move(c), d);
    };
    // The domain position of row position k (the loop index). Its flat index takes each run of
    // adjacent reduced axes as one axis: the run's coordinate (k / inner) % size times the
    // stride of its last axis equals the sum of its axes' coordinates times their strides, but
    // without splitting k per axis. A batch norm's [N, C, H, W] row walks H and W as k % (H W),
    // which the host emitter's tile proof sees is affine in k, where (k / W) % H * W + k % W
    // is a staircase to it. The per-axis coordinates stay known for broadcast operands. Only a
    // row of several runs (a middle reduction) is rewritten: a single run's flat index is left
    // as flatOf builds it, which the GPU emitter's unrolled row walks were tuned on (one random
    // graph spilled on sm_80 with the merged form's vector loads beside per-element divisions).
    // Maximal runs of adjacent reduced axes, [first, last], of more than one element.
    std::vector<std::pair<size_t, size_t>> runs;
    for (size_t i = 0; i < d.size(); ++i) {
      if (!ph_.reduced[i]) continue;
      size_t last = i;
      int64_t size = d[i];
      while (last + 1 < d.size() && ph_.reduced[last + 1]) size *= d[++last];
      if (size != 1) runs.emplace_back(i, last);
      i = last;
    }
    auto walkPosition = [&](Index& k) {
      Index pos = positionAt(coordsOf(k, redDims));
      if (runs.size() < 2) return pos;
      int flat = constI(0);
      for (size_t i = 0; i < d.size(); ++i)
        if (!ph_.reduced[i] && d[i] != 1) flat = iadd(flat, imulc(pos.coords[i], st[i]));
      int64_t inner = 1;  // product of the reduced axes after the run
      for (size_t r = runs.size(); r-- > 0;) {
        auto [first, last] = runs[r];
        int64_t size = 1;
        for (size_t i = first; i <= last; ++i) size *= d[i];
        int run = inner == 1 ? k.flat : idivc(k.flat, inner);
        if (r > 0) run = iremc(run, size);  // the outermost run: k / inner < size already
        flat = iadd(flat, imulc(run, st[last]));
        inner *= size;
      }
      pos.flat = flat;
      return pos;
    };
    // Row reductions reachable from the stores, with their stage (reduction depth).
    std::map<int, int> depth;
    std::vector<int> rowReds;
    std::function<int(int)> depthOf = [&](int n) -> int {
      if (auto it = depth.find(n); it != depth.end()) return it->second;
      int dp = 0;
      if (!materialized_.count(n) && inKernel_[static_cast<size_t>(n)]) {
        for (int o : g_.node(n).operands)
          dp = std::max(dp, depthOf(o) + (isRowReduction(o) ? 1 : 0));
        if (isRowReduction(n)) rowReds.push_back(n);
      }
      depth[n] = dp;
      return dp;
    };
    for (auto [node, param] : stores) depthOf(node);
    for (auto [node, param] : columns_) depthOf(g_.node(node).operands[0]);
    std::sort(rowReds.begin(), rowReds.end());
    int stages = 0;
    for (int r : rowReds) {
      Accumulator a;
      a.node = r;
      a.op = reduceOpOf(g_.node(r).op);
      a.dtype = g_.node(r).type.dtype;
      a.count = ph_.rowLength;
      a.stage = depth[r];
      stages = std::max(stages, a.stage + 1);
      ph_.accs.push_back(a);
    }
    // Index checks of a value that is the row's (a label of [N, 1] against rows of [N, C]) and
    // needs none of the row's reductions run once per row, in `pre`: the row's walks find them
    // there (the index is the row's own, hash-consed), and do not carry the check's reduction
    // through every element (on the host it would halve the vector width of an f32 row walk:
    // an i64 lane per element).
    // (Only where there is one: the position's index math, left in `pre`, would be shared by
    // the later blocks, which moves register pressure on a GPU.)
    std::vector<int> checked;
    for (const auto& [n, dp] : depth) {
      const OpCode code = g_.node(n).op;
      if (dp == 0 && !isRowReduction(n) && inKernel_[static_cast<size_t>(n)] &&
          !materialized_.count(n) && (code == OpCode::CheckIndex || code == OpCode::Gather))
        checked.push_back(n);
    }
    if (!checked.empty()) {
      Index pos0 = positionAt(std::vector<int>(redDims.size(), constI(0)));
      for (int n : checked) {
        bool perElem = true;
        Index idx = fromDomain(n, pos0, &perElem);
        if (!perElem) value(n, idx);
      }
    }
    ph_.stages.resize(static_cast<size_t>(stages));
    for (int s = 0; s < stages; ++s) {
      Stage& stage = ph_.stages[static_cast<size_t>(s)];
      push(&stage.body);
      Index k = flatIndex(kindOnly(InstKind::LoopIndex));
      Index pos = walkPosition(k);
      for (size_t a = 0; a < ph_.accs.size(); ++a) {
        if (ph_.accs[a].stage != s) continue;
        stage.accs.push_back(static_cast<int>(a));
        const int operand = g_.node(ph_.accs[a].node).operands[0];
        int v = value(operand, shapes_[operand] == d ? pos : viewIndex(pos, d, views_));
        Inst in;
        in.kind = InstKind::Accumulate;
        in.dtype = ph_.accs[a].dtype;
        in.acc = static_cast<int>(a);
        in.args[0] = v;
        add(in);
      }
      pop();
      for (size_t a = 0; a < ph_.accs.size(); ++a)
        if (ph_.accs[a].stage == s) accOf_[ph_.accs[a].node] = static_cast<int>(a);
    }
    push(&ph_.post);
    Index pos0 = positionAt(std::vector<int>(redDims.size(), constI(0)));
    std::vector<std::pair<int, int>> elemStores;
    for (auto [node, param] : stores) {
      bool perElem;
      Index idx = fromDomain(node, pos0, &perElem);
      if (perElem) {
        elemStores.emplace_back(node, param);
        continue;
      }
      store(param, g_.node(node).type.dtype, idx.flat, value(node, idx));
    }
    if (!elemStores.empty() || !columns_.empty()) {
      push(&ph_.elems);
      Index k = flatIndex(kindOnly(InstKind::LoopIndex));
      Index pos = walkPosition(k);
      for (auto [node, param] : elemStores) {
        bool perElem;
        Index idx = fromDomain(node, pos, &perElem);
        store(param, g_.node(node).type.dtype, idx.flat, value(node, idx));
      }
      // Column partials: partial[w, k] = (first unit of worker w ? 0 : partial[w, k]) + x.
      if (!columns_.empty()) {
        ph_.workers = workers_;
        ph_.workerBlocks = workerBlocks_;
        // Worker w's first unit is w (round robin) or w * per (blocks).
        const int64_t per = (ph_.units + workers_ - 1) / workers_;
        int first = workerBlocks_ ? op(OpCode::Eq, ir::DType::Bool, iremc(unit_, per), constI(0))
                                  : op(OpCode::Lt, ir::DType::Bool, unit_, constI(workers_));
        int worker = workerBlocks_ ? idivc(unit_, per) : iremc(unit_, workers_);
        int at = iadd(imulc(worker, ph_.rowLength), k.flat);
        for (auto [node, param] : columns_) {
          int input = g_.node(node).operands[0];
          ir::DType t = partialDType(g_.node(node).type.dtype);
          int x = value(input, pos);
          if (g_.node(input).type.dtype != t) x = op(OpCode::Cast, t, x);
          int sum = op(OpCode::Add, t, load(param, t, at), x);
          store(param, t, at, op(OpCode::Select, t, first, x, sum));
        }
      }
      pop();
    }
    pop();
    pop();
  }
  finish();
}

void PhaseBuilder::finish() {
  ph_.numInputs = static_cast<int>(inputParams.size());
  ph_.buffers = inputParams;
  ph_.buffers.insert(ph_.buffers.end(), outputParams.begin(), outputParams.end());
  for (Inst& in : ph_.insts)
    if (in.kind == InstKind::Store) in.buffer += ph_.numInputs;
  ph_.levels.units = ph_.units;
  ph_.levels.elementsPerThread = ph_.reduce ? ph_.rowLength : ph_.chunk;
}

void PhaseBuilder::buildCombine(int64_t workers, int64_t rowLength,
                                const std::vector<ColumnPartial>& partials,
                                const std::vector<std::pair<int, int>>& stores) {
  ph_.reduce = true;
  ph_.domain = {workers, rowLength};
  ph_.reduced = {true, false};
  ph_.units = rowLength;
  ph_.rowLength = workers;
  push(&ph_.pre);
  unit_ = kindOnly(InstKind::UnitIndex);
  ph_.stages.resize(1);
  push(&ph_.stages[0].body);
  // Partial (w, column) of every reduction, w the loop index.
  const int at = iadd(imulc(kindOnly(InstKind::LoopIndex), rowLength), unit_);
  for (size_t j = 0; j < partials.size(); ++j) {
    const ColumnPartial& c = partials[j];
    Accumulator acc;
    acc.node = c.node;
    acc.op = c.op;
    acc.dtype = c.dtype;
    acc.count = c.count;  // the rows: a mean of the original reduction, not of the partials
    acc.stage = 0;
    const int a = static_cast<int>(ph_.accs.size());
    ph_.accs.push_back(acc);
    ph_.stages[0].accs.push_back(a);
    // No workers (no rows): no partials to read; each result is its reduction's identity (a
    // mean divides by zero rows, as the reference does).
    if (workers > 0) {
      Inst in;
      in.kind = InstKind::Accumulate;
      in.dtype = c.dtype;
      in.acc = a;
      in.args[0] = load(c.partialParam, partialDType(c.dtype), at);
      add(in);
    }
  }
  pop();
  for (size_t j = 0; j < partials.size(); ++j) accOf_[partials[j].node] = static_cast<int>(j);
  // The column results and the values of them are one per column: the unit is their flat index.
  push(&ph_.post);
  for (auto [node, param] : stores)
    store(param, g_.node(node).type.dtype, unit_, value(node, flatIndex(unit_)));
  pop();
  pop();
  finish();
}

// Connected parts of the kernel's nodes (producer->consumer edges inside the kernel, and the
// extra `links`).
std::vector<std::vector<int>> parts(const ir::Graph& g, const std::vector<int>& nodes,
                                    const std::vector<std::pair<int, int>>& links) {
  std::map<int, int> parent;
  for (int n : nodes) parent[n] = n;
  std::function<int(int)> find = [&](int x) {
    return parent[x] == x ? x : parent[x] = find(parent[x]);
  };
  for (int n : nodes)
    for (int o : g.node(n).operands)
      if (parent.count(o)) parent[find(o)] = find(n);
  for (auto [a, b] : links) parent[find(a)] = find(b);
  std::map<int, std::vector<int>> groups;
  for (int n : nodes) groups[find(n)].push_back(n);
  std::vector<std::vector<int>> out;
  for (auto& [root, members] : groups) out.push_back(members);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
  return out;
}

// Concats on the host. A concat read at an arbitrary index is a select over its parts, each
// read at a clamped index: every part loaded for every element, a division and a remainder to
// find the coordinate, and index math the host emitter's tile proof cannot follow (the clamps),
// so the loop stays scalar: torch.cat of three [8, 128, 256] took 20x eager's time, and GPT-2's
// qkv gradient with its bias gradient (cat, view, column sum) 35x. A phase whose domain has the
// concat's axis (the concat has the domain's shape, or a view of it that keeps that axis and
// the ones after it, or is read at broadcast positions of the domain) is therefore walked as one
// box per part instead (PhaseBuilder::walkBox):
// in box j the concat's coordinate along its axis is known to lie in part j, so the concat is
// that part at a shifted index (a contiguous walk when the part is an input), and every other
// value of the phase is computed at the same domain positions as before. A reduce phase is
// split so along a kept axis only (each box holds whole rows). A read of the concat at another
// index keeps the select, so any boxes are correct; these are the ones that remove it. Phases
// run one after the other on the host at the cost of a dispatch; a GPU would pay a launch or a
// grid barrier for each, unmeasured so far, so GPU programs keep the select.
struct ConcatPart {
  size_t axis = 0;
  int64_t begin = 0, end = 0;
};
// The boxes, over the domain they split: the phase's own, or one with an axis split in two where
// the concat's axis is the inner factor of a domain axis (refined, below).
struct ConcatBoxes {
  Dims domain;
  std::vector<bool> reduced;
  std::vector<ConcatPart> parts;
};
constexpr size_t kMaxConcatBoxes = 32;  // beyond: one phase (each box is a compiled function)
constexpr int64_t kMinRefinedRun = 16;  // elements a refined box's runs hold at least

// A concat whose axis is only a factor of a domain axis (a rotary embedding's halves, concat
// along the head dim of [B, H, T, 64], in a phase over the [B * T, H * 64] of its Linear layer's
// gradient, whose bias gradient sums the columns) gets no box of the domain as it is. The
// domain is refined instead: the axis split into [outer, the concat's extent], the same
// positions in the same order, so that every store and read is the same; the views between the
// concat and the domain then keep that inner coordinate (Index::viaCoords: the trailing axes the
// shapes share), the one the boxes walk.
ConcatBoxes concatBoxes(const ir::Graph& g, const std::vector<Dims>& shapes,
                        const std::vector<int>& nodes, const std::map<int, int>& materialized,
                        const Dims& domain, const std::vector<bool>& reduced) {
  auto inner = [](const Dims& s, size_t axis) {
    int64_t p = 1;
    for (size_t i = axis + 1; i < s.size(); ++i) p *= s[i];
    return p;
  };
  for (int n : nodes) {
    const ir::Node& node = g.node(n);
    const Dims& shape = shapes[n];
    // A concat smaller than the domain is read at broadcast positions (GQA's keys, rotated and
    // then repeated for the query heads): its own axes still name the domain's.
    if (node.op != OpCode::Concat || materialized.count(n) || product(shape) > product(domain))
      continue;
    // The domain axis the concat's axis is (a view of the domain shares it: [B, T, 3C] and
    // [B * T, 3C]), or whose inner factor it is; a kept one in a reduce phase (its boxes hold
    // whole rows).
    const auto axis = static_cast<size_t>(node.attrs.getInt("axis"));
    const int64_t extent = shape[axis];
    if (extent < 2) continue;
    auto fits = [&](size_t a, bool exact) {
      return !reduced[a] && inner(domain, a) == inner(shape, axis) &&
             (exact ? domain[a] == extent : domain[a] % extent == 0);
    };
    size_t a = 0;
    while (a < domain.size() && !fits(a, true)) ++a;
    if (a == domain.size())
      for (a = 0; a < domain.size() && !fits(a, false);) ++a;
    if (a == domain.size()) continue;
    ConcatBoxes out{domain, reduced, {}};
    if (domain[a] != extent) {
      out.domain[a] = domain[a] / extent;
      out.domain.insert(out.domain.begin() + static_cast<long>(a) + 1, extent);
      out.reduced.insert(out.reduced.begin() + static_cast<long>(a) + 1, false);
      ++a;
    }
    int64_t offset = 0, shortest = extent;
    for (int o : node.operands) {
      const int64_t len = shapes[o][axis];
      if (len > 0) {
        out.parts.push_back(ConcatPart{a, offset, offset + len});
        shortest = std::min(shortest, len);
      }
      offset += len;
    }
    // A refined box walks runs of its part's length: shorter than a vector, each phase would
    // walk memory in strides, where the select reads it in order.
    if (domain.size() != out.domain.size() && shortest * inner(shape, axis) < kMinRefinedRun)
      continue;
    if (out.parts.size() >= 2 && out.parts.size() <= kMaxConcatBoxes) return out;
  }
  return {};
}

}  // namespace

KernelProgram lowerKernel(const ir::Graph& g, const fusion::Kernel& k, const ir::Bindings& b) {
  return lowerKernelWithShapes(g, k, ir::concreteShapes(g, b), nullptr);
}

KernelProgram lowerKernel(const ir::Graph& g, const fusion::Kernel& k, const ir::Bindings& b,
                          const LaunchTarget& target) {
  return lowerKernelWithShapes(g, k, ir::concreteShapes(g, b), &target);
}

KernelProgram lowerKernelWithShapes(const ir::Graph& g, const fusion::Kernel& k,
                                    const std::vector<Dims>& shapes, const LaunchTarget* launch) {
  KernelProgram prog;
  prog.name = "kernel";
  std::map<int, int> paramOf;  // node -> param
  auto addParam = [&](int node, int scratch, ir::DType t, int64_t elements) {
    Param p;
    p.value = node;
    p.scratch = scratch;
    p.dtype = t;
    p.elements = elements;
    prog.params.push_back(p);
    return static_cast<int>(prog.params.size()) - 1;
  };
  for (int i : k.inputs) paramOf[i] = addParam(i, -1, g.node(i).type.dtype, product(shapes[i]));
  for (int o : k.outputs)
    if (!paramOf.count(o)) paramOf[o] = addParam(o, -1, g.node(o).type.dtype, product(shapes[o]));
  std::vector<bool> inKernel(g.nodes().size(), false);
  for (int n : k.nodes) inKernel[static_cast<size_t>(n)] = true;
  std::vector<int> checkNodes;  // KernelProgram::checks, as nodes

  std::map<int, int> materialized;
  for (int i : k.inputs) materialized[i] = paramOf[i];
  auto reducedMask = [&](int reduction, const Dims& domain) {
    std::vector<bool> r(domain.size(), false);
    for (int64_t a : g.node(reduction).attrs.getInts("axes"))
      if (domain[static_cast<size_t>(a)] != 1) r[static_cast<size_t>(a)] = true;
    return r;
  };
  auto count = [&](int reduction) {
    int64_t c = 1;
    for (int64_t a : g.node(reduction).attrs.getInts("axes"))
      c *= shapes[g.node(reduction).operands[0]][static_cast<size_t>(a)];
    return c;
  };
  // The dominant op of a set of nodes, as the group analysis picks it: the largest reduction,
  // else the largest op; the domain is its operand's shape (its own for an op).
  // Of reductions with the largest input, a row reduction first (as the group analysis: column
  // reductions beside it are carried as column partials).
  auto domainOf = [&](const std::vector<int>& nodes, Dims& domain, std::vector<bool>& reduced) {
    int dominant = -1;
    int64_t best = -1;
    bool bestRow = false;
    for (int n : nodes) {
      if (!isReduce(g.node(n).op) || count(n) == 1) continue;
      const Dims& in = shapes[g.node(n).operands[0]];
      int64_t size = product(in);
      bool row = fusion::reduceKind(in, g.node(n).attrs.getInts("axes")) == fusion::ReduceKind::Row;
      if (size > best || (size == best && row && !bestRow))
        best = size, bestRow = row, dominant = n;
    }
    if (dominant >= 0) {
      domain = shapes[g.node(dominant).operands[0]];
      reduced = reducedMask(dominant, domain);
      return dominant;
    }
    // The largest op: the one every other op's shape broadcasts into. Sizes alone do not find it
    // when a dim is 0 (a [1] value beside [0, 1] rows has more elements than they); only where
    // no such op exists (a reshape between two shapes) the one with the most elements.
    auto broadcastsInto = [](const Dims& t, const Dims& s) {
      if (t.size() > s.size()) return false;
      for (size_t j = 0; j < t.size(); ++j) {
        const int64_t sd = s[s.size() - t.size() + j];
        if (t[j] != 1 && t[j] != sd) return false;
      }
      return true;
    };
    for (int n : nodes)
      if (dominant < 0 && std::all_of(nodes.begin(), nodes.end(),
                                      [&](int m) { return broadcastsInto(shapes[m], shapes[n]); }))
        dominant = n;
    if (dominant < 0)
      for (int n : nodes)
        if (product(shapes[n]) > best) best = product(shapes[n]), dominant = n;
    domain = shapes[dominant];
    reduced.assign(domain.size(), false);
    return dominant;
  };
  // A column reduction of a rows domain: a float sum or mean of a domain-shaped value over
  // exactly the kept axes (lower/column_partials.h). The group analysis forms these only so.
  auto isColumn = [&](int n, const Dims& domain, const std::vector<bool>& reduced) {
    const ir::Node& node = g.node(n);
    if (!isReduce(node.op) || count(n) == 1 || !ir::isFloat(node.type.dtype) ||
        (node.op != OpCode::ReduceSum && node.op != OpCode::ReduceMean) ||
        shapes[node.operands[0]] != domain)
      return false;
    std::vector<bool> mask = reducedMask(n, domain);
    bool rows = false;
    for (size_t a = 0; a < domain.size(); ++a) {
      if (domain[a] == 1) continue;
      if (mask[a] == reduced[a]) return false;
      rows = rows || reduced[a];
    }
    return rows;
  };
  Dims kernelDomain;
  std::vector<bool> kernelReduced;
  domainOf(k.nodes, kernelDomain, kernelReduced);
  // A column reduction the group analysis carried as partials (its operand maybe a kernel input:
  // dbeta = reduce_sum(dy)) runs in the rows phase of the dominant's part. A horizontal pack was
  // analyzed part by part, so none of its reductions is a column reduction of another part.
  std::vector<std::pair<int, int>> links;
  if (k.horizontalParts == 1 && k.dominant >= 0)
    for (int n : k.nodes)
      if (isColumn(n, kernelDomain, kernelReduced)) links.emplace_back(n, k.dominant);
  int partNo = 0;
  for (const std::vector<int>& part : parts(g, k.nodes, links)) {
    Dims domain;
    std::vector<bool> reduced;
    domainOf(part, domain, reduced);
    // The group analysis may have accepted the nodes as one kernel with one domain although they
    // are not connected (analyzeGroup tries the whole set first): a part whose own dominant is
    // smaller than one of its values (a gradient beside an all-reduction of per-row weights,
    // the rows' reduction itself in another part) runs over the kernel's domain, which the
    // analysis checked every value against. So does a part with no reduction of its own whose
    // largest value is in other coordinates than an output beside it (a [4, 8] broadcast of a
    // reshaped [8, 1] output, beside rows of an [8, 4] domain): a loop over the part's own
    // domain could not store that output, while the kernel's domain stores each per row.
    int64_t domainSize = product(domain);
    auto fitsLoop = [&](const Dims& s) {
      if (product(s) == domainSize) return true;
      if (s.size() > domain.size() &&
          !std::all_of(s.begin(), s.end() - static_cast<long>(domain.size()),
                       [](int64_t d) { return d == 1; }))
        return false;
      for (size_t i = 0; i < domain.size(); ++i) {
        int64_t sd = i + s.size() >= domain.size() ? s[i + s.size() - domain.size()] : 1;
        if (sd != domain[i] && sd != 1) return false;
      }
      return true;
    };
    bool ownDomain = true;
    for (int n : part) ownDomain = ownDomain && product(shapes[n]) <= domainSize;
    if (ownDomain && std::find(reduced.begin(), reduced.end(), true) == reduced.end())
      for (int o : k.outputs)
        if (std::binary_search(part.begin(), part.end(), o))
          ownDomain = ownDomain && fitsLoop(shapes[o]);
    if (!ownDomain) {
      domain = kernelDomain;
      reduced = kernelReduced;
    }
    bool reduce = std::find(reduced.begin(), reduced.end(), true) != reduced.end();
    auto newPhase = [&](const std::string& what, const Dims& dom, std::vector<bool> red,
                        const std::vector<std::pair<int, int>>& stores,
                        std::vector<std::pair<int, int>> columns = {}, int64_t workers = 0,
                        const ConcatPart* box = nullptr) {
      Phase ph;
      ph.name = fmt::format("p{}_{}", partNo, what);
      ph.domain = dom;
      ph.reduced = std::move(red);
      ph.reduce = std::find(ph.reduced.begin(), ph.reduced.end(), true) != ph.reduced.end();
      PhaseBuilder pb(g, shapes, ph, materialized, inKernel, checkNodes);
      pb.carryColumns(std::move(columns), workers, /*blocks=*/launch == nullptr);
      if (box) pb.walkBox(box->axis, box->begin, box->end);
      if (box && dom != domain) pb.refines(domain, reduced);
      if (launch == nullptr) pb.keepViews();
      pb.build(stores);
      prog.phases.push_back(std::move(ph));
    };
    // Second-level reductions (grid barriers): phase A stores their operand per row, phase B
    // reduces it in one unit; later phases read the result.
    auto secondLevel = [&](int n) {
      if (!isReduce(g.node(n).op) || count(n) == 1 || isColumn(n, domain, reduced)) return false;
      int input = g.node(n).operands[0];
      return !(shapes[input] == domain && reducedMask(n, domain) == reduced);
    };
    // An output is stored by the first phase A after every second-level reduction it depends
    // on (they are processed in node order, so those are the ones of smaller id): that phase
    // walks the rows anyway. A loss and the gradient beside it (cross-entropy forward +
    // backward) then take one pass over the rows, not one for the loss's operand and another for
    // the rest; and a gradient scaled by a count of valid labels (an earlier, cheap barrier)
    // rides the loss's phase A.
    std::map<int, int> lastBarrier;  // node -> the largest second-level reduction it needs, or -1
    for (int n : part) {
      int last = secondLevel(n) ? n : -1;
      for (int o : g.node(n).operands)
        if (auto it = lastBarrier.find(o); it != lastBarrier.end())
          last = std::max(last, it->second);
      lastBarrier[n] = last;
    }
    // A single value computed from second-level results alone (a mean loss from the sum of the
    // rows' losses and a count) is stored by the phase B of its last barrier, once: later walks
    // over the rows would each compute and store it again.
    std::set<int> once;
    for (int n : part) {
      if (isReduce(g.node(n).op) || product(shapes[static_cast<size_t>(n)]) != 1) continue;
      bool global = false, rows = false;
      for (int o : g.node(n).operands) {
        if (!std::binary_search(part.begin(), part.end(), o)) continue;
        if (secondLevel(o) || once.count(o)) global = true;
        else rows = true;
      }
      if (global && !rows) once.insert(n);
    }
    // Column reductions, and the values computed from them (the group analysis admits only
    // elementwise ones of the columns' size), are complete after every row: the combine phase
    // stores those outputs.
    std::vector<int> columns;
    std::set<int> combined;
    for (int n : part) {
      bool c = isColumn(n, domain, reduced);
      if (c) columns.push_back(n);
      for (int o : g.node(n).operands) c = c || combined.count(o);
      if (c) combined.insert(n);
    }
    for (int n : part) {
      if (!secondLevel(n)) continue;
      int input = g.node(n).operands[0];
      if (!materialized.count(input)) {
        // A kernel output is stored where it belongs; otherwise into a scratch slot.
        int p = paramOf.count(input) ? paramOf[input]
                                     : addParam(-1, prog.scratchSlots++, g.node(input).type.dtype,
                                                product(shapes[input]));
        std::vector<std::pair<int, int>> first{{input, p}};
        for (int o : k.outputs)
          if (o != input && std::binary_search(part.begin(), part.end(), o) &&
              !materialized.count(o) && lastBarrier[o] < n && !combined.count(o) && !once.count(o))
            first.emplace_back(o, paramOf[o]);
        newPhase(fmt::format("store_{}", g.node(input).name), domain, reduced, first);
        for (auto [node, param] : first) materialized[node] = param;
      }
      int target;
      if (paramOf.count(n)) {
        target = paramOf[n];
      } else {
        int slot = prog.scratchSlots++;
        target = addParam(-1, slot, g.node(n).type.dtype, product(shapes[n]));
      }
      std::vector<std::pair<int, int>> result{{n, target}};
      for (int o : k.outputs)
        if (once.count(o) && lastBarrier[o] == n && !materialized.count(o))
          result.emplace_back(o, paramOf[o]);
      newPhase(fmt::format("reduce_{}", g.node(n).name), shapes[input],
               reducedMask(n, shapes[input]), result);
      for (auto [node, param] : result) materialized[node] = param;
    }
    std::vector<std::pair<int, int>> stores, combineStores;
    for (int o : k.outputs)
      if (std::binary_search(part.begin(), part.end(), o) && !materialized.count(o))
        (combined.count(o) ? combineStores : stores).emplace_back(o, paramOf[o]);
    // An empty domain (no rows, or no elements) runs no units, yet an output computed from
    // reductions over it (the mean loss of an empty batch) has elements to write: such an output
    // gets a loop phase over its own shape, reading the reductions' results from where phase B
    // stored them.
    int64_t domainUnits = 1;
    for (size_t a = 0; a < domain.size(); ++a)
      if (!reduced[a]) domainUnits *= domain[a];
    if (domainUnits == 0) {
      std::vector<std::pair<int, int>> rest;
      for (auto [node, param] : stores) {
        const Dims& shape = shapes[static_cast<size_t>(node)];
        if (product(shape) == 0) rest.emplace_back(node, param);
        else
          newPhase(fmt::format("fill_{}", g.node(node).name), shape,
                   std::vector<bool>(shape.size(), false), {{node, param}});
      }
      stores = std::move(rest);
    }
    if (columns.empty()) {
      ConcatBoxes boxes;
      if (!stores.empty() && launch == nullptr)
        boxes = concatBoxes(g, shapes, part, materialized, domain, reduced);
      if (!stores.empty() && boxes.parts.empty())
        newPhase(reduce ? "rows" : "loop", domain, reduced, stores);
      for (size_t j = 0; j < boxes.parts.size(); ++j)
        newPhase(fmt::format("{}{}", reduce ? "rows" : "loop", j), boxes.domain, boxes.reduced,
                 stores, {}, 0, &boxes.parts[j]);
    } else {
      int64_t units = 1, rowLength = 1;
      for (size_t a = 0; a < domain.size(); ++a) (reduced[a] ? rowLength : units) *= domain[a];
      const int64_t workers = columnPartialWorkers(units, rowLength, launch);
      std::vector<std::pair<int, int>> carried;
      std::vector<ColumnPartial> partials;
      for (int c : columns) {
        ColumnPartial cp;
        cp.node = c;
        cp.op = reduceOpOf(g.node(c).op);
        cp.dtype = g.node(c).type.dtype;
        cp.count = units;
        // workers * rowLength <= max(rowLength, kPartialBudget): no overflow.
        cp.partialParam =
            addParam(-1, prog.scratchSlots++, partialDType(cp.dtype), workers * rowLength);
        carried.emplace_back(c, cp.partialParam);
        partials.push_back(cp);
      }
      if (workers == 0) carried.clear();
      if (!stores.empty() || !carried.empty())
        newPhase("rows", domain, reduced, stores, carried, workers);
      Phase combine;
      combine.name = fmt::format("p{}_columns", partNo);
      PhaseBuilder pb(g, shapes, combine, materialized, inKernel, checkNodes);
      pb.buildCombine(workers, rowLength, partials, combineStores);
      prog.phases.push_back(std::move(combine));
    }
    ++partNo;
  }
  for (int n : checkNodes) prog.checks.push_back(ir::indexCheckLabel(g.node(n)));
  splitLongRows(prog, k.stagedSplits ? launch : nullptr);
  return prog;
}

namespace {

const char* splitRoleText(SplitRole r) {
  switch (r) {
    case SplitRole::None: return "";
    case SplitRole::Walk: return " split:walk";
    case SplitRole::Rewalk: return " split:rewalk";
    case SplitRole::Combine: return " split:combine";
  }
  return "";
}

}  // namespace

std::string printProgram(const KernelProgram& p) {
  std::string out =
      fmt::format("program {} ({} params, {} scratch)\n", p.name, p.params.size(), p.scratchSlots);
  for (size_t i = 0; i < p.params.size(); ++i) {
    const Param& q = p.params[i];
    out += fmt::format(
        "  param {}: {} {}[{}]\n", i,
        q.value >= 0 ? fmt::format("value %{}", q.value) : fmt::format("scratch {}", q.scratch),
        ir::dtypeName(q.dtype), q.elements);
  }
  auto kindName = [](InstKind k) {
    static const char* names[] = {"const", "unit",  "loop",     "iadd", "imul", "idiv", "irem",
                                  "load",  "store", "acc.read", "acc",  "op",   "check"};
    return names[static_cast<int>(k)];
  };
  for (const Phase& ph : p.phases) {
    out += fmt::format(
        "phase {}: {} units={} {} buffers=[", ph.name, ph.reduce ? "reduce" : "loop", ph.units,
        ph.reduce ? fmt::format("row={}{}{}", ph.rowLength,
                                ph.workers ? fmt::format(" workers={}{}", ph.workers,
                                                         ph.workerBlocks ? " (blocks)" : "")
                                           : std::string(),
                                splitRoleText(ph.split))
                  : fmt::format("chunk={} total={}", ph.chunk, ph.total));
    for (size_t i = 0; i < ph.buffers.size(); ++i)
      out += fmt::format("{}{}{}", i ? ", " : "",
                         static_cast<int>(i) < ph.numInputs ? "in:" : "out:", ph.buffers[i]);
    out += "]\n";
    auto block = [&](const char* name, const Block& b) {
      if (b.insts.empty()) return;
      out += fmt::format("  {}:\n", name);
      for (int id : b.insts) {
        const Inst& in = ph.insts[static_cast<size_t>(id)];
        out += fmt::format("    %{} = {}", id, kindName(in.kind));
        if (in.kind == InstKind::Op) out += fmt::format(".{}", ir::opName(in.op));
        out += fmt::format(" {}", ir::dtypeName(in.dtype));
        for (int a : in.args)
          if (a >= 0) out += fmt::format(" %{}", a);
        if (in.kind == InstKind::Const)
          out +=
              ir::isFloat(in.dtype) ? fmt::format(" {}", in.fvalue) : fmt::format(" {}", in.ivalue);
        if (in.kind == InstKind::IMulC || in.kind == InstKind::IDivC ||
            in.kind == InstKind::IRemC || in.kind == InstKind::CheckIndex)
          out += fmt::format(" {}", in.ivalue);
        if (in.check >= 0) out += fmt::format(" check{}", in.check);
        if (in.buffer >= 0) out += fmt::format(" buf{}", in.buffer);
        if (in.acc >= 0) out += fmt::format(" acc{}", in.acc);
        out += "\n";
      }
    };
    block("pre", ph.pre);
    for (size_t s = 0; s < ph.stages.size(); ++s)
      block(fmt::format("stage {}", s).c_str(), ph.stages[s].body);
    block("post", ph.post);
    block("elems", ph.elems);
  }
  return out;
}

int64_t evalIndex(const Phase& ph, int id, int64_t unit, int64_t loop) {
  const Inst& in = ph.insts.at(static_cast<size_t>(id));
  auto arg = [&](int k) { return evalIndex(ph, in.args[k], unit, loop); };
  switch (in.kind) {
    case InstKind::Const: return in.ivalue;
    case InstKind::UnitIndex: return unit;
    case InstKind::LoopIndex: return loop;
    case InstKind::IAdd: return arg(0) + arg(1);
    case InstKind::IMulC: return arg(0) * in.ivalue;
    case InstKind::IDivC: return arg(0) / in.ivalue;
    case InstKind::IRemC: return arg(0) % in.ivalue;
    case InstKind::Op:
      switch (in.op) {
        case OpCode::Maximum: return std::max(arg(0), arg(1));
        case OpCode::Minimum: return std::min(arg(0), arg(1));
        case OpCode::Lt: return arg(0) < arg(1);
        case OpCode::Select: return arg(0) ? arg(1) : arg(2);
        default: break;  // the lowering builds index arithmetic from these four ops only
      }
      break;
    case InstKind::CheckIndex: {
      const int64_t k = arg(0);
      return k >= 0 && k < in.ivalue ? k : 0;
    }
    case InstKind::Load:
    case InstKind::Store:
    case InstKind::AccRead:
    case InstKind::Accumulate: break;
  }
  throwError(ErrorCode::Internal, "evalIndex: not an index instruction");
}

bool isTranscendental(ir::OpCode op) {
  switch (op) {
    case ir::OpCode::Exp:
    case ir::OpCode::Log:
    case ir::OpCode::Log1p:
    case ir::OpCode::Tanh:
    case ir::OpCode::Erf:
    case ir::OpCode::Sin:
    case ir::OpCode::Cos:
    case ir::OpCode::Pow:
    case ir::OpCode::Sigmoid: return true;
    default: return false;
  }
}

}  // namespace stitch::lower
