// Host emulation of the CUDA kernels Stitch emits (tests only): the prelude of a translation unit
// that g++ compiles together with the kernels' source and the device templates, so that the
// generated code runs, and is checked against the reference interpreter, on a machine with no GPU.
//
// Design note. The emitted code uses little of CUDA: threadIdx/blockIdx/gridDim .x, __shared__
// arrays, __syncthreads, __shfl_xor_sync (the reductions' butterflies), and for the cooperative
// entry a grid barrier (not emulated: the per-phase entries are launched, as the runtime does
// without cooperative launch). Each block runs as one fiber per thread (ucontext), on the calling
// thread, switched at every barrier (started with swapcontext, then switched with _setjmp and
// _longjmp, which do not save the signal mask: no system call per switch): a barrier resumes when
// every thread of the block has reached it, and a block where some threads finished while others
// wait at a barrier is reported (on a GPU that is undefined behaviour). __shared__ becomes
// `static`: one block runs at a time.
//
// A shuffle is an exchange through a slot per thread between two block barriers, which is exact
// when every thread of the block shuffles the same number of times: the emitter calls the
// cross-lane reductions from every thread of a block (inactive lanes compute on the last unit),
// and a kernel that did not would be reported as a barrier mismatch here.
//
// The dialect is CUDA's (warp 32, the sm_XY schedules), with STITCH_HOST_EMULATION selecting the
// templates' portable f16 conversions instead of PTX.
#pragma once

#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#include <cmath>
#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#define STITCH_HOST_EMULATION 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(n)
#define __shared__ static

namespace emu {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

struct Fiber {
  ucontext_t context;  // to start it
  jmp_buf resume;      // where it waits at a barrier
  Dim3 thread;
  bool started = false;
  bool done = false;
  bool waiting = false;
};

// The running launch: one block at a time, its threads' fibers, the shuffle slots.
struct Launch {
  Dim3 block, grid;
  Fiber* current = nullptr;
  ucontext_t schedulerContext;  // swapcontext's, unused after the start
  jmp_buf scheduler;            // where a fiber that waits or ends returns to
  std::vector<Fiber> fibers;
  std::vector<std::vector<char>> stacks;
  std::vector<unsigned long long> slots;
  void (*entry)(void**) = nullptr;
  void** args = nullptr;
};
inline Launch g;

inline void barrier() {
  Fiber* f = g.current;
  f->waiting = true;
  if (_setjmp(f->resume) == 0) _longjmp(g.scheduler, 1);
}

}  // namespace emu

#define threadIdx (::emu::g.current->thread)
#define blockIdx (::emu::g.block)
#define gridDim (::emu::g.grid)

inline void __syncthreads() { emu::barrier(); }
inline void __threadfence() {}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p = old + v;
  return old;
}
// Fibers switch only at barriers: a read-modify-write is atomic here.
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long expected,
                                    unsigned long long desired) {
  const unsigned long long old = *p;
  if (old == expected) *p = desired;
  return old;
}

template <class T>
T __shfl_xor_sync(unsigned, T v, int mask, int width) {
  static_assert(sizeof(T) <= sizeof(unsigned long long));
  (void)width;  // mask < width: the partner is in the same segment
  const unsigned t = threadIdx.x;
  memcpy(&emu::g.slots[t], &v, sizeof(T));
  emu::barrier();
  T r;
  memcpy(&r, &emu::g.slots[t ^ static_cast<unsigned>(mask)], sizeof(T));
  emu::barrier();
  return r;
}

inline float __int_as_float(int x) {
  float f;
  memcpy(&f, &x, 4);
  return f;
}
inline int __float_as_int(float x) {
  int i;
  memcpy(&i, &x, 4);
  return i;
}
inline float __uint_as_float(unsigned x) { return __int_as_float(static_cast<int>(x)); }
inline unsigned __float_as_uint(float x) { return static_cast<unsigned>(__float_as_int(x)); }
inline double __longlong_as_double(long long x) {
  double d;
  memcpy(&d, &x, 8);
  return d;
}
inline long long __double_as_longlong(double x) {
  long long i;
  memcpy(&i, &x, 8);
  return i;
}

namespace emu {

// Calls a kernel entry with its parameters read from args[i] (cuLaunchKernel's convention).
template <class... A, size_t... I>
void invokeWith(void (*fn)(A...), void** args, std::index_sequence<I...>) {
  fn(*static_cast<std::remove_cv_t<A>*>(args[I])...);
}
template <class... A>
void invoke(void (*fn)(A...), void** args) {
  invokeWith(fn, args, std::index_sequence_for<A...>{});
}

inline void fiberMain() {
  g.entry(g.args);
  g.current->done = true;
  _longjmp(g.scheduler, 1);
}

// Runs `entry` on `grid` blocks of `block` threads. Returns 0, or 1 when the threads of a block
// disagree on barriers.
inline int launch(void (*entry)(void**), long long grid, int block, void** args) {
  constexpr size_t kStack = 64 * 1024;
  g.entry = entry;
  g.args = args;
  g.grid = Dim3{static_cast<unsigned>(grid), 1, 1};
  g.fibers.assign(static_cast<size_t>(block), Fiber{});
  g.slots.assign(static_cast<size_t>(block), 0);
  while (g.stacks.size() < static_cast<size_t>(block)) g.stacks.emplace_back(kStack);
  for (long long b = 0; b < grid; ++b) {
    g.block = Dim3{static_cast<unsigned>(b), 0, 0};
    for (int t = 0; t < block; ++t) {
      Fiber& f = g.fibers[static_cast<size_t>(t)];
      f = Fiber{};
      f.thread = Dim3{static_cast<unsigned>(t), 0, 0};
      getcontext(&f.context);
      f.context.uc_stack.ss_sp = g.stacks[static_cast<size_t>(t)].data();
      f.context.uc_stack.ss_size = kStack;
      f.context.uc_link = nullptr;  // fiberMain never returns
      makecontext(&f.context, fiberMain, 0);
    }
    for (;;) {
      for (Fiber& f : g.fibers)
        if (!f.done && !f.waiting) {
          g.current = &f;
          if (_setjmp(g.scheduler) == 0) {
            if (f.started) _longjmp(f.resume, 1);
            f.started = true;
            swapcontext(&g.schedulerContext, &f.context);
          }
        }
      size_t done = 0, waiting = 0;
      for (const Fiber& f : g.fibers) (f.done ? done : waiting) += 1;
      if (waiting == 0) break;
      if (done > 0) return 1;  // some threads left while others wait at a barrier
      for (Fiber& f : g.fibers) f.waiting = false;
    }
  }
  return 0;
}

}  // namespace emu
