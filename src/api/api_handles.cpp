// Live handles of the C API.
//
// Why a registry and not a magic field: a magic word inside the handle must be read from the
// handle's memory, which after destroy is freed (undefined behaviour, and a heap-use-after-free
// report under AddressSanitizer) and may already hold another object. The registry holds the
// addresses of live handles, per kind, and is consulted without dereferencing the pointer, so
// a destroyed, foreign or wrong-kind handle is detected for certain until the allocator hands
// the same address to a new handle of the same kind (that cannot be told apart; the header says
// so).
//
// Cost. The lookup takes a shared lock and a hash lookup (~20-40 ns, and the lock's counter is a
// cache line every calling thread writes). A run's whole host time is ~100 ns, so each thread
// remembers the last handle it found live with the registry's epoch, which every unregister
// bumps: while the epoch is unchanged no handle has died, so the remembered one is still live
// (registering more handles changes nothing for it). One atomic load and three compares.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "api/api_internal.h"
#include "runtime/support/logging.h"

namespace stitch::api {

namespace {

struct Registry {
  std::shared_mutex mu;
  std::unordered_map<const void*, HandleKind> live;
  std::atomic<uint64_t> epoch{0};  // bumped under `mu` (unique) by every unregister
};

// The handle this thread last found live, and the epoch it was found in (note at the top).
struct LiveMemo {
  const void* handle = nullptr;
  HandleKind kind = HandleKind::Graph;
  uint64_t epoch = 0;
};
thread_local LiveMemo tMemo;

Registry& registry() {
  // Leaked on purpose: handles may be destroyed from static destructors of the application.
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

const char* handleTypeName(HandleKind kind) {
  switch (kind) {
    case HandleKind::Graph: return "stitch_graph_t";
    case HandleKind::Module: return "stitch_module_t";
    case HandleKind::Engine: return "stitch_engine_t";
    case HandleKind::Program: return "stitch_program_t";
  }
  return "handle";
}

void registerHandle(const void* h, HandleKind kind) {
  Registry& r = registry();
  std::unique_lock lock(r.mu);
  r.live[h] = kind;
}

bool unregisterHandle(const void* h, HandleKind kind) {
  Registry& r = registry();
  std::unique_lock lock(r.mu);
  auto it = r.live.find(h);
  if (it == r.live.end() || it->second != kind) return false;
  r.live.erase(it);
  r.epoch.fetch_add(1, std::memory_order_release);
  return true;
}

bool isLiveHandle(const void* h, HandleKind kind) {
  Registry& r = registry();
  LiveMemo& memo = tMemo;
  if (memo.handle == h && memo.kind == kind &&
      memo.epoch == r.epoch.load(std::memory_order_acquire))
    return true;
  std::shared_lock lock(r.mu);
  auto it = r.live.find(h);
  if (it == r.live.end() || it->second != kind) return false;
  // Read under the lock: no unregister can fall between the lookup and this epoch.
  memo = {h, kind, r.epoch.load(std::memory_order_relaxed)};
  return true;
}

stitch_status_t deadHandleError(const char* function, const char* argument, HandleKind kind) {
  return setError(STITCH_ERROR_INVALID_ARGUMENT,
                  fmt::format("{}: {} is not a live {} (already destroyed, never created, or a "
                              "handle of another kind)",
                              function, argument, handleTypeName(kind)));
}

bool destroyCheck(const void* h, HandleKind kind, const char* function) {
  if (h == nullptr) return false;
  if (unregisterHandle(h, kind)) return true;
  setError(STITCH_ERROR_INVALID_ARGUMENT,
           fmt::format("{}: the argument is not a live {} (destroyed twice?); ignored", function,
                       handleTypeName(kind)));
  stitch::log().error("{}", stitch_last_error());
  return false;
}

}  // namespace stitch::api
