// What a host phase's walks look like, for whoever tiles them: the proof that a tile's index
// arithmetic is affine, the per-element block a column tile can run beside its stage, and how
// long float sums are accumulated.
//
// Design note. Two readers need the same facts: the cpu target's schedule (src/target/cpu/
// host_schedule.cpp), which decides whether and how a phase is tiled (Phase::host), and the LLVM
// emitter, which carries out that decision and needs the proven forms to emit the tile's index
// arithmetic. Neither decides anything here: these are properties of the program.
//
// Tiles. A tile of T consecutive indices t + j (j < T, t aligned to T) of the varying index
// (UnitIndex for a column tile, LoopIndex for element and row tiles) computes index arithmetic
// once at its first index t and gives each use the value at t + j as B + slope * j. tileForms()
// proves that form for every index instruction over any aligned tile: it tracks, for a value
// v(t + j) = B + s * j, the slope s and a known divisor g of B. The varying index is (s 1, g T);
// a division or remainder by c of a value with s > 0 keeps the form only where the tile cannot
// cross a multiple of c: e.g. c divides g (B is a multiple of c) and s * (T - 1) < c, when
// (B + s j) / c = B / c and (B + s j) % c = s j. Anything else (a slope that crosses, an index
// computed from a per-unit load or op) fails the proof. (The general rule, with h = gcd(g, c):
// s * (T - 1) < h; see the IDivC case.)
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lower/kernel_program.h"

namespace stitch::lower {

// Long float sums are accumulated in blocks: a block's elements in the compute type, each
// block's sum then added to a running f64 total. A contiguous row is vectorized (64 partial sums
// in f32 lanes on AVX-512), so its blocks can be long: 4096 elements are 64 sequential adds a
// lane, and a row of up to 4096 runs exactly the unblocked loop; a strided walk (a column) adds
// one element at a time, so its blocks are short. (The emitter's numerics; a row tile must fit
// in a block.)
inline constexpr int64_t kContiguousBlock = 4096;
inline constexpr int64_t kStridedBlock = 512;

// Float sums and means accumulate their block sums in f64 ("wide"): an f32 running total of a
// long row loses the small addends once it is large (a row of 16M values near 1000 summed in
// f32 lanes is off by 2e-3 relative), however the additions are ordered.
bool isWide(const Accumulator& a);

// Whether every load of the stage walks memory contiguously (address k + c at loop index k).
bool contiguousWalk(const Phase& ph, const Stage& st);

struct IndexForm {
  int64_t slope = 0;     // index instructions: v(t + j) = B + slope * j
  int64_t divisor = 1;   // a known divisor of B (0: B is 0)
  bool variant = false;  // the value differs between the tile's units
  // Index math not of that form (a staircase such as (B + j) / 16 in a tile of 256): computed at
  // each j from its operands' values; only a division of it that re-associates to a proven form
  // ((y / a) / c = y / (a c) for y >= 0) may use it. No load or store may read an opaque index.
  bool opaque = false;
};

bool isIndexKind(InstKind k);

// The forms of every instruction the phase's blocks use over aligned tiles of T indices of
// `varying`, or nullopt where one has none (or a load or store reads an opaque index: a gather
// in every tile).
std::optional<std::vector<IndexForm>> tileForms(const Phase& ph, int64_t T, InstKind varying);

// The index the tiles of `tiling` vary (UnitIndex for column tiles, LoopIndex otherwise).
InstKind tiledIndex(HostTiling tiling);

// Whether a reduce phase's per-element block reads nothing of its reductions: values of its own,
// of the pre block, and index arithmetic of the post block (a row's base offset the lowering
// placed there). Then a column tile runs it in the same walk as the stage, each element stored
// where it is read (bias+GELU backward's dh beside dbias), not in a second walk. Returns the
// post block's index instructions the elems block needs, in order (emitted before it), or
// nullopt.
std::optional<Block> elemsDependencies(const Phase& ph);

}  // namespace stitch::lower
