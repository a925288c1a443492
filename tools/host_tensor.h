// Host tensors for the command line: seeded random inputs, summaries, DLPack views.
//
// Inputs are reproducible from (seed, input index) alone, on any machine: splitmix64 streams,
// floats uniform in [-1, 1) rounded to the dtype, ints uniform in [-8, 8], bools fair coins.
#pragma once

#include <cstdint>
#include <stitch/stitch.hpp>
#include <string>
#include <vector>

namespace stitch::cli {

struct HostTensor {
  stitch_dtype_t dtype = STITCH_F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  HostTensor(stitch_dtype_t t, std::vector<int64_t> s);
  int64_t numel() const;
  // Element i as a double (ints and bools exactly, as long as |value| < 2^53).
  double at(int64_t i) const;
  // A DLPack view on the host (kDLCPU); valid while this tensor lives and is not resized.
  DLTensor view();
};

// Fills t with the seeded values described above; `stream` is usually the input's index.
void fillRandom(HostTensor& t, uint64_t seed, uint64_t stream);

// "min -0.99 max 0.98 mean 0.0012 [0.12, -0.5, 0.33, ...]" (bools: "true 12 of 24 [...]").
std::string summarize(const HostTensor& t);

// "f32[8, 768]".
std::string typeString(stitch_dtype_t t, const std::vector<int64_t>& shape);

}  // namespace stitch::cli
