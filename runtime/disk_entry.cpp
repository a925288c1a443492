// The persistent layers' entry format (design note in disk_entry.h).
#include "runtime/disk_entry.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "runtime/support/signal_guard.h"

namespace stitch::rt {

namespace diskfmt {

void putLE(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t getLE(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// Reads exactly n bytes at the current offset; false on EOF or error.
bool readAll(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// A write past the file-size limit fails with EFBIG instead of ending the process with SIGXFSZ
// (the note's "Failures"; support/signal_guard.h).
bool writeAll(int fd, const uint8_t* p, size_t n) {
  SignalGuard xfsz(SIGXFSZ);
  while (n > 0) {
    ssize_t r = ::write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

std::string errnoText() { return std::strerror(errno); }

bool allOf(std::string_view s, std::string_view chars) {
  return !s.empty() && s.find_first_not_of(chars) == std::string_view::npos;
}

// The writer's process id in the name of a temporary file store() makes
// (".tmp-<16 hex>-<pid>-<hex>-<n>.stitchk~"), or nullopt when the name is not one of ours.
std::optional<pid_t> tempFileWriter(std::string_view name) {
  if (!name.starts_with(kTempPrefix) || !name.ends_with(kTempSuffix)) return std::nullopt;
  name = name.substr(kTempPrefix.size(), name.size() - kTempPrefix.size() - kTempSuffix.size());
  std::array<std::string_view, 4> fields;
  for (size_t i = 0; i < fields.size(); ++i) {
    size_t dash = i + 1 < fields.size() ? name.find('-') : name.size();
    if (dash == std::string_view::npos) return std::nullopt;
    fields[i] = name.substr(0, dash);
    name.remove_prefix(std::min(name.size(), dash + 1));
  }
  constexpr std::string_view kHex = "0123456789abcdef", kDec = "0123456789";
  if (fields[0].size() != 16 || !allOf(fields[0], kHex) || !allOf(fields[1], kDec) ||
      fields[1].size() > 9 || !allOf(fields[2], kHex) || !allOf(fields[3], kDec))
    return std::nullopt;
  pid_t pid = 0;
  for (char c : fields[1]) pid = pid * 10 + (c - '0');
  if (pid <= 0) return std::nullopt;  // kill(0 or -1, ...) would mean a process group
  return pid;
}

// Whether a process with this id exists on this host (EPERM: it exists, owned by someone else).
bool processExists(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// Reads the header at h of an entry `size` bytes long into out: "" when the magic and format
// version are ours and the sizes add up to `size`, else what is wrong. Each term is checked
// against the size first, so their sum cannot wrap.
std::string parseEntryHeader(const uint8_t* h, uint64_t size, EntryHeader& out) {
  if (size < kDiskHeaderBytes) return fmt::format("{} bytes, shorter than the header", size);
  if (std::memcmp(h, kDiskMagic.data(), kDiskMagic.size()) != 0) return "wrong magic";
  const uint64_t version = getLE(h + 8, 4);
  if (version != kDiskFormatVersion)
    return fmt::format("format version {}, expected {}", version, kDiskFormatVersion);
  out.keyBytes = getLE(h + 12, 4);
  out.payloadBytes = getLE(h + 16, 8);
  if (out.keyBytes > kMaxKeyBytes || out.payloadBytes > size ||
      size != kDiskHeaderBytes + out.keyBytes + out.payloadBytes)
    return fmt::format("{} bytes, header says {} + {} + {}", size, kDiskHeaderBytes, out.keyBytes,
                       out.payloadBytes);
  return "";
}

// The tag of an entry: HMAC-SHA-256 of the header before the tag, the key, the payload. Begun
// here and fed the key and the payload by the caller (prune() reads the payload in pieces).
HmacSha256::Message beginTag(const CacheSecret& secret, const uint8_t* header) {
  HmacSha256::Message m = secret.hmac().begin();
  m.add(std::span<const uint8_t>(header, kEntryTagOffset));
  return m;
}

}  // namespace diskfmt

using namespace diskfmt;

std::vector<uint8_t> encodeEntry(const CacheSecret& secret, std::string_view canonicalKey,
                                 std::span<const uint8_t> payload) {
  // Sized once and filled by offset (growing it with insert() trips a GCC 12 -O2 false
  // -Wstringop-overflow).
  std::vector<uint8_t> out(kDiskHeaderBytes + canonicalKey.size() + payload.size());
  uint8_t* p = out.data();
  std::memcpy(p, kDiskMagic.data(), kDiskMagic.size());
  putLE(p + 8, kDiskFormatVersion, 4);
  putLE(p + 12, canonicalKey.size(), 4);
  putLE(p + 16, payload.size(), 8);
  if (!canonicalKey.empty())
    std::memcpy(p + kDiskHeaderBytes, canonicalKey.data(), canonicalKey.size());
  if (!payload.empty())
    std::memcpy(p + kDiskHeaderBytes + canonicalKey.size(), payload.data(), payload.size());
  const Sha256Digest tag = beginTag(secret, p).add(canonicalKey).add(payload).finish();
  std::memcpy(p + kEntryTagOffset, tag.data(), tag.size());
  return out;
}

std::optional<std::vector<uint8_t>> decodeEntry(const CacheSecret& secret,
                                                std::span<const uint8_t> bytes,
                                                std::string_view canonicalKey, std::string* why) {
  auto fail = [&](std::string text) -> std::optional<std::vector<uint8_t>> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  EntryHeader h;
  if (std::string defect = parseEntryHeader(bytes.data(), bytes.size(), h); !defect.empty())
    return fail(std::move(defect));
  const std::span<const uint8_t> storedKey = bytes.subspan(kDiskHeaderBytes, h.keyBytes);
  const std::span<const uint8_t> payload = bytes.subspan(kDiskHeaderBytes + h.keyBytes);
  const Sha256Digest tag = beginTag(secret, bytes.data()).add(storedKey).add(payload).finish();
  if (!macEqual(tag, bytes.subspan(kEntryTagOffset, tag.size()))) return fail(std::string(kBadTag));
  if (std::string_view(reinterpret_cast<const char*>(storedKey.data()), storedKey.size()) !=
      canonicalKey)
    return fail(
        "the header holds another key (a hash collision, another version's entry or a "
        "foreign value)");
  return std::vector<uint8_t>(payload.begin(), payload.end());
}

}  // namespace stitch::rt
