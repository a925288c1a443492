// STITCH_* environment toggles.
//
// Every toggle is read through here so that an unknown value is always an error that lists the
// valid ones (DESIGN.md, "Environment toggles"), never a silent default.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace stitch::env {

// The raw value of NAME, or nullopt when unset or empty.
std::optional<std::string> get(const char* name);

// The value of NAME, which must be one of `choices`; nullopt when unset. Throws InvalidArgument
// naming the variable, the bad value and the valid choices otherwise.
std::optional<std::string> getChoice(const char* name, std::span<const std::string_view> choices);

// Joins choices as "a, b, c" for error messages.
std::string joinChoices(std::span<const std::string_view> choices);

}  // namespace stitch::env
