// The slice of the CUDA driver API that Stitch uses, declared here instead of included.
//
// libcuda is opened with dlopen (dynamic_library.h), so nothing here may need cuda.h at build
// time: the handful of types, constants and signatures are restated below, with the values of
// CUDA 13's cuda.h (tests/gpu/test_api_declarations.cpp checks them against the real header when
// the toolkit is installed). Symbols are looked up by the names cuda.h's macros expand to (the
// `_v2` entry points); drivers keep old symbols alive, so these resolve on any driver new enough
// for sm_80 cubin. Functions are listed once, in STITCH_CUDA_FUNCTIONS, so a declaration cannot
// exist without being bound.
#pragma once

#include <cstddef>
#include <string>

// Opaque handles, declared exactly as cuda.h does so the two agree when both are seen.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;

namespace stitch::rt::gpu::cu {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;

// CUresult values we treat specially.
constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;

// CUdevice_attribute.
constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
constexpr int CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
constexpr int CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13;  // kHz
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR = 106;

// CUfunction_attribute.
constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
constexpr int CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3;
constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

constexpr unsigned CU_EVENT_DEFAULT = 0;

// X(member, exported symbol, parameter list). Every function returns CUresult.
#define STITCH_CUDA_FUNCTIONS(X)                                                                \
  X(cuInit, "cuInit", (unsigned flags))                                                         \
  X(cuDriverGetVersion, "cuDriverGetVersion", (int* version))                                   \
  X(cuGetErrorName, "cuGetErrorName", (CUresult error, const char** name))                      \
  X(cuGetErrorString, "cuGetErrorString", (CUresult error, const char** text))                  \
  X(cuDeviceGetCount, "cuDeviceGetCount", (int* count))                                         \
  X(cuDeviceGet, "cuDeviceGet", (CUdevice * device, int ordinal))                               \
  X(cuDeviceGetName, "cuDeviceGetName", (char* name, int len, CUdevice device))                 \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", (int* value, int attribute, CUdevice device)) \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext * ctx, CUdevice device))   \
  X(cuCtxGetCurrent, "cuCtxGetCurrent", (CUcontext * ctx))                                      \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext ctx))                                        \
  X(cuCtxSynchronize, "cuCtxSynchronize", ())                                                   \
  X(cuModuleLoadData, "cuModuleLoadData", (CUmodule * module, const void* image))               \
  X(cuModuleUnload, "cuModuleUnload", (CUmodule module))                                        \
  X(cuModuleGetFunction, "cuModuleGetFunction",                                                 \
    (CUfunction * fn, CUmodule module, const char* name))                                       \
  X(cuFuncGetAttribute, "cuFuncGetAttribute", (int* value, int attribute, CUfunction fn))       \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", (CUfunction fn, int attribute, int value))        \
  X(cuLaunchKernel, "cuLaunchKernel",                                                           \
    (CUfunction fn, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX,            \
     unsigned blockY, unsigned blockZ, unsigned sharedBytes, CUstream stream, void** params,    \
     void** extra))                                                                             \
  X(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel",                                     \
    (CUfunction fn, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX,            \
     unsigned blockY, unsigned blockZ, unsigned sharedBytes, CUstream stream, void** params))   \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", \
    (int* blocks, CUfunction fn, int blockSize, size_t dynamicSharedBytes))                     \
  X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr * ptr, size_t bytes))                             \
  X(cuMemFree, "cuMemFree_v2", (CUdeviceptr ptr))                                               \
  X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", (CUdeviceptr dst, const void* src, size_t bytes))          \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", (void* dst, CUdeviceptr src, size_t bytes))                \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                                  \
    (CUdeviceptr dst, const void* src, size_t bytes, CUstream stream))                          \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",                                                  \
    (void* dst, CUdeviceptr src, size_t bytes, CUstream stream))                                \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2",                                                  \
    (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))                          \
  X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream stream))                              \
  X(cuEventCreate, "cuEventCreate", (CUevent * event, unsigned flags))                          \
  X(cuEventDestroy, "cuEventDestroy_v2", (CUevent event))                                       \
  X(cuEventRecord, "cuEventRecord", (CUevent event, CUstream stream))                           \
  X(cuEventSynchronize, "cuEventSynchronize", (CUevent event))                                  \
  X(cuEventElapsedTime, "cuEventElapsedTime", (float* ms, CUevent start, CUevent end))

struct Api {
#define STITCH_CUDA_MEMBER(member, symbol, params) CUresult(*member) params = nullptr;
  STITCH_CUDA_FUNCTIONS(STITCH_CUDA_MEMBER)
#undef STITCH_CUDA_MEMBER
  std::string libraryPath;
};

// libcuda's function table, loaded once per process (STITCH_CUDA_LIBRARY overrides the search
// for libcuda.so.1). nullptr, and *why, when the library or one of the functions is missing.
const Api* api(std::string* why = nullptr);

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", or the number when the driver does not know it.
std::string errorText(const Api& api, CUresult r);

}  // namespace stitch::rt::gpu::cu
