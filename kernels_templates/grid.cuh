// stitch/grid.cuh: a grid-wide barrier, for kernels whose plan stitches a value through global
// memory (the "global" scheme: a second-level reduction whose result the whole grid needs).
//
// Such a kernel is emitted both as one launch per phase (stream order is the barrier) and as one
// cooperative kernel running every phase with grid_barrier() between them; the runtime launches
// the cooperative form only with cooperative launch (cuLaunchCooperativeKernel, which refuses a
// grid that cannot be resident at once) and a grid no larger than the occupancy calculator's
// bound, because a barrier across blocks that are not all resident deadlocks.
//
// The barrier is a counter and a generation word in global memory, zero-initialized once when the
// runtime allocates them. Each block's thread 0 reads the generation, then arrives; the last to
// arrive resets the counter and bumps the generation, which releases the others. The counter is
// back to zero after every barrier, so the words never need resetting between launches.
#pragma once
#include "stitch/types.cuh"

namespace stitch {

STITCH_DEVICE void grid_barrier(u32* bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile u32* gen = bar + 1;
    const u32 g = *gen;
    __threadfence();  // this block's writes are visible before it arrives
    const u32 arrived = atomicAdd(bar, 1u);
    if (arrived == gridDim.x - 1) {
      *reinterpret_cast<volatile u32*>(bar) = 0;
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      while (*gen == g) {
      }
    }
    __threadfence();
  }
  __syncthreads();
}

}  // namespace stitch
