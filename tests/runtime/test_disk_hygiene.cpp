// The disk cache's hygiene (runtime/kernel_cache.h, "Size bound and eviction" and
// "Maintenance"): the size bound and least-recently-used eviction by mtime, what is never
// removed, stale temporary files, usage/clear/prune, and STITCH_CACHE_MAX_MB.
//
// Recency is an mtime, so tests set mtimes with utimensat rather than sleeping: entry i of a
// series is made `i` minutes younger than the one before it, long before now.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/env_guard.h"
#include "common/temp_dir.h"
#include "common/unwritable_dir.h"
#include "runtime/kernel_cache.h"
#include "runtime/support/error.h"

using namespace stitch;
using namespace stitch::rt;
namespace fs = std::filesystem;

namespace {

using stitch::testing::TempDir;

using stitch::testing::EnvGuard;
using stitch::testing::UnwritableDir;

// Key i of a series: every key serializes to the same length (i < 1000), so every entry of a
// series has the same size.
CacheKey keyNumber(int i) {
  CacheKey k;
  k.add("program", "hygiene").add("index", std::to_string(1000 + i));
  k.version = "0.0.0-test";
  return k;
}

std::vector<uint8_t> payloadFor(int i, size_t bytes = 1000) {
  std::vector<uint8_t> out(bytes);
  for (size_t j = 0; j < bytes; ++j) out[j] = static_cast<uint8_t>(i * 31 + j);
  return out;
}

int64_t nowSeconds() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec;
}

// Sets a file's mtime (and atime) to `secondsAgo` before now, without following symlinks.
void setAge(const fs::path& p, int64_t secondsAgo) {
  struct timespec t[2] = {};
  t[0].tv_sec = t[1].tv_sec = nowSeconds() - secondsAgo;
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), t, AT_SYMLINK_NOFOLLOW), 0) << p;
}

int64_t ageOf(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return nowSeconds() - st.st_mtime;
}

void writeFile(const fs::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> readFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// A temporary file named as store() names them, written by `pid`, `secondsAgo` old.
fs::path tempFile(const fs::path& dir, pid_t pid, int n, int64_t secondsAgo, size_t bytes = 100) {
  fs::path p = dir / fmt::format(".tmp-{:016x}-{}-{:x}-{}.stitchk~", 0xabcdefULL, pid, 0x99, n);
  writeFile(p, std::vector<uint8_t>(bytes, 7));
  setAge(p, secondsAgo);
  return p;
}

// Writes entries 0..count-1 (with a cache whose bound is far away) and ages them so that entry 0
// is the least recently used: entry i is (count - i) hours old. Returns one entry's size.
uint64_t writeAgedSeries(const fs::path& dir, int count) {
  DiskCache writer(dir);
  for (int i = 0; i < count; ++i) writer.store(keyNumber(i), payloadFor(i));
  for (int i = 0; i < count; ++i) setAge(writer.pathFor(keyNumber(i)), 3600 * (count - i));
  return fs::file_size(writer.pathFor(keyNumber(0)));
}

// ---------------------------------------------------------------------------------------------
// Eviction

// Past the bound, store() removes the least recently used entries until the rest hold at most
// 90% of it; a hit counts as a use.
TEST(DiskHygiene, EvictsTheLeastRecentlyUsedToNinetyPercentOfTheBound) {
  TempDir tmp;
  constexpr int kCount = 10;
  const uint64_t entry = writeAgedSeries(tmp.path(), kCount);
  // Room for 10.5 entries: the 11th store passes the bound; 90% of it holds 9.
  const uint64_t bound = kCount * entry + entry / 2;
  DiskCache disk(tmp.path(), bound);
  // Entry 0, the oldest, is used: it becomes the most recent.
  ASSERT_EQ(disk.load(keyNumber(0)), payloadFor(0));
  EXPECT_LE(ageOf(disk.pathFor(keyNumber(0))), 5);
  disk.store(keyNumber(kCount), payloadFor(kCount));

  uint64_t kept = 0;
  for (int i = 0; i <= kCount; ++i) kept += fs::exists(disk.pathFor(keyNumber(i))) ? 1 : 0;
  EXPECT_LE(kept * entry, bound / 10 * 9);
  EXPECT_EQ(kept, 9u);  // as few removed as that takes: 11 - 2
  EXPECT_EQ(disk.stats().evictions, 2u);
  // The two removed are the least recently used: entries 1 and 2 (0 was used since).
  EXPECT_FALSE(fs::exists(disk.pathFor(keyNumber(1))));
  EXPECT_FALSE(fs::exists(disk.pathFor(keyNumber(2))));
  EXPECT_TRUE(fs::exists(disk.pathFor(keyNumber(0))));
  EXPECT_TRUE(fs::exists(disk.pathFor(keyNumber(kCount))));
  for (int i = 3; i < kCount; ++i) EXPECT_TRUE(fs::exists(disk.pathFor(keyNumber(i)))) << i;
  EXPECT_EQ(disk.usage().bytes, kept * entry);
  EXPECT_EQ(disk.load(keyNumber(1)), std::nullopt);  // a miss, compiled again by the caller

  // Hysteresis: the next store fits under the bound again without a scan removing anything.
  disk.store(keyNumber(kCount + 1), payloadFor(kCount + 1));
  EXPECT_EQ(disk.stats().evictions, 2u);
  EXPECT_EQ(disk.usage().entries, 10u);
}

// Below the bound nothing is removed, however old.
TEST(DiskHygiene, NothingIsEvictedBelowTheBound) {
  TempDir tmp;
  const uint64_t entry = writeAgedSeries(tmp.path(), 5);
  DiskCache disk(tmp.path(), 6 * entry + 1);
  disk.store(keyNumber(5), payloadFor(5));
  EXPECT_EQ(disk.usage().entries, 6u);
  EXPECT_EQ(disk.stats().evictions, 0u);
}

// A hit refreshes the entry's mtime through the descriptor load() read it with.
TEST(DiskHygiene, AHitRefreshesTheEntrysMtime) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  disk.store(keyNumber(0), payloadFor(0));
  const fs::path p = disk.pathFor(keyNumber(0));
  setAge(p, 7200);
  EXPECT_GE(ageOf(p), 7200);
  ASSERT_TRUE(disk.load(keyNumber(0)).has_value());
  EXPECT_LE(ageOf(p), 5);
}

// Eviction counts and removes only regular files named like entries: foreign files, names that
// are almost ours, symbolic links and temporary files (a live writer's fresh one above all) stay,
// however old, and do not count against the bound.
TEST(DiskHygiene, EvictionNeverRemovesWhatIsNotAnEntry) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "cache";
  fs::create_directories(dir);
  const fs::path notes = dir / "notes.txt";
  writeFile(notes, std::vector<uint8_t>(100000, 1));
  const fs::path upper = dir / "0123456789ABCDEF.stitchk";  // uppercase: not a name store() makes
  writeFile(upper, std::vector<uint8_t>(100000, 2));
  const fs::path shortName = dir / "0123456789abcde.stitchk";  // 15 digits
  writeFile(shortName, std::vector<uint8_t>(100000, 3));
  const fs::path outside = tmp.path() / "target.stitchk";
  writeFile(outside, std::vector<uint8_t>(100000, 4));
  const fs::path link = dir / "00000000000000aa.stitchk";  // named like an entry, a symlink
  fs::create_symlink(outside, link);
  const fs::path subdir = dir / "00000000000000bb.stitchk";  // named like an entry, a directory
  fs::create_directory(subdir);
  const fs::path liveTemp = tempFile(dir, ::getpid(), 1, 0);
  for (const fs::path& p : {notes, upper, shortName, outside, link, subdir}) setAge(p, 86400 * 30);

  DiskCache disk(dir, 2000);  // room for about one entry
  for (int i = 0; i < 4; ++i) disk.store(keyNumber(i), payloadFor(i));
  EXPECT_GT(disk.stats().evictions, 0u);
  EXPECT_LE(disk.usage().bytes, 2000u / 10 * 9);
  for (const fs::path& p : {notes, upper, shortName, outside, subdir, liveTemp})
    EXPECT_TRUE(fs::exists(p)) << p;
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(disk.usage().temporaries, 1u);
}

// The bound applies to entries written by any process: a cache whose first store finds the
// directory past it evicts right away.
TEST(DiskHygiene, AFirstStoreIntoAnOverfullDirectoryEvicts) {
  TempDir tmp;
  const uint64_t entry = writeAgedSeries(tmp.path(), 8);
  DiskCache disk(tmp.path(), 4 * entry);
  disk.store(keyNumber(8), payloadFor(8));
  EXPECT_LE(disk.usage().bytes, 4 * entry / 10 * 9);
  EXPECT_TRUE(fs::exists(disk.pathFor(keyNumber(8))));  // the newest stays
  EXPECT_TRUE(fs::exists(disk.pathFor(keyNumber(7))));
  EXPECT_FALSE(fs::exists(disk.pathFor(keyNumber(0))));
}

// ---------------------------------------------------------------------------------------------
// Temporary files

// A temporary file older than kStaleTempSeconds (five minutes) is stale even if its writer is
// alive (no write takes that long); a younger one of a live writer is not.
TEST(DiskHygiene, TemporaryFilesOlderThanFiveMinutesAreStale) {
  EXPECT_EQ(kStaleTempSeconds, 300);
  TempDir tmp;
  const fs::path old = tempFile(tmp.path(), ::getpid(), 1, kStaleTempSeconds + 5);
  const fs::path young = tempFile(tmp.path(), ::getpid(), 2, kStaleTempSeconds - 60);
  DiskCache disk(tmp.path());
  EXPECT_EQ(disk.removeStaleTemporaries(), 1u);
  EXPECT_FALSE(fs::exists(old));
  EXPECT_TRUE(fs::exists(young));
}

// ---------------------------------------------------------------------------------------------
// usage, clear, prune

TEST(DiskHygiene, UsageCountsEntriesAndTemporariesOnly) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  for (int i = 0; i < 3; ++i) disk.store(keyNumber(i), payloadFor(i));
  const uint64_t entry = fs::file_size(disk.pathFor(keyNumber(0)));
  tempFile(tmp.path(), ::getpid(), 1, 0, 123);
  writeFile(tmp.path() / "README", std::vector<uint8_t>(5000, 0));
  const DiskCache::DiskUsage u = disk.usage();
  EXPECT_EQ(u.entries, 3u);
  EXPECT_EQ(u.bytes, 3 * entry);
  EXPECT_EQ(u.temporaries, 1u);
  EXPECT_EQ(u.temporaryBytes, 123u);
}

TEST(DiskHygiene, ClearRemovesEntriesAndTemporariesAndNothingElse) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  for (int i = 0; i < 3; ++i) disk.store(keyNumber(i), payloadFor(i));
  const uint64_t entry = fs::file_size(disk.pathFor(keyNumber(0)));
  const fs::path temp = tempFile(tmp.path(), ::getpid(), 1, 0, 123);
  const fs::path foreign = tmp.path() / "keep.me";
  writeFile(foreign, {1, 2, 3});
  const DiskCache::Removed r = disk.clear();
  EXPECT_EQ(r.files, 4u);
  EXPECT_EQ(r.bytes, 3 * entry + 123);
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_TRUE(fs::exists(foreign));
  const DiskCache::DiskUsage u = disk.usage();
  EXPECT_EQ(u.entries + u.temporaries, 0u);
  EXPECT_EQ(disk.load(keyNumber(0)), std::nullopt);
  // The cache goes on working after a clear.
  disk.store(keyNumber(0), payloadFor(0));
  EXPECT_EQ(disk.load(keyNumber(0)), payloadFor(0));
}

// A directory not made yet is empty, and the maintenance calls do not make it.
TEST(DiskHygiene, AMissingDirectoryIsEmpty) {
  TempDir tmp;
  DiskCache disk(tmp.path() / "not-yet");
  EXPECT_EQ(disk.usage().entries, 0u);
  EXPECT_EQ(disk.clear().files, 0u);
  EXPECT_EQ(disk.prune().freedBytes, 0u);
  EXPECT_FALSE(fs::exists(tmp.path() / "not-yet"));
  // A disabled cache has nothing either.
  EXPECT_EQ(DiskCache::disabled()->usage().entries, 0u);
  EXPECT_EQ(DiskCache::disabled()->clear().files, 0u);
}

// A directory that exists and cannot be read is an IO error for the maintenance calls.
TEST(DiskHygiene, AnUnreadableDirectoryIsAnIoError) {
  TempDir tmp;
  const fs::path file = tmp.path() / "a-file";
  writeFile(file, {1});
  DiskCache disk(file);
  try {
    (void)disk.usage();
    FAIL() << "usage() of a file as directory did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::IO);
    EXPECT_NE(e.message().find(file.string()), std::string::npos) << e.message();
  }
  EXPECT_THROW(disk.clear(), Error);
  EXPECT_THROW(disk.prune(), Error);
}

// clear() and prune() do what they can, then fail with an IO error naming what they could not
// remove (a directory the user may not write to), never "removed 0" and success.
TEST(DiskHygiene, ClearFailsWhenFilesCannotBeRemoved) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  disk.store(keyNumber(0), payloadFor(0));
  std::string why;
  auto locked = UnwritableDir::make(tmp.path(), &why);
  if (!locked) GTEST_SKIP() << why;
  try {
    disk.clear();
    ADD_FAILURE() << "clear() of a directory made unwritable by " << locked->how() << " succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::IO);
    EXPECT_NE(e.message().find(disk.pathFor(keyNumber(0)).string()), std::string::npos)
        << e.message();
    EXPECT_NE(e.message().find("removed 0 files"), std::string::npos) << e.message();
  }
  locked.reset();
  EXPECT_TRUE(fs::exists(disk.pathFor(keyNumber(0))));
}

TEST(DiskHygiene, PruneFailsWhenFilesCannotBeRemoved) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  for (int i = 0; i < 2; ++i) disk.store(keyNumber(i), payloadFor(i));
  std::vector<uint8_t> bytes = readFile(disk.pathFor(keyNumber(0)));
  bytes.back() ^= 0x5a;  // corrupt: prune must remove it
  writeFile(disk.pathFor(keyNumber(0)), bytes);
  const fs::path stale = tempFile(tmp.path(), ::getpid(), 1, kStaleTempSeconds + 60, 77);
  std::string why;
  auto locked = UnwritableDir::make(tmp.path(), &why);
  if (!locked) GTEST_SKIP() << why;
  try {
    disk.prune();
    ADD_FAILURE() << "prune() of a directory made unwritable by " << locked->how() << " succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::IO);
    // Both files it had to remove are counted; the message names the first and what was done.
    EXPECT_NE(e.message().find("cannot prune " + tmp.path().string() + ": 2 file(s)"),
              std::string::npos)
        << e.message();
    EXPECT_NE(e.message().find("removed 0 stale temporary files, 0 corrupt entries"),
              std::string::npos)
        << e.message();
  }
  // Nothing to remove: a read-only directory is no failure.
  locked.reset();
  fs::remove(stale);
  fs::remove(disk.pathFor(keyNumber(0)));
  locked = UnwritableDir::make(tmp.path(), &why);
  ASSERT_TRUE(locked) << why;
  const DiskCache::PruneResult r = disk.prune();
  EXPECT_EQ(r.corruptEntries + r.staleTemporaries + r.evictedEntries, 0u);
  EXPECT_EQ(disk.load(keyNumber(1)), payloadFor(1));  // and a read-only directory still serves
}

// Entries whose tag does not verify under this user's key are corrupt to prune as to load: a
// forged payload, an entry written under another key; the key file itself is never touched.
TEST(DiskHygiene, PruneRemovesEntriesWhoseTagDoesNotVerify) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  for (int i = 0; i < 3; ++i) disk.store(keyNumber(i), payloadFor(i));
  const CacheSecret other("another user's key, 32 bytes or longer", "test");
  writeFile(disk.pathFor(keyNumber(0)),
            encodeEntry(other, keyNumber(0).canonical(), payloadFor(0)));
  std::vector<uint8_t> forged = readFile(disk.pathFor(keyNumber(1)));
  forged.back() ^= 0xff;  // a payload byte changed; no checksum left to recompute
  writeFile(disk.pathFor(keyNumber(1)), forged);
  const DiskCache::PruneResult r = disk.prune();
  EXPECT_EQ(r.corruptEntries, 2u);
  EXPECT_FALSE(fs::exists(disk.pathFor(keyNumber(0))));
  EXPECT_FALSE(fs::exists(disk.pathFor(keyNumber(1))));
  EXPECT_EQ(disk.load(keyNumber(2)), payloadFor(2));
  EXPECT_TRUE(fs::exists(tmp.path() / directorySecretName()));
  // The same directory under a fleet key: every entry of this user's key fails there.
  DiskCache fleet(tmp.path(), kDefaultDiskCacheMaxMB << 20, std::make_shared<CacheSecret>(other));
  EXPECT_EQ(fleet.prune().corruptEntries, 1u);
  EXPECT_FALSE(fs::exists(disk.pathFor(keyNumber(2))));
}

// With a key file it may not trust, prune cannot judge entries: an IO error saying why, nothing
// removed.
TEST(DiskHygiene, PruneWithoutAKeyFailsAndRemovesNothing) {
  TempDir tmp;
  {
    DiskCache writer(tmp.path());
    writer.store(keyNumber(0), payloadFor(0));
  }
  const fs::path key = tmp.path() / directorySecretName();
  fs::permissions(key, fs::perms::group_read, fs::perm_options::add);  // readable by others
  DiskCache disk(tmp.path());
  try {
    disk.prune();
    ADD_FAILURE() << "prune() with a key file others may read succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::IO);
    EXPECT_NE(e.message().find(key.string()), std::string::npos) << e.message();
  }
  EXPECT_TRUE(fs::exists(disk.pathFor(keyNumber(0))));
}

// prune() removes what fails verification: a flipped payload byte, a wrong magic, a truncated
// file, an intact entry under another entry's name (its key does not hash to the name); keeps
// intact entries; removes stale temporary files; and evicts only past the bound.
TEST(DiskHygiene, PruneRemovesCorruptEntriesAndStaleTemporaries) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  for (int i = 0; i < 6; ++i) disk.store(keyNumber(i), payloadFor(i));
  const uint64_t entry = fs::file_size(disk.pathFor(keyNumber(0)));

  std::vector<uint8_t> bytes = readFile(disk.pathFor(keyNumber(0)));
  bytes.back() ^= 0x5a;
  writeFile(disk.pathFor(keyNumber(0)), bytes);
  bytes = readFile(disk.pathFor(keyNumber(1)));
  bytes[0] = 'X';
  writeFile(disk.pathFor(keyNumber(1)), bytes);
  bytes = readFile(disk.pathFor(keyNumber(2)));
  bytes.resize(bytes.size() - 10);
  writeFile(disk.pathFor(keyNumber(2)), bytes);
  const uint64_t truncated = bytes.size();
  fs::copy_file(disk.pathFor(keyNumber(4)), disk.pathFor(keyNumber(3)),
                fs::copy_options::overwrite_existing);
  const fs::path stale = tempFile(tmp.path(), ::getpid(), 1, kStaleTempSeconds + 60, 77);
  const fs::path fresh = tempFile(tmp.path(), ::getpid(), 2, 0, 88);

  const DiskCache::PruneResult r = disk.prune();
  EXPECT_EQ(r.staleTemporaries, 1u);
  EXPECT_EQ(r.corruptEntries, 4u);
  EXPECT_EQ(r.evictedEntries, 0u);
  EXPECT_EQ(r.freedBytes, 77 + 3 * entry + truncated);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(fs::exists(disk.pathFor(keyNumber(i)))) << i;
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));
  EXPECT_EQ(disk.load(keyNumber(4)), payloadFor(4));
  EXPECT_EQ(disk.load(keyNumber(5)), payloadFor(5));
  EXPECT_EQ(disk.stats().corruptEntries, 0u);  // prune is not a load: nothing was rejected there
  // A second prune finds nothing to do.
  const DiskCache::PruneResult again = disk.prune();
  EXPECT_EQ(again.staleTemporaries + again.corruptEntries + again.evictedEntries, 0u);
}

// With no key at all (no fleet key, and this user never wrote here) the entries are someone
// else's: prune checks all but their tags, and makes no key of its own. Run without the fleet key
// the processes used, it must not wipe their entries.
TEST(DiskHygiene, PruneWithNoKeyLeavesTagsUnchecked) {
  TempDir tmp;
  const auto fleet = std::make_shared<CacheSecret>("the fleet's key, 32 bytes or more", "test");
  {
    DiskCache writer(tmp.path(), kDefaultDiskCacheMaxMB << 20, fleet);
    for (int i = 0; i < 2; ++i) writer.store(keyNumber(i), payloadFor(i));
  }
  std::vector<uint8_t> bytes = readFile(DiskCache(tmp.path()).pathFor(keyNumber(1)));
  bytes.resize(bytes.size() - 1);  // truncated: corrupt whatever the key
  writeFile(DiskCache(tmp.path()).pathFor(keyNumber(1)), bytes);
  DiskCache keyless(tmp.path());
  const DiskCache::PruneResult r = keyless.prune();
  EXPECT_EQ(r.corruptEntries, 1u);
  EXPECT_TRUE(fs::exists(keyless.pathFor(keyNumber(0))));
  EXPECT_FALSE(fs::exists(tmp.path() / directorySecretName()));
  EXPECT_EQ(DiskCache(tmp.path(), kDefaultDiskCacheMaxMB << 20, fleet).load(keyNumber(0)),
            payloadFor(0));
}

TEST(DiskHygiene, PruneEvictsTheLeastRecentlyUsedPastTheBound) {
  TempDir tmp;
  const uint64_t entry = writeAgedSeries(tmp.path(), 10);
  DiskCache disk(tmp.path(), 5 * entry);
  const DiskCache::PruneResult r = disk.prune();
  // 90% of 5 entries holds 4: the 6 oldest go.
  EXPECT_EQ(r.evictedEntries, 6u);
  EXPECT_EQ(r.freedBytes, 6 * entry);
  EXPECT_EQ(disk.stats().evictions, 6u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(fs::exists(disk.pathFor(keyNumber(i))), i >= 6) << i;
}

// ---------------------------------------------------------------------------------------------
// STITCH_CACHE_MAX_MB and statistics

TEST(DiskHygiene, MaxMbSetsTheBound) {
  TempDir tmp;
  EnvGuard dir("STITCH_CACHE_DIR", tmp.path().c_str());
  EnvGuard on("STITCH_CACHE", nullptr);
  {
    EnvGuard unset("STITCH_CACHE_MAX_MB", nullptr);
    EXPECT_EQ(DiskCache::maxBytesFromEnv(), uint64_t{4096} << 20);
    EXPECT_EQ(DiskCache::fromEnv()->maxBytes(), uint64_t{4096} << 20);
  }
  {
    EnvGuard one("STITCH_CACHE_MAX_MB", "1");
    EXPECT_EQ(DiskCache::fromEnv()->maxBytes(), uint64_t{1} << 20);
  }
  {
    EnvGuard largest("STITCH_CACHE_MAX_MB", "17592186044415");
    EXPECT_EQ(DiskCache::maxBytesFromEnv(), kMaxDiskCacheMaxMB << 20);
  }
}

TEST(DiskHygiene, BadMaxMbValuesAreErrors) {
  TempDir tmp;
  EnvGuard dir("STITCH_CACHE_DIR", tmp.path().c_str());
  for (const char* bad : {"0", "-1", "abc", "1.5", "12MB", " 12", "0x10", "17592186044416",
                          "99999999999999999999999"}) {
    EnvGuard e("STITCH_CACHE_MAX_MB", bad);
    try {
      (void)DiskCache::fromEnv();
      FAIL() << "STITCH_CACHE_MAX_MB=" << bad << " was accepted";
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), ErrorCode::InvalidArgument) << bad;
      EXPECT_NE(err.message().find(std::string("STITCH_CACHE_MAX_MB=") + bad), std::string::npos)
          << err.message();
      EXPECT_NE(err.message().find("17592186044415"), std::string::npos) << err.message();
    }
  }
  // Checked even with the disk layer off: a typo is a mistake wherever it is.
  EnvGuard off("STITCH_CACHE", "0");
  EnvGuard e("STITCH_CACHE_MAX_MB", "lots");
  EXPECT_THROW((void)DiskCache::fromEnv(), Error);
}

TEST(DiskHygiene, EvictionsAreCountedInTheStatistics) {
  CacheStats a, b;
  a.evictions = 2;
  b.evictions = 3;
  a += b;
  EXPECT_EQ(a.evictions, 5u);
  EXPECT_NE(a.toString().find("5 evictions"), std::string::npos) << a.toString();
  CacheStatsCounter c;
  c.evicted(4);
  EXPECT_EQ(c.snapshot().evictions, 4u);
  c.reset();
  EXPECT_EQ(c.snapshot().evictions, 0u);
}

}  // namespace
