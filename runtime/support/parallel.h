// A bounded parallel loop for coarse, independent work items: compiling a program's kernels.
//
// Why not the cpu backend's ThreadPool (runtime/cpu/thread_pool.h): that pool runs kernels, is
// sized for them, and lives in the cpu backend; compiles are few (a program's kernels), long
// (tens to hundreds of milliseconds each) and happen on any backend. Starting a handful of
// threads per call costs microseconds against that, and keeps no state between calls.
//
// Determinism: every item runs (an exception in one does not cancel the others, so a cache fills
// the same way whatever the interleaving), results are written by index, and when items throw,
// the exception of the lowest failing index is rethrown, so the error a caller sees does not
// depend on scheduling.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

namespace stitch {

// Runs fn(i) for every i in [0, n) on min(n, threads) threads, the caller's included (threads <=
// 1, or n <= 1: all on the caller). Returns when every item is done; rethrows as said above.
void parallelForEach(size_t n, int threads, const std::function<void(size_t)>& fn);

// STITCH_COMPILE_THREADS: how many kernels of one program are compiled at once.
inline constexpr const char* kCompileThreadsEnv = "STITCH_COMPILE_THREADS";
// Parses a STITCH_COMPILE_THREADS value: an integer from 1 to 256. InvalidArgument naming the
// variable and the value otherwise.
int parseCompileThreads(std::string_view text);
// STITCH_COMPILE_THREADS when set, else min(8, hardware threads): a compile is single-threaded
// and memory-hungry (NVRTC: ~100 MB), and a program rarely has more kernels than that.
int compileThreads();

}  // namespace stitch
