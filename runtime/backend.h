// Backends: which exist, which this build and machine can run, and how "auto" chooses.
//
// Requests name a backend; only "auto" chooses. Asking for a backend that is not built in, or
// whose device is absent, is BackendUnavailable with the reason, never a silent fallback.
// Order of preference for auto: cuda, hip, cpu, reference — the first one available.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace stitch::rt {

enum class Backend { Reference, Cpu, Cuda, Hip };

std::string_view backendName(Backend b);
// The names accepted in requests: auto, cuda, hip, cpu, reference.
std::span<const std::string_view> backendChoices();

// Whether b can run here; when not, *why says why.
bool backendAvailable(Backend b, std::string* why = nullptr);

// Resolves "auto" or a backend name. Throws InvalidArgument for an unknown name (listing the valid
// ones) and BackendUnavailable when the named backend cannot run here.
Backend resolveBackend(std::string_view request);

}  // namespace stitch::rt
