#include "runtime/gpu/dynamic_library.h"

#include <dlfcn.h>

#include "runtime/support/env.h"
#include "runtime/support/logging.h"

namespace stitch::rt::gpu {

std::unique_ptr<DynamicLibrary> DynamicLibrary::open(const char* overrideVar,
                                                     std::span<const char* const> candidates,
                                                     std::string* why) {
  std::string tried;
  std::string lastError;
  auto attempt = [&](const std::string& path) -> std::unique_ptr<DynamicLibrary> {
    if (void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      log().debug("gpu: opened {}", path);
      return std::unique_ptr<DynamicLibrary>(new DynamicLibrary(handle, path));
    }
    const char* err = ::dlerror();
    lastError = err ? err : "dlopen failed";
    tried += fmt::format("\n  {}: {}", path, lastError);
    return nullptr;
  };
  if (auto forced = env::get(overrideVar)) {
    if (auto lib = attempt(*forced)) return lib;
    // The user named this library, so its failure is said even when the caller goes on without
    // it (backend auto moves to the next backend): a path with a typo is not a quiet cpu run.
    log().warn("{}={} could not be opened ({}); nothing else is tried for it", overrideVar, *forced,
               lastError);
    if (why) *why = fmt::format("{}={} could not be opened:{}", overrideVar, *forced, tried);
    return nullptr;
  }
  for (const char* c : candidates)
    if (auto lib = attempt(c)) return lib;
  if (why)
    *why = fmt::format("none of these could be opened (set {} to a path):{}", overrideVar, tried);
  return nullptr;
}

void* DynamicLibrary::symbol(const char* name) const { return ::dlsym(handle_, name); }

}  // namespace stitch::rt::gpu
