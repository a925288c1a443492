// The contract between the host code generator and the CPU executor.
//
// A compiled host kernel is a plain C function over the kernel's buffers (its inputs, then its
// outputs, each a pointer to compact row-major data in the value's dtype) that computes the
// parallel units [begin, end) of its mapping: rows of a reduction, or chunks of a loop. Units are
// independent, so the executor splits [0, units) into tasks on its thread pool; a kernel whose
// plan needs a grid-wide barrier is compiled as several phases, each a CompiledKernel of its own,
// run one after the other with their scratch values in the program's arena.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/artifact.h"

namespace stitch::rt::cpu {

using KernelFn = void (*)(void* const* buffers, int64_t begin, int64_t end);

using KernelBuffer = rt::KernelBuffer;  // runtime/artifact.h

struct CompiledKernel {
  KernelFn fn = nullptr;
  int64_t units = 0;  // parallel units: fn(buffers, 0, units) does the whole kernel
  int64_t grain = 1;  // units per task that keep a task worth its dispatch (>= 1)
  // Run as fn(buffers, 0, units) on the calling thread, without the pool: a kernel too small for
  // waking workers to pay (runsInline() in executor.h decides).
  bool serial = false;
  std::vector<KernelBuffer> inputs;
  std::vector<KernelBuffer> outputs;
  // The code's size arguments (KernelArtifact::sizes): when not empty, fn finds a pointer to
  // them after the outputs' pointers.
  std::vector<int64_t> sizes;
  // The index checks of its code (KernelArtifact::checks): when not empty, fn finds a pointer to
  // four zeroed int64 status words after the sizes' pointer (or the outputs'), which a failing
  // check fills (codegen/llvm/llvm_emitter.h).
  std::vector<std::string> checks;
  // Keeps the code alive (e.g. the JIT resource tracker) as long as the kernel is used.
  std::shared_ptr<const void> owner;
};

}  // namespace stitch::rt::cpu
