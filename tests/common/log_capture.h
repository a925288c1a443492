// What the stitch logger prints at warn and above while a LogCapture lives, for tests that check
// that a fault is said, and how often.
#pragma once

#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>

#include "runtime/support/logging.h"

namespace stitch::testing {

class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)) {
    oldLevel_ = stitch::log().level();
    stitch::log().set_level(spdlog::level::warn);
    sink_->set_level(spdlog::level::warn);
    stitch::log().sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = stitch::log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    stitch::log().set_level(oldLevel_);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  std::string text() const { return out_.str(); }
  size_t count(std::string_view what) const {
    const std::string t = text();
    size_t n = 0;
    for (size_t at = t.find(what); at != std::string::npos; at = t.find(what, at + 1)) ++n;
    return n;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  spdlog::level::level_enum oldLevel_;
};

}  // namespace stitch::testing
