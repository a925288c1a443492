// The kernel cache's secrets (design note and threat model in cache_secret.h).
#include "runtime/cache_secret.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>

#include "runtime/support/env.h"
#include "runtime/support/error.h"
#include "runtime/support/fd.h"
#include "runtime/support/logging.h"
#include "runtime/support/signal_guard.h"

namespace stitch::rt {

namespace fs = std::filesystem;

namespace {

// Trailing whitespace dropped (a key file ends with a newline; editors add one).
std::string_view trimmed(std::string_view s) {
  while (!s.empty() &&
         (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// "" when a secret's length is in range, else what is wrong with it (never the secret).
std::string lengthDefect(std::string_view secret) {
  if (secret.size() < kMinSecretBytes)
    return fmt::format("{} bytes, fewer than {}", secret.size(), kMinSecretBytes);
  if (secret.size() > kMaxSecretBytes)
    return fmt::format("{} bytes, more than {}", secret.size(), kMaxSecretBytes);
  return "";
}

// The contents of the open regular file fd, `size` bytes long, or nullopt with *why.
std::optional<std::string> readSecretFile(int fd, uint64_t size, std::string* why) {
  if (size > kMaxSecretBytes + 16) {
    *why = fmt::format("{} bytes, more than a key ({} at most)", size, kMaxSecretBytes);
    return std::nullopt;
  }
  std::string text(static_cast<size_t>(size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t r = ::read(fd, text.data() + got, text.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      *why = fmt::format("cannot read it: {}", std::strerror(errno));
      return std::nullopt;
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  text.resize(got);
  return std::string(trimmed(text));
}

const char* const kKeyVariable = "STITCH_CACHE_KEY";
const char* const kKeyFileVariable = "STITCH_CACHE_KEY_FILE";

[[noreturn]] void badKey(std::string_view what, std::string_view why) {
  throwError(ErrorCode::InvalidArgument,
             fmt::format("{} is not valid: {}; valid values: a secret of {} to {} bytes shared by "
                         "the processes that share cache entries (e.g. `openssl rand -hex 32`){}",
                         what, why, kMinSecretBytes, kMaxSecretBytes,
                         what.starts_with(kKeyFileVariable)
                             ? " in a regular file owned by this user or root and writable by no "
                               "one else"
                             : ""));
}

std::shared_ptr<const CacheSecret> secretFromKeyFile(const std::string& path) {
  const std::string what = fmt::format("{}={}", kKeyFileVariable, path);
  // Followed if a symbolic link: mounted secrets (a Kubernetes volume) are links into a data
  // directory; what must be safe is the file itself.
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (f.fd < 0) badKey(what, fmt::format("cannot open it: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) badKey(what, "not a regular file");
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    badKey(what, fmt::format("owned by user {}, neither this user ({}) nor root", st.st_uid,
                             ::geteuid()));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    badKey(what, fmt::format("writable by others (mode {:04o})", st.st_mode & 07777));
  std::string why;
  std::optional<std::string> secret = readSecretFile(f.fd, static_cast<uint64_t>(st.st_size), &why);
  if (!secret) badKey(what, why);
  if (std::string defect = lengthDefect(*secret); !defect.empty()) badKey(what, defect);
  return std::make_shared<CacheSecret>(*secret, what);
}

// 32 random bytes as 64 hex digits, or nullopt with *why.
std::optional<std::string> randomSecret(std::string* why) {
  std::array<uint8_t, 32> bytes{};
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t r = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      *why = fmt::format("cannot read random bytes (getrandom): {}", std::strerror(errno));
      return std::nullopt;
    }
    got += static_cast<size_t>(r);
  }
  std::string hex;
  for (uint8_t b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

// Reads this user's key file at `path` if it is one to trust (the note: a regular file, not a
// link, owned by this user, with no permission for anyone else). nullopt with *why empty when
// there is no such file, with *why set when there is one that is refused or unreadable.
std::optional<std::string> readDirectorySecret(const fs::path& path, std::string* why) {
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
  if (f.fd < 0) {
    if (errno != ENOENT)
      *why = errno == ELOOP
                 ? fmt::format("{} is a symbolic link", path.string())
                 : fmt::format("cannot open {}: {}", path.string(), std::strerror(errno));
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *why = fmt::format("{} is not a regular file", path.string());
    return std::nullopt;
  }
  if (st.st_uid != ::geteuid()) {
    *why = fmt::format("{} is owned by user {}, not this user ({})", path.string(), st.st_uid,
                       ::geteuid());
    return std::nullopt;
  }
  if ((st.st_mode & 077) != 0) {
    *why = fmt::format("{} may be read or written by others (mode {:04o}; it must be 0600)",
                       path.string(), st.st_mode & 07777);
    return std::nullopt;
  }
  std::optional<std::string> secret = readSecretFile(f.fd, static_cast<uint64_t>(st.st_size), why);
  if (!secret) {
    *why = path.string() + ": " + *why;
    return std::nullopt;
  }
  if (std::string defect = lengthDefect(*secret); !defect.empty()) {
    *why = fmt::format("{} does not hold a key: {}", path.string(), defect);
    return std::nullopt;
  }
  return secret;
}

// Makes this user's key file at `path` (the note: written to a temporary file, then hard-linked
// into place, so that it appears whole or not at all, and never replaces one another process
// made). true when it made one or found one made meanwhile (read it again); false with *why.
bool makeDirectorySecret(const fs::path& path, std::string* why) {
  std::optional<std::string> secret = randomSecret(why);
  if (!secret) return false;
  // Named as the cache's temporary files (disk_cache.cpp), so the sweep of crashed writers'
  // files removes one left by a crash here.
  static std::atomic<uint64_t> counter{0};
  const fs::path tmp =
      path.parent_path() / fmt::format(".tmp-{:016x}-{}-{:x}-{}.stitchk~", 0, ::getpid(),
                                       std::hash<std::thread::id>{}(std::this_thread::get_id()),
                                       counter.fetch_add(1));
  Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (f.fd < 0) {
    *why = fmt::format("cannot create {}: {}", tmp.string(), std::strerror(errno));
    return false;
  }
  const std::string text = *secret + "\n";
  bool ok = ::fchmod(f.fd, 0600) == 0;  // whatever the umask
  {
    SignalGuard xfsz(SIGXFSZ);  // a file-size limit is an error here, not the end (signal_guard.h)
    ok = ok && ::write(f.fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  }
  ok = ok && ::fsync(f.fd) == 0;
  const int err = errno;
  ::close(f.fd);
  f.fd = -1;
  if (!ok) {
    ::unlink(tmp.c_str());
    *why = fmt::format("cannot write {}: {}", tmp.string(), std::strerror(err));
    return false;
  }
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int linkErr = errno;
  ::unlink(tmp.c_str());
  if (linked == 0 || linkErr == EEXIST) return true;
  *why = fmt::format("cannot create {}: {}", path.string(), std::strerror(linkErr));
  return false;
}

}  // namespace

CacheSecret::CacheSecret(std::string_view secret, std::string origin)
    : hmac_(secret), origin_(std::move(origin)) {
  fingerprint_ = hmac_.begin().add("stitch cache secret fingerprint").finish();
}

std::shared_ptr<const CacheSecret> fleetSecretFromEnv() {
  const std::optional<std::string> key = env::get(kKeyVariable);
  const std::optional<std::string> file = env::get(kKeyFileVariable);
  STITCH_CHECK(!(key && file), ErrorCode::InvalidArgument,
               "{} and {} are both set; set one of them (the fleet's cache key, or a file "
               "holding it)",
               kKeyVariable, kKeyFileVariable);
  if (file) return secretFromKeyFile(*file);
  if (!key) return nullptr;
  if (std::string defect = lengthDefect(*key); !defect.empty()) badKey(kKeyVariable, defect);
  return std::make_shared<CacheSecret>(*key, kKeyVariable);
}

std::string directorySecretName() { return fmt::format(".stitch-key-{}", ::geteuid()); }

std::shared_ptr<const CacheSecret> directorySecret(const fs::path& dir, bool create,
                                                   std::string* why) {
  const fs::path path = dir / directorySecretName();
  // Twice at most: a key made by another process between our read and our link is read again.
  for (int attempt = 0; attempt < 2; ++attempt) {
    why->clear();
    if (std::optional<std::string> secret = readDirectorySecret(path, why))
      return std::make_shared<CacheSecret>(*secret, path.string());
    if (!why->empty() || !create) return nullptr;
    if (!makeDirectorySecret(path, why)) return nullptr;
    stitch::log().debug("kernel cache: this user's key for {} is {}", dir.string(), path.string());
  }
  *why = fmt::format("{} could not be made and read back", path.string());
  return nullptr;
}

}  // namespace stitch::rt
