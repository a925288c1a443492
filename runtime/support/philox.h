// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011): the
// counter-based generator behind the random_uniform op, as PyTorch and JAX use it on GPUs.
//
// This is the host definition that the reference interpreter uses and the unit tests check
// against Random123's published known-answer vectors. The device templates
// (kernels_templates/random.cuh) and the LLVM emitter implement the same function; every backend
// is tested for identical bits.
//
// What random_uniform computes from it (the op's definition; README "Graphs"): the element at
// row-major flat index i of the result reads word (i mod 4) of
//   philox(counter = {lo32(i/4), hi32(i/4), lo32(offset), hi32(offset)},
//          key     = {lo32(seed), hi32(seed)})
// and keeps its top m bits as a fraction u * 2^-m in [0, 1): m = 24 for f32, 11 for f16, 8 for
// bf16 and 32 for f64, so each value is exact in its dtype (no rounding differs anywhere).
#pragma once

#include <array>
#include <cstdint>

#include "runtime/support/dtype.h"

namespace stitch {

inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;
inline constexpr int kPhiloxRounds = 10;

constexpr std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int r = 0; r < kPhiloxRounds; ++r) {
    if (r > 0) {
      k[0] += kPhiloxW0;
      k[1] += kPhiloxW1;
    }
    uint64_t p0 = uint64_t{kPhiloxM0} * c[0];
    uint64_t p1 = uint64_t{kPhiloxM1} * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
  }
  return c;
}

// The random word of element `index` (see the file comment).
constexpr uint32_t philoxWord(uint64_t seed, uint64_t offset, uint64_t index) {
  uint64_t q = index >> 2;
  auto out = philox4x32({static_cast<uint32_t>(q), static_cast<uint32_t>(q >> 32),
                         static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)},
                        {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  return out[index & 3];
}

// Fraction bits kept per dtype: every value u * 2^-m is exact in the dtype and below 1.
constexpr int uniformBits(ir::DType t) {
  switch (t) {
    case ir::DType::F16: return 11;
    case ir::DType::BF16: return 8;
    case ir::DType::F64: return 32;
    default: return 24;
  }
}

// The uniform value in [0, 1) of element `index`.
inline double philoxUniform(uint64_t seed, uint64_t offset, uint64_t index, ir::DType t) {
  int m = uniformBits(t);
  uint32_t u = philoxWord(seed, offset, index) >> (32 - m);
  return static_cast<double>(u) * (1.0 / static_cast<double>(uint64_t{1} << m));
}

}  // namespace stitch
