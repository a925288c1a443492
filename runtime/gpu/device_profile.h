// The device's own figures for the cost model: read from the driver, bandwidth measured once.
//
// Design note. The planner prices kernels with a hardware profile (src/fusion/hardware.h). Its
// built-in GPU profiles are datasheet figures for one part per family (H100 SXM for sm_90); the
// device a backend runs on may be another part of the family (an H100 PCIe has fewer SMs and a
// slower memory) or run at other clocks. So a GPU backend describes its device in
// rt::DeviceProfile (runtime/target.h), which the target's facts() (src/target) lays over the
// built-in profile field by field (a field left 0 keeps the built-in figure):
//   - limits the driver reports (Device::queryProfile): resident threads and blocks, registers and
//     shared memory per multiprocessor, the opt-in shared memory per block, the SM clock. Cheap:
//     read at every start;
//   - the memory bandwidth that matters to memory-bound kernels: what a copy kernel reaches (the
//     profiles' convention, hardware.cpp), measured once (measureCopyBandwidth: a grid-stride
//     16-byte copy of 256 MiB, median of 20 timed launches) and kept in the kernel cache's
//     directory as one more entry (DiskCache, so written atomically and authenticated), keyed by
//     the device's name, the driver's version, the arch and the library's code identity. A new
//     driver or a new build measures again; STITCH_CACHE=0 measures in every process.
// A measurement that fails (no memory left on the device, a compile error) is logged and the
// built-in bandwidth stands; nothing is stored, so the next process tries again.
//
// What runs where: the query and the measurement need the device (GpuBackend calls them when it
// is made) and are kept thin; the rest (the text form, the cache protocol, the fallback, the
// overlay in the target's facts() (src/target)) is plain code tested on any machine
// (tests/runtime/test_device_profile.cpp).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/kernel_cache.h"
#include "runtime/target.h"

namespace stitch::rt::gpu {

class Device;
class DeviceCompiler;

// The text a profile is stored as: a header line, then one `key=value` line per field.
std::string serializeDeviceProfile(const DeviceProfile& p);
// The profile `text` holds; nullopt when it is not exactly what serializeDeviceProfile writes
// (another header or version, a missing, unknown or repeated key, a number that does not parse
// or is negative).
std::optional<DeviceProfile> parseDeviceProfile(std::string_view text);

// The disk cache key of a device's measured figures.
CacheKey deviceProfileKey(std::string_view backend, const std::string& arch,
                          const DeviceProfile& queried);

// `queried` completed with its memory bandwidth: from `disk` when an entry for `key` holds one
// for the same device and driver, else from measureBandwidth() (bytes/s), which is then stored.
// When measureBandwidth throws or returns no positive number, the bandwidth stays 0 (the
// built-in figure) and nothing is stored.
DeviceProfile withMeasuredBandwidth(DeviceProfile queried, const CacheKey& key, DiskCache& disk,
                                    const std::function<double()>& measureBandwidth);

// The copy kernel measureCopyBandwidth runs: `stitch_copy(in, out, n)` copies n 16-byte words.
std::string_view copyKernelSource();

// Device-to-device copy bandwidth (read + written bytes per second) of a 16-byte grid-stride
// copy kernel compiled by `compiler` for `arch`: the median of 20 launches timed with events,
// after 3 untimed ones, over two buffers of 256 MiB. Throws (OutOfMemory, Compile, ...) when it
// cannot run.
double measureCopyBandwidth(Device& device, DeviceCompiler& compiler, const std::string& arch);

// What GpuBackend describes its device with: the driver's figures plus the bandwidth, measured
// or read from the disk cache of the environment (STITCH_CACHE, STITCH_CACHE_DIR).
DeviceProfile probeDeviceProfile(Device& device, DeviceCompiler& compiler, const std::string& arch);

}  // namespace stitch::rt::gpu
