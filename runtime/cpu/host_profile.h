// The host's own figures for the cost model: read from the OS, copy bandwidth measured once.
//
// Design note. The planner prices host kernels with the built-in `host` profile
// (src/fusion/hardware.cpp), a fixed nominal machine so that plans made by `stitch plan --target
// host` and the planner tests do not depend on the machine they run on. The cpu backend describes
// the machine it runs on in rt::HostProfile (runtime/target.h), which the target's facts()
// (src/target) lays over the built-in profile field by field (a field left 0 keeps the built-in
// figure), as the GPU backends do with rt::DeviceProfile (runtime/gpu/device_profile.h, same
// protocol):
//   - read at every start (cheap): the CPU model (/proc/cpuinfo), the threads CPU kernels run on
//     (the thread pool's size, STITCH_NUM_THREADS), the f32 SIMD width (from the features LLVM
//     reports: AVX-512 16 lanes, AVX 8, SSE / NEON 4), the L1 data, L2 and last-level cache
//     sizes (/sys/devices/system/cpu/cpu0/cache, else sysconf);
//   - measured once (measureHostCopyBandwidth): the bandwidth a copy reaches over all of those
//     threads, on two buffers well beyond the last-level cache (the profiles' convention: what a
//     streaming kernel reaches, read + written bytes), best of 5 timed copies; kept in the kernel
//     cache's directory as one more entry (DiskCache: written atomically, authenticated, a
//     corrupt or foreign entry is measured again, never trusted), keyed by the CPU model, LLVM's
//     CPU name and features and the thread count (another thread count is another machine to the
//     planner), plus the library's code identity (CacheKey adds it).
// STITCH_CACHE=0 (or no cache directory): measured in every process (~0.1 s), like the GPU side.
// The alternative, the built-in figure, would plan the same graph differently with and without
// the cache, which makes a cache switch change results' speed and the kernels' code.
// A measurement that fails (no memory for the buffers) is logged and the built-in bandwidth
// stands; nothing is stored, so the next process tries again.
//
// Cache keys: a host kernel's key (target/keys.h) holds its lowered program, which is what the
// plan made of the profile; the profile itself does not determine the code beyond the program, so
// it is not in the key (two profiles that plan alike share their compiled kernels).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/kernel_cache.h"
#include "runtime/target.h"

namespace stitch::rt::cpu {

// The text a profile is stored as: a header line, then one `key=value` line per field.
std::string serializeHostProfile(const HostProfile& p);
// The profile `text` holds; nullopt when it is not exactly what serializeHostProfile writes
// (another header or version, a missing, unknown or repeated key, a number that does not parse or
// is negative).
std::optional<HostProfile> parseHostProfile(std::string_view text);

// The disk cache key of a machine's measured figures: `queried` (model, threads) and the LLVM
// machine `host` (CPU name, features).
CacheKey hostProfileKey(const HostProfile& queried, const HostTarget& host);

// `queried` completed with its copy bandwidth: from `disk` when an entry for `key` holds one for
// the same model and thread count, else from measureBandwidth() (bytes/s), which is then stored.
// When measureBandwidth throws or returns no positive finite number, the bandwidth stays 0 (the
// built-in figure) and nothing is stored.
HostProfile withMeasuredHostBandwidth(HostProfile queried, const CacheKey& key, DiskCache& disk,
                                      const std::function<double()>& measureBandwidth);

// The f32 lanes of the widest vector unit in an LLVM feature list ("+avx512f,-sse4a,..."): 16
// with +avx512f, 8 with +avx, 4 with +sse2 or +neon, else 1.
int simdWidthOf(std::string_view features);

// The machine's figures but the bandwidth: model, `threads`, SIMD width from `host.features`,
// cache sizes.
HostProfile queryHostProfile(int threads, const HostTarget& host);

// Copy bandwidth (read + written bytes per second) over `threads` threads of the shared pool:
// each thread copies its share of a buffer of max(64 MiB, 2 x the last-level cache) (at most
// 512 MiB) into another, in 256 KiB memcpy pieces (below glibc's non-temporal threshold, so the
// stores are ordinary ones, as generated kernels' are); best of 5 timed copies after one untimed.
// Throws when the buffers cannot be had.
double measureHostCopyBandwidth(const HostProfile& queried);

// What the cpu backend describes its machine with: queried, and the bandwidth measured or read
// from the disk cache of the environment (STITCH_CACHE, STITCH_CACHE_DIR).
HostProfile probeHostProfile(int threads, const HostTarget& host);

// STITCH_CPU_STREAMING_STORES: whether host kernels may write large outputs with non-temporal
// stores (runtime/cpu/streaming_stores.h).
inline constexpr const char* kStreamingStoresEnv = "STITCH_CPU_STREAMING_STORES";
// HostCompileOptions::streamingStoreBytes for a machine: twice its last-level cache (64 MiB when
// the profile does not know it), so that a phase streams only when its own traffic would have
// pushed its outputs out of the cache anyway; 0 (never) with STITCH_CPU_STREAMING_STORES=0.
// Throws InvalidArgument on a bad value of the variable.
int64_t hostStreamingStoreBytes(const HostProfile& profile);

}  // namespace stitch::rt::cpu
