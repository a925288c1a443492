// NVRTC, opened at run time.
//
// Entry points are resolved by name into the shared RtcFunctions table (rtc_api.h); values are
// those of CUDA 13's nvrtc.h (checked by tests/gpu/test_api_declarations.cpp when the toolkit is
// installed). The code fetched is cubin (nvrtcGetCUBIN, CUDA 11.1 and later), so compiling for a
// real architecture needs no GPU and the driver never JIT-compiles PTX at load time.
#pragma once

#include <string>

#include "runtime/gpu/rtc_api.h"

namespace stitch::rt::gpu::nvrtc {

// NVRTC's functions, loaded once per process. STITCH_NVRTC_LIBRARY names the library to use;
// otherwise libnvrtc.so, then the sonames of CUDA 13, 12 and 11.2, then the same under
// /usr/local/cuda/lib64. nullptr, and *why, when no usable library is found.
const RtcFunctions* api(std::string* why = nullptr);
// The path of the library that was opened (empty when none).
const std::string& libraryPath();

}  // namespace stitch::rt::gpu::nvrtc
