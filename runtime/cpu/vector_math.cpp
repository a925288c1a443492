#include "runtime/cpu/vector_math.h"

#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/Target/TargetMachine.h>

#include <cmath>
#include <deque>

#include "runtime/cpu/math_library.h"

// Only the addresses are needed, so every SLEEF function is declared here as void(void), without
// <sleef.h>: the header declares the vector functions only when this file is compiled for
// their ISA (__AVX512F__ ...), which the library must not be (the host picks the width at run
// time). The JIT calls them with their real signatures.
#define STITCH_SLEEF_DECLARE(name, arity) \
  void Sleef_##name##f4_u10();            \
  void Sleef_##name##f8_u10();            \
  void Sleef_##name##f16_u10();           \
  void Sleef_##name##d2_u10();            \
  void Sleef_##name##d4_u10();            \
  void Sleef_##name##d8_u10();
extern "C" {
STITCH_SLEEF_FUNCTIONS(STITCH_SLEEF_DECLARE)
}
#undef STITCH_SLEEF_DECLARE

namespace stitch::rt::cpu {

namespace {

uintptr_t address(void (*f)()) { return reinterpret_cast<uintptr_t>(f); }

}  // namespace

std::vector<std::pair<std::string, uintptr_t>> mathSymbols() {
  // libm's functions by their C names (<cmath> overloads exp etc.: the casts pick the C ones).
#define STITCH_LIBM_1(name)                                                            \
  {#name "f", reinterpret_cast<uintptr_t>(static_cast<float (*)(float)>(&::name##f))}, \
      {#name, reinterpret_cast<uintptr_t>(static_cast<double (*)(double)>(&::name))},
#define STITCH_LIBM_2(name)                                                                   \
  {#name "f", reinterpret_cast<uintptr_t>(static_cast<float (*)(float, float)>(&::name##f))}, \
      {#name, reinterpret_cast<uintptr_t>(static_cast<double (*)(double, double)>(&::name))},
#define STITCH_SLEEF_ENTRY(f) {#f, address(&f)},
#define STITCH_MATH_ENTRIES(name, arity)                                                    \
  STITCH_LIBM_##arity(name) STITCH_SLEEF_ENTRY(Sleef_##name##f4_u10)                        \
      STITCH_SLEEF_ENTRY(Sleef_##name##f8_u10) STITCH_SLEEF_ENTRY(Sleef_##name##f16_u10)    \
          STITCH_SLEEF_ENTRY(Sleef_##name##d2_u10) STITCH_SLEEF_ENTRY(Sleef_##name##d4_u10) \
              STITCH_SLEEF_ENTRY(Sleef_##name##d8_u10)
  return {STITCH_SLEEF_FUNCTIONS(STITCH_MATH_ENTRIES)};
#undef STITCH_MATH_ENTRIES
#undef STITCH_SLEEF_ENTRY
#undef STITCH_LIBM_2
#undef STITCH_LIBM_1
}

std::vector<llvm::VecDesc> sleefVectorMappings(const llvm::TargetMachine& tm) {
  // VecDesc holds StringRefs: the names live as long as the process.
  struct Mapping {
    std::string scalar, vector, prefix;
    int lanes;
    bool f32;
  };
  static const std::deque<Mapping> all = [] {
    std::deque<Mapping> out;
    auto add = [&](const char* base, int arity) {
      for (bool f32 : {true, false})
        for (int lanes : f32 ? std::vector<int>{4, 8, 16} : std::vector<int>{2, 4, 8})
          out.push_back({mathScalarName(base, f32), sleefVectorName(base, f32, lanes),
                         "_ZGV_LLVM_N" + std::to_string(lanes) + std::string(arity, 'v'), lanes,
                         f32});
    };
#define STITCH_SLEEF_ADD(name, arity) add(#name, arity);
    STITCH_SLEEF_FUNCTIONS(STITCH_SLEEF_ADD)
#undef STITCH_SLEEF_ADD
    return out;
  }();
  std::vector<llvm::VecDesc> out;
  if (tm.getTargetTriple().getArch() != llvm::Triple::x86_64) return out;
  const llvm::MCSubtargetInfo* sti = tm.getMCSubtargetInfo();
  // Vector register bits the target has: SSE2 is part of x86-64.
  int bits = sti->checkFeatures("+avx512f") ? 512 : sti->checkFeatures("+avx") ? 256 : 128;
  for (const Mapping& m : all)
    if (m.lanes * (m.f32 ? 32 : 64) <= bits)
      out.emplace_back(m.scalar, m.vector, llvm::ElementCount::getFixed(m.lanes),
                       /*Masked=*/false, m.prefix);
  return out;
}

}  // namespace stitch::rt::cpu
