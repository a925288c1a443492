// The environment check: every STITCH_* variable, read up front by the code that uses it.
//
// Design note. Each variable is read where it takes effect, which is often late and sometimes
// never in a given run: STITCH_CPU_OPENMP on the first parallel loop, STITCH_COMPILE_THREADS on
// the first GPU compile, the remote settings when a layer is configured. Left to that, a bad
// value fails a run halfway, or passes unnoticed when the run does not need it, or (behind the
// PyTorch hook, which runs a piece eagerly when its program fails) says nothing at all.
// checkEnvironment() reads every variable of the table (support/env.cpp, the README's list) that
// is set, each through the very function that reads it in use, so the check and the use cannot
// disagree; it reports every bad value, one line each. A table entry with no reader here, or a
// reader for a name not in the table, is an internal error (tests/api checks both on every
// build), so a new variable cannot be added to one list and forgotten in the other.
//
// Paths (STITCH_CACHE_DIR, STITCH_DUMP_DIR, STITCH_LIBRARY, STITCH_*_LIBRARY) accept any value:
// they are not opened here, and a library that does not load is logged when it is first needed
// (runtime/gpu/dynamic_library.h). STITCH_DISABLE, STITCH_REPORT, STITCH_HUGE_PAGES and
// STITCH_HOST_POOL_MB are the Python package's: python/stitch/_env.py reads them with
// env::getBool's, env::getChoice's and env::getInt's rules, and they are checked here with those
// so that the command line and the C API reject them as the hook does.
//
// Who calls it: the command line at startup (exit 2), engine creation and the planning entry
// points (STITCH_ERROR_INVALID_ARGUMENT), and the Python hook when it is entered (ValueError),
// through stitch_environment_check().
#include <algorithm>
#include <string>
#include <vector>

#include "api/api_internal.h"
#include "fusion/planner.h"
#include "runtime/cache_secret.h"
#include "runtime/cost_calibration.h"
#include "runtime/cpu/host_profile.h"
#include "runtime/cpu/openmp_team.h"
#if defined(STITCH_HAVE_LLVM)
#include "runtime/cpu/orc_jit.h"
#endif
#include "runtime/cpu/thread_pool.h"
#include "runtime/kernel_cache.h"
#include "runtime/remote_cache.h"
#include "runtime/support/env.h"
#include "runtime/support/logging.h"
#include "runtime/support/parallel.h"

namespace stitch::api {

namespace {

// A variable and the function that reads it in use (null: any value is valid).
struct Reader {
  std::string_view name;
  void (*read)();
};

void remoteSettings() { (void)rt::remoteCacheSettingsFromEnv(); }

// STITCH_REPORT: where the PyTorch hook prints each graph's report (python/stitch/_env.py).
constexpr std::string_view kReportStreams[] = {"off", "stdout", "stderr"};

constexpr Reader kReaders[] = {
    {"STITCH_LOG_LEVEL", [] { configureLoggingFromEnv(); }},
    {"STITCH_BACKEND", [] { (void)rt::backendRequestFromEnv(); }},
    {"STITCH_FUSION", [] { (void)fusion::modeFromEnv(); }},
    {"STITCH_CACHE", [] { (void)rt::DiskCache::enabledByEnv(); }},
    {"STITCH_CACHE_DIR", nullptr},
    {"STITCH_CACHE_MAX_MB", [] { (void)rt::DiskCache::maxBytesFromEnv(); }},
    {"STITCH_CACHE_KEY", [] { (void)rt::fleetSecretFromEnv(); }},
    {"STITCH_CACHE_KEY_FILE", [] { (void)rt::fleetSecretFromEnv(); }},
    {"STITCH_DUMP", [] { (void)dumpFromEnv(); }},
    {"STITCH_DUMP_DIR", nullptr},
    {"STITCH_NUM_THREADS", [] { (void)rt::cpu::numThreadsFromEnv(); }},
    {"STITCH_SPIN_US", [] { (void)rt::cpu::spinFromEnv(); }},
    {"STITCH_CPU_OPENMP", [] { (void)rt::cpu::openMpFromEnv(); }},
    {"STITCH_CPU_STREAMING_STORES", [] { (void)rt::cpu::hostStreamingStoreBytes({}); }},
#if defined(STITCH_HAVE_LLVM)
    {"STITCH_CPU_FEATURES", [] { (void)rt::cpu::cpuFeaturesFromEnv(); }},
#else
    {"STITCH_CPU_FEATURES", nullptr},  // no host backend in this build: nothing reads it
#endif
    {"STITCH_SHAPE_CLASSES", [] { (void)driver::shapeClassesEnabled(); }},
    {"STITCH_AUTOTUNE", [] { (void)driver::autotuneFromEnv(); }},
    {"STITCH_AUTOTUNE_CANDIDATES", [] { (void)driver::autotuneFromEnv(); }},
    {"STITCH_AUTOTUNE_BUDGET_MS", [] { (void)driver::autotuneFromEnv(); }},
    {"STITCH_COST_CALIBRATION", [] { (void)rt::costCalibrationEnabled(); }},
    {"STITCH_COMPILE_THREADS", [] { (void)compileThreads(); }},
    {"STITCH_DISABLE", [] { (void)env::getBool("STITCH_DISABLE", false); }},
    {"STITCH_REPORT", [] { (void)env::getChoice("STITCH_REPORT", kReportStreams); }},
    {"STITCH_HUGE_PAGES", [] { (void)env::getBool("STITCH_HUGE_PAGES", true); }},
    {"STITCH_HOST_POOL_MB", [] { (void)env::getInt("STITCH_HOST_POOL_MB", 0, 1 << 20, 1024); }},
    {"STITCH_LIBRARY", nullptr},
    {"STITCH_CUDA_LIBRARY", nullptr},
    {"STITCH_NVRTC_LIBRARY", nullptr},
    {"STITCH_HIP_LIBRARY", nullptr},
    {"STITCH_REMOTE_CACHE", [] { (void)rt::remoteCacheConfigFromEnv(); }},
    {"STITCH_REMOTE_CACHE_NAMESPACE", remoteSettings},
    {"STITCH_REMOTE_CACHE_TIMEOUT_MS", remoteSettings},
    {"STITCH_REMOTE_CACHE_TTL", remoteSettings},
    {"STITCH_REMOTE_CACHE_RETRY_MS", remoteSettings},
};

const Reader* readerOf(std::string_view name) {
  auto it = std::find_if(std::begin(kReaders), std::end(kReaders),
                         [&](const Reader& r) { return r.name == name; });
  return it == std::end(kReaders) ? nullptr : &*it;
}

}  // namespace

void checkEnvironment() {
  const auto known = env::knownVariables();
  for (const Reader& r : kReaders)
    STITCH_INTERNAL(std::any_of(known.begin(), known.end(),
                                [&](const env::Variable& v) { return v.name == r.name; }),
                    "the environment check reads {}, which the table of variables lacks", r.name);
  std::vector<std::string> problems;
  for (const env::Variable& v : known) {
    const Reader* r = readerOf(v.name);
    STITCH_INTERNAL(r != nullptr, "the environment check has no reader for {}", v.name);
    if (r->read == nullptr || !env::get(std::string(v.name).c_str())) continue;
    try {
      r->read();
    } catch (const Error& e) {
      if (e.code() != ErrorCode::InvalidArgument) throw;
      // One reader may report another variable (the remote settings are read together): each
      // problem once.
      if (std::find(problems.begin(), problems.end(), e.message()) == problems.end())
        problems.push_back(e.message());
    }
  }
  if (problems.empty()) return;
  std::string message;
  for (const std::string& p : problems) message += (message.empty() ? "" : "\n") + p;
  throwError(ErrorCode::InvalidArgument, message);
}

}  // namespace stitch::api

extern "C" {

stitch_status_t stitch_environment_check(void) {
  STITCH_API_GUARD({
    stitch::api::checkEnvironment();
    return STITCH_OK;
  })
}

}  // extern "C"
