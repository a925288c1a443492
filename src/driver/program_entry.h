// Whole-program entries: a program's artifact for one input signature, kept in the kernel cache's
// persistent layers so that a restarted process runs it with no planning and no compiling.
//
// Design note. A program's first run of an input signature optimizes nothing (the passes ran when
// the program was made) but plans the graph (the search, or a kept plan re-priced: fusion/
// plan_cache.h), lowers and emits every kernel, and compiles each through the kernel cache. The
// kernel cache makes the compiles of a restarted process disk hits; this module makes the rest of
// that work one lookup too. The entry's payload is the driver's output itself, the
// rt::ProgramArtifact (kernel code with its cache keys, entry points and launches, buffers, size
// arguments): exactly what the backend is handed, so a warm start loads the artifact and the
// backend's load() finds every kernel in its cache, as it would have after a build.
//
// The key is everything build() reads: the graph after the passes (serializeGraph: every node's
// op, operands by id, attributes, type and name, the inputs and outputs; the source locations
// are left out, which nothing downstream reads), the input signature (dtypes and shapes), the
// target attribute by attribute (serializeTarget: the host's or the device's measured figures
// and the cost model's calibration included, since the planner prices them), the driver options
// (fusion mode, plan candidate) and whether shape classes are on; CacheKey adds the library version
// and the build's code identity. Node ids are part of the graph's bytes: the artifact names buffers
// by node id, and the caller binds inputs and outputs by id, so two graphs that print alike but
// number their nodes differently must not share an entry.
//
// A plan kept per shape class makes the plan a signature gets depend on the signatures a program
// saw before it (fusion/plan_cache.h). Each such plan is valid for the signature it was built
// for, and so is the artifact made from it: an entry is a correct build of its key, not
// necessarily the build a fresh search would make.
//
// Entries are verified like every cache entry (runtime/kernel_cache.h: header, full key, and the
// HMAC tag that only a holder of the cache's key can make), and the payload is decoded with bounds
// checks (support/canonical.h). Then, before anything of it is compiled, linked or run, the
// artifact is checked against the graph and signature it claims to be a build of
// (validateProgramArtifact): the tag proves who wrote an entry, not that it is right, and an
// artifact is a list of indices (node ids, parameter indices, scratch slots, step order, entry
// symbols) that the backends trust. A wrong one used to fail the run ("step 0 reads value 1 before
// any step writes it", "Duplicate definition of symbol") or worse, write past a caller's buffer.
// The checks are every one the backends rely on:
//   - it is this graph's: its name, its external values (the graph's inputs then outputs, as the
//     driver lists them), a label per node;
//   - every kernel has a form of this target's language (LLVM IR on the host, CUDA, HIP), with
//     its headers exactly when the target's code has them, every form an entry point per phase,
//     with launch figures in range, distinct symbols, and what the target checks of its own code
//     (Target::checkCode: on the host, the symbols its key names, "stitch_<key hash>_<phase>", so
//     two kernels never define one name in the JIT, and no cooperative entry); every form's key
//     of this build (its version);
//   - every parameter names exactly one of a node (an id in range, of the node's dtype, with the
//     node's element count under the signature, so that no kernel reads or writes past a caller's
//     tensor or an arena slot sized from it) or a scratch slot (an index below the program's
//     parameter count); every phase's parameter indices are in range;
//   - the steps in run order (every phase of every kernel) read nothing before a step writes it,
//     other than the graph's inputs; no step writes a graph input; every output the kernels must
//     write is written.
// A payload that does not decode or an artifact that fails a check is a corrupt entry: logged,
// counted, rebuilt and rewritten by the caller, never a failed run.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "driver/driver.h"
#include "ir/graph.h"
#include "ir/signature.h"
#include "runtime/artifact.h"
#include "runtime/kernel_cache.h"
#include "runtime/target.h"

namespace stitch::driver {

// Bump when the key's parts or the payload's encoding change.
inline constexpr uint32_t kProgramEntryFormat = 5;

// The canonical bytes of a graph: every node (op, operands, attributes, type, name) in id order,
// then the inputs and outputs. Equal graphs (ir::Graph::operator==) give equal bytes.
std::string serializeGraph(const ir::Graph& g);
// The canonical bytes of every field of a target.
std::string serializeTarget(const rt::Target& t);

// The key of `optimized`'s entry for an input signature (the note above).
rt::CacheKey programEntryKey(const ir::Graph& optimized,
                             std::span<const ir::ConcreteInput> signature, const rt::Target& target,
                             const Options& options);

// The same parts under another kind of entry and its format (the tuned entries of
// driver/tuning.h add theirs after them).
rt::CacheKey signatureEntryKey(std::string_view entry, uint32_t format, const ir::Graph& optimized,
                               std::span<const ir::ConcreteInput> signature,
                               const rt::Target& target, const Options& options);

// The payload of an entry, and back. decodeProgramArtifact throws InvalidArgument for bytes that
// are not an encoded artifact; code that includes headers gets the target's (a GPU's device
// templates: build constants, not stored).
std::vector<uint8_t> encodeProgramArtifact(const rt::ProgramArtifact& a);
rt::ProgramArtifact decodeProgramArtifact(std::span<const uint8_t> bytes,
                                          const target::Target& target);

// Checks that `a` is a well-formed build of `optimized` for `signature` by `target`
// (the note above); throws InvalidArgument naming the first defect. What build() makes always
// passes; tests/driver/test_program_entry.cpp checks that, and each defect.
void validateProgramArtifact(const rt::ProgramArtifact& a, const ir::Graph& optimized,
                             std::span<const ir::ConcreteInput> signature,
                             const target::Target& target);

}  // namespace stitch::driver
