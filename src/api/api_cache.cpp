// The kernel cache's directory in the C API (stitch.h, "The kernel cache's directory"): its path,
// what it holds, clear and prune, for tools such as `stitch cache`.
//
// Each call builds a DiskCache for the directory the environment names, as the backends do
// (runtime/kernel_cache.h), and asks it; the work is all there. Unlike the backends, which fall
// back to memory quietly, these fail when there is no directory to act on: a tool asked for it.
#include <memory>
#include <optional>

#include "api/api_internal.h"
#include "runtime/kernel_cache.h"
#include "runtime/support/logging.h"

using namespace stitch;

namespace {

// The directory the environment names. InvalidArgument when the disk layer is off or no
// directory can be found, and on a bad STITCH_CACHE.
std::filesystem::path cacheDirectory() {
  configureLoggingFromEnv();
  STITCH_CHECK(rt::DiskCache::enabledByEnv(), ErrorCode::InvalidArgument,
               "the kernel cache's disk layer is off (STITCH_CACHE=0): there is no cache "
               "directory");
  std::optional<std::filesystem::path> dir = rt::DiskCache::directoryFromEnv();
  STITCH_CHECK(dir.has_value(), ErrorCode::InvalidArgument,
               "no kernel cache directory: set STITCH_CACHE_DIR, XDG_CACHE_HOME or HOME");
  return *dir;
}

}  // namespace

namespace stitch::api {

rt::DiskCache cacheDirFromEnv() {
  std::filesystem::path dir = cacheDirectory();
  return rt::DiskCache(std::move(dir), rt::DiskCache::maxBytesFromEnv(), rt::fleetSecretFromEnv());
}

}  // namespace stitch::api

using stitch::api::cacheDirFromEnv;

extern "C" {

stitch_status_t stitch_cache_dir_path(char* buf, size_t capacity, size_t* needed) {
  if (capacity) STITCH_API_REQUIRE(buf);
  STITCH_API_GUARD({
    api::copyOut(cacheDirectory().string(), buf, capacity, needed);
    return STITCH_OK;
  })
}

stitch_status_t stitch_cache_dir_stats(stitch_cache_dir_stats_t* out) {
  STITCH_API_REQUIRE(out);
  STITCH_API_GUARD({
    rt::DiskCache cache = cacheDirFromEnv();
    const rt::DiskCache::DiskUsage u = cache.usage();
    *out = stitch_cache_dir_stats_t{u.entries, u.bytes, u.temporaries, u.temporaryBytes,
                                    cache.maxBytes()};
    return STITCH_OK;
  })
}

stitch_status_t stitch_cache_dir_kinds(stitch_cache_dir_kinds_t* out) {
  STITCH_API_REQUIRE(out);
  STITCH_API_GUARD({
    const rt::DiskCache::DiskUsage u = cacheDirFromEnv().usage();
    *out = stitch_cache_dir_kinds_t{u.entries - u.programs - u.tuned - u.profiles, u.programs,
                                    u.tuned, u.profiles};
    return STITCH_OK;
  })
}

stitch_status_t stitch_cache_dir_clear(uint64_t* removed_files, uint64_t* freed_bytes) {
  rt::DiskCache::Removed r;
  STITCH_API_GUARD({ r = cacheDirFromEnv().clear(); })
  // Outputs only on success, as stitch.h promises (a failure has returned above).
  if (removed_files) *removed_files = r.files;
  if (freed_bytes) *freed_bytes = r.bytes;
  return STITCH_OK;
}

stitch_status_t stitch_cache_dir_prune(stitch_cache_dir_prune_t* out) {
  STITCH_API_GUARD({
    const rt::DiskCache::PruneResult r = cacheDirFromEnv().prune();
    if (out)
      *out = stitch_cache_dir_prune_t{r.staleTemporaries, r.corruptEntries, r.evictedEntries,
                                      r.freedBytes};
    return STITCH_OK;
  })
}

}  // extern "C"
