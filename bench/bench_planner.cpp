// How long the fusion planner takes, as graphs grow: stacked transformer layers (the memory-bound
// parts, testing/transformer_graph.h) of about 50, 1k, 10k and 100k ops, planned for sm_90 with
// the default search. Beam search only runs on graphs of up to PlannerOptions::beamMaxOps ops, so
// the 50-op case measures greedy + beam and the larger ones greedy alone.
//
//   build/<preset>/bench/stitch_bench_planner [--benchmark_filter=...]
//
// `shared`: 1 as Stitch plans (candidates of the same structure share one analysis,
// fusion/cost_memo.h), 0 with every candidate analyzed (PlannerOptions::shareCosts off): the
// same plans, for measuring what the memo saves.
//
// Counters: ops (in the graph), kernels (in the plan), ns/op (planning time per op, which stays
// flat if the planner scales linearly).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>

#include "fusion/hardware.h"
#include "fusion/planner.h"
#include "target/target.h"
#include "testing/transformer_graph.h"

namespace {

using namespace stitch;

// Graphs are built once per size (the 100k-op one takes a while) and outside the timed loop.
const ir::Graph& transformerWithOps(int64_t ops) {
  static std::map<int64_t, ir::Graph> graphs;
  auto it = graphs.find(ops);
  if (it == graphs.end()) it = graphs.emplace(ops, testing::transformerGraphWithOps(ops)).first;
  return it->second;
}

void BM_PlanTransformer(benchmark::State& state) {
  const ir::Graph& g = transformerWithOps(state.range(0));
  // The sm_90 target: its facts are the built-in profile, and the planner prices each candidate
  // on the launch it schedules (fusion/schedule.h), as the driver plans.
  const std::unique_ptr<target::Target> sm90 = target::makeTarget(target::namedTarget("sm_90"));
  const fusion::HardwareProfile* hw = &sm90->facts();
  fusion::PlannerOptions options;
  options.mode = fusion::Mode::Stitch;
  options.search = fusion::Search::Beam;
  options.scheduler = sm90->scheduler();
  options.shareCosts = state.range(1) != 0;

  size_t kernels = 0;
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    fusion::Plan plan = fusion::planGraph(g, /*bindings=*/{}, *hw, options);
    kernels = plan.kernels.size();
    benchmark::DoNotOptimize(kernels);
    benchmark::DoNotOptimize(plan.time);
  }
  std::chrono::duration<double, std::nano> elapsed = std::chrono::steady_clock::now() - start;

  auto ops = static_cast<double>(g.numOps());
  state.counters["ops"] = ops;
  state.counters["kernels"] = static_cast<double>(kernels);
  state.counters["ns/op"] = elapsed.count() / (ops * static_cast<double>(state.iterations()));
}
BENCHMARK(BM_PlanTransformer)
    ->ArgNames({"ops", "shared"})
    ->ArgsProduct({{50, 1'000, 10'000, 100'000}, {1, 0}})
    ->Unit(benchmark::kMillisecond);

// The passes pipeline (src/passes/pipeline.h) gets a benchmark here once it exists.

}  // namespace

BENCHMARK_MAIN();
