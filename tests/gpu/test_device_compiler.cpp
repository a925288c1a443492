// The device compilers need no GPU: NVRTC comes with the CUDA toolkit and hipRTC with Debian's
// libamdhip64-5 (scripts/setup.sh installs it), so CI compiles for sm_80, sm_90 and gfx90a here.
// A test skips only when its compiler's library cannot be opened at all, and says why.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "gpu/gpu_test_kernels.h"
#include "runtime/gpu/device_compiler.h"
#include "runtime/gpu/dynamic_library.h"
#include "runtime/gpu/resource_usage.h"
#include "runtime/support/error.h"

namespace stitch::rt::gpu {
namespace {

using testing::helperHeaders;
using testing::kScaleKernel;
using testing::spillKernel;

constexpr uint16_t kEmCuda = 190;    // e_machine of a cubin
constexpr uint16_t kEmAmdgpu = 224;  // e_machine of an HSA code object

uint16_t elfMachine(const std::vector<uint8_t>& bytes) {
  uint16_t machine = 0;
  if (bytes.size() >= 20) std::memcpy(&machine, bytes.data() + 18, 2);
  return machine;
}

bool isElf(const std::vector<uint8_t>& bytes) {
  return bytes.size() > 64 && std::memcmp(bytes.data(),
                                          "\x7f"
                                          "ELF",
                                          4) == 0;
}

#define REQUIRE_NVRTC(c)                    \
  std::string why_;                         \
  DeviceCompiler* c = nvrtcCompiler(&why_); \
  if (c == nullptr) GTEST_SKIP() << "NVRTC is unavailable: " << why_

#define REQUIRE_HIPRTC(c)                    \
  std::string why_;                          \
  DeviceCompiler* c = hiprtcCompiler(&why_); \
  if (c == nullptr) GTEST_SKIP() << "hipRTC is unavailable: " << why_

// A CUDA kernel with the CUDA spellings (warp shuffles with a mask), for NVRTC only.
constexpr const char* kCudaWarpKernel = R"(#include "stitch/helper.cuh"
extern "C" __global__ void warp_sum(float* out, const float* in, int n) {
  __shared__ float tile[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? stitch_twice(in[i]) : 0.f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  tile[threadIdx.x] = v;
  __syncthreads();
  if (i < n) out[i] = tile[threadIdx.x ^ 1] + expf(in[i]);
}
)";

// The same for hipRTC, plus f16 through __half and bf16 kept as unsigned short, with no #include
// but the named header: what DeviceCompiler's note promises a HIP source may use.
constexpr const char* kHipWarpKernel = R"(#include "stitch/helper.cuh"
extern "C" __global__ void __launch_bounds__(256) warp_sum(float* out, __half* h,
                                                           const unsigned short* bf16, int n) {
  __shared__ float tile[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? stitch_twice(__uint_as_float((unsigned)bf16[i] << 16)) : 0.f;
  v += i < n ? __half2float(h[i]) : 0.f;
  for (int o = 32; o > 0; o >>= 1) v += __shfl_xor(v, o);
  tile[threadIdx.x] = v;
  __syncthreads();
  if (i < n) {
    out[i] = tile[threadIdx.x ^ 1] + expf(v) + erff(v) + __builtin_huge_valf() * 0.f;
    h[i] = __float2half(v);
  }
}
)";

TEST(Nvrtc, CompilesWithANamedHeaderForSm80AndSm90) {
  REQUIRE_NVRTC(nvrtc);
  EXPECT_EQ(nvrtc->name(), "nvrtc");
  for (const char* arch : {"sm_80", "sm_90"}) {
    SCOPED_TRACE(arch);
    DeviceBinary b = nvrtc->compile(kCudaWarpKernel, "warp_sum.cu", helperHeaders(), arch);
    EXPECT_EQ(b.arch, arch);
    ASSERT_TRUE(isElf(b.bytes)) << "not an ELF cubin";
    EXPECT_EQ(elfMachine(b.bytes), kEmCuda);
    EXPECT_GT(b.registers, 0) << b.log;
    EXPECT_EQ(b.spillBytes, 0) << b.log;
    EXPECT_GT(b.seconds, 0.0);
    EXPECT_NE(b.log.find("Used"), std::string::npos) << "ptxas -v output missing: " << b.log;
  }
}

TEST(Nvrtc, ReportsSpills) {
  REQUIRE_NVRTC(nvrtc);
  DeviceBinary b = nvrtc->compile(spillKernel(false), "spill.cu", {}, "sm_80");
  EXPECT_GT(b.spillBytes, 0) << b.log;
  EXPECT_GT(b.registers, 0);
  EXPECT_LE(b.registers, 32) << "__launch_bounds__(1024, 2) allows 32 registers";
}

constexpr const char* kNeedsAFlag =
    "#ifndef STITCH_FLAG\n#error STITCH_FLAG is not defined\n#endif\n"
    "extern \"C\" __global__ void k(float* p) { p[0] = STITCH_FLAG; }\n";

TEST(Nvrtc, ExtraOptionsReachTheCompiler) {
  REQUIRE_NVRTC(nvrtc);
  EXPECT_THROW(nvrtc->compile(kNeedsAFlag, "flag.cu", {}, "sm_90"), Error);
  EXPECT_GT(nvrtc->compile(kNeedsAFlag, "flag.cu", {}, "sm_90", {"-DSTITCH_FLAG=2"}).bytes.size(),
            0u);
}

TEST(Nvrtc, SyntaxErrorCarriesLogAndNumberedSource) {
  REQUIRE_NVRTC(nvrtc);
  const std::string source =
      "extern \"C\" __global__ void broken(float* p) {\n"
      "  float x = 1.0f;\n"
      "  p[0] = x +* ;\n"
      "}\n";
  try {
    nvrtc->compile(source, "broken.cu", helperHeaders(), "sm_90");
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Compile);
    const std::string& m = e.message();
    EXPECT_NE(m.find("broken.cu(3)"), std::string::npos) << m;  // the log, with its line
    EXPECT_NE(m.find("error"), std::string::npos) << m;
    EXPECT_NE(m.find("    3 |   p[0] = x +* ;"), std::string::npos) << m;   // the source
    EXPECT_NE(m.find("--gpu-architecture=sm_90"), std::string::npos) << m;  // the options
    EXPECT_EQ(m.find("--- header"), std::string::npos) << "the log names no header";
  }
}

TEST(Nvrtc, ErrorInAHeaderShowsTheHeader) {
  REQUIRE_NVRTC(nvrtc);
  std::vector<DeviceHeader> headers = {{"stitch/bad.cuh", "#pragma once\nint oops = ;\n"}};
  try {
    nvrtc->compile("#include \"stitch/bad.cuh\"\n", "uses_bad.cu", headers, "sm_90");
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Compile);
    EXPECT_NE(e.message().find("--- header 'stitch/bad.cuh' ---"), std::string::npos)
        << e.message();
    EXPECT_NE(e.message().find("    2 | int oops = ;"), std::string::npos) << e.message();
  }
}

TEST(Nvrtc, RejectsAnArchItDoesNotTarget) {
  REQUIRE_NVRTC(nvrtc);
  for (const char* arch : {"gfx90a", "compute_90", "sm_", "90"}) {
    try {
      nvrtc->compile(kScaleKernel, "scale.cu", helperHeaders(), arch);
      FAIL() << arch;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << arch << ": " << e.message();
    }
  }
}

TEST(Nvrtc, UnknownArchIsACompileErrorWithTheLog) {
  REQUIRE_NVRTC(nvrtc);
  try {
    nvrtc->compile(kScaleKernel, "scale.cu", helperHeaders(), "sm_12");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Compile);
    EXPECT_NE(e.message().find("sm_12"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("NVRTC_ERROR_INVALID_OPTION"), std::string::npos) << e.message();
  }
}

TEST(Nvrtc, CompilesFromManyThreadsAtOnce) {
  REQUIRE_NVRTC(nvrtc);
  std::vector<std::thread> threads;
  std::vector<size_t> sizes(4, 0);
  for (size_t t = 0; t < sizes.size(); ++t)
    threads.emplace_back([&, t] {
      sizes[t] = nvrtc->compile(kScaleKernel, "scale.cu", helperHeaders(), "sm_90").bytes.size();
    });
  for (std::thread& t : threads) t.join();
  for (size_t s : sizes) EXPECT_EQ(s, sizes[0]);
  EXPECT_GT(sizes[0], 0u);
}

// Prints the figures the README quotes: the first compile in a process, then typical ones.
TEST(Nvrtc, CompileTime) {
  REQUIRE_NVRTC(nvrtc);
  double first = nvrtc->compile(kScaleKernel, "scale.cu", helperHeaders(), "sm_90").seconds;
  std::vector<double> later;
  for (int i = 0; i < 5; ++i)
    later.push_back(nvrtc->compile(kScaleKernel, "scale.cu", helperHeaders(), "sm_90").seconds);
  std::sort(later.begin(), later.end());
  std::printf("nvrtc, small kernel for sm_90: first %.1f ms, then median %.1f ms (of 5)\n",
              first * 1e3, later[2] * 1e3);
}

TEST(Hiprtc, CompilesWithANamedHeaderForGfx90a) {
  REQUIRE_HIPRTC(hiprtc);
  EXPECT_EQ(hiprtc->name(), "hiprtc");
  DeviceBinary b = hiprtc->compile(kHipWarpKernel, "warp_sum.hip", helperHeaders(), "gfx90a");
  EXPECT_EQ(b.arch, "gfx90a");
  ASSERT_TRUE(isElf(b.bytes)) << "not an ELF code object";
  EXPECT_EQ(elfMachine(b.bytes), kEmAmdgpu);
  EXPECT_GT(b.registers, 0);
  EXPECT_EQ(b.spillBytes, 0);
  EXPECT_GT(b.seconds, 0.0);
}

TEST(Hiprtc, CompilesThePortableKernels) {
  REQUIRE_HIPRTC(hiprtc);
  EXPECT_GT(hiprtc->compile(kScaleKernel, "scale.hip", helperHeaders(), "gfx90a").bytes.size(), 0u);
  EXPECT_GT(hiprtc->compile(testing::kGridBarrierKernel, "barrier.hip", {}, "gfx90a").bytes.size(),
            0u);
}

TEST(Hiprtc, ReportsSpills) {
  REQUIRE_HIPRTC(hiprtc);
  DeviceBinary b = hiprtc->compile(spillKernel(true), "spill.hip", {}, "gfx90a");
  EXPECT_GT(b.spillBytes, 0);
  EXPECT_GT(b.registers, 0);
}

TEST(Hiprtc, SyntaxErrorCarriesLogAndNumberedSource) {
  REQUIRE_HIPRTC(hiprtc);
  const std::string source =
      "extern \"C\" __global__ void broken(float* p) {\n"
      "  float x = 1.0f;\n"
      "  p[0] = x +* ;\n"
      "}\n";
  try {
    hiprtc->compile(source, "broken.hip", {}, "gfx90a");
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Compile);
    const std::string& m = e.message();
    // comgr's temporary file name is replaced by the program's.
    EXPECT_NE(m.find("broken.hip:3:"), std::string::npos) << m;
    EXPECT_EQ(m.find("CompileSource"), std::string::npos) << m;
    EXPECT_NE(m.find("error"), std::string::npos) << m;
    EXPECT_NE(m.find("    3 |   p[0] = x +* ;"), std::string::npos) << m;
  }
}

TEST(Hiprtc, SystemHeadersAreNotAvailable) {
  REQUIRE_HIPRTC(hiprtc);
  try {
    hiprtc->compile("#include <hip/hip_runtime.h>\n", "includes.hip", {}, "gfx90a");
    GTEST_SKIP() << "<hip/hip_runtime.h> resolved here (HIP's development headers are installed)";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Compile);
    EXPECT_NE(e.message().find("hip/hip_runtime.h"), std::string::npos) << e.message();
  }
}

TEST(Hiprtc, ExtraOptionsReachTheCompiler) {
  REQUIRE_HIPRTC(hiprtc);
  EXPECT_THROW(hiprtc->compile(kNeedsAFlag, "flag.hip", {}, "gfx90a"), Error);
  EXPECT_GT(
      hiprtc->compile(kNeedsAFlag, "flag.hip", {}, "gfx90a", {"-DSTITCH_FLAG=2"}).bytes.size(), 0u);
}

TEST(Hiprtc, RejectsAnArchItDoesNotTarget) {
  REQUIRE_HIPRTC(hiprtc);
  try {
    hiprtc->compile(kScaleKernel, "scale.hip", helperHeaders(), "sm_90");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.message();
  }
}

TEST(Hiprtc, CompileTime) {
  REQUIRE_HIPRTC(hiprtc);
  double first = hiprtc->compile(kScaleKernel, "scale.hip", helperHeaders(), "gfx90a").seconds;
  std::vector<double> later;
  for (int i = 0; i < 3; ++i)
    later.push_back(hiprtc->compile(kScaleKernel, "scale.hip", helperHeaders(), "gfx90a").seconds);
  std::sort(later.begin(), later.end());
  std::printf("hiprtc, small kernel for gfx90a: first %.1f ms, then median %.1f ms (of 3)\n",
              first * 1e3, later[1] * 1e3);
}

TEST(ResourceUsage, ParsesPtxasVerboseOutput) {
  const char* log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Function properties for helper\n"
      "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
      "ptxas info    : Function properties for k\n"
      "ptxas         .     424 bytes stack frame, 568 bytes spill stores, 560 bytes spill loads\n"
      "ptxas info    : Used 32 registers, used 0 barriers, 424 bytes cumulative stack size\n"
      "ptxas info    : Used 12 registers, used 1 barriers, 1024 bytes smem\n";
  ResourceUsage u = parsePtxasLog(log);
  EXPECT_EQ(u.registers, 32);
  EXPECT_EQ(u.spillBytes, 8 + 4 + 568 + 560);
  EXPECT_EQ(u.stackBytes, 424);
  ResourceUsage none = parsePtxasLog("");
  EXPECT_EQ(none.registers, -1);
  EXPECT_EQ(none.spillBytes, 0);
}

TEST(ResourceUsage, AmdgpuReaderRefusesWhatIsNotACodeObject) {
  std::vector<uint8_t> junk(200, 0xab);
  EXPECT_FALSE(readAmdgpuResourceUsage(junk).has_value());
  EXPECT_FALSE(readAmdgpuResourceUsage({}).has_value());
  // An ELF header whose section table points far outside the file.
  std::vector<uint8_t> elf(64, 0);
  std::memcpy(elf.data(),
              "\x7f"
              "ELF",
              4);
  elf[4] = 2;
  elf[5] = 1;
  uint64_t shoff = 1ull << 40;
  uint16_t shnum = 3, shentsize = 64;
  std::memcpy(&elf[0x28], &shoff, 8);
  std::memcpy(&elf[0x3a], &shentsize, 2);
  std::memcpy(&elf[0x3c], &shnum, 2);
  EXPECT_FALSE(readAmdgpuResourceUsage(elf).has_value());
}

TEST(ResourceUsage, AmdgpuReaderSurvivesTruncatedCodeObjects) {
  REQUIRE_HIPRTC(hiprtc);
  DeviceBinary b = hiprtc->compile(kScaleKernel, "scale.hip", helperHeaders(), "gfx90a");
  ASSERT_TRUE(readAmdgpuResourceUsage(b.bytes).has_value());
  for (size_t cut = 0; cut < b.bytes.size(); cut += 97)
    readAmdgpuResourceUsage(std::span<const uint8_t>(b.bytes.data(), cut));  // must not crash
}

TEST(DeviceCompiler, NumbersLines) {
  EXPECT_EQ(numberLines("a\nb"), "    1 | a\n    2 | b\n");
  EXPECT_EQ(numberLines(""), "");
}

TEST(DynamicLibrary, ReportsEveryPathTried) {
  const char* candidates[] = {"libstitch-does-not-exist.so.7", "/nowhere/libalso-missing.so"};
  std::string why;
  EXPECT_EQ(DynamicLibrary::open("STITCH_TEST_UNSET_LIBRARY_VAR", candidates, &why), nullptr);
  EXPECT_NE(why.find("libstitch-does-not-exist.so.7"), std::string::npos) << why;
  EXPECT_NE(why.find("/nowhere/libalso-missing.so"), std::string::npos) << why;
  EXPECT_NE(why.find("STITCH_TEST_UNSET_LIBRARY_VAR"), std::string::npos) << why;
}

TEST(DynamicLibrary, TheEnvironmentOverrides) {
  ::setenv("STITCH_TEST_LIBRARY_OVERRIDE", "/nowhere/libforced.so", 1);
  const char* candidates[] = {"libc.so.6"};  // would open, but the override wins
  std::string why;
  EXPECT_EQ(DynamicLibrary::open("STITCH_TEST_LIBRARY_OVERRIDE", candidates, &why), nullptr);
  EXPECT_NE(why.find("STITCH_TEST_LIBRARY_OVERRIDE=/nowhere/libforced.so"), std::string::npos)
      << why;
  ::unsetenv("STITCH_TEST_LIBRARY_OVERRIDE");
  auto libc = DynamicLibrary::open("STITCH_TEST_LIBRARY_OVERRIDE", candidates, &why);
  ASSERT_NE(libc, nullptr) << why;
  EXPECT_NE(libc->symbol("malloc"), nullptr);
  EXPECT_EQ(libc->symbol("stitch_no_such_symbol"), nullptr);
}

}  // namespace
}  // namespace stitch::rt::gpu
