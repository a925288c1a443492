// The shape NVRTC and hipRTC share: create a program from source and named headers, compile it
// with options, read its log and code, destroy it.
//
// hipRTC copies NVRTC function for function, so one table type describes both and one driver
// (device_compiler.cpp) runs either. The declarations are ours, written from nvrtc.h and hiprtc.h
// (no header of either is needed to build): results are the libraries' C enums, passed as int
// (same ABI), and programs are opaque pointers. Status 0 is success in both.
#pragma once

#include <cstddef>

namespace stitch::rt::gpu {

struct RtcFunctions {
  using Program = void*;
  static constexpr int kSuccess = 0;
  static constexpr int kErrorCompilation = 6;  // NVRTC_ERROR_COMPILATION, HIPRTC_ERROR_COMPILATION

  const char* (*errorString)(int result) = nullptr;
  int (*createProgram)(Program* program, const char* source, const char* name, int numHeaders,
                       const char* const* headers, const char* const* includeNames) = nullptr;
  int (*destroyProgram)(Program* program) = nullptr;
  int (*compileProgram)(Program program, int numOptions, const char* const* options) = nullptr;
  int (*getProgramLogSize)(Program program, size_t* size) = nullptr;
  int (*getProgramLog)(Program program, char* log) = nullptr;
  // nvrtcGetCUBIN(Size) for NVRTC (machine code, not PTX); hiprtcGetCode(Size) for hipRTC.
  int (*getCodeSize)(Program program, size_t* size) = nullptr;
  int (*getCode)(Program program, char* code) = nullptr;
  int (*version)(int* major, int* minor) = nullptr;
};

}  // namespace stitch::rt::gpu
