// The CPU executor without a code generator: the thread pool, the arena, slot planning, and
// runKernels over hand-written kernels (plain C++ functions with the KernelFn signature).
//
// This file replaces the global operator new to count heap allocations, so a test can check
// that a steady-state run allocates nothing (without timing anything). Not under AddressSanitizer,
// whose own operator new would then pair with our delete (alloc-dealloc-mismatch); there the
// tests check the arena's own allocation counter only.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/cpu/arena.h"
#include "runtime/cpu/executor.h"
#include "runtime/cpu/openmp_team.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/support/error.h"

// The sanitizers bring their own operator new: allocations are not counted under them.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STITCH_TEST_COUNTS_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STITCH_TEST_COUNTS_ALLOCATIONS 0
#endif
#endif
#ifndef STITCH_TEST_COUNTS_ALLOCATIONS
#define STITCH_TEST_COUNTS_ALLOCATIONS 1
#endif

namespace {
constexpr bool kCountsAllocations = STITCH_TEST_COUNTS_ALLOCATIONS;
std::atomic<int64_t> gAllocations{0};
}  // namespace

#if STITCH_TEST_COUNTS_ALLOCATIONS

void* operator new(std::size_t n) {
  gAllocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t al) {
  gAllocations.fetch_add(1, std::memory_order_relaxed);
  auto a = static_cast<std::size_t>(al);
  if (void* p = std::aligned_alloc(a, (std::max<std::size_t>(n, 1) + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
// Out of line: inlined into a new-expression's caller, free() after new trips GCC's
// -Wmismatched-new-delete although the pair matches (both are replaced here).
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
#endif

using namespace stitch::rt::cpu;
using stitch::ErrorCode;
using stitch::ir::DType;

namespace {

// Runs f and returns the stitch::Error it throws (failing the test if it throws none).
template <typename F>
stitch::Error errorOf(F&& f) {
  try {
    f();
  } catch (const stitch::Error& e) {
    return e;
  }
  ADD_FAILURE() << "no stitch::Error thrown";
  return stitch::Error(ErrorCode::Internal, "none");
}

// ---------------------------------------------------------------------------------------------
// Thread pool

TEST(ThreadPool, CoversEveryUnitExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int64_t units : {0, 1, 2, 3, 5, 7, 8, 16, 100, 1000, 12345}) {
      for (int64_t grain : {0, 1, 2, 3, 7, 64, 10000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(units));
        std::mutex mu;
        std::vector<std::pair<int64_t, int64_t>> chunks;
        pool.parallelFor(units, grain, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
          std::lock_guard lk(mu);
          chunks.emplace_back(begin, end);
        });
        SCOPED_TRACE("threads " + std::to_string(threads) + " units " + std::to_string(units) +
                     " grain " + std::to_string(grain));
        for (int64_t i = 0; i < units; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << i;
        EXPECT_EQ(static_cast<int64_t>(chunks.size()), pool.chunkCount(units, grain));
        EXPECT_LE(static_cast<int64_t>(chunks.size()), units);
        EXPECT_LE(static_cast<int64_t>(chunks.size()), ThreadPool::kChunksPerThread * threads);
        if (units > 0 && (units <= std::max<int64_t>(grain, 1) || threads == 1)) {
          // Small work runs inline, in one piece.
          ASSERT_EQ(chunks.size(), 1u);
          EXPECT_EQ(chunks[0], std::make_pair(int64_t{0}, units));
        }
        for (auto [begin, end] : chunks) {
          EXPECT_LT(begin, end);
          EXPECT_GE(end - begin, std::min(std::max<int64_t>(grain, 1), units));
        }
      }
    }
  }
}

TEST(ThreadPool, UsesTheWorkers) {
  ThreadPool pool(4);
  std::mutex mu;
  std::set<std::thread::id> ids;
  // Enough chunks, each slow enough, that the workers wake up before the caller is done.
  pool.parallelFor(16, 1, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::lock_guard lk(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_GT(ids.size(), 1u);
  EXPECT_LE(ids.size(), 4u);
}

// With an OpenMP runtime loaded (as PyTorch loads libgomp), loops run as its parallel regions
// (runtime/cpu/openmp_team.h): chunks see OpenMP thread numbers of a team of several, every unit
// runs once, exceptions and nested loops behave as on the pool's own threads; a pool made with
// openMp = false keeps its own threads. Skipped where libgomp is not installed, and under
// ThreadSanitizer (libgomp is not instrumented: its synchronization is invisible to TSan).
TEST(ThreadPool, RunsOnALoadedOpenMpRuntime) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "libgomp is not instrumented for ThreadSanitizer";
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  GTEST_SKIP() << "libgomp is not instrumented for ThreadSanitizer";
#endif
#endif
  void* gomp = ::dlopen("libgomp.so.1", RTLD_NOW | RTLD_LOCAL);
  if (gomp == nullptr) GTEST_SKIP() << "no libgomp.so.1: " << ::dlerror();
  auto threadNum = reinterpret_cast<int (*)()>(::dlsym(gomp, "omp_get_thread_num"));
  ASSERT_NE(threadNum, nullptr);
  // The search for a runtime runs at most every 50 ms.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (loadedOpenMp() == nullptr && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_NE(loadedOpenMp(), nullptr) << "libgomp is loaded but was not found";

  for (bool openMp : {true, false}) {
    ThreadPool pool(4, ThreadPool::kSpinTime, openMp);
    std::mutex mu;
    std::set<int> teamIds;
    std::set<std::thread::id> ids;
    std::vector<int> hits(16, 0);
    pool.parallelFor(16, 1, [&](int64_t begin, int64_t end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::lock_guard lk(mu);
      teamIds.insert(threadNum());
      ids.insert(std::this_thread::get_id());
      for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
    });
    EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 16) << openMp;
    EXPECT_GT(ids.size(), 1u) << openMp;
    if (openMp) {
      EXPECT_GT(teamIds.size(), 1u) << "the loop did not run as an OpenMP team";
    } else {
      EXPECT_EQ(teamIds, std::set<int>{0}) << "the pool's own threads are in no OpenMP team";
    }
    EXPECT_THROW(pool.parallelFor(1000, 1,
                                  [](int64_t begin, int64_t end) {
                                    if (begin <= 500 && 500 < end) throw std::runtime_error("500");
                                  }),
                 std::runtime_error);
    std::atomic<int64_t> total{0};
    pool.parallelFor(8, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        pool.parallelFor(100, 1, [&](int64_t b, int64_t e) { total += e - b; });
    });
    EXPECT_EQ(total.load(), 800) << openMp;
  }
  // The process asked OpenMP for one thread (torch.set_num_threads(1) does this): the loop runs
  // on the caller alone, not on a team of the pool's size.
  auto setThreads = reinterpret_cast<void (*)(int)>(::dlsym(gomp, "omp_set_num_threads"));
  auto maxThreads = reinterpret_cast<int (*)()>(::dlsym(gomp, "omp_get_max_threads"));
  ASSERT_NE(setThreads, nullptr);
  ASSERT_NE(maxThreads, nullptr);
  const int before = maxThreads();
  setThreads(1);
  ThreadPool pool(4);
  std::set<std::thread::id> ids;
  std::mutex mu;
  pool.parallelFor(16, 1, [&](int64_t, int64_t) {
    std::lock_guard lk(mu);
    ids.insert(std::this_thread::get_id());
  });
  setThreads(before);
  EXPECT_EQ(ids, std::set<std::thread::id>{std::this_thread::get_id()});
}

// An OpenMP team is at most the pool, the chunks and what the process asked OpenMP for.
TEST(ThreadPool, AnOpenMpTeamIsNoLargerThanOpenMpWasAskedFor) {
  OpenMpRuntime omp;
  EXPECT_EQ(openMpTeam(omp, 4, 16), 4u);  // a runtime without omp_get_max_threads
  EXPECT_EQ(openMpTeam(omp, 4, 2), 2u);
  EXPECT_EQ(openMpTeam(omp, 4, 0), 1u);
  omp.maxThreads = [] { return 1; };
  EXPECT_EQ(openMpTeam(omp, 4, 16), 1u);
  omp.maxThreads = [] { return 3; };
  EXPECT_EQ(openMpTeam(omp, 4, 16), 3u);
  EXPECT_EQ(openMpTeam(omp, 2, 16), 2u);
}

TEST(ThreadPool, ExceptionsReachTheCaller) {
  ThreadPool pool(4);
  std::atomic<int64_t> ran{0};
  EXPECT_THROW(pool.parallelFor(1000, 1,
                                [&](int64_t begin, int64_t end) {
                                  ran += end - begin;
                                  if (begin <= 500 && 500 < end)
                                    throw std::runtime_error("unit 500");
                                }),
               std::runtime_error);
  EXPECT_GT(ran.load(), 0);
  // A stitch::Error keeps its code, and inline (small) loops throw the same way.
  auto e = errorOf([&] {
    pool.parallelFor(1000, 1, [](int64_t, int64_t) {
      stitch::throwError(ErrorCode::Unsupported, "from a chunk");
    });
  });
  EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  EXPECT_THROW(pool.parallelFor(3, 10, [](int64_t, int64_t) { throw std::logic_error("x"); }),
               std::logic_error);
  // The pool is still fine afterwards.
  std::atomic<int64_t> sum{0};
  pool.parallelFor(1000, 1, [&](int64_t begin, int64_t end) { sum += end - begin; });
  EXPECT_EQ(sum.load(), 1000);
}

TEST(ThreadPool, ConcurrentCallersFromFourThreads) {
  ThreadPool pool(3);
  constexpr int kCallers = 4, kRounds = 200;
  std::vector<int64_t> wrong(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int r = 0; r < kRounds; ++r) {
        int64_t units = 1 + (r * 37 + c * 11) % 5000;
        std::vector<int> hits(static_cast<size_t>(units), 0);  // disjoint chunks: no atomics needed
        pool.parallelFor(units, 1 + r % 5, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
        });
        wrong[static_cast<size_t>(c)] +=
            std::count_if(hits.begin(), hits.end(), [](int h) { return h != 1; });
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) EXPECT_EQ(wrong[static_cast<size_t>(c)], 0) << c;
}

TEST(ThreadPool, NestedParallelForDoesNotDeadlock) {
  ThreadPool pool(4);
  std::atomic<int64_t> total{0};
  pool.parallelFor(8, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      pool.parallelFor(100, 1, [&](int64_t b, int64_t e) { total += e - b; });
  });
  EXPECT_EQ(total.load(), 800);
}

TEST(ThreadPool, SmallLoopsRunEntirelyOnTheCallingThread) {
  // A loop of at most one grain, or any loop on a one-thread pool, is one call on the caller:
  // the workers are not woken, so no other thread ever runs a chunk.
  ThreadPool pool(4);
  ThreadPool alone(1);
  const std::thread::id me = std::this_thread::get_id();
  for (auto [p, units, grain] :
       {std::tuple{&pool, int64_t{1}, int64_t{1}}, std::tuple{&pool, int64_t{16}, int64_t{16}},
        std::tuple{&pool, int64_t{5}, int64_t{1000}},
        std::tuple{&alone, int64_t{100000}, int64_t{1}}}) {
    for (int round = 0; round < 200; ++round) {
      std::vector<std::thread::id> ids;
      std::vector<std::pair<int64_t, int64_t>> chunks;
      p->parallelFor(units, grain, [&](int64_t begin, int64_t end) {
        ids.push_back(std::this_thread::get_id());  // unsynchronized: must be one thread
        chunks.emplace_back(begin, end);
      });
      ASSERT_EQ(ids.size(), 1u) << units << " " << grain;
      EXPECT_EQ(ids[0], me);
      EXPECT_EQ(chunks[0], std::make_pair(int64_t{0}, units));
    }
  }
}

TEST(ThreadPool, SpinningWorkersStillSleepAndWake) {
  // After a job the workers spin, then sleep; a later job that needs them must wake them, for a
  // pool with the default spin and for one that sleeps at once.
  for (auto spin : {ThreadPool::kSpinTime, std::chrono::microseconds(0)}) {
    ThreadPool pool(4, spin);
    for (int round = 0; round < 3; ++round) {
      std::this_thread::sleep_for(spin * 20 + std::chrono::milliseconds(2));  // all asleep
      std::mutex mu;
      std::set<std::thread::id> ids;
      pool.parallelFor(16, 1, [&](int64_t, int64_t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        std::lock_guard lk(mu);
        ids.insert(std::this_thread::get_id());
      });
      EXPECT_GT(ids.size(), 1u) << "spin " << spin.count() << " round " << round;
    }
  }
  EXPECT_EQ(errorOf([] { ThreadPool p(2, std::chrono::microseconds(-1)); }).code(),
            ErrorCode::InvalidArgument);
}

TEST(ThreadPool, ManyShortJobsBackToBackFromSeveralThreads) {
  // Jobs of a few tiny chunks, issued as fast as callers can: workers pick them up while spinning
  // (no wake), leave them, and callers spin for their last users. Every unit runs exactly once,
  // an exception reaches its own caller only, and nothing deadlocks.
  for (auto spin : {ThreadPool::kSpinTime, std::chrono::microseconds(0)}) {
    ThreadPool pool(3, spin);
    constexpr int kCallers = 4, kJobs = 3000;
    std::vector<int64_t> wrong(kCallers, 0), caught(kCallers, 0);
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
      callers.emplace_back([&, c] {
        std::vector<int> hits;
        for (int j = 0; j < kJobs; ++j) {
          const int64_t units = 2 + (j * 7 + c) % 9;
          hits.assign(static_cast<size_t>(units), 0);
          const bool fails = j % 97 == c;
          try {
            pool.parallelFor(units, 1, [&](int64_t begin, int64_t end) {
              for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
              if (fails && begin == 0) throw std::runtime_error("job fails");
            });
          } catch (const std::runtime_error&) {
            ++caught[static_cast<size_t>(c)];
            continue;  // skipped chunks leave units unhit: nothing to count
          }
          wrong[static_cast<size_t>(c)] +=
              std::count_if(hits.begin(), hits.end(), [](int h) { return h != 1; });
        }
      });
    }
    for (auto& t : callers) t.join();
    for (int c = 0; c < kCallers; ++c) {
      EXPECT_EQ(wrong[static_cast<size_t>(c)], 0) << "caller " << c << " spin " << spin.count();
      int expected = 0;
      for (int j = 0; j < kJobs; ++j) expected += j % 97 == c;
      EXPECT_EQ(caught[static_cast<size_t>(c)], expected) << "caller " << c;
    }
  }
}

TEST(ThreadPool, NumThreadsParsing) {
  EXPECT_EQ(parseNumThreads("1"), 1);
  EXPECT_EQ(parseNumThreads("16"), 16);
  EXPECT_EQ(parseNumThreads("4096"), kMaxThreads);
  for (const char* bad :
       {"0", "-2", "abc", "4x", " 4", "4 ", "+4", "1.5", "4097", "99999999999999999999999"}) {
    auto e = errorOf([&] { parseNumThreads(bad); });
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << bad;
    EXPECT_NE(e.message().find("STITCH_NUM_THREADS"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(std::string("=") + bad), std::string::npos) << e.message();
  }
  EXPECT_EQ(errorOf([] { ThreadPool p(0); }).code(), ErrorCode::InvalidArgument);
}

TEST(ThreadPool, SpinFromEnvironment) {
  using std::chrono::microseconds;
  EXPECT_EQ(parseSpinMicros("0"), microseconds(0));
  EXPECT_EQ(parseSpinMicros("20"), microseconds(20));
  EXPECT_EQ(parseSpinMicros("100000"), microseconds(kMaxSpinMicros));
  for (const char* bad : {"", "-1", "abc", "5us", " 5", "1.5", "100001"}) {
    auto e = errorOf([&] { parseSpinMicros(bad); });
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << bad;
    EXPECT_NE(e.message().find(std::string("STITCH_SPIN_US=") + bad), std::string::npos)
        << e.message();
  }
  const char* saved = std::getenv(kSpinEnv);
  std::string keep = saved ? saved : "";
  setenv(kSpinEnv, "7", 1);
  EXPECT_EQ(spinFromEnv(), microseconds(7));
  setenv(kSpinEnv, "never", 1);
  EXPECT_EQ(errorOf([] { spinFromEnv(); }).code(), ErrorCode::InvalidArgument);
  unsetenv(kSpinEnv);
  EXPECT_EQ(spinFromEnv(), ThreadPool::kSpinTime);
  if (saved) setenv(kSpinEnv, keep.c_str(), 1);
}

TEST(ThreadPool, NumThreadsFromEnvironment) {
  const char* saved = std::getenv(kNumThreadsEnv);
  std::string keep = saved ? saved : "";
  setenv(kNumThreadsEnv, "3", 1);
  EXPECT_EQ(numThreadsFromEnv(), 3);
  setenv(kNumThreadsEnv, "zero", 1);
  auto e = errorOf([] { numThreadsFromEnv(); });
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(e.message().find("STITCH_NUM_THREADS=zero"), std::string::npos) << e.message();
  setenv(kNumThreadsEnv, "0", 1);
  EXPECT_THROW(numThreadsFromEnv(), stitch::Error);
  unsetenv(kNumThreadsEnv);
  EXPECT_GE(numThreadsFromEnv(), 1);  // hardware_concurrency
  if (saved) setenv(kNumThreadsEnv, keep.c_str(), 1);
}

// ---------------------------------------------------------------------------------------------
// Arena

bool aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(Arena, SlotsAreAlignedAndDisjoint) {
  Arena arena;
  std::vector<int64_t> sizes = {1, 3, 100, 0, 64, 65, 4096};
  arena.prepare(sizes);
  ASSERT_EQ(arena.numSlots(), static_cast<int>(sizes.size()));
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  for (int i = 0; i < arena.numSlots(); ++i) {
    void* p = arena.slot(i);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned64(p)) << i;
    auto a = reinterpret_cast<uintptr_t>(p);
    ranges.emplace_back(a, a + static_cast<uintptr_t>(std::max<int64_t>(sizes[i], 1)));
    std::memset(p, 0xab, static_cast<size_t>(sizes[static_cast<size_t>(i)]));  // writable
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first);
  EXPECT_EQ(errorOf([&] { arena.slot(7); }).code(), ErrorCode::Internal);
  std::vector<int64_t> negative = {-1};
  EXPECT_EQ(errorOf([&] { arena.prepare(negative); }).code(), ErrorCode::InvalidArgument);
}

TEST(Arena, ReusesItsMemoryAndGrowsWhenNeeded) {
  Arena arena;
  std::vector<int64_t> sizes = {1000, 2000, 300};
  arena.prepare(sizes);
  EXPECT_EQ(arena.allocations(), 1);
  std::vector<void*> first;
  for (int i = 0; i < arena.numSlots(); ++i) first.push_back(arena.slot(i));

  int64_t before = gAllocations.load();
  arena.prepare(sizes);
  if (kCountsAllocations) {
    EXPECT_EQ(gAllocations.load(), before);  // no heap allocation at all
  }
  EXPECT_EQ(arena.allocations(), 1);
  for (int i = 0; i < arena.numSlots(); ++i)
    EXPECT_EQ(arena.slot(i), first[static_cast<size_t>(i)]);

  // Smaller needs fit in the same memory.
  std::vector<int64_t> smaller = {10, 20};
  arena.prepare(smaller);
  EXPECT_EQ(arena.allocations(), 1);
  EXPECT_EQ(arena.slot(0), first[0]);

  // A bigger signature grows it once, and the new size is then steady.
  std::vector<int64_t> bigger = {1 << 20, 3 << 20, 5};
  arena.prepare(bigger);
  EXPECT_EQ(arena.allocations(), 2);
  EXPECT_GE(arena.capacity(), size_t{(1 << 20) + (3 << 20) + 64});
  void* p0 = arena.slot(0);
  arena.prepare(bigger);
  arena.prepare(sizes);
  EXPECT_EQ(arena.allocations(), 2);
  EXPECT_EQ(arena.slot(0), p0);
  for (int i = 0; i < arena.numSlots(); ++i) EXPECT_TRUE(aligned64(arena.slot(i)));
}

TEST(ArenaPool, ConcurrentRunsGetTheirOwnArena) {
  ArenaPool pool;
  constexpr int kThreads = 6, kRounds = 300;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int64_t> sizes = {int64_t{64} * (1 + t), 256};
      for (int r = 0; r < kRounds; ++r) {
        auto lease = pool.acquire();
        lease->prepare(sizes);
        auto* p = static_cast<int*>(lease->slot(1));
        std::fill(p, p + 64, t);
        std::this_thread::yield();
        if (std::any_of(p, p + 64, [&](int v) { return v != t; })) failures++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(pool.created(), 1);
  EXPECT_LE(pool.created(), kThreads);

  // One caller at a time reuses one arena.
  ArenaPool serial;
  Arena* a = nullptr;
  {
    auto lease = serial.acquire();
    a = lease.get();
  }
  auto again = serial.acquire();
  EXPECT_EQ(again.get(), a);
  EXPECT_EQ(serial.created(), 1);
  again.reset();
  auto moved = serial.acquire();
  ArenaPool::Lease other = std::move(moved);
  EXPECT_EQ(other.get(), a);
  EXPECT_EQ(moved.get(), nullptr);

  // Two overlapping runs, again and again: the arenas come back (one to the lock-free slot, one
  // to the list) and are reused, never a third made; with none leased both are idle and distinct.
  ArenaPool pair;
  std::set<Arena*> seen;
  for (int r = 0; r < 100; ++r) {
    auto x = pair.acquire();
    auto y = pair.acquire();
    EXPECT_NE(x.get(), y.get());
    seen.insert(x.get());
    seen.insert(y.get());
  }
  EXPECT_EQ(pair.created(), 2);
  EXPECT_EQ(seen.size(), 2u);
}

// ---------------------------------------------------------------------------------------------
// Slot planning

KernelBuffer val(int id, int64_t elements, DType t = DType::F32) {
  KernelBuffer b;
  b.value = id;
  b.dtype = t;
  b.elements = elements;
  return b;
}
KernelBuffer scratch(int index, int64_t elements, DType t = DType::F32) {
  KernelBuffer b;
  b.scratch = index;
  b.dtype = t;
  b.elements = elements;
  return b;
}
CompiledKernel kernel(std::vector<KernelBuffer> in, std::vector<KernelBuffer> out) {
  CompiledKernel k;
  k.inputs = std::move(in);
  k.outputs = std::move(out);
  return k;
}

// Checks a plan against its kernels: every arena resident has a big enough slot, and two
// residents whose live ranges share a kernel never share a slot.
void checkPlan(const std::vector<CompiledKernel>& kernels, const std::vector<int>& external,
               const SlotPlan& plan) {
  struct Range {
    int slot, first = -1, last = -1;
    int64_t bytes = 0;
  };
  std::vector<Range> ranges;
  auto rangeOf = [&](const KernelBuffer& b) -> Range* {
    int slot;
    if (b.value >= 0) {
      if (std::find(external.begin(), external.end(), b.value) != external.end()) return nullptr;
      slot = plan.valueSlot.at(static_cast<size_t>(b.value));
    } else {
      slot = plan.scratchSlot.at(static_cast<size_t>(b.scratch));
    }
    EXPECT_GE(slot, 0);
    size_t key =
        b.value >= 0 ? static_cast<size_t>(b.value) : 100000 + static_cast<size_t>(b.scratch);
    if (ranges.size() <= key) ranges.resize(key + 1, Range{-1});
    ranges[key].slot = slot;
    return &ranges[key];
  };
  for (int k = 0; k < static_cast<int>(kernels.size()); ++k) {
    const auto& kk = kernels[static_cast<size_t>(k)];
    for (const auto* list : {&kk.inputs, &kk.outputs}) {
      for (const auto& b : *list) {
        Range* r = rangeOf(b);
        if (!r) continue;
        if (r->first < 0) r->first = k;
        r->last = k;
        r->bytes = std::max(r->bytes, b.elements * stitch::ir::dtypeBytes(b.dtype));
      }
    }
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].first < 0) continue;
    EXPECT_GE(plan.slotBytes.at(static_cast<size_t>(ranges[i].slot)), ranges[i].bytes);
    for (size_t j = i + 1; j < ranges.size(); ++j) {
      if (ranges[j].first < 0) continue;
      bool overlap = ranges[i].first <= ranges[j].last && ranges[j].first <= ranges[i].last;
      if (overlap) {
        EXPECT_NE(ranges[i].slot, ranges[j].slot) << "residents " << i << ", " << j;
      }
    }
  }
}

TEST(AssignSlots, ReusesSlotsAlongAChain) {
  // 0 -> k0 -> 1 -> k1 -> 2 -> k2 -> 3 -> k3 -> 4; values 0 and 4 are the caller's.
  std::vector<CompiledKernel> ks;
  for (int v = 0; v < 4; ++v) ks.push_back(kernel({val(v, 256)}, {val(v + 1, 256)}));
  std::vector<int> external = {0, 4};
  SlotPlan plan = assignSlots(ks, external);
  checkPlan(ks, external, plan);
  EXPECT_EQ(plan.valueSlot[0], -1);
  EXPECT_EQ(plan.valueSlot[4], -1);
  // Two slots ping-pong: value 3 takes value 1's slot once kernel 1 has read it.
  EXPECT_EQ(plan.slotBytes.size(), 2u);
  EXPECT_EQ(plan.valueSlot[3], plan.valueSlot[1]);
  EXPECT_NE(plan.valueSlot[2], plan.valueSlot[1]);
  EXPECT_EQ(plan.totalBytes(), 2 * 256 * 4);
}

TEST(AssignSlots, ScratchAndMixedSizes) {
  // Phase kernels hand a scratch buffer over; an f64 value needs twice the bytes of its f32 peer.
  std::vector<CompiledKernel> ks = {
      kernel({val(0, 1000)}, {val(1, 1000), scratch(0, 16)}),
      kernel({scratch(0, 16)}, {val(2, 1)}),
      kernel({val(1, 1000), val(2, 1)}, {val(3, 1000, DType::F64)}),
      kernel({val(3, 1000, DType::F64)}, {val(5, 10, DType::I32), scratch(1, 8)}),
      kernel({scratch(1, 8), val(5, 10, DType::I32)}, {val(6, 10)}),
  };
  std::vector<int> external = {0, 6};
  SlotPlan plan = assignSlots(ks, external);
  checkPlan(ks, external, plan);
  EXPECT_EQ(plan.scratchSlot.size(), 2u);
  EXPECT_EQ(plan.valueSlot[4], -1);      // never used
  EXPECT_LT(plan.slotBytes.size(), 6u);  // some reuse happened
}

TEST(AssignSlots, RandomSequencesNeverOverlapLiveValues) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    int numInputs = 1 + static_cast<int>(rng() % 3);
    int next = numInputs;
    std::vector<int> written;
    for (int i = 0; i < numInputs; ++i) written.push_back(i);
    std::vector<int64_t> sizeOf(64);
    for (auto& s : sizeOf) s = 1 + static_cast<int64_t>(rng() % 5000);
    std::vector<CompiledKernel> ks;
    int numKernels = 1 + static_cast<int>(rng() % 10);
    for (int k = 0; k < numKernels; ++k) {
      std::vector<KernelBuffer> in, out;
      int reads = 1 + static_cast<int>(rng() % 3);
      for (int r = 0; r < reads; ++r) {
        int v = written[rng() % written.size()];
        in.push_back(val(v, sizeOf[static_cast<size_t>(v)]));
      }
      int writes = 1 + static_cast<int>(rng() % 2);
      for (int w = 0; w < writes && next < 64; ++w) {
        out.push_back(val(next, sizeOf[static_cast<size_t>(next)]));
        written.push_back(next++);
      }
      ks.push_back(kernel(std::move(in), std::move(out)));
    }
    std::vector<int> external;
    for (int i = 0; i < numInputs; ++i) external.push_back(i);
    external.push_back(next - 1);  // the last value is a graph output
    SlotPlan plan = assignSlots(ks, external);
    SCOPED_TRACE(trial);
    checkPlan(ks, external, plan);
  }
}

TEST(AssignSlots, ReadingAValueNoKernelWroteIsAnInternalError) {
  std::vector<CompiledKernel> ks = {kernel({val(1, 4)}, {val(2, 4)})};
  std::vector<int> external = {2};
  EXPECT_EQ(errorOf([&] { assignSlots(ks, external); }).code(), ErrorCode::Internal);
}

// ---------------------------------------------------------------------------------------------
// runKernels with hand-written kernels

constexpr int64_t kRows = 37, kCols = 129;
constexpr int64_t kBlocks = 5;  // partial sums of the grand total

// out = a + b, elementwise over units = elements.
void addKernel(void* const* buffers, int64_t begin, int64_t end) {
  auto* a = static_cast<const float*>(buffers[0]);
  auto* b = static_cast<const float*>(buffers[1]);
  auto* out = static_cast<float*>(buffers[2]);
  for (int64_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
}
// out[r] = sum over a row of in; units = rows.
void rowSumKernel(void* const* buffers, int64_t begin, int64_t end) {
  auto* in = static_cast<const float*>(buffers[0]);
  auto* out = static_cast<float*>(buffers[1]);
  for (int64_t r = begin; r < end; ++r) {
    float s = 0;
    for (int64_t c = 0; c < kCols; ++c) s += in[r * kCols + c];
    out[r] = s;
  }
}
// A two-phase total of the row sums: phase 1 writes kBlocks partials to scratch, phase 2 sums them.
void partialKernel(void* const* buffers, int64_t begin, int64_t end) {
  auto* in = static_cast<const float*>(buffers[0]);
  auto* partial = static_cast<double*>(buffers[1]);
  for (int64_t blk = begin; blk < end; ++blk) {
    double s = 0;
    for (int64_t r = blk * kRows / kBlocks; r < (blk + 1) * kRows / kBlocks; ++r) s += in[r];
    partial[blk] = s;
  }
}
void totalKernel(void* const* buffers, int64_t begin, int64_t end) {
  auto* partial = static_cast<const double*>(buffers[0]);
  auto* total = static_cast<double*>(buffers[1]);
  for (int64_t u = begin; u < end; ++u) {
    double s = 0;
    for (int64_t b = 0; b < kBlocks; ++b) s += partial[b];
    total[u] = s;
  }
}

// x(0), y(1) inputs [rows, cols]; t(2) = x + y (intermediate); s(3) = rowsum(t) (graph output);
// total(4) = sum(s) via scratch 0 (graph output, reading the output s).
std::vector<CompiledKernel> program() {
  std::vector<CompiledKernel> ks(4);
  ks[0].fn = addKernel;
  ks[0].units = kRows * kCols;
  ks[0].grain = 64;
  ks[0].inputs = {val(0, kRows * kCols), val(1, kRows * kCols)};
  ks[0].outputs = {val(2, kRows * kCols)};
  ks[1].fn = rowSumKernel;
  ks[1].units = kRows;
  ks[1].grain = 2;
  ks[1].inputs = {val(2, kRows * kCols)};
  ks[1].outputs = {val(3, kRows)};
  ks[2].fn = partialKernel;
  ks[2].units = kBlocks;
  ks[2].inputs = {val(3, kRows)};
  ks[2].outputs = {scratch(0, kBlocks, DType::F64)};
  ks[3].fn = totalKernel;
  ks[3].units = 1;
  ks[3].inputs = {scratch(0, kBlocks, DType::F64)};
  ks[3].outputs = {val(4, 1, DType::F64)};
  return ks;
}

struct Tensors {
  std::vector<float> x, y, s;
  double total = 0;
  Tensors() : x(kRows * kCols), y(kRows * kCols), s(kRows, -1) {
    for (int64_t i = 0; i < kRows * kCols; ++i) {
      x[static_cast<size_t>(i)] = static_cast<float>(i % 17) * 0.25f;
      y[static_cast<size_t>(i)] = static_cast<float>(i % 5) - 2.0f;
    }
  }
  void bind(ValueBuffers& vb) {
    vb.clear();
    vb.bind(0, x.data());
    vb.bind(1, y.data());
    vb.bind(3, s.data());
    vb.bind(4, &total);
  }
};

void expectRightAnswer(const Tensors& t) {
  double total = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    float s = 0;
    for (int64_t c = 0; c < kCols; ++c) {
      size_t i = static_cast<size_t>(r * kCols + c);
      s += t.x[i] + t.y[i];
    }
    EXPECT_EQ(t.s[static_cast<size_t>(r)], s) << "row " << r;  // same order: bit exact
    total += s;
  }
  EXPECT_DOUBLE_EQ(t.total, total);
}

TEST(RunKernels, AddThenRowSumThroughScratch) {
  auto ks = program();
  std::vector<int> external = {0, 1, 3, 4};
  SlotPlan plan = assignSlots(ks, external);
  EXPECT_GE(plan.valueSlot[2], 0);
  EXPECT_GE(plan.scratchSlot[0], 0);
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    Arena arena;
    ValueBuffers vb;
    Tensors t;
    t.bind(vb);
    runKernels(ks, plan, vb, arena, pool);
    SCOPED_TRACE(threads);
    expectRightAnswer(t);
  }
}

TEST(RunKernels, SteadyStateRunsDoNotAllocate) {
  auto ks = program();
  std::vector<int> external = {0, 1, 3, 4};
  SlotPlan plan = assignSlots(ks, external);
  ThreadPool pool(3);
  ArenaPool arenas;
  ValueBuffers vb;
  Tensors t;

  std::vector<void*> slots;
  {
    auto lease = arenas.acquire();
    t.bind(vb);
    runKernels(ks, plan, vb, *lease, pool);  // first run: the arena and vb grow
    for (int i = 0; i < lease->numSlots(); ++i) slots.push_back(lease->slot(i));
  }
  if (kCountsAllocations) {
    // The counter does see allocations, so the zero below means something.
    int64_t start = gAllocations.load();
    // Through a volatile pointer, so the compiler cannot elide the allocation.
    void* (*volatile allocate)(std::size_t) = ::operator new;
    void (*volatile release)(void*) noexcept = ::operator delete;
    release(allocate(16));
    EXPECT_GT(gAllocations.load(), start);
  }
  int64_t before = gAllocations.load();
  for (int run = 0; run < 20; ++run) {
    auto lease = arenas.acquire();
    t.bind(vb);
    runKernels(ks, plan, vb, *lease, pool);
  }
  int64_t allocated = gAllocations.load() - before;
  if (kCountsAllocations) {
    EXPECT_EQ(allocated, 0);
  }
  auto lease = arenas.acquire();
  EXPECT_EQ(lease->allocations(), 1);
  for (int i = 0; i < lease->numSlots(); ++i)
    EXPECT_EQ(lease->slot(i), slots[static_cast<size_t>(i)]);
  expectRightAnswer(t);
}

TEST(RunKernels, ConcurrentRunsOfOneProgram) {
  auto ks = program();
  std::vector<int> external = {0, 1, 3, 4};
  SlotPlan plan = assignSlots(ks, external);
  ThreadPool pool(3);
  ArenaPool arenas;
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      ValueBuffers vb;
      for (int r = 0; r < 50; ++r) {
        Tensors t;
        t.bind(vb);
        auto lease = arenas.acquire();
        runKernels(ks, plan, vb, *lease, pool);
        expectRightAnswer(t);
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_LE(arenas.created(), 4);
}

TEST(RunKernels, MissingBuffersAndCodeAreInternalErrors) {
  auto ks = program();
  std::vector<int> external = {0, 1, 3, 4};
  SlotPlan plan = assignSlots(ks, external);
  ThreadPool pool(2);
  Arena arena;
  ValueBuffers vb;
  Tensors t;
  t.bind(vb);
  vb.bind(1, nullptr);  // y unbound
  auto e = errorOf([&] { runKernels(ks, plan, vb, arena, pool); });
  EXPECT_EQ(e.code(), ErrorCode::Internal);
  EXPECT_NE(e.message().find("value 1"), std::string::npos) << e.message();

  t.bind(vb);
  ks[2].fn = nullptr;
  EXPECT_EQ(errorOf([&] { runKernels(ks, plan, vb, arena, pool); }).code(), ErrorCode::Internal);
}

TEST(RunKernels, SmallKernelsRunInlineByTheBytesTheyMove) {
  // kernelBytes counts every buffer's elements at its dtype's size, inputs and outputs.
  CompiledKernel k;
  k.inputs = {val(0, 4096), val(1, 4096, DType::F16)};
  k.outputs = {val(2, 4096)};
  EXPECT_EQ(kernelBytes(k), 4096 * (4 + 2 + 4));
  EXPECT_TRUE(runsInline(k));  // 40 KiB
  k.inputs.push_back(val(3, 4096, DType::F64));
  EXPECT_EQ(kernelBytes(k), 4096 * (4 + 2 + 4 + 8));
  EXPECT_FALSE(runsInline(k));  // 72 KiB
  // At the threshold exactly: inline; one element more: not.
  CompiledKernel edge;
  edge.inputs = {val(0, kInlineBytes / 8)};
  edge.outputs = {val(1, kInlineBytes / 8)};
  EXPECT_TRUE(runsInline(edge));
  edge.outputs[0].elements += 1;
  EXPECT_FALSE(runsInline(edge));
  // Saturates rather than overflowing.
  CompiledKernel huge;
  huge.inputs = {val(0, INT64_MAX / 2, DType::F64)};
  EXPECT_EQ(kernelBytes(huge), INT64_MAX);
  EXPECT_FALSE(runsInline(huge));
}

// Which threads ran a kernel, and the ranges they ran.
std::mutex gSerialMu;
std::vector<std::pair<std::thread::id, std::pair<int64_t, int64_t>>> gSerialCalls;
void recordingKernel(void* const*, int64_t begin, int64_t end) {
  std::lock_guard lk(gSerialMu);
  gSerialCalls.push_back({std::this_thread::get_id(), {begin, end}});
}

TEST(RunKernels, SerialKernelsRunOnTheCallingThreadInOneCall) {
  CompiledKernel k;
  k.fn = recordingKernel;
  k.units = 1000;
  k.grain = 1;  // would be split 16 ways on the pool
  std::vector<CompiledKernel> ks = {k, k};
  ks[1].serial = true;
  SlotPlan plan = assignSlots(ks, {});
  ThreadPool pool(4);
  Arena arena;
  ValueBuffers vb;
  gSerialCalls.clear();
  runKernels(std::span(ks).subspan(1), plan, vb, arena, pool);
  ASSERT_EQ(gSerialCalls.size(), 1u);
  EXPECT_EQ(gSerialCalls[0].first, std::this_thread::get_id());
  EXPECT_EQ(gSerialCalls[0].second, std::make_pair(int64_t{0}, int64_t{1000}));
  // The same kernel not marked serial is split (the mark is what decides).
  gSerialCalls.clear();
  runKernels(std::span(ks).first(1), plan, vb, arena, pool);
  EXPECT_EQ(static_cast<int64_t>(gSerialCalls.size()), pool.chunkCount(1000, 1));
  // A serial kernel with no units is not called, as parallelFor does not call one.
  gSerialCalls.clear();
  ks[1].units = 0;
  runKernels(std::span(ks).subspan(1), plan, vb, arena, pool);
  EXPECT_TRUE(gSerialCalls.empty());
}

TEST(RunKernels, KernelExceptionsPropagate) {
  CompiledKernel k;
  k.fn = [](void* const*, int64_t begin, int64_t) {
    if (begin > 0) stitch::throwError(ErrorCode::Unsupported, "kernel failed");
  };
  k.units = 1000;
  k.inputs = {};
  k.outputs = {};
  std::vector<CompiledKernel> ks = {k};
  SlotPlan plan = assignSlots(ks, {});
  ThreadPool pool(4);
  Arena arena;
  ValueBuffers vb;
  EXPECT_EQ(errorOf([&] { runKernels(ks, plan, vb, arena, pool); }).code(), ErrorCode::Unsupported);
}

}  // namespace
