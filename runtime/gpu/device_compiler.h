// Run-time compilation of generated CUDA / HIP C++ to device machine code.
//
// Two compilers share this interface: NVRTC (CUDA source -> cubin for sm_XX) and hipRTC (HIP
// source -> HSA code object for gfxXXX). Both are opened with dlopen on first use and need no GPU,
// so CI compiles every kernel the code generators emit (DESIGN.md, "Devices and what runs where").
// The result is machine code for one architecture, ready for Device::loadModule; caching it is
// the kernel cache's business, not this layer's.
//
// What a source may rely on. Neither compiler is given an include path: a source includes only
// the headers passed in `headers`, by the exact name it gives them.
//  - NVRTC: the CUDA built-ins (threadIdx, __syncthreads, __shfl_xor_sync, atomics, math such as
//    expf/erff) and size_t; no <cstdint> (int64_t and friends are not defined), no cuda_fp16.h
//    (convert halves with PTX `cvt` or bit operations on unsigned short). Compiled with --minimal
//    (NVRTC 12.4+): no textures or surfaces, no CUDA runtime types or device-side runtime calls.
//  - hipRTC (HIP 5.2): hipRTC pre-includes its own runtime header, so with no #include at all
//    these work: threadIdx/blockIdx/blockDim/gridDim, warpSize, __syncthreads, __syncthreads_count,
//    __threadfence(_block/_system), __shfl/__shfl_xor/__shfl_up/__shfl_down (optional width),
//    __ballot/__any/__all, atomics (atomicAdd/CAS/Max/Exch), extern __shared__ arrays, the float
//    math library (expf, erff, tanhf, rsqrtf, log1pf, ...), __expf, __fdividef, __int_as_float,
//    __uint_as_float, __half with __float2half/__half2float/__half_as_ushort/__hadd, float2/float4,
//    int32_t/uint32_t/int64_t/uint64_t/size_t. Not available: the *_sync shuffles and
//    __activemask (CUDA 9 names; HIP 5.2 has only the unsynchronized forms), int8_t/uint8_t/
//    int16_t/uint16_t/ptrdiff_t, INFINITY/NAN (use __builtin_huge_valf(), __builtin_nanf("")),
//    __hip_bfloat16 (keep bf16 as unsigned short), <hip/hip_runtime.h> and every other header:
//    hipRTC falls back to the host's /usr/include, where system headers clash with its own
//    definitions or are missing, so an #include either fails or depends on the machine.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/artifact.h"

namespace stitch::rt::gpu {

struct DeviceBinary {
  std::string arch;            // "sm_90", "sm_80", "gfx90a"
  std::vector<uint8_t> bytes;  // cubin / HSA code object
  std::string log;             // compiler log (may be empty)
  int registers = -1;          // per thread, when the compiler reports it (-1 unknown)
  // Spill traffic the compiler reports (0 none). NVRTC: bytes of spill stores + spill loads over
  // all functions. hipRTC: 4 × spilled VGPRs + SGPRs (see resource_usage.h).
  int64_t spillBytes = 0;
  double seconds = 0;     // compile wall time
  double cpuSeconds = 0;  // CPU time of the compiling thread meanwhile: on a loaded machine, the
                          // compile's own cost without the waits for a core
};

// A header the source includes by name, e.g. {"stitch/reduce.cuh", "..."}.
using DeviceHeader = rt::SourceHeader;

class DeviceCompiler {
 public:
  virtual ~DeviceCompiler() = default;
  virtual std::string_view name() const = 0;  // "nvrtc" / "hiprtc"
  // The language it compiles, as rt::KernelCode names it: "cuda" / "hip".
  virtual std::string_view language() const = 0;
  // The library's version, "13.0": another compiler version may emit other code (cache keys).
  virtual std::string version() const = 0;
  // The options compile() passes for `arch` before extraOptions (cache keys).
  virtual std::vector<std::string> options(const std::string& arch) const = 0;

  // Compiles one translation unit for `arch` ("sm_80", "sm_90", "gfx90a"). Throws Error with
  // ErrorCode::Compile whose message carries the compiler log and the source with line numbers
  // (plus any header the log names) when compilation fails; InvalidArgument for an arch this
  // compiler does not target. Spills are logged at warn. Thread-safe (hipRTC compiles one at a
  // time: it serializes internally anyway).
  virtual DeviceBinary compile(const std::string& source, const std::string& programName,
                               const std::vector<DeviceHeader>& headers, const std::string& arch,
                               const std::vector<std::string>& extraOptions = {}) = 0;
};

// Process-wide instances; nullptr (and *why set) when the library cannot be opened. Opening is
// tried once per process; STITCH_NVRTC_LIBRARY / STITCH_HIP_LIBRARY name the library to use.
DeviceCompiler* nvrtcCompiler(std::string* why = nullptr);
DeviceCompiler* hiprtcCompiler(std::string* why = nullptr);

// The source with each line numbered ("   12 | text"), as compile errors show it.
std::string numberLines(std::string_view source);

}  // namespace stitch::rt::gpu
