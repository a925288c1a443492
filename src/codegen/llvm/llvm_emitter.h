// LLVM IR for kernel programs (the host backend's code generator).
//
// Each phase of a KernelProgram becomes one function
//   void NAME_<phase>(void* const* buffers, int64_t begin, int64_t end)
// computing units [begin, end) of the phase; buffers are the phase's buffers in order (inputs,
// then outputs), each compact row-major data in its dtype, then, for a program with size
// arguments (lower/size_args.h), a pointer to the arguments' int64 values, then, for a program
// with index checks (KernelProgram::checks), a pointer to its four int64 status words: a phase
// whose check fails records it there once, at its end (status[0] = check + 1, [1] the largest
// failing index as unsigned, [2] its bound; a compare-and-swap on [0], so the first failing task
// wins), and the runtime reads them after the kernel. Numbers follow the reference interpreter:
// f16/bf16 are loaded and stored as i16 bits and computed in f32, every f16/bf16 result rounded to
// its dtype (nearest even) as the reference rounds every op; f32 in f32, f64 in f64; ints in their
// width with wrap (div by 0 is 0, INT_MIN / -1 wraps); maximum/minimum propagate NaN
// (llvm.maximum); float->int casts saturate with NaN -> 0 (llvm.fptosi.sat). Transcendentals (exp
// log log1p tanh erf sin cos pow, and sigmoid as 1 / (1 + exp(-x))) are calls to libm (expf, exp
// for f64, ...) marked pure, which the JIT maps to SLEEF's 1.0-ULP vector functions at the host's
// widths, so the loop vectorizer widens them like any other op (the choice and the accuracy in
// runtime/cpu/math_library.h), but f32 exp and erf, which are inline polynomials (inline_math.h);
// sqrt and rsqrt (1 / sqrt) are llvm.sqrt, correctly rounded, which vectorizes natively. Reductions
// accumulate in the compute type (f32 for f16/bf16/f32); float sums are marked reassociable so the
// vectorizer keeps partial sums, and are blocked: each block (4096 elements of a contiguous row,
// 512 of a strided one) is summed in the compute type and added to an f64 total, so the error does
// not grow with the row (the reference sums in f64; lower/tile_forms.h). Means divide the f64
// total. Float products hold an underflowed product of nonzero factors at the smallest subnormal
// (the reference's rule: +-inf times it is +-inf, not NaN), which keeps their loops scalar.
// Element loops are plain counted loops over contiguous indices, so the loop vectorizer sees
// them.
//
// The emitter only emits: how each phase is walked is the cpu target's schedule
// (src/target/cpu/host_schedule.h), read from Phase::host: column tiles (a tile of adjacent units
// walks the rows together, the inner loop over the units contiguous in memory and vectorized,
// each unit with its own accumulators), element tiles and row tiles (indices affine in the inner
// loop, which LLVM's vectorizer can check for overlap), all with the index forms
// lower/tile_forms.h proves; next-row prefetch of the listed loads; row caches up to the given
// bytes; the element loop's interleave count; and the buffers written with streaming stores,
// named in a function attribute that the JIT rewrites into non-temporal stores after optimizing
// (runtime/cpu/streaming_stores.h). An unscheduled program runs plain loops.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lower/kernel_program.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace stitch::codegen {

// Adds one function per phase of `p` to `m`, named `prefix` + "_" + phase index; returns the
// function names in phase order.
std::vector<std::string> emitProgram(const lower::KernelProgram& p, const std::string& prefix,
                                     llvm::Module& m);

// The LLVM IR text of `p` as emitProgram makes it (before optimization), for dumps.
std::string programIR(const lower::KernelProgram& p, const std::string& prefix);

// The IR of `p` twice: `keyText` with neutral function names, what a cache key is made of (equal
// for the programs of one shape class: lower/size_args.h), and `text`, the same module with its
// functions named `prefix` + "_" + phase index, prefix = prefixFor(keyText). A phase with size
// arguments reads them through one more pointer after its buffers (an array of int64, indexed
// by argument).
struct NamedIR {
  std::string keyText;
  std::string prefix;
  std::string text;
};
NamedIR namedProgramIR(const lower::KernelProgram& p,
                       const std::function<std::string(const std::string&)>& prefixFor);

}  // namespace stitch::codegen
