// Canonical bytes of a kernel program: the identity kernel cache keys are made of.
//
// Design note. A cache key that misses a field returns another kernel's answer (issue 11: the
// key was a hash of printProgram's text, which did not print the phase accumulators, so a
// reduce_max reused a reduce_sum's kernel). So the key is not a printer written for people but a
// serialization that is complete by construction:
//
// - Every field of every struct of kernel_program.h is written, in declaration order. Each
//   struct is unpacked with a structured binding that names all of its members, so adding a
//   member (or removing one) is a compile error in serialize.cpp until it is serialized: the
//   compile-time guard is the binding itself, which unlike a sizeof check does not depend on the
//   ABI. tests/lower/test_program_key.cpp unpacks the same structs the same way and mutates each
//   member one at a time, asserting the bytes change, so a member bound but not written is caught
//   too.
// - Names are written as well (KernelProgram::name, Phase::name). The host emitter does not read
//   them and the CUDA/HIP emitter only prints Phase::name into a comment, so leaving them out
//   would be sound today; but "nothing is left out" needs no proof that a future emitter keeps
//   it so, and costs no hits: lowering derives names from structure ("kernel", "p<part>_<role>"),
//   so programs that differ only in names do not occur.
// - Encoding: a format tag (kProgramFormat), then the fields. Integers are fixed-width
//   little-endian at their declared width (int: 4 bytes, int64_t: 8), enums by their underlying
//   type, bool one byte, double its IEEE-754 bit pattern (so -0.0 and 0.0, or two NaN payloads,
//   differ: conservative), strings and vectors prefixed by their length as 8 bytes. The bytes do
//   not depend on the host's endianness, compiler or standard library.
//
// This is not printProgram: that stays a printer for dumps and tests, free to omit what is noise
// to a reader.
#pragma once

#include <cstdint>
#include <string>

#include "lower/kernel_program.h"
#include "runtime/support/canonical.h"

namespace stitch::lower {

// Bump when the encoding or the set of fields changes, so old keys can never equal new ones.
inline constexpr uint32_t kProgramFormat = 7;

// The encoding (support/canonical.h), shared with the other parts of cache keys.
using stitch::canonicalBytes;
using stitch::CanonicalWriter;

// The canonical bytes of p (kProgramFormat first). Equal programs give equal bytes; programs
// that differ in any field give different bytes.
std::string serializeProgram(const KernelProgram& p);

}  // namespace stitch::lower
