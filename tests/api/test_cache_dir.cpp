// The kernel cache's directory through the C API (stitch.h, "The kernel cache's directory"):
// which directory the environment names, stats, prune and clear on files written by hand from
// the documented format, and the failures (no directory, STITCH_CACHE=0, a bad limit).
#include <gtest/gtest.h>
#include <stitch/stitch.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "api/api_test_helpers.h"
#include "common/cache_entry.h"
#include "common/env_guard.h"
#include "common/temp_dir.h"
#include "common/unwritable_dir.h"

namespace fs = std::filesystem;
using stitch::apitest::lastError;
using stitch::testing::TempDir;

namespace {

using stitch::testing::EnvGuard;

std::string cacheDirPath() {
  size_t n = 0;
  if (stitch_cache_dir_path(nullptr, 0, &n) != STITCH_OK) return "<error: " + lastError() + ">";
  std::string s(n + 1, '\0');
  EXPECT_EQ(stitch_cache_dir_path(&s[0], s.size(), &n), STITCH_OK);
  s.resize(n);
  return s;
}

TEST(ApiCacheDir, PathIsTheDirectoryTheEnvironmentNames) {
  EnvGuard on("STITCH_CACHE", nullptr);
  EnvGuard a("STITCH_CACHE_DIR", "/somewhere/stitch-cache");
  EnvGuard b("XDG_CACHE_HOME", "/xdg");
  EnvGuard c("HOME", "/home/u");
  EXPECT_EQ(cacheDirPath(), "/somewhere/stitch-cache");
  // Truncated to the capacity, NUL-terminated; *needed is the full length.
  char small[5];
  size_t needed = 0;
  ASSERT_EQ(stitch_cache_dir_path(small, sizeof small, &needed), STITCH_OK);
  EXPECT_STREQ(small, "/som");
  EXPECT_EQ(needed, std::string("/somewhere/stitch-cache").size());
  EXPECT_EQ(stitch_cache_dir_path(nullptr, 4, &needed), STITCH_ERROR_INVALID_ARGUMENT);
  {
    EnvGuard unset("STITCH_CACHE_DIR", nullptr);
    EXPECT_EQ(cacheDirPath(), "/xdg/stitch");
    EnvGuard noXdg("XDG_CACHE_HOME", nullptr);
    EXPECT_EQ(cacheDirPath(), "/home/u/.cache/stitch");
    EnvGuard noHome("HOME", nullptr);
    EXPECT_EQ(stitch_cache_dir_path(nullptr, 0, &needed), STITCH_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(lastError().find("STITCH_CACHE_DIR"), std::string::npos) << lastError();
  }
  EnvGuard off("STITCH_CACHE", "0");
  stitch_cache_dir_stats_t s{};
  EXPECT_EQ(stitch_cache_dir_stats(&s), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("STITCH_CACHE=0"), std::string::npos) << lastError();
  EXPECT_EQ(stitch_cache_dir_clear(nullptr, nullptr), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(stitch_cache_dir_prune(nullptr), STITCH_ERROR_INVALID_ARGUMENT);
}

TEST(ApiCacheDir, StatsPruneAndClear) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "cache";
  fs::create_directories(dir);
  EnvGuard on("STITCH_CACHE", nullptr);
  EnvGuard d("STITCH_CACHE_DIR", dir.c_str());
  EnvGuard limit("STITCH_CACHE_MAX_MB", "1");
  EnvGuard key("STITCH_CACHE_KEY", nullptr);
  EnvGuard keyFile("STITCH_CACHE_KEY_FILE", nullptr);

  stitch::testing::writeDirectoryKey(dir);  // this user's key, which the entries are tagged with
  const fs::path a = stitch::testing::writeCacheEntry(dir, "key a", std::vector<uint8_t>(1000, 1));
  const fs::path b = stitch::testing::writeCacheEntry(dir, "key b", std::vector<uint8_t>(2000, 2));
  const fs::path bad = stitch::testing::writeCacheEntry(dir, "key c", std::vector<uint8_t>(500, 3));
  fs::resize_file(bad, fs::file_size(bad) - 1);  // truncated: the sizes no longer add up
  const fs::path stale = stitch::testing::writeCacheTemporary(dir, ::getpid(), 1, 40);
  ASSERT_TRUE(stitch::testing::setFileAge(stale, 3600));
  const fs::path fresh = stitch::testing::writeCacheTemporary(dir, ::getpid(), 2, 60);
  const fs::path foreign = dir / "mine.txt";
  stitch::testing::writeBytes(foreign, std::vector<uint8_t>(10, 0));
  const uint64_t goodBytes = fs::file_size(a) + fs::file_size(b);
  const uint64_t badBytes = fs::file_size(bad);
  EXPECT_EQ(goodBytes, 56 + 5 + 1000 + 56 + 5 + 2000);  // header, key, payload

  stitch_cache_dir_stats_t s{};
  ASSERT_EQ(stitch_cache_dir_stats(&s), STITCH_OK) << lastError();
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.bytes, goodBytes + badBytes);
  EXPECT_EQ(s.temporaries, 2u);
  EXPECT_EQ(s.temporary_bytes, 100u);
  EXPECT_EQ(s.limit_bytes, uint64_t{1} << 20);
  EXPECT_EQ(stitch_cache_dir_stats(nullptr), STITCH_ERROR_INVALID_ARGUMENT);

  stitch_cache_dir_prune_t p{};
  ASSERT_EQ(stitch_cache_dir_prune(&p), STITCH_OK) << lastError();
  EXPECT_EQ(p.stale_temporaries, 1u);
  EXPECT_EQ(p.corrupt_entries, 1u);
  EXPECT_EQ(p.evicted_entries, 0u);
  EXPECT_EQ(p.freed_bytes, 40 + badBytes);
  EXPECT_TRUE(fs::exists(a));
  EXPECT_TRUE(fs::exists(b));
  EXPECT_FALSE(fs::exists(bad));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));

  uint64_t files = 0, bytes = 0;
  ASSERT_EQ(stitch_cache_dir_clear(&files, &bytes), STITCH_OK) << lastError();
  EXPECT_EQ(files, 3u);  // a, b and the fresh temporary file
  EXPECT_EQ(bytes, goodBytes + 60);
  EXPECT_TRUE(fs::exists(foreign));
  ASSERT_EQ(stitch_cache_dir_stats(&s), STITCH_OK);
  EXPECT_EQ(s.entries + s.temporaries, 0u);
  EXPECT_EQ(stitch_cache_dir_clear(nullptr, nullptr), STITCH_OK);  // outputs may be NULL
  EXPECT_EQ(stitch_cache_dir_prune(nullptr), STITCH_OK);
}

// Past STITCH_CACHE_MAX_MB, prune removes the least recently used entries (oldest mtime) until
// the rest hold 90% of it.
TEST(ApiCacheDir, PruneEvictsPastTheLimit) {
  TempDir tmp;
  EnvGuard on("STITCH_CACHE", nullptr);
  EnvGuard d("STITCH_CACHE_DIR", tmp.path().c_str());
  EnvGuard limit("STITCH_CACHE_MAX_MB", "1");
  EnvGuard key("STITCH_CACHE_KEY", nullptr);
  EnvGuard keyFile("STITCH_CACHE_KEY_FILE", nullptr);
  stitch::testing::writeDirectoryKey(tmp.path());
  std::vector<fs::path> entries;
  for (int i = 0; i < 3; ++i) {
    entries.push_back(stitch::testing::writeCacheEntry(tmp.path(), "key " + std::to_string(i),
                                                       std::vector<uint8_t>(400000, 1)));
    ASSERT_TRUE(stitch::testing::setFileAge(entries.back(), 3600 * (3 - i)));
  }
  stitch_cache_dir_prune_t p{};
  ASSERT_EQ(stitch_cache_dir_prune(&p), STITCH_OK) << lastError();
  EXPECT_EQ(p.evicted_entries, 1u);  // 1.2 MB -> 0.8 MB, under 90% of 1 MiB
  EXPECT_EQ(p.corrupt_entries, 0u);
  EXPECT_FALSE(fs::exists(entries[0]));
  EXPECT_TRUE(fs::exists(entries[1]));
  EXPECT_TRUE(fs::exists(entries[2]));
}

TEST(ApiCacheDir, AMissingDirectoryIsEmptyAndNotCreated) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "later";
  EnvGuard on("STITCH_CACHE", nullptr);
  EnvGuard d("STITCH_CACHE_DIR", dir.c_str());
  EnvGuard limit("STITCH_CACHE_MAX_MB", nullptr);
  stitch_cache_dir_stats_t s{};
  ASSERT_EQ(stitch_cache_dir_stats(&s), STITCH_OK) << lastError();
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.limit_bytes, uint64_t{4096} << 20);  // the default, 4 GiB
  uint64_t files = 99;
  EXPECT_EQ(stitch_cache_dir_clear(&files, nullptr), STITCH_OK);
  EXPECT_EQ(files, 0u);
  EXPECT_FALSE(fs::exists(dir));
}

TEST(ApiCacheDir, ABadLimitIsAnInvalidArgument) {
  TempDir tmp;
  EnvGuard d("STITCH_CACHE_DIR", tmp.path().c_str());
  EnvGuard limit("STITCH_CACHE_MAX_MB", "0");
  stitch_cache_dir_stats_t s{};
  EXPECT_EQ(stitch_cache_dir_stats(&s), STITCH_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("STITCH_CACHE_MAX_MB=0"), std::string::npos) << lastError();
  EXPECT_EQ(stitch_cache_dir_prune(nullptr), STITCH_ERROR_INVALID_ARGUMENT);
}

// A path that is not a directory cannot be read: an IO error naming it.
TEST(ApiCacheDir, AnUnreadableDirectoryIsAnIoError) {
  TempDir tmp;
  const fs::path file = tmp.path() / "not-a-directory";
  stitch::testing::writeBytes(file, {1});
  EnvGuard on("STITCH_CACHE", nullptr);
  EnvGuard d("STITCH_CACHE_DIR", file.c_str());
  stitch_cache_dir_stats_t s{};
  EXPECT_EQ(stitch_cache_dir_stats(&s), STITCH_ERROR_IO);
  EXPECT_NE(lastError().find(file.string()), std::string::npos) << lastError();
}

}  // namespace

namespace {

// Issue 33: prune and clear on a directory they cannot remove files from reported "removed 0" and
// success. They fail with STITCH_ERROR_IO, naming the file, and leave the outputs untouched.
TEST(ApiCacheDir, PruneAndClearReportFilesTheyCannotRemove) {
  TempDir tmp;
  EnvGuard on("STITCH_CACHE", nullptr);
  EnvGuard d("STITCH_CACHE_DIR", tmp.path().c_str());
  EnvGuard key("STITCH_CACHE_KEY", nullptr);
  EnvGuard keyFile("STITCH_CACHE_KEY_FILE", nullptr);
  stitch::testing::writeDirectoryKey(tmp.path());
  const fs::path good = stitch::testing::writeCacheEntry(tmp.path(), "good", {1, 2, 3});
  const fs::path forged = stitch::testing::writeCacheEntry(tmp.path(), "forged", {4, 5, 6},
                                                           "a key that is not ours, 32+ b");
  std::string why;
  auto locked = stitch::testing::UnwritableDir::make(tmp.path(), &why);
  if (!locked) GTEST_SKIP() << why;
  stitch_cache_dir_prune_t p{7, 7, 7, 7};
  EXPECT_EQ(stitch_cache_dir_prune(&p), STITCH_ERROR_IO);
  EXPECT_NE(lastError().find(forged.string()), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("cannot prune"), std::string::npos) << lastError();
  EXPECT_EQ(p.corrupt_entries, 7u);  // untouched
  uint64_t files = 7;
  EXPECT_EQ(stitch_cache_dir_clear(&files, nullptr), STITCH_ERROR_IO);
  EXPECT_NE(lastError().find("cannot clear"), std::string::npos) << lastError();
  EXPECT_EQ(files, 7u);
  locked.reset();
  EXPECT_TRUE(fs::exists(good));
  EXPECT_TRUE(fs::exists(forged));
  // Once the directory is writable again, prune removes the forged entry and keeps the good one.
  ASSERT_EQ(stitch_cache_dir_prune(&p), STITCH_OK) << lastError();
  EXPECT_EQ(p.corrupt_entries, 1u);
  EXPECT_TRUE(fs::exists(good));
  EXPECT_FALSE(fs::exists(forged));
}

}  // namespace
