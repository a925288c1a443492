// libFuzzer target: building, planning, compiling and running graphs through the C API.
//
// The fuzzer's bytes are read as a small program of C API calls (FuzzedDataProvider): inputs of
// every dtype (and out-of-range ones) with static dims drawn from a table of edge values (0, 1,
// 2^31, 2^32, 2^62, 2^63-1, negative, ...) or symbols (including invalid names and ""); ops by
// name (every op, plus unknown names) with operands that may be out of range and attributes of
// any kind, name and value; constants; outputs. Then, whatever was built: verify, print,
// value_info, explain the plan for any sizes, compile on the reference backend, ask for output
// shapes, and, when every tensor is small (at most kMaxRunElements elements, checked here
// without overflow), run it on buffers the harness owns.
//
// The property is the C API's contract: every call returns a status (a user mistake is an
// error status with a message), never a crash, an abort, a sanitizer report or an uncaught
// exception. STITCH_ERROR_INTERNAL ("a bug in Stitch") is also treated as a failure: the harness
// traps, so libFuzzer keeps the input.
#include <fuzzer/FuzzedDataProvider.h>
#include <stitch/stitch.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace {

constexpr int64_t kMaxRunElements = 1 << 12;
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

// Sizes: mostly small, plus the edges where arithmetic overflows.
constexpr int64_t kSizes[] = {0,
                              1,
                              2,
                              3,
                              4,
                              5,
                              7,
                              8,
                              16,
                              1000,
                              65536,
                              1LL << 31,
                              (1LL << 31) - 1,
                              1LL << 32,
                              1LL << 62,
                              kI64Max,
                              kI64Max - 1,
                              -1,
                              -2,
                              kI64Min};
// Integer attribute values (axes, perm, starts, ...): small of both signs, plus the edges.
constexpr int64_t kInts[] = {0, 1, 2, 3, -1, -2, -3, 4, 5, 1LL << 31, 1LL << 62, kI64Max, kI64Min};
constexpr double kDoubles[] = {0.0,     1.0,      -1.0,      0.5,    1e-5,   -0.0,
                               2.0,     3e38,     1e308,     -1e308, 65504,  9.3e18,
                               -9.3e18, INFINITY, -INFINITY, NAN,    1e-320, 2147483648.0};
const char* const kSymbols[] = {"N", "M", "K", "", "1x", "graph", "f32", "N"};
const char* const kNames[] = {"x", "y", "z", "w", "", "1a", "graph", "return", "x"};
const char* const kOps[] = {"neg",
                            "abs",
                            "relu",
                            "exp",
                            "log",
                            "log1p",
                            "sqrt",
                            "rsqrt",
                            "tanh",
                            "sigmoid",
                            "erf",
                            "sin",
                            "cos",
                            "reciprocal",
                            "floor",
                            "ceil",
                            "logical_not",
                            "add",
                            "sub",
                            "mul",
                            "div",
                            "maximum",
                            "minimum",
                            "pow",
                            "eq",
                            "ne",
                            "lt",
                            "le",
                            "gt",
                            "ge",
                            "logical_and",
                            "logical_or",
                            "select",
                            "cast",
                            "reduce_sum",
                            "reduce_max",
                            "reduce_min",
                            "reduce_mean",
                            "reduce_prod",
                            "reshape",
                            "transpose",
                            "broadcast_to",
                            "slice",
                            "concat",
                            "full",
                            "iota",
                            "softmax",
                            "log_softmax",
                            "layer_norm",
                            "rms_norm",
                            "gelu",
                            "silu",
                            "random_uniform",
                            "gather",
                            "argmax",
                            "argmin",
                            "input",
                            "constant",
                            "bogus",
                            ""};
const char* const kAttrNames[] = {"axes",        "keepdims", "shape", "perm",  "starts", "ends",
                                  "steps",       "axis",     "value", "dtype", "to",     "eps",
                                  "approximate", "bogus",    "",      nullptr};
const char* const kIdents[] = {"tanh", "none", "", "exact", "f32"};
const char* const kTargets[] = {"sm_90", "sm_80", "gfx90a", "host", "sm_1"};
const char* const kFusion[] = {"stitch", "basic", "off"};
const char* const kFormats[] = {"text", "json", "dot"};

template <typename T, size_t N>
const T& pick(FuzzedDataProvider& in, const T (&table)[N]) {
  return table[in.ConsumeIntegralInRange<size_t>(0, N - 1)];
}

[[noreturn]] void fail(const char* call, stitch_status_t st) {
  std::fprintf(stderr, "fuzz_capi: %s returned %s: %s\n", call, stitch_status_string(st),
               stitch_last_error());
  __builtin_trap();
}

// Checks a status is one of the enum's values with a message when it is an error, and is not
// STITCH_ERROR_INTERNAL. Returns whether it is STITCH_OK.
bool ok(const char* call, stitch_status_t st) {
  if (st == STITCH_OK) return true;
  if (st < STITCH_OK || st > STITCH_ERROR_INTERNAL) fail(call, st);
  const char* msg = stitch_last_error();
  if (msg == nullptr || msg[0] == '\0') fail(call, st);
  if (st == STITCH_ERROR_INTERNAL) fail(call, st);
  return false;
}

// `--small-sizes` on the command line (libFuzzer passes `--` flags through): sizes and integer
// attributes stay in [-3, 16], away from the overflow edges, so that a campaign can look for
// other bugs while size-overflow crashes are being fixed.
bool gSmallSizes = false;

int64_t size(FuzzedDataProvider& in) {
  if (gSmallSizes) return in.ConsumeIntegralInRange<int64_t>(-1, 16);
  // One value in eight is an arbitrary int64; the rest come from the table.
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) return in.ConsumeIntegral<int64_t>();
  return pick(in, kSizes);
}

int64_t intValue(FuzzedDataProvider& in) {
  if (gSmallSizes) return in.ConsumeIntegralInRange<int64_t>(-3, 16);
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) return in.ConsumeIntegral<int64_t>();
  return pick(in, kInts);
}

stitch_dim_t dim(FuzzedDataProvider& in) {
  stitch_dim_t d{};
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    d.symbol = pick(in, kSymbols);
  } else {
    d.size = size(in);
  }
  return d;
}

DLDataType dlType(stitch_dtype_t t) {
  switch (t) {
    case STITCH_F16: return {kDLFloat, 16, 1};
    case STITCH_BF16: return {kDLBfloat, 16, 1};
    case STITCH_F32: return {kDLFloat, 32, 1};
    case STITCH_F64: return {kDLFloat, 64, 1};
    case STITCH_I32: return {kDLInt, 32, 1};
    case STITCH_I64: return {kDLInt, 64, 1};
    case STITCH_BOOL: return {kDLUInt, 8, 1};
  }
  return {kDLFloat, 32, 1};
}

// Element count of a shape, or -1 when it is negative or above kMaxRunElements.
int64_t smallCount(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || d > kMaxRunElements) return -1;
    n *= d;
    if (n > kMaxRunElements) return -1;
  }
  return n;
}

struct Harness {
  explicit Harness(FuzzedDataProvider& provider) : in(provider) {}

  FuzzedDataProvider& in;
  stitch_graph_t graph = nullptr;
  int32_t numValues = 0;

  // Storage the attributes point into, kept alive until the add_op call returns.
  std::vector<std::vector<int64_t>> intLists;
  std::vector<std::vector<stitch_dim_t>> dimLists;

  stitch_value_t value() {
    // Mostly an existing value; sometimes one out of range.
    return in.ConsumeIntegralInRange<int32_t>(-1, numValues);
  }

  stitch_attr_t attr() {
    stitch_attr_t a{};
    a.name = pick(in, kAttrNames);
    a.kind = static_cast<stitch_attr_kind_t>(in.ConsumeIntegralInRange<int>(0, 7));
    a.i = in.ConsumeBool() ? intValue(in) : in.ConsumeIntegralInRange<int64_t>(0, 7);
    a.f = in.ConsumeBool() ? pick(in, kDoubles) : in.ConsumeFloatingPoint<double>();
    const size_t count = in.ConsumeIntegralInRange<size_t>(0, 5);
    auto& ints = intLists.emplace_back();
    auto& dims = dimLists.emplace_back();
    for (size_t k = 0; k < count; ++k) {
      ints.push_back(intValue(in));
      dims.push_back(dim(in));
    }
    // A list pointer may be NULL with a nonzero count: the API must reject it, not read it.
    const bool nullList = in.ConsumeIntegralInRange<int>(0, 15) == 0;
    a.ints = nullList ? nullptr : ints.data();
    a.dims = nullList ? nullptr : dims.data();
    a.count = count;
    a.s = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? nullptr : pick(in, kIdents);
    return a;
  }

  void addInput() {
    const auto dtype = static_cast<stitch_dtype_t>(in.ConsumeIntegralInRange<int>(0, 7));
    const size_t rank = in.ConsumeIntegralInRange<size_t>(0, 5);
    std::vector<stitch_dim_t> dims;
    for (size_t k = 0; k < rank; ++k) dims.push_back(dim(in));
    stitch_value_t v = -1;
    if (ok("stitch_graph_add_input",
           stitch_graph_add_input(graph, pick(in, kNames), dtype,
                                  dims.empty() ? nullptr : dims.data(), rank, &v)))
      numValues = v + 1;
  }

  void addConstant() {
    const double value = in.ConsumeBool() ? pick(in, kDoubles) : in.ConsumeFloatingPoint<double>();
    const auto dtype = static_cast<stitch_dtype_t>(in.ConsumeIntegralInRange<int>(0, 7));
    stitch_value_t v = -1;
    if (ok("stitch_graph_add_constant", stitch_graph_add_constant(graph, value, dtype, &v)))
      numValues = v + 1;
  }

  void addOp() {
    const char* op = pick(in, kOps);
    std::vector<stitch_value_t> operands(in.ConsumeIntegralInRange<size_t>(0, 4));
    for (auto& v : operands) v = value();
    intLists.clear();
    dimLists.clear();
    intLists.reserve(4);
    dimLists.reserve(4);
    std::vector<stitch_attr_t> attrs(in.ConsumeIntegralInRange<size_t>(0, 3));
    for (auto& a : attrs) a = attr();
    const char* name = in.ConsumeBool() ? nullptr : pick(in, kNames);
    stitch_value_t v = -1;
    if (ok("stitch_graph_add_op",
           stitch_graph_add_op(graph, op, operands.empty() ? nullptr : operands.data(),
                               operands.size(), attrs.empty() ? nullptr : attrs.data(),
                               attrs.size(), name, &v)))
      numValues = v + 1;
  }

  void setOutputs() {
    std::vector<stitch_value_t> outs(in.ConsumeIntegralInRange<size_t>(1, 3));
    for (auto& v : outs) v = value();
    ok("stitch_graph_set_outputs", stitch_graph_set_outputs(graph, outs.data(), outs.size()));
  }

  // The inputs' and outputs' types as the graph reports them.
  struct ValueType {
    stitch_dtype_t dtype;
    std::vector<stitch_dim_t> dims;
  };
  std::vector<ValueType> types(int isOutput, size_t count) {
    std::vector<ValueType> out;
    for (size_t i = 0; i < count; ++i) {
      const char* name = nullptr;
      ValueType t{};
      size_t rank = 0;
      if (!ok("stitch_graph_value_info",
              stitch_graph_value_info(graph, isOutput, i, &name, &t.dtype, &rank, nullptr, 0)))
        return {};
      t.dims.resize(rank);
      if (!ok("stitch_graph_value_info",
              stitch_graph_value_info(graph, isOutput, i, &name, &t.dtype, &rank, t.dims.data(),
                                      rank)))
        return {};
      out.push_back(std::move(t));
    }
    return out;
  }

  void afterBuild();
};

stitch_engine_t referenceEngine() {
  static stitch_engine_t engine = [] {
    const char* keys[] = {"backend"};
    const char* values[] = {"reference"};
    stitch_engine_t e = nullptr;
    if (stitch_engine_create(keys, values, 1, &e) != STITCH_OK) __builtin_trap();
    return e;
  }();
  return engine;
}

void Harness::afterBuild() {
  // Printing works on any graph, verified or not; a short buffer is truncated, not overrun.
  char small[8];
  size_t needed = 0;
  if (ok("stitch_graph_print", stitch_graph_print(graph, small, sizeof small, &needed))) {
    std::vector<char> text(needed + 1);
    ok("stitch_graph_print", stitch_graph_print(graph, text.data(), text.size(), nullptr));
  }
  if (!ok("stitch_graph_verify", stitch_graph_verify(graph))) return;

  const auto inputs = types(0, stitch_graph_num_inputs(graph));
  const auto outputs = types(1, stitch_graph_num_outputs(graph));
  if (inputs.size() != stitch_graph_num_inputs(graph)) return;

  // Sizes for the symbols: small mostly, sometimes the edges; sometimes one left out.
  std::map<std::string, int64_t> bindings;
  for (const auto& t : inputs)
    for (const auto& d : t.dims)
      if (d.symbol != nullptr && !bindings.count(d.symbol))
        bindings[d.symbol] = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(0, 4) : size(in);
  std::vector<const char*> symbols;
  std::vector<int64_t> sizes;
  for (const auto& [name, n] : bindings) {
    symbols.push_back(name.c_str());
    sizes.push_back(n);
  }
  const size_t numSymbols = !symbols.empty() && in.ConsumeIntegralInRange<int>(0, 7) == 0
                                ? symbols.size() - 1
                                : symbols.size();

  if (in.ConsumeBool()) {
    const char* keys[] = {"target", "fusion", "format"};
    const char* values[] = {pick(in, kTargets), pick(in, kFusion), pick(in, kFormats)};
    std::vector<char> text(1 << 16);
    ok("stitch_graph_explain_plan",
       stitch_graph_explain_plan(graph, keys, values, 3, symbols.data(), sizes.data(), numSymbols,
                                 text.data(), text.size(), nullptr));
  }

  stitch_program_t program = nullptr;
  if (!ok("stitch_program_compile", stitch_program_compile(referenceEngine(), graph, &program)))
    return;

  // Input tensors of the bound shapes (data NULL: output_shape reads shapes only).
  std::vector<std::vector<int64_t>> inShapes;
  for (const auto& t : inputs) {
    auto& s = inShapes.emplace_back();
    for (const auto& d : t.dims) {
      const auto it = d.symbol != nullptr ? bindings.find(d.symbol) : bindings.end();
      s.push_back(d.symbol == nullptr ? d.size : (it == bindings.end() ? 1 : it->second));
    }
  }
  std::vector<DLTensor> dl(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    dl[i] = DLTensor{};
    dl[i].device = {kDLCPU, 0};
    dl[i].ndim = static_cast<int32_t>(inShapes[i].size());
    dl[i].dtype = dlType(inputs[i].dtype);
    dl[i].shape = inShapes[i].empty() ? nullptr : inShapes[i].data();
  }
  bool runnable = true;
  std::vector<std::vector<int64_t>> outShapes;
  for (size_t o = 0; o < outputs.size(); ++o) {
    int64_t shape[8];
    size_t rank = 0;
    if (!ok("stitch_program_output_shape",
            stitch_program_output_shape(program, dl.data(), dl.size(), o, shape, 8, &rank)) ||
        rank > 8) {
      runnable = false;
      break;
    }
    outShapes.emplace_back(shape, shape + rank);
  }

  // Run only where the harness can own honest buffers for every tensor.
  for (const auto& s : inShapes) runnable = runnable && smallCount(s) >= 0;
  for (const auto& s : outShapes) runnable = runnable && smallCount(s) >= 0;
  if (runnable) {
    std::vector<std::vector<uint8_t>> storage;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const size_t bytes = static_cast<size_t>(smallCount(inShapes[i])) * dl[i].dtype.bits / 8;
      auto& buf = storage.emplace_back(bytes + 1);
      // Inputs: the fuzzer's bytes, so NaN, inf and huge integers reach every op.
      const auto fill = in.ConsumeBytes<uint8_t>(bytes);
      if (!fill.empty()) std::memcpy(buf.data(), fill.data(), fill.size());
      if (inputs[i].dtype == STITCH_BOOL)
        for (auto& b : buf) b &= 1;
      dl[i].data = buf.data();
    }
    std::vector<DLTensor> outDl(outputs.size());
    for (size_t o = 0; o < outputs.size(); ++o) {
      outDl[o] = DLTensor{};
      outDl[o].device = {kDLCPU, 0};
      outDl[o].ndim = static_cast<int32_t>(outShapes[o].size());
      outDl[o].dtype = dlType(outputs[o].dtype);
      outDl[o].shape = outShapes[o].empty() ? nullptr : outShapes[o].data();
      const size_t bytes = static_cast<size_t>(smallCount(outShapes[o])) * outDl[o].dtype.bits / 8;
      outDl[o].data = storage.emplace_back(bytes + 1).data();
    }
    ok("stitch_program_run",
       stitch_program_run(program, dl.data(), dl.size(), outDl.data(), outDl.size(), nullptr));
  }
  stitch_program_destroy(program);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  for (int i = 1; i < *argc; ++i)
    if (std::strcmp((*argv)[i], "--small-sizes") == 0) gSmallSizes = true;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Harness h(in);
  if (!ok("stitch_graph_create",
          stitch_graph_create(in.ConsumeBool() ? "g" : pick(in, kNames), &h.graph)))
    return 0;
  const int numInputs = in.ConsumeIntegralInRange<int>(0, 4);
  for (int i = 0; i < numInputs; ++i) h.addInput();
  const int steps = in.ConsumeIntegralInRange<int>(0, 12);
  for (int s = 0; s < steps && in.remaining_bytes() > 0; ++s) {
    if (in.ConsumeIntegralInRange<int>(0, 4) == 0) {
      h.addConstant();
    } else {
      h.addOp();
    }
  }
  h.setOutputs();
  h.afterBuild();
  stitch_graph_destroy(h.graph);
  return 0;
}
