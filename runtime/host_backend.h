// The host's memory, shared by the backends that run on the host (cpu, reference).
//
// Tensors are in host-accessible memory (kDLCPU, pinned or managed memory), allocations are
// 256-byte aligned and checked against the machine's memory first, copies are memmove, and there
// is nothing to synchronize. Runs are synchronous, so an output may be exactly an input's memory:
// the C API stages it.
#pragma once

#include "runtime/backend.h"

namespace stitch::rt {

class HostMemoryBackend : public Backend {
 public:
  DLDevice device() const override { return DLDevice{kDLCPU, 0}; }
  void checkTensorDevice(DLDevice d, const std::string& what) const override;
  bool runsInPlace() const override { return true; }
  void* allocate(size_t bytes) override;
  void release(void* p) override;
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream) override;
  void synchronize(void*) override {}
};

}  // namespace stitch::rt
