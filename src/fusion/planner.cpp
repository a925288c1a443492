// The plan search (see planner.h). A partition of the planned nodes into groups is scored by the
// sum of the groups' kernel costs (group.h); merges must keep the group graph acyclic.
#include "fusion/planner.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <unordered_map>

#include "fusion/cost_memo.h"
#include "fusion/group.h"
#include "runtime/support/checked.h"
#include "runtime/support/env.h"
#include "runtime/support/error.h"
#include "runtime/support/logging.h"

namespace stitch::fusion {

namespace {

constexpr std::array<std::string_view, 3> kModes = {"stitch", "basic", "off"};
constexpr double kInf = std::numeric_limits<double>::infinity();
// A merge must gain at least this much (s) to count, so float noise never drives the search.
constexpr double kMinGain = 1e-12;
// Groups larger than this are not grown further: register pressure and compile time both grow
// with kernel size, and it keeps the greedy search near-linear on huge graphs.
constexpr size_t kMaxGroupNodes = 256;
// Up to this many planned ops, every pair of kernels is a merge candidate (reaching horizontal
// packings of unrelated ops); above it, only kernels that exchange or share values, which keeps
// each search step linear in the graph.
constexpr size_t kAllPairsMaxOps = 32;
// Up to this many planned ops, cycle checks search every reachable kernel (exact); above it a
// faster heuristic check runs, and the resulting plan is verified (see pathThroughOther).
constexpr size_t kExactCycleChecksMaxOps = 2000;
// Consumers of one shared value considered for horizontal packing: the nearest on each side.
constexpr size_t kSiblingWindow = 1;

// The planner's oracle: whole analyses for the kernels a plan ends up with, costs for the
// candidates of the search. Costs are shared between candidates of the same structure
// (cost_memo.h) unless PlannerOptions::shareCosts is off.
class Analyses {
 public:
  Analyses(const PlanContext& ctx, bool shareCosts) : ctx_(ctx), share_(shareCosts) {}
  // The whole analysis, with the reason of an invalid kernel (which names its nodes, so is
  // never shared).
  GroupResult get(const std::vector<int>& sortedNodes) {
    if (share_) {
      if (!memo_) memo_.emplace(ctx_);
      if (std::optional<Kernel> k = memo_->kernel(sortedNodes)) return {true, {}, std::move(*k)};
    }
    return analyzeGroup(ctx_, sortedNodes);
  }
  // Why the kernel made of these nodes is not valid (analyzed afresh, with the reason).
  std::string reason(const std::vector<int>& sortedNodes) const {
    return analyzeGroup(ctx_, sortedNodes).reason;
  }
  Price price(const std::vector<int>& sortedNodes) {
    if (!share_) return priceOf(ctx_, sortedNodes);
    if (!memo_) memo_.emplace(ctx_);  // made on first use
    return memo_->price(sortedNodes);
  }
  double cost(const std::vector<int>& sortedNodes) {
    Price p = price(sortedNodes);
    return p.valid ? p.time : kInf;
  }

 private:
  const PlanContext& ctx_;
  bool share_;
  std::optional<CostMemo> memo_;
};

// The sorted union of two disjoint sorted node lists, into `out` (a scratch the caller reuses).
void uniteInto(const std::vector<int>& a, const std::vector<int>& b, std::vector<int>& out) {
  out.clear();
  out.reserve(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
}

std::vector<int> unite(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  uniteInto(a, b, out);
  return out;
}

// A partition of the planned nodes: group id per node (-1 for nodes without a kernel).
struct Partition {
  std::vector<int> groupOf;              // per graph node
  std::vector<std::vector<int>> groups;  // sorted node lists; empty = merged away
  std::vector<double> costs;
  double total = 0;
};

Partition singletons(const PlanContext& ctx, Analyses& analyses) {
  Partition p;
  p.groupOf.assign(ctx.graph.nodes().size(), -1);
  for (int n : ctx.planned) {
    p.groupOf[n] = static_cast<int>(p.groups.size());
    p.groups.push_back({n});
    p.costs.push_back(analyses.cost({n}));
    p.total += p.costs.back();
  }
  return p;
}

// Visited marks for the cycle check and the successor lists, reused across searches (one set
// per use and thread): a stamp per search.
struct Visited {
  std::vector<uint32_t> mark;
  uint32_t stamp = 0;
  void reset(size_t n) {
    if (mark.size() < n) mark.resize(n, 0);
    if (++stamp == 0) {  // wrapped: no mark may equal a later stamp
      std::fill(mark.begin(), mark.end(), 0);
      stamp = 1;
    }
  }
  bool insert(int g) {
    if (mark[g] == stamp) return false;
    mark[g] = stamp;
    return true;
  }
};

// Groups that consume a value of group g (other than g).
std::vector<int> successors(const PlanContext& ctx, const Partition& p, int g) {
  std::vector<int> out;
  thread_local Visited listed;
  listed.reset(p.groups.size());
  for (int n : p.groups[g])
    for (int c : ctx.consumers[n]) {
      int h = p.groupOf[c];
      if (h >= 0 && h != g && listed.insert(h)) out.push_back(h);
    }
  return out;
}

// Whether some path leads from group `from` to group `to` through a third group (merging them
// would then make a cycle). With `exact`, every group reachable from `from` is searched. Without
// it, the search skips groups whose first node comes after `to`'s last: fast (paths in big graphs
// stay local), but only a heuristic, because a group may hold nodes on both sides of another
// (horizontal packing, or a merge across an unrelated node) and a path can run through a group
// that starts after `to` ends. Plans made with it are verified (planGraph).
bool pathThroughOther(const PlanContext& ctx, const Partition& p, int from, int to, bool exact) {
  int limit = exact ? std::numeric_limits<int>::max() : p.groups[to].back();
  std::vector<int> stack;
  thread_local Visited seen;
  seen.reset(p.groups.size());
  for (int s : successors(ctx, p, from))
    if (s != to && p.groups[s].front() < limit && seen.insert(s)) stack.push_back(s);
  while (!stack.empty()) {
    int g = stack.back();
    stack.pop_back();
    for (int s : successors(ctx, p, g)) {
      if (s == to) return true;
      if (s != from && p.groups[s].front() < limit && seen.insert(s)) stack.push_back(s);
    }
  }
  return false;
}

bool mergeIsAcyclic(const PlanContext& ctx, const Partition& p, int a, int b, bool exact) {
  return !pathThroughOther(ctx, p, a, b, exact) && !pathThroughOther(ctx, p, b, a, exact);
}

// Whether the group graph of p has no cycle (Kahn's algorithm, linear).
bool partitionIsAcyclic(const PlanContext& ctx, const Partition& p) {
  std::vector<int> indeg(p.groups.size(), 0);
  size_t live = 0;
  for (size_t g = 0; g < p.groups.size(); ++g) {
    if (p.groups[g].empty()) continue;
    ++live;
    for (int s : successors(ctx, p, static_cast<int>(g))) ++indeg[s];
  }
  std::vector<int> ready;
  for (size_t g = 0; g < p.groups.size(); ++g)
    if (!p.groups[g].empty() && indeg[g] == 0) ready.push_back(static_cast<int>(g));
  size_t done = 0;
  while (!ready.empty()) {
    int g = ready.back();
    ready.pop_back();
    ++done;
    for (int s : successors(ctx, p, g))
      if (--indeg[s] == 0) ready.push_back(s);
  }
  return done == live;
}

void applyMerge(Partition& p, int a, int b, double cost) {
  if (p.groups[a].size() < p.groups[b].size()) std::swap(a, b);
  for (int n : p.groups[b]) p.groupOf[n] = a;
  p.groups[a] = unite(p.groups[a], p.groups[b]);
  p.groups[b].clear();
  p.total += cost - p.costs[a] - p.costs[b];
  p.costs[a] = cost;
  p.costs[b] = 0;
}

// Candidate partners of group g: groups it exchanges values with, and groups reading the same
// input (horizontal packing). `allPairs` adds every other group (small graphs).
std::vector<int> partners(const PlanContext& ctx, const Partition& p, int g, bool allPairs) {
  std::vector<int> out;  // sorted and made unique at the end
  if (allPairs) {
    for (size_t h = 0; h < p.groups.size(); ++h)
      if (static_cast<int>(h) != g && !p.groups[h].empty()) out.push_back(static_cast<int>(h));
    return out;
  }
  for (int n : p.groups[g]) {
    std::span<const int> operands = ctx.operandsOf(n);
    for (size_t i = 0; i < operands.size(); ++i) {
      int o = operands[i];
      int h = p.groupOf[o];
      if (h >= 0 && h != g) out.push_back(h);
      // Siblings: the few consumers of the same value nearest to n.
      const std::vector<int>& cs = ctx.consumers[o];
      auto pos = static_cast<long>(ctx.consumerIndex[ctx.operandStart[n] + i]);
      for (long k = std::max<long>(0, pos - static_cast<long>(kSiblingWindow));
           k < std::min<long>(static_cast<long>(cs.size()),
                              pos + static_cast<long>(kSiblingWindow) + 1);
           ++k) {
        int s = p.groupOf[cs[k]];
        if (s >= 0 && s != g) out.push_back(s);
      }
    }
    for (int c : ctx.consumers[n]) {
      int h = p.groupOf[c];
      if (h >= 0 && h != g) out.push_back(h);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

struct Candidate {
  double gain;
  int a, b;
  int versionA, versionB;
  bool operator<(const Candidate& o) const { return gain < o.gain; }
};

// Greedy: repeatedly apply the merge with the largest gain.
Partition greedy(const PlanContext& ctx, Analyses& analyses, Partition p, bool allPairs,
                 bool exact) {
  std::vector<int> version(p.groups.size(), 0);
  std::priority_queue<Candidate> queue;
  std::vector<int> merged;  // scratch: the candidate's nodes
  // `later`: only partners after a, so the first sweep evaluates each pair once.
  auto consider = [&](int a, bool later) {
    for (int b : partners(ctx, p, a, allPairs)) {
      if (later && b < a) continue;
      if (p.groups[a].size() + p.groups[b].size() > kMaxGroupNodes) continue;
      uniteInto(p.groups[a], p.groups[b], merged);
      double c = analyses.cost(merged);
      double gain = p.costs[a] + p.costs[b] - c;
      if (gain > kMinGain) queue.push({gain, a, b, version[a], version[b]});
    }
  };
  for (size_t g = 0; g < p.groups.size(); ++g) consider(static_cast<int>(g), true);
  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    if (p.groups[c.a].empty() || p.groups[c.b].empty() || version[c.a] != c.versionA ||
        version[c.b] != c.versionB)
      continue;
    if (!mergeIsAcyclic(ctx, p, c.a, c.b, exact)) continue;
    // The gain was measured when the candidate was queued; both groups are unchanged since.
    applyMerge(p, c.a, c.b, p.costs[c.a] + p.costs[c.b] - c.gain);
    int kept = p.groups[c.a].empty() ? c.b : c.a;
    int gone = kept == c.a ? c.b : c.a;
    ++version[kept];
    ++version[gone];
    consider(kept, false);
  }
  return p;
}

// A partition's identity whatever its group numbering: each node's group named by the group's
// first node.
std::vector<int> canonicalKey(const Partition& p) {
  std::vector<int> k(p.groupOf.size(), -1);
  for (size_t n = 0; n < p.groupOf.size(); ++n)
    if (p.groupOf[n] >= 0) k[n] = p.groups[p.groupOf[n]].front();
  return k;
}

// The best `capacity` distinct partitions offered, by model time (ties by key, so the ranking is
// deterministic): the runner-up plans of a search (PlannerOptions::candidate). A partition is
// identified by its key alone: the searches reach one partition by different merge orders, whose
// running totals differ in the last bits, so the total used to rank is summed afresh, in the
// order of the groups' first nodes.
class CandidatePool {
 public:
  explicit CandidatePool(size_t capacity) : capacity_(capacity) {}
  void offer(const Partition& p) {
    if (capacity_ == 0) return;
    std::vector<int> key = canonicalKey(p);
    if (byKey_.count(key)) return;
    std::vector<std::pair<int, double>> costs;
    for (size_t g = 0; g < p.groups.size(); ++g)
      if (!p.groups[g].empty()) costs.emplace_back(p.groups[g].front(), p.costs[g]);
    std::sort(costs.begin(), costs.end());
    double total = 0;
    for (const auto& c : costs) total += c.second;
    if (total == kInf) return;
    auto rank = std::make_pair(total, key);
    if (ranked_.size() >= capacity_ && !(rank < *ranked_.rbegin())) return;
    ranked_.insert(rank);
    byKey_.emplace(std::move(key), p);
    if (ranked_.size() > capacity_) {
      auto last = std::prev(ranked_.end());
      byKey_.erase(last->second);
      ranked_.erase(last);
    }
  }
  // The k-th best (k >= 1) that is not `chosen`; nullptr when there are fewer.
  const Partition* runnerUp(const Partition& chosen, int k) const {
    const std::vector<int> skip = canonicalKey(chosen);
    for (const auto& rank : ranked_)
      if (rank.second != skip && --k == 0) return &byKey_.at(rank.second);
    return nullptr;
  }
  size_t size() const { return ranked_.size(); }

 private:
  size_t capacity_;
  std::set<std::pair<double, std::vector<int>>> ranked_;
  std::map<std::vector<int>, Partition> byKey_;
};

// Beam search over merge sequences, seeded with the greedy result and the singletons. Unlike
// greedy it also follows merges that cost something now, when they open a better merge later.
// Every state it makes is offered to `pool` (when given).
Partition beam(const PlanContext& ctx, Analyses& analyses, std::vector<Partition> seeds, int width,
               bool allPairs, CandidatePool* pool) {
  Partition best = *std::min_element(
      seeds.begin(), seeds.end(), [](const auto& x, const auto& y) { return x.total < y.total; });
  std::vector<Partition> frontier = std::move(seeds);
  std::set<std::vector<int>> seen;
  auto key = canonicalKey;
  for (const Partition& p : frontier) seen.insert(key(p));
  constexpr int kSuccessorsPerState = 8;
  // On larger graphs the beam refines the greedy plans locally: a bounded number of steps.
  const int maxSteps = allPairs ? std::numeric_limits<int>::max() : 16;
  int stale = 0;
  for (int step = 0; !frontier.empty() && stale < 3 && step < maxSteps; ++step) {
    std::vector<Partition> next;
    for (const Partition& p : frontier) {
      std::vector<std::pair<double, std::pair<int, int>>> moves;
      for (size_t a = 0; a < p.groups.size(); ++a) {
        if (p.groups[a].empty()) continue;
        for (int b : partners(ctx, p, static_cast<int>(a), allPairs)) {
          if (b <= static_cast<int>(a)) continue;
          double c = analyses.cost(unite(p.groups[a], p.groups[b]));
          if (c == kInf) continue;
          moves.push_back({c - p.costs[a] - p.costs[b], {static_cast<int>(a), b}});
        }
      }
      std::sort(moves.begin(), moves.end());
      int taken = 0;
      for (const auto& [delta, ab] : moves) {
        if (taken >= kSuccessorsPerState) break;
        if (!mergeIsAcyclic(ctx, p, ab.first, ab.second, /*exact=*/true)) continue;
        Partition q = p;
        applyMerge(q, ab.first, ab.second,
                   analyses.cost(unite(p.groups[ab.first], p.groups[ab.second])));
        if (!seen.insert(key(q)).second) continue;
        ++taken;
        if (pool) pool->offer(q);
        next.push_back(std::move(q));
      }
    }
    std::sort(next.begin(), next.end(),
              [](const Partition& x, const Partition& y) { return x.total < y.total; });
    if (next.size() > static_cast<size_t>(width)) next.resize(width);
    bool improved = !next.empty() && next.front().total < best.total - kMinGain;
    if (improved) {
      best = next.front();
      stale = 0;
    } else {
      ++stale;
    }
    frontier = std::move(next);
  }
  return best;
}

// Exhaustive: every partition into valid groups, best first by branch and bound.
Partition exhaustive(const PlanContext& ctx, Analyses& analyses, const Partition& start) {
  const std::vector<int>& nodes = ctx.planned;
  int n = static_cast<int>(nodes.size());
  STITCH_CHECK(n <= 16, ErrorCode::InvalidArgument,
               "exhaustive search is for graphs of at most 16 planned ops, not {}", n);
  uint32_t all = n == 32 ? ~0u : (1u << n) - 1;
  std::vector<double> cost(static_cast<size_t>(all) + 1, kInf);
  for (uint32_t s = 1; s <= all; ++s) {
    std::vector<int> members;
    for (int i = 0; i < n; ++i)
      if (s >> i & 1) members.push_back(nodes[i]);
    cost[s] = analyses.cost(members);
  }
  // Dependencies between planned nodes (through unplanned sources they are irrelevant: those
  // are computed in place).
  std::vector<uint32_t> succ(n, 0);
  std::unordered_map<int, int> index;
  for (int i = 0; i < n; ++i) index[nodes[i]] = i;
  for (int i = 0; i < n; ++i)
    for (int c : ctx.consumers[nodes[i]])
      if (auto it = index.find(c); it != index.end()) succ[i] |= 1u << it->second;

  auto acyclic = [&](const std::vector<uint32_t>& blocks) {
    size_t k = blocks.size();
    std::vector<uint32_t> out(k, 0);  // block successors, as block bitmasks
    for (size_t a = 0; a < k; ++a) {
      uint32_t reach = 0;
      for (int i = 0; i < n; ++i)
        if (blocks[a] >> i & 1) reach |= succ[i];
      for (size_t b = 0; b < k; ++b)
        if (b != a && (reach & blocks[b])) out[a] |= 1u << b;
    }
    // Kahn on at most 16 blocks.
    std::vector<int> indeg(k, 0);
    for (size_t a = 0; a < k; ++a)
      for (size_t b = 0; b < k; ++b)
        if (out[a] >> b & 1) ++indeg[b];
    std::vector<size_t> ready;
    for (size_t a = 0; a < k; ++a)
      if (indeg[a] == 0) ready.push_back(a);
    size_t done = 0;
    while (!ready.empty()) {
      size_t a = ready.back();
      ready.pop_back();
      ++done;
      for (size_t b = 0; b < k; ++b)
        if ((out[a] >> b & 1) && --indeg[b] == 0) ready.push_back(b);
    }
    return done == k;
  };

  double bestCost = start.total;
  std::vector<uint32_t> bestBlocks, blocks;
  bool found = false;
  std::function<void(uint32_t, double)> search = [&](uint32_t rest, double sofar) {
    if (rest == 0) {
      if (sofar < bestCost - kMinGain || !found) {
        if (!acyclic(blocks)) return;
        if (sofar < bestCost - kMinGain || (!found && sofar <= bestCost + kMinGain)) {
          bestCost = sofar;
          bestBlocks = blocks;
          found = true;
        }
      }
      return;
    }
    int low = __builtin_ctz(rest);
    uint32_t others = rest & ~(1u << low);
    // Every subset of `others`, joined with the lowest remaining node.
    for (uint32_t sub = others;; sub = (sub - 1) & others) {
      uint32_t block = sub | (1u << low);
      double c = cost[block];
      if (c != kInf && sofar + c < bestCost + kMinGain) {
        blocks.push_back(block);
        search(rest & ~block, sofar + c);
        blocks.pop_back();
      }
      if (sub == 0) break;
    }
  };
  search(all, 0.0);
  if (!found) return start;
  Partition p;
  p.groupOf.assign(ctx.graph.nodes().size(), -1);
  for (uint32_t b : bestBlocks) {
    std::vector<int> members;
    for (int i = 0; i < n; ++i)
      if (b >> i & 1) members.push_back(nodes[i]);
    for (int m : members) p.groupOf[m] = static_cast<int>(p.groups.size());
    p.costs.push_back(cost[b]);
    p.total += cost[b];
    p.groups.push_back(std::move(members));
  }
  return p;
}

// Orders the groups so every kernel comes after the kernels it reads from.
std::vector<int> kernelOrder(const PlanContext& ctx, const Partition& p) {
  std::vector<int> live;
  for (size_t g = 0; g < p.groups.size(); ++g)
    if (!p.groups[g].empty()) live.push_back(static_cast<int>(g));
  std::unordered_map<int, int> indeg;
  for (int g : live) indeg[g] = 0;
  for (int g : live)
    for (int s : successors(ctx, p, g)) ++indeg[s];
  // Among ready kernels, the one whose first node comes first: plans read in graph order.
  auto later = [&](int a, int b) { return p.groups[a].front() > p.groups[b].front(); };
  std::priority_queue<int, std::vector<int>, decltype(later)> ready(later);
  for (int g : live)
    if (indeg[g] == 0) ready.push(g);
  std::vector<int> order;
  while (!ready.empty()) {
    int g = ready.top();
    ready.pop();
    order.push_back(g);
    for (int s : successors(ctx, p, g))
      if (--indeg[s] == 0) ready.push(s);
  }
  STITCH_INTERNAL(order.size() == live.size(), "the kernel graph has a cycle");
  return order;
}

std::string formatMicros(double s) { return fmt::format("{:.2f} us", s * 1e6); }

// Why the edge producer->consumer crosses kernels.
std::pair<CutVerdict, std::string> cutReason(const PlanContext& ctx, Analyses& analyses,
                                             const Partition& p, int a, int b) {
  if (ctx.mode == Mode::Off)
    return {CutVerdict::Off, "fusion is off (STITCH_FUSION=off): one kernel per op"};
  std::vector<int> merged = unite(p.groups[a], p.groups[b]);
  Price together = analyses.price(merged);
  // The reason of an invalid kernel names its nodes: that one is analyzed again, with it.
  if (!together.valid) return {CutVerdict::Invalid, analyses.reason(merged)};
  if (!mergeIsAcyclic(ctx, p, a, b, /*exact=*/true))
    return {CutVerdict::Cycle,
            "fusing would create a cycle: a path between them runs through another kernel"};
  double apart = p.costs[a] + p.costs[b];
  if (together.time >= apart)
    return {CutVerdict::DoesNotPay, fmt::format("fusing does not pay: {} fused vs {} apart",
                                                formatMicros(together.time), formatMicros(apart))};
  return {CutVerdict::KeptApart,
          fmt::format("the search kept them apart (fusing alone would save {})",
                      formatMicros(apart - together.time))};
}

// The plan of partition `p` (acyclic), with its kernels in dependency order, their analyses, the
// unfused totals and every cut edge's reason; nullopt, with the reason in *invalid, when a group
// is not a valid kernel under ctx's sizes.
std::optional<Plan> assemble(const PlanContext& ctx, Analyses& analyses,
                             const ir::Bindings& bindings, Partition p,
                             const PlannerOptions& options, std::string* invalid) {
  Plan plan;
  plan.mode = options.mode;
  plan.candidate = options.candidate;
  plan.target = ctx.hw.name;
  plan.bindings = bindings;
  for (int gi : kernelOrder(ctx, p)) {
    GroupResult r = analyses.get(p.groups[gi]);
    if (!r.valid) {
      *invalid = r.reason;
      return std::nullopt;
    }
    // The cut reasons compare against the groups' costs under these sizes.
    p.costs[gi] = r.kernel.cost.time;
    plan.time += r.kernel.cost.time;
    plan.bytes = saturatingAdd(
        plan.bytes, saturatingAdd(r.kernel.summary.bytesRead, r.kernel.summary.bytesWritten));
    plan.kernels.push_back(std::move(r.kernel));
  }
  for (int n : ctx.planned) {
    Price single = analyses.price({n});
    ++plan.unfusedKernels;
    plan.unfusedTime += single.time;
    plan.unfusedBytes = saturatingAdd(plan.unfusedBytes, single.bytes);
  }
  // Every edge between two kernels gets the reason of that kernel pair (computed once a pair).
  std::map<std::pair<int, int>, std::pair<CutVerdict, std::string>> reasons;
  for (int c : ctx.planned) {
    const std::vector<int>& ops = ctx.graph.node(c).operands;
    for (size_t i = 0; i < ops.size(); ++i) {
      int o = ops[i], a = p.groupOf[o], b = p.groupOf[c];
      if (a < 0 || a == b ||
          std::find(ops.begin(), ops.begin() + static_cast<long>(i), o) !=
              ops.begin() + static_cast<long>(i))
        continue;
      auto [it, fresh] = reasons.try_emplace({a, b});
      if (fresh) it->second = cutReason(ctx, analyses, p, a, b);
      plan.cuts.push_back({o, c, it->second.second, it->second.first});
    }
  }
  return plan;
}

}  // namespace

Mode parseMode(std::string_view name) {
  if (name == "stitch") return Mode::Stitch;
  if (name == "basic") return Mode::Basic;
  if (name == "off") return Mode::Off;
  throwError(ErrorCode::InvalidArgument, fmt::format("unknown fusion mode '{}'; valid modes: {}",
                                                     name, env::joinChoices(kModes)));
}

Mode modeFromEnv() {
  auto v = env::getChoice("STITCH_FUSION", kModes);
  return v ? parseMode(*v) : Mode::Stitch;
}

Plan planGraph(const ir::Graph& g, const ir::Bindings& bindings, const HardwareProfile& hw,
               const PlannerOptions& options) {
  STITCH_CHECK(options.candidate >= 0, ErrorCode::InvalidArgument,
               "plan candidate {} is negative (0 is the search's pick)", options.candidate);
  PlanContext ctx(g, bindings, hw, options.mode, options.scheduler);
  Analyses analyses(ctx, options.shareCosts);
  Partition start = singletons(ctx, analyses);
  Partition best = start;
  // Runner-up plans are kept only when one is asked for: the search itself never needs them.
  // One slot more than asked, for the pick itself.
  CandidatePool pool(options.candidate > 0 ? static_cast<size_t>(options.candidate) + 1 : 0);
  pool.offer(start);
  if (options.mode != Mode::Off && !ctx.planned.empty()) {
    bool small = static_cast<int>(ctx.planned.size()) <= options.beamMaxOps;
    bool tiny = ctx.planned.size() <= kAllPairsMaxOps;
    bool exact = ctx.planned.size() <= kExactCycleChecksMaxOps;
    // Greedy with the cycle check the graph's size affords; a heuristic result is verified, and
    // in the rare case it let a cycle through, made again with exact checks.
    auto runGreedy = [&](const PlanContext& c, Analyses& a, const Partition& from) {
      Partition r = greedy(c, a, from, tiny, exact);
      if (!exact && !partitionIsAcyclic(c, r)) {
        log().debug("plan search: the fast cycle check missed a cycle; searching again exactly");
        r = greedy(c, a, from, tiny, /*exact=*/true);
      }
      return r;
    };
    switch (options.search) {
      case Search::Greedy: best = runGreedy(ctx, analyses, start); break;
      case Search::Beam: {
        std::vector<Partition> seeds = {runGreedy(ctx, analyses, start)};
        if (small) {
          // From the singletons only where the beam can afford to redo every merge.
          if (tiny) seeds.push_back(start);
          // Basic's plan is a stitch plan too; seeding with it keeps stitch from ever losing to
          // basic where greedy stitching wanders into a worse corner.
          if (options.mode == Mode::Stitch) {
            PlanContext basicCtx(g, bindings, hw, Mode::Basic, options.scheduler);
            Analyses basicAnalyses(basicCtx, options.shareCosts);
            Partition b = runGreedy(basicCtx, basicAnalyses, singletons(basicCtx, basicAnalyses));
            b.total = 0;
            for (size_t i = 0; i < b.groups.size(); ++i)
              if (!b.groups[i].empty()) b.total += b.costs[i] = analyses.cost(b.groups[i]);
            seeds.push_back(std::move(b));
          }
        }
        for (const Partition& seed : seeds) pool.offer(seed);
        best = small ? beam(ctx, analyses, std::move(seeds), options.beamWidth, tiny, &pool)
                     : seeds[0];
        break;
      }
      case Search::Exhaustive: best = exhaustive(ctx, analyses, start); break;
    }
    pool.offer(best);
  }
  if (options.candidate > 0) {
    const Partition* runnerUp = pool.runnerUp(best, options.candidate);
    STITCH_CHECK(runnerUp != nullptr, ErrorCode::InvalidArgument,
                 "graph {}: the plan search evaluated {} distinct plan{}, so there is no candidate "
                 "{} (0 is the search's pick)",
                 g.name(), pool.size(), pool.size() == 1 ? "" : "s", options.candidate);
    best = *runnerUp;
  }

  std::string invalid;
  std::optional<Plan> plan = assemble(ctx, analyses, bindings, std::move(best), options, &invalid);
  STITCH_INTERNAL(plan.has_value(), "planned an invalid kernel: {}", invalid);
  return std::move(*plan);
}

std::optional<Plan> planKernels(const ir::Graph& g, const std::vector<std::vector<int>>& kernels,
                                const ir::Bindings& bindings, const HardwareProfile& hw,
                                const PlannerOptions& options) {
  PlanContext ctx(g, bindings, hw, options.mode, options.scheduler);
  Analyses analyses(ctx, options.shareCosts);
  Partition p;
  p.groupOf.assign(g.nodes().size(), -1);
  size_t covered = 0;
  for (const std::vector<int>& k : kernels) {
    STITCH_INTERNAL(!k.empty() && std::is_sorted(k.begin(), k.end()),
                    "planKernels: a kernel's nodes must be sorted and not empty");
    for (int n : k) {
      STITCH_INTERNAL(n >= 0 && static_cast<size_t>(n) < g.nodes().size() && ctx.needsKernel(n) &&
                          p.groupOf[n] < 0,
                      "planKernels: node {} is not a planned node of graph {} or is in two kernels",
                      n, g.name());
      p.groupOf[n] = static_cast<int>(p.groups.size());
    }
    covered += k.size();
    p.groups.push_back(k);
  }
  STITCH_INTERNAL(covered == ctx.planned.size(), "planKernels: {} of graph {}'s {} ops in kernels",
                  covered, g.name(), ctx.planned.size());
  STITCH_INTERNAL(partitionIsAcyclic(ctx, p), "planKernels: the kernels of graph {} form a cycle",
                  g.name());
  p.costs.assign(p.groups.size(), 0);
  std::string invalid;
  std::optional<Plan> plan = assemble(ctx, analyses, bindings, std::move(p), options, &invalid);
  if (!plan) log().debug("graph {}: a kept plan does not fit these sizes: {}", g.name(), invalid);
  return plan;
}

}  // namespace stitch::fusion
