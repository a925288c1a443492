// The cpu target's schedule of a host kernel program (design note in host_schedule.h).
#include "target/cpu/host_schedule.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <optional>
#include <vector>

#include "lower/tile_forms.h"
#include "runtime/support/error.h"

namespace stitch::target::cpu {

using ir::OpCode;
using namespace lower;  // the program's types and its walks' properties (tile_forms.h)

namespace {

// Row caches (lower/row_cache.h): a value computed in one walk over a row and needed again in a
// later one (softmax's exp) is stored to a stack array of the row's length and loaded there, up
// to this many bytes of arrays a phase: cross-entropy's rows of 32000 f32 fit, in L2 as the row
// itself does.
constexpr int64_t kRowCacheBytes = 128 * 1024;

// Next-row prefetch (the emitter's prefetchNext): rows of at least this many bytes a buffer.
constexpr int64_t kPrefetchRowBytes = 16 * 1024;

// The loads of a row phase's first walk that next-row prefetch covers (the emitter's
// prefetchNext): contiguous along the row (step 1), moving with the unit, in rows of at least
// kPrefetchRowBytes; one per distinct buffer and address.
std::vector<int> prefetchedLoads(const Phase& ph) {
  std::vector<int> ids;
  std::vector<std::pair<int, int>> seen;  // (buffer, index inst)
  for (int id : ph.stages[0].body.insts) {
    const Inst& in = ph.insts[static_cast<size_t>(id)];
    if (in.kind != InstKind::Load || ph.rowLength * ir::dtypeBytes(in.dtype) < kPrefetchRowBytes)
      continue;
    try {
      const int64_t at = evalIndex(ph, in.args[0], 0, 0);
      if (evalIndex(ph, in.args[0], 0, 1) - at != 1 ||
          (ph.units > 1 && evalIndex(ph, in.args[0], 1, 0) == at))
        continue;
    } catch (const std::exception&) {
      continue;  // a gathered index
    }
    std::pair<int, int> key{in.buffer, in.args[0]};
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    ids.push_back(id);
  }
  return ids;
}

// Tiles as wide as a [*, 2048] f32 row (8 KB a row: the hardware prefetchers follow such runs
// as they follow a row walk; 256-unit tiles ran a [8192, 2048] column sum 2.5x slower than the
// row sum of the same bytes, 2048-unit tiles as fast), with at most kTileAccBytes of
// accumulator arrays (L2).
constexpr int64_t kColumnTile = 2048;
constexpr int64_t kTileAccBytes = 128 * 1024;

// Tile sizes to try, largest first, in [least, most]: powers of two, and the largest divisor of
// each division's constant that fits (a [*, 300] column tiles by 300, not by a power of two:
// u / 300 and u % 300 cross no multiple of 300 inside an aligned tile of 300).
std::vector<int64_t> tileSizes(const Phase& ph, int64_t least, int64_t most) {
  std::vector<int64_t> sizes;
  for (int64_t t = most; t >= least; t /= 2) sizes.push_back(t);
  for (const Inst& in : ph.insts) {
    if ((in.kind != InstKind::IDivC && in.kind != InstKind::IRemC) || in.ivalue < least) continue;
    for (int64_t d = 1; in.ivalue / d >= least; ++d)
      if (in.ivalue % d == 0 && in.ivalue / d <= most) {
        sizes.push_back(in.ivalue / d);
        break;
      }
  }
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}
// Column tiles. A column or middle-axis reduction gives each unit (a column, or a sub-column
// after lower/split_rows.h) a walk down memory with a large stride: one unit at a time, each
// load touches a cache line for one element, and the host runs such a sum ~20x slower than a
// row sum of the same bytes. In a tile, adjacent units walk the rows together, the inner loop
// over the units reading contiguous memory. Only a phase of one stage whose per-element block
// can run beside it (elemsDependencies), with a strided load to gain from, and whose tile's index
// arithmetic is proven affine (tileForms), largest tile first.
std::optional<std::vector<IndexForm>> columnTileForms(const Phase& ph, int64_t& tile) {
  if (!ph.reduce || ph.workers != 0 || ph.stages.size() != 1 || !elemsDependencies(ph) ||
      ph.units < 2)
    return std::nullopt;
  for (int id : ph.pre.insts)
    if (ph.insts[static_cast<size_t>(id)].kind == InstKind::Store) return std::nullopt;
  int64_t perUnit = 0;  // accumulator bytes per unit (at most 8 a value), wide totals included
  for (const Accumulator& a : ph.accs) perUnit += isWide(a) ? 16 : 8;
  int64_t most = kColumnTile;
  while (most > 16 && most * std::max<int64_t>(perUnit, 1) > kTileAccBytes) most /= 2;
  for (int64_t t : tileSizes(ph, 16, most)) {
    tile = t;
    std::optional<std::vector<IndexForm>> f = tileForms(ph, tile, InstKind::UnitIndex);
    if (!f) continue;
    for (int id : ph.stages[0].body.insts) {
      const Inst& in = ph.insts[static_cast<size_t>(id)];
      if (in.kind != InstKind::Load || (*f)[static_cast<size_t>(in.args[0])].slope != 1) continue;
      try {
        int64_t step = evalIndex(ph, in.args[0], 0, 1) - evalIndex(ph, in.args[0], 0, 0);
        if (step != 0 && step != 1) return f;
      } catch (const std::exception&) {
      }
    }
    return std::nullopt;  // nothing strided: the plain loop reads contiguously already
  }
  return std::nullopt;
}

// Element tiles. A loop phase over a domain whose operands broadcast along its inner axes reads
// them at index arithmetic such as i % 3072 (bias + GELU + residual's bias); LLVM's vectorizer
// cannot bound such an index for its run-time overlap checks, so the loop stays scalar with a
// libm call per element. The same proof as for column tiles, with the element index varying:
// tiles of T elements aligned to T (T dividing the broadcast extents), in which every index is
// B + slope * j, contiguous where the slope is 1. Only phases with such divisions are tiled;
// tiles of at most kElementTile elements and at least 16 (tileSizes): a rotary embedding walks
// its halves in runs of 32 (a concat's boxes, a head dim of 64), and so does a [*, 37] bias. The
// flat loop there vectorizes into gathers, which bf16 does not have (AVX-512 gathers 32-bit
// lanes): Llama's bf16 rotary piece ran 2.8x eager's time, and 8x its tiles' (0.30 against
// 0.037 ms, [8, 4, 128, 64]); f32 gathers cost 2x there. Below 16 a tile is a vector or less
// and the per-tile index math outweighs it ([*, 12]: no faster than the gathers).
constexpr int64_t kElementTile = 4096;

std::optional<std::vector<IndexForm>> elementTileForms(const Phase& ph, int64_t& tile) {
  if (ph.reduce || ph.total < 2) return std::nullopt;
  bool divides = false;
  for (int id : ph.elems.insts) {
    const Inst& in = ph.insts[static_cast<size_t>(id)];
    divides = divides || in.kind == InstKind::IDivC || in.kind == InstKind::IRemC;
  }
  if (!divides) return std::nullopt;
  for (int64_t t : tileSizes(ph, 16, kElementTile)) {
    tile = t;
    if (std::optional<std::vector<IndexForm>> f = tileForms(ph, tile, InstKind::LoopIndex))
      return f;
  }
  return std::nullopt;
}

// Row tiles: the same for a reduce phase's walks over its rows (the stages and the per-element
// block), whose index math divides the position in the row (GroupNorm's channel, k / 256 in a
// row of 2048, reads gamma and beta per element): tiles of T positions, T dividing the walk's
// blocks (walkRow) so that no tile straddles two.
std::optional<std::vector<IndexForm>> rowTileForms(const Phase& ph, int64_t& tile) {
  if (!ph.reduce || ph.rowLength < 2) return std::nullopt;
  bool divides = false;
  std::vector<const Block*> walks = {&ph.elems};
  for (const Stage& st : ph.stages) walks.push_back(&st.body);
  for (const Block* b : walks)
    for (int id : b->insts) {
      const Inst& in = ph.insts[static_cast<size_t>(id)];
      divides = divides || in.kind == InstKind::IDivC || in.kind == InstKind::IRemC;
    }
  if (!divides) return std::nullopt;
  for (int64_t t : tileSizes(ph, 64, kContiguousBlock)) {
    tile = t;
    bool fits = true;
    for (const Stage& st : ph.stages) {
      bool wide = false;
      for (int a : st.accs) wide = wide || isWide(ph.accs[static_cast<size_t>(a)]);
      const int64_t block = contiguousWalk(ph, st) ? kContiguousBlock : kStridedBlock;
      fits = fits && (!wide || ph.rowLength <= block || block % t == 0);
    }
    if (!fits) continue;
    if (std::optional<std::vector<IndexForm>> f = tileForms(ph, tile, InstKind::LoopIndex))
      return f;
  }
  return std::nullopt;
}

// Interleaved element loops. LLVM's loop vectorizer interleaves (runs several vector
// iterations side by side) only loops it prices as small; an element loop whose body evaluates a
// transcendental is a long chain of dependent vector instructions (an inline exp is ~15, a
// sigmoid's division ~12 cycles more), so one iteration at a time leaves the core waiting on
// latency. Such loops are interleaved kInterleave times (llvm.loop.interleave.count):
// one thread on the dev VM (AMD EPYC, AVX-512), `stitch run` on
// bench/torch/pieces/bf16_transcendentals.stitch, SwiGLU bf16 [1024, 640] 0.28 -> 0.22 ms,
// BERT's exact bf16 GELU [1024, 1024] 0.29 -> 0.22, the f32 GELU 0.18 -> 0.16, a bf16 sigmoid
// 0.195 -> 0.135 (2 interleaved: 0.16; no spills at 4 in their assembly). Bodies with more
// such ops than kInterleaveMaxOps keep LLVM's choice: four copies of them would hold more live
// vectors than AVX-512's 32 registers (a bound chosen, not measured). A division alone does not
// count: softmax's last kernel (e / sum over [16384, 4096], bf16 out) and cross-entropy's
// gradient, memory-bound, ran ~10% slower interleaved.
constexpr int kInterleave = 4;
constexpr int kInterleaveMaxOps = 4;

bool latencyBound(const Inst& in) {
  if (in.kind != InstKind::Op) return false;
  switch (in.op) {
    case OpCode::Exp:
    case OpCode::Log:
    case OpCode::Log1p:
    case OpCode::Tanh:
    case OpCode::Erf:
    case OpCode::Sin:
    case OpCode::Cos:
    case OpCode::Sigmoid:
    case OpCode::Pow: return ir::isFloat(in.dtype);
    default: return false;
  }
}

// The interleave count of a loop phase's element loop over `b` (0: LLVM's own choice),
// counting the instructions its stores and checks need. `perElementIndexMath`: the loop divides
// its index per element (a flat loop reading per-row values at i / n, no element tiles), which
// the copies would repeat: cross-entropy's gradient over [4096, 32000] rows ran 9% slower
// interleaved. Reduce phases keep LLVM's choice: interleaving their per-element walk made
// GroupNorm + SiLU 15-22% faster but cross-entropy's training kernel 12% (f32) and 22% (bf16)
// slower over [4096, 32000] rows, bench/gpu/graphs/cross_entropy_train.stitch.
int interleaveFor(const Phase& ph, const Block& b, bool perElementIndexMath) {
  std::vector<char> inBlock(ph.insts.size(), 0), seen(ph.insts.size(), 0);
  std::vector<int> stack;
  for (int id : b.insts) {
    inBlock[static_cast<size_t>(id)] = 1;
    const InstKind k = ph.insts[static_cast<size_t>(id)].kind;
    if (k == InstKind::Store || k == InstKind::CheckIndex) stack.push_back(id);
  }
  int n = 0;
  bool divides = false;
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    if (seen[static_cast<size_t>(id)]) continue;
    seen[static_cast<size_t>(id)] = 1;
    const Inst& in = ph.insts[static_cast<size_t>(id)];
    n += latencyBound(in) ? 1 : 0;
    divides = divides || in.kind == InstKind::IDivC || in.kind == InstKind::IRemC;
    for (int a : in.args) {
      if (a >= 0 && inBlock[static_cast<size_t>(a)]) stack.push_back(a);
    }
  }
  if (divides && perElementIndexMath) return 0;
  return n >= 1 && n <= kInterleaveMaxOps ? kInterleave : 0;
}

// Streaming stores (runtime/cpu/streaming_stores.h) pay where a phase waits on memory; where its
// arithmetic bounds it they cost time instead (measured on the dev VM's Zen 4, `stitch run`, 2
// threads: layer norm 7.8 -> 5.8 ms, Adam 6.9 -> 5.0, bias + GELU + residual (one erf in 12
// bytes an element) 8.8 -> 7.4, but softmax (one exp in 8 bytes) 8.2 -> 9.6). A phase counts as
// waiting on memory when it computes at most one transcendental per this many bytes it moves an
// element, or when it walks rows long enough for next-row prefetch (the emitter's prefetchNext):
// with both, cross-entropy's 128 KB rows went 8.2 -> 6.7 ms and a softmax over rows of 4096
// 30 -> 19 ms (the same runs, alternated), where streaming alone gained less and prefetch alone
// little.
constexpr int64_t kStreamingBytesPerTranscendental = 12;

// The buffers phase `ph` writes with streaming stores (positions in its buffers): those it writes
// and does not read, when the buffers its walks touch hold at least `threshold` bytes and it
// waits on memory (above). Past that size the phase's own traffic has pushed its first outputs
// out of the last-level cache before any consumer runs, so keeping them cached buys nothing.
std::vector<int> streamedBuffers(const KernelProgram& p, const Phase& ph, int64_t threshold) {
  if (threshold <= 0) return {};
  int64_t transcendentals = 0;
  std::vector<int> touched;  // params the walks load or store
  auto scan = [&](const Block& b) {
    for (int id : b.insts) {
      const Inst& in = ph.insts[static_cast<size_t>(id)];
      if (in.kind == InstKind::Op && isTranscendental(in.op)) ++transcendentals;
      if (in.kind != InstKind::Load && in.kind != InstKind::Store) continue;
      const int param = ph.buffers[static_cast<size_t>(in.buffer)];
      if (std::find(touched.begin(), touched.end(), param) == touched.end())
        touched.push_back(param);
    }
  };
  for (const Stage& st : ph.stages) scan(st.body);
  scan(ph.elems);
  // Bytes an element over the buffers of about the walk's size: a bias or a row's statistics
  // stay in cache.
  const int64_t domain = ph.reduce ? ph.units * ph.rowLength : ph.total;
  int64_t bytes = 0, perElement = 0;
  for (int param : touched) {
    const Param& q = p.params.at(static_cast<size_t>(param));
    bytes += q.elements * ir::dtypeBytes(q.dtype);  // lowering's sizes are checked products
    if (q.elements * 2 >= domain) perElement += ir::dtypeBytes(q.dtype);
  }
  const bool prefetching = ph.reduce && !ph.stages.empty() && !prefetchedLoads(ph).empty();
  if (bytes < threshold ||
      (!prefetching && transcendentals * kStreamingBytesPerTranscendental > perElement))
    return {};
  std::vector<int> out;
  const auto inputsEnd = ph.buffers.begin() + ph.numInputs;
  for (size_t i = static_cast<size_t>(ph.numInputs); i < ph.buffers.size(); ++i)
    if (std::find(ph.buffers.begin(), inputsEnd, ph.buffers[i]) == inputsEnd &&
        std::find(touched.begin(), touched.end(), ph.buffers[i]) != touched.end())
      out.push_back(static_cast<int>(i));
  return out;
}

}  // namespace

void scheduleHost(KernelProgram& p, int64_t taskElements, int64_t streamingStoreBytes) {
  STITCH_INTERNAL(taskElements > 0, "the host profile has no task size");
  for (Phase& ph : p.phases) {
    const int64_t perUnit = ph.reduce ? ph.rowLength : ph.chunk;
    ph.grain = std::max<int64_t>(1, taskElements / std::max<int64_t>(perUnit, 1));
    HostSchedule s;
    int64_t tile = 0;
    if (ph.reduce ? columnTileForms(ph, tile) : elementTileForms(ph, tile)) {
      s.tiling = ph.reduce ? HostTiling::Column : HostTiling::Element;
      s.tile = tile;
    } else if (ph.reduce && rowTileForms(ph, tile)) {
      s.tiling = HostTiling::Row;
      s.tile = tile;
    }
    if (ph.reduce && s.tiling == HostTiling::None && !ph.stages.empty())
      s.prefetched = prefetchedLoads(ph);
    if (ph.reduce && s.tiling != HostTiling::Column && s.tiling != HostTiling::Element)
      s.rowCacheBytes = kRowCacheBytes;
    if (!ph.reduce) s.interleave = interleaveFor(ph, ph.elems, s.tiling == HostTiling::None);
    s.streamed = streamedBuffers(p, ph, streamingStoreBytes);
    ph.host = std::move(s);
  }
}

}  // namespace stitch::target::cpu
