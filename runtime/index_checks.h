// Index checks at run time: the status words a kernel with checks records a failure in.
//
// Design note. A gather's index, or any index a front end checks (check_index), is data: only a
// run can find one out of range. The generated code checks each one it reads (lower's
// InstKind::CheckIndex) and records the first failure of a run in kCheckStatusWords int64 words
// the backend hands every entry of a kernel that has checks (KernelArtifact::checks): word 0 is
// the check's position + 1 (0: none failed), word 1 the index, word 2 its bound. The backend
// keeps the words zeroed, reads them after the kernel (host: after each kernel, which stops the
// run there; GPU: once after the program's launches, which costs a copy and a synchronization
// per run of a program with checks, and none for the others), and throws
// throwCheckFailure's IndexOutOfRange, whose message names the graph, the op, the index and the
// bound (support/error.h), as the reference interpreter's does. A kernel never clamps an index
// silently: the one it reads in place of a bad one only keeps its loads inside the buffer of a
// run that fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace stitch::rt {

inline constexpr size_t kCheckStatusWords = 4;

// Throws IndexOutOfRange for the failure `status` records in kernel `kernel` (its checks:
// KernelArtifact::checks) of graph `program`. A record naming no check of the kernel is an
// Internal error.
[[noreturn]] void throwCheckFailure(std::span<const int64_t> status,
                                    std::span<const std::string> checks, std::string_view program,
                                    size_t kernel);

}  // namespace stitch::rt
