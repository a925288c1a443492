// The secrets that authenticate kernel cache entries, and where they come from.
//
// Why
// ---
// A cache entry holds native code that the process jumps into (an object file, a cubin), or a
// program's artifact whose code it compiles and links. A checksum catches damage, not forgery:
// anyone who can write the cache directory or the Redis server can change a payload and recompute
// it. So every entry carries an HMAC-SHA-256 tag (support/sha256.h) over all of its bytes, made
// with a secret key, and an entry whose tag does not verify is a miss, rebuilt and overwritten
// (runtime/kernel_cache.h, "Authentication"). This module holds the keys.
//
// Which key
// ---------
//   - The fleet key, when the environment names one: STITCH_CACHE_KEY (the secret itself) or
//     STITCH_CACHE_KEY_FILE (a file holding it, e.g. a mounted secret), not both. It
//     authenticates both layers, and is required by the remote one (remote_cache.h): every
//     process of a fleet that shares a Redis server, or a cache directory, holds the same key.
//     The secret is its bytes as given (a file's trailing whitespace dropped), kMinSecretBytes to
//     kMaxSecretBytes long: `openssl rand -hex 32` makes one. A key file must be a regular file
//     owned by this user or root and writable by no one else (whoever can write it chooses the
//     key); whoever can read it can forge entries, so mode 0600 or 0640 is what to give it.
//   - Otherwise the directory's key, per user: DIR/.stitch-key-<uid> in the cache directory,
//     made on the first store as 32 random bytes (getrandom) written as 64 hex digits, mode 0600,
//     atomically (written to a temporary file, then hard-linked into place: of processes racing
//     to make it, one wins and the others read its key). It is used only when it is a regular
//     file (not a symbolic link) owned by this user that no one else may read or write; any other
//     file of that name is refused, and the disk layer is then off for the process (a warning
//     says why), never trusting entries it cannot verify. `stitch cache clear` keeps it; deleting
//     it makes every entry a miss, rewritten under the new key.
//
// Threat model
// ------------
// Trusted: the user running the process (and root). With a fleet key: every holder of the key.
//   - Someone who can write the cache directory but is not the user (a group-writable or shared
//     directory, another account): can delete, swap, truncate, fill or replace entries, and the
//     key file's name; cannot make the user's process run code of theirs: without the key no
//     entry verifies, a planted key file is refused (another owner), and whatever they do costs
//     recompiles, or turns the disk layer off (a refused key file), never a wrong answer.
//   - Someone who can write the Redis server (its password, or the network path to it; the
//     traffic is not encrypted) but has no fleet key: can delete or overwrite values, or answer
//     slowly; every value they write is a miss that is rebuilt and overwritten, and never reaches
//     any machine's disk. They can read the values: compiled kernels are not secret.
//   - Someone who has the key (a fleet machine taken over, a leaked key file), or can run code as
//     the user: can forge entries that every holder of the key runs. The key is the boundary;
//     rotate it by changing it everywhere (old entries then read as misses).
//   - Replay: a genuine entry moved to another entry's name, or another key's value put under
//     this one's, holds another canonical key (which the tag covers) and is a miss.
//   - The tag proves who wrote an entry, not that the writer's build was right: a program entry
//     is also checked for structure before anything is linked (src/driver/program_entry.h).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/support/sha256.h"

namespace stitch::rt {

// The lengths a secret may have, in bytes.
inline constexpr size_t kMinSecretBytes = 32;
inline constexpr size_t kMaxSecretBytes = 4096;

// A key that authenticates entries, and where it came from (for messages: never the key).
class CacheSecret {
 public:
  CacheSecret(std::string_view secret, std::string origin);
  const HmacSha256& hmac() const { return hmac_; }
  const std::string& origin() const { return origin_; }
  // Equal for equal secrets, and says nothing of them (HMAC of a fixed label under the key): tells
  // layers keyed by different secrets apart (RemoteCache::shared).
  const Sha256Digest& fingerprint() const { return fingerprint_; }

 private:
  HmacSha256 hmac_;
  std::string origin_;
  Sha256Digest fingerprint_;
};

// The fleet key the environment names (STITCH_CACHE_KEY or STITCH_CACHE_KEY_FILE), or null when
// neither is set. Throws InvalidArgument naming the variable (never the secret) when both are
// set, the secret's length is out of range, or the file cannot be read or is not safe.
std::shared_ptr<const CacheSecret> fleetSecretFromEnv();

// The name of this user's key file in a cache directory: ".stitch-key-<effective uid>".
std::string directorySecretName();

// This user's key of the cache directory `dir` (the note above): read from its key file, or, when
// there is none and `create` is set, made. Null when there is none and `create` is not set (*why
// left empty), or when it cannot be read, made or trusted (*why says which).
std::shared_ptr<const CacheSecret> directorySecret(const std::filesystem::path& dir, bool create,
                                                   std::string* why);

}  // namespace stitch::rt
