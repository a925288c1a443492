// parallelForEach and STITCH_COMPILE_THREADS (support/parallel.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/support/error.h"
#include "runtime/support/parallel.h"

using namespace stitch;

namespace {

TEST(ParallelForEach, RunsEveryIndexOnceAndWritesByIndex) {
  for (int threads : {1, 2, 3, 8}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{64}}) {
      std::vector<std::atomic<int>> hits(n);
      std::vector<size_t> out(n, 0);
      parallelForEach(n, threads, [&](size_t i) {
        hits[i].fetch_add(1);
        out[i] = i * i;
      });
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n << " i " << i;
        EXPECT_EQ(out[i], i * i);
      }
    }
  }
}

TEST(ParallelForEach, UsesAtMostTheThreadsAskedAndMoreThanOne) {
  std::mutex mu;
  std::set<std::thread::id> seen;
  std::atomic<int> running{0}, peak{0};
  parallelForEach(12, 3, [&](size_t) {
    int now = running.fetch_add(1) + 1;
    for (int p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      seen.insert(std::this_thread::get_id());
    }
    // Long enough that a second thread surely starts while the first item runs.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    running.fetch_sub(1);
  });
  EXPECT_LE(peak.load(), 3);
  EXPECT_GE(seen.size(), 2u);
  EXPECT_LE(seen.size(), 3u);
}

// The error reported is the lowest failing index's, and the items after it still ran: a caller
// sees the same error whatever order the threads finished in.
TEST(ParallelForEach, RethrowsTheLowestFailingIndexAfterRunningAll) {
  for (int threads : {1, 4}) {
    std::atomic<int> ran{0};
    try {
      parallelForEach(16, threads, [&](size_t i) {
        ran.fetch_add(1);
        // The later failure finishes first on the threaded runs.
        if (i == 3) {
          std::this_thread::sleep_for(std::chrono::milliseconds(30));
          throw std::runtime_error("item 3");
        }
        if (i == 11) throw std::runtime_error("item 11");
      });
      ADD_FAILURE() << "no exception with " << threads << " threads";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "item 3") << threads << " threads";
    }
    EXPECT_EQ(ran.load(), 16) << threads << " threads";
  }
}

TEST(CompileThreads, ParsesTheVariable) {
  EXPECT_EQ(parseCompileThreads("1"), 1);
  EXPECT_EQ(parseCompileThreads("16"), 16);
  EXPECT_EQ(parseCompileThreads("256"), 256);
  for (const char* bad : {"0", "-2", "257", "4x", "", " 3", "many"}) {
    try {
      parseCompileThreads(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(e.message().find("STITCH_COMPILE_THREADS"), std::string::npos) << e.message();
    }
  }
  ::setenv("STITCH_COMPILE_THREADS", "3", 1);
  EXPECT_EQ(compileThreads(), 3);
  ::unsetenv("STITCH_COMPILE_THREADS");
  EXPECT_GE(compileThreads(), 1);
  EXPECT_LE(compileThreads(), 8);
}

}  // namespace
