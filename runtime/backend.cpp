// The backend registry and the host's memory (design notes in backend.h, host_backend.h).
#include "runtime/backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include "runtime/host_backend.h"
#include "runtime/support/checked.h"
#include "runtime/support/env.h"
#include "runtime/support/error.h"
#include "runtime/support/memory.h"

namespace stitch::rt {

// Defined by the file CMake generates from the list of built-in backends (runtime/CMakeLists.txt):
// calls each one's register function.
void registerBuiltinBackends();

namespace {

bool hostAccessible(DLDeviceType d) {
  return d == kDLCPU || d == kDLCUDAHost || d == kDLROCMHost || d == kDLCUDAManaged;
}

// One registered backend and, once asked for, its instance or the reason it has none.
struct Slot {
  BackendInfo info;
  std::once_flag once;
  std::unique_ptr<Backend> backend;
  std::string why;
};

class Registry;

// The registry being made: registerBuiltinBackends runs inside its initialization and adds to it.
// Thread-local: only the initializing thread sees it (others wait on the static's guard).
thread_local Registry* building = nullptr;

// The registry. Slots are never removed, and a deque keeps their addresses: a lookup holds the
// lock only to find its slot, and makes the backend outside it (a GPU backend's probe takes
// seconds, and may look up another backend).
class Registry {
 public:
  static Registry& get() {
    static Registry* r = [] {
      static Registry made;
      building = &made;
      registerBuiltinBackends();
      building = nullptr;
      return &made;
    }();
    return *r;
  }

  void add(BackendInfo info) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Slot& s : slots_)
      STITCH_INTERNAL(s.info.name != info.name, "backend '{}' registered twice", info.name);
    STITCH_INTERNAL(!info.name.empty() && info.name != "auto" && info.make,
                    "a backend needs a name other than 'auto' and a factory");
    slots_.emplace_back().info = std::move(info);
  }

  Slot* find(std::string_view name) {
    std::lock_guard<std::mutex> lock(mu_);
    for (Slot& s : slots_)
      if (s.info.name == name) return &s;
    return nullptr;
  }

  std::vector<Slot*> all() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Slot*> out;
    for (Slot& s : slots_) out.push_back(&s);
    return out;
  }

 private:
  std::mutex mu_;
  std::deque<Slot> slots_;
};

Registry& registry() { return building ? *building : Registry::get(); }

}  // namespace

void registerBackend(BackendInfo info) { registry().add(std::move(info)); }

std::vector<std::string_view> backendChoices() {
  std::vector<std::string_view> out = {"auto"};
  for (Slot* s : registry().all()) out.push_back(s->info.name);
  return out;
}

std::string backendRequestFromEnv() {
  return env::getChoice("STITCH_BACKEND", backendChoices()).value_or("auto");
}

Backend* backendFor(std::string_view name, std::string* why) {
  Slot* s = registry().find(name);
  if (!s) {
    if (why) *why = fmt::format("no backend is named '{}'", name);
    return nullptr;
  }
  std::call_once(s->once, [&] {
    try {
      s->backend = s->info.make(&s->why);
    } catch (const std::exception& e) {
      s->backend.reset();
      s->why = e.what();
    }
    if (!s->backend && s->why.empty()) s->why = "its factory made none";
  });
  if (!s->backend && why) *why = s->why;
  return s->backend.get();
}

Backend& requireBackend(std::string_view name) {
  std::string why;
  Backend* backend = backendFor(name, &why);
  STITCH_CHECK(backend != nullptr, ErrorCode::BackendUnavailable, "backend '{}' is unavailable: {}",
               name, why);
  return *backend;
}

bool backendAvailable(std::string_view name, std::string* why) {
  return backendFor(name, why) != nullptr;
}

std::string resolveBackend(std::string_view request) {
  std::vector<Slot*> slots = registry().all();
  if (request == "auto") {
    std::stable_sort(slots.begin(), slots.end(), [](const Slot* a, const Slot* b) {
      return a->info.autoRank < b->info.autoRank;
    });
    for (Slot* s : slots)
      if (s->info.autoRank >= 0 && backendAvailable(s->info.name)) return s->info.name;
    throwError(ErrorCode::BackendUnavailable, "no backend can run here");
  }
  for (Slot* s : slots) {
    if (s->info.name != request) continue;
    std::string why;
    STITCH_CHECK(backendAvailable(request, &why), ErrorCode::BackendUnavailable,
                 "backend '{}' is unavailable: {}", request, why);
    return s->info.name;
  }
  throwError(ErrorCode::InvalidArgument, fmt::format("unknown backend '{}'; valid backends: {}",
                                                     request, env::joinChoices(backendChoices())));
}

void HostMemoryBackend::checkTensorDevice(DLDevice d, const std::string& what) const {
  STITCH_CHECK(hostAccessible(d.device_type), ErrorCode::InvalidArgument,
               "{} is on DLPack device type {}, but the {} backend needs host memory (kDLCPU)",
               what, static_cast<int>(d.device_type), name());
}

void* HostMemoryBackend::allocate(size_t bytes) {
  // Checked before the round-up below, which would wrap SIZE_MAX to a tiny block.
  STITCH_CHECK(bytes <= static_cast<uint64_t>(hostMemoryBytes()), ErrorCode::OutOfMemory,
               "stitch_engine_alloc: {} bytes is more than this machine's memory, {}", bytes,
               bytesText(hostMemoryBytes()));
  void* p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  STITCH_CHECK(p != nullptr, ErrorCode::OutOfMemory, "cannot allocate {} bytes", bytes);
  return p;
}

void HostMemoryBackend::release(void* p) { std::free(p); }

void HostMemoryBackend::copy(void* dst, const void* src, size_t bytes, CopyKind, void*) {
  std::memmove(dst, src, bytes);
}

}  // namespace stitch::rt
