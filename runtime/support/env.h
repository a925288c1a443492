// STITCH_* environment toggles.
//
// Every toggle is read through here so that an unknown value is always an error that lists the
// valid ones (DESIGN.md, "Environment toggles"), never a silent default, and so that one table
// (kVariables in env.cpp, listed in the README) names every variable Stitch reads. Each variable
// is read where it takes effect; stitch_environment_check (src/api/api_environment.cpp) reads
// them all up front with those same readers, so that a bad value is reported before any work. A
// STITCH_* variable that is not in the table is most likely a typo (STITCH_BACKNED=cuda): the first
// read of any toggle warns once per process, naming the unknown variables and the known ones. The
// prefixes STITCH_TEST_, STITCH_BENCH_ and STITCH_CI_ belong to the project's own test,
// benchmark and CI harnesses and are not reported.
//
// Booleans (STITCH_CACHE, STITCH_DISABLE, ...) share one parser: 1/true/yes/on and
// 0/false/no/off, case-insensitive; anything else is an error listing them. The Python package
// (python/stitch/_env.py) parses STITCH_DISABLE with the same rules.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace stitch::env {

// A variable Stitch reads, with its accepted values as people read them.
struct Variable {
  std::string_view name;
  std::string_view values;
};
std::span<const Variable> knownVariables();

// The raw value of NAME, or nullopt when unset or empty.
std::optional<std::string> get(const char* name);

// The value of NAME, which must be one of `choices`; nullopt when unset. Throws InvalidArgument
// naming the variable, the bad value and the valid choices otherwise.
std::optional<std::string> getChoice(const char* name, std::span<const std::string_view> choices);

// The boolean value of NAME, or `fallback` when unset or empty. Throws InvalidArgument naming the
// variable, the bad value and the accepted spellings otherwise.
bool getBool(const char* name, bool fallback);
// The integer value of NAME, which must be in [min, max]; `fallback` when unset or empty. Throws
// InvalidArgument naming the variable, the bad value and the valid range otherwise.
int64_t getInt(const char* name, int64_t min, int64_t max, int64_t fallback);

// Parses a boolean as getBool does; nullopt when `text` is none of the accepted spellings.
std::optional<bool> parseBool(std::string_view text);

// STITCH_* variables set in this process's environment that Stitch does not know (sorted).
std::vector<std::string> unknownVariables();

// Joins choices as "a, b, c" for error messages.
std::string joinChoices(std::span<const std::string_view> choices);

// Throws InvalidArgument "NAME=VALUE is not valid; valid values: VALID". Every reader of a
// variable reports a bad value through here (or the helpers above, which do), so that every
// message names the variable, the value and what would have been accepted, in the same words.
[[noreturn]] void throwInvalid(std::string_view name, std::string_view value,
                               std::string_view valid);

}  // namespace stitch::env
