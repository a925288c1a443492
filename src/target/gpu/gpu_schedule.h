// The GPU targets' schedule of a kernel program for one machine and one alignment variant.
//
// A GPU target's schedule() decides the launch of every phase (lower/launch.h) for the machine
// the planner priced and 16-byte aligned buffers; its emit() makes that form and one for any
// alignment, whose launch is decided here (vector widths differ). The C-style emitter prints a
// program's launch and decides none: handed a program not scheduled for its target and
// variant, it stops with an internal error (codegen/gpu/schedule.h).
#pragma once

#include "codegen/gpu/gpu_target.h"
#include "lower/kernel_program.h"

namespace stitch::target {

// p with its launch decided for `t` and `aligned` buffers: p as it is when its launch already
// was (lower::launchDecidedFor), else a copy scheduled for them (lower::scheduleLaunch).
lower::KernelProgram scheduledFor(const lower::KernelProgram& p, const codegen::GpuTarget& t,
                                  bool aligned);

}  // namespace stitch::target
