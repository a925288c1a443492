// The HIP device: HIP's module API through libamdhip64 (hip_api.h), device 0.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "runtime/gpu/device.h"
#include "runtime/gpu/hip_api.h"
#include "runtime/support/error.h"
#include "runtime/support/logging.h"

namespace stitch::rt::gpu {

namespace {

using namespace hip;

ErrorCode codeFor(hipError_t e) {
  switch (e) {
    case hipErrorOutOfMemory: return ErrorCode::OutOfMemory;
    case hipErrorInvalidImage:
    case hipErrorInvalidKernelFile:
    case hipErrorNoBinaryForGpu: return ErrorCode::Compile;
    case hipErrorNotFound: return ErrorCode::InvalidArgument;
    default: return ErrorCode::Internal;
  }
}

class HipDevice final : public Device {
 public:
  explicit HipDevice(const Api& api) : api_(api) {}

  void open() {
    hipError_t e = api_.hipInit(0);
    STITCH_CHECK(e == hipSuccess, ErrorCode::BackendUnavailable,
                 "hipInit failed: {} (is there an AMD GPU, and may this user open /dev/kfd?)",
                 errorText(api_, e));
    int count = 0;
    e = api_.hipGetDeviceCount(&count);
    STITCH_CHECK(e == hipSuccess && count > 0, ErrorCode::BackendUnavailable, "no HIP device{}",
                 e == hipSuccess ? "" : ": " + errorText(api_, e));
    makeCurrent();
    smCount_ = attribute(hipDeviceAttributeMultiprocessorCount);
    warpSize_ = attribute(hipDeviceAttributeWarpSize);
    maxShared_ = static_cast<size_t>(attribute(hipDeviceAttributeMaxSharedMemoryPerBlock));
    // HIP 5.2 cannot launch a module's kernel cooperatively (see hip_api.h).
    cooperative_ = attribute(hipDeviceAttributeCooperativeLaunch) != 0 &&
                   api_.hipModuleLaunchCooperativeKernel != nullptr;
    readNames();
    int version = 0;
    api_.hipRuntimeGetVersion(&version);
    runtimeVersion_ = version;
    log().debug("hip: {} ({}, {} CUs), HIP runtime {}, from {}", name_, arch_, smCount_, version,
                api_.libraryPath);
  }

  std::string_view backend() const override { return "hip"; }
  const std::string& arch() const override { return arch_; }
  const std::string& name() const override { return name_; }
  int smCount() const override { return smCount_; }
  int warpSize() const override { return warpSize_; }
  bool cooperativeLaunch() const override { return cooperative_; }
  size_t maxSharedPerBlock() const override { return maxShared_; }

  // The per-CU limits stay the built-in gfx90a figures: their hipDeviceAttribute_t numbers are
  // not among those checked against HIP's headers (hip_api.h), and a wrong number would read
  // another attribute. The bandwidth is measured like CUDA's (device_profile.h).
  DeviceProfile queryProfile() override {
    DeviceProfile p;
    p.name = name_;
    p.driver = std::to_string(runtimeVersion_);
    p.sharedMemoryPerBlock = static_cast<int64_t>(maxShared_);
    return p;
  }

  // HIP's current device is per thread, and setting it is a thread-local store.
  void makeCurrent() override { check(api_.hipSetDevice(0), "hipSetDevice"); }

  std::shared_ptr<const void> loadModule(std::span<const uint8_t> binary) override {
    detail::checkModule(*this, binary);
    makeCurrent();
    hipModule_t module = nullptr;
    check(api_.hipModuleLoadData(&module, binary.data()), "hipModuleLoadData",
          fmt::format("{} bytes for {}", binary.size(), arch_));
    return std::shared_ptr<const void>(module, [this](const void* m) {
      hipError_t e = api_.hipModuleUnload(static_cast<hipModule_t>(const_cast<void*>(m)));
      if (e != hipSuccess) log().warn("hip: hipModuleUnload failed: {}", errorText(api_, e));
    });
  }

  void* function(const std::shared_ptr<const void>& module, const std::string& name) override {
    STITCH_CHECK(module != nullptr, ErrorCode::InvalidArgument, "hip: function of a null module");
    makeCurrent();
    hipFunction_t fn = nullptr;
    check(api_.hipModuleGetFunction(&fn, static_cast<hipModule_t>(const_cast<void*>(module.get())),
                                    name.c_str()),
          "hipModuleGetFunction", fmt::format("kernel '{}'", name));
    return fn;
  }

  void launch(void* fn, int64_t grid, int block, size_t sharedBytes, void* stream,
              void** args) override {
    unsigned blocks = detail::checkLaunch(*this, fn, grid, block, sharedBytes);
    makeCurrent();
    check(api_.hipModuleLaunchKernel(static_cast<hipFunction_t>(fn), blocks, 1, 1, block, 1, 1,
                                     static_cast<unsigned>(sharedBytes),
                                     static_cast<hipStream_t>(stream), args, nullptr),
          "hipModuleLaunchKernel", launchText(grid, block, sharedBytes));
  }

  void launchCooperative(void* fn, int64_t grid, int block, size_t sharedBytes, void* stream,
                         void** args) override {
    STITCH_CHECK(cooperative_, ErrorCode::Unsupported,
                 "hip: cooperative launch of a module kernel is unavailable on {} with {} "
                 "(needs a device that supports it and hipModuleLaunchCooperativeKernel, which "
                 "HIP 5.2 lacks)",
                 name_, api_.libraryPath);
    unsigned blocks = detail::checkLaunch(*this, fn, grid, block, sharedBytes);
    makeCurrent();
    check(api_.hipModuleLaunchCooperativeKernel(static_cast<hipFunction_t>(fn), blocks, 1, 1, block,
                                                1, 1, static_cast<unsigned>(sharedBytes),
                                                static_cast<hipStream_t>(stream), args),
          "hipModuleLaunchCooperativeKernel", launchText(grid, block, sharedBytes));
  }

  int maxActiveBlocksPerSm(void* fn, int block, size_t sharedBytes) override {
    makeCurrent();
    int blocks = 0;
    check(api_.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(
              &blocks, static_cast<hipFunction_t>(fn), block, sharedBytes),
          "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
          fmt::format("{} threads, {} bytes shared", block, sharedBytes));
    return blocks;
  }

  int functionAttribute(void* fn, FunctionAttr a) override {
    int attr = 0;
    switch (a) {
      case FunctionAttr::MaxThreadsPerBlock: attr = HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK; break;
      case FunctionAttr::Registers: attr = HIP_FUNC_ATTRIBUTE_NUM_REGS; break;
      case FunctionAttr::LocalBytes: attr = HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES; break;
      case FunctionAttr::StaticSharedBytes: attr = HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES; break;
    }
    makeCurrent();
    int value = 0;
    check(api_.hipFuncGetAttribute(&value, attr, static_cast<hipFunction_t>(fn)),
          "hipFuncGetAttribute");
    return value;
  }

  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    makeCurrent();
    void* p = nullptr;
    check(api_.hipMalloc(&p, bytes), "hipMalloc", fmt::format("{} bytes on {}", bytes, name_));
    return p;
  }

  void release(void* p) override {
    if (p == nullptr) return;
    hipError_t e = api_.hipSetDevice(0);
    if (e == hipSuccess) e = api_.hipFree(p);
    if (e != hipSuccess) log().warn("hip: hipFree({}) failed: {}", p, errorText(api_, e));
  }

  void copyToDevice(void* dst, const void* src, size_t bytes, void* stream) override {
    copy(dst, src, bytes, stream, hipMemcpyHostToDevice);
  }
  void copyToHost(void* dst, const void* src, size_t bytes, void* stream) override {
    copy(dst, src, bytes, stream, hipMemcpyDeviceToHost);
  }
  void copyDeviceToDevice(void* dst, const void* src, size_t bytes, void* stream) override {
    if (bytes == 0) return;
    makeCurrent();
    check(api_.hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice,
                              static_cast<hipStream_t>(stream)),
          "hipMemcpyAsync", fmt::format("{} bytes device to device", bytes));
  }

  void synchronize(void* stream) override {
    makeCurrent();
    if (stream == nullptr) check(api_.hipDeviceSynchronize(), "hipDeviceSynchronize");
    else check(api_.hipStreamSynchronize(static_cast<hipStream_t>(stream)), "hipStreamSynchronize");
  }

  std::shared_ptr<void> createEvent() override {
    makeCurrent();
    hipEvent_t event = nullptr;
    check(api_.hipEventCreate(&event), "hipEventCreate");
    return std::shared_ptr<void>(event, [this](void* e) {
      hipError_t r = api_.hipEventDestroy(static_cast<hipEvent_t>(e));
      if (r != hipSuccess) log().warn("hip: hipEventDestroy failed: {}", errorText(api_, r));
    });
  }

  void recordEvent(void* event, void* stream) override {
    makeCurrent();
    check(api_.hipEventRecord(static_cast<hipEvent_t>(event), static_cast<hipStream_t>(stream)),
          "hipEventRecord");
  }

  float elapsedMs(void* start, void* end) override {
    makeCurrent();
    check(api_.hipEventSynchronize(static_cast<hipEvent_t>(end)), "hipEventSynchronize");
    float ms = 0;
    check(
        api_.hipEventElapsedTime(&ms, static_cast<hipEvent_t>(start), static_cast<hipEvent_t>(end)),
        "hipEventElapsedTime");
    return ms;
  }

 private:
  static std::string launchText(int64_t grid, int block, size_t sharedBytes) {
    return fmt::format("{} blocks of {} threads, {} bytes shared", grid, block, sharedBytes);
  }

  void copy(void* dst, const void* src, size_t bytes, void* stream, int kind) {
    if (bytes == 0) return;
    makeCurrent();
    if (stream == nullptr)
      check(api_.hipMemcpy(dst, src, bytes, kind), "hipMemcpy", fmt::format("{} bytes", bytes));
    else
      check(api_.hipMemcpyAsync(dst, src, bytes, kind, static_cast<hipStream_t>(stream)),
            "hipMemcpyAsync", fmt::format("{} bytes", bytes));
  }

  int attribute(int attr) {
    int value = 0;
    check(api_.hipDeviceGetAttribute(&value, attr, 0), "hipDeviceGetAttribute",
          fmt::format("attribute {}", attr));
    return value;
  }

  // The marketing name and the gfx target come from hipDeviceProp_t, whose layout changed in
  // ROCm 6 (hipGetDeviceProperties became hipGetDevicePropertiesR0600 with a new struct). The
  // properties are written into a buffer far larger than either layout; with HIP 5 the fields'
  // offsets are known (hip_api.h), otherwise the gfx name is found as the first NUL-preceded
  // "gfx" string after the 256-byte name that opens both layouts.
  void readNames() {
    std::vector<char> props(16 * 1024, '\0');
    check(api_.hipGetDeviceProperties(props.data(), 0), "hipGetDeviceProperties");
    name_.assign(props.data(), strnlen(props.data(), 256));
    int version = 0;
    api_.hipRuntimeGetVersion(&version);  // major * 10^7 + minor * 10^5 + patch
    size_t at = std::string::npos;
    if (version / 10000000 == 5) {
      at = kDeviceProp5GcnArchNameOffset;
    } else {
      for (size_t i = 256; i + 3 < props.size(); ++i)
        if (props[i - 1] == '\0' && std::memcmp(&props[i], "gfx", 3) == 0) {
          at = i;
          break;
        }
    }
    STITCH_CHECK(at != std::string::npos, ErrorCode::BackendUnavailable,
                 "hip: cannot find the gfx target of {} (HIP runtime version {})", name_, version);
    std::string target(&props[at], strnlen(&props[at], 256));
    // "gfx90a:sramecc+:xnack-": the features after ':' are not part of --offload-arch's name.
    arch_ = target.substr(0, target.find(':'));
    STITCH_CHECK(arch_.compare(0, 3, "gfx") == 0, ErrorCode::BackendUnavailable,
                 "hip: unexpected gfx target '{}' for {} (HIP runtime version {})", target, name_,
                 version);
  }

  void check(hipError_t e, std::string_view call, std::string_view what = {}) const {
    if (e == hipSuccess) return;
    throwError(codeFor(e),
               what.empty()
                   ? fmt::format("hip: {} failed: {}", call, errorText(api_, e))
                   : fmt::format("hip: {} ({}) failed: {}", call, what, errorText(api_, e)));
  }

  const Api& api_;
  std::string name_, arch_;
  int smCount_ = 0, warpSize_ = 64;
  bool cooperative_ = false;
  size_t maxShared_ = 64 * 1024;
  int runtimeVersion_ = 0;  // hipRuntimeGetVersion
};

}  // namespace

Device* hipDevice(std::string* why) {
#if !defined(STITCH_HAVE_HIP)
  if (why) *why = "this build of Stitch has no HIP support (configured with STITCH_ENABLE_HIP=OFF)";
  return nullptr;
#else
  static HipDevice* device = nullptr;
  static std::string reason;
  static std::once_flag once;
  std::call_once(once, [] {
    const Api* api = hip::api(&reason);
    if (api == nullptr) return;
    auto d = std::make_unique<HipDevice>(*api);
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
