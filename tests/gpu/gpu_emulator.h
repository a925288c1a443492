// The CUDA code generator's kernels run on the host (tests only; emulator/device_emulation.h says
// how): a program's artifacts, planned and emitted for an NVIDIA target exactly as for a device,
// are compiled by the host C++ compiler into one shared library and launched block by block, so
// the generated code is checked against the reference interpreter on every CI run, without a
// GPU. What a device adds (timing, the memory model, PTX-level arithmetic, the cooperative entry)
// is the `gpu` label's (test_gpu_run.cpp).
//
// Each distinct cache key is compiled once and serves every artifact that has it, as in the
// runtime's kernel cache: a shape class's code runs with the sizes and grid of each signature.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/shape.h"
#include "reference/interpreter.h"
#include "runtime/artifact.h"

namespace stitch::gputest {

class Emulator {
 public:
  // Compiles form `form` of every kernel of `programs` (one code per distinct key) in `dir`.
  // Throws with the compiler's output when the code does not compile.
  Emulator(std::span<const rt::ProgramArtifact* const> programs, size_t form,
           const std::string& dir);
  ~Emulator();
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;

  size_t codes() const { return entries_.size(); }
  double compileSeconds() const { return compileSeconds_; }

  // The graph outputs of `program` (built from `optimized` under `bindings`) on host inputs.
  // Each launch runs at most `maxGrid` blocks (the kernels stride over the rest).
  std::vector<reference::HostTensor> run(const ir::Graph& optimized, const ir::Bindings& bindings,
                                         const rt::ProgramArtifact& program,
                                         std::span<const reference::HostTensor> inputs,
                                         int64_t maxGrid = 16) const;

  // Runs every phase of kernel `a` (one of the compiled programs') on `pointers`: one per
  // parameter, then the status words' when the kernel has checks. At most `maxGrid` blocks a
  // launch. Throws when the threads of a block disagree on barriers.
  void launch(const rt::KernelArtifact& a, std::vector<void*>& pointers, int64_t maxGrid) const;

 private:
  using Entry = int (*)(long long grid, int block, void** args);

  size_t form_;
  void* library_ = nullptr;
  std::map<std::string, std::vector<Entry>> entries_;  // canonical key -> per phase
  double compileSeconds_ = 0;
};

}  // namespace stitch::gputest
