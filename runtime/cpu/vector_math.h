// The math library in the host JIT (the choice and the contract with the emitter:
// runtime/cpu/math_library.h).
//
// Symbols: the JIT binds the libm functions the emitted code calls and SLEEF's vector functions
// to their addresses in this process, taken here in C++ (both libraries are linked), as absolute
// symbols of the JIT's main dylib. A lookup through the process (dlsym(RTLD_DEFAULT)) would miss
// SLEEF when libstitch.so was dlopen'ed RTLD_LOCAL, as Python loads extension modules. Objects
// loaded from the disk cache resolve through the same dylib, so they find them too.
//
// Vectorization: sleefVectorMappings() lists, for each libm function, SLEEF's vector versions at
// every width the target machine's features allow (x86-64: 4 x f32 / 2 x f64 always (SSE2),
// 8 / 4 with AVX, 16 / 8 with AVX-512F), in the LLVM vector ABI (_ZGV_LLVM_N<lanes>v...: vector
// arguments as IR vector types, which on x86 is the C ABI of __m128/__m256/__m512). Given to the
// optimizer's TargetLibraryInfo, they let the loop vectorizer replace the scalar call in a
// widened loop (InjectTLIMappings puts the vector-function-abi-variant attribute on the calls).
// Other architectures get no mappings: libm, unvectorized.
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

// The libm function (f32 and f64) of each of STITCH_SLEEF_FUNCTIONS and its SLEEF vector
// versions at every x86 width, by name, with their addresses in this process.
std::vector<std::pair<std::string, uintptr_t>> mathSymbols();

// The SLEEF vector versions of the libm functions at the widths `tm`'s features allow.
std::vector<llvm::VecDesc> sleefVectorMappings(const llvm::TargetMachine& tm);

}  // namespace stitch::rt::cpu
