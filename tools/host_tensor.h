// Host tensors for the command line: seeded random inputs, summaries, DLPack views.
//
// Inputs are reproducible from (seed, input index) alone, on any machine: splitmix64 streams,
// floats uniform in [-1, 1) rounded to the dtype, ints uniform in [-8, 8], bools fair coins.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <stitch/stitch.hpp>
#include <string>
#include <vector>

namespace stitch::cli {

// Bytes aligned to a cache line, as PyTorch's CPU allocator aligns tensors: glibc's large blocks
// are 16-byte aligned, and the host kernels' streaming stores want 32 or 64
// (runtime/cpu/streaming_stores.h).
template <class T>
struct LineAligned {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  LineAligned() = default;
  template <class U>
  LineAligned(const LineAligned<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlign); }
  template <class U>
  bool operator==(const LineAligned<U>&) const {
    return true;
  }
};

struct HostTensor {
  stitch_dtype_t dtype = STITCH_F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t, LineAligned<uint8_t>> bytes;

  // `what` names the tensor in errors ("input 'x'"): a shape past the size limit is
  // STITCH_ERROR_INVALID_ARGUMENT, one larger than the machine's memory STITCH_ERROR_OUT_OF_MEMORY.
  HostTensor(stitch_dtype_t t, std::vector<int64_t> s, const std::string& what = "tensor");
  int64_t numel() const { return numel_; }
  // Element i as a double (ints and bools exactly, as long as |value| < 2^53).
  double at(int64_t i) const;
  // A DLPack view on the host (kDLCPU); valid while this tensor lives and is not resized.
  DLTensor view();

 private:
  int64_t numel_ = 0;
};

// Fills t with the seeded values described above; `stream` is usually the input's index.
void fillRandom(HostTensor& t, uint64_t seed, uint64_t stream);

// "min -0.99 max 0.98 mean 0.0012 [0.12, -0.5, 0.33, ...]" (bools: "true 12 of 24 [...]").
std::string summarize(const HostTensor& t);

// "f32[8, 768]".
std::string typeString(stitch_dtype_t t, const std::vector<int64_t>& shape);

}  // namespace stitch::cli
