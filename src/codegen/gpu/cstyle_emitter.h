// CUDA and HIP C++ for kernel programs: one C-style emitter, two thin dialects.
//
// Design note (after tinygrad's cstyle renderer and nvFuser's codegen). The emitter prints one
// translation unit per kernel program under its GPU schedule (schedule.h):
//   - one device function per phase, `stitch_phase<i>(params..., smem)`, whose body is the
//     phase's SSA instructions printed one C statement each (`const float v12 = ...;`) inside
//     the loops of its mapping: grid-stride groups of V elements for loops; for reductions, the
//     unit/lane split, one walk of the row per stage with per-lane accumulators, the cross-lane
//     reduction of each accumulator (stitch/reduce.cuh), the per-row `post` block (stored by
//     lane 0) and the element walk. Float sums are "wide": a lane adds its f32 sum into a
//     double every few groups, and lanes combine the doubles, so a thread walking a long row
//     keeps its accuracy; a phase with no units emits an empty body;
//   - one `extern "C" __global__` entry per phase, `stitch_p<i>`, and when the program has
//     several phases a cooperative entry `stitch_all` running them all with a grid barrier
//     (stitch/grid.cuh) between consecutive phases. The runtime picks one form or the other.
//   Every entry takes the program's parameters in order (one pointer each, `const` when no phase
//   writes it), then its size arguments by value (`const stitch::i64 s<k>`, lower/size_args.h:
//   each phase reads the ones it uses as index-typed locals `S<k>`, and prints them where the
//   size would be a literal, comments included, so that every signature of a shape class prints
//   the same text); `stitch_all` takes a pointer to two zeroed u32 words for the barrier last.
//   A program with index checks (KernelProgram::checks) takes `stitch::i64* stitch_status`
//   between its buffers and its sizes: four words the runtime keeps zeroed, where the first
//   failing check records itself (stitch/check.cuh).
// The device templates (kernels_templates/*.cuh, embedded at build time: deviceHeaders()) hold
// everything that is not specific to one program: conversions, math with the reference's
// semantics, vector I/O, reductions, the barrier. CUDA and HIP differ only in the dialect: a
// define that selects the templates' HIP spellings, and the warp width baked into the schedule.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/gpu/gpu_target.h"
#include "codegen/gpu/schedule.h"
#include "lower/kernel_program.h"

namespace stitch::codegen {

struct GpuLaunch {
  std::string function;  // entry point name
  int64_t grid = 1;      // blocks this entry wants (a grid-stride kernel accepts fewer)
  int block = 256;
  int sharedBytes = 0;  // static (already in the code); dynamic shared memory is not used
};

struct GpuKernelSource {
  std::string source;             // the translation unit
  std::vector<GpuLaunch> phases;  // stitch_p<i>, run in order
  GpuLaunch cooperative;          // stitch_all (function empty when single-phase)
  KernelSchedule schedule;
};

struct GpuEmitOptions {
  bool aligned = true;  // every buffer's base is 16-byte aligned: vector accesses allowed
};

// Prints kernel program `p` as CUDA (NVIDIA targets) or HIP (AMD) source for `target`.
GpuKernelSource emitGpuKernel(const lower::KernelProgram& p, const GpuTarget& target,
                              const GpuEmitOptions& options = {});

// The device templates `emitGpuKernel` includes for `p` under schedule `ks`: the ones its code
// uses (math.cuh always; reduce.cuh for reduce phases, vec.cuh for vector accesses, random.cuh for
// random_uniform, check.cuh for index checks, grid.cuh for the cooperative entry's barrier), so
// NVRTC/hipRTC parse no more
// than the kernel needs. A function of the program and its schedule, which the kernel cache key
// covers.
std::vector<std::string_view> deviceIncludes(const lower::KernelProgram& p,
                                             const KernelSchedule& ks);

// The device templates, as (include name, text): {"stitch/stitch.cuh", ...}. Embedded from
// kernels_templates/ at build time; handed to NVRTC/hipRTC as headers.
struct DeviceHeaderText {
  std::string_view name;
  std::string_view text;
};
std::span<const DeviceHeaderText> deviceHeaders();

}  // namespace stitch::codegen
