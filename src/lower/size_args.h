// Size arguments: which sizes of a kernel program its code reads at run time (shape classes).
//
// Design note. A graph with symbolic dims (a batch, a sequence length) is planned and lowered
// per input signature: each program holds the sizes of its signature as plain integers (loop
// bounds, row lengths, index multipliers). Compiling each one costs 0.1-0.4 s on the host. So
// the driver lowers a kernel twice, under the signature's bindings and under perturbed ones
// (every symbol moved by a multiple of 64, which keeps its alignment; sizes 0 and 1 kept, as
// they lower to other code: a class of their own), and markSizeArgs() makes
// every size that moved a run-time argument of the kernel. What did not move depends on static
// dims only and stays compiled in.
//
// The shape class is then the code itself. An emitter that reads SizeArgs prints an argument
// where a size is used as a value, and keeps using the size's value for its decisions (vector
// tiles, row caches, streaming stores, blocked sums on the host; row mappings, vector widths,
// index widths on a GPU); a decision that comes out differently prints different code. Kernel
// keys are made of that code (target/keys.h: the LLVM IR, the CUDA/HIP source), so:
//
// - two signatures share a compiled kernel exactly when their programs print the same code:
//   the same structure, the same compiled-in sizes and the same decisions;
// - sharing is sound by construction: the code printed for a signature is correct for it with
//   its own argument values (the emitter's contract), and equal code compiles to equal bytes.
//   A wrong guess here (a size marked that a later signature does not move, two sizes that
//   happen to be equal) costs sharing, never correctness.
//
// The rule, and why (the cost model of a host element loop): a size used once per row or per
// task (row bases, loop bounds, a mean's divisor, a multiplier) becomes an argument: a load in
// the function's entry. A division or remainder evaluated per element (i / S, i % S in a loop
// over elements) stays compiled in: by a constant it is a multiply and a shift the vectorizer
// widens; by a run-time value a 64-bit division of 10-40 cycles, slower than the element's
// memory time (a few ns at the copy bandwidth). A kernel with such a division is compiled per
// value of its divisor, and for the others sizes share. (On a GPU the same holds: a division by a
// run-time value is a sequence of some twenty instructions, by a constant a multiply-high.) (Index
// math no store or accumulation uses, a coordinate the lowering computed and LLVM deletes, costs
// nothing: its sizes are arguments.)
#pragma once

#include "ir/shape.h"
#include "lower/kernel_program.h"

namespace stitch::lower {

// The bindings the driver lowers a second time under to find the sizes a signature moves: each
// symbol s (in name order, index i) bound to s + 64 * (i + 1), but sizes 0 and 1, which stay.
ir::Bindings perturbedBindings(const ir::Bindings& b);

// Marks the sizes of `p` that differ in `moved` (the same kernel lowered under perturbed
// bindings) as size arguments (p.sizeArgs), by the rule above. Two sizes with the same values
// in both programs share an argument. Returns false and leaves p without arguments when the
// programs do not align (a different structure: another row split, other phases).
bool markSizeArgs(KernelProgram& p, const KernelProgram& moved);

// The arguments' values of `p` as a text, "[s0=4096, s1=128]", for dumps; "[]" without.
std::string sizeArgsText(const KernelProgram& p);

}  // namespace stitch::lower
