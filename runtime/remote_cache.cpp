// The remote layer of the kernel cache (design note in remote_cache.h).
#include "runtime/remote_cache.h"

#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>

#include "support/env.h"
#include "support/error.h"
#include "support/logging.h"

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
  return c;
}

// SIGPIPE: hiredis writes to its socket with write(2), and a server that went away makes that
// raise SIGPIPE, whose default action ends the process. The signal is blocked on this thread for
// the duration of a command and a pending one it raised is consumed before unblocking (a
// write's SIGPIPE goes to the thread that wrote), so the failure is an error return, as it must
// be, in any program, whatever its own SIGPIPE disposition.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    wasPending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    if (!wasPending_) {
      const struct timespec zero {};
      while (sigtimedwait(&pipe_, nullptr, &zero) > 0) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_{}, old_{};
  bool wasPending_ = false;
};

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

RemoteCache::RemoteCache(RemoteCacheConfig config) : config_(std::move(config)) {}

RemoteCache::~RemoteCache() {
#if defined(STITCH_HAVE_HIREDIS)
  if (ctx_) redisFree(ctx_);
#endif
}

std::shared_ptr<RemoteCache> RemoteCache::shared(const RemoteCacheConfig& c) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<RemoteCache>> live;
  // Every field, password included: two configurations that differ in anything are two layers.
  const std::string id =
      fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}", c.host, c.port, c.db, c.user, c.password,
                  c.nameSpace, c.timeoutMs, c.ttlSeconds, c.retryMs);
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

Reply command(redisContext* c, std::span<const std::string_view> args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  SigpipeGuard guard;
  return Reply(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
}

std::string contextError(redisContext* c, std::string_view during) {
  return fmt::format("{}: {}", during, c && c->errstr[0] ? c->errstr : "no reply");
}

// The reply to reading `name`: GETEX where values have a TTL and the server has not refused it
// (*getex), else GET; null when the connection failed.
Reply readValue(redisContext* c, const std::string& name, const RemoteCacheConfig& config,
                bool* getex) {
  if (config.ttlSeconds > 0 && *getex) {
    // GETEX reads and restarts the value's TTL in one round trip: what the fleet uses stays.
    const std::string ttl = std::to_string(config.ttlSeconds);
    const std::string_view args[] = {"GETEX", name, "EX", ttl};
    Reply r = command(c, args);
    if (!r || r->type != REDIS_REPLY_ERROR) return r;
    const std::string_view error(r->str, r->len);
    if (!error.starts_with("ERR unknown command") && !error.starts_with("NOPERM")) return r;
    // A server before Redis 6.2, or one whose ACL or rename-command refuses GETEX.
    stitch::log().info(
        "remote cache {}: the server refuses GETEX ({}); reading with GET, so a "
        "value's TTL counts from its write",
        config.url, error);
    *getex = false;
  }
  const std::string_view args[] = {"GET", name};
  return command(c, args);
}

}  // namespace

redisContext* RemoteCache::connection() {
  if (ctx_ && pid_ != ::getpid()) {
    // A forked child (a DataLoader worker, a multiprocessing pool): the socket is its parent's,
    // and both using it would interleave their replies. Close the child's copy of it (the parent's
    // connection stays open) and connect anew.
    redisFree(ctx_);
    ctx_ = nullptr;
  }
  if (ctx_) return ctx_;
  if (std::chrono::steady_clock::now() < retryAt_) return nullptr;
  struct timeval tv {};
  tv.tv_sec = config_.timeoutMs / 1000;
  tv.tv_usec = static_cast<suseconds_t>((config_.timeoutMs % 1000) * 1000);
  ctx_ = redisConnectWithTimeout(config_.host.c_str(), config_.port, tv);
  pid_ = ::getpid();
  if (ctx_ == nullptr) {
    failed("cannot allocate a connection");
    return nullptr;
  }
  if (ctx_->err) {
    failed(contextError(ctx_, "cannot connect"));
    return nullptr;
  }
  if (redisSetTimeout(ctx_, tv) != REDIS_OK) {
    failed(contextError(ctx_, "cannot set the timeout"));
    return nullptr;
  }
  auto ok = [&](std::span<const std::string_view> args, std::string_view what) {
    Reply r = command(ctx_, args);
    if (!r) {
      failed(contextError(ctx_, what));
      return false;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      failed(fmt::format("{}: {}", what, std::string_view(r->str, r->len)));
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
      redisContext* c = connection();
      if (!c) {
        if (counted) stats_.remoteMiss();
        return std::nullopt;
      }
      r = readValue(c, name, config_, &getex_);
      if (!r) {
        failed(contextError(c, "GET"));
        if (counted) stats_.remoteMiss();
        return std::nullopt;
      }
    }
    if (r->type == REDIS_REPLY_NIL) {
      if (counted) stats_.remoteMiss();
      stitch::log().debug("remote cache: miss {}", name);
      return std::nullopt;
    }
    if (r->type != REDIS_REPLY_STRING) {
      // An error reply (a key of another type, a server refusing reads): the connection is fine.
      stats_.remoteError();
      if (counted) stats_.remoteMiss();
      stitch::log().warn("remote cache {}: GET {} did not return a value{}{}", config_.url, name,
                         r->type == REDIS_REPLY_ERROR ? ": " : "",
                         r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "");
      return std::nullopt;
    }
    std::string why;
    auto payload =
        decodeEntry(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(r->str), r->len),
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
    const std::vector<uint8_t> bytes = encodeEntry(key.canonical(), payload);
    const std::string_view value(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    const std::string ttl = std::to_string(config_.ttlSeconds);
    std::vector<std::string_view> args = {"SET", name, value};
    if (config_.ttlSeconds > 0) args.insert(args.end(), {"EX", ttl});
    std::lock_guard lock(mu_);
    redisContext* c = connection();
    if (!c) return;
    Reply r = command(c, args);
    if (!r) {
      failed(contextError(c, "SET"));
      return;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      // e.g. OOM under maxmemory with noeviction: this value is lost, the connection is fine.
      stats_.remoteError();
      stitch::log().warn("remote cache {}: SET {} failed: {}", config_.url, name,
                         std::string_view(r->str, r->len));
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

redisContext* RemoteCache::connection() { return nullptr; }

std::optional<std::vector<uint8_t>> RemoteCache::load(const CacheKey&, EntryKind kind) {
  if (kind == EntryKind::Kernel) stats_.remoteMiss();
  return std::nullopt;
}

void RemoteCache::store(const CacheKey&, std::span<const uint8_t>, EntryKind) {}

#endif

}  // namespace stitch::rt
