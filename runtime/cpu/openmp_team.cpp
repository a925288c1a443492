// The process's OpenMP runtime (design note in openmp_team.h).
#include "runtime/cpu/openmp_team.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "runtime/support/env.h"

namespace stitch::rt::cpu {

namespace {

bool isOpenMpLibrary(std::string_view path) {
  std::string_view name = path.substr(path.rfind('/') + 1);
  for (std::string_view prefix : {"libgomp", "libomp", "libiomp5"})
    if (name.substr(0, prefix.size()) == prefix) return true;
  return false;
}

struct Search {
  unsigned long long adds = 0;  // objects loaded into the process so far (dlpi_adds)
  bool scan = true;             // false: stop at the first object (only `adds` is wanted)
  std::string path;
};

int visit(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<Search*>(data);
  s->adds = info->dlpi_adds;
  if (!s->scan) return 1;
  if (info->dlpi_name != nullptr && isOpenMpLibrary(info->dlpi_name)) {
    s->path = info->dlpi_name;
    return 1;
  }
  return 0;
}

bool enabled() {
  static const bool on = openMpFromEnv();
  return on;
}

}  // namespace

bool openMpFromEnv() { return env::getBool(kOpenMpEnv, true); }

unsigned openMpTeam(const OpenMpRuntime& omp, int64_t poolThreads, int64_t chunks) {
  int64_t team = std::min(poolThreads, chunks);
  if (omp.maxThreads != nullptr) team = std::min<int64_t>(team, omp.maxThreads());
  return static_cast<unsigned>(std::max<int64_t>(team, 1));
}

const OpenMpRuntime* loadedOpenMp() {
  static OpenMpRuntime runtime;
  static std::atomic<const OpenMpRuntime*> found{nullptr};
  // When the last search ran (steady clock ticks): searches are at least kSearchGap apart, so a
  // process without OpenMP pays a clock read per parallel loop, not a walk of its objects.
  static std::atomic<int64_t> lastSearch{0};
  static std::mutex mu;
  static unsigned long long searchedAt = ~0ULL;
  constexpr auto kSearchGap = std::chrono::milliseconds(50);
  if (const OpenMpRuntime* f = found.load(std::memory_order_acquire)) return f;
  if (!enabled()) return nullptr;
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  const int64_t gap =
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(kSearchGap).count();
  int64_t last = lastSearch.load(std::memory_order_relaxed);
  if (now - last < gap || !lastSearch.compare_exchange_strong(last, now)) return nullptr;
  std::lock_guard lk(mu);
  Search s;
  s.scan = false;
  dl_iterate_phdr(visit, &s);
  if (s.adds == searchedAt) return nullptr;  // nothing loaded since the last search
  searchedAt = s.adds;
  s.scan = true;
  dl_iterate_phdr(visit, &s);
  if (s.path.empty()) return nullptr;
  void* h = ::dlopen(s.path.c_str(), RTLD_NOLOAD | RTLD_LAZY);
  if (h == nullptr) return nullptr;
  auto f = reinterpret_cast<GompParallelFn>(::dlsym(h, "GOMP_parallel"));
  if (f == nullptr) return nullptr;
  // The handle stays open: the runtime is in use for the life of the process. `runtime` is
  // written once, under the lock, before it is published.
  runtime.parallel = f;
  runtime.maxThreads = reinterpret_cast<int (*)()>(::dlsym(h, "omp_get_max_threads"));
  found.store(&runtime, std::memory_order_release);
  return &runtime;
}

}  // namespace stitch::rt::cpu
