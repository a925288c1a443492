#include "runtime/gpu/device.h"

#include <cstring>

#include "runtime/support/error.h"

namespace stitch::rt::gpu::detail {

unsigned checkLaunch(const Device& d, void* fn, int64_t grid, int block, size_t sharedBytes) {
  STITCH_CHECK(fn != nullptr, ErrorCode::InvalidArgument, "{}: launch of a null function",
               d.backend());
  // Grids are 1-D: x alone reaches 2^31-1 blocks on both APIs, y and z only 65535.
  STITCH_CHECK(grid >= 1 && grid <= 0x7fffffff, ErrorCode::InvalidArgument,
               "{}: a grid of {} blocks is outside 1 .. 2^31-1", d.backend(), grid);
  STITCH_CHECK(block >= 1 && block <= 1024, ErrorCode::InvalidArgument,
               "{}: a block of {} threads is outside 1 .. 1024", d.backend(), block);
  STITCH_CHECK(sharedBytes <= d.maxSharedPerBlock(), ErrorCode::InvalidArgument,
               "{}: {} bytes of dynamic shared memory exceed the {} a block may have on {}",
               d.backend(), sharedBytes, d.maxSharedPerBlock(), d.name());
  return static_cast<unsigned>(grid);
}

void checkModule(const Device& d, std::span<const uint8_t> binary) {
  STITCH_CHECK(binary.size() >= 64 && std::memcmp(binary.data(),
                                                  "\x7f"
                                                  "ELF",
                                                  4) == 0,
               ErrorCode::Compile,
               "{}: a module of {} bytes is not an ELF image (cubin / code object) for {}",
               d.backend(), binary.size(), d.arch());
}

}  // namespace stitch::rt::gpu::detail
