// The cpu backend: kernels JIT-compiled by LLVM ORC, run on the process's thread pool.
//
// Design note. load() compiles each kernel of an artifact through the process-wide
// HostCompiler (cached_compiler.h), plans the arena over every phase of every kernel
// (runtime/slots.h), refuses a plan whose intermediates do not fit this machine's memory (the
// largest of them named), and keeps a pool of arenas, one per concurrent run. A run binds the
// caller's tensors into a thread-local ValueBuffers and runs the phases in order on the shared
// pool (executor.h): steady-state runs allocate nothing. Memory is the host's
// (runtime/host_backend.h).
#pragma once

#include <memory>

#include "runtime/backend.h"

namespace stitch::rt::cpu {

// The backend registered as "cpu" (registration::cpu()).
std::unique_ptr<Backend> makeCpuBackend();

}  // namespace stitch::rt::cpu
