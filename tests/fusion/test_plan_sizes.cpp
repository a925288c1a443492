// Plans at every size (issue 33): the training graphs of the examples plan into the same kernels
// at 1 MiB of traffic as at 256 MiB, on every target, moving about the minimal traffic (every
// graph input read once, every output written once).
//
// Small sizes are where a model that prices only threads goes wrong: a few hundred rows give a
// fused row kernel a few hundred unit slots, and the model must see that an unrolled row walk keeps
// its whole row in flight (cost_model.h: bytesInFlightPerThread) and that column partials of a
// few hundred rows are read back from the cache (group.cpp); a column reduction of a few hundred
// rows must still split its rows over blocks (lower/split_rows.h); and a cut must say why in
// words that hold (a cast of a column sum runs in the phase that completes it).
//
// Sizes: the powers of two of the batch symbol whose minimal traffic lies in [1 MiB, 256 MiB],
// and 1000 rows (the issue's layer-norm backward), where the batch is a row count.
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/planning.h"
#include "fusion/explain.h"
#include "fusion/hardware.h"
#include "fusion/planner.h"
#include "ir/parser.h"
#include "ir/signature.h"
#include "passes/pipeline.h"
#include "runtime/support/checked.h"

using namespace stitch;
using namespace stitch::fusion;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

ir::Graph exampleGraph(const std::string& file, const std::string& name) {
  std::ifstream f(std::string(STITCH_SOURCE_DIR) + "/examples/" + file);
  std::stringstream ss;
  ss << f.rdbuf();
  for (ir::Graph& g : ir::parseModule(ss.str(), file))
    if (g.name() == name) return passes::runPasses(g);
  throw std::runtime_error("no graph " + name + " in " + file);
}

// Every graph input read once and every output written once, in bytes.
int64_t minimalTraffic(const ir::Graph& g, const ir::Bindings& b) {
  const auto shapes = ir::concreteShapes(g, b);
  int64_t bytes = 0;
  for (std::span<const int> values : {g.inputs(), g.outputs()})
    for (int v : values)
      bytes += *checkedElementCount(shapes[static_cast<size_t>(v)]) *
               ir::dtypeBytes(g.node(v).type.dtype);
  return bytes;
}

struct Case {
  const char* file;
  const char* graph;
  int kernels;               // the most, on every target and size (but `hostKernels`)
  double traffic;            // the most bytes moved, as a multiple of the minimal traffic
  int hostKernels = 0;       // the most on the host, when not `kernels`
  bool rows = true;          // N is a row count (1000 rows is a size too)
  double gfx90aTraffic = 0;  // the most on gfx90a, when not `traffic`
};

// The fewest kernels the stitch schemes form for each, as at 256 MiB:
//   - Adam with clipping: one on a GPU, two on the host. The clip factor is an all-reduction of g
//     that every update needs. A GPU kernel splits it by stages (lower/split_rows.h): partial
//     sums over sub-rows, their combine, then the update on the sub-rows again, which reads g a
//     second time from memory once it no longer fits in the cache (1.14x); the host would run
//     the update in the reduction's single unit, so g is read by a reduction kernel and again by
//     the update (1.14x).
//   - batch norm in training over [N, 256] (BatchNorm1d): one kernel on every target, split by
//     stages on a GPU (sub-columns for the mean, then for the variance of x - mean, then the
//     normalization). x is walked three times, the walks after the first from the cache while x
//     fits in half of it; past that from memory (2x: no plan of the graph reads it less, the
//     variance needs the mean and every element both).
//   - batch norm in training over [N, 64, 16, 16]: one kernel, whose channels' statistics need x
//     walked before the normalization can start: a channel's slab does not fit on chip from a
//     few MiB up, so x is read twice (1.5x).
//   - bf16 GroupNorm + SiLU on the host: two from a few MiB, the conversion of gamma and beta
//     apart (the host would recompute it for every element: test_planner_examples.cpp,
//     LayoutBoundariesAreOneKernelOnEveryTarget); one at 1 MiB, where the launch saved is worth
//     more.
// Column partials cost their write-back while they fit in half the last-level cache (up to 1.1x at
// 768 columns: layer-norm backward's two partials). MI250X's 8 MiB L2 holds them up to a few tens
// of MiB of traffic; past that they are written and read (up to 1.2x).
const Case kCases[] = {
    {"layer_norm_backward.stitch", "layer_norm_backward", 1, 1.1, 0, true, 1.2},
    {"rms_norm_backward.stitch", "rms_norm_backward", 1, 1.1, 0, true, 1.2},
    {"rms_norm_backward.stitch", "rms_norm_backward_bf16", 1, 1.1, 0, true, 1.2},
    {"softmax_backward.stitch", "softmax_backward", 1, 1.1},
    {"bias_gelu_backward.stitch", "bias_gelu_backward", 1, 1.1},
    {"batch_norm_train.stitch", "batch_norm_train", 1, 1.5, 0, false},
    {"cross_entropy_train.stitch", "cross_entropy_train", 1, 1.1},
    {"adam_clip.stitch", "adam_clip", 1, 1.15, 2, false},
    {"batch_norm1d_train.stitch", "batch_norm1d_train", 1, 2.0, 0, true},
    {"batch_norm1d_train.stitch", "batch_norm1d_train_bf16", 1, 2.0, 0, true},
    {"group_norm_silu.stitch", "group_norm_silu", 1, 1.1, 0, false},
    {"group_norm_silu.stitch", "group_norm_silu_bf16", 1, 1.1, 2, false},
};

std::vector<int64_t> sizesOf(const ir::Graph& g, bool rows) {
  std::vector<int64_t> out;
  for (int64_t n = 1; n <= (int64_t{1} << 30); n *= 2) {
    const int64_t bytes = minimalTraffic(g, {{"N", n}});
    if (bytes > 256 * kMiB) break;
    if (bytes >= kMiB) out.push_back(n);
  }
  if (rows) out.push_back(1000);
  return out;
}

TEST(PlanSizes, TrainingGraphsPlanAlikeFromOneToTwoHundredFiftySixMiB) {
  for (const Case& c : kCases) {
    const ir::Graph g = exampleGraph(c.file, c.graph);
    const std::vector<int64_t> sizes = sizesOf(g, c.rows);
    ASSERT_GE(sizes.size(), 8u) << c.graph;
    for (const char* target : {"sm_90", "sm_80", "gfx90a", "host"}) {
      const HardwareProfile hw = *findProfile(target);
      const bool host = std::string_view(target) == "host";
      const size_t kernels = static_cast<size_t>(host && c.hostKernels ? c.hostKernels : c.kernels);
      const double traffic =
          std::string_view(target) == "gfx90a" && c.gfx90aTraffic > 0 ? c.gfx90aTraffic : c.traffic;
      for (int64_t n : sizes) {
        const ir::Bindings b{{"N", n}};
        const Plan p = planGraph(g, b, hw, stitch::testing::plannerOptions(PlannerOptions{}, hw));
        const int64_t minimal = minimalTraffic(g, b);
        SCOPED_TRACE(fmt::format("{} on {} at N={} ({:.1f} MiB minimal)", c.graph, target, n,
                                 static_cast<double>(minimal) / kMiB));
        EXPECT_LE(p.kernels.size(), kernels) << explainText(g, p);
        EXPECT_LE(static_cast<double>(p.bytes), traffic * static_cast<double>(minimal))
            << p.bytes << " bytes planned, " << minimal << " minimal\n"
            << explainText(g, p);
      }
    }
  }
}

// BatchNorm1d over [N, 256] on sm_90 (the issue's 4 MiB case at N = 4096, planned as three
// kernels "fusing does not pay: 115 us fused vs 16 us apart"; 1000 rows, not a power of two; 64
// rows, too few to be worth a split): one kernel moving about the minimal traffic, with no cut.
TEST(PlanSizes, BatchNorm1dIsOneKernelAtSmallSizes) {
  const HardwareProfile hw = *findProfile("sm_90");
  for (const char* graph : {"batch_norm1d_train", "batch_norm1d_train_bf16"}) {
    const ir::Graph g = exampleGraph("batch_norm1d_train.stitch", graph);
    for (int64_t rows : {64, 1000, 4096}) {
      SCOPED_TRACE(fmt::format("{} at N={}", graph, rows));
      const ir::Bindings b{{"N", rows}};
      const Plan p = planGraph(g, b, hw, stitch::testing::plannerOptions(PlannerOptions{}, hw));
      ASSERT_EQ(p.kernels.size(), 1u) << explainText(g, p);
      EXPECT_TRUE(p.cuts.empty());
      EXPECT_LE(static_cast<double>(p.bytes), 1.1 * static_cast<double>(minimalTraffic(g, b)))
          << explainText(g, p);
    }
  }
}

// The issue's three plans, as it measured them on sm_90: RMSNorm backward in bf16 at 640 rows of
// 1024 (two kernels, 5x the minimal traffic, every cut saying the cast of dgamma could not use the
// column sum) and layer-norm backward at 1000 rows (1.17x) are one kernel near the minimal
// traffic, with no cut left to explain.
TEST(PlanSizes, IssueThirtyThreePlans) {
  const HardwareProfile hw = *findProfile("sm_90");
  struct Plan1 {
    const char* file;
    const char* graph;
    int64_t rows;
  };
  for (const Plan1& c : {Plan1{"rms_norm_backward.stitch", "rms_norm_backward_bf16", 640},
                         Plan1{"layer_norm_backward.stitch", "layer_norm_backward", 1000}}) {
    const ir::Graph g = exampleGraph(c.file, c.graph);
    const ir::Bindings b{{"N", c.rows}};
    const Plan p = planGraph(g, b, hw, stitch::testing::plannerOptions(PlannerOptions{}, hw));
    ASSERT_EQ(p.kernels.size(), 1u) << explainText(g, p);
    EXPECT_TRUE(p.cuts.empty());
    EXPECT_LE(static_cast<double>(p.bytes), 1.1 * static_cast<double>(minimalTraffic(g, b)))
        << explainText(g, p);
  }
}

}  // namespace

namespace {

// A column result read per element is complete only after every row, and the cut says so; what
// runs in the combine phase (a cast, an update of a weight by it) is no reason to cut. The old
// reason ("dgf is a column reduction carried as per-worker partials: it is complete only after
// the kernel, so dg cannot use it inside") was given for the cast too.
TEST(PlanSizes, CutsAtColumnResultsSayWhy) {
  const char* text = R"(
graph g(x: bf16[N, 256], dy: bf16[N, 256], w: bf16[256]) {
  xf  = cast(x, to=f32)
  dyf = cast(dy, to=f32)
  wf  = cast(w, to=f32)
  m   = reduce_mean(xf, axes=[1], keepdims=true)
  xc  = sub(xf, m)
  p   = mul(dyf, xc)
  dgf = reduce_sum(p, axes=[0])
  dg  = cast(dgf, to=bf16)
  s   = mul(dgf, 0.01)
  u   = sub(wf, s)
  upd = cast(u, to=bf16)
  yf  = sub(xc, dgf)
  y   = cast(yf, to=bf16)
  return dg, upd, y
})";
  const ir::Graph g = passes::runPasses(ir::parseModule(text, "g.stitch").at(0));
  for (const char* target : {"sm_90", "host"}) {
    SCOPED_TRACE(target);
    const Plan p =
        planGraph(g, {{"N", 4096}}, *findProfile(target),
                  stitch::testing::plannerOptions(PlannerOptions{}, *findProfile(target)));
    // dg and upd ride the column sum's kernel.
    auto kernelOf = [&](const char* name) {
      for (size_t k = 0; k < p.kernels.size(); ++k)
        for (int n : p.kernels[k].nodes)
          if (g.node(n).name == name) return static_cast<int>(k);
      return -1;
    };
    EXPECT_EQ(kernelOf("dg"), kernelOf("dgf")) << explainText(g, p);
    EXPECT_EQ(kernelOf("upd"), kernelOf("dgf")) << explainText(g, p);
    // y, per element, needs the finished sum: it is not in the rows' kernel, and the cut says
    // why (the planner may also put the sum in a column kernel with y, apart from the rows).
    EXPECT_NE(kernelOf("yf"), kernelOf("m")) << explainText(g, p);
    bool said = false;
    for (const CutEdge& c : p.cuts) {
      EXPECT_EQ(c.reason.find("cannot use it inside"), std::string::npos) << c.reason;
      said = said || c.reason.find(
                         "yf (sub, [4096, 256]) reads dgf, a column reduction's result, "
                         "which is complete only after every row") != std::string::npos;
    }
    EXPECT_TRUE(said) << explainText(g, p);
  }
}

}  // namespace
