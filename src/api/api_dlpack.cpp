// DLPack at the C API's boundary: dtypes, devices, layouts and aliasing (design note in
// api_dlpack.h).
#include "api/api_dlpack.h"

#include <fmt/format.h>

#include "runtime/support/checked.h"
#include "runtime/support/error.h"

namespace stitch::api {

namespace {

constexpr int kDLBoolCode = 6;  // kDLBool, added to DLPack after the 0.6 headers Debian ships

std::string dlTypeStr(DLDataType t) {
  return fmt::format("{{code {}, bits {}, lanes {}}}", t.code, t.bits, t.lanes);
}

// The bytes [begin, end) a tensor view covers. Unchecked arithmetic is safe here: checkTensor
// bounded every tensor to 2^62 bytes (support/checked.h).
struct ByteRange {
  uintptr_t begin = 0, end = 0;
  bool empty() const { return begin == end; }
  bool overlaps(const ByteRange& o) const {
    return !empty() && !o.empty() && begin < o.end && o.begin < end;
  }
  bool operator==(const ByteRange& o) const = default;
};

ByteRange rangeOf(ir::DType dtype, std::span<const int64_t> shape, const void* data) {
  uint64_t bytes = static_cast<uint64_t>(ir::dtypeBytes(dtype));
  for (int64_t d : shape) bytes *= static_cast<uint64_t>(d);
  auto begin = reinterpret_cast<uintptr_t>(data);
  return {begin, begin + bytes};
}

}  // namespace

ir::DType fromDL(DLDataType t, std::string_view what) {
  if (t.lanes == 1) {
    switch (t.code) {
      case kDLFloat:
        if (t.bits == 16) return ir::DType::F16;
        if (t.bits == 32) return ir::DType::F32;
        if (t.bits == 64) return ir::DType::F64;
        break;
      case kDLBfloat:
        if (t.bits == 16) return ir::DType::BF16;
        break;
      case kDLInt:
        if (t.bits == 32) return ir::DType::I32;
        if (t.bits == 64) return ir::DType::I64;
        break;
      case kDLUInt:
      case kDLBoolCode:
        if (t.bits == 8) return ir::DType::Bool;
        break;
      default: break;
    }
  }
  throwError(ErrorCode::ShapeMismatch,
             fmt::format("{} has DLPack dtype {}, which Stitch does not support (f16, bf16, f32, "
                         "f64, i32, i64, bool)",
                         what, dlTypeStr(t)));
}

// Checks one tensor and returns its dtype; `what` names it in messages ("input 0 ('x')").
ir::DType checkTensor(const DLTensor& t, const std::string& what, const rt::Backend& backend) {
  ir::DType dtype = fromDL(t.dtype, what);
  STITCH_CHECK(t.ndim >= 0 && (t.ndim == 0 || t.shape != nullptr), ErrorCode::InvalidArgument,
               "{} has ndim {} and shape {}", what, t.ndim, t.shape ? "set" : "NULL");
  backend.checkTensorDevice(t.device, what);
  // The size must fit (support/checked.h) before anything multiplies the dims or indexes the
  // buffer: [2^58, 64] would wrap to 0 elements and pass as empty.
  TensorSize size = requireTensorSize(std::span<const int64_t>(t.shape, t.ndim),
                                      ir::dtypeBytes(dtype), what, ErrorCode::InvalidArgument);
  if (t.strides) {
    int64_t expect = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] != 1 && t.strides[i] != expect) {
        std::string strides, shape;
        for (int k = 0; k < t.ndim; ++k) {
          strides += (k ? ", " : "") + std::to_string(t.strides[k]);
          shape += (k ? ", " : "") + std::to_string(t.shape[k]);
        }
        throwError(
            ErrorCode::Unsupported,
            fmt::format("{} has strides [{}] for shape [{}], which is not compact row-major; "
                        "pass a contiguous tensor",
                        what, strides, shape));
      }
      expect *= t.shape[i];  // within the size checked above
    }
  }
  STITCH_CHECK(t.data != nullptr || size.elements == 0, ErrorCode::InvalidArgument,
               "{} has NULL data", what);
  return dtype;
}

std::string inputName(const ir::Graph& g, size_t i) {
  return fmt::format("input {} ('{}')", i, g.node(g.inputs()[i]).name);
}

std::string outputName(const ir::Graph& g, size_t i) {
  return fmt::format("output {} ('{}')", i, g.node(g.outputs()[i]).name);
}

// Validates the inputs and returns their concrete signature.
std::vector<ir::ConcreteInput> signatureOf(const ir::Graph& g, const DLTensor* inputs, size_t n) {
  STITCH_CHECK(n == g.inputs().size(), ErrorCode::ShapeMismatch,
               "graph {} takes {} inputs, but {} were given", g.name(), g.inputs().size(), n);
  std::vector<ir::ConcreteInput> sig;
  for (size_t i = 0; i < n; ++i) {
    ir::DType t = fromDL(inputs[i].dtype, inputName(g, i));
    STITCH_CHECK(inputs[i].ndim >= 0 && (inputs[i].ndim == 0 || inputs[i].shape != nullptr),
                 ErrorCode::InvalidArgument, "{} has no shape", inputName(g, i));
    sig.push_back({t, std::span<const int64_t>(inputs[i].shape, inputs[i].ndim)});
  }
  return sig;
}

// Enforces stitch_program_run's aliasing contract (stitch.h) and returns, per output, the input
// whose memory it is exactly (-1: none). Kernels read inputs while other units write outputs, so
// any overlap other than an exact one cannot be made correct without copying the input first;
// it is refused rather than silently computed on half-overwritten data.
std::vector<int> checkAliasing(const ir::Graph& g, std::span<const reference::TensorView> in,
                               std::span<const reference::MutTensorView> out,
                               const rt::Backend& backend) {
  std::vector<ByteRange> inRanges, outRanges;
  for (const auto& t : in) inRanges.push_back(rangeOf(t.dtype, t.shape, t.data));
  for (const auto& t : out) outRanges.push_back(rangeOf(t.dtype, t.shape, t.data));
  std::vector<int> exact(out.size(), -1);
  for (size_t j = 0; j < out.size(); ++j) {
    for (size_t k = 0; k < j; ++k)
      STITCH_CHECK(!outRanges[j].overlaps(outRanges[k]), ErrorCode::InvalidArgument,
                   "{} and {} share memory; outputs must not overlap each other", outputName(g, k),
                   outputName(g, j));
    for (size_t i = 0; i < in.size(); ++i) {
      if (!outRanges[j].overlaps(inRanges[i])) continue;
      STITCH_CHECK(outRanges[j] == inRanges[i], ErrorCode::InvalidArgument,
                   "{} partially overlaps {}; an output may be exactly an input's memory (in "
                   "place) or separate from it, nothing in between",
                   outputName(g, j), inputName(g, i));
      STITCH_CHECK(backend.runsInPlace(), ErrorCode::Unsupported,
                   "{} is the memory of {} (in place); the {} backend does not run in place in "
                   "this version: pass a separate output",
                   outputName(g, j), inputName(g, i), backend.name());
      exact[j] = static_cast<int>(i);
    }
  }
  return exact;
}

size_t viewBytes(ir::DType dtype, std::span<const int64_t> shape) {
  ByteRange r = rangeOf(dtype, shape, nullptr);
  return r.end - r.begin;
}

}  // namespace stitch::api
