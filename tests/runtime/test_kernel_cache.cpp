// The kernel cache (runtime/kernel_cache.h): the key, the memory LRU, the on-disk entries and how
// they survive corruption, concurrent threads and concurrent processes, and the environment.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <latch>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/env_guard.h"
#include "common/log_capture.h"
#include "common/temp_dir.h"
#include "runtime/kernel_cache.h"
#include "runtime/support/error.h"
#include "runtime/support/hash.h"
#include "runtime/support/sha256.h"

using namespace stitch;
using namespace stitch::rt;
namespace fs = std::filesystem;

namespace {

using stitch::testing::TempDir;

using stitch::testing::EnvGuard;
using stitch::testing::LogCapture;

// A program part with a NUL and a newline in it: parts are bytes, not text.
const std::string kProgramBytes("\x01\x00\x00\x00prog\nram", 12);

CacheKey sampleKey() {
  CacheKey k;
  k.add("program", kProgramBytes).add("target", "sm_90").add("options", "-O3 --use_fast_math");
  k.version = "0.0.0-test";  // pinned, so the golden hash does not move with each release
  return k;
}

CacheKey keyWithShape(int64_t rows) {
  CacheKey k = sampleKey();
  k.add("rows", std::to_string(rows));
  return k;
}

// Deterministic "compiled bytes" for a key: its canonical text, then a pattern.
std::vector<uint8_t> bytesFor(const CacheKey& key, size_t extra = 1000) {
  std::string c = key.canonical();
  std::vector<uint8_t> out(c.begin(), c.end());
  uint64_t h = key.hash();
  for (size_t i = 0; i < extra; ++i) out.push_back(static_cast<uint8_t>((h >> (i % 64)) + i));
  return out;
}

struct Kernel {
  std::vector<uint8_t> bytes;
};

std::shared_ptr<Kernel> loadKernel(const std::vector<uint8_t>& bytes) {
  return std::make_shared<Kernel>(Kernel{bytes});
}

using Cache = KernelCache<Kernel>;

std::unique_ptr<Cache> cacheIn(const fs::path& dir, size_t capacity = 16) {
  return std::make_unique<Cache>(capacity, std::make_unique<DiskCache>(dir));
}

// getOrCompile with a compile that counts its calls.
std::shared_ptr<Kernel> get(Cache& cache, const CacheKey& key, std::atomic<int>& compiles) {
  return cache.getOrCompile(
      key,
      [&] {
        ++compiles;
        return bytesFor(key);
      },
      loadKernel);
}

std::vector<uint8_t> readFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

void writeFile(const fs::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// The files in dir, but for this user's key file (runtime/cache_secret.h), which the first store
// makes.
std::vector<fs::path> filesIn(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename() != directorySecretName()) out.push_back(e.path());
  return out;
}

// An entry file's bytes with a 64-bit little-endian field read at `at`.
uint64_t littleEndian(const std::vector<uint8_t>& file, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(file[at + i]) << (8 * i);
  return v;
}

// ---------------------------------------------------------------------------------------------
// The key

// The canonical bytes spelled out independently of the implementation: the format line, the
// part count, then each name and value and the version, each prefixed by its length as 8 bytes
// little-endian.
std::string lengthPrefixed(std::string_view text) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((text.size() >> (8 * i)) & 0xff));
  out.append(text);
  return out;
}

TEST(CacheKey, CanonicalBytesNameEveryPart) {
  std::string want = lengthPrefixed("stitch-kernel-key/2\n");
  want += std::string("\x03\0\0\0\0\0\0\0", 8);
  for (auto [name, value] :
       {std::pair<std::string_view, std::string_view>{"program", kProgramBytes},
        {"target", "sm_90"},
        {"options", "-O3 --use_fast_math"}})
    want += lengthPrefixed(name) + lengthPrefixed(value);
  want += lengthPrefixed("0.0.0-test");
  EXPECT_EQ(sampleKey().canonical(), want);
}

// A golden value: the hash names files on disk, so it must be the same on every machine, compiler
// and run. If this test fails, the canonical format or the hash changed: that orphans every
// user's cache (harmless, but it must be deliberate), so bump kCanonicalKeyFormat and update the
// value here.
TEST(CacheKey, GoldenHash) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);  // the FNV-1a 64 reference values
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(sampleKey().hash(), 0xe6fc8e7500892a35ULL);  // computed independently (Python)
  EXPECT_EQ(sampleKey().hash(), fnv1a64(sampleKey().canonical()));
}

TEST(CacheKey, DefaultVersionIsTheLibraryVersion) {
  EXPECT_EQ(CacheKey{}.version, std::string(STITCH_VERSION_STRING) + "+" + codeIdentity());
  EXPECT_EQ(std::string(codeIdentity()).size(), 32u);
}

TEST(CacheKey, EveryPartChangesTheKey) {
  const CacheKey base = sampleKey();
  std::vector<std::pair<std::string, CacheKey>> variants;
  auto vary = [&](std::string what, auto change) {
    CacheKey k = base;
    change(k);
    variants.emplace_back(std::move(what), std::move(k));
  };
  vary("program byte", [](CacheKey& k) { k.parts[0].bytes[1] = '\x01'; });
  vary("program length", [](CacheKey& k) { k.parts[0].bytes.push_back('\0'); });
  vary("part name", [](CacheKey& k) { k.parts[1].name = "arch"; });
  vary("target", [](CacheKey& k) { k.parts[1].bytes = "sm_80"; });
  vary("options", [](CacheKey& k) { k.parts[2].bytes = "-O3"; });
  vary("version", [](CacheKey& k) { k.version = "0.0.1-test"; });
  vary("one part more", [](CacheKey& k) { k.add("", ""); });
  vary("one part less", [](CacheKey& k) { k.parts.pop_back(); });
  vary("part order", [](CacheKey& k) { std::swap(k.parts[1], k.parts[2]); });
  // Moving bytes between parts, or between a name and its value, must not serialize alike.
  vary("target/options boundary", [](CacheKey& k) {
    k.parts[1].bytes = "sm_90-O3";
    k.parts[2].bytes = " --use_fast_math";
  });
  vary("name/value boundary", [](CacheKey& k) {
    k.parts[1].name = "targetsm";
    k.parts[1].bytes = "_90";
  });
  std::set<uint64_t> hashes = {base.hash()};
  for (const auto& [what, k] : variants) {
    EXPECT_NE(k.canonical(), base.canonical()) << what;
    EXPECT_NE(k.hash(), base.hash()) << what;
    hashes.insert(k.hash());
  }
  EXPECT_EQ(hashes.size(), variants.size() + 1);
}

// ---------------------------------------------------------------------------------------------
// The memory layer

TEST(LruCache, EvictsTheLeastRecentlyUsed) {
  LruCache<int> lru(3);
  lru.put("a", std::make_shared<int>(1));
  lru.put("b", std::make_shared<int>(2));
  lru.put("c", std::make_shared<int>(3));
  EXPECT_EQ(lru.keys(), (std::vector<std::string>{"c", "b", "a"}));
  ASSERT_NE(lru.get("a"), nullptr);  // a is now the most recent; b the least
  lru.put("d", std::make_shared<int>(4));
  EXPECT_EQ(lru.size(), 3u);
  EXPECT_EQ(lru.get("b"), nullptr);
  EXPECT_EQ(lru.keys(), (std::vector<std::string>{"d", "a", "c"}));
  lru.put("c", std::make_shared<int>(30));  // replacing refreshes
  lru.put("e", std::make_shared<int>(5));
  EXPECT_EQ(lru.keys(), (std::vector<std::string>{"e", "c", "d"}));
  EXPECT_EQ(*lru.get("c"), 30);
  lru.clear();
  EXPECT_EQ(lru.size(), 0u);
  EXPECT_EQ(lru.get("c"), nullptr);
}

TEST(LruCache, EvictionDoesNotFreeAHeldValue) {
  LruCache<int> lru(1);
  lru.put("a", std::make_shared<int>(7));
  std::shared_ptr<int> held = lru.get("a");
  lru.put("b", std::make_shared<int>(8));
  EXPECT_EQ(lru.get("a"), nullptr);
  EXPECT_EQ(*held, 7);
}

TEST(LruCache, CapacityZeroKeepsNothing) {
  LruCache<int> lru(0);
  lru.put("a", std::make_shared<int>(1));
  EXPECT_EQ(lru.size(), 0u);
  EXPECT_EQ(lru.get("a"), nullptr);
}

TEST(LruCache, ThreadSafe) {
  LruCache<std::string> lru(16);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        std::string key = "k" + std::to_string((i * 7 + t * 13) % 64);
        if (i % 3 == 0) {
          lru.put(key, std::make_shared<std::string>(key));
        } else if (auto v = lru.get(key); v && *v != key) {
          ++wrong;
        }
        if (lru.size() > 16) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(lru.size(), 16u);
  EXPECT_EQ(lru.keys().size(), 16u);
}

// ---------------------------------------------------------------------------------------------
// The disk layer

TEST(DiskCache, StoreLoadRoundTrip) {
  TempDir tmp;
  DiskCache disk(tmp.path() / "a" / "b");  // created on the first store, mkdir -p
  const CacheKey key = sampleKey();
  EXPECT_EQ(disk.load(key), std::nullopt);
  EXPECT_FALSE(fs::exists(tmp.path() / "a"));  // a load creates nothing
  const std::vector<uint8_t> payload = bytesFor(key, 100000);
  disk.store(key, payload);
  EXPECT_EQ(disk.pathFor(key), tmp.path() / "a" / "b" / fmt::format("{:016x}.stitchk", key.hash()));
  ASSERT_TRUE(fs::exists(disk.pathFor(key)));
  EXPECT_EQ(filesIn(disk.dir()).size(), 1u);  // no temporary file left behind
  EXPECT_EQ(disk.load(key), payload);
  // An empty payload is a valid entry too.
  CacheKey empty = keyWithShape(1);
  disk.store(empty, {});
  auto loaded = disk.load(empty);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_TRUE(loaded->empty());
  CacheStats s = disk.stats();
  EXPECT_EQ(s.diskHits, 2u);
  EXPECT_EQ(s.diskMisses, 1u);
  EXPECT_EQ(s.diskWrites, 2u);
  EXPECT_EQ(s.corruptEntries, 0u);
}

TEST(DiskCache, FileFormat) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  const CacheKey key = sampleKey();
  const std::vector<uint8_t> payload = {1, 2, 3, 4, 5};
  disk.store(key, payload);
  const std::vector<uint8_t> file = readFile(disk.pathFor(key));
  const std::string canon = key.canonical();
  ASSERT_EQ(file.size(), 56 + canon.size() + payload.size());
  EXPECT_EQ(std::string(file.begin(), file.begin() + 8), "STITCHK1");
  EXPECT_EQ(littleEndian(file, 8, 4),
            3u);  // kDiskFormatVersion, pinned: a change must be deliberate
  EXPECT_EQ(littleEndian(file, 12, 4), canon.size());
  EXPECT_EQ(littleEndian(file, 16, 8), payload.size());
  EXPECT_EQ(std::string(file.begin() + 56, file.begin() + 56 + canon.size()), canon);
  EXPECT_EQ(std::vector<uint8_t>(file.end() - 5, file.end()), payload);
  // The tag: HMAC-SHA-256 of the header's first 24 bytes, the key and the payload, under this
  // user's key of the directory, made by the first store: 64 hex digits, mode 0600.
  const fs::path keyFile = tmp.path() / directorySecretName();
  struct stat st {};
  ASSERT_EQ(::lstat(keyFile.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  std::vector<uint8_t> secret = readFile(keyFile);
  ASSERT_EQ(secret.size(), 65u);
  EXPECT_EQ(secret.back(), '\n');
  secret.pop_back();
  const Sha256Digest tag = HmacSha256(secret)
                               .begin()
                               .add(std::span<const uint8_t>(file.data(), 24))
                               .add(canon)
                               .add(payload)
                               .finish();
  EXPECT_EQ(std::vector<uint8_t>(file.begin() + 24, file.begin() + 56),
            std::vector<uint8_t>(tag.begin(), tag.end()));
  EXPECT_EQ(file, encodeEntry(*disk.secret(), canon, payload));
}

TEST(DiskCache, NewShapeMisses) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  disk.store(keyWithShape(4), bytesFor(keyWithShape(4)));
  EXPECT_TRUE(disk.load(keyWithShape(4)).has_value());
  EXPECT_EQ(disk.load(keyWithShape(5)), std::nullopt);
  EXPECT_EQ(disk.stats().diskMisses, 1u);
  EXPECT_EQ(disk.stats().corruptEntries, 0u);
}

TEST(DiskCache, ForeignFilesAreIgnored) {
  TempDir tmp;
  writeFile(tmp.path() / "README.txt", {'h', 'i'});
  writeFile(tmp.path() / "notakey.stitchk", {'x'});
  fs::create_directory(tmp.path() / "sub");
  auto cache = cacheIn(tmp.path());
  std::atomic<int> compiles{0};
  get(*cache, sampleKey(), compiles);
  EXPECT_EQ(compiles.load(), 1);
  EXPECT_EQ(readFile(tmp.path() / "README.txt"), (std::vector<uint8_t>{'h', 'i'}));
  EXPECT_TRUE(fs::exists(tmp.path() / "notakey.stitchk"));
  EXPECT_TRUE(fs::is_directory(tmp.path() / "sub"));
  EXPECT_EQ(cache->stats().corruptEntries, 0u);
}

// Each way an entry can go bad: detected, counted, warned about, compiled again and rewritten.
enum class Damage {
  FlipPayloadByte,
  FlipTagByte,
  FlipKeyByte,
  Truncate,
  TruncateHeader,
  Empty,
  TrailingBytes,
  WrongMagic,
  WrongVersion,
  ForeignFileWithTheRightName,
  AnotherKeysEntry,
  // Forgeries (issue 33): another payload, with every check a writer without the key can redo.
  ForgedUnderAnotherKey,  // the tag recomputed with a key the forger knows
  ForgedKeepingTheTag,    // the payload changed, the header and tag as they were
  ForgedFormat2,          // a format-2 entry with its FNV-1a checksum recomputed
};

class Corruption : public ::testing::TestWithParam<Damage> {};

// What a forger puts in an entry: code of theirs (here, bytes unlike any compile's).
std::vector<uint8_t> forgedPayload() { return std::vector<uint8_t>(3000, 0xcc); }

void damage(Damage d, const fs::path& dir, const CacheKey& key) {
  DiskCache disk(dir);
  const fs::path path = disk.pathFor(key);
  std::vector<uint8_t> file = readFile(path);
  ASSERT_GT(file.size(), 64u);
  switch (d) {
    case Damage::FlipPayloadByte: file.back() ^= 0x01; break;
    case Damage::FlipTagByte: file[27] ^= 0x80; break;
    case Damage::FlipKeyByte: file[60] ^= 0x01; break;
    case Damage::Truncate: file.resize(file.size() / 2); break;
    case Damage::TruncateHeader: file.resize(20); break;
    case Damage::Empty: file.clear(); break;
    case Damage::TrailingBytes: file.push_back(0); break;
    case Damage::WrongMagic: file[0] = 'X'; break;
    case Damage::WrongVersion: file[8] = kDiskFormatVersion + 1; break;
    case Damage::ForeignFileWithTheRightName: {
      std::string text = "#!/bin/sh\necho this is not a cache entry, but it is long enough\n";
      file.assign(text.begin(), text.end());
      break;
    }
    case Damage::AnotherKeysEntry: {
      // A well-formed entry of another key under this key's name (a hash collision, or a file
      // copied from elsewhere): a good tag, the wrong key.
      CacheKey other = keyWithShape(99);
      file = encodeEntry(*disk.secret(), other.canonical(), bytesFor(other));
      break;
    }
    case Damage::ForgedUnderAnotherKey:
      file = encodeEntry(CacheSecret("the forger's own key, 32 bytes or more long", "forger"),
                         key.canonical(), forgedPayload());
      break;
    case Damage::ForgedKeepingTheTag: {
      std::vector<uint8_t> forged = forgedPayload();
      file.resize(file.size() - bytesFor(key).size());
      file.insert(file.end(), forged.begin(), forged.end());
      for (int i = 0; i < 8; ++i) file[16 + i] = static_cast<uint8_t>(forged.size() >> (8 * i));
      break;
    }
    case Damage::ForgedFormat2: {
      // Format 2's layout: magic, version, K, P, FNV-1a 64 of the payload, key, payload.
      const std::string canon = key.canonical();
      const std::vector<uint8_t> forged = forgedPayload();
      file.assign(kDiskMagic.begin(), kDiskMagic.end());
      auto le = [&](uint64_t v, int n) {
        for (int i = 0; i < n; ++i) file.push_back(static_cast<uint8_t>(v >> (8 * i)));
      };
      le(2, 4);
      le(canon.size(), 4);
      le(forged.size(), 8);
      le(fnv1a64(forged), 8);
      file.insert(file.end(), canon.begin(), canon.end());
      file.insert(file.end(), forged.begin(), forged.end());
      break;
    }
  }
  writeFile(path, file);
}

TEST_P(Corruption, IsDetectedCountedAndRewritten) {
  TempDir tmp;
  const CacheKey key = sampleKey();
  std::atomic<int> compiles{0};
  {
    auto first = cacheIn(tmp.path());
    get(*first, key, compiles);
    ASSERT_EQ(compiles.load(), 1);
  }
  damage(GetParam(), tmp.path(), key);
  {
    LogCapture log;
    auto second = cacheIn(tmp.path());
    auto v = get(*second, key, compiles);
    EXPECT_EQ(compiles.load(), 2);  // never trusted: compiled again
    EXPECT_EQ(v->bytes, bytesFor(key));
    CacheStats s = second->stats();
    EXPECT_EQ(s.corruptEntries, 1u);
    EXPECT_EQ(s.diskHits, 0u);
    EXPECT_EQ(s.diskWrites, 1u);
    EXPECT_NE(log.text().find("corrupt"), std::string::npos) << log.text();
  }
  // The rewritten entry is good: a third process-like cache loads it without compiling.
  DiskCache disk(tmp.path());
  EXPECT_EQ(readFile(disk.pathFor(key)),
            encodeEntry(*disk.secret(), key.canonical(), bytesFor(key)));
  auto third = cacheIn(tmp.path());
  auto v = get(*third, key, compiles);
  EXPECT_EQ(compiles.load(), 2);
  EXPECT_EQ(v->bytes, bytesFor(key));
  EXPECT_EQ(third->stats().diskHits, 1u);
  EXPECT_EQ(third->stats().corruptEntries, 0u);
}

std::string damageName(const ::testing::TestParamInfo<Damage>& param) {
  static constexpr std::string_view kNames[] = {
      "FlipPayloadByte",     "FlipTagByte",
      "FlipKeyByte",         "Truncate",
      "TruncateHeader",      "Empty",
      "TrailingBytes",       "WrongMagic",
      "WrongVersion",        "ForeignFileWithTheRightName",
      "AnotherKeysEntry",    "ForgedUnderAnotherKey",
      "ForgedKeepingTheTag", "ForgedFormat2"};
  return std::string(kNames[static_cast<int>(param.param)]);
}

INSTANTIATE_TEST_SUITE_P(KernelCache, Corruption,
                         ::testing::Values(Damage::FlipPayloadByte, Damage::FlipTagByte,
                                           Damage::FlipKeyByte, Damage::Truncate,
                                           Damage::TruncateHeader, Damage::Empty,
                                           Damage::TrailingBytes, Damage::WrongMagic,
                                           Damage::WrongVersion,
                                           Damage::ForeignFileWithTheRightName,
                                           Damage::AnotherKeysEntry, Damage::ForgedUnderAnotherKey,
                                           Damage::ForgedKeepingTheTag, Damage::ForgedFormat2),
                         damageName);

TEST(DiskCache, CorruptEntryIsRemovedOnLoad) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  const CacheKey key = sampleKey();
  disk.store(key, bytesFor(key));
  damage(Damage::FlipPayloadByte, tmp.path(), key);
  LogCapture log;
  EXPECT_EQ(disk.load(key), std::nullopt);
  EXPECT_FALSE(fs::exists(disk.pathFor(key)));
  EXPECT_EQ(disk.stats().corruptEntries, 1u);
  EXPECT_EQ(disk.load(key), std::nullopt);  // now simply missing
  EXPECT_EQ(disk.stats().corruptEntries, 1u);
  EXPECT_EQ(disk.stats().diskMisses, 2u);
}

TEST(DiskCache, UnwritableDirectoryFallsBackToMemory) {
  TempDir tmp;
  // A directory under a regular file cannot be created, even by root.
  writeFile(tmp.path() / "plainfile", {'x'});
  const fs::path dir = tmp.path() / "plainfile" / "cache";
  LogCapture log;
  auto cache = cacheIn(dir);
  std::atomic<int> compiles{0};
  auto a = get(*cache, sampleKey(), compiles);
  auto b = get(*cache, sampleKey(), compiles);
  auto c = get(*cache, keyWithShape(5), compiles);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a->bytes, bytesFor(sampleKey()));
  EXPECT_EQ(compiles.load(), 2);
  CacheStats s = cache->stats();
  EXPECT_EQ(s.memoryHits, 1u);
  EXPECT_EQ(s.diskWrites, 0u);
  const std::string text = log.text();
  EXPECT_NE(text.find("memory only"), std::string::npos) << text;
  // Warned once, not once per kernel.
  EXPECT_EQ(text.find("memory only"), text.rfind("memory only")) << text;
}

// ---------------------------------------------------------------------------------------------
// The environment

TEST(KernelCacheEnv, DirectoryPrecedence) {
  EnvGuard a("STITCH_CACHE_DIR", "/somewhere/stitch-cache");
  EnvGuard b("XDG_CACHE_HOME", "/xdg");
  EnvGuard c("HOME", "/home/u");
  EXPECT_EQ(DiskCache::directoryFromEnv(), fs::path("/somewhere/stitch-cache"));
  {
    EnvGuard unset("STITCH_CACHE_DIR", nullptr);
    EXPECT_EQ(DiskCache::directoryFromEnv(), fs::path("/xdg/stitch"));
    EnvGuard relative("XDG_CACHE_HOME", "relative/path");  // invalid per the XDG spec: ignored
    EXPECT_EQ(DiskCache::directoryFromEnv(), fs::path("/home/u/.cache/stitch"));
    EnvGuard noXdg("XDG_CACHE_HOME", nullptr);
    EXPECT_EQ(DiskCache::directoryFromEnv(), fs::path("/home/u/.cache/stitch"));
    EnvGuard noHome("HOME", nullptr);
    EXPECT_EQ(DiskCache::directoryFromEnv(), std::nullopt);
    EXPECT_FALSE(DiskCache::fromEnv()->enabled());
  }
}

TEST(KernelCacheEnv, CacheOneOrUnsetEnablesTheDisk) {
  TempDir tmp;
  EnvGuard dir("STITCH_CACHE_DIR", tmp.path().c_str());
  for (const char* value : {static_cast<const char*>(nullptr), "1", ""}) {
    EnvGuard on("STITCH_CACHE", value);
    auto disk = DiskCache::fromEnv();
    EXPECT_TRUE(disk->enabled());
    EXPECT_EQ(disk->dir(), tmp.path());
  }
}

TEST(KernelCacheEnv, CacheZeroWritesNothing) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "cache";
  EnvGuard d("STITCH_CACHE_DIR", dir.c_str());
  EnvGuard off("STITCH_CACHE", "0");
  auto cache = Cache::fromEnv(16);
  std::atomic<int> compiles{0};
  get(*cache, sampleKey(), compiles);
  get(*cache, sampleKey(), compiles);
  EXPECT_EQ(compiles.load(), 1);
  EXPECT_FALSE(fs::exists(dir));
  CacheStats s = cache->stats();
  EXPECT_EQ(s.diskWrites + s.diskHits + s.diskMisses, 0u);
  EXPECT_EQ(s.memoryHits, 1u);
}

TEST(KernelCacheEnv, CacheTwoIsAnError) {
  EnvGuard bad("STITCH_CACHE", "2");
  try {
    (void)Cache::fromEnv(16);
    FAIL() << "STITCH_CACHE=2 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(e.message().find("STITCH_CACHE"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("1, true, yes, on"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("0, false, no, off"), std::string::npos) << e.message();
  }
}

// STITCH_CACHE is read by the one boolean parser every toggle shares.
TEST(KernelCacheEnv, CacheTakesEveryBooleanSpelling) {
  TempDir tmp;
  EnvGuard dir("STITCH_CACHE_DIR", tmp.path().c_str());
  for (const char* on : {"1", "true", "TRUE", "yes", "on"}) {
    EnvGuard e("STITCH_CACHE", on);
    EXPECT_TRUE(DiskCache::fromEnv()->enabled()) << on;
  }
  for (const char* off : {"0", "false", "False", "no", "off", "OFF"}) {
    EnvGuard e("STITCH_CACHE", off);
    EXPECT_FALSE(DiskCache::fromEnv()->enabled()) << off;
  }
}

// ---------------------------------------------------------------------------------------------
// Both layers

TEST(KernelCache, MemoryThenDiskThenCompile) {
  TempDir tmp;
  std::atomic<int> compiles{0};
  auto first = cacheIn(tmp.path());
  auto a = get(*first, sampleKey(), compiles);
  auto b = get(*first, sampleKey(), compiles);
  EXPECT_EQ(a, b);  // the same loaded value
  EXPECT_EQ(compiles.load(), 1);
  CacheStats s = first->stats();
  EXPECT_EQ(s.memoryHits, 1u);
  EXPECT_EQ(s.memoryMisses, 1u);
  EXPECT_EQ(s.diskMisses, 1u);
  EXPECT_EQ(s.diskWrites, 1u);
  EXPECT_EQ(s.compiles, 1u);
  EXPECT_GE(s.compileSeconds, 0.0);

  auto second = cacheIn(tmp.path());  // as a new process would see it
  auto c = get(*second, sampleKey(), compiles);
  EXPECT_EQ(compiles.load(), 1);
  EXPECT_EQ(c->bytes, a->bytes);
  EXPECT_EQ(second->stats().diskHits, 1u);
  EXPECT_EQ(second->stats().compiles, 0u);

  get(*second, keyWithShape(5), compiles);  // a new shape compiles
  EXPECT_EQ(compiles.load(), 2);
}

TEST(KernelCache, EvictedEntriesComeBackFromDisk) {
  TempDir tmp;
  auto cache = cacheIn(tmp.path(), 2);
  std::atomic<int> compiles{0};
  for (int64_t rows = 1; rows <= 4; ++rows) get(*cache, keyWithShape(rows), compiles);
  EXPECT_EQ(cache->memory().size(), 2u);
  get(*cache, keyWithShape(1), compiles);  // evicted from memory, still on disk
  EXPECT_EQ(compiles.load(), 4);
  EXPECT_EQ(cache->stats().diskHits, 1u);
}

TEST(KernelCache, LoaderFailureOnADiskEntryRecompilesAndRewrites) {
  TempDir tmp;
  std::atomic<int> compiles{0};
  {
    DiskCache disk(tmp.path());
    disk.store(sampleKey(), std::vector<uint8_t>{0xde, 0xad});  // valid file, unloadable bytes
  }
  auto strictLoad = [](const std::vector<uint8_t>& bytes) {
    if (bytes.size() < 10) throw Error(ErrorCode::Compile, "not a module");
    return loadKernel(bytes);
  };
  LogCapture log;
  auto cache = cacheIn(tmp.path());
  auto v = cache->getOrCompile(
      sampleKey(),
      [&] {
        ++compiles;
        return bytesFor(sampleKey());
      },
      strictLoad);
  EXPECT_EQ(compiles.load(), 1);
  EXPECT_EQ(v->bytes, bytesFor(sampleKey()));
  EXPECT_EQ(cache->stats().corruptEntries, 1u);
  EXPECT_EQ(cache->stats().diskHits, 1u);
  EXPECT_EQ(cache->stats().diskWrites, 1u);
  EXPECT_NE(log.text().find("not a module"), std::string::npos) << log.text();
  EXPECT_EQ(DiskCache(tmp.path()).load(sampleKey()), bytesFor(sampleKey()));
}

TEST(KernelCache, CompileFailureReachesTheCallerAndIsRetried) {
  TempDir tmp;
  auto cache = cacheIn(tmp.path());
  EXPECT_THROW(cache->getOrCompile(
                   sampleKey(),
                   []() -> std::vector<uint8_t> { throw Error(ErrorCode::Compile, "nvrtc: no"); },
                   loadKernel),
               Error);
  EXPECT_TRUE(filesIn(tmp.path()).empty());
  std::atomic<int> compiles{0};
  get(*cache, sampleKey(), compiles);  // not stuck in flight
  EXPECT_EQ(compiles.load(), 1);
}

TEST(KernelCache, ThreadsRacingOnOneKeyCompileOnce) {
  for (bool withDisk : {false, true}) {
    TempDir tmp;
    Cache cache(16, withDisk ? std::make_unique<DiskCache>(tmp.path()) : nullptr);
    std::atomic<int> compiles{0};
    std::latch start(8);
    std::vector<std::shared_ptr<Kernel>> got(8);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        got[t] = cache.getOrCompile(
            sampleKey(),
            [&] {
              ++compiles;
              std::this_thread::sleep_for(std::chrono::milliseconds(50));
              return bytesFor(sampleKey());
            },
            loadKernel);
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(compiles.load(), 1) << "disk: " << withDisk;
    for (const auto& g : got) EXPECT_EQ(g, got[0]);
    CacheStats s = cache.stats();
    EXPECT_EQ(s.compiles, 1u);
    EXPECT_EQ(s.memoryHits + s.memoryMisses, 8u);
  }
}

TEST(KernelCache, ThreadsOnManyKeysCompileEachOnce) {
  TempDir tmp;
  auto cache = cacheIn(tmp.path(), 64);
  std::atomic<int> compiles{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        CacheKey k = keyWithShape(1 + (i + t) % 16);
        auto v = get(*cache, k, compiles);
        if (v->bytes != bytesFor(k)) ADD_FAILURE() << "wrong value";
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(compiles.load(), 16);
  EXPECT_EQ(filesIn(tmp.path()).size(), 16u);
}

// Two processes filling one directory at once: each stores and loads shared and private keys many
// times; neither ever reads a partial or foreign entry, and every file left is valid.
TEST(DiskCache, TwoProcessesShareOneDirectory) {
  TempDir tmp;
  constexpr int kShared = 8, kPrivate = 8, kRounds = 150;
  auto sharedKey = [](int i) { return keyWithShape(1000 + i); };
  auto privateKey = [](int proc, int i) { return keyWithShape(2000 + 100 * proc + i); };
  auto payload = [](const CacheKey& k) { return bytesFor(k, 2000 + (k.hash() % 30000)); };

  auto work = [&](int proc) -> int {
    DiskCache disk(tmp.path());
    for (int r = 0; r < kRounds; ++r) {
      CacheKey s = sharedKey((r + proc) % kShared);
      disk.store(s, payload(s));
      auto got = disk.load(s);
      if (got && *got != payload(s)) return 10;  // a wrong payload: never acceptable
      // The other process may have replaced the file meanwhile, but with an equal, valid one.
      if (!got) return 11;
      CacheKey p = privateKey(proc, r % kPrivate);
      if (r < kPrivate) disk.store(p, payload(p));
      if (disk.load(p) != payload(p)) return 12;
      CacheKey other = sharedKey((r * 3) % kShared);
      if (auto o = disk.load(other); o && *o != payload(other)) return 13;
    }
    CacheStats st = disk.stats();
    if (st.corruptEntries != 0) return 14;
    return 0;
  };

  // Both children block on a pipe until the parent closes it, so they really start together.
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  std::vector<pid_t> children;
  for (int proc = 0; proc < 2; ++proc) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(gate[1]);
      char c;
      while (::read(gate[0], &c, 1) < 0 && errno == EINTR) {
      }
      ::_exit(work(proc));  // the child never returns into the test runner
    }
    children.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "child failed with code " << WEXITSTATUS(status);
  }

  std::vector<CacheKey> all;
  for (int i = 0; i < kShared; ++i) all.push_back(sharedKey(i));
  for (int proc = 0; proc < 2; ++proc)
    for (int i = 0; i < kPrivate; ++i) all.push_back(privateKey(proc, i));
  DiskCache disk(tmp.path());
  for (const CacheKey& k : all) EXPECT_EQ(disk.load(k), payload(k));
  EXPECT_EQ(disk.stats().corruptEntries, 0u);
  // Exactly the entries: no temporary file survives.
  std::vector<fs::path> files = filesIn(tmp.path());
  EXPECT_EQ(files.size(), all.size());
  for (const fs::path& f : files) EXPECT_EQ(f.extension(), ".stitchk") << f;
}

// ---------------------------------------------------------------------------------------------
// Files that are not entries (issue 11, finding 4)

// A FIFO named like an entry: opening it for reading used to wait for a writer forever. load()
// runs on another thread so that a regression fails the test instead of hanging it.
TEST(DiskCache, AFifoNamedLikeAnEntryIsAMissAndDoesNotBlock) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  const CacheKey key = sampleKey();
  const fs::path path = disk.pathFor(key);
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0) << std::strerror(errno);
  LogCapture log;
  auto loaded = std::async(std::launch::async, [&] { return disk.load(key); });
  if (loaded.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    // Unblock the reader (a writer opening the FIFO releases it) so the test can end.
    int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    loaded.wait();
    FAIL() << "DiskCache::load blocked on a FIFO named like an entry";
  }
  EXPECT_EQ(loaded.get(), std::nullopt);
  EXPECT_NE(log.text().find("not a regular file"), std::string::npos) << log.text();
  EXPECT_EQ(disk.stats().diskMisses, 1u);

  // The next store replaces it with a good entry.
  disk.store(key, bytesFor(key));
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(disk.load(key), bytesFor(key));
}

// A symbolic link is not an entry we wrote, even when it points at a valid one.
TEST(DiskCache, ASymlinkNamedLikeAnEntryIsAMiss) {
  TempDir tmp;
  DiskCache disk(tmp.path());
  const CacheKey key = sampleKey();
  writeFile(tmp.path() / "elsewhere", encodeEntry(*disk.secret(), key.canonical(), bytesFor(key)));
  fs::create_symlink(tmp.path() / "elsewhere", disk.pathFor(key));
  LogCapture log;
  EXPECT_EQ(disk.load(key), std::nullopt);
  EXPECT_NE(log.text().find("symbolic link"), std::string::npos) << log.text();
  disk.store(key, bytesFor(key));
  EXPECT_FALSE(fs::is_symlink(disk.pathFor(key)));
  EXPECT_EQ(disk.load(key), bytesFor(key));
}

// The id of a process that has exited (and been reaped): no process has it, for a while.
pid_t deadProcessId() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

fs::path tempFile(const fs::path& dir, pid_t writer, int n, std::chrono::seconds age) {
  fs::path p =
      dir / fmt::format(".tmp-{:016x}-{}-{:x}-{}.stitchk~", 0x1234abcdULL + n, writer, 0xbeefU, n);
  writeFile(p, std::vector<uint8_t>(100, 7));
  fs::last_write_time(p, fs::file_time_type::clock::now() - age);
  return p;
}

TEST(DiskCache, StaleTemporaryFilesOfDeadWritersAreRemoved) {
  using std::chrono::seconds;
  TempDir tmp;
  const pid_t dead = deadProcessId();
  ASSERT_GT(dead, 0);
  const pid_t live = ::getpid();
  const fs::path deadOld = tempFile(tmp.path(), dead, 1, seconds(kDeadWriterGraceSeconds + 60));
  const fs::path deadFresh = tempFile(tmp.path(), dead, 2, seconds(0));
  const fs::path liveFresh = tempFile(tmp.path(), live, 3, seconds(0));
  const fs::path liveOld = tempFile(tmp.path(), live, 4, seconds(kDeadWriterGraceSeconds + 60));
  const fs::path ancient = tempFile(tmp.path(), live, 5, seconds(kStaleTempSeconds + 60));
  // Names that are not ours, however old, are left alone; so are entries.
  const fs::path foreign = tmp.path() / ".tmp-notours.stitchk~";
  writeFile(foreign, {1, 2, 3});
  fs::last_write_time(foreign, fs::file_time_type::clock::now() - seconds(kStaleTempSeconds * 2));
  const CacheKey key = sampleKey();
  {
    DiskCache writer(tmp.path());
    writer.store(key, bytesFor(key));  // its first store sweeps
  }
  EXPECT_FALSE(fs::exists(deadOld)) << "a dead writer's old temporary file was kept";
  EXPECT_FALSE(fs::exists(ancient)) << "an hour-old temporary file was kept";
  EXPECT_TRUE(fs::exists(deadFresh)) << "within the grace period, the file must stay";
  EXPECT_TRUE(fs::exists(liveFresh)) << "a live writer's fresh temporary file was removed";
  EXPECT_TRUE(fs::exists(liveOld)) << "a live writer's temporary file was removed";
  EXPECT_TRUE(fs::exists(foreign));
  DiskCache reader(tmp.path());
  EXPECT_EQ(reader.load(key), bytesFor(key));

  // Nothing more is stale; once the grace has passed, the dead writer's other file goes too.
  EXPECT_EQ(reader.removeStaleTemporaries(), 0u);
  fs::last_write_time(deadFresh,
                      fs::file_time_type::clock::now() - seconds(kDeadWriterGraceSeconds + 1));
  EXPECT_EQ(reader.removeStaleTemporaries(), 1u);
  EXPECT_FALSE(fs::exists(deadFresh));
  EXPECT_TRUE(fs::exists(liveFresh));
}

}  // namespace
