// What the device compilers say about a kernel's registers and spills.
//
// NVRTC passes `--ptxas-options=-v` through to ptxas, which appends to the program log, for every
// function it compiles, "N bytes stack frame, S bytes spill stores, L bytes spill loads" and, for
// each kernel, "Used R registers". hipRTC writes no such log (clang's
// -Rpass-analysis=kernel-resource-usage remarks never reach hiprtcGetProgramLog in HIP 5.2), but
// the code object carries the same facts: its NT_AMDGPU_METADATA note is a msgpack map per kernel
// with .vgpr_count, .vgpr_spill_count, .sgpr_spill_count and .private_segment_fixed_size.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace stitch::rt::gpu {

struct ResourceUsage {
  int registers = -1;      // per thread, the largest of the kernels; -1 when not reported
  int64_t spillBytes = 0;  // see the two readers; > 0 exactly when the compiler spilled
  int64_t stackBytes = 0;  // per-thread local memory (stack frame / private segment), largest
};

// From an NVRTC log compiled with --ptxas-options=-v: registers is the largest "Used N registers";
// spillBytes sums "spill stores" and "spill loads" over every function (device functions that were
// not inlined spill too). A log without ptxas lines gives the defaults.
ResourceUsage parsePtxasLog(std::string_view log);

// From an AMDGPU HSA code object (64-bit little-endian ELF, code object v3 and later): registers
// is the largest .vgpr_count; spillBytes is 4 bytes × (.vgpr_spill_count + .sgpr_spill_count)
// summed over the kernels, i.e. the registers' worth of data moved out per thread. AMDGPU reports
// spilled registers, not bytes of loads and stores, so the figure is comparable in kind, not in
// size, to NVRTC's. nullopt when the bytes are not such an ELF or carry no metadata note.
std::optional<ResourceUsage> readAmdgpuResourceUsage(std::span<const uint8_t> codeObject);

}  // namespace stitch::rt::gpu
