// The entry format of the kernel cache's persistent layers (kernel_cache.h): one authenticated
// blob per entry, a disk file's bytes and a remote value alike.
//
// On-disk format (disk_cache.h), one file per entry: DIR/<hash as 16 lowercase hex>.stitchk
//   offset  size  field (integers little-endian)
//        0     8  magic "STITCHK1"
//        8     4  format version (kDiskFormatVersion, 3)
//       12     4  K: length of the canonical key
//       16     8  P: payload size in bytes
//       24    32  HMAC-SHA-256 tag of bytes 0..23, then the key, then the payload
//       56     K  the canonical key (CacheKey::canonical(), bytes)
//     56+K     P  the payload (the compiled bytes, opaque to the cache)
// The file is exactly 56 + K + P bytes long. Only names ending in ".stitchk" that are 16 hex
// digits long are ever read; any other file in the directory is ignored (the key file of
// "Authentication" below, ".stitch-key-<uid>", is the only other file the cache makes there).
// Format 2 had an FNV-1a checksum where the tag is: its entries read as another version's, misses
// that are rewritten.
//
// Authentication
// --------------
// An entry is native code, so it is not enough that it be intact: it must be ours. The tag is an
// HMAC-SHA-256 (support/sha256.h) under a secret key (runtime/cache_secret.h, which also holds the
// threat model: who may write the directory and the Redis server, and what each can and cannot
// do): the fleet key (STITCH_CACHE_KEY or STITCH_CACHE_KEY_FILE) when the environment names one,
// else this user's key of the directory, DIR/.stitch-key-<uid> (mode 0600, made on the first
// store). It covers every byte of the entry but itself, the full canonical key included, so an
// entry can be neither changed nor moved to another key's name without the key; it is compared
// in constant time. A tag that does not verify is a corrupt entry like any other (below): a
// damaged file and a forged one are told apart by nobody, and both are rebuilt. A remote value is
// the same bytes under the fleet key (runtime/remote_cache.h). Cost: the tag is computed over the
// whole entry on every load and store, at about 340 MB/s of one core (portable code, measured on
// the development VM's EPYC in CPU time): 41 us for a typical host kernel's entry of 14 KB, 0.3 ms
// for 100 KB, against the compile of 10-100 ms a hit saves.
//
// The diskfmt namespace holds what the disk layer's lookups and stores (disk_cache.cpp) and its
// maintenance (disk_eviction.cpp) share of the format; nothing else uses it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/cache_secret.h"
#include "runtime/support/sha256.h"

namespace stitch::rt {

inline constexpr std::string_view kDiskMagic = "STITCHK1";
inline constexpr uint32_t kDiskFormatVersion = 3;
inline constexpr size_t kDiskHeaderBytes = 56;
inline constexpr size_t kEntryTagOffset = 24;  // the HMAC-SHA-256 tag: header bytes 24..55
inline constexpr std::string_view kDiskExtension = ".stitchk";
// A temporary file older than this is stale whatever its name says (no write takes five minutes).
inline constexpr int64_t kStaleTempSeconds = 300;
// A temporary file whose writer's process id does not exist on this host is stale after this
// long (the grace covers a writer in another pid namespace or on another host sharing the
// directory, whose id means nothing here: its write has long finished by then).
inline constexpr int64_t kDeadWriterGraceSeconds = 60;
// The disk layer's size bound when STITCH_CACHE_MAX_MB is unset (4 GiB), and the largest value it
// may take (its bytes must fit 64 bits).
inline constexpr uint64_t kDefaultDiskCacheMaxMB = 4096;
inline constexpr uint64_t kMaxDiskCacheMaxMB = (uint64_t{1} << 44) - 1;

// The entry format of the persistent layers (the table in the note above; a remote value is the
// same bytes as a disk file): the header with its tag under `secret`, the full canonical key, the
// payload.
std::vector<uint8_t> encodeEntry(const CacheSecret& secret, std::string_view canonicalKey,
                                 std::span<const uint8_t> payload);
// The payload of `bytes` when they are a complete entry for `canonicalKey` whose tag verifies
// under `secret`; otherwise nullopt, with *why (if not null) saying what is wrong: short, wrong
// magic or format version (another release's entry), sizes that do not add up, another key, a tag
// that does not verify (damaged, written under another key, or forged).
std::optional<std::vector<uint8_t>> decodeEntry(const CacheSecret& secret,
                                                std::span<const uint8_t> bytes,
                                                std::string_view canonicalKey, std::string* why);

namespace diskfmt {

void putLE(uint8_t* p, uint64_t v, int bytes);
uint64_t getLE(const uint8_t* p, int bytes);
// Reads exactly n bytes at the current offset; false on EOF or error.
bool readAll(int fd, uint8_t* p, size_t n);
// Writes exactly n bytes; false on error. A write past the file-size limit fails with EFBIG
// instead of ending the process with SIGXFSZ (support/signal_guard.h).
bool writeAll(int fd, const uint8_t* p, size_t n);
std::string errnoText();

// Keys hold a serialized kernel program: a few KB, a few hundred KB for the largest kernels.
// Anything far larger is not one of our headers (and is not worth allocating for).
inline constexpr uint64_t kMaxKeyBytes = uint64_t{64} << 20;
// No entry (a cubin, an object file, a program's artifact) comes near this; a larger file is not
// ours, and is not read whole.
inline constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 30;

// Temporary files store() writes: ".tmp-<16 hex>-<pid>-<hex>-<n>.stitchk~".
inline constexpr std::string_view kTempPrefix = ".tmp-";
inline constexpr std::string_view kTempSuffix = ".stitchk~";

bool allOf(std::string_view s, std::string_view chars);
// The writer's process id in the name of a temporary file store() makes, or nullopt when the
// name is not one of ours.
std::optional<pid_t> tempFileWriter(std::string_view name);
// Whether a process with this id exists on this host (EPERM: it exists, owned by someone else).
bool processExists(pid_t pid);

// An entry's header fields (the format table above).
struct EntryHeader {
  uint64_t keyBytes = 0, payloadBytes = 0;
};
// Reads the header at h of an entry `size` bytes long into out: "" when the magic and format
// version are ours and the sizes add up to `size`, else what is wrong.
std::string parseEntryHeader(const uint8_t* h, uint64_t size, EntryHeader& out);
// The tag of an entry: HMAC-SHA-256 of the header before the tag, the key, the payload. Begun
// here and fed the key and the payload by the caller (prune() reads the payload in pieces).
HmacSha256::Message beginTag(const CacheSecret& secret, const uint8_t* header);

inline constexpr std::string_view kBadTag =
    "its authentication tag does not verify (damaged, written under another key, or forged)";

}  // namespace diskfmt

}  // namespace stitch::rt
