// Canonical serialization of kernel programs (design note in serialize.h).
//
// Each write() unpacks its struct with a structured binding naming every member: a member added
// to kernel_program.h makes the binding ill-formed ("N names provided, M expected") until it is
// written here, and then tests/lower/test_program_key.cpp must mutate it too (its bindings fail
// the same way).
#include "lower/serialize.h"

#include <cstdint>

namespace stitch::lower {

namespace {

// Declared up front: the vector template below calls them for its elements.
void write(CanonicalWriter& w, const Inst& x);
void write(CanonicalWriter& w, const Param& x);
void write(CanonicalWriter& w, const Accumulator& x);
void write(CanonicalWriter& w, const Block& x);
void write(CanonicalWriter& w, const Stage& x);
void write(CanonicalWriter& w, const Levels& x);
void write(CanonicalWriter& w, const Phase& x);
void write(CanonicalWriter& w, const PhaseSizeArgs& x);

void write(CanonicalWriter& w, const Inst& x) {
  const auto& [kind, dtype, op, args, buffer, acc, check, ivalue, fvalue] = x;
  w.enumeration(kind);
  w.enumeration(dtype);
  w.enumeration(op);
  for (int a : args) w.integer(a);  // a fixed-size array: no length prefix needed
  w.integer(buffer);
  w.integer(acc);
  w.integer(check);
  w.integer(ivalue);
  w.real(fvalue);
}

void write(CanonicalWriter& w, const Param& x) {
  const auto& [value, scratch, dtype, elements, scope] = x;
  w.integer(value);
  w.integer(scratch);
  w.enumeration(dtype);
  w.integer(elements);
  w.enumeration(scope);
}

void write(CanonicalWriter& w, const Accumulator& x) {
  const auto& [node, op, dtype, count, stage, scope] = x;
  w.integer(node);
  w.enumeration(op);
  w.enumeration(dtype);
  w.integer(count);
  w.integer(stage);
  w.enumeration(scope);
}

void write(CanonicalWriter& w, const std::vector<int>& xs) {
  w.length(xs.size());
  for (int x : xs) w.integer(x);
}

void write(CanonicalWriter& w, const std::vector<int64_t>& xs) {
  w.length(xs.size());
  for (int64_t x : xs) w.integer(x);
}

void write(CanonicalWriter& w, const std::vector<bool>& xs) {
  w.length(xs.size());
  for (bool x : xs) w.boolean(x);
}

template <class T>
void write(CanonicalWriter& w, const std::vector<T>& xs) {
  w.length(xs.size());
  for (const T& x : xs) write(w, x);
}

void write(CanonicalWriter& w, const Block& x) {
  const auto& [insts] = x;
  write(w, insts);
}

void write(CanonicalWriter& w, const Stage& x) {
  const auto& [accs, body] = x;
  write(w, accs);
  write(w, body);
}

void write(CanonicalWriter& w, const Levels& x) {
  const auto& [units, threadsPerBlock, warpSize, elementsPerThread, blocks, vectorWidth, lanes,
               unitsPerBlock, items, unrolled, rowMajor, index64, sharedBytes, processors,
               maxThreadsPerBlock, aligned] = x;
  w.integer(units);
  w.integer(threadsPerBlock);
  w.integer(warpSize);
  w.integer(elementsPerThread);
  w.integer(blocks);
  w.integer(vectorWidth);
  w.integer(lanes);
  w.integer(unitsPerBlock);
  w.integer(items);
  w.boolean(unrolled);
  w.boolean(rowMajor);
  w.boolean(index64);
  w.integer(sharedBytes);
  w.integer(processors);
  w.integer(maxThreadsPerBlock);
  w.boolean(aligned);
}

void write(CanonicalWriter& w, const HostSchedule& x) {
  const auto& [tiling, tile, interleave, rowCacheBytes, prefetched, streamed] = x;
  w.enumeration(tiling);
  w.integer(tile);
  w.integer(interleave);
  w.integer(rowCacheBytes);
  write(w, prefetched);
  write(w, streamed);
}

void write(CanonicalWriter& w, const Phase& x) {
  const auto& [name, reduce, units, grain, chunk, total, rowLength, workers, workerBlocks, split,
               levels, domain, reduced, buffers, numInputs, insts, accs, pre, stages, post, elems,
               host] = x;
  w.string(name);
  w.boolean(reduce);
  w.integer(units);
  w.integer(grain);
  w.integer(chunk);
  w.integer(total);
  w.integer(rowLength);
  w.integer(workers);
  w.boolean(workerBlocks);
  w.enumeration(split);
  write(w, levels);
  write(w, domain);
  write(w, reduced);
  write(w, buffers);
  w.integer(numInputs);
  write(w, insts);
  write(w, accs);
  write(w, pre);
  write(w, stages);
  write(w, post);
  write(w, elems);
  write(w, host);
}

void write(CanonicalWriter& w, const PhaseSizeArgs& x) {
  const auto& [units, chunk, total, rowLength, insts, accCounts] = x;
  w.integer(units);
  w.integer(chunk);
  w.integer(total);
  w.integer(rowLength);
  write(w, insts);
  write(w, accCounts);
}

void write(CanonicalWriter& w, const KernelProgram& x) {
  const auto& [name, params, phases, scratchSlots, sizeArgs, checks] = x;
  w.string(name);
  write(w, params);
  write(w, phases);
  w.integer(scratchSlots);
  const auto& [values, phaseArgs] = sizeArgs;
  write(w, values);
  write(w, phaseArgs);
  w.length(checks.size());
  for (const std::string& c : checks) w.string(c);
}

}  // namespace

std::string serializeProgram(const KernelProgram& p) {
  CanonicalWriter w;
  w.integer(kProgramFormat);
  write(w, p);
  return w.take();
}

}  // namespace stitch::lower
