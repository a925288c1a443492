// Kernel costs shared between candidates of the same structure.
//
// The plan search prices hundreds of thousands of candidate kernels on a big graph, and a model
// is mostly repeats of one block: layer 7's "bias + GELU" candidate is layer 3's with other node
// ids. The group analysis (group.h) is a function of what it reads of the graph, and this memo
// keys each candidate by a canonical serialization of exactly that, so that a candidate equal
// to one already analyzed up to a renumbering of nodes takes its cost without being analyzed
// (and, on a GPU profile, without being lowered and scheduled) again:
//   - per member, in id order: its class (op, dtype, concrete shape, attributes: what
//     `nodeClass` interns; not its name), its operands (a member by position, a value from
//     outside by order of first use) and whether its value escapes (a graph output, or read by
//     a live op outside the group);
//   - per value from outside, in order of first use: its class, how many members come before it
//     and its rank by id among the outside values (so the relative order of every node the
//     lowering sees is part of the key).
// The key is the whole serialization, compared exactly (its hash only picks the bucket), so two
// candidates share a cost only when the analysis cannot tell them apart. The contract: anything
// the analysis comes to read of the graph or the context must enter the key here.
// tests/fusion/test_cost_memo.cpp checks it: plans made with and without the memo are the same,
// on the examples, seeded random graphs and stacked transformer layers, for the host and sm_90.
// One memo serves one PlanContext (its bindings, profile, mode and target are fixed); it stops
// taking entries at kMaxKeyTokens (about 64 MiB) and then analyzes what it has not seen.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fusion/group.h"

namespace stitch::fusion {

// What the search and the plan's totals need of a candidate: its verdict, model time and
// traffic. A kernel's contents (its nodes, edges, mapping) are not shared: they name nodes.
struct Price {
  bool valid = false;
  double time = 0;    // when valid
  int64_t bytes = 0;  // read + written (saturating), when valid
};

// The price of a group analyzed from scratch (no memo).
Price priceOf(const PlanContext& ctx, const std::vector<int>& sortedNodes);

class CostMemo {
 public:
  explicit CostMemo(const PlanContext& ctx);

  // The price of the kernel made of `sortedNodes` (sorted, unique).
  Price price(const std::vector<int>& sortedNodes);

  // The whole analysis of the kernel made of `sortedNodes` when it is valid (nullopt when not):
  // a kernel of the same structure analyzed before, its node ids renamed to these (the key
  // fixes which member and which outside value each id of it is), or a fresh analysis.
  std::optional<Kernel> kernel(const std::vector<int>& sortedNodes);

  // Analyses run and answers served from the memo (for the tests and the benchmark).
  size_t analyses() const { return analyses_; }
  size_t hits() const { return hits_; }

 private:
  static constexpr size_t kMaxKeyTokens = size_t{16} << 20;
  struct KeyHash {
    size_t operator()(const std::vector<uint32_t>& key) const;
  };
  // Fills key_ with the canonical serialization of the group (see the note above).
  void sign(const std::vector<int>& sortedNodes);

  const PlanContext& ctx_;
  // What signing reads of each node besides its operands (PlanContext::operandsOf), flat: its
  // class (an id for op, dtype, shape and attributes), whether it is a graph output, and where
  // its live readers start in readers_ (they end where the next node's start; one entry more
  // than nodes).
  struct NodeInfo {
    uint32_t cls = 0;
    bool output = false;
    uint32_t readers = 0;
  };
  std::vector<NodeInfo> info_;
  std::vector<int> readers_;
  // Scratch, reused across calls: per node, the call that marked it (current_ for a member,
  // current_ + 1 for a value read from outside) and its slot (a member's position, an outside
  // value's order of first use); the outside values; their ranks by id.
  struct Mark {
    uint32_t stamp = 0, slot = 0;
  };
  std::vector<Mark> marks_;
  uint32_t current_ = 0;
  std::vector<int> outside_;
  std::vector<std::pair<int, uint32_t>> byId_;
  std::vector<uint32_t> rank_;
  std::vector<uint32_t> key_;
  std::unordered_map<std::vector<uint32_t>, Price, KeyHash> prices_;
  // Whole kernels (few: the plan's own), with the members and outside values of the group they
  // were analyzed for, to rename their ids.
  struct Whole {
    std::optional<Kernel> kernel;
    std::vector<int> nodes, outside;
  };
  std::unordered_map<std::vector<uint32_t>, Whole, KeyHash> kernels_;
  size_t keyTokens_ = 0;
  size_t analyses_ = 0, hits_ = 0;
};

}  // namespace stitch::fusion
