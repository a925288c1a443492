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

// A group moves as one N-byte word (N = V * sizeof(element): 16, 8, 4 or 2), and its elements
// are packed into and unpacked from the word's 32-bit parts with shifts, never through memory:
// reinterpreting a local array's address would put the array in local memory (a stack frame
// that ptxas reports as spills), which is what these functions exist to avoid.
template <int N>
struct alignas(N) Word {
  u32 w[N / 4];
};
template <>
struct alignas(2) Word<2> {
  u16 w[1];
};

// Raw bits of an element, and back.
STITCH_DEVICE u64 to_bits(float x) { return __float_as_uint(x); }
STITCH_DEVICE u64 to_bits(double x) { return static_cast<u64>(__double_as_longlong(x)); }
STITCH_DEVICE u64 to_bits(int x) { return static_cast<u32>(x); }
STITCH_DEVICE u64 to_bits(i64 x) { return static_cast<u64>(x); }
STITCH_DEVICE u64 to_bits(u16 x) { return x; }
STITCH_DEVICE u64 to_bits(u8 x) { return x; }
template <class S>
STITCH_DEVICE S from_bits(u64 b);
template <>
STITCH_DEVICE float from_bits<float>(u64 b) {
  return __uint_as_float(static_cast<u32>(b));
}
template <>
STITCH_DEVICE double from_bits<double>(u64 b) {
  return __longlong_as_double(static_cast<i64>(b));
}
template <>
STITCH_DEVICE int from_bits<int>(u64 b) {
  return static_cast<int>(static_cast<u32>(b));
}
template <>
STITCH_DEVICE i64 from_bits<i64>(u64 b) {
  return static_cast<i64>(b);
}
template <>
STITCH_DEVICE u16 from_bits<u16>(u64 b) {
  return static_cast<u16>(b);
}
template <>
STITCH_DEVICE u8 from_bits<u8>(u64 b) {
  return static_cast<u8>(b);
}

// Loads V elements of type S at p (aligned to V * sizeof(S)) into out[0..V).
template <int V, class S>
STITCH_DEVICE void load_vec(const S* __restrict__ p, S (&out)[V]) {
  constexpr int N = V * static_cast<int>(sizeof(S));
  const Word<N> r = *reinterpret_cast<const Word<N>*>(p);
#pragma unroll
  for (int i = 0; i < V; ++i) {
    if (sizeof(S) == 8) {
      out[i] =
          from_bits<S>(static_cast<u64>(r.w[2 * i]) | (static_cast<u64>(r.w[2 * i + 1]) << 32));
    } else {
      const int bit = i * static_cast<int>(sizeof(S)) * 8;
      out[i] = from_bits<S>(static_cast<u64>(r.w[bit / 32]) >> (bit % 32));
    }
  }
}

// Stores in[0..V) to p (aligned to V * sizeof(S)) as one word.
template <int V, class S>
STITCH_DEVICE void store_vec(S* __restrict__ p, const S (&in)[V]) {
  constexpr int N = V * static_cast<int>(sizeof(S));
  Word<N> r;
#pragma unroll
  for (int k = 0; k < (N >= 4 ? N / 4 : 1); ++k) r.w[k] = 0;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const u64 b = to_bits(in[i]);
    if (sizeof(S) == 8) {
      r.w[2 * i] = static_cast<u32>(b);
      r.w[2 * i + 1] = static_cast<u32>(b >> 32);
    } else {
      const int bit = i * static_cast<int>(sizeof(S)) * 8;
      const u64 mask = (u64{1} << (sizeof(S) * 8)) - 1;  // sizeof(S) <= 4 here
      r.w[bit / 32] |= static_cast<u32>((b & mask) << (bit % 32));
    }
  }
  *reinterpret_cast<Word<N>*>(p) = r;
}

}  // namespace stitch
