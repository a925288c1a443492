// What code is generated for: the description a backend gives the compile driver.
//
// A backend (runtime/backend.h) describes its machine here, in plain data, and the driver
// (src/driver) plans, lowers and emits for it and builds the cache keys from it. Nothing in this
// header knows how code is generated: the driver turns `arch` into the emitter's target and the
// planner's hardware profile.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace stitch::rt {

// The backends that exist. Reference is the interpreter, the oracle: it runs graphs, not
// compiled code.
enum class BackendKind { Reference, Cpu, Cuda, Hip };

std::string_view backendName(BackendKind b);

// The machine host code is generated for: every attribute the object code depends on.
struct HostTarget {
  std::string triple;       // "x86_64-unknown-linux-gnu"
  std::string cpu;          // "znver3"
  std::string features;     // every feature LLVM reports for the host, "+avx2,-avx512f,...", sorted
  std::string llvmVersion;  // another LLVM may generate other code for the same IR
};

// How host code is compiled.
struct HostCompileOptions {
  int optLevel = 3;
  bool vectorMath = false;  // the vectorizer may call glibc's libmvec
};

// A GPU compiler as cache keys name it.
struct GpuCompilerId {
  std::string name;                  // "nvrtc" / "hiprtc"
  std::string version;               // "13.0"
  std::vector<std::string> options;  // what the compiler passes for the target's arch
};

struct Target {
  BackendKind kind = BackendKind::Cpu;
  std::string arch = "host";  // "host", "sm_90", "gfx90a"
  // GPU: measured on the device; 0 means the arch's nominal value (compiling with no device).
  int warpSize = 0;
  int processors = 0;
  // Cpu: the JIT's machine and options.
  HostTarget host;
  HostCompileOptions hostOptions;
  // Cuda, Hip: the run-time compiler (name empty when there is none: source only).
  GpuCompilerId compiler;
};

}  // namespace stitch::rt
