#include "runtime/support/env.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>

#include "runtime/support/error.h"
#include "runtime/support/logging.h"

extern char** environ;

namespace stitch::env {

namespace {

// Every variable Stitch reads, C++ and Python alike: the README's table lists the same names
// (tests/support/test_env.cpp checks both ways), and stitch_environment_check reads each with the
// code that uses it (src/api/api_environment.cpp, which must name every one).
constexpr Variable kVariables[] = {
    {"STITCH_LOG_LEVEL", "trace, debug, info, warn, error, critical, off"},
    {"STITCH_BACKEND", "auto, cuda, hip, cpu, reference"},
    {"STITCH_FUSION", "stitch, basic, off"},
    {"STITCH_CACHE", "a boolean"},
    {"STITCH_CACHE_DIR", "a directory"},
    {"STITCH_CACHE_MAX_MB", "an integer from 1 to 17592186044415 (MiB)"},
    {"STITCH_CACHE_KEY", "a secret of 32 to 4096 bytes (the fleet's cache key)"},
    {"STITCH_CACHE_KEY_FILE", "the path of a file holding the fleet's cache key"},
    {"STITCH_DUMP", "a comma list of plan, source, llvm (ptx is not built)"},
    {"STITCH_DUMP_DIR", "a directory"},
    {"STITCH_NUM_THREADS", "an integer from 1 to 4096"},
    {"STITCH_SPIN_US", "an integer from 0 to 100000 (microseconds)"},
    {"STITCH_CPU_OPENMP", "a boolean"},
    {"STITCH_CPU_STREAMING_STORES", "a boolean"},
    {"STITCH_CPU_FEATURES", "a comma list of +FEATURE or -FEATURE (LLVM's names, e.g. -avx512f)"},
    {"STITCH_SHAPE_CLASSES", "a boolean"},
    {"STITCH_AUTOTUNE", "a boolean"},
    {"STITCH_AUTOTUNE_CANDIDATES", "an integer from 1 to 16"},
    {"STITCH_AUTOTUNE_BUDGET_MS", "an integer from 1 to 600000 (milliseconds)"},
    {"STITCH_COST_CALIBRATION", "a boolean"},
    {"STITCH_COMPILE_THREADS", "an integer from 1 to 256"},
    {"STITCH_DISABLE", "a boolean (the PyTorch hook)"},
    {"STITCH_REPORT", "off, stdout, stderr (the PyTorch hook)"},
    {"STITCH_HUGE_PAGES", "a boolean (the Python package's host outputs)"},
    {"STITCH_HOST_POOL_MB",
     "an integer from 0 to 1048576 (MiB; the Python package's host outputs)"},
    {"STITCH_LIBRARY", "the path of libstitch.so (the Python package)"},
    {"STITCH_CUDA_LIBRARY", "the path of libcuda"},
    {"STITCH_NVRTC_LIBRARY", "the path of libnvrtc"},
    {"STITCH_HIP_LIBRARY", "the path of libamdhip64"},
    {"STITCH_REMOTE_CACHE", "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], or off"},
    {"STITCH_REMOTE_CACHE_NAMESPACE", "letters, digits and . _ - (at most 64)"},
    {"STITCH_REMOTE_CACHE_TIMEOUT_MS", "an integer from 1 to 60000"},
    {"STITCH_REMOTE_CACHE_TTL", "an integer from 0 (no expiry) to 315360000 (seconds)"},
    {"STITCH_REMOTE_CACHE_RETRY_MS", "an integer from 0 to 86400000"},
};

constexpr std::string_view kHarnessPrefixes[] = {"STITCH_TEST_", "STITCH_BENCH_", "STITCH_CI_"};

constexpr std::string_view kTrue[] = {"1", "true", "yes", "on"};
constexpr std::string_view kFalse[] = {"0", "false", "no", "off"};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Warns once per process about unknown STITCH_* variables. An atomic flag rather than
// std::call_once: the warning goes through log(), whose first call reads STITCH_LOG_LEVEL
// through get(), which comes back here; a once_flag would deadlock on that re-entry.
void warnUnknownOnce() {
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return;
  std::vector<std::string> unknown = unknownVariables();
  if (unknown.empty()) return;
  std::string known;
  for (const Variable& v : kVariables) known += (known.empty() ? "" : ", ") + std::string(v.name);
  std::string names;
  for (const std::string& u : unknown) names += (names.empty() ? "" : ", ") + u;
  log().warn("unknown environment variable{} {} (ignored; a typo?); Stitch reads: {}",
             unknown.size() > 1 ? "s" : "", names, known);
}

}  // namespace

std::span<const Variable> knownVariables() { return kVariables; }

std::vector<std::string> unknownVariables() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    std::string_view name = entry.substr(0, entry.find('='));
    if (!name.starts_with("STITCH_")) continue;
    auto is = [&](std::string_view n) { return n == name; };
    auto prefixed = [&](std::string_view p) { return name.starts_with(p); };
    if (std::any_of(std::begin(kVariables), std::end(kVariables),
                    [&](const Variable& v) { return is(v.name); }) ||
        std::any_of(std::begin(kHarnessPrefixes), std::end(kHarnessPrefixes), prefixed))
      continue;
    out.emplace_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> get(const char* name) {
  warnUnknownOnce();
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::string joinChoices(std::span<const std::string_view> choices) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i) out += ", ";
    out += choices[i];
  }
  return out;
}

std::optional<std::string> getChoice(const char* name, std::span<const std::string_view> choices) {
  auto v = get(name);
  if (!v) return std::nullopt;
  for (std::string_view c : choices)
    if (c == *v) return v;
  throwInvalid(name, *v, joinChoices(choices));
}

void throwInvalid(std::string_view name, std::string_view value, std::string_view valid) {
  throwError(ErrorCode::InvalidArgument,
             fmt::format("{}={} is not valid; valid values: {}", name, value, valid));
}

std::optional<bool> parseBool(std::string_view text) {
  std::string t = lower(text);
  if (std::find(std::begin(kTrue), std::end(kTrue), t) != std::end(kTrue)) return true;
  if (std::find(std::begin(kFalse), std::end(kFalse), t) != std::end(kFalse)) return false;
  return std::nullopt;
}

bool getBool(const char* name, bool fallback) {
  auto v = get(name);
  if (!v) return fallback;
  if (auto b = parseBool(*v)) return *b;
  throwInvalid(name, *v,
               fmt::format("{} (true), {} (false)", joinChoices(kTrue), joinChoices(kFalse)));
}

int64_t getInt(const char* name, int64_t min, int64_t max, int64_t fallback) {
  auto v = get(name);
  if (!v) return fallback;
  int64_t n = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || end != v->data() + v->size() || n < min || n > max)
    throwInvalid(name, *v, fmt::format("an integer from {} to {}", min, max));
  return n;
}

}  // namespace stitch::env
