#include "runtime/support/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <array>
#include <string_view>

#include "runtime/support/env.h"
#include "runtime/support/error.h"

namespace stitch {

namespace {

constexpr std::array<std::string_view, 7> kLevels = {"trace", "debug",    "info", "warn",
                                                     "error", "critical", "off"};

std::shared_ptr<spdlog::logger> makeLogger() {
  // Not registered globally, so an application's own spdlog setup is left alone.
  auto logger = std::make_shared<spdlog::logger>(
      "stitch", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  logger->set_pattern("[stitch %l] %v");
  logger->set_level(spdlog::level::warn);
  return logger;
}

}  // namespace

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = makeLogger();
    try {
      if (auto v = env::getChoice("STITCH_LOG_LEVEL", kLevels))
        l->set_level(spdlog::level::from_str(*v));
    } catch (const Error&) {
      // Reported by configureLoggingFromEnv(); logging itself must never throw.
    }
    return l;
  }();
  return *logger;
}

void configureLoggingFromEnv() {
  if (auto v = env::getChoice("STITCH_LOG_LEVEL", kLevels))
    log().set_level(spdlog::level::from_str(*v));
}

}  // namespace stitch
