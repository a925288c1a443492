// The kernel cache's remote layer (runtime/remote_cache.h) against a real redis-server on a
// loopback port (tests/common/redis_server.h): configuration (a fleet key required), verified
// values, a server that dies and comes back, corrupt, truncated, foreign, other-version and
// forged values, error replies (NOAUTH), TTLs, namespaces and concurrent writers; and against a
// fake server that trickles its reply (tests/common/trickling_server.h), the deadline. Tests
// that need the server skip, saying why, when it cannot start.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/env_guard.h"
#include "common/log_capture.h"
#include "common/redis_server.h"
#include "common/temp_dir.h"
#include "common/trickling_server.h"
#include "runtime/kernel_cache.h"
#include "runtime/remote_cache.h"
#include "runtime/support/error.h"
#include "runtime/support/hash.h"

using namespace stitch;
using namespace stitch::rt;
using stitch::testing::EnvGuard;
using stitch::testing::LogCapture;
using stitch::testing::RedisServer;
using stitch::testing::TempDir;
using stitch::testing::TricklingServer;

namespace {

// The fleet key of the tests' layers.
const std::string kFleetKey = "the tests' fleet key, 32 bytes or more";

std::shared_ptr<const CacheSecret> fleetSecret() {
  static const auto secret = std::make_shared<CacheSecret>(kFleetKey, "test");
  return secret;
}

CacheKey keyOf(const std::string& what) {
  CacheKey k;
  k.add("code", what).add("target", "test");
  return k;
}

std::vector<uint8_t> payloadOf(const CacheKey& key) {
  std::string c = key.canonical() + "compiled";
  return std::vector<uint8_t>(c.begin(), c.end());
}

std::string asString(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

struct Kernel {
  std::vector<uint8_t> bytes;
};
using Cache = KernelCache<Kernel>;

std::shared_ptr<Kernel> get(Cache& cache, const CacheKey& key, std::atomic<int>& compiles) {
  return cache.getOrCompile(
      key,
      [&] {
        ++compiles;
        return payloadOf(key);
      },
      [](const std::vector<uint8_t>& b) { return std::make_shared<Kernel>(Kernel{b}); });
}

RemoteCacheConfig configFor(const std::string& url) {
  RemoteCacheConfig c = parseRemoteCacheUrl(url, "test");
  c.timeoutMs = 500;
  c.retryMs = 100;
  c.ttlSeconds = 0;
  c.secret = fleetSecret();
  return c;
}
RemoteCacheConfig configFor(const RedisServer& s) { return configFor(s.url()); }

class RemoteCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!remoteCacheAvailable()) GTEST_SKIP() << "built without hiredis (libhiredis-dev)";
    std::string why;
    server_ = RedisServer::start(&why);
    if (!server_) GTEST_SKIP() << "no redis-server for this test: " << why;
  }
  std::unique_ptr<RedisServer> server_;
};

}  // namespace

TEST(RemoteCacheConfig, ParsesUrls) {
  RemoteCacheConfig c = parseRemoteCacheUrl("redis://cache.example:6380/3", "X");
  EXPECT_EQ(c.host, "cache.example");
  EXPECT_EQ(c.port, 6380);
  EXPECT_EQ(c.db, 3);
  EXPECT_TRUE(c.password.empty());
  c = parseRemoteCacheUrl("redis://10.0.0.7", "X");
  EXPECT_EQ(c.host, "10.0.0.7");
  EXPECT_EQ(c.port, 6379);
  EXPECT_EQ(c.db, 0);
  c = parseRemoteCacheUrl("redis://alice:s3cr@t@[::1]:7000/1", "X");
  EXPECT_EQ(c.user, "alice");
  EXPECT_EQ(c.password, "s3cr@t");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, 7000);
  EXPECT_EQ(c.db, 1);
  // The password never reaches messages.
  EXPECT_EQ(c.url.find("s3cr"), std::string::npos) << c.url;
  EXPECT_NE(c.url.find("[::1]:7000/1"), std::string::npos) << c.url;
  c = parseRemoteCacheUrl("redis://:pw@h:1", "X");
  EXPECT_EQ(c.user, "");
  EXPECT_EQ(c.password, "pw");
}

TEST(RemoteCacheConfig, RejectsMalformedUrlsNamingTheSource) {
  for (const char* bad :
       {"http://h:1", "redis://", "redis://h:", "redis://h:0", "redis://h:65536", "redis://h:x",
        "redis://h:1/db", "redis://[::1", "redis://[::1]x", "redis://user@h:1", "redis://u:@h"}) {
    try {
      parseRemoteCacheUrl(bad, "STITCH_REMOTE_CACHE");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find("STITCH_REMOTE_CACHE="), std::string::npos) << e.what();
    }
  }
}

TEST(RemoteCacheConfig, ComesFromTheEnvironment) {
  {
    EnvGuard url("STITCH_REMOTE_CACHE", nullptr);
    EXPECT_FALSE(remoteCacheConfigFromEnv());
  }
  {
    EnvGuard url("STITCH_REMOTE_CACHE", "off");
    EXPECT_FALSE(remoteCacheConfigFromEnv());
  }
  if (!remoteCacheAvailable()) {
    EnvGuard url("STITCH_REMOTE_CACHE", "redis://h:1");
    EXPECT_THROW(remoteCacheConfigFromEnv(), Error);
    return;
  }
  EnvGuard url("STITCH_REMOTE_CACHE", "redis://h:1/2");
  EnvGuard key("STITCH_CACHE_KEY", kFleetKey.c_str());
  EnvGuard keyFile("STITCH_CACHE_KEY_FILE", nullptr);
  EnvGuard ns("STITCH_REMOTE_CACHE_NAMESPACE", "team-a.v1");
  EnvGuard timeout("STITCH_REMOTE_CACHE_TIMEOUT_MS", "50");
  EnvGuard ttl("STITCH_REMOTE_CACHE_TTL", "0");
  EnvGuard retry("STITCH_REMOTE_CACHE_RETRY_MS", "10");
  std::optional<RemoteCacheConfig> c = remoteCacheConfigFromEnv();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->nameSpace, "team-a.v1");
  EXPECT_EQ(c->timeoutMs, 50);
  EXPECT_EQ(c->ttlSeconds, 0);
  EXPECT_EQ(c->retryMs, 10);
  EXPECT_EQ(c->db, 2);
  ASSERT_NE(c->secret, nullptr);
  EXPECT_EQ(c->secret->fingerprint(), fleetSecret()->fingerprint());
  for (auto [name, value] : {std::pair{"STITCH_REMOTE_CACHE_NAMESPACE", "a b"},
                             std::pair{"STITCH_REMOTE_CACHE_TIMEOUT_MS", "0"},
                             std::pair{"STITCH_REMOTE_CACHE_TTL", "-1"},
                             std::pair{"STITCH_REMOTE_CACHE_RETRY_MS", "soon"}}) {
    EnvGuard bad(name, value);
    try {
      remoteCacheConfigFromEnv();
      ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

// The remote layer exists only with a fleet key: without one, the configuration is an error naming
// both ways to give it, as a malformed value is; from the environment and from the engine option.
TEST(RemoteCacheConfig, RequiresAFleetKey) {
  if (!remoteCacheAvailable()) GTEST_SKIP() << "built without hiredis (libhiredis-dev)";
  EnvGuard key("STITCH_CACHE_KEY", nullptr);
  EnvGuard keyFile("STITCH_CACHE_KEY_FILE", nullptr);
  EnvGuard url("STITCH_REMOTE_CACHE", "redis://10.1.2.3:6379");
  for (int fromOption = 0; fromOption < 2; ++fromOption) {
    try {
      if (fromOption) remoteCacheConfigFromOption("redis://10.1.2.3:6379");
      else remoteCacheConfigFromEnv();
      ADD_FAILURE() << "a remote layer without a fleet key was accepted";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(m.find(fromOption ? "remote_cache=redis://10.1.2.3:6379"
                                  : "STITCH_REMOTE_CACHE=redis://10.1.2.3:6379"),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("needs a fleet key"), std::string::npos) << m;
      EXPECT_NE(m.find("STITCH_CACHE_KEY "), std::string::npos) << m;
      EXPECT_NE(m.find("STITCH_CACHE_KEY_FILE"), std::string::npos) << m;
    }
  }
  // A layer made in code without one is refused as well.
  RemoteCacheConfig c = parseRemoteCacheUrl("redis://10.1.2.3", "test");
  EXPECT_THROW(RemoteCache{c}, Error);
  // "off" needs none.
  EnvGuard off("STITCH_REMOTE_CACHE", "off");
  EXPECT_FALSE(remoteCacheConfigFromEnv());
}

TEST_F(RemoteCacheTest, StoresVerifiedEntriesUnderNamespacedVersionedNames) {
  RemoteCache remote(configFor(*server_));
  const CacheKey key = keyOf("a");
  EXPECT_FALSE(remote.load(key));
  remote.store(key, payloadOf(key));
  const std::string name = remote.nameFor(key);
  EXPECT_EQ(name, fmt::format("stitch:e{}:{:016x}", kDiskFormatVersion, key.hash()));
  bool found = false;
  // The value is exactly a disk entry.
  EXPECT_EQ(server_->get(name, &found),
            asString(encodeEntry(*fleetSecret(), key.canonical(), payloadOf(key))));
  EXPECT_TRUE(found);
  std::optional<std::vector<uint8_t>> back = remote.load(key);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, payloadOf(key));
  CacheStats s = remote.stats();
  EXPECT_EQ(s.remoteHits, 1u);
  EXPECT_EQ(s.remoteMisses, 1u);
  EXPECT_EQ(s.remoteWrites, 1u);
  EXPECT_EQ(s.remoteErrors, 0u);
}

TEST_F(RemoteCacheTest, NamespacesAndDatabasesKeepFleetsApart) {
  RemoteCacheConfig a = configFor(*server_), b = a, c = a;
  b.nameSpace = "other";
  c.db = 1;
  RemoteCache ra(a), rb(b), rc(c);
  const CacheKey key = keyOf("shared");
  ra.store(key, payloadOf(key));
  EXPECT_TRUE(ra.load(key));
  EXPECT_FALSE(rb.load(key));
  EXPECT_FALSE(rc.load(key));
}

TEST_F(RemoteCacheTest, ValuesLiveForTheirTtl) {
  RemoteCacheConfig c = configFor(*server_);
  c.ttlSeconds = 100;
  RemoteCache withTtl(c);
  c.ttlSeconds = 0;
  RemoteCache forever(c);
  const CacheKey k1 = keyOf("ttl"), k2 = keyOf("forever");
  withTtl.store(k1, payloadOf(k1));
  forever.store(k2, payloadOf(k2));
  const long long ttl = server_->integer({"TTL", withTtl.nameFor(k1)});
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 100);
  EXPECT_EQ(server_->integer({"TTL", forever.nameFor(k2)}), -1);  // no expiry

  // A hit restarts the TTL (GETEX): as if 95 of the 100 seconds had passed, then a read.
  ASSERT_EQ(server_->integer({"EXPIRE", withTtl.nameFor(k1), "5"}), 1);
  ASSERT_TRUE(withTtl.load(k1));
  EXPECT_GT(server_->integer({"TTL", withTtl.nameFor(k1)}), 5);
  ASSERT_TRUE(forever.load(k2));
  EXPECT_EQ(server_->integer({"TTL", forever.nameFor(k2)}), -1);  // still none
  EXPECT_EQ(withTtl.stats().remoteErrors + forever.stats().remoteErrors, 0u);
}

// A server that refuses GETEX (before Redis 6.2, or an ACL without it) is read with GET: hits
// still hit, nothing counts as an error, and a TTL counts from the write.
TEST_F(RemoteCacheTest, AServerWithoutGetexIsReadWithGet) {
  ASSERT_EQ(server_->command({"ACL", "SETUSER", "default", "-getex"}).rfind("+OK", 0), 0u);
  RemoteCacheConfig c = configFor(*server_);
  c.ttlSeconds = 100;
  RemoteCache remote(c);
  const CacheKey key = keyOf("old-server");
  remote.store(key, payloadOf(key));
  ASSERT_EQ(server_->integer({"EXPIRE", remote.nameFor(key), "50"}), 1);
  for (int i = 0; i < 3; ++i) {
    std::optional<std::vector<uint8_t>> v = remote.load(key);
    ASSERT_TRUE(v) << i;
    EXPECT_EQ(*v, payloadOf(key));
  }
  EXPECT_LE(server_->integer({"TTL", remote.nameFor(key)}), 50);  // not restarted
  EXPECT_EQ(remote.stats().remoteHits, 3u);
  EXPECT_EQ(remote.stats().remoteErrors, 0u);
}

TEST_F(RemoteCacheTest, CorruptTruncatedForeignAndOtherVersionValuesAreMissesAndReplaced) {
  RemoteCache remote(configFor(*server_));
  const CacheKey key = keyOf("victim");
  const std::string name = remote.nameFor(key);
  const CacheSecret& secret = *fleetSecret();
  const std::string good = asString(encodeEntry(secret, key.canonical(), payloadOf(key)));

  std::string flipped = good;
  flipped.back() ^= 0x5a;  // a payload byte
  std::string otherFormat = good;
  otherFormat[8] = static_cast<char>(kDiskFormatVersion + 1);  // the header's format version
  CacheKey otherRelease = key;
  otherRelease.version = "0.0.1+someone-else";  // another library version's entry, same name
  const CacheKey foreignKey = keyOf("someone else");
  const std::vector<std::pair<const char*, std::string>> bad = {
      {"garbage", "not an entry at all"},
      {"truncated", good.substr(0, good.size() - 3)},
      {"corrupt", flipped},
      {"other format version", otherFormat},
      {"other library version",
       asString(encodeEntry(secret, otherRelease.canonical(), payloadOf(key)))},
      {"foreign key", asString(encodeEntry(secret, foreignKey.canonical(), payloadOf(foreignKey)))},
      {"empty", ""},
  };
  uint64_t corrupt = 0;
  for (const auto& [what, value] : bad) {
    ASSERT_TRUE(server_->set(name, value)) << what;
    EXPECT_FALSE(remote.load(key)) << what;
    EXPECT_EQ(remote.stats().corruptEntries, ++corrupt) << what;
    // A cache over it compiles and overwrites the value with a good one.
    TempDir dir;
    Cache cache(4, std::make_unique<DiskCache>(dir.path()), RemoteCache::shared(remote.config()));
    std::atomic<int> compiles{0};
    EXPECT_EQ(get(cache, key, compiles)->bytes, payloadOf(key)) << what;
    EXPECT_EQ(compiles.load(), 1) << what;
    bool found = false;
    EXPECT_EQ(server_->get(name, &found), good) << what;
  }
}

// Issue 33: one who can write to the server, without the fleet key, changes a value's payload and
// redoes every check that needs no key: the tag recomputed under a key of theirs, or a format-2
// entry with its FNV-1a checksum recomputed (what the old format allowed), or the payload swapped
// under the old tag. Each is a miss, compiled again and overwritten on the server; the forged
// payload is never loaded, and never reaches the disk of the machine that read it.
TEST_F(RemoteCacheTest, AForgedValueIsRebuiltNeverRunAndNeverReachesTheDisk) {
  const RemoteCacheConfig config = configFor(*server_);
  const CacheKey key = keyOf("forged");
  const std::string name = RemoteCache(config).nameFor(key);
  const std::string canon = key.canonical();
  const std::vector<uint8_t> evil(4096, 0xcc);  // int3 after int3: what a forger would run
  const std::string good = asString(encodeEntry(*config.secret, canon, payloadOf(key)));
  std::string format2 = "STITCHK1";
  auto le = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) format2 += static_cast<char>(v >> (8 * i));
  };
  le(2, 4);
  le(canon.size(), 4);
  le(evil.size(), 8);
  le(fnv1a64(evil), 8);
  format2 += canon + asString(evil);
  std::string tagKept = good.substr(0, good.size() - payloadOf(key).size()) + asString(evil);
  for (int i = 0; i < 8; ++i) tagKept[16 + i] = static_cast<char>(evil.size() >> (8 * i));
  const std::vector<std::pair<const char*, std::string>> forgeries = {
      {"tag under the forger's key",
       asString(encodeEntry(CacheSecret("the forger's own key, 32 bytes or more", "forger"), canon,
                            evil))},
      {"format 2, checksum recomputed", format2},
      {"payload swapped, tag kept", tagKept},
  };
  for (const auto& [what, value] : forgeries) {
    ASSERT_TRUE(server_->set(name, value)) << what;
    TempDir dir;
    Cache cache(4, std::make_unique<DiskCache>(dir.path()), std::make_shared<RemoteCache>(config));
    std::atomic<int> compiles{0};
    LogCapture log;
    std::shared_ptr<Kernel> k = cache.getOrCompile(
        key,
        [&] {
          ++compiles;
          // The forged value never reached the disk: the disk holds nothing for this key yet.
          EXPECT_FALSE(std::filesystem::exists(cache.disk()->pathFor(key))) << what;
          return payloadOf(key);
        },
        [&](const std::vector<uint8_t>& b) {
          EXPECT_NE(b, evil) << what << ": the forged payload was loaded";
          return std::make_shared<Kernel>(Kernel{b});
        });
    EXPECT_EQ(k->bytes, payloadOf(key)) << what;
    EXPECT_EQ(compiles.load(), 1) << what;
    EXPECT_EQ(cache.stats().corruptEntries, 1u) << what;
    EXPECT_NE(log.text().find("ignoring entry " + name), std::string::npos) << log.text();
    bool found = false;
    EXPECT_EQ(server_->get(name, &found), good) << what << ": not overwritten";
    EXPECT_EQ(DiskCache(dir.path()).load(key), payloadOf(key)) << what;
  }
}

TEST_F(RemoteCacheTest, ARemoteHitFillsTheDiskAndCompilesNothing) {
  const RemoteCacheConfig config = configFor(*server_);
  TempDir d1, d2;
  std::atomic<int> compiles{0};
  {
    Cache first(4, std::make_unique<DiskCache>(d1.path()), std::make_shared<RemoteCache>(config));
    get(first, keyOf("k"), compiles);
  }
  Cache second(4, std::make_unique<DiskCache>(d2.path()), std::make_shared<RemoteCache>(config));
  EXPECT_EQ(get(second, keyOf("k"), compiles)->bytes, payloadOf(keyOf("k")));
  EXPECT_EQ(compiles.load(), 1);
  CacheStats s = second.stats();
  EXPECT_EQ(s.diskMisses, 1u);
  EXPECT_EQ(s.remoteHits, 1u);
  EXPECT_EQ(s.diskWrites, 1u);  // filled from the remote
  // So a third process on the second machine finds it on its disk, with the server gone.
  server_->kill();
  Cache third(4, std::make_unique<DiskCache>(d2.path()), std::make_shared<RemoteCache>(config));
  get(third, keyOf("k"), compiles);
  EXPECT_EQ(compiles.load(), 1);
  EXPECT_EQ(third.stats().diskHits, 1u);
  EXPECT_EQ(third.stats().remoteErrors, 0u);  // never asked
}

TEST_F(RemoteCacheTest, AServerKilledMidRunFailsNothingAndIsUsedAgainWhenBack) {
  RemoteCacheConfig config = configFor(*server_);
  config.retryMs = 200;
  auto remote = std::make_shared<RemoteCache>(config);
  TempDir dir;
  Cache cache(64, std::make_unique<DiskCache>(dir.path()), remote);
  std::atomic<int> compiles{0};
  get(cache, keyOf("before"), compiles);
  EXPECT_EQ(remote->stats().remoteWrites, 1u);

  server_->kill();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(get(cache, keyOf("during" + std::to_string(i)), compiles)->bytes,
              payloadOf(keyOf("during" + std::to_string(i))));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(compiles.load(), 21);
  // The first failure drops the connection; the others skip the server until the retry time.
  const CacheStats down = remote->stats();
  EXPECT_GE(down.remoteErrors, 1u);
  EXPECT_LE(down.remoteErrors, 3u);
  EXPECT_LT(seconds, 2.0) << "a dead server must not cost a timeout per lookup";

  std::string why;
  ASSERT_TRUE(server_->restart(&why)) << why;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past the retry time
  get(cache, keyOf("after"), compiles);
  EXPECT_GT(remote->stats().remoteWrites, down.remoteWrites) << "reconnected after the retry time";
  bool found = false;
  server_->get(remote->nameFor(keyOf("after")), &found);
  EXPECT_TRUE(found);
}

TEST_F(RemoteCacheTest, AnUnreachableServerCostsOneTimeoutPerRetryInterval) {
  RemoteCacheConfig config = configFor(*server_);
  server_->kill();  // nothing listens on the port now: connections are refused
  config.retryMs = 60000;
  RemoteCache remote(config);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(remote.load(keyOf(std::to_string(i))));
    remote.store(keyOf(std::to_string(i)), payloadOf(keyOf(std::to_string(i))));
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  EXPECT_EQ(remote.stats().remoteErrors, 1u);
  EXPECT_EQ(remote.stats().remoteMisses, 100u);
}

TEST_F(RemoteCacheTest, ConcurrentWritersLeaveOnlyWholeEntries) {
  const RemoteCacheConfig config = configFor(*server_);
  constexpr int kThreads = 8, kKeys = 24;
  std::vector<TempDir> dirs(kThreads);
  std::atomic<int> compiles{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      // Each thread is a process of its own: its own memory and disk layers, its own connection.
      Cache cache(kKeys, std::make_unique<DiskCache>(dirs[t].path()),
                  std::make_shared<RemoteCache>(config));
      for (int round = 0; round < 2; ++round)
        for (int k = 0; k < kKeys; ++k) {
          const CacheKey key = keyOf("key" + std::to_string((k + t) % kKeys));
          if (get(cache, key, compiles)->bytes != payloadOf(key)) ++wrong;
        }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GE(compiles.load(), kKeys);
  RemoteCache check(config);
  for (int k = 0; k < kKeys; ++k) {
    const CacheKey key = keyOf("key" + std::to_string(k));
    std::optional<std::vector<uint8_t>> v = check.load(key);
    ASSERT_TRUE(v) << k;
    EXPECT_EQ(*v, payloadOf(key));
  }
  EXPECT_EQ(check.stats().corruptEntries, 0u);
}

// Within a process every layer naming one server shares one connection (RemoteCache::shared):
// the engines' compile threads use it at once, and it survives the server dying and coming back
// under them. The tsan lane runs this (STITCH_TEST_SUBSET=concurrency).
TEST_F(RemoteCacheTest, ThreadsSharingOneConnectionGetWholeEntriesThroughAnOutage) {
  RemoteCacheConfig config = configFor(*server_);
  config.nameSpace = "shared-connection";
  config.retryMs = 20;
  const std::shared_ptr<RemoteCache> remote = RemoteCache::shared(config);
  ASSERT_EQ(remote, RemoteCache::shared(config)) << "one instance per configuration";
  constexpr int kThreads = 6, kKeys = 40;
  std::vector<TempDir> dirs(kThreads);
  std::atomic<int> compiles{0}, wrong{0}, done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      // Its own memory and disk layers (an engine of its own), the process's one connection.
      Cache cache(4, std::make_unique<DiskCache>(dirs[t].path()), remote);
      for (int k = 0; k < kKeys; ++k) {
        const CacheKey key = keyOf("shared" + std::to_string((k * 7 + t) % kKeys));
        if (get(cache, key, compiles)->bytes != payloadOf(key)) ++wrong;
      }
      ++done;
    });
  // The server dies while the threads run, and comes back.
  while (done.load() == 0 && compiles.load() < kKeys / 2) std::this_thread::yield();
  server_->kill();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  std::string why;
  const bool back = server_->restart(&why);
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GE(compiles.load(), kKeys);
  EXPECT_LE(compiles.load(), kThreads * kKeys);
  EXPECT_EQ(remote->stats().corruptEntries, 0u);

  // Back: the shared connection serves again once the retry time has passed.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const CacheKey after = keyOf("after-the-outage");
  remote->store(after, payloadOf(after));
  std::optional<std::vector<uint8_t>> v = remote->load(after);
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, payloadOf(after));
}

// A forked child (a DataLoader worker) must not speak on its parent's socket, where their replies
// would interleave: its first operation opens a connection of its own, and the parent's goes on.
TEST_F(RemoteCacheTest, AForkedChildOpensAConnectionOfItsOwn) {
  RemoteCache remote(configFor(*server_));
  const CacheKey parentKey = keyOf("parent"), childKey = keyOf("child");
  remote.store(parentKey, payloadOf(parentKey));  // connected
  auto connectionsSoFar = [&] {
    const std::string info = server_->command({"INFO", "stats"});
    const std::string field = "total_connections_received:";
    const size_t at = info.find(field);
    return at == std::string::npos ? -1 : std::stoll(info.substr(at + field.size()));
  };
  const long long before = connectionsSoFar();
  ASSERT_GT(before, 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    remote.store(childKey, payloadOf(childKey));
    std::optional<std::vector<uint8_t>> v = remote.load(parentKey);
    ::_exit(v && *v == payloadOf(parentKey) && remote.stats().remoteErrors == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's store or load failed";
  // The child's connection and this count's own: the child did not use the parent's.
  EXPECT_EQ(connectionsSoFar() - before, 2);
  // The parent's connection is still open and in step.
  std::optional<std::vector<uint8_t>> v = remote.load(childKey);
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, payloadOf(childKey));
  EXPECT_EQ(remote.stats().remoteErrors, 0u);
  EXPECT_EQ(connectionsSoFar() - before, 3)
      << "the parent kept its connection: two counts, the child";
}

// The layers' hit, miss and write counters count kernels: a program's entry (or a machine
// profile) goes through the same layers and is verified alike, but only a damaged value of it is
// counted (EntryKind).
TEST_F(RemoteCacheTest, OnlyKernelEntriesCountAsHitsMissesAndWrites) {
  TempDir dir;
  auto remote = std::make_shared<RemoteCache>(configFor(*server_));
  PersistentLayers layers(std::make_unique<DiskCache>(dir.path()), remote);
  const CacheKey program = keyOf("program"), kernel = keyOf("kernel");
  EXPECT_FALSE(layers.load(program, EntryKind::Program));
  layers.store(program, payloadOf(program), EntryKind::Program);
  ASSERT_TRUE(layers.load(program, EntryKind::Program));  // from the disk
  std::filesystem::remove(layers.disk()->pathFor(program));
  ASSERT_TRUE(layers.load(program, EntryKind::Program));  // from the remote, onto the disk
  EXPECT_TRUE(std::filesystem::exists(layers.disk()->pathFor(program)));
  layers.publish(program, EntryKind::MachineProfile);
  CacheStats s = layers.stats();
  EXPECT_EQ(s.diskHits + s.diskMisses + s.diskWrites, 0u) << s.toString();
  EXPECT_EQ(s.remoteHits + s.remoteMisses + s.remoteWrites + s.remoteErrors, 0u) << s.toString();
  // A damaged value is counted whatever it holds.
  std::filesystem::remove(layers.disk()->pathFor(program));
  ASSERT_TRUE(server_->set(remote->nameFor(program), "not an entry"));
  EXPECT_FALSE(layers.load(program, EntryKind::Program));
  EXPECT_EQ(layers.stats().corruptEntries, 1u);
  // A kernel's lookups are counted, layer by layer.
  EXPECT_FALSE(layers.load(kernel));
  layers.store(kernel, payloadOf(kernel));
  ASSERT_TRUE(layers.load(kernel));
  s = layers.stats();
  EXPECT_EQ(s.diskMisses, 1u);
  EXPECT_EQ(s.remoteMisses, 1u);
  EXPECT_EQ(s.diskWrites, 1u);
  EXPECT_EQ(s.remoteWrites, 1u);
  EXPECT_EQ(s.diskHits, 1u);
  EXPECT_EQ(s.remoteHits, 0u);
}

TEST_F(RemoteCacheTest, AuthAndSelectAreSent) {
  ASSERT_TRUE(server_->command({"CONFIG", "SET", "requirepass", "pw"}).rfind("+OK", 0) == 0);
  RemoteCacheConfig config = parseRemoteCacheUrl(
      "redis://:pw@127.0.0.1:" + std::to_string(server_->port()) + "/2", "test");
  config.ttlSeconds = 0;
  config.secret = fleetSecret();
  RemoteCache remote(config);
  const CacheKey key = keyOf("secret");
  remote.store(key, payloadOf(key));
  EXPECT_TRUE(remote.load(key));
  EXPECT_EQ(remote.stats().remoteErrors, 0u);
  config.password = "wrong";
  RemoteCache wrong(config);
  EXPECT_FALSE(wrong.load(key));
  EXPECT_EQ(wrong.stats().remoteErrors, 1u);
}

// An error reply is a failure of the layer, as a dead server is (issue 33: one warning per GET and
// SET, never skipped): a server that requires a password none was given answers NOAUTH; one
// warning, one error, then the layer is skipped for the retry interval.
TEST_F(RemoteCacheTest, ANoauthServerIsOneWarningThenSkipped) {
  ASSERT_TRUE(server_->command({"CONFIG", "SET", "requirepass", "pw"}).rfind("+OK", 0) == 0);
  RemoteCacheConfig config = configFor(*server_);
  config.retryMs = 60000;
  LogCapture log;
  RemoteCache remote(config);
  for (int i = 0; i < 20; ++i) {
    const CacheKey key = keyOf("noauth" + std::to_string(i));
    EXPECT_FALSE(remote.load(key));
    remote.store(key, payloadOf(key));
  }
  EXPECT_EQ(remote.stats().remoteErrors, 1u);
  EXPECT_EQ(remote.stats().remoteWrites, 0u);
  EXPECT_EQ(log.count("remote cache"), 1u) << log.text();
  EXPECT_NE(log.text().find("NOAUTH"), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("trying again in 60000 ms"), std::string::npos) << log.text();
}

// An error reply to a write (here OOM: maxmemory reached under noeviction) likewise.
TEST_F(RemoteCacheTest, AnErrorReplyToAWriteIsOneWarningThenSkipped) {
  ASSERT_EQ(server_->command({"CONFIG", "SET", "maxmemory-policy", "noeviction"}).rfind("+OK", 0),
            0u);
  ASSERT_EQ(server_->command({"CONFIG", "SET", "maxmemory", "1"}).rfind("+OK", 0), 0u);
  RemoteCacheConfig config = configFor(*server_);
  config.retryMs = 60000;
  LogCapture log;
  RemoteCache remote(config);
  for (int i = 0; i < 20; ++i) {
    const CacheKey key = keyOf("full" + std::to_string(i));
    remote.store(key, payloadOf(key));
    EXPECT_FALSE(remote.load(key));
  }
  EXPECT_EQ(remote.stats().remoteErrors, 1u);
  EXPECT_EQ(log.count("remote cache"), 1u) << log.text();
  EXPECT_NE(log.text().find("OOM"), std::string::npos) << log.text();
}

// Issue 33: a server that sends its reply one byte per 100 ms, so that each read returns within a
// per-read timeout, held `stitch run` for good. One deadline covers the whole command: the load
// gives up after the timeout, says so in words, and the layer is then skipped.
TEST(RemoteCacheDeadline, ATrickledReplyCostsAtMostTheTimeout) {
  if (!remoteCacheAvailable()) GTEST_SKIP() << "built without hiredis (libhiredis-dev)";
  auto server = std::make_unique<TricklingServer>();
  ASSERT_TRUE(server->ok());
  RemoteCacheConfig config = configFor(server->url());
  config.timeoutMs = 200;
  config.retryMs = 60000;
  LogCapture log;
  RemoteCache remote(config);
  using Clock = std::chrono::steady_clock;
  auto msSince = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  const auto t0 = Clock::now();
  auto pending = std::async(std::launch::async, [&] { return remote.load(keyOf("slow")); });
  if (pending.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    server.reset();  // closes the connection, which releases the load
    pending.wait();
    FAIL() << "a reply trickled one byte per 100 ms held a load for 10 s (timeout 200 ms)";
  }
  EXPECT_FALSE(pending.get());
  const double ms = msSince(t0);
  std::printf("trickling server: the load gave up after %.1f ms (timeout 200 ms)\n", ms);
  EXPECT_GE(ms, 190);  // it waited the deadline out
  EXPECT_LT(ms, 600);  // and no longer (slack for a loaded machine)
  EXPECT_EQ(remote.stats().remoteErrors, 1u);
  EXPECT_NE(log.text().find("timed out after 200 ms"), std::string::npos) << log.text();
  EXPECT_EQ(log.text().find("Resource temporarily unavailable"), std::string::npos) << log.text();
  // Then the layer is skipped: no more waiting, no more connections.
  const auto t1 = Clock::now();
  for (int i = 0; i < 20; ++i) {
    EXPECT_FALSE(remote.load(keyOf(std::to_string(i))));
    remote.store(keyOf(std::to_string(i)), payloadOf(keyOf(std::to_string(i))));
  }
  EXPECT_LT(msSince(t1), 100);
  EXPECT_EQ(remote.stats().remoteErrors, 1u);
  EXPECT_EQ(server->connections(), 1);
  // A write is bounded the same way.
  RemoteCache writer(config);
  const auto t2 = Clock::now();
  auto written = std::async(std::launch::async,
                            [&] { writer.store(keyOf("slow write"), payloadOf(keyOf("w"))); });
  if (written.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    server.reset();
    written.wait();
    FAIL() << "a reply trickled one byte per 100 ms held a store for 10 s (timeout 200 ms)";
  }
  EXPECT_LT(msSince(t2), 600);
  EXPECT_EQ(writer.stats().remoteErrors, 1u);
  EXPECT_EQ(writer.stats().remoteWrites, 0u);
}

// A server that accepts connections and never answers: the connect and the command share the one
// deadline (a listening socket whose backlog is full does not even accept).
TEST(RemoteCacheDeadline, ASilentServerCostsAtMostTheTimeout) {
  if (!remoteCacheAvailable()) GTEST_SKIP() << "built without hiredis (libhiredis-dev)";
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 1), 0);  // connections complete in the kernel; nobody reads them
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
  RemoteCacheConfig config = configFor("redis://127.0.0.1:" + std::to_string(ntohs(a.sin_port)));
  config.timeoutMs = 150;
  LogCapture log;
  RemoteCache remote(config);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(remote.load(keyOf("silence")));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(ms, 140);
  EXPECT_LT(ms, 500);
  EXPECT_NE(log.text().find("timed out after 150 ms"), std::string::npos) << log.text();
  ::close(listener);
}
