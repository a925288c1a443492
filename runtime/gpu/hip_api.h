// The slice of HIP (runtime module API and hipRTC) that Stitch uses, declared here.
//
// libamdhip64 is opened with dlopen; nothing here needs a HIP header at build time. Values are
// those of Debian 12's HIP 5.2 headers (libamdhip64-dev 5.2.3), checked by
// tests/gpu/test_api_declarations.cpp where those headers are installed. The device attribute
// numbers are kept stable by AMD since ROCm 5 (removed entries became hipDeviceAttributeUnusedN),
// so they hold for ROCm 6 too; hipDeviceProp_t's layout is not (see hip_device.cpp).
//
// In HIP 5.x hipRTC lives in libamdhip64 itself, so one library serves both the device and the
// compiler. (ROCm 6 moved hipRTC to libhiprtc.so; not handled yet.)
#pragma once

#include <cstddef>
#include <string>

#include "runtime/gpu/rtc_api.h"

// Opaque handles, declared exactly as hip_runtime_api.h does.
struct ihipStream_t;
struct ihipModule_t;
struct ihipModuleSymbol_t;
struct ihipEvent_t;

namespace stitch::rt::gpu::hip {

using hipError_t = int;
using hipStream_t = ihipStream_t*;
using hipModule_t = ihipModule_t*;
using hipFunction_t = ihipModuleSymbol_t*;
using hipEvent_t = ihipEvent_t*;

constexpr hipError_t hipSuccess = 0;
constexpr hipError_t hipErrorOutOfMemory = 2;
constexpr hipError_t hipErrorNoDevice = 100;
constexpr hipError_t hipErrorInvalidImage = 200;
constexpr hipError_t hipErrorNoBinaryForGpu = 209;
constexpr hipError_t hipErrorInvalidKernelFile = 218;
constexpr hipError_t hipErrorNotFound = 500;

// hipDeviceAttribute_t.
constexpr int hipDeviceAttributeCooperativeLaunch = 10;
constexpr int hipDeviceAttributeMultiprocessorCount = 63;
constexpr int hipDeviceAttributeMaxSharedMemoryPerBlock = 74;
constexpr int hipDeviceAttributeWarpSize = 87;

// hipFunction_attribute.
constexpr int HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
constexpr int HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
constexpr int HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3;
constexpr int HIP_FUNC_ATTRIBUTE_NUM_REGS = 4;

// hipMemcpyKind.
constexpr int hipMemcpyHostToDevice = 1;
constexpr int hipMemcpyDeviceToHost = 2;
constexpr int hipMemcpyDeviceToDevice = 3;

// hipDeviceProp_t in HIP 5.x (hipGetDeviceProperties): its size and where gcnArchName sits.
constexpr size_t kDeviceProp5Size = 792;
constexpr size_t kDeviceProp5GcnArchNameOffset = 396;

// X(member, exported symbol, return type, parameter list).
#define STITCH_HIP_FUNCTIONS(X)                                                                    \
  X(hipInit, "hipInit", hipError_t, (unsigned flags))                                              \
  X(hipRuntimeGetVersion, "hipRuntimeGetVersion", hipError_t, (int* version))                      \
  X(hipGetErrorName, "hipGetErrorName", const char*, (hipError_t error))                           \
  X(hipGetErrorString, "hipGetErrorString", const char*, (hipError_t error))                       \
  X(hipGetDeviceCount, "hipGetDeviceCount", hipError_t, (int* count))                              \
  X(hipSetDevice, "hipSetDevice", hipError_t, (int device))                                        \
  X(hipDeviceGetAttribute, "hipDeviceGetAttribute", hipError_t,                                    \
    (int* value, int attribute, int device))                                                       \
  X(hipGetDeviceProperties, "hipGetDeviceProperties", hipError_t, (void* properties, int device))  \
  X(hipDeviceSynchronize, "hipDeviceSynchronize", hipError_t, ())                                  \
  X(hipModuleLoadData, "hipModuleLoadData", hipError_t, (hipModule_t * module, const void* image)) \
  X(hipModuleUnload, "hipModuleUnload", hipError_t, (hipModule_t module))                          \
  X(hipModuleGetFunction, "hipModuleGetFunction", hipError_t,                                      \
    (hipFunction_t * fn, hipModule_t module, const char* name))                                    \
  X(hipFuncGetAttribute, "hipFuncGetAttribute", hipError_t,                                        \
    (int* value, int attribute, hipFunction_t fn))                                                 \
  X(hipModuleLaunchKernel, "hipModuleLaunchKernel", hipError_t,                                    \
    (hipFunction_t fn, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX,            \
     unsigned blockY, unsigned blockZ, unsigned sharedBytes, hipStream_t stream, void** params,    \
     void** extra))                                                                                \
  X(hipModuleOccupancyMaxActiveBlocksPerMultiprocessor,                                            \
    "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor", hipError_t,                              \
    (int* blocks, hipFunction_t fn, int blockSize, size_t dynamicSharedBytes))                     \
  X(hipMalloc, "hipMalloc", hipError_t, (void** ptr, size_t bytes))                                \
  X(hipFree, "hipFree", hipError_t, (void* ptr))                                                   \
  X(hipMemcpy, "hipMemcpy", hipError_t, (void* dst, const void* src, size_t bytes, int kind))      \
  X(hipMemcpyAsync, "hipMemcpyAsync", hipError_t,                                                  \
    (void* dst, const void* src, size_t bytes, int kind, hipStream_t stream))                      \
  X(hipStreamSynchronize, "hipStreamSynchronize", hipError_t, (hipStream_t stream))                \
  X(hipEventCreate, "hipEventCreate", hipError_t, (hipEvent_t * event))                            \
  X(hipEventDestroy, "hipEventDestroy", hipError_t, (hipEvent_t event))                            \
  X(hipEventRecord, "hipEventRecord", hipError_t, (hipEvent_t event, hipStream_t stream))          \
  X(hipEventSynchronize, "hipEventSynchronize", hipError_t, (hipEvent_t event))                    \
  X(hipEventElapsedTime, "hipEventElapsedTime", hipError_t,                                        \
    (float* ms, hipEvent_t start, hipEvent_t end))

struct Api {
#define STITCH_HIP_MEMBER(member, symbol, ret, params) ret(*member) params = nullptr;
  STITCH_HIP_FUNCTIONS(STITCH_HIP_MEMBER)
#undef STITCH_HIP_MEMBER
  // Absent before ROCm 5.5 or so (HIP 5.2 has only hipLaunchCooperativeKernel, which takes a
  // host-registered function and so cannot launch a module's kernel): nullptr then.
  hipError_t (*hipModuleLaunchCooperativeKernel)(hipFunction_t fn, unsigned gridX, unsigned gridY,
                                                 unsigned gridZ, unsigned blockX, unsigned blockY,
                                                 unsigned blockZ, unsigned sharedBytes,
                                                 hipStream_t stream, void** params) = nullptr;
  std::string libraryPath;
};

// The HIP runtime's function table, loaded once per process. STITCH_HIP_LIBRARY names the
// library; otherwise libamdhip64.so.5, then libamdhip64.so. nullptr, and *why, when missing.
const Api* api(std::string* why = nullptr);

// hipRTC's functions from the same library; nullptr, and *why, when missing.
const RtcFunctions* rtc(std::string* why = nullptr);

// "hipErrorOutOfMemory (out of memory)".
std::string errorText(const Api& api, hipError_t e);

}  // namespace stitch::rt::gpu::hip
