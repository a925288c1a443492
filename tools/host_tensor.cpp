#include "host_tensor.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/support/checked.h"
#include "runtime/support/dtype.h"
#include "runtime/support/memory.h"

namespace stitch::cli {

namespace {

int elementBytes(stitch_dtype_t t) { return ir::dtypeBytes(static_cast<ir::DType>(t)); }

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

DLDataType dlType(stitch_dtype_t t) {
  switch (t) {
    case STITCH_F16: return {kDLFloat, 16, 1};
    case STITCH_BF16: return {kDLBfloat, 16, 1};
    case STITCH_F32: return {kDLFloat, 32, 1};
    case STITCH_F64: return {kDLFloat, 64, 1};
    case STITCH_I32: return {kDLInt, 32, 1};
    case STITCH_I64: return {kDLInt, 64, 1};
    case STITCH_BOOL: return {6 /* kDLBool */, 8, 1};
  }
  return {kDLFloat, 32, 1};
}

void store(HostTensor& t, int64_t i, double v) {
  uint8_t* p = t.bytes.data() + i * elementBytes(t.dtype);
  switch (t.dtype) {
    case STITCH_F16: {
      uint16_t b = ir::f16Bits(ir::roundToFloat(v, ir::DType::F16));
      std::memcpy(p, &b, 2);
      break;
    }
    case STITCH_BF16: {
      uint16_t b = ir::bf16Bits(ir::roundToFloat(v, ir::DType::BF16));
      std::memcpy(p, &b, 2);
      break;
    }
    case STITCH_F32: {
      auto f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case STITCH_F64: std::memcpy(p, &v, 8); break;
    case STITCH_I32: {
      auto x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case STITCH_I64: {
      auto x = static_cast<int64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case STITCH_BOOL: *p = v != 0.0; break;
  }
}

}  // namespace

HostTensor::HostTensor(stitch_dtype_t t, std::vector<int64_t> s, const std::string& what)
    : dtype(t), shape(std::move(s)) {
  // Sizes are checked (runtime/support/checked.h) and held against the machine's memory before the
  // buffer exists: a wrapped count ran 2^64 elements as "(empty)", and a buffer past the memory
  // was std::bad_alloc or an OOM kill.
  std::optional<TensorSize> size = checkedTensorSize(shape, elementBytes(t));
  if (!size)
    throw Error(STITCH_ERROR_INVALID_ARGUMENT,
                fmt::format("{} {} is larger than the limit of 2^62 bytes per tensor", what,
                            typeString(t, shape)));
  if (size->bytes > hostMemoryBytes())
    throw Error(
        STITCH_ERROR_OUT_OF_MEMORY,
        fmt::format("{} {} needs {}, more than this machine's memory, {}", what,
                    typeString(t, shape), bytesText(size->bytes), bytesText(hostMemoryBytes())));
  numel_ = size->elements;
  bytes.resize(static_cast<size_t>(size->bytes));
}

double HostTensor::at(int64_t i) const {
  const uint8_t* p = bytes.data() + i * elementBytes(dtype);
  switch (dtype) {
    case STITCH_F16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return ir::f16Value(b);
    }
    case STITCH_BF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return ir::bf16Value(b);
    }
    case STITCH_F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case STITCH_F64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case STITCH_I32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case STITCH_I64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case STITCH_BOOL: return *p ? 1.0 : 0.0;
  }
  return 0.0;
}

DLTensor HostTensor::view() {
  DLTensor t{};
  t.data = bytes.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = dlType(dtype);
  t.shape = shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

void fillRandom(HostTensor& t, uint64_t seed, uint64_t stream) {
  uint64_t state = seed ^ (0xd1b54a32d192ed03ull * (stream + 1));
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint64_t x = splitmix64(state);
    double v;
    if (t.dtype == STITCH_BOOL) v = static_cast<double>(x >> 63);
    else if (t.dtype == STITCH_I32 || t.dtype == STITCH_I64) v = static_cast<double>(x % 17) - 8.0;
    else v = static_cast<double>(x >> 11) * 0x1p-53 * 2.0 - 1.0;
    store(t, i, v);
  }
}

std::string typeString(stitch_dtype_t t, const std::vector<int64_t>& shape) {
  std::string s = std::string(stitch_dtype_name(t)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string summarize(const HostTensor& t) {
  int64_t n = t.numel();
  std::string first = "[";
  for (int64_t i = 0; i < n && i < 4; ++i)
    first += (i ? ", " : "") + fmt::format("{:.6g}", t.at(i));
  first += n > 4 ? ", ...]" : "]";
  if (n == 0) return "(empty)";
  if (t.dtype == STITCH_BOOL) {
    int64_t trues = 0;
    for (int64_t i = 0; i < n; ++i) trues += t.at(i) != 0.0;
    return fmt::format("true {} of {}  {}", trues, n, first);
  }
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
  int64_t nans = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = t.at(i);
    if (std::isnan(v)) {
      ++nans;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  std::string s = fmt::format("min {:.6g}  max {:.6g}  mean {:.6g}", lo, hi,
                              n > nans ? sum / static_cast<double>(n - nans) : NAN);
  if (nans) s += fmt::format("  nan {}", nans);
  return s + "  " + first;
}

}  // namespace stitch::cli
