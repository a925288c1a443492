// Planning without running: stitch_graph_explain_plan, and the option reader shared with engines.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <set>

#include "api/api_autotune.h"
#include "api/api_internal.h"
#include "fusion/explain.h"
#include "fusion/hardware.h"
#include "fusion/planner.h"
#include "ir/signature.h"
#include "runtime/support/env.h"
#include "runtime/support/hash.h"
#include "runtime/support/logging.h"

using namespace stitch;

namespace stitch::api {

void copyOut(const std::string& text, char* buf, size_t capacity, size_t* needed) {
  if (needed) *needed = text.size();
  if (capacity) {
    size_t n = std::min(text.size(), capacity - 1);
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
}

std::vector<std::pair<std::string, std::string>> readOptions(
    const char* const* keys, const char* const* values, size_t n,
    std::span<const std::string_view> valid, std::string_view what) {
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < n; ++i) {
    STITCH_CHECK(keys[i] && values[i], ErrorCode::InvalidArgument,
                 "{} option {} has a NULL key or value", what, i);
    std::string key = keys[i];
    STITCH_CHECK(std::find(valid.begin(), valid.end(), key) != valid.end(),
                 ErrorCode::InvalidArgument, "unknown {} option '{}'; valid options: {}", what, key,
                 env::joinChoices(valid));
    STITCH_CHECK(seen.insert(key).second, ErrorCode::InvalidArgument,
                 "{} option '{}' is given twice", what, key);
    out.emplace_back(key, values[i]);
  }
  return out;
}

ir::Bindings bindingsFor(const ir::Graph& g, const char* const* symbols, const int64_t* sizes,
                         size_t n) {
  ir::Bindings bindings;
  for (size_t i = 0; i < n; ++i) {
    STITCH_CHECK(symbols[i] != nullptr, ErrorCode::InvalidArgument, "symbols[{}] is NULL", i);
    STITCH_CHECK(sizes[i] >= 0, ErrorCode::InvalidArgument, "symbol {} has negative size {}",
                 symbols[i], sizes[i]);
    bindings[symbols[i]] = sizes[i];
  }
  for (const std::string& s : g.symbols())
    STITCH_CHECK(bindings.count(s), ErrorCode::InvalidArgument,
                 "symbolic dim {} of graph {} needs a size to plan for", s, g.name());
  return bindings;
}

PlannedGraph buildForSizes(const ir::Graph& g, const target::Target& target,
                           const driver::Options& options, const char* const* symbols,
                           const int64_t* sizes, size_t n, driver::Stage stage) {
  // Planning without an engine (stitch plan, stitch codegen) honours STITCH_LOG_LEVEL too, and
  // reports a bad value of any variable as engine creation does.
  checkEnvironment();
  configureLoggingFromEnv();
  ir::verify(g);
  PlannedGraph p;
  ir::Bindings bindings = bindingsFor(g, symbols, sizes, n);
  ir::checkValueSizes(g, bindings);  // before the planner multiplies the sizes
  p.optimized = driver::optimize(g);
  p.build = driver::build(p.optimized, bindings, target, options, stage);
  return p;
}

int parsePlanCandidate(const std::string& value) {
  int v = -1;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  STITCH_CHECK(ec == std::errc() && end == value.data() + value.size() && v >= 0 && v <= 64,
               ErrorCode::InvalidArgument,
               "plan_candidate '{}' is not valid: an integer from 0 (the planner's pick) to 64",
               value);
  return v;
}

}  // namespace stitch::api

namespace {

constexpr std::array<std::string_view, 5> kPlanOptions = {"target", "fusion", "format",
                                                          "plan_candidate", "backend"};

// The plan a program of `backend` would run for these sizes, explained, after a line that says
// where it comes from: the decision of a tuning entry of the backend's kernel cache for this
// machine (autotuning: driver/tuning.h; the entry's K is STITCH_AUTOTUNE_CANDIDATES), with the
// candidates' measured times, or the cost model's pick. Nothing runs: the entry is read, not made.
std::string explainForBackend(const ir::Graph& g, const std::string& backendName,
                              driver::Options options, const std::string& format,
                              const char* const* symbols, const int64_t* sizes, size_t n) {
  rt::Backend& backend = rt::requireBackend(rt::resolveBackend(backendName));
  const std::unique_ptr<target::Target> t = target::makeTarget(backend.target());
  api::PlannedGraph p = api::buildForSizes(g, *t, options, symbols, sizes, n, driver::Stage::Plan);
  // An entry's key holds K: one tuned with another STITCH_AUTOTUNE_CANDIDATES is not this one,
  // and the line says which K it looked for.
  const int candidates = driver::autotuneFromEnv().candidates;
  std::string origin = options.planCandidate == 0
                           ? fmt::format(
                                 "# plan: the cost model's pick (no tuning entry of {} "
                                 "candidates for this machine; STITCH_AUTOTUNE=1 "
                                 "STITCH_AUTOTUNE_CANDIDATES={} makes one on a run)\n",
                                 candidates, candidates)
                           : "";
  rt::PersistentLayers* layers = t->generatesCode() ? backend.persistentLayers() : nullptr;
  if (layers && options.planCandidate == 0) {
    // The signature the graph's inputs have at these sizes (ConcreteInput holds spans: the
    // shapes live in `shapes`).
    std::vector<std::vector<int64_t>> shapes;
    for (int i : p.optimized.inputs())
      shapes.push_back(ir::concretize(p.optimized.node(i).type.shape, p.build.plan.bindings));
    std::vector<ir::ConcreteInput> sig;
    for (size_t i = 0; i < shapes.size(); ++i)
      sig.push_back({p.optimized.node(p.optimized.inputs()[i]).type.dtype, shapes[i]});
    const rt::CacheKey key =
        driver::tunedEntryKey(p.optimized, sig, backend.target(), options, candidates);
    if (std::optional<driver::TunedEntry> e =
            api::loadTunedEntry(*layers, key, p.optimized, sig, *t, backend.target())) {
      options.planCandidate = e->record.chosen;
      p.build = driver::build(p.optimized, p.build.plan.bindings, *t, options, driver::Stage::Plan);
      origin = driver::tuningText(e->record, /*fromEntry=*/true);
    }
  }
  const fusion::Plan& plan = p.build.plan;
  if (format == "json") return fusion::explainJson(p.optimized, plan);
  if (format == "dot") return fusion::explainDot(p.optimized, plan);
  return origin + fusion::explainText(p.optimized, plan);
}
constexpr std::array<std::string_view, 3> kFormats = {"text", "dot", "json"};

}  // namespace

extern "C" {

stitch_status_t stitch_graph_explain_plan(stitch_graph_t graph, const char* const* keys,
                                          const char* const* values, size_t num_options,
                                          const char* const* symbols, const int64_t* sizes,
                                          size_t num_symbols, char* buf, size_t capacity,
                                          size_t* needed) {
  STITCH_API_HANDLE(graph);
  if (num_options) {
    STITCH_API_REQUIRE(keys);
    STITCH_API_REQUIRE(values);
  }
  if (num_symbols) {
    STITCH_API_REQUIRE(symbols);
    STITCH_API_REQUIRE(sizes);
  }
  if (capacity) STITCH_API_REQUIRE(buf);
  STITCH_API_GUARD({
    std::string target = "sm_90", format = "text";
    std::optional<std::string> backend;
    driver::Options options{fusion::modeFromEnv()};
    bool targetGiven = false;
    for (const auto& [k, v] : api::readOptions(keys, values, num_options, kPlanOptions, "plan")) {
      if (k == "target") target = v, targetGiven = true;
      else if (k == "backend") backend = v;
      else if (k == "fusion") options.mode = fusion::parseMode(v);
      else if (k == "plan_candidate") options.planCandidate = api::parsePlanCandidate(v);
      else format = v;
    }
    STITCH_CHECK(std::find(kFormats.begin(), kFormats.end(), format) != kFormats.end(),
                 ErrorCode::InvalidArgument, "unknown plan format '{}'; valid formats: {}", format,
                 env::joinChoices(kFormats));
    configureLoggingFromEnv();
    if (backend) {
      STITCH_CHECK(!targetGiven, ErrorCode::InvalidArgument,
                   "plan options target and backend exclude each other: a backend plans for its "
                   "own machine");
      api::copyOut(
          explainForBackend(graph->graph(), *backend, options, format, symbols, sizes, num_symbols),
          buf, capacity, needed);
      return STITCH_OK;
    }
    // Plans are explained for the cost model's profiles only (stitch codegen takes any sm_XY).
    STITCH_CHECK(fusion::findProfile(target).has_value(), ErrorCode::InvalidArgument,
                 "unknown target '{}'; valid targets: {}", target, fusion::profileNames());
    const std::unique_ptr<target::Target> t = target::makeTarget(target::namedTarget(target));
    api::PlannedGraph p = api::buildForSizes(graph->graph(), *t, options, symbols, sizes,
                                             num_symbols, driver::Stage::Plan);
    const fusion::Plan& plan = p.build.plan;
    std::string text = format == "json"  ? fusion::explainJson(p.optimized, plan)
                       : format == "dot" ? fusion::explainDot(p.optimized, plan)
                                         : fusion::explainText(p.optimized, plan);
    api::copyOut(text, buf, capacity, needed);
    return STITCH_OK;
  })
}

}  // extern "C"
