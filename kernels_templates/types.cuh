// stitch/types.cuh: the target shim and the scalar types every generated kernel uses.
//
// Generated kernels are compiled by NVRTC (CUDA) or hipRTC (HIP) with no system headers, so this
// file names everything they need itself: fixed-width integers, the warp primitives (one macro
// per primitive, CUDA and HIP spelled differently, as ggml's vendors/hip.h does), and f16/bf16
// as 16-bit storage types with round-to-nearest-even conversions to and from f32. (The tests'
// host emulation of CUDA code, tests/gpu/emulator, defines STITCH_HOST_EMULATION: f16 then
// converts through _Float16, as on HIP, instead of PTX.) Arithmetic is
// always done in f32 (f64 for f64): the reference interpreter rounds every f16/bf16 op result to
// its dtype, and so do the kernels (stitch::rnd_*), so results agree up to f32-vs-f64 error.
#pragma once

#if defined(__HIPCC_RTC__) || defined(__HIP__) || defined(STITCH_TARGET_HIP)
#define STITCH_HIP 1
#define STITCH_WARP 64
#define STITCH_SHFL_XOR(v, mask, width) __shfl_xor((v), (mask), (width))
#else
#define STITCH_CUDA 1
#define STITCH_WARP 32
#define STITCH_SHFL_XOR(v, mask, width) __shfl_xor_sync(0xffffffffu, (v), (mask), (width))
#endif

#define STITCH_DEVICE __device__ __forceinline__

namespace stitch {

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

// Bit casts (both compilers provide these intrinsics without headers).
STITCH_DEVICE float f32_bits(u32 b) { return __int_as_float(static_cast<int>(b)); }
STITCH_DEVICE u32 bits_f32(float x) { return static_cast<u32>(__float_as_int(x)); }
STITCH_DEVICE double f64_bits(u64 b) { return __longlong_as_double(static_cast<i64>(b)); }

// ---- f16 (IEEE binary16) ----------------------------------------------------------------------
STITCH_DEVICE float ld_f16(u16 h) {
#if defined(STITCH_CUDA) && !defined(STITCH_HOST_EMULATION)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  _Float16 v;
  __builtin_memcpy(&v, &h, 2);
  return static_cast<float>(v);
#endif
}
STITCH_DEVICE u16 st_f16(float f) {  // round to nearest even
#if defined(STITCH_CUDA) && !defined(STITCH_HOST_EMULATION)
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  _Float16 v = static_cast<_Float16>(f);
  u16 h;
  __builtin_memcpy(&h, &v, 2);
  return h;
#endif
}

// ---- bf16 (the top half of an f32) ------------------------------------------------------------
STITCH_DEVICE float ld_bf16(u16 h) { return f32_bits(static_cast<u32>(h) << 16); }
STITCH_DEVICE u16 st_bf16(float f) {  // round to nearest even; NaN stays a (quiet) NaN
  u32 b = bits_f32(f);
  if (f != f) return static_cast<u16>((b | 0x00400000u) >> 16);
  return static_cast<u16>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

// An op result of dtype f16/bf16 is rounded to it (and computed on in f32).
STITCH_DEVICE float rnd_f16(float x) { return ld_f16(st_f16(x)); }
STITCH_DEVICE float rnd_bf16(float x) { return ld_bf16(st_bf16(x)); }

// ---- bool is one byte in memory ----------------------------------------------------------------
STITCH_DEVICE bool ld_bool(u8 b) { return b != 0; }
STITCH_DEVICE u8 st_bool(bool b) { return b ? 1 : 0; }

}  // namespace stitch
