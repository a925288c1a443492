// passes/sink_picks.h: one-hot picks and gathers of elementwise values read their inputs at the
// picked element; what does not sink is left as it was.
#include <cstdint>

#include "pass_helpers.h"
#include "passes/decompose.h"
#include "passes/pipeline.h"
#include "passes/sink_picks.h"

namespace stitch::passes::testing {
namespace {

using ir::OpCode;

// Cross-entropy's forward over 6 classes as the reference graph writes it: the log-probability
// picked at the label by a one-hot row sum. Seeded labels lie in [-8, 8]: most rows pick
// nothing, and a label outside [0, 6) must not be read (the sunk gather would fail on it).
constexpr const char* kCrossEntropy = R"(graph ce(logits: f32[5, 6], labels: i64[5, 1]) {
  m      = reduce_max(logits, axes=[1], keepdims=true)
  d      = sub(logits, m)
  e      = exp(d)
  s      = reduce_sum(e, axes=[1], keepdims=true)
  lse    = log(s)
  lp     = sub(d, lse)
  cls    = iota(shape=[5, 6], axis=1, dtype=i64)
  valid  = ne(labels, -100)
  is     = eq(cls, labels)
  hit    = logical_and(is, valid)
  picked = select(hit, lp, 0)
  nll    = reduce_sum(picked, axes=[1], keepdims=KEEP)
  mean   = reduce_mean(nll)
  loss   = neg(mean)
  return loss, nll
})";

std::string withKeepdims(bool keep) {
  std::string s = kCrossEntropy;
  s.replace(s.find("KEEP"), 4, keep ? "true" : "false");
  return s;
}

TEST(SinkPicks, CrossEntropyPicksTheLogitNotTheRow) {
  for (bool keep : {true, false}) {
    SCOPED_TRACE(keep ? "keepdims" : "no keepdims");
    ir::Graph g = parse(withKeepdims(keep));
    ir::Graph p = sinkPicks(g);
    // One gather of the logits input; the one-hot selection is gone.
    EXPECT_EQ(count(p, OpCode::Gather), 1);
    for (const ir::Node& n : p.nodes()) {
      if (n.op == OpCode::Gather) {
        EXPECT_EQ(p.node(n.operands[0]).name, "logits");
      }
    }
    ir::Graph clean = runPasses(g);
    EXPECT_EQ(count(clean, OpCode::Iota), 0);
    EXPECT_EQ(count(clean, OpCode::Gather), 1);
    EXPECT_EQ(clean.node(clean.outputs()[1]).type.shape, g.node(g.outputs()[1]).type.shape);
    for (uint64_t seed = 1; seed <= 20; ++seed)
      EXPECT_EQ(differs(g, clean, {}, seed, 0), "") << "seed " << seed;
  }
}

TEST(SinkPicks, ACheckedLabelNeedsNoClampAndSymbolicAxesSink) {
  // The PyTorch hook's nll_loss: the label is checked against the class count (the run fails on
  // a bad one), so the pick reads it as is, also along a symbolic axis. The logits are a view of
  // the input (a transpose and a slice).
  ir::Graph g = parse(R"(graph nll(x: f32[C, 9], labels: i64[4]) {
  xt     = transpose(x, perm=[1, 0])
  logits = slice(xt, starts=[2, 0], ends=[6, 2147483647], steps=[1, 1])
  m      = reduce_max(logits, axes=[1], keepdims=true)
  d      = sub(logits, m)
  e      = exp(d)
  s      = reduce_sum(e, axes=[1], keepdims=true)
  lse    = log(s)
  lp     = sub(d, lse)
  t      = reshape(labels, shape=[4, 1])
  valid  = ne(t, -100)
  t0     = select(valid, t, 0)
  c      = check_index(t0, size=[C])
  cls    = iota(shape=[4, C], axis=1, dtype=i64)
  is     = eq(cls, c)
  hit    = logical_and(is, valid)
  nlp    = neg(lp)
  picked = select(hit, nlp, 0)
  nll    = reduce_sum(picked, axes=[1])
  return nll
})");
  ir::Graph p = runPasses(g);
  EXPECT_EQ(count(p, OpCode::Gather), 1);
  EXPECT_EQ(count(p, OpCode::Iota), 0);
  EXPECT_EQ(count(p, OpCode::Ge), 0);  // no clamp: the check covers the range
  EXPECT_EQ(count(p, OpCode::CheckIndex), 1);
}

TEST(SinkPicks, CheckedLabelsMatchOnTheReference) {
  // As above with sizes the reference can draw labels for: minimum(abs(label), 5) is in range.
  ir::Graph g = parse(R"(graph nll(logits: f32[7, 6], w: f32[6], labels: i64[7, 1]) {
  m     = reduce_max(logits, axes=[1], keepdims=true)
  d     = sub(logits, m)
  e     = exp(d)
  s     = reduce_sum(e, axes=[1], keepdims=true)
  lse   = log(s)
  lp    = sub(d, lse)
  wl    = mul(lp, w)
  a     = abs(labels)
  l     = minimum(a, 5)
  c     = check_index(l, size=[6])
  cls   = iota(shape=[7, 6], axis=1, dtype=i64)
  hit   = eq(cls, c)
  nwl   = neg(wl)
  picked = select(hit, nwl, 0)
  nll   = reduce_sum(picked, axes=[1], keepdims=true)
  return nll
})");
  ir::Graph p = runPasses(g);
  EXPECT_EQ(count(p, OpCode::Gather), 2);  // the logits and the class weights
  for (uint64_t seed = 1; seed <= 10; ++seed)
    EXPECT_EQ(differs(g, p, {}, seed, 0), "") << "seed " << seed;
}

TEST(SinkPicks, GatherOfLogSoftmaxReadsTheInput) {
  // torch.gather(log_softmax(x), -1, k), two picks per row: the gather of the computed
  // log-probabilities becomes one of x (gather_rows.h would otherwise make a one-hot reduction).
  ir::Graph g = parse(R"(graph g(x: f32[4, 9], k: i64[4, 2]) {
  a  = abs(k)
  i  = minimum(a, 8)
  lp = log_softmax(x, axis=1)
  y  = gather(lp, i, axis=1)
  return y
})");
  ir::Graph p = runPasses(g);
  EXPECT_EQ(count(p, OpCode::Gather), 1);
  EXPECT_EQ(count(p, OpCode::ReduceMax), 1);  // the softmax's own max, no one-hot
  EXPECT_EQ(p.node(p.outputs()[0]).name, "y");
  // Bit for bit against the decomposed softmax (the reference computes the composite its own way).
  for (uint64_t seed = 1; seed <= 10; ++seed)
    EXPECT_EQ(differs(decomposeComposites(g), p, {}, seed, 0), "") << "seed " << seed;
}

TEST(SinkPicks, WhatDoesNotSinkStays) {
  // A picked value that is a reduction's (not a view of an input), a mask that is not per row
  // (though the value is a view), a float position (half a label: it picks at even labels only):
  // each keeps its one-hot sum, and a gather of a reduction's value stays a gather.
  ir::Graph g = parse(R"(graph h(z: f32[3, 5, 2], labels: i64[3, 1], k: i64[3, 5]) {
  v   = reduce_sum(z, axes=[2])
  cls = iota(shape=[3, 5], axis=1, dtype=i64)
  is  = eq(cls, labels)
  pa  = select(is, v, 0)
  a   = reduce_sum(pa, axes=[1])
  y   = reshape(z, shape=[3, 10])
  ys  = slice(y, starts=[0, 0], ends=[3, 5], steps=[1, 1])
  big = gt(ys, 1)
  hit = logical_and(is, big)
  pb  = select(hit, ys, 0)
  b   = reduce_sum(pb, axes=[1])
  v2  = mul(v, 2)
  ka  = abs(k)
  kc  = minimum(ka, 4)
  c   = gather(v2, kc, axis=1)
  fi  = iota(shape=[3, 5], axis=1, dtype=f32)
  fl  = cast(labels, to=f32)
  h   = mul(fl, 0.5)
  fis = eq(fi, h)
  pd  = select(fis, ys, 0)
  d   = reduce_sum(pd, axes=[1])
  return a, b, c, d
})");
  ir::Graph p = sinkPicks(g);
  EXPECT_TRUE(p == g);
}

}  // namespace
}  // namespace stitch::passes::testing
