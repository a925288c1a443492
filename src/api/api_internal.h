// Shared plumbing of the C API implementation: handle structs and the exception boundary.
//
// Every exported function body runs inside STITCH_API_GUARD, which turns any C++ exception into
// a status and the thread's last-error message. Nothing thrown ever reaches the C caller.
#pragma once

#include <stitch/stitch.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "driver/driver.h"
#include "driver/tuning.h"
#include "fusion/plan.h"
#include "ir/graph.h"
#include "runtime/backend.h"
#include "runtime/disk_cache.h"
#include "runtime/support/error.h"

namespace stitch::api {

// Records `message` as this thread's last error and returns status.
stitch_status_t setError(stitch_status_t status, std::string message);
// Maps the exception being handled to a status (call only inside a catch block).
stitch_status_t fromException();

// The integer a C caller passed as an enum. C lets an enum object hold any value of its integer
// type, but in C++ loading an enum outside the range of its enumerators is undefined behaviour
// (UBSan: "load of value ..., which is not a valid value for type"): read its bytes as the
// underlying type, and check the integer.
template <class E>
int64_t enumValue(const E& e) {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &e, sizeof v);
  return static_cast<int64_t>(v);
}

// Converts a C dtype given as an integer (an attribute's `i`, or enumValue of a stitch_dtype_t),
// rejecting values outside the enum.
ir::DType toDType(int64_t value);
inline ir::DType toDType(stitch_dtype_t t) { return toDType(enumValue(t)); }

// What each program writes for each new input signature, and where: STITCH_DUMP and
// STITCH_DUMP_DIR, or the engine options "dump" and "dump_dir", which win over them.
struct DumpSettings {
  bool plan = false;      // "plan": the plan
  bool source = false;    // "source": CUDA/HIP C++ of each kernel (GPU backends)
  bool llvm = false;      // "llvm": LLVM IR of each kernel (cpu backend)
  std::string dir = ".";  // where the files go
};
// Sets d's plan, source and llvm from `text`, a comma list of them (empty: none). `setting` is
// what the text came from (STITCH_DUMP, the engine option dump), so that the InvalidArgument a
// bad item throws names it, with the text and the valid items; `ptx`, which DESIGN.md names, is
// refused with the reason (NVRTC compiles to cubin: there is no PTX to write).
void parseDump(std::string_view setting, const std::string& text, DumpSettings& d);
// STITCH_DUMP (through parseDump) and STITCH_DUMP_DIR (default ".").
DumpSettings dumpFromEnv();

// The kernel cache's directory the environment names, as the stitch_cache_dir_* calls act on it
// (api_cache.cpp): with the bound STITCH_CACHE_MAX_MB sets and the fleet key, if any, that its
// entries are verified with. InvalidArgument when the disk layer is off (STITCH_CACHE=0), no
// directory can be found, or a variable is bad.
rt::DiskCache cacheDirFromEnv();

// Checks every variable of the environment table (support/env.h) with the reader that uses it
// (api_environment.cpp); throws InvalidArgument naming every bad value, one per line.
void checkEnvironment();

// The resolved configuration of an engine. Immutable once made, so engines and the programs that
// share it are safe to use from several threads.
struct EngineConfig {
  rt::Backend* backend = nullptr;  // process-wide (runtime/backend.h): never null once made
  fusion::Mode fusion = fusion::Mode::Stitch;
  int planCandidate = 0;  // "plan_candidate": 0, the planner's pick
  DumpSettings dump;
  // STITCH_AUTOTUNE*, or the options "autotune", "autotune_candidates", "autotune_budget_ms"
  // (driver/tuning.h). Exclusive with a plan_candidate other than 0: tuning starts from the pick.
  driver::AutotuneSettings autotune;
};

// Writes text into buf as the C API's string outputs do: NUL-terminated, truncated to capacity;
// *needed (if not NULL) receives the full length.
void copyOut(const std::string& text, char* buf, size_t capacity, size_t* needed);

// Reads option key/value arrays into a map, rejecting NULLs, duplicates and keys not in `valid`.
std::vector<std::pair<std::string, std::string>> readOptions(
    const char* const* keys, const char* const* values, size_t n,
    std::span<const std::string_view> valid, std::string_view what);

// Sizes for every symbolic dim of g from parallel arrays (all must be given, none negative).
ir::Bindings bindingsFor(const ir::Graph& g, const char* const* symbols, const int64_t* sizes,
                         size_t n);

// A graph planned (Stage::Plan) or emitted (Stage::Emit) without running, as a program would
// build it: verified, through the passes, through the driver for `target` in `mode` under the
// given symbol sizes.
struct PlannedGraph {
  ir::Graph optimized;
  driver::Build build;
};
PlannedGraph buildForSizes(const ir::Graph& g, const target::Target& target,
                           const driver::Options& options, const char* const* symbols,
                           const int64_t* sizes, size_t n, driver::Stage stage);

// The "plan_candidate" option's value: an integer from 0 (the planner's pick) to 64.
// InvalidArgument otherwise.
int parsePlanCandidate(const std::string& value);

// Whether the kernels write graph output j: each output value is written once, into the first
// output that names it; an output that is a graph input, or repeats an earlier output, is filled
// after the kernels by a copy.
inline bool writtenByKernels(const ir::Graph& g, size_t j) {
  std::span<const int> outputs = g.outputs();
  return g.node(outputs[j]).op != ir::OpCode::Input &&
         std::find(outputs.begin(), outputs.end(), outputs[j]) == outputs.begin() + j;
}

}  // namespace stitch::api

// Live handles (api_handles.cpp): every handle the API returns is registered until destroyed,
// so a destroyed or foreign handle passed back is an INVALID_ARGUMENT error, not heap corruption.
namespace stitch::api {
enum class HandleKind { Graph, Module, Engine, Program };
const char* handleTypeName(HandleKind kind);
void registerHandle(const void* h, HandleKind kind);
// False when h is not a live handle of that kind.
bool unregisterHandle(const void* h, HandleKind kind);
bool isLiveHandle(const void* h, HandleKind kind);
// Sets the last error for a handle argument that is not live and returns INVALID_ARGUMENT.
stitch_status_t deadHandleError(const char* function, const char* argument, HandleKind kind);
// For X_destroy: true when h is live (now unregistered) and must be deleted; false for NULL (a
// no-op) and for a handle that is not live (logged as an error and ignored: a double destroy).
bool destroyCheck(const void* h, HandleKind kind, const char* function);

constexpr HandleKind handleKind(const stitch_graph_s*) { return HandleKind::Graph; }
constexpr HandleKind handleKind(const stitch_module_s*) { return HandleKind::Module; }
constexpr HandleKind handleKind(const stitch_engine_s*) { return HandleKind::Engine; }
constexpr HandleKind handleKind(const stitch_program_s*) { return HandleKind::Program; }
template <class T>
bool isLive(const T* h) {
  return h != nullptr && isLiveHandle(h, handleKind(h));
}
// Registers a freshly made handle and returns it.
template <class T>
T* publish(T* h) {
  registerHandle(h, handleKind(h));
  return h;
}
}  // namespace stitch::api

// A graph handle. It owns a builder holding the graph; graphs borrowed from a module are owned by
// the module (`borrowed`), and stitch_graph_destroy ignores them rather than corrupting the module.
struct stitch_graph_s {
  explicit stitch_graph_s(stitch::ir::GraphBuilder b, bool isBorrowed = false)
      : builder(std::move(b)), borrowed(isBorrowed) {}
  stitch::ir::GraphBuilder builder;
  bool borrowed;
  const stitch::ir::Graph& graph() const { return builder.graph(); }
};

// A module owns its graphs; their handles stay live until the module is destroyed.
struct stitch_module_s {
  std::vector<std::unique_ptr<stitch_graph_s>> graphs;
  ~stitch_module_s() {
    for (auto& g : graphs) stitch::api::unregisterHandle(g.get(), stitch::api::HandleKind::Graph);
  }
};

struct stitch_engine_s {
  std::shared_ptr<const stitch::api::EngineConfig> config;
};

#define STITCH_API_GUARD(...)              \
  try {                                    \
    __VA_ARGS__                            \
  } catch (...) {                          \
    return ::stitch::api::fromException(); \
  }

// Fails with INVALID_ARGUMENT when a handle argument is NULL or not a live handle of its kind.
#define STITCH_API_HANDLE(h)                                                             \
  do {                                                                                   \
    STITCH_API_REQUIRE(h);                                                               \
    if (!::stitch::api::isLive(h))                                                       \
      return ::stitch::api::deadHandleError(__func__, #h, ::stitch::api::handleKind(h)); \
  } while (0)

// Fails with INVALID_ARGUMENT when a required pointer argument is NULL.
#define STITCH_API_REQUIRE(ptr)                                                              \
  do {                                                                                       \
    if ((ptr) == nullptr)                                                                    \
      return ::stitch::api::setError(STITCH_ERROR_INVALID_ARGUMENT,                          \
                                     std::string(__func__) + ": " #ptr " must not be NULL"); \
  } while (0)
