// Stitch declares the CUDA, NVRTC and HIP entry points it opens with dlopen itself (so it builds
// without their headers). Where the real headers are present at build time, this file checks our
// declarations against them: constants have the same values, each function binds the symbol the
// header's macros name, and takes parameters of the same types (enums as int) and count.
//
// Our declarations are expanded before the vendor headers are included: cuda.h #defines names
// like cuMemAlloc to cuMemAlloc_v2, which would otherwise rewrite our member names too.
#include <gtest/gtest.h>

#include <string>
#include <type_traits>

#include "runtime/gpu/cuda_api.h"
#include "runtime/gpu/hip_api.h"
#include "runtime/gpu/rtc_api.h"

namespace ours {
#define STITCH_OUR_CUDA_TYPE(member, symbol, params) \
  using member##_t = decltype(stitch::rt::gpu::cu::Api::member);
STITCH_CUDA_FUNCTIONS(STITCH_OUR_CUDA_TYPE)
#undef STITCH_OUR_CUDA_TYPE
#define STITCH_OUR_HIP_TYPE(member, symbol, ret, params) \
  using member##_t = decltype(stitch::rt::gpu::hip::Api::member);
STITCH_HIP_FUNCTIONS(STITCH_OUR_HIP_TYPE)
#undef STITCH_OUR_HIP_TYPE
using Rtc = stitch::rt::gpu::RtcFunctions;
}  // namespace ours

#if defined(STITCH_CHECK_CUDA_HEADERS)
#include <cuda.h>
#include <nvrtc.h>
#endif
#if defined(STITCH_CHECK_HIP_HEADERS)
#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>
#endif

namespace {

#define STITCH_STR(x) #x
#define STITCH_XSTR(x) STITCH_STR(x)

template <class T>
using Plain = std::conditional_t<std::is_enum_v<T>, int, T>;

// Same parameter types (enums read as int) and same-sized results.
template <class R1, class... A1, class R2, class... A2>
constexpr bool sameSignature(R1 (*)(A1...), R2 (*)(A2...)) {
  if constexpr (sizeof...(A1) != sizeof...(A2)) return false;
  else
    return sizeof(Plain<R1>) == sizeof(Plain<R2>) && (std::is_same_v<Plain<A1>, Plain<A2>> && ...);
}

// Same ABI: parameter count, and each parameter of the same size and pointer-ness (opaque handle
// types differ in name only: our void* for NVRTC's struct _nvrtcProgram*).
template <class R1, class... A1, class R2, class... A2>
constexpr bool sameAbi(R1 (*)(A1...), R2 (*)(A2...)) {
  if constexpr (sizeof...(A1) != sizeof...(A2)) return false;
  else
    return sizeof(R1) == sizeof(R2) &&
           ((sizeof(A1) == sizeof(A2) && std::is_pointer_v<A1> == std::is_pointer_v<A2>)&&...);
}

#if defined(STITCH_CHECK_CUDA_HEADERS)
TEST(ApiDeclarations, CudaDriverMatchesCudaH) {
  namespace cu = stitch::rt::gpu::cu;
  static_assert(cu::CUDA_SUCCESS == ::CUDA_SUCCESS);
  static_assert(cu::CUDA_ERROR_OUT_OF_MEMORY == ::CUDA_ERROR_OUT_OF_MEMORY);
  static_assert(cu::CUDA_ERROR_NO_DEVICE == ::CUDA_ERROR_NO_DEVICE);
  static_assert(cu::CUDA_ERROR_INVALID_IMAGE == ::CUDA_ERROR_INVALID_IMAGE);
  static_assert(cu::CUDA_ERROR_NO_BINARY_FOR_GPU == ::CUDA_ERROR_NO_BINARY_FOR_GPU);
  static_assert(cu::CUDA_ERROR_NOT_FOUND == ::CUDA_ERROR_NOT_FOUND);
  static_assert(4 == ::CUDA_ERROR_DEINITIALIZED);  // cuda_device.cpp's kDeinitialized
  static_assert(cu::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK ==
                ::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  static_assert(cu::CU_DEVICE_ATTRIBUTE_WARP_SIZE == ::CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  static_assert(cu::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ==
                ::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  static_assert(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ==
                ::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  static_assert(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ==
                ::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  static_assert(cu::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH ==
                ::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH);
  static_assert(cu::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN ==
                ::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  static_assert(cu::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK ==
                ::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  static_assert(cu::CU_DEVICE_ATTRIBUTE_CLOCK_RATE == ::CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  static_assert(cu::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR ==
                ::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  static_assert(cu::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR ==
                ::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  static_assert(cu::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR ==
                ::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  static_assert(cu::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR ==
                ::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  static_assert(cu::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ==
                ::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  static_assert(cu::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES == ::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
  static_assert(cu::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES == ::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
  static_assert(cu::CU_FUNC_ATTRIBUTE_NUM_REGS == ::CU_FUNC_ATTRIBUTE_NUM_REGS);
  static_assert(cu::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ==
                ::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  static_assert(cu::CU_EVENT_DEFAULT == ::CU_EVENT_DEFAULT);
  static_assert(std::is_same_v<cu::CUdeviceptr, ::CUdeviceptr>);
  static_assert(std::is_same_v<cu::CUcontext, ::CUcontext>);
  static_assert(std::is_same_v<cu::CUstream, ::CUstream>);

  // `member` below is the name as cuda.h's macros leave it: the symbol cuda.h would call.
#define STITCH_CHECK_CUDA(member, symbol, params)                                         \
  static_assert(sameSignature(ours::member##_t{}, &::member), #member);                   \
  if (std::string(symbol) != "cuEventElapsedTime") {                                      \
    EXPECT_EQ(std::string(symbol), STITCH_XSTR(member)) << "cuda.h binds another symbol"; \
  }
  STITCH_CUDA_FUNCTIONS(STITCH_CHECK_CUDA)
#undef STITCH_CHECK_CUDA
  // cuda.h 12.8+ maps cuEventElapsedTime to cuEventElapsedTime_v2, which older drivers lack; the
  // unversioned symbol is exported by every driver and does the same for events on one context.
}

TEST(ApiDeclarations, NvrtcMatchesNvrtcH) {
  static_assert(ours::Rtc::kSuccess == ::NVRTC_SUCCESS);
  static_assert(ours::Rtc::kErrorCompilation == ::NVRTC_ERROR_COMPILATION);
  static_assert(sameAbi(decltype(ours::Rtc::errorString){}, &::nvrtcGetErrorString));
  static_assert(sameAbi(decltype(ours::Rtc::createProgram){}, &::nvrtcCreateProgram));
  static_assert(sameAbi(decltype(ours::Rtc::destroyProgram){}, &::nvrtcDestroyProgram));
  static_assert(sameAbi(decltype(ours::Rtc::compileProgram){}, &::nvrtcCompileProgram));
  static_assert(sameAbi(decltype(ours::Rtc::getProgramLogSize){}, &::nvrtcGetProgramLogSize));
  static_assert(sameAbi(decltype(ours::Rtc::getProgramLog){}, &::nvrtcGetProgramLog));
  static_assert(sameAbi(decltype(ours::Rtc::getCodeSize){}, &::nvrtcGetCUBINSize));
  static_assert(sameAbi(decltype(ours::Rtc::getCode){}, &::nvrtcGetCUBIN));
  static_assert(sameAbi(decltype(ours::Rtc::version){}, &::nvrtcVersion));
}
#else
TEST(ApiDeclarations, CudaDriverMatchesCudaH) {
  GTEST_SKIP() << "cuda.h was not found at build time (find_package(CUDAToolkit))";
}
#endif

#if defined(STITCH_CHECK_HIP_HEADERS)
TEST(ApiDeclarations, HipMatchesHipRuntimeApiH) {
  namespace hip = stitch::rt::gpu::hip;
  static_assert(hip::hipSuccess == ::hipSuccess);
  static_assert(hip::hipErrorOutOfMemory == ::hipErrorOutOfMemory);
  static_assert(hip::hipErrorNoDevice == ::hipErrorNoDevice);
  static_assert(hip::hipErrorInvalidImage == ::hipErrorInvalidImage);
  static_assert(hip::hipErrorNoBinaryForGpu == ::hipErrorNoBinaryForGpu);
  static_assert(hip::hipErrorNotFound == ::hipErrorNotFound);
  static_assert(hip::hipDeviceAttributeCooperativeLaunch == ::hipDeviceAttributeCooperativeLaunch);
  static_assert(hip::hipDeviceAttributeMultiprocessorCount ==
                ::hipDeviceAttributeMultiprocessorCount);
  static_assert(hip::hipDeviceAttributeMaxSharedMemoryPerBlock ==
                ::hipDeviceAttributeMaxSharedMemoryPerBlock);
  static_assert(hip::hipDeviceAttributeWarpSize == ::hipDeviceAttributeWarpSize);
  static_assert(hip::HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ==
                ::HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  static_assert(hip::HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES ==
                ::HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
  static_assert(hip::HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES == ::HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
  static_assert(hip::HIP_FUNC_ATTRIBUTE_NUM_REGS == ::HIP_FUNC_ATTRIBUTE_NUM_REGS);
  static_assert(hip::hipMemcpyHostToDevice == ::hipMemcpyHostToDevice);
  static_assert(hip::hipMemcpyDeviceToHost == ::hipMemcpyDeviceToHost);
  static_assert(hip::hipMemcpyDeviceToDevice == ::hipMemcpyDeviceToDevice);
#if HIP_VERSION_MAJOR == 5
  static_assert(hip::kDeviceProp5Size == sizeof(::hipDeviceProp_t));
  static_assert(hip::kDeviceProp5GcnArchNameOffset == offsetof(::hipDeviceProp_t, gcnArchName));
#endif
  // One by one rather than through STITCH_HIP_FUNCTIONS: C++ sees hipMalloc as an overload set
  // (a template is declared beside the C function), whose address must be cast to be taken.
  static_assert(sameAbi(ours::hipInit_t{}, &::hipInit));
  static_assert(sameAbi(ours::hipRuntimeGetVersion_t{}, &::hipRuntimeGetVersion));
  static_assert(sameAbi(ours::hipGetErrorName_t{}, &::hipGetErrorName));
  static_assert(sameAbi(ours::hipGetErrorString_t{}, &::hipGetErrorString));
  static_assert(sameAbi(ours::hipGetDeviceCount_t{}, &::hipGetDeviceCount));
  static_assert(sameAbi(ours::hipSetDevice_t{}, &::hipSetDevice));
  static_assert(sameAbi(ours::hipDeviceGetAttribute_t{}, &::hipDeviceGetAttribute));
  static_assert(sameAbi(ours::hipGetDeviceProperties_t{}, &::hipGetDeviceProperties));
  static_assert(sameAbi(ours::hipDeviceSynchronize_t{}, &::hipDeviceSynchronize));
  static_assert(sameAbi(ours::hipModuleLoadData_t{}, &::hipModuleLoadData));
  static_assert(sameAbi(ours::hipModuleUnload_t{}, &::hipModuleUnload));
  static_assert(sameAbi(ours::hipModuleGetFunction_t{}, &::hipModuleGetFunction));
  static_assert(sameAbi(ours::hipFuncGetAttribute_t{}, &::hipFuncGetAttribute));
  static_assert(sameAbi(ours::hipModuleLaunchKernel_t{}, &::hipModuleLaunchKernel));
  static_assert(sameAbi(ours::hipModuleOccupancyMaxActiveBlocksPerMultiprocessor_t{},
                        &::hipModuleOccupancyMaxActiveBlocksPerMultiprocessor));
  static_assert(
      sameAbi(ours::hipMalloc_t{}, static_cast<hipError_t (*)(void**, size_t)>(&::hipMalloc)));
  static_assert(sameAbi(ours::hipFree_t{}, &::hipFree));
  static_assert(sameAbi(ours::hipMemcpy_t{}, &::hipMemcpy));
  static_assert(sameAbi(ours::hipMemcpyAsync_t{}, &::hipMemcpyAsync));
  static_assert(sameAbi(ours::hipStreamSynchronize_t{}, &::hipStreamSynchronize));
  static_assert(sameAbi(ours::hipEventCreate_t{}, &::hipEventCreate));
  static_assert(sameAbi(ours::hipEventDestroy_t{}, &::hipEventDestroy));
  static_assert(sameAbi(ours::hipEventRecord_t{}, &::hipEventRecord));
  static_assert(sameAbi(ours::hipEventSynchronize_t{}, &::hipEventSynchronize));
  static_assert(sameAbi(ours::hipEventElapsedTime_t{}, &::hipEventElapsedTime));
#define STITCH_COUNT_HIP(member, symbol, ret, params) +1
  static_assert(0 STITCH_HIP_FUNCTIONS(STITCH_COUNT_HIP) == 25, "a HIP function is not checked");
#undef STITCH_COUNT_HIP
  static_assert(ours::Rtc::kSuccess == ::HIPRTC_SUCCESS);
  static_assert(ours::Rtc::kErrorCompilation == ::HIPRTC_ERROR_COMPILATION);
  static_assert(sameAbi(decltype(ours::Rtc::createProgram){}, &::hiprtcCreateProgram));
  static_assert(sameAbi(decltype(ours::Rtc::compileProgram){}, &::hiprtcCompileProgram));
  static_assert(sameAbi(decltype(ours::Rtc::getCodeSize){}, &::hiprtcGetCodeSize));
  static_assert(sameAbi(decltype(ours::Rtc::getCode){}, &::hiprtcGetCode));
}
#else
TEST(ApiDeclarations, HipMatchesHipRuntimeApiH) {
  GTEST_SKIP() << "HIP's headers (libamdhip64-dev) were not found at build time";
}
#endif

}  // namespace
