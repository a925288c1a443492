// Vendor libraries opened at run time.
//
// Stitch links no GPU library: libcuda, libnvrtc and libamdhip64 are opened with dlopen when
// first needed (DESIGN.md, "Devices and what runs where"), so libstitch loads and runs its CPU
// path on machines without any GPU stack. A library found here is never closed: the process-wide
// compilers and devices that use it live until exit, and unloading a driver while static
// destructors elsewhere (PyTorch's, say) may still call into it is a classic shutdown crash.
#pragma once

#include <memory>
#include <span>
#include <string>

namespace stitch::rt::gpu {

class DynamicLibrary {
 public:
  // Opens the first of `candidates` that dlopen accepts (RTLD_NOW | RTLD_LOCAL). When the
  // environment variable `overrideVar` is set, its value is the only path tried, and a failure to
  // open it is also logged at warn level (naming the variable, the path and dlerror's reason),
  // since a caller may go on without the library (backend auto). Returns nullptr when nothing
  // opens, with *why naming every path tried and dlerror's reason for each. Callers open each
  // library once per process, so the warning comes once.
  static std::unique_ptr<DynamicLibrary> open(const char* overrideVar,
                                              std::span<const char* const> candidates,
                                              std::string* why);

  // The path that opened, as given to dlopen.
  const std::string& path() const { return path_; }
  // The address of `name`, or nullptr when the library does not export it.
  void* symbol(const char* name) const;

  // Binds `fn` to `name`; on failure appends `name` to *missing (comma-separated) and leaves fn
  // null. Lets a loader bind a whole table and report every absent symbol at once.
  template <class Fn>
  void bind(Fn& fn, const char* name, std::string* missing) const {
    fn = reinterpret_cast<Fn>(symbol(name));
    if (fn == nullptr) *missing += std::string(missing->empty() ? "" : ", ") + name;
  }

 private:
  DynamicLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* handle_;
  std::string path_;
};

}  // namespace stitch::rt::gpu
