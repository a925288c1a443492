// Backends: one interface for every way Stitch runs compiled code, registered by name.
//
// Design note. A backend receives artifacts (runtime/artifact.h) from the compile driver and
// knows nothing of graphs: it describes its machine (target(): what the driver generates code
// for), compiles each kernel's code through its kernel cache and loads it (load(): an
// Executable for one input signature, intermediates planned by runtime/slots.h), runs the
// kernels on the caller's buffers, and owns its memory (allocate/copy/synchronize) and cache
// statistics. The C API checks DLPack tensors against device()/checkTensorDevice() and
// dispatches through this interface; it holds no backend-specific branch. Implementations:
// runtime/cpu (LLVM ORC), runtime/gpu (cuda and hip, one class over the Device and
// DeviceCompiler interfaces), and the reference backend, which shares the host's memory and
// runs nothing: the reference interpreter evaluates graphs, beside the backends, as the oracle.
//
// Backends are registered by name (registerBackend): the runtime holds no list or switch of them,
// so a new backend is its own folder plus a line of CMake (README, "Layout"). Requests name a
// backend; only "auto" chooses. Asking for a backend that is not built in, or whose device is
// absent, is BackendUnavailable with the reason, never a silent fallback. Order of preference for
// auto (BackendInfo::autoRank): cuda, hip, cpu, reference — the first one available.
#pragma once

#include <dlpack/dlpack.h>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/artifact.h"
#include "runtime/kernel_cache.h"
#include "runtime/target.h"

namespace stitch::rt {

class Backend;

// A backend as the registry knows it: its name, auto's preference, and its factory.
struct BackendInfo {
  std::string name;  // "cpu": what requests, STITCH_BACKEND and rt::Target::backend name it by
  // auto picks the available backend of the lowest rank; a negative rank is never picked by auto
  // (a backend for tests, say), only by name.
  int autoRank = -1;
  // Makes the process-wide instance, or returns nullptr with *why (never null) when it cannot run
  // here: the library or device is missing, or the build left it out. Called at most once.
  std::function<std::unique_ptr<Backend>(std::string* why)> make;
};

// Adds a backend to the registry. The built-in ones are registered before the first lookup (by
// the register function each backend's folder defines, listed by CMake: runtime/CMakeLists.txt);
// others may be added at any time before they are asked for. A name registered twice is an
// internal error.
void registerBackend(BackendInfo info);

// The names accepted in requests: "auto", then every registered backend's name.
std::vector<std::string_view> backendChoices();
// The request STITCH_BACKEND makes: one of backendChoices(), "auto" when unset. Throws
// InvalidArgument naming the variable, the value and the choices otherwise.
std::string backendRequestFromEnv();

// Whether the backend named `name` can run here; when not, *why says why.
bool backendAvailable(std::string_view name, std::string* why = nullptr);

// Resolves "auto" or a backend name to a backend's name. Throws InvalidArgument for an unknown
// name (listing the valid ones) and BackendUnavailable when the named backend cannot run here.
std::string resolveBackend(std::string_view request);

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

// A value (node id) bound to the caller's memory for one run.
struct BoundValue {
  int value;
  void* data;
};

// A program's kernels compiled and loaded for one input signature. Safe to run from several
// threads at once.
class Executable {
 public:
  virtual ~Executable() = default;
  // Runs every kernel in order. `bound` holds the caller's memory of every value the artifact
  // lists as external that a kernel touches; intermediates live in the backend's arenas. GPU
  // backends queue the work on `stream` (nullptr: the default stream); host backends ignore it.
  virtual void run(std::span<const BoundValue> bound, void* stream) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Its registered name (BackendInfo::name); the string lives as long as the process.
  virtual std::string_view name() const = 0;
  // What the driver generates code for.
  virtual const Target& target() const = 0;

  // The device its memory is on (kDLCPU for host backends).
  virtual DLDevice device() const = 0;
  // Throws InvalidArgument (Unsupported for another device of the right kind) when a tensor on
  // `d` cannot be used by this backend; `what` names the tensor in the message.
  virtual void checkTensorDevice(DLDevice d, const std::string& what) const = 0;
  // Whether an output may be exactly an input's memory (the run is staged on the host).
  virtual bool runsInPlace() const = 0;

  // Compiles (through the kernel cache) and loads one kernel's first form; the result keeps the
  // code loaded.
  virtual std::shared_ptr<const void> compile(const KernelArtifact& kernel) = 0;
  // Compiles (through the kernel cache) and loads every kernel of `program`.
  virtual std::shared_ptr<Executable> load(const ProgramArtifact& program) = 0;

  // Memory on device(): allocate(n) for n >= 0 (OutOfMemory when it cannot be had), release
  // (never throws), copies (synchronous for host <-> device), synchronization of a stream.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream) = 0;
  virtual void synchronize(void* stream) = 0;

  virtual CacheStats cacheStats() const = 0;
  // The persistent layers (disk, remote) of its kernel cache, which the compile driver's callers
  // also keep whole-program entries in (warm starts, src/api); null when it compiles nothing.
  virtual PersistentLayers* persistentLayers() = 0;
};

// The process-wide backend named `name`, made on first use; nullptr with *why when it cannot run
// here or no backend has that name (a failure is remembered: the library or device will not
// appear later).
Backend* backendFor(std::string_view name, std::string* why = nullptr);

// backendFor, or BackendUnavailable with the reason.
Backend& requireBackend(std::string_view name);

}  // namespace stitch::rt
