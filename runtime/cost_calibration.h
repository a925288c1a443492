// The cost model's calibration for one machine: its figures fitted to the plans autotuning
// measured there, kept like the machine's measured profile.
//
// Design note. The built-in profiles with the measured host or device figures over them
// (cpu/host_profile.h, gpu/device_profile.h) still misprice some plans: one bandwidth for every
// access pattern, a guessed launch overhead. Autotuning (src/driver/tuning.h) leaves, per tuned
// signature, each candidate plan's kernels (fusion::KernelSummary) with its measured time; `stitch
// tune fit` (stitch_tune_fit) fits the model's throughputs and overheads to them
// (fusion/cost_fit.h) and stores the result here. A backend loads it when it describes its machine
// (rt::Target::calibration), and every target's facts() lays its non-zero figures over the
// profile (src/target/target.h), so plans, program entries and tuned entries (whose keys hold the
// whole rt::Target) follow the calibration.
//
//   - Kept as one entry of the persistent layers, EntryKind::MachineProfile, in the text form of
//     the profiles (profile_text.h, "stitch-cost-calibration 1"): the remote layer shares it with
//     the fleet as it shares the measured profile, so machines of one kind plan alike.
//   - Keyed by the machine, not by the figures: the backend, the arch, and the host's model,
//     threads, CPU name and features, or the device's name and driver (the parts of
//     driver::machineIdentity, which the fit keeps records by). The figures are absolute: a
//     re-measured bandwidth does not move a fitted one.
//   - Never trusted blindly: a stored calibration that does not parse, or holds a negative or
//     non-finite figure, none at all, or no samples, is ignored with a warning (the profile
//     stands) until a fit overwrites it.
//   - STITCH_COST_CALIBRATION=0 ignores it (a boolean, default on): to measure plans before and
//     after, or to step back from a calibration that made things worse.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "runtime/cache_key.h"
#include "runtime/persistent_layers.h"
#include "runtime/target.h"

namespace stitch::rt {

inline constexpr const char* kCostCalibrationEnv = "STITCH_COST_CALIBRATION";

// The text a calibration is stored as: a header line, then one `key=value` line per field.
std::string serializeCostCalibration(const CostCalibration& c);
// The calibration `text` holds; nullopt when it is not exactly what serializeCostCalibration
// writes (profile_text.h's rules) or not valid (validCostCalibration).
std::optional<CostCalibration> parseCostCalibration(std::string_view text);
// Whether a calibration may be used: every figure finite and not negative (0: not calibrated), at
// least one positive, and at least one sample.
bool validCostCalibration(const CostCalibration& c);

// The persistent layers' key of the calibration of t's machine.
CacheKey calibrationKey(const Target& t);

// STITCH_COST_CALIBRATION (default on); throws InvalidArgument on a bad value.
bool costCalibrationEnabled();

// The calibration stored for t's machine in `layers`, or none (all zero) when there is none,
// STITCH_COST_CALIBRATION=0, or the stored one is not valid (warned about).
CostCalibration loadCostCalibration(const Target& t, PersistentLayers& layers);
// Stores c for t's machine in the disk and remote layers.
void storeCostCalibration(const Target& t, const CostCalibration& c, PersistentLayers& layers);

// What a backend describes its machine with: loadCostCalibration from the layers of the
// environment (STITCH_CACHE, STITCH_CACHE_DIR, STITCH_REMOTE_CACHE).
CostCalibration probeCostCalibration(const Target& t);

}  // namespace stitch::rt
