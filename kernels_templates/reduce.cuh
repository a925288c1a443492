// stitch/reduce.cuh: the combining functions and the cross-thread reductions of a row.
//
// A reduce phase gives each unit (one row of the dominant reduction) TK threads ("lanes"), which
// accumulate partial results in registers while walking the row; then the lanes of a unit
// combine their partials. Three mappings, chosen by the emitter per phase:
//   - warp per row (TK <= warp size, lanes adjacent): butterfly shuffles within TK-wide segments
//     of a warp (several short rows share a warp and a block);
//   - block per row (TK > warp size): shuffles within each warp, the warps' partials through
//     shared memory, then every warp folds the partials (so all threads hold the result with two
//     barriers and no broadcast step);
//   - column tiles (lanes strided by UX, for reductions over outer axes where adjacent units are
//     adjacent in memory, so a warp reads UX consecutive addresses): a tree through shared memory.
// Every function returns the combined value in all lanes of the unit, and begins with a barrier
// so that shared memory can be reused by the next call.
#pragma once
#include "stitch/math.cuh"

namespace stitch {

// Combining functions. identity() is what an empty row reduces to.
struct SumOp {
  template <class T>
  static STITCH_DEVICE T identity() {
    return T(0);
  }
  static STITCH_DEVICE float apply(float a, float b) { return a + b; }
  static STITCH_DEVICE double apply(double a, double b) { return a + b; }
  static STITCH_DEVICE int apply(int a, int b) { return iadd(a, b); }
  static STITCH_DEVICE i64 apply(i64 a, i64 b) { return iadd(a, b); }
};
// A float product of nonzero factors that underflows is held at the smallest subnormal of its
// sign, so only a zero factor makes it zero and +-inf times it stays +-inf (the reference's
// rule), whichever way lanes, blocks and split rows group the factors.
struct ProdOp {
  template <class T>
  static STITCH_DEVICE T identity() {
    return T(1);
  }
  static STITCH_DEVICE float apply(float a, float b) {
    const float r = a * b;
    return r == 0.0f && a != 0.0f && b != 0.0f ? copysignf(f32_bits(1u), r) : r;
  }
  static STITCH_DEVICE double apply(double a, double b) {
    const double r = a * b;
    return r == 0.0 && a != 0.0 && b != 0.0 ? copysign(f64_bits(1ull), r) : r;
  }
  static STITCH_DEVICE int apply(int a, int b) { return imul(a, b); }
  static STITCH_DEVICE i64 apply(i64 a, i64 b) { return imul(a, b); }
};
template <class T>
struct Limits;
template <>
struct Limits<float> {
  static STITCH_DEVICE float lowest() { return f32_bits(0xff800000u); }  // -inf
  static STITCH_DEVICE float highest() { return f32_bits(0x7f800000u); }
};
template <>
struct Limits<double> {
  static STITCH_DEVICE double lowest() { return f64_bits(0xfff0000000000000ull); }
  static STITCH_DEVICE double highest() { return f64_bits(0x7ff0000000000000ull); }
};
template <>
struct Limits<int> {
  static STITCH_DEVICE int lowest() { return -2147483647 - 1; }
  static STITCH_DEVICE int highest() { return 2147483647; }
};
template <>
struct Limits<i64> {
  static STITCH_DEVICE i64 lowest() { return -9223372036854775807ll - 1; }
  static STITCH_DEVICE i64 highest() { return 9223372036854775807ll; }
};
struct MaxOp {
  template <class T>
  static STITCH_DEVICE T identity() {
    return Limits<T>::lowest();
  }
  static STITCH_DEVICE float apply(float a, float b) { return fmaximum(a, b); }
  static STITCH_DEVICE double apply(double a, double b) { return fmaximum(a, b); }
  static STITCH_DEVICE int apply(int a, int b) { return imax(a, b); }
  static STITCH_DEVICE i64 apply(i64 a, i64 b) { return imax(a, b); }
};
struct MinOp {
  template <class T>
  static STITCH_DEVICE T identity() {
    return Limits<T>::highest();
  }
  static STITCH_DEVICE float apply(float a, float b) { return fminimum(a, b); }
  static STITCH_DEVICE double apply(double a, double b) { return fminimum(a, b); }
  static STITCH_DEVICE int apply(int a, int b) { return imin(a, b); }
  static STITCH_DEVICE i64 apply(i64 a, i64 b) { return imin(a, b); }
};

// Butterfly over the TK lanes of a segment (TK a power of two, <= warp size); every lane of the
// segment ends with the combined value. All lanes of the warp must call it.
template <class Op, int TK, class T>
STITCH_DEVICE T segment_reduce(T v) {
#pragma unroll
  for (int m = TK / 2; m > 0; m >>= 1) v = Op::apply(v, STITCH_SHFL_XOR(v, m, TK));
  return v;
}

// All threads of the block (BLOCK of them, a multiple of the warp size) reduce one value.
// `smem` holds at least BLOCK / warp size values of T.
template <class Op, int BLOCK, class T>
STITCH_DEVICE T block_reduce(T v, T* smem) {
  const int warps = BLOCK / STITCH_WARP;
  v = segment_reduce<Op, STITCH_WARP>(v);
  const int lane = threadIdx.x % STITCH_WARP;
  __syncthreads();  // earlier readers of smem are done
  if (lane == 0) smem[threadIdx.x / STITCH_WARP] = v;
  __syncthreads();
  v = lane < warps ? smem[lane] : Op::template identity<T>();
  return segment_reduce<Op, STITCH_WARP>(v);
}

// Lanes of unit `ux` are the threads ux + UX * lane, lane in [0, TK) (TK a power of two); the
// block has UX * TK threads. A tree through shared memory (UX * TK values of T).
template <class Op, int UX, int TK, class T>
STITCH_DEVICE T column_reduce(T v, T* smem) {
  const int t = threadIdx.x;
  const int lane = t / UX;
  __syncthreads();
  smem[t] = v;
  __syncthreads();
#pragma unroll
  for (int s = TK / 2; s > 0; s >>= 1) {
    if (lane < s) smem[t] = Op::apply(smem[t], smem[t + s * UX]);
    __syncthreads();
  }
  return smem[t % UX];
}

// The reduction of a unit's TK lanes under the emitter's mapping (row: lanes adjacent).
template <class Op, bool ROW, int UX, int TK, class T>
STITCH_DEVICE T unit_reduce(T v, T* smem) {
  if (TK == 1) return v;
  if (!ROW) return column_reduce<Op, UX, TK>(v, smem);
  if (TK <= STITCH_WARP) return segment_reduce<Op, (TK <= STITCH_WARP ? TK : 1)>(v);
  return block_reduce<Op, UX * TK>(v, smem);
}

}  // namespace stitch
