// How much host memory a buffer may take before Stitch refuses to allocate it.
//
// Design. On Linux a buffer larger than the machine is not refused by malloc (memory is
// overcommitted): the process is OOM-killed later, when the pages are touched, or a vector's
// allocation throws std::bad_alloc far from anything a user could act on. So every host buffer
// Stitch allocates for a tensor (the reference interpreter's values, the cpu backend's arena, the
// command line's tensors, stitch_engine_alloc) is checked first against hostMemoryBytes(): the
// physical memory (sysconf), or the cgroup's memory limit when one is set and lower. That limit is
// fixed for the process, so whether a shape is refused does not depend on what else runs; a
// buffer under it can still fail later if the memory is taken by others. A refusal is
// ErrorCode::OutOfMemory naming the tensor and its size. Device memory needs no such check: the
// drivers refuse an allocation they cannot back, and the GPU paths report the size they asked.
#pragma once

#include <cstdint>
#include <string_view>

namespace stitch {

// The host memory limit in bytes (computed once).
int64_t hostMemoryBytes();

// Throws OutOfMemory "WHAT needs N bytes, more than this machine's memory, M bytes" when
// bytes > hostMemoryBytes().
void checkHostMemory(int64_t bytes, std::string_view what);

}  // namespace stitch
