// The CPU thread pool on small kernels: where running on the calling thread beats splitting
// across the pool (runtime/cpu/executor.h, kInlineBytes), and what the workers' spinning saves
// (runtime/cpu/thread_pool.h).
//
//   build/<preset>/bench/stitch_bench_thread_pool [--benchmark_filter=...]
//
// The kernel is y = x * 2 + 1 over f32 (8 bytes moved per element, memory-bound like the fused
// kernels), cut into units of 1024 elements as the lowering cuts loop phases. The argument is the
// bytes the kernel moves (input plus output). Pools have numThreadsFromEnv() threads
// (STITCH_NUM_THREADS, else every core).
//
// BM_Kernel/BYTES/SPIN, back to back (the kernels of a program):
//   SPIN -1: inline on the calling thread, fn(0, units);
//   SPIN s >= 0: split on a pool whose workers spin s µs before sleeping (20 is the default,
//   ThreadPool::kSpinTime; 0 sleeps at once: a futex wake per kernel).
// BM_KernelAfterIdle/BYTES/SPIN: the same, each call after 200 µs of the caller's own work (the
// gap between pieces of a model, longer than the spin), so split calls find the workers asleep;
// manual time, the call only.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "runtime/cpu/thread_pool.h"

namespace {

using stitch::rt::cpu::ThreadPool;

constexpr int64_t kUnitElements = 1024;

constexpr int kSpins[] = {0, 5, 20};

ThreadPool& pool(int spin) {
  static std::vector<std::unique_ptr<ThreadPool>> pools = [] {
    std::vector<std::unique_ptr<ThreadPool>> p;
    for (int s : kSpins)
      p.push_back(std::make_unique<ThreadPool>(stitch::rt::cpu::numThreadsFromEnv(),
                                               std::chrono::microseconds(s)));
    return p;
  }();
  for (size_t i = 0; i < std::size(kSpins); ++i)
    if (kSpins[i] == spin) return *pools[i];
  return *pools.back();
}

struct Buffers {
  std::vector<float> x, y;
  explicit Buffers(int64_t bytes)
      : x(static_cast<size_t>(bytes / 8), 0.5f), y(static_cast<size_t>(bytes / 8)) {}
  int64_t elements() const { return static_cast<int64_t>(x.size()); }
  int64_t units() const { return (elements() + kUnitElements - 1) / kUnitElements; }
  void run(int64_t beginUnit, int64_t endUnit) {
    int64_t end = std::min(endUnit * kUnitElements, elements());
    for (int64_t i = beginUnit * kUnitElements; i < end; ++i)
      y[static_cast<size_t>(i)] = x[static_cast<size_t>(i)] * 2.0f + 1.0f;
  }
};

void call(Buffers& b, int spin) {
  auto fn = [&b](int64_t begin, int64_t end) { b.run(begin, end); };
  if (spin < 0) fn(0, b.units());
  else pool(spin).parallelFor(b.units(), 1, fn);
  benchmark::ClobberMemory();
}

void BM_Kernel(benchmark::State& state) {
  Buffers b(state.range(0));
  const int spin = static_cast<int>(state.range(1));
  call(b, spin);  // the pool starts, the pages are touched
  for (auto _ : state) call(b, spin);
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_KernelAfterIdle(benchmark::State& state) {
  Buffers b(state.range(0));
  const int spin = static_cast<int>(state.range(1));
  call(b, spin);
  volatile uint64_t sink = 0;
  for (auto _ : state) {
    // The caller's own work between calls (not a sleep: the caller's core stays busy, as in a
    // model's Python between pieces), long enough that spinning workers go to sleep.
    auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    while (std::chrono::steady_clock::now() < until) sink = sink + 1;
    auto t0 = std::chrono::steady_clock::now();
    call(b, spin);
    auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t kib : {8, 16, 32, 64, 128, 256, 1024})
    for (int spin : {-1, 0, 5, 20}) b->Args({kib * 1024, spin});
}

BENCHMARK(BM_Kernel)->Apply(sizes);
// Each call costs 200 µs of gap: a fixed count, or the library would run 0.5 s of call time.
BENCHMARK(BM_KernelAfterIdle)->Apply(sizes)->UseManualTime()->Iterations(2000);

}  // namespace

BENCHMARK_MAIN();
