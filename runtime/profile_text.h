// The text form of the machine profiles the backends cache on disk (gpu/device_profile.h,
// cpu/host_profile.h): a header line naming the format and its version, then one `key=value`
// line per field, every line ending in a newline. A profile type describes its fields with
//   template <class P, class F> void forEachField(P& p, F&& f)   // f(key, field) per field
// (strings, int, int64_t, double). Parsing is strict: the header, every field exactly once and
// nothing else, numbers that parse whole and are not negative or NaN; anything else is nullopt,
// so a damaged or foreign file is measured again, never trusted.
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace stitch::rt::profile_text {

inline std::string text(const std::string& v) { return v; }
inline std::string text(int v) { return std::to_string(v); }
inline std::string text(int64_t v) { return std::to_string(v); }
inline std::string text(double v) { return fmt::format("{:.17g}", v); }

inline bool read(std::string_view s, std::string& out) {
  out = std::string(s);
  return true;
}
template <class N>
bool read(std::string_view s, N& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && out >= 0 && !std::isnan(double(out));
}

template <class P, class ForEach>
std::string write(std::string_view header, const P& p, ForEach forEach) {
  std::string out = std::string(header) + "\n";
  forEach(p, [&](std::string_view key, const auto& value) {
    out += fmt::format("{}={}\n", key, text(value));
  });
  return out;
}

template <class P, class ForEach>
std::optional<P> parse(std::string_view header, std::string_view in, ForEach forEach) {
  std::map<std::string, std::string, std::less<>> values;
  size_t begin = 0;
  bool first = true;
  while (begin < in.size()) {
    size_t end = in.find('\n', begin);
    if (end == std::string_view::npos) return std::nullopt;  // every line ends with a newline
    std::string_view line = in.substr(begin, end - begin);
    begin = end + 1;
    if (first) {
      if (line != header) return std::nullopt;
      first = false;
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    if (!values.emplace(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1))).second)
      return std::nullopt;
  }
  if (first) return std::nullopt;
  P p;
  bool ok = true;
  size_t used = 0;
  forEach(p, [&](std::string_view key, auto& value) {
    auto it = values.find(key);
    ok = ok && it != values.end() && read(it->second, value);
    used += it != values.end();
  });
  if (!ok || used != values.size()) return std::nullopt;
  return p;
}

}  // namespace stitch::rt::profile_text
