// The remote layer of the kernel cache: compiled kernels shared by a fleet through Redis.
//
// Why
// ---
// Every process of a fleet compiles the same kernels (and plans the same programs) for the same
// machines. A shared store lets one process compile a kernel and every other one load it: the
// lookup order is memory -> disk -> remote -> compile (runtime/kernel_cache.h), a remote hit is
// written to the local disk layer, and a compile is written to both.
//
// Values and names
// ----------------
// A value is exactly a disk entry (encodeEntry: magic, format version, sizes, the HMAC-SHA-256 tag,
// the full canonical key, then the payload) and is verified the same way (decodeEntry) before use:
// a truncated, corrupt, foreign, other-version or forged value is a miss, counted in
// corruptEntries, never written to the disk layer, and the compile that follows overwrites it. The
// Redis key is
//   <namespace>:e<kDiskFormatVersion>:<16 hex digits of CacheKey::hash()>
// ("stitch:e3:0123456789abcdef"): the namespace (default "stitch") keeps fleets or tenants that
// share a server apart, and the format version keeps releases with other entry formats from
// reading each other's values; a hash collision, or a value another library version wrote under
// the same name, holds another canonical key and reads as a miss, never as another kernel.
//
// The fleet key
// -------------
// Values are authenticated with the fleet key only (STITCH_CACHE_KEY or STITCH_CACHE_KEY_FILE,
// runtime/cache_secret.h), which every process sharing the server holds, and the layer refuses to
// exist without one: a remote layer named with no key is an InvalidArgument error naming both
// variables. Whoever can write to the server but holds no key (its password, or the network path:
// the traffic is not encrypted) cannot make any process run code of theirs; the threat model is
// in cache_secret.h. The key never leaves the process.
//
// Configuration: STITCH_REMOTE_CACHE=redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] (or the engine
// option "remote_cache"; "off" turns it off), STITCH_REMOTE_CACHE_NAMESPACE,
// STITCH_REMOTE_CACHE_TIMEOUT_MS (each operation's deadline; default 200),
// STITCH_REMOTE_CACHE_TTL (seconds a value lives after it was last written or read; default 7
// days, 0: no expiry), STITCH_REMOTE_CACHE_RETRY_MS (how long to go without the server after a
// failure; default 30000). A malformed value is an InvalidArgument error naming it; a server that
// cannot be reached is not an error.
//
// Expiry: a write sets the TTL and a hit restarts it (GETEX, Redis 6.2 and later), so the kernels a
// fleet keeps using never expire and those it stopped using leave after the TTL. A server that
// refuses GETEX (older, or an ACL without it) is read with GET from then on, and a TTL counts from
// the write.
//
// Deadlines
// ---------
// Every operation (a load or a store) has one deadline, STITCH_REMOTE_CACHE_TIMEOUT_MS from when
// it has the connection, that covers all of it: connecting (and AUTH, SELECT) when there is no
// connection, sending the command and reading the whole reply. The connection is non-blocking,
// and each wait for the socket is a poll() for what is left of the deadline, so no behaviour of the
// server (silence, a reply trickled a byte at a time, a reply that never ends) holds an operation
// longer than the timeout: a socket timeout per read (SO_RCVTIMEO, hiredis's own) would bound
// each read, and a server trickling one byte per read inside it would hold a run for good. A
// reply larger than any entry (1 GiB) is a failure too. Not bounded by the deadline: resolving
// the host's name (getaddrinfo, the system resolver's own timeouts), so a fleet names its server
// by address or in /etc/hosts.
//
// Never failing a run
// -------------------
// Every failure (connection refused, a deadline passed, the server going away mid-run, an error
// reply to any command (NOAUTH, -ERR, OOM, READONLY, WRONGTYPE), a reply of an unexpected type or
// size) is logged (one warning per outage, then debug) and counted in remoteErrors; the
// connection is dropped and the layer is skipped (a miss, a dropped write) until the retry interval
// has passed, when the next operation connects again. So a dead, slow or misconfigured server
// costs one timeout per retry interval, never a failed or hung run, and one warning, not one per
// lookup. No exception leaves load() or store(). The one error reply that is not a failure is a
// refused GETEX (above).
//
// Concurrency
// -----------
// One connection per RemoteCache, used under a mutex (operations take well under a millisecond on
// a healthy server; compiles, which they replace, take tens). A thread waiting for the mutex
// starts its deadline when it has it; once an operation fails, the others skip the server. A
// forked child does not use its parent's connection: its first operation opens one of its own.
// Processes share nothing but the server: two processes that both miss both compile and both SET;
// either value is a whole, verified entry, and the last one wins.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/cache_secret.h"
#include "runtime/kernel_cache.h"

struct redisContext;

namespace stitch::rt {

// Where the remote layer is and how it behaves (the note above).
struct RemoteCacheConfig {
  std::string url;  // as given, without the password (for messages)
  std::string host;
  int port = 6379;
  int db = 0;
  std::string user;      // empty: AUTH with the password alone (or no AUTH)
  std::string password;  // empty: no AUTH
  std::string nameSpace = "stitch";
  int timeoutMs = 200;
  int64_t ttlSeconds = 7 * 24 * 3600;  // 0: values never expire
  int retryMs = 30000;
  // The fleet key every value is authenticated with (runtime/cache_secret.h); required.
  std::shared_ptr<const CacheSecret> secret;
};

// Parses redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] (HOST may be a bracketed IPv6 address) into
// a config with the other fields at their defaults. Throws InvalidArgument naming `what` (the
// variable or option it came from) and the problem.
RemoteCacheConfig parseRemoteCacheUrl(std::string_view url, std::string_view what);

// The remote layer the environment asks for: nullopt when STITCH_REMOTE_CACHE is unset, empty or
// "off"; otherwise the URL with the STITCH_REMOTE_CACHE_* settings and the fleet key. Throws
// InvalidArgument for a malformed value, when no fleet key is set (STITCH_CACHE_KEY or
// STITCH_CACHE_KEY_FILE), or when this build has no Redis client (built without hiredis).
std::optional<RemoteCacheConfig> remoteCacheConfigFromEnv();
// The same for an engine option's value ("off": none), with the other settings from the
// environment.
std::optional<RemoteCacheConfig> remoteCacheConfigFromOption(std::string_view value);
// The STITCH_REMOTE_CACHE_* settings alone (no server): what the two above read, with the same
// errors. The environment check (stitch_environment_check) calls it, so that a bad setting is
// reported while no remote layer is configured too (an engine option may configure one later).
RemoteCacheConfig remoteCacheSettingsFromEnv();

// Whether this build has a Redis client.
bool remoteCacheAvailable();

class OperationDeadline;  // remote_cache.cpp

class RemoteCache {
 public:
  // Connects lazily, on the first operation. Throws InvalidArgument when config has no secret.
  explicit RemoteCache(RemoteCacheConfig config);
  ~RemoteCache();
  RemoteCache(const RemoteCache&) = delete;
  RemoteCache& operator=(const RemoteCache&) = delete;

  // One instance per distinct configuration in this process, so that every layer that names the
  // same server shares its connection (and its outage state).
  static std::shared_ptr<RemoteCache> shared(const RemoteCacheConfig& config);

  // The verified payload stored for key, or nullopt (a miss, a bad value, or the server is
  // unavailable). Never throws.
  std::optional<std::vector<uint8_t>> load(const CacheKey& key, EntryKind kind = EntryKind::Kernel);
  // Stores the entry (with the TTL); failures are logged and counted. Never throws.
  void store(const CacheKey& key, std::span<const uint8_t> payload,
             EntryKind kind = EntryKind::Kernel);

  // The Redis key of an entry (the note above).
  std::string nameFor(const CacheKey& key) const;
  const RemoteCacheConfig& config() const { return config_; }
  CacheStats stats() const;
  void resetStats();

 private:
  // The live connection, connecting (within the deadline) when there is none and the retry time
  // has come; null when the server is unavailable. Called with mu_ held.
  redisContext* connection(const OperationDeadline& deadline);
  // Drops the connection and skips the server until the retry time. Called with mu_ held.
  void failed(const std::string& what);

  const RemoteCacheConfig config_;
  mutable std::mutex mu_;
  redisContext* ctx_ = nullptr;
  std::chrono::steady_clock::time_point retryAt_{};
  bool outage_ = false;      // a failure was warned about and no operation has succeeded since
  bool getex_ = true;        // false once the server refused GETEX (the note above)
  int pid_ = 0;              // the process that opened ctx_ (a forked child opens its own)
  CacheStatsCounter stats_;  // remote* and corruptEntries
};

}  // namespace stitch::rt
