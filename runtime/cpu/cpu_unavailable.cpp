// The "cpu" backend of a build without LLVM (STITCH_ENABLE_LLVM=OFF): registered, so that asking
// for it says why it cannot run rather than that no backend has the name.
#if !defined(STITCH_HAVE_LLVM)
#include "runtime/backend.h"

namespace stitch::rt::registration {

void cpu() {
  registerBackend(
      {"cpu", /*autoRank=*/20, [](std::string* why) -> std::unique_ptr<Backend> {
         *why = "this build of Stitch has no LLVM (configured with STITCH_ENABLE_LLVM=OFF)";
         return nullptr;
       }});
}

}  // namespace stitch::rt::registration
#endif
