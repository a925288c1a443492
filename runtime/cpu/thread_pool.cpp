// The thread pool: job queue, workers and chunk claiming. The design note is in thread_pool.h.
#include "runtime/cpu/thread_pool.h"

#include <algorithm>
#include <charconv>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "runtime/cpu/openmp_team.h"
#include "runtime/support/env.h"
#include "runtime/support/error.h"
#include "runtime/support/logging.h"

namespace stitch::rt::cpu {

namespace {

// Tells the core this is a spin-wait loop: the sibling hyperthread gets the pipeline, and leaving
// the loop does not flush it for a memory-order mis-speculation.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Spins until done() holds or `limit` has passed; whether done() held. The clock is read every
// 64 pauses (a pause is tens of cycles), so the bound costs little and holds within a fraction
// of a microsecond.
template <typename Done>
bool spinUntil(std::chrono::microseconds limit, Done&& done) {
  if (limit.count() == 0) return done();
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace

int parseNumThreads(std::string_view text) {
  int64_t n = 0;
  const char* first = text.data();
  const char* last = first + text.size();
  auto [ptr, ec] = std::from_chars(first, last, n);
  bool ok = !text.empty() && ec == std::errc() && ptr == last && n >= 1 && n <= kMaxThreads;
  if (!ok)
    env::throwInvalid(kNumThreadsEnv, text, fmt::format("an integer from 1 to {}", kMaxThreads));
  return static_cast<int>(n);
}

int numThreadsFromEnv() {
  if (auto v = env::get(kNumThreadsEnv)) return parseNumThreads(*v);
  unsigned hw = std::thread::hardware_concurrency();  // 0 when unknown
  return static_cast<int>(std::clamp<unsigned>(hw, 1, kMaxThreads));
}

std::chrono::microseconds parseSpinMicros(std::string_view text) {
  int64_t n = 0;
  const char* first = text.data();
  const char* last = first + text.size();
  auto [ptr, ec] = std::from_chars(first, last, n);
  bool ok = !text.empty() && ec == std::errc() && ptr == last && n >= 0 && n <= kMaxSpinMicros;
  if (!ok)
    env::throwInvalid(kSpinEnv, text,
                      fmt::format("an integer from 0 to {} (microseconds)", kMaxSpinMicros));
  return std::chrono::microseconds(n);
}

std::chrono::microseconds spinFromEnv() {
  if (auto v = env::get(kSpinEnv)) return parseSpinMicros(*v);
  return ThreadPool::kSpinTime;
}

ThreadPool::ThreadPool(int threads, std::chrono::microseconds spin, bool openMp)
    : spin_(spin), openMp_(openMp) {
  STITCH_CHECK(threads >= 1 && threads <= kMaxThreads, ErrorCode::InvalidArgument,
               "a thread pool needs 1 to {} threads, not {}", kMaxThreads, threads);
  STITCH_CHECK(spin.count() >= 0, ErrorCode::InvalidArgument,
               "a thread pool's spin time cannot be negative ({} us)", spin.count());
  workers_.reserve(static_cast<size_t>(threads - 1));
  try {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
  } catch (...) {
    // std::thread failed (system_error): stop the workers already started, then report.
    {
      std::lock_guard lk(mu_);
      stop_ = true;
      pushes_.fetch_add(1, std::memory_order_release);
    }
    workCv_.notify_all();
    for (auto& t : workers_) t.join();
    throwError(ErrorCode::OutOfMemory,
               fmt::format("could not start {} worker threads", threads - 1));
  }
  log().debug("cpu thread pool: {} threads", threads);
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
    pushes_.fetch_add(1, std::memory_order_release);
  }
  workCv_.notify_all();
  for (auto& t : workers_) t.join();
}

int64_t ThreadPool::chunkCount(int64_t units, int64_t grain) const {
  if (units <= 0) return 0;
  grain = std::max<int64_t>(grain, 1);
  if (units <= grain || workers_.empty()) return 1;
  // units / grain chunks are each at least `grain` long; more than a few per thread only adds
  // claiming overhead.
  return std::clamp<int64_t>(units / grain, 1, kChunksPerThread * threads());
}

void ThreadPool::run(int64_t units, int64_t grain, void* ctx, ChunkFn call) {
  Job job;
  job.call = call;
  job.ctx = ctx;
  job.units = units;
  job.chunks = chunkCount(units, grain);
  if (const OpenMpRuntime* omp = openMp_ ? loadedOpenMp() : nullptr) {
    // A parallel region of the process's OpenMP runtime (openmp_team.h): its team claims the
    // chunks as the pool's workers would, the caller among them; it returns when all are done.
    omp->parallel([](void* j) { runChunks(*static_cast<Job*>(j)); }, &job,
                  openMpTeam(*omp, threads(), job.chunks), 0);
    if (job.error) std::rethrow_exception(job.error);
    return;
  }
  // Helpers wanted: one per chunk beyond the caller's first. Spinning workers see the push by
  // themselves; only the rest are woken, and only if they sleep.
  int64_t wake = 0;
  bool wakeAll = false;
  {
    std::lock_guard lk(mu_);
    job.linked = true;
    if (tail_) tail_->nextJob = &job;
    else head_ = &job;
    tail_ = &job;
    pushes_.fetch_add(1, std::memory_order_release);
    int64_t helpers = std::min<int64_t>(job.chunks - 1, static_cast<int64_t>(workers_.size()));
    wake = std::clamp<int64_t>(helpers - spinning_, 0, sleeping_);
    wakeAll = wake > 0 && wake == sleeping_;
  }
  if (wakeAll) {
    workCv_.notify_all();
  } else {
    for (int64_t i = 0; i < wake; ++i) workCv_.notify_one();
  }

  runChunks(job);

  bool busy;
  {
    std::lock_guard lk(mu_);
    if (job.linked) unlink(&job);
    // No worker can pick the job up any more; those still inside it (it is on our stack) leave
    // when their chunk ends.
    busy = job.users.load(std::memory_order_acquire) != 0;
  }
  if (busy && !spinUntil(spin_, [&] { return job.users.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock lk(mu_);
    job.waiting = true;
    doneCv_.wait(lk, [&] { return job.users.load(std::memory_order_acquire) == 0; });
  }
  if (job.error) std::rethrow_exception(job.error);
}

void ThreadPool::runChunks(Job& job) {
  // Chunk c is [c*q + min(c, r), ...): sizes differ by at most one, and nothing overflows.
  const int64_t q = job.units / job.chunks;
  const int64_t r = job.units % job.chunks;
  for (;;) {
    int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.chunks) return;
    if (job.failed.load(std::memory_order_relaxed)) continue;
    int64_t begin = c * q + std::min(c, r);
    int64_t end = begin + q + (c < r ? 1 : 0);
    try {
      job.call(job.ctx, begin, end);
    } catch (...) {
      if (!job.failed.exchange(true)) job.error = std::current_exception();
    }
  }
}

void ThreadPool::unlink(Job* job) {
  Job* prev = nullptr;
  for (Job* j = head_; j != nullptr; prev = j, j = j->nextJob) {
    if (j != job) continue;
    (prev ? prev->nextJob : head_) = j->nextJob;
    if (tail_ == j) tail_ = prev;
    break;
  }
  job->nextJob = nullptr;
  job->linked = false;
}

void ThreadPool::workerLoop() {
  std::unique_lock lk(mu_);
  for (;;) {
    if (head_ == nullptr && !stop_) {
      // Idle: spin for a push first (the note in thread_pool.h), then sleep.
      const uint64_t seen = pushes_.load(std::memory_order_acquire);
      ++spinning_;
      lk.unlock();
      const bool pushed =
          spinUntil(spin_, [&] { return pushes_.load(std::memory_order_acquire) != seen; });
      lk.lock();
      --spinning_;
      if (head_ == nullptr && !stop_) {
        if (pushed) continue;  // a job came and was already done by others: spin again
        ++sleeping_;
        workCv_.wait(lk, [&] { return stop_ || head_ != nullptr; });
        --sleeping_;
      }
    }
    if (head_ == nullptr) return;  // stopping, and nothing left to help with
    Job* job = head_;
    job->users.fetch_add(1, std::memory_order_relaxed);
    lk.unlock();
    runChunks(*job);
    lk.lock();
    // Every chunk is claimed: take the job out of the queue so no one else looks at it.
    if (job->linked) unlink(job);
    // Read before leaving: once users is 0 the caller may return and the job is gone.
    const bool callerBlocks = job->waiting;
    if (job->users.fetch_sub(1, std::memory_order_acq_rel) == 1 && callerBlocks)
      doneCv_.notify_all();
  }
}

ThreadPool& sharedPool() {
  // A function-local static: created on first use, and if the constructor throws (a bad
  // STITCH_NUM_THREADS or STITCH_SPIN_US) the next call tries again.
  static ThreadPool pool(numThreadsFromEnv(), spinFromEnv());
  return pool;
}

}  // namespace stitch::rt::cpu
