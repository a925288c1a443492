// The devices, on real GPUs: CTest label `gpu`, executable stitch_gpu_tests. Every test skips with
// the reason (no library, no device, ...) where its GPU is absent, so the suite passes anywhere
// and proves something only where a GPU is. Each test runs for CUDA and for HIP.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "gpu/gpu_test_kernels.h"
#include "runtime/gpu/device.h"
#include "runtime/gpu/device_compiler.h"
#include "runtime/support/error.h"

namespace stitch::rt::gpu {
namespace {

using testing::helperHeaders;

// Device memory released at scope exit.
struct Buffer {
  Device* device;
  void* ptr;
  Buffer(Device* d, size_t bytes) : device(d), ptr(d->allocate(bytes)) {}
  ~Buffer() { device->release(ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

class GpuDevice : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    bool cuda = GetParam() == "cuda";
    device_ = cuda ? cudaDevice(&why) : hipDevice(&why);
    if (device_ == nullptr) GTEST_SKIP() << "no " << (cuda ? "CUDA" : "HIP") << " device: " << why;
    compiler_ = cuda ? nvrtcCompiler(&why) : hiprtcCompiler(&why);
    if (compiler_ == nullptr)
      GTEST_SKIP() << "a " << GetParam() << " device but no compiler for it: " << why;
  }

  DeviceBinary compile(const std::string& source, const std::string& name,
                       const std::vector<DeviceHeader>& headers = {}) {
    return compiler_->compile(source, name, headers, device_->arch());
  }

  Device* device_ = nullptr;
  DeviceCompiler* compiler_ = nullptr;
};

INSTANTIATE_TEST_SUITE_P(Backends, GpuDevice, ::testing::Values("cuda", "hip"),
                         [](const auto& param) { return param.param; });

TEST_P(GpuDevice, ReportsItsProperties) {
  EXPECT_EQ(device_->backend(), GetParam());
  EXPECT_FALSE(device_->name().empty());
  EXPECT_EQ(device_->arch().substr(0, 3), GetParam() == "cuda" ? "sm_" : "gfx");
  EXPECT_GT(device_->smCount(), 0);
  EXPECT_EQ(device_->warpSize(), GetParam() == "cuda" ? 32 : 64);
  EXPECT_GE(device_->maxSharedPerBlock(), 48u * 1024);
  std::printf("%s: %s, %s, %d SMs, warp %d, %zu bytes shared per block, cooperative %d\n",
              GetParam().c_str(), device_->name().c_str(), device_->arch().c_str(),
              device_->smCount(), device_->warpSize(), device_->maxSharedPerBlock(),
              device_->cooperativeLaunch());
}

TEST_P(GpuDevice, MemoryRoundTrip) {
  const size_t n = (1 << 20) + 3;
  std::vector<float> host(n), back(n, -1.0f);
  std::iota(host.begin(), host.end(), 0.5f);
  Buffer a(device_, n * sizeof(float)), b(device_, n * sizeof(float));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.ptr) % 256, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.ptr) % 256, 0u);
  device_->copyToDevice(a.ptr, host.data(), n * sizeof(float), nullptr);
  device_->copyDeviceToDevice(b.ptr, a.ptr, n * sizeof(float), nullptr);
  device_->synchronize(nullptr);
  device_->copyToHost(back.data(), b.ptr, n * sizeof(float), nullptr);
  EXPECT_EQ(host, back);
}

TEST_P(GpuDevice, ZeroBytesAndNullAreHarmless) {
  EXPECT_EQ(device_->allocate(0), nullptr);
  device_->release(nullptr);
  float x = 1.0f;
  device_->copyToDevice(nullptr, &x, 0, nullptr);
  device_->copyToHost(&x, nullptr, 0, nullptr);
  device_->copyDeviceToDevice(nullptr, nullptr, 0, nullptr);
}

TEST_P(GpuDevice, AllocatingTooMuchIsOutOfMemory) {
  try {
    device_->allocate(size_t{1} << 50);  // a petabyte
    FAIL() << "a petabyte was allocated";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfMemory) << e.message();
    EXPECT_NE(e.message().find(GetParam() == "cuda" ? "cuMemAlloc" : "hipMalloc"),
              std::string::npos)
        << e.message();
  }
  Buffer still(device_, 1024);  // the device is still usable
  EXPECT_NE(still.ptr, nullptr);
}

TEST_P(GpuDevice, LaunchesAKernelOnALargeGrid) {
  DeviceBinary binary = compile(testing::kScaleKernel, "scale", helperHeaders());
  auto module = device_->loadModule(binary.bytes);
  void* fn = device_->function(module, "scale");
  // 70,000 blocks: more than a grid's y or z may have, so this needs the x-only 1-D grid.
  long long n = 70000LL * 256 - 5;
  std::vector<float> in(n), out(n);
  for (long long i = 0; i < n; ++i) in[i] = static_cast<float>(i % 1000) * 0.25f;
  Buffer din(device_, n * sizeof(float)), dout(device_, n * sizeof(float));
  device_->copyToDevice(din.ptr, in.data(), n * sizeof(float), nullptr);
  void* args[] = {&dout.ptr, &din.ptr, &n};
  device_->launch(fn, (n + 255) / 256, 256, 0, nullptr, args);
  device_->synchronize(nullptr);
  device_->copyToHost(out.data(), dout.ptr, n * sizeof(float), nullptr);
  long long wrong = 0;
  for (long long i = 0; i < n; ++i) wrong += out[i] != 2.0f * in[i] + 1.0f;
  EXPECT_EQ(wrong, 0);
}

TEST_P(GpuDevice, FunctionAttributes) {
  // Compiled twice: with a driver present NVRTC could answer the second from its cache, without
  // the ptxas figures (device_compiler.cpp turns that cache off).
  compile(testing::kScaleKernel, "scale", helperHeaders());
  DeviceBinary binary = compile(testing::kScaleKernel, "scale", helperHeaders());
  auto module = device_->loadModule(binary.bytes);
  void* fn = device_->function(module, "scale");
  int registers = device_->functionAttribute(fn, FunctionAttr::Registers);
  EXPECT_GT(registers, 0);
  if (GetParam() == "cuda") {
    EXPECT_EQ(registers, binary.registers) << "ptxas said otherwise";
  }
  EXPECT_GE(device_->functionAttribute(fn, FunctionAttr::MaxThreadsPerBlock), 256);
  EXPECT_EQ(device_->functionAttribute(fn, FunctionAttr::StaticSharedBytes), 256 * 4);
  EXPECT_EQ(device_->functionAttribute(fn, FunctionAttr::LocalBytes), 0);

  DeviceBinary spill =
      compiler_->compile(testing::spillKernel(GetParam() == "hip"), "spill", {}, device_->arch());
  auto spillModule = device_->loadModule(spill.bytes);
  void* spillFn = device_->function(spillModule, "spill");
  EXPECT_GT(spill.spillBytes, 0);
  EXPECT_GT(device_->functionAttribute(spillFn, FunctionAttr::LocalBytes), 0);
}

TEST_P(GpuDevice, OccupancyAndLargeDynamicSharedMemory) {
  DeviceBinary binary = compile(testing::kDynamicSharedKernel, "reverse");
  auto module = device_->loadModule(binary.bytes);
  void* fn = device_->function(module, "reverse");
  EXPECT_GE(device_->maxActiveBlocksPerSm(fn, 256, 0), 1);
  EXPECT_GE(device_->maxActiveBlocksPerSm(fn, 256, 0), device_->maxActiveBlocksPerSm(fn, 1024, 0));
  // The most shared memory a block may have: above CUDA's default 48 KiB where the GPU allows it.
  int n = static_cast<int>(device_->maxSharedPerBlock() / sizeof(float));
  EXPECT_GE(device_->maxActiveBlocksPerSm(fn, 256, n * sizeof(float)), 1);
  std::vector<float> host(n), back(n);
  std::iota(host.begin(), host.end(), 0.0f);
  Buffer data(device_, n * sizeof(float));
  device_->copyToDevice(data.ptr, host.data(), n * sizeof(float), nullptr);
  void* args[] = {&data.ptr, &n};
  device_->launch(fn, 1, 256, n * sizeof(float), nullptr, args);
  device_->synchronize(nullptr);
  device_->copyToHost(back.data(), data.ptr, n * sizeof(float), nullptr);
  EXPECT_EQ(back[0], static_cast<float>(n - 1));
  EXPECT_EQ(back[n - 1], 0.0f);
}

TEST_P(GpuDevice, CooperativeLaunchSynchronizesTheWholeGrid) {
  DeviceBinary binary = compile(testing::kGridBarrierKernel, "barrier");
  auto module = device_->loadModule(binary.bytes);
  void* fn = device_->function(module, "barrier");
  Buffer counter(device_, 4), sum(device_, 8), ok(device_, 4);
  void* args[] = {&counter.ptr, &sum.ptr, &ok.ptr};
  if (!device_->cooperativeLaunch()) {
    try {
      device_->launchCooperative(fn, 1, 64, 0, nullptr, args);
      FAIL() << "cooperative launch without support";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Unsupported) << e.message();
    }
    GTEST_SKIP() << device_->name() << " cannot launch cooperatively; checked the error";
  }
  int64_t grid = int64_t{device_->maxActiveBlocksPerSm(fn, 64, 0)} * device_->smCount();
  ASSERT_GT(grid, 1);
  const uint64_t zero = 0;
  device_->copyToDevice(counter.ptr, &zero, 4, nullptr);
  device_->copyToDevice(sum.ptr, &zero, 8, nullptr);
  device_->copyToDevice(ok.ptr, &zero, 4, nullptr);
  device_->launchCooperative(fn, grid, 64, 0, nullptr, args);
  device_->synchronize(nullptr);
  int result = 0;
  device_->copyToHost(&result, ok.ptr, 4, nullptr);
  EXPECT_EQ(result, 1) << "a grid of " << grid << " blocks did not meet at the barrier";

  // One block more than can be resident is refused by the driver, with the call named.
  try {
    device_->launchCooperative(fn, grid + 1, 64, 0, nullptr, args);
    device_->synchronize(nullptr);
    FAIL() << "a cooperative grid larger than the GPU was launched";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(GetParam() == "cuda" ? "cuLaunchCooperativeKernel"
                                                    : "hipModuleLaunchCooperativeKernel"),
              std::string::npos)
        << e.message();
  }
}

TEST_P(GpuDevice, ErrorsNameTheCallAndTheCause) {
  DeviceBinary binary = compile(testing::kScaleKernel, "scale", helperHeaders());
  auto module = device_->loadModule(binary.bytes);
  try {
    device_->function(module, "no_such_kernel");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.message();
    EXPECT_NE(e.message().find("no_such_kernel"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(GetParam() == "cuda" ? "CUDA_ERROR_NOT_FOUND" : "hipErrorNotFound"),
              std::string::npos)
        << e.message();
  }
  std::vector<uint8_t> junk(4096, 0x5a);
  try {
    device_->loadModule(junk);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Compile) << e.message();
  }
  try {
    device_->loadModule({});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Compile) << e.message();
  }
  void* fn = device_->function(module, "scale");
  void* args[] = {nullptr, nullptr, nullptr};
  for (auto [grid, block] : {std::pair<int64_t, int>{0, 256}, {int64_t{1} << 31, 256}, {1, 2048}}) {
    try {
      device_->launch(fn, grid, block, 0, nullptr, args);
      FAIL() << grid << " x " << block;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.message();
    }
  }
  EXPECT_THROW(device_->launch(fn, 1, 256, device_->maxSharedPerBlock() + 1, nullptr, args), Error);
}

TEST_P(GpuDevice, CodeForAnotherArchitectureDoesNotLoad) {
  if (GetParam() != "cuda") GTEST_SKIP() << "gfx90a is the only AMD target compiled here";
  // A cubin runs only on its own major architecture.
  std::string other = device_->arch().substr(0, 4) == "sm_8" ? "sm_90" : "sm_80";
  DeviceBinary binary = compiler_->compile(testing::kScaleKernel, "scale", helperHeaders(), other);
  try {
    device_->loadModule(binary.bytes);
    FAIL() << other << " code loaded on " << device_->arch();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Compile) << e.message();
  }
}

TEST_P(GpuDevice, EventsTimeWork) {
  DeviceBinary binary = compile(testing::kScaleKernel, "scale", helperHeaders());
  auto module = device_->loadModule(binary.bytes);
  void* fn = device_->function(module, "scale");
  long long n = 1 << 24;
  Buffer in(device_, n * 4), out(device_, n * 4);
  void* args[] = {&out.ptr, &in.ptr, &n};
  auto start = device_->createEvent(), end = device_->createEvent();
  device_->recordEvent(start.get(), nullptr);
  for (int i = 0; i < 10; ++i) device_->launch(fn, n / 256, 256, 0, nullptr, args);
  device_->recordEvent(end.get(), nullptr);
  float ms = device_->elapsedMs(start.get(), end.get());
  EXPECT_GT(ms, 0.0f);
  EXPECT_LT(ms, 10000.0f);
  std::printf("%s: 10 launches over %lld floats: %.3f ms (%.0f GB/s)\n", GetParam().c_str(), n, ms,
              10.0 * 8 * n / (ms * 1e-3) / 1e9);
}

TEST_P(GpuDevice, ModulesComeAndGo) {
  DeviceBinary binary = compile(testing::kScaleKernel, "scale", helperHeaders());
  for (int i = 0; i < 50; ++i) {
    auto module = device_->loadModule(binary.bytes);
    EXPECT_NE(device_->function(module, "scale"), nullptr);
  }
}

// CUDA only: Stitch works in the context PyTorch and the CUDA runtime use, from any thread.
struct DriverForTests {
  using CUcontext = void*;
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  int (*ctxGetCurrent)(CUcontext*) = sym<int (*)(CUcontext*)>("cuCtxGetCurrent");
  int (*ctxSetCurrent)(CUcontext) = sym<int (*)(CUcontext)>("cuCtxSetCurrent");
  int (*primaryRetain)(CUcontext*, int) = sym<int (*)(CUcontext*, int)>("cuDevicePrimaryCtxRetain");
  int (*primaryRelease)(int) = sym<int (*)(int)>("cuDevicePrimaryCtxRelease_v2");
  int (*streamCreate)(void**, unsigned) = sym<int (*)(void**, unsigned)>("cuStreamCreate");
  int (*streamDestroy)(void*) = sym<int (*)(void*)>("cuStreamDestroy_v2");
  template <class F>
  F sym(const char* name) {
    return lib ? reinterpret_cast<F>(::dlsym(lib, name)) : nullptr;
  }
};

TEST(CudaDevice, SharesThePrimaryContextOnEveryThread) {
  std::string why;
  Device* device = cudaDevice(&why);
  if (device == nullptr) GTEST_SKIP() << "no CUDA device: " << why;
  DriverForTests cu;
  ASSERT_NE(cu.primaryRelease, nullptr);
  void* primary = nullptr;
  ASSERT_EQ(cu.primaryRetain(&primary, 0), 0);
  device->makeCurrent();
  void* current = nullptr;
  cu.ctxGetCurrent(&current);
  EXPECT_EQ(current, primary);

  // A fresh thread has no context; any method makes the primary one current.
  void* onThread = reinterpret_cast<void*>(1);
  std::thread([&] {
    cu.ctxGetCurrent(&onThread);
    EXPECT_EQ(onThread, nullptr);
    Buffer b(device, 256);
    cu.ctxGetCurrent(&onThread);
  }).join();
  EXPECT_EQ(onThread, primary);

  // Even after someone else cleared it on this thread.
  cu.ctxSetCurrent(nullptr);
  Buffer b(device, 256);
  cu.ctxGetCurrent(&current);
  EXPECT_EQ(current, primary);
  cu.primaryRelease(0);
}

TEST(CudaDevice, WorksOnAStreamOfItsOwn) {
  std::string why;
  Device* device = cudaDevice(&why);
  if (device == nullptr) GTEST_SKIP() << "no CUDA device: " << why;
  DeviceCompiler* nvrtc = nvrtcCompiler(&why);
  ASSERT_NE(nvrtc, nullptr) << why;
  DriverForTests cu;
  device->makeCurrent();
  void* stream = nullptr;
  ASSERT_EQ(cu.streamCreate(&stream, 1 /* CU_STREAM_NON_BLOCKING */), 0);

  auto module = device->loadModule(
      nvrtc->compile(testing::kScaleKernel, "scale", helperHeaders(), device->arch()).bytes);
  void* fn = device->function(module, "scale");
  long long n = 1'000'003;
  std::vector<float> in(n), out(n, 0.0f);
  std::iota(in.begin(), in.end(), 0.0f);
  Buffer din(device, n * 4), dout(device, n * 4), copy(device, n * 4);
  auto start = device->createEvent(), end = device->createEvent();
  device->recordEvent(start.get(), stream);
  device->copyToDevice(din.ptr, in.data(), n * 4, stream);
  void* args[] = {&dout.ptr, &din.ptr, &n};
  device->launch(fn, (n + 255) / 256, 256, 0, stream, args);
  device->copyDeviceToDevice(copy.ptr, dout.ptr, n * 4, stream);
  device->copyToHost(out.data(), copy.ptr, n * 4, stream);
  device->recordEvent(end.get(), stream);
  device->synchronize(stream);
  EXPECT_GE(device->elapsedMs(start.get(), end.get()), 0.0f);
  long long wrong = 0;
  for (long long i = 0; i < n; ++i) wrong += out[i] != 2.0f * in[i] + 1.0f;
  EXPECT_EQ(wrong, 0);
  cu.streamDestroy(stream);
}

}  // namespace
}  // namespace stitch::rt::gpu
