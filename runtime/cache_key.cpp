// Cache keys (design note in cache_key.h).
#include "runtime/cache_key.h"

#include "runtime/support/canonical.h"
#include "runtime/support/hash.h"

namespace stitch::rt {

CacheKey& CacheKey::add(std::string name, std::string bytes) {
  parts.push_back(Part{std::move(name), std::move(bytes)});
  return *this;
}

std::string CacheKey::canonical() const {
  // The same encoding as kernel programs (support/canonical.h): lengths as 8 bytes little-endian.
  CanonicalWriter w;
  w.string(kCanonicalKeyFormat);
  w.length(parts.size());
  for (const Part& p : parts) {
    w.string(p.name);
    w.string(p.bytes);
  }
  w.string(version);
  return w.take();
}

uint64_t CacheKey::hash() const { return fnv1a64(canonical()); }

}  // namespace stitch::rt
