// stitch/random.cuh: random_uniform on the device, Philox4x32-10 (support/philox.h defines it).
//
// Every element recomputes the Philox block of its counter (index / 4) and keeps one of the four
// words: the bits depend on (seed, offset, index) only, never on the launch, so the reference,
// the host and every GPU agree bit for bit. The 32x32->64 products are written as 64-bit
// multiplies (both compilers turn them into mul.hi/mul.lo pairs). tests/gpu/
// test_device_templates_host.cpp compiles this file on the host and checks it against
// support/philox.h and Random123's known answers.
#pragma once
#include "stitch/types.cuh"

namespace stitch {

STITCH_DEVICE u32 philox_word(u64 seed, u64 offset, u64 index) {
  const u64 q = index >> 2;
  u32 c0 = static_cast<u32>(q), c1 = static_cast<u32>(q >> 32);
  u32 c2 = static_cast<u32>(offset), c3 = static_cast<u32>(offset >> 32);
  u32 k0 = static_cast<u32>(seed), k1 = static_cast<u32>(seed >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const u64 p0 = static_cast<u64>(0xD2511F53u) * c0;
    const u64 p1 = static_cast<u64>(0xCD9E8D57u) * c2;
    const u32 n0 = static_cast<u32>(p1 >> 32) ^ c1 ^ k0;
    const u32 n2 = static_cast<u32>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<u32>(p1);
    c3 = static_cast<u32>(p0);
    c0 = n0;
    c2 = n2;
  }
  const u32 w = static_cast<u32>(index & 3);
  return w == 0 ? c0 : w == 1 ? c1 : w == 2 ? c2 : c3;
}

// The top M bits as a fraction in [0, 1): exact in f32 for M <= 24 (f16: M = 11, bf16: 8).
template <int M>
STITCH_DEVICE float uniform_f32(u64 seed, u64 offset, u64 index) {
  return static_cast<float>(philox_word(seed, offset, index) >> (32 - M)) *
         (1.0f / static_cast<float>(1u << M));
}

STITCH_DEVICE double uniform_f64(u64 seed, u64 offset, u64 index) {
  return static_cast<double>(philox_word(seed, offset, index)) * (1.0 / 4294967296.0);
}

}  // namespace stitch
