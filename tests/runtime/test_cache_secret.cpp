// The kernel cache's keys (runtime/cache_secret.h): the fleet key from STITCH_CACHE_KEY or a key
// file, and each user's key of a cache directory; what is refused (short keys, both variables,
// key files others may write, or read, or own, links), never printing a secret; and what the disk
// layer does with a refused key (nothing: it verifies nothing it cannot, and stores nothing).
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/env_guard.h"
#include "common/temp_dir.h"
#include "runtime/cache_secret.h"
#include "runtime/kernel_cache.h"
#include "runtime/support/error.h"

using namespace stitch;
using namespace stitch::rt;
namespace fs = std::filesystem;
using stitch::testing::EnvGuard;
using stitch::testing::TempDir;

namespace {

const std::string kFleetKey = "0123456789abcdef0123456789abcdef-fleet";

void writeText(const fs::path& p, const std::string& text, fs::perms perms) {
  std::ofstream(p, std::ios::trunc) << text;
  fs::permissions(p, perms);
}

// The error of fleetSecretFromEnv() (InvalidArgument), or "" when it did not throw.
std::string fleetKeyError() {
  try {
    fleetSecretFromEnv();
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    return e.what();
  }
}

CacheKey keyOf(const std::string& what) {
  CacheKey k;
  k.add("code", what);
  return k;
}

std::vector<uint8_t> payloadOf(const std::string& what) {
  return std::vector<uint8_t>(what.begin(), what.end());
}

class WarnCapture {
 public:
  WarnCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)) {
    sink_->set_level(spdlog::level::warn);
    stitch::log().sinks().push_back(sink_);
  }
  ~WarnCapture() {
    auto& sinks = stitch::log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

}  // namespace

TEST(FleetKey, ComesFromTheVariableOrAFile) {
  TempDir tmp;
  {
    EnvGuard key("STITCH_CACHE_KEY", nullptr);
    EnvGuard file("STITCH_CACHE_KEY_FILE", nullptr);
    EXPECT_EQ(fleetSecretFromEnv(), nullptr);
  }
  std::shared_ptr<const CacheSecret> fromVariable, fromFile;
  {
    EnvGuard key("STITCH_CACHE_KEY", kFleetKey.c_str());
    EnvGuard file("STITCH_CACHE_KEY_FILE", nullptr);
    fromVariable = fleetSecretFromEnv();
    ASSERT_NE(fromVariable, nullptr);
    EXPECT_EQ(fromVariable->origin(), "STITCH_CACHE_KEY");
  }
  {
    // A file's trailing newline is not part of the key; mode 0640 (a group may read it) is fine.
    const fs::path p = tmp.path() / "fleet.key";
    writeText(p, kFleetKey + "\n",
              fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
    EnvGuard key("STITCH_CACHE_KEY", nullptr);
    EnvGuard file("STITCH_CACHE_KEY_FILE", p.c_str());
    fromFile = fleetSecretFromEnv();
    ASSERT_NE(fromFile, nullptr);
    EXPECT_NE(fromFile->origin().find(p.string()), std::string::npos);
  }
  EXPECT_EQ(fromVariable->fingerprint(), fromFile->fingerprint());
  // The same key authenticates alike, whatever its source.
  const std::string canon = keyOf("k").canonical();
  EXPECT_EQ(encodeEntry(*fromVariable, canon, payloadOf("p")),
            encodeEntry(*fromFile, canon, payloadOf("p")));
  EXPECT_TRUE(
      decodeEntry(*fromFile, encodeEntry(*fromVariable, canon, payloadOf("p")), canon, nullptr));
  const CacheSecret other("another key of 32 bytes or more, not the fleet's", "test");
  std::string why;
  EXPECT_FALSE(decodeEntry(other, encodeEntry(*fromVariable, canon, payloadOf("p")), canon, &why));
  EXPECT_NE(why.find("authentication tag does not verify"), std::string::npos) << why;
}

TEST(FleetKey, BadValuesAreErrorsThatNeverPrintTheSecret) {
  TempDir tmp;
  EnvGuard file("STITCH_CACHE_KEY_FILE", nullptr);
  {
    EnvGuard key("STITCH_CACHE_KEY", "short-secret");
    const std::string e = fleetKeyError();
    EXPECT_NE(e.find("STITCH_CACHE_KEY is not valid: 12 bytes, fewer than 32"), std::string::npos)
        << e;
    EXPECT_EQ(e.find("short-secret"), std::string::npos) << e;
  }
  EnvGuard key("STITCH_CACHE_KEY", nullptr);
  const fs::path good = tmp.path() / "good.key";
  writeText(good, kFleetKey, fs::perms::owner_read | fs::perms::owner_write);
  {
    EnvGuard both("STITCH_CACHE_KEY", kFleetKey.c_str());
    EnvGuard f("STITCH_CACHE_KEY_FILE", good.c_str());
    const std::string e = fleetKeyError();
    EXPECT_NE(e.find("STITCH_CACHE_KEY and STITCH_CACHE_KEY_FILE are both set"), std::string::npos)
        << e;
  }
  {
    EnvGuard f("STITCH_CACHE_KEY_FILE", (tmp.path() / "missing.key").c_str());
    const std::string e = fleetKeyError();
    EXPECT_NE(e.find("STITCH_CACHE_KEY_FILE=" + (tmp.path() / "missing.key").string()),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("No such file"), std::string::npos) << e;
  }
  {
    const fs::path writable = tmp.path() / "writable.key";
    writeText(writable, kFleetKey,
              fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_write);
    EnvGuard f("STITCH_CACHE_KEY_FILE", writable.c_str());
    const std::string e = fleetKeyError();
    EXPECT_NE(e.find("writable by others (mode 0620)"), std::string::npos) << e;
    EXPECT_EQ(e.find(kFleetKey), std::string::npos) << e;
  }
  {
    const fs::path shortKey = tmp.path() / "short.key";
    writeText(shortKey, "tiny\n", fs::perms::owner_read | fs::perms::owner_write);
    EnvGuard f("STITCH_CACHE_KEY_FILE", shortKey.c_str());
    EXPECT_NE(fleetKeyError().find("4 bytes, fewer than 32"), std::string::npos);
  }
  {
    EnvGuard f("STITCH_CACHE_KEY_FILE", tmp.path().c_str());  // a directory
    EXPECT_NE(fleetKeyError().find("not a regular file"), std::string::npos);
  }
  if (::geteuid() == 0) {
    // Owned by someone who is neither this user nor root: they choose the key.
    const fs::path theirs = tmp.path() / "theirs.key";
    writeText(theirs, kFleetKey, fs::perms::owner_read | fs::perms::owner_write);
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    EnvGuard f("STITCH_CACHE_KEY_FILE", theirs.c_str());
    EXPECT_NE(fleetKeyError().find("owned by user 65534"), std::string::npos);
  }
}

// The disk layer's key with no fleet key: made by the first store (mode 0600), the same for every
// cache of the directory, kept by clear().
TEST(DirectoryKey, IsMadeOnceAndShared) {
  TempDir tmp;
  std::string why;
  EXPECT_EQ(directorySecret(tmp.path(), /*create=*/false, &why), nullptr);
  EXPECT_EQ(why, "");  // none yet: not an error
  DiskCache a(tmp.path());
  EXPECT_EQ(a.load(keyOf("x")), std::nullopt);
  EXPECT_FALSE(fs::exists(tmp.path() / directorySecretName())) << "a load made a key";
  a.store(keyOf("x"), payloadOf("x"));
  const fs::path keyFile = tmp.path() / directorySecretName();
  ASSERT_TRUE(fs::exists(keyFile));
  EXPECT_EQ(fs::status(keyFile).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  DiskCache b(tmp.path());
  EXPECT_EQ(b.load(keyOf("x")), payloadOf("x"));
  ASSERT_NE(b.secret(), nullptr);
  EXPECT_EQ(a.secret()->fingerprint(), b.secret()->fingerprint());
  b.clear();
  EXPECT_TRUE(fs::exists(keyFile));
  // Another directory has another key: its entries do not verify here.
  TempDir elsewhere;
  DiskCache c(elsewhere.path());
  c.store(keyOf("x"), payloadOf("x"));
  EXPECT_NE(c.secret()->fingerprint(), a.secret()->fingerprint());
  fs::copy_file(c.pathFor(keyOf("x")), a.pathFor(keyOf("x")));
  EXPECT_EQ(a.load(keyOf("x")), std::nullopt);
  EXPECT_EQ(a.stats().corruptEntries, 1u);
}

// Threads (and processes, test_kernel_cache.cpp) making the key at once agree on one.
TEST(DirectoryKey, RacingMakersAgree) {
  for (int round = 0; round < 5; ++round) {
    TempDir tmp;
    constexpr int kThreads = 8;
    std::vector<std::shared_ptr<const CacheSecret>> got(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        std::string why;
        got[t] = directorySecret(tmp.path(), /*create=*/true, &why);
        EXPECT_TRUE(why.empty()) << why;
      });
    for (std::thread& t : threads) t.join();
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_NE(got[t], nullptr);
      EXPECT_EQ(got[t]->fingerprint(), got[0]->fingerprint()) << t;
    }
    // No temporary file of the makers is left.
    int files = 0;
    for (const auto& e : fs::directory_iterator(tmp.path())) {
      ++files;
      EXPECT_EQ(e.path().filename(), directorySecretName());
    }
    EXPECT_EQ(files, 1);
  }
}

// A key file that is not this user's alone is refused: the disk layer then verifies nothing
// (every lookup a miss, the entry left alone), stores nothing, and says so once.
TEST(DirectoryKey, AKeyFileOthersMayUseIsRefused) {
  struct Case {
    const char* what;
    std::function<void(const fs::path&)> spoil;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"readable by others",
       [](const fs::path& k) { fs::permissions(k, fs::perms::others_read, fs::perm_options::add); },
       "may be read or written by others (mode 0604"},
      {"writable by the group",
       [](const fs::path& k) { fs::permissions(k, fs::perms::group_write, fs::perm_options::add); },
       "may be read or written by others (mode 0620"},
      {"a symbolic link",
       [](const fs::path& k) {
         const fs::path target = k.parent_path() / "elsewhere.key";
         fs::rename(k, target);
         fs::create_symlink(target, k);
       },
       "is a symbolic link"},
      {"too short",
       [](const fs::path& k) {
         writeText(k, "abc", fs::perms::owner_read | fs::perms::owner_write);
       },
       "does not hold a key: 3 bytes"},
  };
  if (::geteuid() == 0)
    cases.push_back({"owned by another user",
                     [](const fs::path& k) { ASSERT_EQ(::chown(k.c_str(), 65534, 65534), 0); },
                     "is owned by user 65534"});
  for (const Case& c : cases) {
    TempDir tmp;
    {
      DiskCache writer(tmp.path());
      writer.store(keyOf("x"), payloadOf("x"));
    }
    c.spoil(tmp.path() / directorySecretName());
    WarnCapture warnings;
    DiskCache disk(tmp.path());
    EXPECT_EQ(disk.load(keyOf("x")), std::nullopt) << c.what;
    EXPECT_TRUE(fs::exists(disk.pathFor(keyOf("x")))) << c.what << ": not ours to judge";
    disk.store(keyOf("y"), payloadOf("y"));
    EXPECT_FALSE(fs::exists(disk.pathFor(keyOf("y")))) << c.what;
    EXPECT_EQ(disk.load(keyOf("y")), std::nullopt) << c.what;
    const std::string text = warnings.text();
    EXPECT_NE(text.find(c.expect), std::string::npos) << c.what << ": " << text;
    EXPECT_NE(text.find("memory only"), std::string::npos) << text;
    EXPECT_EQ(text.find("memory only"), text.rfind("memory only")) << "warned more than once";
  }
}

// With a fleet key the directory needs no key of its own, and the entries are the fleet's.
TEST(DirectoryKey, AFleetKeyTakesItsPlace) {
  TempDir tmp;
  {
    EnvGuard key("STITCH_CACHE_KEY", kFleetKey.c_str());
    EnvGuard file("STITCH_CACHE_KEY_FILE", nullptr);
    EnvGuard dir("STITCH_CACHE_DIR", tmp.path().c_str());
    EnvGuard on("STITCH_CACHE", nullptr);
    std::unique_ptr<DiskCache> disk = DiskCache::fromEnv();
    disk->store(keyOf("x"), payloadOf("x"));
    EXPECT_EQ(disk->load(keyOf("x")), payloadOf("x"));
    const CacheSecret fleet(kFleetKey, "test");
    EXPECT_EQ(disk->secret()->fingerprint(), fleet.fingerprint());
  }
  EXPECT_FALSE(fs::exists(tmp.path() / directorySecretName()));
  // A process without the fleet key cannot verify them. Before it has a key of its own it judges
  // nothing (a miss, the entry left alone); with one, the entry is corrupt to it.
  DiskCache mine(tmp.path());
  EXPECT_EQ(mine.load(keyOf("x")), std::nullopt);
  EXPECT_EQ(mine.stats().corruptEntries, 0u);
  EXPECT_TRUE(fs::exists(mine.pathFor(keyOf("x"))));
  mine.store(keyOf("y"), payloadOf("y"));
  EXPECT_EQ(mine.load(keyOf("x")), std::nullopt);
  EXPECT_EQ(mine.stats().corruptEntries, 1u);
  // A bad fleet key is an error even with the disk layer off.
  EnvGuard bad("STITCH_CACHE_KEY", "short");
  EnvGuard off("STITCH_CACHE", "0");
  EXPECT_THROW(DiskCache::fromEnv(), Error);
}
