// Kernel costs shared between candidates of the same structure (design note in cost_memo.h).
#include "fusion/cost_memo.h"

#include <algorithm>
#include <limits>
#include <span>
#include <string>
#include <utility>

#include "ir/attrs.h"
#include "ir/ops.h"
#include "runtime/support/checked.h"
#include "runtime/support/error.h"
#include "runtime/support/hash.h"

namespace stitch::fusion {

namespace {

// The class of a node: everything the analysis reads of a node by itself. Names are left out
// (they only appear in the reasons of invalid groups, which the search never asks for).
std::string classText(const ir::Node& node, const std::vector<int64_t>& shape) {
  std::string s(ir::opName(node.op));
  s += ' ';
  s += ir::dtypeName(node.type.dtype);
  for (int64_t d : shape) s += ' ' + std::to_string(d);
  for (const ir::Attr& a : node.attrs.list()) {
    s += ' ';
    s += a.name;
    s += '=';
    s += ir::attrValueStr(a.value);
  }
  return s;
}

}  // namespace

// FNV-1a's step over whole 32-bit tokens rather than their bytes: this hash only picks a bucket
// in memory (keys are compared whole), so it need not be support/hash.h's stable byte form, and
// a token at a time is four times fewer steps on the search's hottest path.
size_t CostMemo::KeyHash::operator()(const std::vector<uint32_t>& key) const {
  uint64_t h = kFnv1a64Offset;
  for (uint32_t t : key) h = (h ^ t) * kFnv1a64Prime;
  return static_cast<size_t>(h ^ (h >> 32));
}

CostMemo::CostMemo(const PlanContext& ctx) : ctx_(ctx) {
  const size_t n = ctx.graph.nodes().size();
  std::unordered_map<std::string, uint32_t> classes;
  info_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = ctx.graph.nodes()[i];
    NodeInfo& in = info_[i];
    in.cls =
        classes.try_emplace(classText(node, ctx.shapes[i]), static_cast<uint32_t>(classes.size()))
            .first->second;
    in.output = ctx.isOutput[i];
    in.readers = static_cast<uint32_t>(readers_.size());
    for (int c : ctx.consumers[i])
      if (ctx.live[c]) readers_.push_back(c);
  }
  info_.push_back({0, false, static_cast<uint32_t>(readers_.size())});  // where the last ends
  marks_.assign(n, {});
}

void CostMemo::sign(const std::vector<int>& nodes) {
  // Two stamps per call: current_ marks members, current_ + 1 values read from outside.
  if (current_ >= std::numeric_limits<uint32_t>::max() - 2) {
    std::fill(marks_.begin(), marks_.end(), Mark{});
    current_ = 0;
  }
  current_ += 2;
  const uint32_t member = current_, outside = current_ + 1;
  for (size_t i = 0; i < nodes.size(); ++i) marks_[nodes[i]] = {member, static_cast<uint32_t>(i)};
  outside_.clear();
  key_.clear();
  key_.push_back(static_cast<uint32_t>(nodes.size()));
  for (int n : nodes) {
    const NodeInfo& in = info_[n];
    std::span<const int> operands = ctx_.operandsOf(n);
    key_.push_back(in.cls);
    key_.push_back(static_cast<uint32_t>(operands.size()));
    for (int o : operands) {
      Mark& m = marks_[o];
      if (m.stamp == member) {
        key_.push_back(m.slot * 2);
        continue;
      }
      if (m.stamp != outside) {
        m = {outside, static_cast<uint32_t>(outside_.size())};
        outside_.push_back(o);
      }
      key_.push_back(m.slot * 2 + 1);
    }
    bool escapes = in.output;
    for (size_t i = in.readers, e = info_[n + 1].readers; !escapes && i < e; ++i)
      escapes = marks_[readers_[i]].stamp != member;
    key_.push_back(escapes ? 1 : 0);
  }
  // Outside values: class, members before it, rank by id among them.
  byId_.clear();
  for (size_t i = 0; i < outside_.size(); ++i)
    byId_.emplace_back(outside_[i], static_cast<uint32_t>(i));
  std::sort(byId_.begin(), byId_.end());
  rank_.resize(outside_.size());
  for (size_t r = 0; r < byId_.size(); ++r) rank_[byId_[r].second] = static_cast<uint32_t>(r);
  key_.push_back(static_cast<uint32_t>(outside_.size()));
  for (size_t i = 0; i < outside_.size(); ++i) {
    int o = outside_[i];
    key_.push_back(info_[o].cls);
    key_.push_back(
        static_cast<uint32_t>(std::lower_bound(nodes.begin(), nodes.end(), o) - nodes.begin()));
    key_.push_back(rank_[i]);
  }
}

Price priceOf(const PlanContext& ctx, const std::vector<int>& sortedNodes) {
  GroupResult r = analyzeGroup(ctx, sortedNodes, /*explain=*/false);
  if (!r.valid) return {};
  return {true, r.kernel.cost.time,
          saturatingAdd(r.kernel.summary.bytesRead, r.kernel.summary.bytesWritten)};
}

Price CostMemo::price(const std::vector<int>& sortedNodes) {
  STITCH_INTERNAL(!sortedNodes.empty() && std::is_sorted(sortedNodes.begin(), sortedNodes.end()),
                  "CostMemo::price: the nodes must be sorted and not empty");
  sign(sortedNodes);
  if (auto it = prices_.find(key_); it != prices_.end()) {
    ++hits_;
    return it->second;
  }
  ++analyses_;
  Price p = priceOf(ctx_, sortedNodes);
  if (keyTokens_ + key_.size() <= kMaxKeyTokens) {
    keyTokens_ += key_.size();
    prices_.emplace(key_, p);
  }
  return p;
}

std::optional<Kernel> CostMemo::kernel(const std::vector<int>& sortedNodes) {
  STITCH_INTERNAL(!sortedNodes.empty() && std::is_sorted(sortedNodes.begin(), sortedNodes.end()),
                  "CostMemo::kernel: the nodes must be sorted and not empty");
  sign(sortedNodes);
  auto it = kernels_.find(key_);
  if (it == kernels_.end()) {
    ++analyses_;
    GroupResult r = analyzeGroup(ctx_, sortedNodes, /*explain=*/false);
    Whole w;
    if (r.valid) w.kernel = std::move(r.kernel);
    w.nodes = sortedNodes;
    w.outside = outside_;
    it = kernels_.emplace(key_, std::move(w)).first;
    return it->second.kernel;
  }
  ++hits_;
  const Whole& w = it->second;
  if (!w.kernel) return std::nullopt;
  // Equal keys: the i-th member there is the i-th here, the j-th outside value there (by first
  // use) the j-th here.
  auto rename = [&](int id) {
    auto m = std::lower_bound(w.nodes.begin(), w.nodes.end(), id);
    if (m != w.nodes.end() && *m == id)
      return sortedNodes[static_cast<size_t>(m - w.nodes.begin())];
    auto o = std::find(w.outside.begin(), w.outside.end(), id);
    STITCH_INTERNAL(o != w.outside.end(), "a memoized kernel names node {}, not of its group", id);
    return outside_[static_cast<size_t>(o - w.outside.begin())];
  };
  Kernel k = *w.kernel;
  for (int& n : k.nodes) n = rename(n);
  k.dominant = rename(k.dominant);
  for (Edge& e : k.edges) {
    e.producer = rename(e.producer);
    e.consumer = rename(e.consumer);
  }
  for (int& n : k.inputs) n = rename(n);
  for (int& n : k.outputs) n = rename(n);
  return k;
}

}  // namespace stitch::fusion
