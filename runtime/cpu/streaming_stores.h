// Streaming (non-temporal) stores for outputs too large to stay in cache.
//
// A store to a line not in cache first reads the line (read for ownership): writing an output of
// N bytes moves 2N bytes over the memory bus, so a kernel that reads N and writes N moves 3N,
// not 2N. x86's non-temporal stores (MOVNTPS and kin) write whole lines without reading them, at
// the price of evicting the line from every cache, which is only right where the output would
// have left the cache before anyone read it: the emitter (codegen/llvm/llvm_emitter.h) names the
// buffers of a phase that qualify (written, not read, the phase touching more bytes than
// HostCompileOptions::streamingStoreBytes and few transcendentals an element: see
// streamedBuffers there) in the function attribute kStreamingBuffersAttr.
//
// The loop vectorizer cannot widen a store marked !nontemporal (the scalar store's alignment is
// an element's, and x86 has no unaligned non-temporal vector store), so marking happens here,
// after the optimization pipeline: each vector store of 16, 32 or 64 bytes through a named
// buffer's pointer becomes a branch on its address, the aligned case a !nontemporal store and
// the other the plain store. Rows and chunks start aligned in the common shapes, so the branch
// always goes one way and costs a compare. Non-temporal stores are weakly ordered: the function
// issues an SFENCE before it returns, so a thread that sees the task done (the pool's
// release/acquire) sees the data. x86 only; on other targets the module is left alone.
#pragma once

#include <string_view>

namespace llvm {
class Module;
}  // namespace llvm

namespace stitch::rt::cpu {

// The function attribute naming a phase function's streamed buffers: indices into its buffer
// array (the first argument), comma separated ("2,3").
inline constexpr std::string_view kStreamingBuffersAttr = "stitch-streaming-buffers";

// Rewrites the vector stores through the buffers each function names; returns how many stores
// were rewritten. `m` is optimized code for an x86 target.
int addStreamingStores(llvm::Module& m);

}  // namespace stitch::rt::cpu
