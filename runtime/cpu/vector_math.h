// SLEEF in the host JIT (the library and its contract with the emitter:
// runtime/cpu/math_library.h).
//
// Symbols: the JIT binds every SLEEF function the emitted code may call to its address in this
// process, taken here in C++ (the library is linked), as absolute symbols of the JIT's main
// dylib. A lookup through the process (dlsym(RTLD_DEFAULT)) would miss them when libstitch.so
// was dlopen'ed RTLD_LOCAL, as Python loads extension modules. Objects loaded from the disk
// cache resolve through the same dylib, so they find them too.
//
// Vectorization: sleefVectorMappings() lists, for each scalar function, its vector versions at
// every width the target machine's features allow (x86-64: 4 x f32 / 2 x f64 always (SSE2),
// 8 / 4 with AVX, 16 / 8 with AVX-512F), in the LLVM vector ABI (_ZGV_LLVM_N<lanes>v...: vector
// arguments as IR vector types, which on x86 is the C ABI of __m128/__m256/__m512). Given to the
// optimizer's TargetLibraryInfo, they let the loop vectorizer replace the scalar call in a
// widened loop (InjectTLIMappings puts the vector-function-abi-variant attribute on the calls).
// Other architectures get no mappings: the scalar SLEEF functions, unvectorized.
#pragma once

#include <llvm/Analysis/TargetLibraryInfo.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace llvm {
class TargetMachine;
}

namespace stitch::rt::cpu {

// Every SLEEF function of STITCH_SLEEF_FUNCTIONS, scalar and vector at every x86 width, by name,
// with its address in this process. With `fma` (the host has FMA) the scalar names are bound to
// SLEEF's FMA build of the same function (Sleef_expf1_u10purecfma: the same algorithm and 1.0-ULP
// bound; Sleef_expf_u10 is built for baseline x86-64), which is 2 to 3 times faster (measured
// here: tanhf 50 -> 22 ns, erff 46 -> 31, expf 16 -> 7.4; glibc's tanhf 14, erff 19, expf 3.3, at
// 1 to 2 ULP; on this 2-core VM under load). The vector functions dispatch to their best build
// themselves.
std::vector<std::pair<std::string, uintptr_t>> sleefSymbols(bool fma);

// The vector versions of the scalar SLEEF functions at the widths `tm`'s features allow.
std::vector<llvm::VecDesc> sleefVectorMappings(const llvm::TargetMachine& tm);

}  // namespace stitch::rt::cpu
