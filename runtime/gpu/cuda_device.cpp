// The CUDA device: the driver API through libcuda (cuda_api.h), on the primary context.
#include <algorithm>
#include <mutex>

#include "runtime/gpu/cuda_api.h"
#include "runtime/gpu/device.h"
#include "runtime/support/error.h"
#include "runtime/support/logging.h"

namespace stitch::rt::gpu {

namespace {

using namespace cu;

// Kernels may use this much dynamic shared memory without opting in.
constexpr size_t kDefaultSharedLimit = 48 * 1024;

ErrorCode codeFor(CUresult r) {
  switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY: return ErrorCode::OutOfMemory;
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_NO_BINARY_FOR_GPU: return ErrorCode::Compile;
    case CUDA_ERROR_NOT_FOUND: return ErrorCode::InvalidArgument;
    default: return ErrorCode::Internal;
  }
}

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(const Api& api) : api_(api) {}

  // Opens device 0 and retains its primary context; throws BackendUnavailable with the reason.
  void open() {
    CUresult r = api_.cuInit(0);
    STITCH_CHECK(r == CUDA_SUCCESS, ErrorCode::BackendUnavailable, "cuInit failed: {}",
                 errorText(api_, r));
    int count = 0;
    check(api_.cuDeviceGetCount(&count), "cuDeviceGetCount");
    STITCH_CHECK(count > 0, ErrorCode::BackendUnavailable, "no CUDA device");
    check(api_.cuDeviceGet(&device_, 0), "cuDeviceGet");
    char name[256] = {};
    check(api_.cuDeviceGetName(name, sizeof(name) - 1, device_), "cuDeviceGetName");
    name_ = name;
    int major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    int minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    arch_ = "sm_" + std::to_string(major) + std::to_string(minor);
    smCount_ = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    warpSize_ = attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    cooperative_ = attribute(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH) != 0;
    maxShared_ = static_cast<size_t>(
        std::max(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
                 attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)));
    // Retained for the life of the process, never released (see device.h).
    check(api_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
    int driver = 0;
    api_.cuDriverGetVersion(&driver);
    driver_ = driver;
    log().debug("cuda: {} ({}, {} SMs), driver API {}.{}, from {}", name_, arch_, smCount_,
                driver / 1000, driver % 1000 / 10, api_.libraryPath);
  }

  std::string_view backend() const override { return "cuda"; }
  const std::string& arch() const override { return arch_; }
  const std::string& name() const override { return name_; }
  int smCount() const override { return smCount_; }
  int warpSize() const override { return warpSize_; }
  bool cooperativeLaunch() const override { return cooperative_; }
  size_t maxSharedPerBlock() const override { return maxShared_; }

  DeviceProfile queryProfile() override {
    // An attribute this driver does not know (deprecated, removed) reads as 0: unknown.
    auto optional = [&](int a) {
      int v = 0;
      return api_.cuDeviceGetAttribute(&v, a, device_) == CUDA_SUCCESS ? v : 0;
    };
    DeviceProfile p;
    p.name = name_;
    p.driver = std::to_string(driver_);
    p.maxThreadsPerProcessor = optional(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    p.maxBlocksPerProcessor = optional(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
    p.maxThreadsPerBlock = optional(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    p.registersPerProcessor = optional(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
    p.sharedMemoryPerProcessor = optional(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    p.sharedMemoryPerBlock = static_cast<int64_t>(maxShared_);
    p.clockHz = optional(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) * 1e3;
    return p;
  }

  void makeCurrent() override {
    CUcontext current = nullptr;
    check(api_.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
    if (current != context_) check(api_.cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  }

  std::shared_ptr<const void> loadModule(std::span<const uint8_t> binary) override {
    detail::checkModule(*this, binary);
    makeCurrent();
    CUmodule module = nullptr;
    check(api_.cuModuleLoadData(&module, binary.data()), "cuModuleLoadData",
          fmt::format("{} bytes for {}", binary.size(), arch_));
    return std::shared_ptr<const void>(module, [this](const void* m) {
      CUmodule mod = static_cast<CUmodule>(const_cast<void*>(m));
      CUresult r = api_.cuCtxSetCurrent(context_);
      if (r == CUDA_SUCCESS) r = api_.cuModuleUnload(mod);
      // At exit the driver may already be shut down (CUDA_ERROR_DEINITIALIZED): nothing to free.
      if (r != CUDA_SUCCESS && r != kDeinitialized)
        log().warn("cuda: cuModuleUnload failed: {}", errorText(api_, r));
    });
  }

  void* function(const std::shared_ptr<const void>& module, const std::string& name) override {
    STITCH_CHECK(module != nullptr, ErrorCode::InvalidArgument, "cuda: function of a null module");
    makeCurrent();
    CUfunction fn = nullptr;
    CUmodule mod = static_cast<CUmodule>(const_cast<void*>(module.get()));
    check(api_.cuModuleGetFunction(&fn, mod, name.c_str()), "cuModuleGetFunction",
          fmt::format("kernel '{}'", name));
    return fn;
  }

  void launch(void* fn, int64_t grid, int block, size_t sharedBytes, void* stream,
              void** args) override {
    unsigned blocks = detail::checkLaunch(*this, fn, grid, block, sharedBytes);
    makeCurrent();
    optInShared(fn, sharedBytes);
    check(api_.cuLaunchKernel(static_cast<CUfunction>(fn), blocks, 1, 1, block, 1, 1,
                              static_cast<unsigned>(sharedBytes), static_cast<CUstream>(stream),
                              args, nullptr),
          "cuLaunchKernel", launchText(grid, block, sharedBytes));
  }

  void launchCooperative(void* fn, int64_t grid, int block, size_t sharedBytes, void* stream,
                         void** args) override {
    STITCH_CHECK(cooperative_, ErrorCode::Unsupported,
                 "cuda: {} does not support cooperative launches", name_);
    unsigned blocks = detail::checkLaunch(*this, fn, grid, block, sharedBytes);
    makeCurrent();
    optInShared(fn, sharedBytes);
    check(api_.cuLaunchCooperativeKernel(static_cast<CUfunction>(fn), blocks, 1, 1, block, 1, 1,
                                         static_cast<unsigned>(sharedBytes),
                                         static_cast<CUstream>(stream), args),
          "cuLaunchCooperativeKernel", launchText(grid, block, sharedBytes));
  }

  int maxActiveBlocksPerSm(void* fn, int block, size_t sharedBytes) override {
    makeCurrent();
    optInShared(fn, sharedBytes);
    int blocks = 0;
    check(api_.cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, static_cast<CUfunction>(fn),
                                                           block, sharedBytes),
          "cuOccupancyMaxActiveBlocksPerMultiprocessor",
          fmt::format("{} threads, {} bytes shared", block, sharedBytes));
    return blocks;
  }

  int functionAttribute(void* fn, FunctionAttr a) override {
    int attr = 0;
    switch (a) {
      case FunctionAttr::MaxThreadsPerBlock: attr = CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK; break;
      case FunctionAttr::Registers: attr = CU_FUNC_ATTRIBUTE_NUM_REGS; break;
      case FunctionAttr::LocalBytes: attr = CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES; break;
      case FunctionAttr::StaticSharedBytes: attr = CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES; break;
    }
    makeCurrent();
    int value = 0;
    check(api_.cuFuncGetAttribute(&value, attr, static_cast<CUfunction>(fn)), "cuFuncGetAttribute");
    return value;
  }

  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    makeCurrent();
    CUdeviceptr p = 0;
    check(api_.cuMemAlloc(&p, bytes), "cuMemAlloc", fmt::format("{} bytes on {}", bytes, name_));
    return reinterpret_cast<void*>(p);
  }

  void release(void* p) override {
    if (p == nullptr) return;
    CUresult r = api_.cuCtxSetCurrent(context_);
    if (r == CUDA_SUCCESS) r = api_.cuMemFree(ptr(p));
    if (r != CUDA_SUCCESS && r != kDeinitialized)
      log().warn("cuda: cuMemFree({}) failed: {}", p, errorText(api_, r));
  }

  void copyToDevice(void* dst, const void* src, size_t bytes, void* stream) override {
    if (bytes == 0) return;
    makeCurrent();
    if (stream == nullptr)
      check(api_.cuMemcpyHtoD(ptr(dst), src, bytes), "cuMemcpyHtoD", copyText(bytes));
    else
      check(api_.cuMemcpyHtoDAsync(ptr(dst), src, bytes, static_cast<CUstream>(stream)),
            "cuMemcpyHtoDAsync", copyText(bytes));
  }

  void copyToHost(void* dst, const void* src, size_t bytes, void* stream) override {
    if (bytes == 0) return;
    makeCurrent();
    if (stream == nullptr)
      check(api_.cuMemcpyDtoH(dst, ptr(src), bytes), "cuMemcpyDtoH", copyText(bytes));
    else
      check(api_.cuMemcpyDtoHAsync(dst, ptr(src), bytes, static_cast<CUstream>(stream)),
            "cuMemcpyDtoHAsync", copyText(bytes));
  }

  void copyDeviceToDevice(void* dst, const void* src, size_t bytes, void* stream) override {
    if (bytes == 0) return;
    makeCurrent();
    check(api_.cuMemcpyDtoDAsync(ptr(dst), ptr(src), bytes, static_cast<CUstream>(stream)),
          "cuMemcpyDtoDAsync", copyText(bytes));
  }

  void synchronize(void* stream) override {
    makeCurrent();
    if (stream == nullptr) check(api_.cuCtxSynchronize(), "cuCtxSynchronize");
    else check(api_.cuStreamSynchronize(static_cast<CUstream>(stream)), "cuStreamSynchronize");
  }

  std::shared_ptr<void> createEvent() override {
    makeCurrent();
    CUevent event = nullptr;
    check(api_.cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate");
    return std::shared_ptr<void>(event, [this](void* e) {
      CUresult r = api_.cuEventDestroy(static_cast<CUevent>(e));
      if (r != CUDA_SUCCESS && r != kDeinitialized)
        log().warn("cuda: cuEventDestroy failed: {}", errorText(api_, r));
    });
  }

  void recordEvent(void* event, void* stream) override {
    makeCurrent();
    check(api_.cuEventRecord(static_cast<CUevent>(event), static_cast<CUstream>(stream)),
          "cuEventRecord");
  }

  float elapsedMs(void* start, void* end) override {
    makeCurrent();
    check(api_.cuEventSynchronize(static_cast<CUevent>(end)), "cuEventSynchronize");
    float ms = 0;
    check(api_.cuEventElapsedTime(&ms, static_cast<CUevent>(start), static_cast<CUevent>(end)),
          "cuEventElapsedTime");
    return ms;
  }

 private:
  static constexpr CUresult kDeinitialized = 4;  // CUDA_ERROR_DEINITIALIZED

  static CUdeviceptr ptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

  static std::string launchText(int64_t grid, int block, size_t sharedBytes) {
    return fmt::format("{} blocks of {} threads, {} bytes shared", grid, block, sharedBytes);
  }
  static std::string copyText(size_t bytes) { return fmt::format("{} bytes", bytes); }

  int attribute(int attr) {
    int value = 0;
    check(api_.cuDeviceGetAttribute(&value, attr, device_), "cuDeviceGetAttribute",
          fmt::format("attribute {}", attr));
    return value;
  }

  // Above 48 KiB a kernel must be allowed its dynamic shared memory explicitly, or the launch (and
  // the occupancy query) fails or reports nothing fits.
  void optInShared(void* fn, size_t sharedBytes) {
    if (sharedBytes <= kDefaultSharedLimit) return;
    check(api_.cuFuncSetAttribute(static_cast<CUfunction>(fn),
                                  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  static_cast<int>(sharedBytes)),
          "cuFuncSetAttribute", fmt::format("{} bytes of dynamic shared memory", sharedBytes));
  }

  void check(CUresult r, std::string_view call, std::string_view what = {}) const {
    if (r == CUDA_SUCCESS) return;
    throwError(codeFor(r),
               what.empty()
                   ? fmt::format("cuda: {} failed: {}", call, errorText(api_, r))
                   : fmt::format("cuda: {} ({}) failed: {}", call, what, errorText(api_, r)));
  }

  const Api& api_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  std::string name_, arch_;
  int smCount_ = 0, warpSize_ = 32;
  bool cooperative_ = false;
  size_t maxShared_ = kDefaultSharedLimit;
  int driver_ = 0;  // cuDriverGetVersion
};

}  // namespace

Device* cudaDevice(std::string* why) {
#if !defined(STITCH_HAVE_CUDA)
  if (why)
    *why = "this build of Stitch has no CUDA support (configured with STITCH_ENABLE_CUDA=OFF)";
  return nullptr;
#else
  static CudaDevice* device = nullptr;
  static std::string reason;
  static std::once_flag once;
  std::call_once(once, [] {
    const Api* api = cu::api(&reason);
    if (api == nullptr) return;
    auto d = std::make_unique<CudaDevice>(*api);
    try {
      d->open();
      device = d.release();  // process-wide, never destroyed (device.h)
    } catch (const Error& e) {
      reason = e.message();
    }
  });
  if (device == nullptr && why) *why = reason;
  return device;
#endif
}

}  // namespace stitch::rt::gpu
