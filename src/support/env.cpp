#include "support/env.h"

#include <cstdlib>

#include "support/error.h"

namespace stitch::env {

std::optional<std::string> get(const char* name) {
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
  throwError(ErrorCode::InvalidArgument,
             fmt::format("{}={} is not valid; valid values: {}", name, *v, joinChoices(choices)));
}

}  // namespace stitch::env
