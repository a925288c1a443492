// stitch/vec.cuh: 128-bit (and narrower) vector loads and stores of V consecutive elements.
//
// The emitter vectorizes a load or store when its index is unit-stride in the loop index and
// provably a multiple of V at the start of each thread's group, and the buffer's base pointer
// is 16-byte aligned (checked at run time; the alignment is part of the kernel cache key, and
// an unaligned call gets the scalar variant). V * sizeof(element) is 16, 8 or 4 bytes, so each
// group is one ld.global.v4/v2 (or one 32-bit load) instead of V scalar loads.
#pragma once
#include "stitch/types.cuh"

namespace stitch {

// Raw V-element groups as one machine word of N bytes (own types: no vector_types.h needed).
struct alignas(16) Bytes16 {
  u32 x, y, z, w;
};
struct alignas(8) Bytes8 {
  u32 x, y;
};
template <int N>
struct Raw;
template <>
struct Raw<16> {
  typedef Bytes16 type;
};
template <>
struct Raw<8> {
  typedef Bytes8 type;
};
template <>
struct Raw<4> {
  typedef u32 type;
};
template <>
struct Raw<2> {
  typedef u16 type;
};

// Loads V elements of storage type S at p (aligned to V * sizeof(S)) into out[0..V), which the
// emitter declares alignas(16) so the group moves as one word (registers after optimization).
template <int V, class S>
STITCH_DEVICE void load_vec(const S* __restrict__ p, S (&out)[V]) {
  typedef typename Raw<V * sizeof(S)>::type R;
  *reinterpret_cast<R*>(&out[0]) = *reinterpret_cast<const R*>(p);
}

template <int V, class S>
STITCH_DEVICE void store_vec(S* __restrict__ p, const S (&in)[V]) {
  typedef typename Raw<V * sizeof(S)>::type R;
  *reinterpret_cast<R*>(p) = *reinterpret_cast<const R*>(&in[0]);
}

}  // namespace stitch
