// The remote layer of the kernel cache (design note in remote_cache.h).
#include "runtime/remote_cache.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>

#include "runtime/cache_secret.h"
#include "runtime/support/env.h"
#include "runtime/support/error.h"
#include "runtime/support/logging.h"
#include "runtime/support/signal_guard.h"

#if defined(STITCH_HAVE_HIREDIS)
#include <hiredis/hiredis.h>
#endif

namespace stitch::rt {

namespace {

// The settings' ranges (the README's table, support/env.cpp).
constexpr int64_t kMaxTimeoutMs = 60000;
constexpr int64_t kMaxTtlSeconds = int64_t{10} * 365 * 24 * 3600;
constexpr int64_t kMaxRetryMs = int64_t{24} * 3600 * 1000;
constexpr size_t kMaxNamespace = 64;

[[noreturn]] void badUrl(std::string_view what, std::string_view url, std::string_view why) {
  throwError(ErrorCode::InvalidArgument,
             fmt::format("{}={} is not valid: {}; valid values: "
                         "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], or off",
                         what, url, why));
}

bool parseNumber(std::string_view s, int64_t min, int64_t max, int64_t& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size() && out >= min && out <= max;
}

// The settings other than the URL, from the environment.
void settingsFromEnv(RemoteCacheConfig& c) {
  if (auto ns = env::get("STITCH_REMOTE_CACHE_NAMESPACE")) {
    const bool ok =
        ns->size() <= kMaxNamespace && std::all_of(ns->begin(), ns->end(), [](unsigned char ch) {
          return std::isalnum(ch) || ch == '.' || ch == '_' || ch == '-';
        });
    STITCH_CHECK(ok, ErrorCode::InvalidArgument,
                 "STITCH_REMOTE_CACHE_NAMESPACE={} is not valid; valid values: letters, digits and "
                 ". _ - (at most {})",
                 *ns, kMaxNamespace);
    c.nameSpace = *ns;
  }
  c.timeoutMs =
      static_cast<int>(env::getInt("STITCH_REMOTE_CACHE_TIMEOUT_MS", 1, kMaxTimeoutMs, 200));
  c.ttlSeconds = env::getInt("STITCH_REMOTE_CACHE_TTL", 0, kMaxTtlSeconds, c.ttlSeconds);
  c.retryMs = static_cast<int>(env::getInt("STITCH_REMOTE_CACHE_RETRY_MS", 0, kMaxRetryMs, 30000));
}

std::optional<RemoteCacheConfig> configFrom(std::optional<std::string> value,
                                            std::string_view what) {
  if (!value || *value == "off") return std::nullopt;
  RemoteCacheConfig c = parseRemoteCacheUrl(*value, what);
  STITCH_CHECK(remoteCacheAvailable(), ErrorCode::InvalidArgument,
               "{}={}: this build of Stitch has no Redis client (it was built without hiredis: "
               "Debian's libhiredis-dev)",
               what, c.url);
  settingsFromEnv(c);
  c.secret = fleetSecretFromEnv();
  STITCH_CHECK(c.secret != nullptr, ErrorCode::InvalidArgument,
               "{}={} needs a fleet key: set STITCH_CACHE_KEY (a secret of at least {} bytes that "
               "every process sharing the server holds, e.g. from `openssl rand -hex 32`) or "
               "STITCH_CACHE_KEY_FILE (a file holding it). Every entry is authenticated with it, "
               "so that whoever can write to the server cannot make the fleet run code of theirs",
               what, c.url, kMinSecretBytes);
  return c;
}

}  // namespace

RemoteCacheConfig parseRemoteCacheUrl(std::string_view url, std::string_view what) {
  constexpr std::string_view kScheme = "redis://";
  if (!url.starts_with(kScheme)) badUrl(what, url, "the scheme must be redis://");
  RemoteCacheConfig c;
  std::string_view rest = url.substr(kScheme.size());
  // Credentials: everything before the last '@' (a password may contain '@').
  std::string shown(kScheme);
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view cred = rest.substr(0, at);
    auto colon = cred.find(':');
    if (colon == std::string_view::npos)
      badUrl(what, url, "credentials must be USER:PASSWORD or :PASSWORD");
    c.user = std::string(cred.substr(0, colon));
    c.password = std::string(cred.substr(colon + 1));
    if (c.password.empty()) badUrl(what, url, "the password is empty");
    shown += (c.user.empty() ? std::string() : c.user) + ":***@";
    rest.remove_prefix(at + 1);
  }
  const std::string_view hostPart = rest;  // HOST[:PORT][/DB], for messages
  // The database: /DB at the end.
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    int64_t db = 0;
    if (!parseNumber(rest.substr(slash + 1), 0, 1 << 20, db))
      badUrl(what, url, "the database must be a number");
    c.db = static_cast<int>(db);
    rest = rest.substr(0, slash);
  }
  // HOST[:PORT], HOST possibly [IPv6].
  std::string_view host = rest, port;
  if (rest.starts_with('[')) {
    auto close = rest.find(']');
    if (close == std::string_view::npos) badUrl(what, url, "an unclosed [ in the host");
    host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (!after.starts_with(':')) badUrl(what, url, "expected :PORT after the host");
      port = after.substr(1);
      if (port.empty()) badUrl(what, url, "the port is empty");
    }
  } else if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (port.empty()) badUrl(what, url, "the port is empty");
  }
  if (host.empty()) badUrl(what, url, "no host");
  c.host = std::string(host);
  if (!port.empty()) {
    int64_t p = 0;
    if (!parseNumber(port, 1, 65535, p)) badUrl(what, url, "the port must be 1 to 65535");
    c.port = static_cast<int>(p);
  }
  c.url = shown + std::string(hostPart);
  return c;
}

std::optional<RemoteCacheConfig> remoteCacheConfigFromEnv() {
  return configFrom(env::get("STITCH_REMOTE_CACHE"), "STITCH_REMOTE_CACHE");
}

std::optional<RemoteCacheConfig> remoteCacheConfigFromOption(std::string_view value) {
  return configFrom(value.empty() ? std::nullopt : std::optional<std::string>(value),
                    "remote_cache");
}

RemoteCacheConfig remoteCacheSettingsFromEnv() {
  RemoteCacheConfig c;
  settingsFromEnv(c);
  return c;
}

bool remoteCacheAvailable() {
#if defined(STITCH_HAVE_HIREDIS)
  return true;
#else
  return false;
#endif
}

RemoteCache::RemoteCache(RemoteCacheConfig config) : config_(std::move(config)) {
  STITCH_CHECK(config_.secret != nullptr, ErrorCode::InvalidArgument,
               "the remote cache layer {} needs a fleet key (STITCH_CACHE_KEY or "
               "STITCH_CACHE_KEY_FILE)",
               config_.url);
}

RemoteCache::~RemoteCache() {
#if defined(STITCH_HAVE_HIREDIS)
  if (ctx_) redisFree(ctx_);
#endif
}

std::shared_ptr<RemoteCache> RemoteCache::shared(const RemoteCacheConfig& c) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<RemoteCache>> live;
  // Every field, password and key included: two configurations that differ in anything are two
  // layers.
  std::string key;
  if (c.secret)
    for (uint8_t b : c.secret->fingerprint()) key += fmt::format("{:02x}", b);
  const std::string id =
      fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}", c.host, c.port, c.db, c.user,
                  c.password, c.nameSpace, c.timeoutMs, c.ttlSeconds, c.retryMs, key);
  std::lock_guard lock(mu);
  if (auto r = live[id].lock()) return r;
  auto r = std::make_shared<RemoteCache>(c);
  live[id] = r;
  return r;
}

std::string RemoteCache::nameFor(const CacheKey& key) const {
  return fmt::format("{}:e{}:{:016x}", config_.nameSpace, kDiskFormatVersion, key.hash());
}

CacheStats RemoteCache::stats() const { return stats_.snapshot(); }

void RemoteCache::resetStats() { stats_.reset(); }

void RemoteCache::failed(const std::string& what) {
  stats_.remoteError();
#if defined(STITCH_HAVE_HIREDIS)
  if (ctx_) redisFree(ctx_);
#endif
  ctx_ = nullptr;
  retryAt_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.retryMs);
  if (!outage_) {
    outage_ = true;
    stitch::log().warn(
        "remote cache {}: {}; going on without it (compiling locally), trying again in {} ms",
        config_.url, what, config_.retryMs);
  } else {
    stitch::log().debug("remote cache {}: {}", config_.url, what);
  }
}

#if defined(STITCH_HAVE_HIREDIS)

namespace {

struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// A reply longer than this is not one of ours (no entry is near 1 GiB: disk_entry.h): the read
// stops there rather than buffering whatever a server sends within the deadline.
constexpr size_t kMaxReplyBytes = (size_t{1} << 30) + 4096;

}  // namespace

// The one deadline of an operation (the note: connect, AUTH, SELECT, the command, its whole reply).
class OperationDeadline {
 public:
  explicit OperationDeadline(int ms)
      : ms_(ms), at_(std::chrono::steady_clock::now() + std::chrono::milliseconds(ms)) {}
  // Milliseconds left, rounded up (0 only once the deadline has passed).
  int remainingMs() const {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(at_ - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<int64_t>(0, left.count()));
  }
  std::string expired(std::string_view what) const {
    return fmt::format("{}: timed out after {} ms (STITCH_REMOTE_CACHE_TIMEOUT_MS)", what, ms_);
  }

 private:
  int ms_;
  std::chrono::steady_clock::time_point at_;
};

namespace {

// Waits until fd is ready for `events` (an error or hangup counts: the read or write that follows
// reports it), or the deadline passes. "" or what went wrong.
std::string waitFor(int fd, short events, const OperationDeadline& deadline,
                    std::string_view what) {
  for (;;) {
    const int left = deadline.remainingMs();
    if (left == 0) return deadline.expired(what);
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, left);
    if (r > 0) return "";
    if (r == 0) return deadline.expired(what);
    if (errno != EINTR) return fmt::format("{}: poll: {}", what, std::strerror(errno));
  }
}

std::string contextError(redisContext* c, std::string_view during) {
  return fmt::format("{}: {}", during, c && c->errstr[0] ? c->errstr : "no reply");
}

// Sends a command on the non-blocking connection c and reads its whole reply, within the
// deadline: the reply (an error reply included), or null with *error saying what failed (the
// connection is then in an unknown state, and the caller drops it).
Reply roundTrip(redisContext* c, std::span<const std::string_view> args,
                const OperationDeadline& deadline, std::string_view what, std::string* error) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
      REDIS_OK) {
    *error = contextError(c, what);
    return nullptr;
  }
  // hiredis writes with write(2): a server that went away raises SIGPIPE, which must be the error
  // return it comes with, not the end of the process (support/signal_guard.h).
  SignalGuard sigpipe(SIGPIPE);
  for (int done = 0; !done;) {
    if (redisBufferWrite(c, &done) != REDIS_OK) {
      *error = contextError(c, what);
      return nullptr;
    }
    if (!done && !(*error = waitFor(c->fd, POLLOUT, deadline, what)).empty()) return nullptr;
  }
  for (;;) {
    void* reply = nullptr;
    if (redisGetReplyFromReader(c, &reply) != REDIS_OK) {
      *error = contextError(c, what);
      return nullptr;
    }
    if (reply) return Reply(static_cast<redisReply*>(reply));
    if (!(*error = waitFor(c->fd, POLLIN, deadline, what)).empty()) return nullptr;
    if (redisBufferRead(c) != REDIS_OK) {
      *error = contextError(c, what);
      return nullptr;
    }
    if (c->reader->len > kMaxReplyBytes) {
      *error = fmt::format("{}: a reply of more than {} bytes, larger than any entry", what,
                           kMaxReplyBytes);
      return nullptr;
    }
  }
}

std::string_view errorText(const redisReply& r) { return std::string_view(r.str, r.len); }

// The reply to reading `name`: GETEX where values have a TTL and the server has not refused it
// (*getex), else GET; null with *error when the round trip failed.
Reply readValue(redisContext* c, const std::string& name, const RemoteCacheConfig& config,
                bool* getex, const OperationDeadline& deadline, std::string* error) {
  if (config.ttlSeconds > 0 && *getex) {
    // GETEX reads and restarts the value's TTL in one round trip: what the fleet uses stays.
    const std::string ttl = std::to_string(config.ttlSeconds);
    const std::string_view args[] = {"GETEX", name, "EX", ttl};
    Reply r = roundTrip(c, args, deadline, "GETEX " + name, error);
    if (!r || r->type != REDIS_REPLY_ERROR) return r;
    const std::string_view refusal = errorText(*r);
    if (!refusal.starts_with("ERR unknown command") && !refusal.starts_with("NOPERM")) return r;
    // A server before Redis 6.2, or one whose ACL or rename-command refuses GETEX.
    stitch::log().info(
        "remote cache {}: the server refuses GETEX ({}); reading with GET, so a "
        "value's TTL counts from its write",
        config.url, refusal);
    *getex = false;
  }
  const std::string_view args[] = {"GET", name};
  return roundTrip(c, args, deadline, "GET " + name, error);
}

}  // namespace

redisContext* RemoteCache::connection(const OperationDeadline& deadline) {
  if (ctx_ && pid_ != ::getpid()) {
    // A forked child (a DataLoader worker, a multiprocessing pool): the socket is its parent's,
    // and both using it would interleave their replies. Close the child's copy of it (the parent's
    // connection stays open) and connect anew.
    redisFree(ctx_);
    ctx_ = nullptr;
  }
  if (ctx_) return ctx_;
  if (std::chrono::steady_clock::now() < retryAt_) return nullptr;
  // Non-blocking: the connect, like every command, waits in poll() against the deadline. (The
  // host name is resolved before, by getaddrinfo, which the deadline does not bound: the note.)
  ctx_ = redisConnectNonBlock(config_.host.c_str(), config_.port);
  pid_ = ::getpid();
  if (ctx_ == nullptr) {
    failed("cannot allocate a connection");
    return nullptr;
  }
  if (ctx_->err) {
    failed(contextError(ctx_, "cannot connect"));
    return nullptr;
  }
  if (std::string e = waitFor(ctx_->fd, POLLOUT, deadline, "connect"); !e.empty()) {
    failed(e);
    return nullptr;
  }
  int soError = 0;
  socklen_t len = sizeof soError;
  if (::getsockopt(ctx_->fd, SOL_SOCKET, SO_ERROR, &soError, &len) != 0 || soError != 0) {
    failed(fmt::format("cannot connect: {}", std::strerror(soError != 0 ? soError : errno)));
    return nullptr;
  }
  auto ok = [&](std::span<const std::string_view> args, std::string_view what) {
    std::string error;
    Reply r = roundTrip(ctx_, args, deadline, what, &error);
    if (!r) {
      failed(error);
      return false;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      failed(fmt::format("{}: the server answered {}", what, errorText(*r)));
      return false;
    }
    return true;
  };
  if (!config_.password.empty()) {
    std::vector<std::string_view> auth = {"AUTH"};
    if (!config_.user.empty()) auth.push_back(config_.user);
    auth.push_back(config_.password);
    if (!ok(auth, "AUTH")) return nullptr;
  }
  if (config_.db != 0) {
    const std::string db = std::to_string(config_.db);
    const std::string_view select[] = {"SELECT", db};
    if (!ok(select, "SELECT")) return nullptr;
  }
  if (outage_) stitch::log().info("remote cache {}: connected again", config_.url);
  else stitch::log().debug("remote cache {}: connected", config_.url);
  outage_ = false;
  return ctx_;
}

std::optional<std::vector<uint8_t>> RemoteCache::load(const CacheKey& key, EntryKind kind) {
  // Hits and misses count kernels (EntryKind); errors and corrupt values count for every kind.
  const bool counted = kind == EntryKind::Kernel;
  try {
    const std::string name = nameFor(key);
    Reply r;
    {
      std::lock_guard lock(mu_);
      // Begun once the connection is ours: the time spent waiting for another thread's operation
      // is not this one's (that one is bounded by its own deadline).
      const OperationDeadline deadline(config_.timeoutMs);
      redisContext* c = connection(deadline);
      if (!c) {
        if (counted) stats_.remoteMiss();
        return std::nullopt;
      }
      std::string error;
      r = readValue(c, name, config_, &getex_, deadline, &error);
      if (!r) {
        failed(error);
        if (counted) stats_.remoteMiss();
        return std::nullopt;
      }
      if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL) {
        // An error reply (NOAUTH, a server refusing reads, a key of another type) or another
        // type: the server is not one this layer can use. A failure like any other: one
        // warning, then the layer is skipped for the retry interval.
        failed(r->type == REDIS_REPLY_ERROR
                   ? fmt::format("GET {}: the server answered {}", name, errorText(*r))
                   : fmt::format("GET {}: the server answered with a reply of type {}, not a "
                                 "value",
                                 name, r->type));
        if (counted) stats_.remoteMiss();
        return std::nullopt;
      }
    }
    if (r->type == REDIS_REPLY_NIL) {
      if (counted) stats_.remoteMiss();
      stitch::log().debug("remote cache: miss {}", name);
      return std::nullopt;
    }
    std::string why;
    auto payload = decodeEntry(
        *config_.secret, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(r->str), r->len),
        key.canonical(), &why);
    if (!payload) {
      stats_.corruptEntry();
      if (counted) stats_.remoteMiss();
      stitch::log().warn("remote cache {}: ignoring entry {}: {}; compiling again", config_.url,
                         name, why);
      return std::nullopt;
    }
    if (counted) stats_.remoteHit();
    stitch::log().debug("remote cache: hit {} ({} bytes)", name, payload->size());
    return payload;
  } catch (const std::exception& e) {
    // bad_alloc for a huge value, a formatting failure: the layer must never fail the caller.
    stats_.remoteError();
    stitch::log().warn("remote cache {}: lookup failed: {}", config_.url, e.what());
    return std::nullopt;
  }
}

void RemoteCache::store(const CacheKey& key, std::span<const uint8_t> payload, EntryKind kind) {
  try {
    const std::string name = nameFor(key);
    const std::vector<uint8_t> bytes = encodeEntry(*config_.secret, key.canonical(), payload);
    const std::string_view value(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    const std::string ttl = std::to_string(config_.ttlSeconds);
    std::vector<std::string_view> args = {"SET", name, value};
    if (config_.ttlSeconds > 0) args.insert(args.end(), {"EX", ttl});
    std::lock_guard lock(mu_);
    const OperationDeadline deadline(config_.timeoutMs);
    redisContext* c = connection(deadline);
    if (!c) return;
    std::string error;
    Reply r = roundTrip(c, args, deadline, "SET " + name, &error);
    if (!r) {
      failed(error);
      return;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      // NOAUTH, a read-only replica, OOM under maxmemory with noeviction: a server this layer
      // cannot write to now. One warning, then skipped for the retry interval.
      failed(fmt::format("SET {}: the server answered {}", name, errorText(*r)));
      return;
    }
    if (kind == EntryKind::Kernel) stats_.remoteWrite();
    stitch::log().debug("remote cache: wrote {} ({} bytes)", name, bytes.size());
  } catch (const std::exception& e) {
    stats_.remoteError();
    stitch::log().warn("remote cache {}: store failed: {}", config_.url, e.what());
  }
}

#else  // no hiredis: configFrom() refuses to make a config, so these are never reached in use.

std::optional<std::vector<uint8_t>> RemoteCache::load(const CacheKey&, EntryKind kind) {
  if (kind == EntryKind::Kernel) stats_.remoteMiss();
  return std::nullopt;
}

void RemoteCache::store(const CacheKey&, std::span<const uint8_t>, EntryKind) {}

#endif

}  // namespace stitch::rt
