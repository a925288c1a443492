// The identity of this build's code generators: a hash of the sources under src/, runtime/ and
// kernels_templates/, computed at build time (cmake/code_identity.cmake). Kernel cache keys carry
// it beside the release version, so entries written by a build whose lowering, emitters or
// device templates differed are never reused.
#pragma once

namespace stitch {

// 32 lowercase hex digits; static storage.
const char* codeIdentity();

}  // namespace stitch
