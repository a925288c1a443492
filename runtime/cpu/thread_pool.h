// The CPU backend's thread pool: a fixed set of workers that run parallelFor loops.
//
// Design. A parallelFor call is a Job that lives on the caller's stack: [0, units) is cut into
// chunks of at least `grain` units (about kChunksPerThread per thread, so a slow thread does not
// hold up the loop, and never more chunks than units), and every participant claims the next
// chunk with one atomic fetch_add. The caller appends its job to the pool's queue, wakes the
// sleeping workers it needs, and then claims chunks itself, so a job whose workers wake late is
// simply finished by the caller. No heap allocation happens per call; the job and the
// type-erased callable stay on the stack.
//
// Spinning. A program runs its kernels back to back, each a parallelFor, and a caller such as
// the PyTorch hook runs programs a few microseconds apart. Waking a worker from its condition
// variable is a futex call and a context switch on each side (several µs on this VM, far more
// than a small kernel's work), so a worker that finds the queue empty first spins for up to
// kSpinTime, watching an atomic push counter with a pause instruction, and only then sleeps. The
// caller counts the spinning and the sleeping workers (both under the mutex it queues under) and
// notifies only sleepers, and only as many as the job needs beyond the spinners: a spinner
// counted at the push re-checks the queue under the mutex before it can sleep, so no job is
// missed. The caller likewise spins up to kSpinTime for the workers still inside its job before
// blocking on its condition variable, and a worker notifies only a caller that blocks. The
// bound keeps an idle pool from burning a core for longer than that after its last job.
//
// Concurrency model: parallelFor may be called from several threads at once and is NOT
// serialized. Jobs queue in arrival order; idle workers help the oldest job that still has
// unclaimed chunks, and each caller always works on its own job, so every call makes progress
// even when the workers are busy with someone else's. A chunk may itself call parallelFor (the
// nested job is queued like any other and its caller works on it), which cannot deadlock.
//
// OpenMP. Where the process has an OpenMP runtime loaded (PyTorch's), a loop runs as a parallel
// region of it instead, the team claiming chunks the same way (openmp_team.h: in the PyTorch
// hook, ATen's OpenMP threads spin after every op, and the pool's workers would share cores
// with them).
//
// A job may not return while a worker still touches it (it is on the caller's stack): workers
// register as users of a job under the pool mutex, and the caller, after unlinking the job,
// waits until its users are gone. The first exception thrown by a chunk is kept, the chunks not
// yet started are skipped, and it is rethrown on the caller.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

namespace stitch::rt::cpu {

// STITCH_NUM_THREADS: the number of threads CPU kernels run on, callers included.
inline constexpr const char* kNumThreadsEnv = "STITCH_NUM_THREADS";
// Larger values are surely a typo (and would exhaust the process's threads).
inline constexpr int kMaxThreads = 4096;

// STITCH_SPIN_US: how long idle pool threads spin before they sleep, in microseconds (0: sleep
// at once). For machines with more runnable threads than cores, where a spinning worker takes
// time from other work (measured on a loaded 2-core VM: bench/bench_thread_pool.cpp).
inline constexpr const char* kSpinEnv = "STITCH_SPIN_US";
inline constexpr int kMaxSpinMicros = 100000;  // 0.1 s: beyond that it is busy-waiting, not a spin

// Parses a STITCH_SPIN_US value: a decimal integer from 0 to kMaxSpinMicros. Throws
// InvalidArgument naming the variable and the bad value otherwise.
std::chrono::microseconds parseSpinMicros(std::string_view text);
// The spin from STITCH_SPIN_US when set, else ThreadPool::kSpinTime.
std::chrono::microseconds spinFromEnv();

// Parses a STITCH_NUM_THREADS value: a positive decimal integer, at most kMaxThreads. Throws
// InvalidArgument naming the variable and the bad value otherwise.
int parseNumThreads(std::string_view text);
// The thread count from STITCH_NUM_THREADS when set, else std::thread::hardware_concurrency()
// (1 when unknown). Throws like parseNumThreads on an invalid value.
int numThreadsFromEnv();

class ThreadPool {
 public:
  // Each thread takes about this many chunks of a large loop, for balance.
  static constexpr int64_t kChunksPerThread = 4;
  // How long an idle worker (or a caller waiting for its job's workers) spins before it sleeps,
  // unless STITCH_SPIN_US says otherwise. Longer than the host time between the kernels of a
  // program (about a microsecond) and the gap between small pieces in the PyTorch hook (a few
  // µs); short, because on a machine with more runnable threads than cores a spinning worker
  // takes a core from other work (and from its own caller): on this 2-core VM under load a
  // split kernel ran slower with spinning workers than with sleeping ones.
  static constexpr std::chrono::microseconds kSpinTime{20};

  // A pool of `threads` threads in all: the caller of parallelFor is one of them, so threads - 1
  // workers are started (none for 1). Idle threads spin for `spin` before they sleep (0: sleep
  // at once, as a pool without spinning; benchmarks compare the two). With `openMp`, a loop runs
  // as a parallel region of the process's OpenMP runtime instead when one is loaded (a team of
  // up to `threads`; openmp_team.h says why). Throws InvalidArgument when threads < 1 or
  // spin < 0.
  explicit ThreadPool(int threads, std::chrono::microseconds spin = kSpinTime, bool openMp = true);
  ~ThreadPool();  // joins the workers; no parallelFor may be running
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // How many chunks parallelFor cuts `units` into for this pool (0 for no units).
  int64_t chunkCount(int64_t units, int64_t grain) const;

  // Runs fn(begin, end) over disjoint chunks that cover [0, units) exactly once, on the workers
  // and the calling thread, and returns when all are done. Rethrows the first exception a chunk
  // threw. Small loops (units <= grain, or a 1-thread pool) run inline as fn(0, units). grain < 1
  // counts as 1.
  template <typename F>
  void parallelFor(int64_t units, int64_t grain, F&& fn) {
    if (units <= 0) return;
    if (grain < 1) grain = 1;
    if (units <= grain || workers_.empty()) {
      fn(int64_t{0}, units);
      return;
    }
    using Fn = std::remove_reference_t<F>;
    run(units, grain, const_cast<void*>(static_cast<const void*>(std::addressof(fn))),
        [](void* ctx, int64_t begin, int64_t end) { (*static_cast<Fn*>(ctx))(begin, end); });
  }

 private:
  using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end);

  struct Job {
    ChunkFn call = nullptr;
    void* ctx = nullptr;
    int64_t units = 0;
    int64_t chunks = 0;
    std::atomic<int64_t> next{0};     // the next chunk to claim
    std::atomic<bool> failed{false};  // a chunk threw: skip the chunks not yet started
    std::exception_ptr error;         // written once, by the thread that set `failed`
    // Workers that may still touch this job: changed only under the pool mutex, read without it
    // by the caller spinning for them to leave.
    std::atomic<int> users{0};
    // Guarded by the pool mutex:
    bool linked = false;   // still in the queue
    bool waiting = false;  // the caller blocks on doneCv_ until users is 0
    Job* nextJob = nullptr;
  };

  void run(int64_t units, int64_t grain, void* ctx, ChunkFn call);
  static void runChunks(Job& job);
  void unlink(Job* job);  // with mu_ held
  void workerLoop();

  std::vector<std::thread> workers_;
  const std::chrono::microseconds spin_;
  const bool openMp_;  // run loops on a loaded OpenMP runtime when there is one
  std::mutex mu_;
  std::condition_variable workCv_;  // workers: a job was queued, or stop
  std::condition_variable doneCv_;  // callers: a job lost its last user
  Job* head_ = nullptr;             // queue of jobs with chunks possibly left, oldest first
  Job* tail_ = nullptr;
  bool stop_ = false;
  int spinning_ = 0;  // workers spinning for a push (guarded by mu_)
  int sleeping_ = 0;  // workers waiting on workCv_ (guarded by mu_)
  // Bumped under mu_ whenever a job is queued or stop_ is set: what spinning workers watch.
  std::atomic<uint64_t> pushes_{0};
};

// The process-wide pool, sized by numThreadsFromEnv() and spinning spinFromEnv() when first used.
// Throws InvalidArgument on an invalid STITCH_NUM_THREADS or STITCH_SPIN_US (and tries again on
// the next call).
ThreadPool& sharedPool();

}  // namespace stitch::rt::cpu
