// stitch/check.cuh: index checks (lower/kernel_program.h, InstKind::CheckIndex).
//
// A kernel whose program checks indices takes one more pointer, `stitch_status`: four i64 words
// the runtime keeps zeroed. An index k outside [0, n) makes check_index return 0 (so that the load
// it addresses stays in bounds) and records the first failing check of the run there:
// status[0] = check + 1, status[1] = k, status[2] = n. The runtime reads the words after the
// launches and turns a record into the run's IndexOutOfRange error (runtime/gpu/gpu_executor.h).
// The record is a compare-and-swap on status[0]: the first thread to fail wins, the others leave
// its words alone. The failing path is out of line: the hot path is one unsigned compare.
#pragma once
#include "stitch/types.cuh"

namespace stitch {

static __device__ __noinline__ void record_index_error(i64* status, int check, i64 k, i64 n) {
  if (atomicCAS(reinterpret_cast<u64*>(status), 0ull, static_cast<u64>(check) + 1ull) == 0ull) {
    status[1] = k;
    status[2] = n;
  }
}

// Unsigned, so one compare catches negative indices too.
STITCH_DEVICE i64 check_index(i64* status, int check, i64 k, i64 n) {
  if (static_cast<u64>(k) < static_cast<u64>(n)) return k;
  record_index_error(status, check, k, n);
  return 0;
}

}  // namespace stitch
