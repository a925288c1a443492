// Small helpers shared by the C API test files (they link libstitch.so only, not the core).
#pragma once

#include <stitch/stitch.h>

#include <string>

namespace stitch::apitest {

inline std::string lastError() { return stitch_last_error(); }

// A host f32 DLTensor over caller-owned data and shape (compact strides).
inline DLTensor f32Tensor(void* data, int64_t* shape, int ndim) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape;
  return t;
}

}  // namespace stitch::apitest
