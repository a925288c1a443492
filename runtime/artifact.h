// Artifacts: what the compile driver hands a backend, and all a backend knows of a program.
//
// Design note. The driver (src/driver) plans a graph, lowers each kernel and emits its code; the
// runtime never sees a graph, a plan or a kernel program. An artifact is plain data: per kernel,
// its parameters (graph values or scratch slots, by id, with dtype and size), which parameters
// each phase reads and writes, and one or more compilable forms of the code (CUDA or HIP source,
// LLVM IR text, or whatever language a registered target emits), each with its cache key and its
// entry points. A backend compiles a form
// through its kernel cache, loads it, and runs the phases in order on buffers it binds by value
// id (runtime/backend.h). Value ids are only names here: the caller binds graph inputs and
// outputs to them, the backend puts everything else in its arena (runtime/slots.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/kernel_cache.h"
#include "runtime/support/dtype.h"

namespace stitch::rt {

// One buffer a kernel reads or writes: a graph value (node id) or an arena scratch slot.
struct KernelBuffer {
  int value = -1;    // node id in the planned graph; -1 for scratch
  int scratch = -1;  // scratch slot index when value == -1
  ir::DType dtype = ir::DType::F32;
  int64_t elements = 0;
};

// A source file the code includes (the GPU device templates), by include name.
struct SourceHeader {
  std::string name;
  std::string text;
};

// One entry point of a kernel's code and how it is launched.
struct EntryPoint {
  std::string symbol;
  // Host: fn(buffers, begin, end) over the units [0, units), tasks of `grain` units or more.
  int64_t units = 0;
  int64_t grain = 1;
  // GPU: `grid` blocks of `block` threads using `sharedBytes` of static shared memory.
  int64_t grid = 1;
  int block = 1;
  int sharedBytes = 0;
};

// A compilable form of a kernel.
struct KernelCode {
  CacheKey key;  // everything the compiled bytes depend on (target/keys.h)
  // The language of `text`, as the target that emitted it names it ("llvm-ir", "cuda", "hip"):
  // a backend compiles only its own language, and a program entry of another is refused.
  std::string language;
  std::string text;
  // The device templates the text includes (GPU); shared by every kernel.
  std::shared_ptr<const std::vector<SourceHeader>> headers;
  // Valid only when every buffer's base address is 16-byte aligned (vector accesses).
  bool requiresAlignment = false;
  std::vector<EntryPoint> phases;  // one per phase, run in order; host entries take the phase's
                                   // buffers, GPU entries every parameter
  EntryPoint cooperative;          // GPU, several phases: all of them with grid barriers in
                                   // between (symbol empty when there is none)
};

// The parameters one phase reads (the first numInputs) and writes, as indices into params.
struct PhaseBuffers {
  std::vector<int> params;
  int numInputs = 0;
};

struct KernelArtifact {
  std::string name;
  std::vector<KernelBuffer> params;
  std::vector<PhaseBuffers> phases;
  // The values of the code's size arguments (a kernel of a shape class reads the sizes of this
  // artifact's signature from them; host entries take a pointer to them after their buffers).
  // Empty: the code has every size compiled in. Like params and the entry points' units, they
  // belong to the artifact: one compiled code serves every artifact whose key it has.
  std::vector<int64_t> sizes;
  // The index checks the code records, by position (KernelProgram::checks): what an error names,
  // "gather 'y' (axis 1)". Non-empty: every entry takes a pointer to four zeroed int64 status
  // words after its sizes (host: after the sizes' pointer; GPU: after the buffers), which a
  // failing check fills with (check + 1, index, bound); the backend reads them after the run and
  // throws IndexOutOfRange (support/error.h's message). Per artifact, not in the code: programs
  // that differ only in names share compiled code.
  std::vector<std::string> checks;
  std::vector<KernelCode> forms;  // preferred first; a backend runs the first whose needs hold
};

struct ProgramArtifact {
  std::string name;                     // the graph's, for messages
  std::vector<KernelArtifact> kernels;  // in run order
  std::vector<int> external;            // values in the caller's memory: graph inputs, outputs
  // "'x' f32[4, 8]" for each value a kernel touches, by node id (messages about memory).
  std::vector<std::string> valueLabels;
};

}  // namespace stitch::rt
