// Cache keys: the identity of a compiled artifact, for every layer of the kernel cache
// (kernel_cache.h).
//
// The key (CacheKey)
// ------------------
// Everything the compiled bytes (and what load() makes of them) depend on, and nothing left out.
// A key is a list of named parts, each canonical bytes, built by one pure function per backend:
//   - the kernel program, serialized field by field (lower/serialize.h: complete by
//     construction, every field of every struct, checked at compile time). Not a printer's
//     text, and not a hash of it: issue 11's wrong answers came from a key built from
//     printProgram, which did not print the reduction kind;
//   - the target, attribute by attribute (host: triple, CPU name, the full feature string, LLVM
//     version; GPU: every GpuTarget field the scheduler and emitter read);
//   - the compile options (host: opt level, vector math library; GPU: the emit options, the
//     compiler's name, version and command-line options, a digest of the device headers);
//   - the library version (STITCH_VERSION_STRING) and the build's code identity (a hash of the
//     sources of src/, runtime/ and kernels_templates/, support/code_identity.h): a new release,
//     or a development build whose lowering or emitters changed, may emit different code for the
//     same program, and old entries must not be reused by it.
// The builders are hostKernelKey and gpuKernelKey (src/target/keys.h: the compile driver keys
// each artifact it emits; backends only read the keys); tests/lower/test_program_key.cpp mutates
// every program field and every target attribute and option one at a time and checks that the key
// changes. CacheKey::canonical() concatenates the parts length-prefixed (no choice of contents can
// make two keys serialize alike). It is the identity: the memory layer's map key and the bytes
// stored in every file header, compared byte for byte on load. CacheKey::hash() is FNV-1a 64 of it
// (the same on every machine, compiler and run, which std::hash promises not); it only names the
// file, so a hash collision reads as a miss, never as another kernel.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/support/code_identity.h"

namespace stitch::rt {

// The identity of a compiled artifact: named parts, each the canonical bytes of one thing the
// compiled code depends on (the kernel program's serialization, each target attribute, the
// options, the compiler's version, ...), in the order the key builder adds them, then the library
// version. Builders: hostKernelKey and gpuKernelKey (src/target/keys.h).
struct CacheKey {
  struct Part {
    std::string name;   // what the bytes are ("program", "triple", ...); part of the identity
    std::string bytes;  // canonical bytes (may hold any byte, NUL included)
    bool operator==(const Part&) const = default;
  };
  std::vector<Part> parts;
  // The release and the build's code identity: a new release, or a development build whose
  // lowering, emitters or device templates changed, may emit other code for the same parts.
  std::string version = std::string(STITCH_VERSION_STRING) + "+" + codeIdentity();

  // Appends a part; returns *this for chaining.
  CacheKey& add(std::string name, std::string bytes);

  // The full identity as bytes: kCanonicalKeyFormat, then every part and the version, each
  // length-prefixed (so no choice of contents can make two different keys serialize alike). The
  // memory layer's map key and the disk entry's header; a change of its format must come with a
  // new kCanonicalKeyFormat (tests pin the hash of a fixed key to catch accidental changes).
  std::string canonical() const;
  // FNV-1a 64 of canonical(): names the disk file, nothing more.
  uint64_t hash() const;
};

// The first bytes of every canonical key; bump it when canonical() or a key builder changes.
inline constexpr std::string_view kCanonicalKeyFormat = "stitch-kernel-key/2\n";

// What a persistent entry holds. The layers store and verify every kind alike, but their hit, miss
// and write counters (CacheStats, stitch_cache_stats_t) count kernels only, so that "loaded from
// the disk cache" means kernels: a program's entry is counted by its program's warm starts
// (src/driver/program_entry.h), and a machine profile (host_profile.h, device_profile.h) once per
// process. Corrupt entries and remote errors count for every kind: they are the layers' health.
// Tuned: a signature's autotuning decision with the chosen plan's artifact (src/driver/tuning.h).
enum class EntryKind { Kernel, Program, MachineProfile, Tuned };

}  // namespace stitch::rt
