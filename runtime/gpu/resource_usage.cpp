#include "runtime/gpu/resource_usage.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace stitch::rt::gpu {

namespace {

// The number that ends right before text[end] (skipping spaces), or -1.
int64_t numberBefore(std::string_view text, size_t end) {
  while (end > 0 && text[end - 1] == ' ') --end;
  size_t begin = end;
  while (begin > 0 && text[begin - 1] >= '0' && text[begin - 1] <= '9') --begin;
  if (begin == end) return -1;
  int64_t v = 0;
  for (size_t i = begin; i < end; ++i) v = v * 10 + (text[i] - '0');
  return v;
}

// Calls f(number) for every "<number> <suffix>" in text.
template <class F>
void forEachNumberBefore(std::string_view text, std::string_view suffix, F f) {
  for (size_t at = text.find(suffix); at != std::string_view::npos;
       at = text.find(suffix, at + suffix.size())) {
    int64_t n = numberBefore(text, at);
    if (n >= 0) f(n);
  }
}

}  // namespace

ResourceUsage parsePtxasLog(std::string_view log) {
  ResourceUsage u;
  // "ptxas info    : Used 13 registers, used 1 barriers, 1024 bytes smem"
  forEachNumberBefore(log, " registers", [&](int64_t n) {
    u.registers = std::max<int>(u.registers, static_cast<int>(n));
  });
  // "ptxas         .     424 bytes stack frame, 568 bytes spill stores, 568 bytes spill loads"
  forEachNumberBefore(log, " bytes spill stores", [&](int64_t n) { u.spillBytes += n; });
  forEachNumberBefore(log, " bytes spill loads", [&](int64_t n) { u.spillBytes += n; });
  forEachNumberBefore(log, " bytes stack frame",
                      [&](int64_t n) { u.stackBytes = std::max(u.stackBytes, n); });
  return u;
}

namespace {

// Little-endian reads with bounds checks; the host is little-endian like every AMDGPU code object.
template <class T>
bool readAt(std::span<const uint8_t> bytes, uint64_t offset, T* out) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return false;
  std::memcpy(out, bytes.data() + offset, sizeof(T));
  return true;
}

// The msgpack unsigned/signed integer at bytes[at], or nullopt.
std::optional<int64_t> msgpackInt(std::span<const uint8_t> b, size_t at) {
  if (at >= b.size()) return std::nullopt;
  uint8_t tag = b[at];
  if (tag <= 0x7f) return tag;                       // positive fixint
  if (tag >= 0xe0) return static_cast<int8_t>(tag);  // negative fixint
  auto bigEndian = [&](size_t n) -> std::optional<uint64_t> {
    if (b.size() - at - 1 < n) return std::nullopt;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | b[at + 1 + i];
    return v;
  };
  std::optional<uint64_t> v;
  switch (tag) {
    case 0xcc:
    case 0xd0: v = bigEndian(1); break;
    case 0xcd:
    case 0xd1: v = bigEndian(2); break;
    case 0xce:
    case 0xd2: v = bigEndian(4); break;
    case 0xcf:
    case 0xd3: v = bigEndian(8); break;
    default: return std::nullopt;
  }
  if (!v) return std::nullopt;
  return static_cast<int64_t>(*v);  // signed forms only carry small non-negative counts here
}

// Calls f(value) for each integer stored under `key` in a msgpack document. Keys are matched with
// their fixstr header (0xa0 | length) so ".sgpr_count" never matches inside ".sgpr_spill_count";
// every such key occurs once per kernel map, so a scan visits each kernel once. This is a scan,
// not a msgpack parser: enough for LLVM's AMDGPU metadata, whose keys are short fixed strings.
template <class F>
void forEachKeyValue(std::span<const uint8_t> doc, std::string_view key, F f) {
  std::string needle(1, static_cast<char>(0xa0 | key.size()));
  needle += key;
  std::string_view text(reinterpret_cast<const char*>(doc.data()), doc.size());
  for (size_t at = text.find(needle); at != std::string_view::npos; at = text.find(needle, at + 1))
    if (auto v = msgpackInt(doc, at + needle.size())) f(*v);
}

constexpr uint32_t kShtNote = 7;
constexpr uint32_t kNtAmdgpuMetadata = 32;  // NT_AMDGPU_METADATA (code object v3+, msgpack)

// The descriptor of the "AMDGPU" NT_AMDGPU_METADATA note, found through the section headers.
std::optional<std::span<const uint8_t>> amdgpuMetadataNote(std::span<const uint8_t> elf) {
  static constexpr uint8_t kMagic[4] = {0x7f, 'E', 'L', 'F'};
  if (elf.size() < 64 || std::memcmp(elf.data(), kMagic, 4) != 0) return std::nullopt;
  if (elf[4] != 2 || elf[5] != 1) return std::nullopt;  // ELFCLASS64, ELFDATA2LSB
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0;
  if (!readAt(elf, 0x28, &shoff) || !readAt(elf, 0x3a, &shentsize) || !readAt(elf, 0x3c, &shnum))
    return std::nullopt;
  for (uint16_t i = 0; i < shnum; ++i) {
    uint64_t sh = shoff + uint64_t{i} * shentsize;
    uint32_t type = 0;
    uint64_t offset = 0, size = 0;
    if (!readAt(elf, sh + 4, &type) || !readAt(elf, sh + 0x18, &offset) ||
        !readAt(elf, sh + 0x20, &size))
      return std::nullopt;
    if (type != kShtNote || offset > elf.size() || size > elf.size() - offset) continue;
    // Notes: namesz, descsz, type (4 bytes each), then name and desc, each padded to 4 bytes.
    for (uint64_t n = offset; n + 12 <= offset + size;) {
      uint32_t namesz = 0, descsz = 0, ntype = 0;
      readAt(elf, n, &namesz);
      readAt(elf, n + 4, &descsz);
      readAt(elf, n + 8, &ntype);
      uint64_t name = n + 12, desc = name + ((uint64_t{namesz} + 3) & ~uint64_t{3});
      uint64_t next = desc + ((uint64_t{descsz} + 3) & ~uint64_t{3});
      if (next > offset + size) break;
      if (ntype == kNtAmdgpuMetadata && namesz == 7 &&
          std::memcmp(elf.data() + name, "AMDGPU", 7) == 0)
        return elf.subspan(desc, descsz);
      n = next;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ResourceUsage> readAmdgpuResourceUsage(std::span<const uint8_t> codeObject) {
  auto note = amdgpuMetadataNote(codeObject);
  if (!note) return std::nullopt;
  ResourceUsage u;
  forEachKeyValue(*note, ".vgpr_count", [&](int64_t v) {
    u.registers = std::max<int>(u.registers, static_cast<int>(v));
  });
  forEachKeyValue(*note, ".vgpr_spill_count", [&](int64_t v) { u.spillBytes += 4 * v; });
  forEachKeyValue(*note, ".sgpr_spill_count", [&](int64_t v) { u.spillBytes += 4 * v; });
  forEachKeyValue(*note, ".private_segment_fixed_size",
                  [&](int64_t v) { u.stackBytes = std::max(u.stackBytes, v); });
  return u;
}

}  // namespace stitch::rt::gpu
