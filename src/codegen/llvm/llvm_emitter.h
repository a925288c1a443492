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
// not grow with the row (the reference sums in f64; an f32 running total of a long row drops the
// small addends). Means divide the f64 total. Float products hold an underflowed product of nonzero
// factors at the smallest subnormal (the reference's rule: +-inf times it is
// +-inf, not NaN), which keeps their loops scalar. Element loops are plain counted loops over
// contiguous indices, so the loop vectorizer sees them. Column and middle-axis reductions (units
// adjacent in memory, each walking its row with a stride) run in column tiles: a tile of
// adjacent units walks the rows together, the inner loop over the units contiguous in memory and
// vectorized, each unit with its own accumulators (columnTile; the proof that the tile's index
// arithmetic is affine is in the .cpp). Loop phases whose operands broadcast along inner axes
// (a bias read at i % C) run in element tiles the same way (elementTile), so that their indices
// are affine in the inner loop and LLVM's vectorizer can check them for overlap; so do the walks
// over a row whose index divides the position in the row (rowTile: GroupNorm's channel).
// A phase that moves more than HostEmitOptions::streamingStoreBytes and computes few
// transcendentals an element names the buffers it only writes in a function attribute, and the
// JIT writes them with non-temporal stores after optimizing (runtime/cpu/streaming_stores.h).
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

struct HostEmitOptions {
  // A phase whose buffers hold at least this many bytes writes the buffers it only writes with
  // streaming stores (named in a function attribute for runtime/cpu/streaming_stores.h, which
  // rewrites the stores after the optimizer); 0: never.
  int64_t streamingStoreBytes = 0;
};

// Adds one function per phase of `p` to `m`, named `prefix` + "_" + phase index; returns the
// function names in phase order.
std::vector<std::string> emitProgram(const lower::KernelProgram& p, const std::string& prefix,
                                     llvm::Module& m, const HostEmitOptions& options = {});

// The units per column tile emitProgram runs phase `ph` in (0: one unit at a time).
int64_t columnTile(const lower::Phase& ph);
// The elements per element tile emitProgram runs loop phase `ph` in (0: one flat loop).
int64_t elementTile(const lower::Phase& ph);
// The row positions per row tile emitProgram walks reduce phase `ph`'s rows in (0: plain loops).
int64_t rowTile(const lower::Phase& ph);

// The LLVM IR text of `p` as emitProgram makes it (before optimization), for dumps.
std::string programIR(const lower::KernelProgram& p, const std::string& prefix,
                      const HostEmitOptions& options = {});

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
                       const std::function<std::string(const std::string&)>& prefixFor,
                       const HostEmitOptions& options = {});

}  // namespace stitch::codegen
