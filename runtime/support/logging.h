// Logging goes through spdlog only, on one logger named "stitch" that writes to stderr.
// STITCH_LOG_LEVEL (trace, debug, info, warn, error, critical, off; default warn) sets its level.
#pragma once

#include <spdlog/spdlog.h>

namespace stitch {

// The library's logger. The first call reads STITCH_LOG_LEVEL; an invalid value leaves the level
// at warn, and configureLoggingFromEnv() (called by engine creation and the CLI) reports it.
spdlog::logger& log();

// Applies STITCH_LOG_LEVEL; throws InvalidArgument listing the valid levels on a bad value.
void configureLoggingFromEnv();

}  // namespace stitch
