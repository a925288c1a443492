// Kernel sources the GPU runtime tests compile: shared by the compiler tests (which run
// everywhere) and the device tests (which run where a GPU is).
#pragma once

#include <string>
#include <vector>

#include "runtime/gpu/device_compiler.h"

namespace stitch::rt::gpu::testing {

// A header the kernels include by name, as the code generator's helpers will be.
inline std::vector<DeviceHeader> helperHeaders() {
  return {{"stitch/helper.cuh",
           "#pragma once\n"
           "__device__ inline float stitch_twice(float x) { return 2.0f * x; }\n"}};
}

// Portable CUDA/HIP: out[i] = 2 * in[i] + 1 through a shared-memory tile, a named header, a 1-D
// grid of any size, and a parameter of each kind (pointers, a 64-bit count).
inline constexpr const char* kScaleKernel = R"(#include "stitch/helper.cuh"
extern "C" __global__ void scale(float* out, const float* in, long long n) {
  __shared__ float tile[256];
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? stitch_twice(in[i]) : 0.0f;
  __syncthreads();
  if (i < n) out[i] = tile[threadIdx.x] + 1.0f;
}
)";

// Portable: every block adds its index, then waits at a hand-made grid barrier (an atomic
// counter), then block 0 checks that all blocks arrived. It deadlocks unless every block is
// resident at once, which is what a cooperative launch guarantees.
inline constexpr const char* kGridBarrierKernel = R"(
extern "C" __global__ void barrier(unsigned* counter, unsigned long long* sum, int* ok) {
  if (threadIdx.x == 0) {
    atomicAdd(sum, (unsigned long long)blockIdx.x);
    __threadfence();
    atomicAdd(counter, 1u);
    while (atomicAdd(counter, 0u) < gridDim.x) {}
    if (blockIdx.x == 0) {
      unsigned long long n = gridDim.x;
      *ok = atomicAdd(sum, 0ull) == n * (n - 1) / 2 ? 1 : 0;
    }
  }
}
)";

// Portable: uses `extern __shared__` memory of whatever size the launch gives.
inline constexpr const char* kDynamicSharedKernel = R"(
extern "C" __global__ void reverse(float* data, int n) {
  extern __shared__ float buffer[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buffer[i] = data[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) data[i] = buffer[n - 1 - i];
}
)";

// Forces register spills: 64 values live at once under a 32-register budget (CUDA, through
// __launch_bounds__(1024, 2)) or a 24-VGPR budget (AMDGPU, through amdgpu_num_vgpr, which gets
// there in a fraction of the time a bound on the block size takes hipRTC).
inline std::string spillKernel(bool hip) {
  return std::string("#define N 64\nextern \"C\" __global__ void ") +
         (hip ? "__attribute__((amdgpu_num_vgpr(24)))" : "__launch_bounds__(1024, 2)") + R"(
spill(float* out, const float* in) {
  float v[N];
  int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
  for (int j = 0; j < N; ++j) v[j] = in[t + j * 4096];
#pragma unroll
  for (int j = 0; j < N; ++j) v[j] = fmaf(v[j], v[(j + 1) % N], v[(j + 7) % N]);
#pragma unroll
  for (int j = 0; j < N; ++j) out[t + j * 4096] = v[j];
}
)";
}

}  // namespace stitch::rt::gpu::testing
