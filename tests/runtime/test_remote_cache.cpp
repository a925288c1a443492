// The kernel cache's remote layer (runtime/remote_cache.h) against a real redis-server on a
// loopback port (tests/common/redis_server.h): configuration, verified values, a server that dies
// and comes back, corrupt, truncated, foreign and other-version values, TTLs, namespaces and
// concurrent writers. Tests that need the server skip, saying why, when it cannot start.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/env_guard.h"
#include "common/redis_server.h"
#include "common/temp_dir.h"
#include "runtime/kernel_cache.h"
#include "runtime/remote_cache.h"
#include "support/error.h"

using namespace stitch;
using namespace stitch::rt;
using stitch::testing::EnvGuard;
using stitch::testing::RedisServer;
using stitch::testing::TempDir;

namespace {

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

RemoteCacheConfig configFor(const RedisServer& s) {
  RemoteCacheConfig c = parseRemoteCacheUrl(s.url(), "test");
  c.timeoutMs = 500;
  c.retryMs = 100;
  c.ttlSeconds = 0;
  return c;
}

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

TEST_F(RemoteCacheTest, StoresVerifiedEntriesUnderNamespacedVersionedNames) {
  RemoteCache remote(configFor(*server_));
  const CacheKey key = keyOf("a");
  EXPECT_FALSE(remote.load(key));
  remote.store(key, payloadOf(key));
  const std::string name = remote.nameFor(key);
  EXPECT_EQ(name, fmt::format("stitch:e{}:{:016x}", kDiskFormatVersion, key.hash()));
  bool found = false;
  // The value is exactly a disk entry.
  EXPECT_EQ(server_->get(name, &found), asString(encodeEntry(key.canonical(), payloadOf(key))));
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
  const std::string good = asString(encodeEntry(key.canonical(), payloadOf(key)));

  std::string flipped = good;
  flipped.back() ^= 0x5a;  // payload checksum
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
      {"other library version", asString(encodeEntry(otherRelease.canonical(), payloadOf(key)))},
      {"foreign key", asString(encodeEntry(foreignKey.canonical(), payloadOf(foreignKey)))},
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
