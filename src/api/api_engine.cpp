// Engines in the C API: options, backend resolution, memory, cache statistics.
//
// An engine is a resolved configuration (api_internal.h, EngineConfig): the backend (one of
// runtime/backend.h's process-wide instances), the fusion mode, the dump settings (STITCH_DUMP
// and STITCH_DUMP_DIR, or the options "dump" and "dump_dir") and the autotuning settings
// (STITCH_AUTOTUNE*, or the options "autotune*": driver/tuning.h).
// Everything an engine does with memory goes through the backend's interface.
#include <algorithm>
#include <array>
#include <sstream>
#include <string_view>

#include "api/api_internal.h"
#include "fusion/planner.h"
#include "runtime/remote_cache.h"
#include "runtime/support/env.h"
#include "runtime/support/logging.h"

using namespace stitch;

namespace {

constexpr std::array<std::string_view, 9> kOptionKeys = {
    "backend",  "fusion",   "plan_candidate",      "remote_cache",      "dump",
    "dump_dir", "autotune", "autotune_candidates", "autotune_budget_ms"};
constexpr std::array<std::string_view, 3> kDumpChoices = {"plan", "source", "llvm"};

}  // namespace

namespace stitch::api {

void parseDump(std::string_view setting, const std::string& text, DumpSettings& d) {
  d.plan = d.source = d.llvm = false;
  std::string item;
  std::stringstream list(text);
  while (std::getline(list, item, ',')) {
    const std::string valid = "a comma list of " + env::joinChoices(kDumpChoices);
    // DESIGN.md lists ptx, but NVRTC compiles straight to cubin: a ptx dump would be a
    // second compile of different code, so it is not offered rather than faked.
    if (item == "ptx")
      env::throwInvalid(setting, text,
                        valid +
                            " (ptx dumps are not built: NVRTC compiles straight to cubin; "
                            "`source` writes the CUDA C++ it compiles)");
    if (std::find(kDumpChoices.begin(), kDumpChoices.end(), item) == kDumpChoices.end())
      env::throwInvalid(setting, text, fmt::format("{} ('{}' is none of them)", valid, item));
    (item == "plan" ? d.plan : item == "source" ? d.source : d.llvm) = true;
  }
}

DumpSettings dumpFromEnv() {
  DumpSettings d;
  if (auto dump = env::get("STITCH_DUMP")) parseDump("STITCH_DUMP", *dump, d);
  d.dir = env::get("STITCH_DUMP_DIR").value_or(".");
  return d;
}

}  // namespace stitch::api

extern "C" {

stitch_status_t stitch_engine_create(const char* const* keys, const char* const* values,
                                     size_t num_options, stitch_engine_t* out) {
  STITCH_API_REQUIRE(out);
  if (num_options) {
    STITCH_API_REQUIRE(keys);
    STITCH_API_REQUIRE(values);
  }
  STITCH_API_GUARD({
    // Every variable, not only the engine's own: a bad value anywhere is reported here, before
    // any work, rather than whenever (or whether) the setting is first needed.
    api::checkEnvironment();
    configureLoggingFromEnv();
    std::string backend = rt::backendRequestFromEnv();
    auto config = std::make_shared<api::EngineConfig>();
    config->fusion = fusion::modeFromEnv();
    config->dump = api::dumpFromEnv();
    config->autotune = driver::autotuneFromEnv();
    std::optional<std::optional<rt::RemoteCacheConfig>> remote;  // set: the option was given
    for (const auto& [key, value] :
         api::readOptions(keys, values, num_options, kOptionKeys, "engine")) {
      if (key == "backend") backend = value;
      else if (key == "fusion") config->fusion = fusion::parseMode(value);
      else if (key == "remote_cache") remote = rt::remoteCacheConfigFromOption(value);
      else if (key == "dump") api::parseDump("dump", value, config->dump);
      else if (key == "dump_dir") config->dump.dir = value.empty() ? "." : value;
      else if (key.starts_with("autotune"))
        driver::parseAutotuneOption(key, value, config->autotune);
      else config->planCandidate = api::parsePlanCandidate(value);
    }
    STITCH_CHECK(!config->autotune.enabled || config->planCandidate == 0,
                 ErrorCode::InvalidArgument,
                 "plan_candidate {} and autotuning exclude each other: autotuning measures the "
                 "planner's pick and its next plans itself (STITCH_AUTOTUNE, option autotune)",
                 config->planCandidate);
    config->backend = &rt::requireBackend(rt::resolveBackend(backend));
    // The backend's kernel cache is process-wide, and so is its remote layer (stitch.h).
    if (remote)
      if (rt::PersistentLayers* layers = config->backend->persistentLayers())
        layers->setRemote(*remote ? rt::RemoteCache::shared(**remote) : nullptr);
    log().debug("engine created: backend {} (requested {}), fusion {}", config->backend->name(),
                backend, fusion::modeName(config->fusion));
    *out = api::publish(new stitch_engine_s{std::move(config)});
    return STITCH_OK;
  })
}

void stitch_engine_destroy(stitch_engine_t engine) {
  if (api::destroyCheck(engine, api::HandleKind::Engine, __func__)) delete engine;
}

stitch_status_t stitch_engine_device(stitch_engine_t engine, DLDevice* out) {
  STITCH_API_HANDLE(engine);
  STITCH_API_REQUIRE(out);
  *out = engine->config->backend->device();
  return STITCH_OK;
}

stitch_status_t stitch_engine_alloc(stitch_engine_t engine, size_t bytes, void** out) {
  STITCH_API_HANDLE(engine);
  STITCH_API_REQUIRE(out);
  STITCH_API_GUARD({
    *out = engine->config->backend->allocate(bytes);
    return STITCH_OK;
  })
}

void stitch_engine_free(stitch_engine_t engine, void* ptr) {
  if (!ptr) return;
  if (!api::isLive(engine)) {
    log().error("stitch_engine_free: engine is not a live stitch_engine_t; {} not freed", ptr);
    return;
  }
  try {
    engine->config->backend->release(ptr);
  } catch (const std::exception& e) {
    log().warn("stitch_engine_free: {}", e.what());
  }
}

stitch_status_t stitch_engine_copy(stitch_engine_t engine, void* dst, const void* src, size_t bytes,
                                   stitch_copy_kind_t kind, void* stream) {
  STITCH_API_HANDLE(engine);
  if (bytes) {
    STITCH_API_REQUIRE(dst);
    STITCH_API_REQUIRE(src);
  }
  STITCH_API_GUARD({
    const int64_t k = api::enumValue(kind);
    STITCH_CHECK(k == STITCH_COPY_HOST_TO_DEVICE || k == STITCH_COPY_DEVICE_TO_HOST ||
                     k == STITCH_COPY_DEVICE_TO_DEVICE,
                 ErrorCode::InvalidArgument, "unknown copy kind {}", k);
    if (bytes == 0) return STITCH_OK;
    engine->config->backend->copy(dst, src, bytes,
                                  k == STITCH_COPY_HOST_TO_DEVICE   ? rt::CopyKind::HostToDevice
                                  : k == STITCH_COPY_DEVICE_TO_HOST ? rt::CopyKind::DeviceToHost
                                                                    : rt::CopyKind::DeviceToDevice,
                                  stream);
    return STITCH_OK;
  })
}

stitch_status_t stitch_engine_synchronize(stitch_engine_t engine, void* stream) {
  STITCH_API_HANDLE(engine);
  STITCH_API_GUARD({
    engine->config->backend->synchronize(stream);
    return STITCH_OK;
  })
}

stitch_status_t stitch_engine_cache_stats(stitch_engine_t engine, stitch_cache_stats_t* out) {
  STITCH_API_HANDLE(engine);
  STITCH_API_REQUIRE(out);
  STITCH_API_GUARD({
    rt::CacheStats c = engine->config->backend->cacheStats();
    *out = stitch_cache_stats_t{c.memoryHits,   c.memoryMisses,   c.diskHits,   c.diskMisses,
                                c.diskWrites,   c.corruptEntries, c.compiles,   c.compileSeconds,
                                c.shapeClasses, c.classSizes,     c.remoteHits, c.remoteMisses,
                                c.remoteWrites, c.remoteErrors};
    return STITCH_OK;
  })
}

const char* stitch_engine_backend(stitch_engine_t engine) {
  return api::isLive(engine) ? engine->config->backend->name().data() : nullptr;
}

}  // extern "C"
