// Kernel cache entries, key files and temporary files written by hand, from the format in the
// note of runtime/kernel_cache.h, for tests that reach the cache only through the C API or the
// command line (no access to DiskCache). Entries written here must be what the library writes:
// the format is the contract, so the writer is independent of the implementation, save for
// HMAC-SHA-256 itself (support/sha256.h, checked against the standards' vectors on its own; the
// targets that include this header compile runtime/support/sha256.cpp in).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/support/sha256.h"

namespace stitch::testing {

// A key for the tests' entries (at least 32 bytes, as the library requires).
inline const std::string kTestCacheSecret = "a test cache key, 32 bytes or more, never a real one";

// FNV-1a 64, the reference byte-at-a-time loop.
inline uint64_t fnv1a64Of(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

inline void writeBytes(const std::filesystem::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<uint8_t> readBytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Sets a file's mtime `secondsAgo` before now.
inline bool setFileAge(const std::filesystem::path& p, int64_t secondsAgo) {
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  struct timespec t[2] = {};
  t[0].tv_sec = t[1].tv_sec = now.tv_sec - secondsAgo;
  return ::utimensat(AT_FDCWD, p.c_str(), t, AT_SYMLINK_NOFOLLOW) == 0;
}

// This user's key file of a cache directory (DIR/.stitch-key-<euid>, mode 0600) holding
// `secret`: the key the library verifies the directory's entries with when no fleet key is set.
inline std::filesystem::path writeDirectoryKey(const std::filesystem::path& dir,
                                               const std::string& secret = kTestCacheSecret) {
  const std::filesystem::path p = dir / (".stitch-key-" + std::to_string(::geteuid()));
  writeBytes(p, std::vector<uint8_t>(secret.begin(), secret.end()));
  ::chmod(p.c_str(), 0600);
  return p;
}

// The tag of an entry's bytes (header before the tag, key, payload) under `secret`, written into
// the header: what a holder of the key does, and a forger cannot.
inline void signEntry(std::vector<uint8_t>& entry, const std::string& secret = kTestCacheSecret) {
  constexpr size_t kTagOffset = 24, kHeader = 56;
  const Sha256Digest tag = HmacSha256(secret)
                               .begin()
                               .add(std::span<const uint8_t>(entry.data(), kTagOffset))
                               .add(std::span<const uint8_t>(entry).subspan(kHeader))
                               .finish();
  std::copy(tag.begin(), tag.end(), entry.begin() + kTagOffset);
}

// The bytes of an entry for `key` (canonical key bytes) holding `payload`, tagged under `secret`.
inline std::vector<uint8_t> cacheEntryBytes(const std::string& key,
                                            const std::vector<uint8_t>& payload,
                                            const std::string& secret = kTestCacheSecret) {
  std::vector<uint8_t> out = {'S', 'T', 'I', 'T', 'C', 'H', 'K', '1'};
  auto le = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  le(3, 4);  // format version
  le(key.size(), 4);
  le(payload.size(), 8);
  out.resize(out.size() + 32);  // the tag, below
  out.insert(out.end(), key.begin(), key.end());
  out.insert(out.end(), payload.begin(), payload.end());
  signEntry(out, secret);
  return out;
}

// Writes an entry for `key` holding `payload`, tagged under `secret`, named as the cache names it:
// DIR/<FNV-1a 64 of the key, 16 lowercase hex digits>.stitchk. Returns its path.
inline std::filesystem::path writeCacheEntry(const std::filesystem::path& dir,
                                             const std::string& key,
                                             const std::vector<uint8_t>& payload,
                                             const std::string& secret = kTestCacheSecret) {
  const uint64_t h = fnv1a64Of(reinterpret_cast<const uint8_t*>(key.data()), key.size());
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.stitchk", static_cast<unsigned long long>(h));
  const std::filesystem::path p = dir / name;
  writeBytes(p, cacheEntryBytes(key, payload, secret));
  return p;
}

// A temporary file named as a writer of process `pid` names it, `bytes` long.
inline std::filesystem::path writeCacheTemporary(const std::filesystem::path& dir, long pid, int n,
                                                 size_t bytes) {
  char name[96];
  std::snprintf(name, sizeof name, ".tmp-%016llx-%ld-%x-%d.stitchk~", 0x1234abcdULL, pid, 0x77u, n);
  const std::filesystem::path p = dir / name;
  writeBytes(p, std::vector<uint8_t>(bytes, 9));
  return p;
}

}  // namespace stitch::testing
