// The process's OpenMP runtime, when one is loaded: parallelFor's other way to run a loop.
//
// Why. In the PyTorch hook, Stitch's pieces run between ATen ops, and ATen runs its loops on
// OpenMP (the wheel's libgomp). After each parallel region, libgomp's idle threads spin for a
// while (GOMP_SPINCOUNT: milliseconds) before they sleep, so a Stitch kernel started right after
// an eager op finds every core taken by a spinning OpenMP thread: its own workers share a core
// with one and the kernel waits for them (measured on the 2-core dev VM: an add of two 4 MiB
// tensors took 100 µs alone and ~200 µs right after an eager add; with OMP_WAIT_POLICY=passive
// the penalty was gone). Inductor's C++ kernels avoid this by using OpenMP themselves. So does
// the thread pool, when the process has an OpenMP runtime loaded: it runs its loops as a
// parallel region of that runtime (GOMP_parallel, the entry point GCC's `#pragma omp parallel`
// calls, which libgomp and LLVM's libomp/libiomp5 both export), whose team is the threads that
// are spinning anyway, rather than waking its own.
//
// The runtime is found among the objects already loaded (dl_iterate_phdr: a library whose name
// starts with libgomp, libomp or libiomp5) and opened with RTLD_NOLOAD: Stitch never loads one
// itself, so a C/C++ program without OpenMP keeps the pool's own threads. The search repeats
// only when the process has loaded more objects since the last one (a program that imports
// torch after its first Stitch run). STITCH_CPU_OPENMP=0 turns the OpenMP path off.
#pragma once

#include <cstdint>

namespace stitch::rt::cpu {

// STITCH_CPU_OPENMP: "0" keeps the pool's own threads even when OpenMP is loaded; "1" or unset:
// use a loaded OpenMP runtime.
inline constexpr const char* kOpenMpEnv = "STITCH_CPU_OPENMP";
// The value of STITCH_CPU_OPENMP (a boolean, default on); throws InvalidArgument on a bad value.
bool openMpFromEnv();

// GOMP_parallel(fn, data, num_threads, flags): runs fn(data) on a team of num_threads threads
// (the caller among them) and returns when all are done.
using GompParallelFn = void (*)(void (*fn)(void*), void* data, unsigned numThreads, unsigned flags);

// The loaded runtime's entry points.
//
// A region's team is at most `maxThreads()` (omp_get_max_threads: the calling thread's
// nthreads-var, which torch.set_num_threads(n) sets with omp_set_num_threads) as well as the
// pool's size. The process asked OpenMP for that many threads; a larger team makes libgomp start
// or wake threads beyond the ones ATen spins on, and the region's closing barrier then waits for
// a thread the OS may have descheduled: after torch.set_num_threads(1) on the 2-core dev VM, with
// another process busy, a 0.06 ms concat took 3-19 ms through a team of 2, 0.1 ms alone.
struct OpenMpRuntime {
  GompParallelFn parallel = nullptr;
  int (*maxThreads)() = nullptr;  // omp_get_max_threads; null if the runtime lacks it
};

// The loaded runtime, or null when none is loaded (or STITCH_CPU_OPENMP=0). Thread-safe and
// cheap once found; while none is found, one dl_iterate_phdr call per call.
const OpenMpRuntime* loadedOpenMp();

// The team for a loop of `chunks` chunks on a pool of `poolThreads`: at most each of the three
// (maxThreads() where the runtime has it), at least 1.
unsigned openMpTeam(const OpenMpRuntime& omp, int64_t poolThreads, int64_t chunks);

}  // namespace stitch::rt::cpu
