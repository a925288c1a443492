// Host kernels through the kernel cache (runtime/cpu/cached_compiler.h), end to end: programs
// that differ only in their reduction kind get their own kernels (issue 11, finding 1), in one
// process and across processes sharing a cache directory; the host key changes with every target
// attribute and option; and every example and a few hundred random graphs, run one after another
// on one shared directory and then again from it, match the reference interpreter.
//
// A HostCompiler made here has its own JIT and memory layer over the DiskCache it is given: a
// fresh one over a used directory sees exactly what a new process would.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/example_graphs.h"
#include "common/planning.h"
#include "common/temp_dir.h"
#include "driver/driver.h"
#include "fusion/hardware.h"
#include "fusion/plan_cache.h"
#include "fusion/planner.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/signature.h"
#include "lower/kernel_program.h"
#include "passes/pipeline.h"
#include "runtime/cpu/arena.h"
#include "runtime/cpu/cached_compiler.h"
#include "runtime/cpu/executor.h"
#include "runtime/cpu/thread_pool.h"
#include "target/keys.h"
#include "testing/random_graph.h"
#include "testing/reference_check.h"

using namespace stitch;
namespace st = stitch::testing;
using rt::cpu::HostCompiler;

namespace {

using stitch::testing::TempDir;

std::unique_ptr<HostCompiler> compilerOver(const std::filesystem::path& dir) {
  return std::make_unique<HostCompiler>(/*memoryCapacity=*/4096,
                                        std::make_unique<rt::DiskCache>(dir));
}

std::string readExample(const std::string& file) {
  std::ifstream f(std::string(STITCH_SOURCE_DIR) + "/examples/" + file);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::unique_ptr<HostCompiler> memoryOnlyCompiler() {
  return std::make_unique<HostCompiler>(/*memoryCapacity=*/4096, rt::DiskCache::disabled());
}

std::vector<uint8_t> encodeTensor(const reference::HostTensor& h) {
  std::vector<uint8_t> bytes(static_cast<size_t>(h.numel() * ir::dtypeBytes(h.dtype)) + 1);
  reference::encode(h, {h.dtype, h.shape, bytes.data()});
  return bytes;
}

// Runs `original` on the host backend's path: the passes, the plan (through `plans` when given:
// a cache of plans->graph(), the passes' result of `original`), the kernels from `compiler`
// (through its cache), the executor (arena, slots, thread pool). Outputs that are inputs or
// repeat an earlier output are copied, as the API does.
// The compiler's target priced with the built-in host profile, not the bandwidth this machine
// measured (and keeps in its cache directory): the plans and kernels these tests count must not
// move with the VM they run on.
rt::Target pricedTarget(const HostCompiler& compiler) {
  rt::Target target = compiler.target();
  target.hostProfile = {};
  return target;
}

std::vector<reference::HostTensor> runOnHost(HostCompiler& compiler, const ir::Graph& original,
                                             const ir::Bindings& b,
                                             const std::vector<reference::HostTensor>& inputs,
                                             fusion::PlanCache* plans = nullptr) {
  const ir::Graph optimized = plans ? ir::Graph() : passes::runPasses(original);
  const ir::Graph& g = plans ? plans->graph() : optimized;
  driver::Build build = driver::build(g, b, pricedTarget(compiler), {}, driver::Stage::Emit, plans);
  std::vector<std::shared_ptr<const rt::cpu::KernelPhases>> held;
  std::vector<rt::cpu::CompiledKernel> kernels;
  for (const rt::KernelArtifact& k : build.artifact.kernels) {
    held.push_back(compiler.compile(k));
    kernels.insert(kernels.end(), held.back()->begin(), held.back()->end());
  }
  std::vector<int> external(g.inputs().begin(), g.inputs().end());
  external.insert(external.end(), g.outputs().begin(), g.outputs().end());
  rt::cpu::SlotPlan slots = rt::cpu::assignSlots(kernels, external);

  auto shapes = ir::concreteShapes(g, b);
  std::vector<std::vector<uint8_t>> in, out;
  for (const reference::HostTensor& t : inputs) in.push_back(encodeTensor(t));
  rt::cpu::ValueBuffers values;
  for (size_t i = 0; i < in.size(); ++i) values.bind(g.inputs()[i], in[i].data());
  for (int o : g.outputs()) {
    int64_t n = 1;
    for (int64_t d : shapes[static_cast<size_t>(o)]) n *= d;
    out.emplace_back(static_cast<size_t>(n * ir::dtypeBytes(g.node(o).type.dtype)) + 1);
  }
  auto outputs = g.outputs();
  auto firstOf = [&](size_t j) {
    return static_cast<size_t>(std::find(outputs.begin(), outputs.end(), outputs[j]) -
                               outputs.begin());
  };
  for (size_t j = 0; j < outputs.size(); ++j)
    if (g.node(outputs[j]).op != ir::OpCode::Input && firstOf(j) == j)
      values.bind(outputs[j], out[j].data());
  rt::cpu::Arena arena;
  rt::cpu::runKernels(kernels, slots, values, arena, rt::cpu::sharedPool());

  std::vector<reference::HostTensor> result;
  for (size_t j = 0; j < outputs.size(); ++j) {
    const int o = outputs[j];
    const void* data = out[firstOf(j)].data();
    if (g.node(o).op == ir::OpCode::Input) {
      auto pos = std::find(g.inputs().begin(), g.inputs().end(), o) - g.inputs().begin();
      data = in[static_cast<size_t>(pos)].data();
    }
    result.push_back(
        reference::decode({g.node(o).type.dtype, shapes[static_cast<size_t>(o)], data}));
  }
  return result;
}

// Empty when `g` run through `compiler` matches the reference; else what differs.
std::string checkAgainstReference(HostCompiler& compiler, const ir::Graph& g, const ir::Bindings& b,
                                  uint64_t seed, fusion::PlanCache* plans = nullptr) {
  auto inputs = st::randomInputs(g, b, seed);
  auto want = st::evaluateReference(g, inputs);
  try {
    return st::compareOutputs(want, runOnHost(compiler, g, b, inputs, plans),
                              st::graphTolerance(g));
  } catch (const std::exception& e) {
    return std::string("exception: ") + e.what();
  }
}

const char* kReductions[] = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod",
                             "reduce_mean"};

ir::Graph reductionGraph(const char* op) {
  return ir::parseModule(fmt::format("graph g(x: f32[3, 25]) {{\n  y = {}(x, axes=[1], "
                                     "keepdims=true)\n  return y\n}}\n",
                                     op),
                         "reduce.stitch")
      .at(0);
}

// Issue 11, finding 1, in one process with the disk layer off: each reduction kind after the
// others used to get the first one's kernel (reduce_max returned the sums).
TEST(HostKernelCache, ReductionKindsGetTheirOwnKernelsInOneProcess) {
  auto compiler = memoryOnlyCompiler();
  for (const char* op : kReductions) {
    ir::Graph g = reductionGraph(op);
    EXPECT_EQ(checkAgainstReference(*compiler, g, {}, 3), "") << op;
  }
  EXPECT_EQ(compiler->stats().compiles, std::size(kReductions));
}

// The same across processes sharing STITCH_CACHE_DIR: each kind compiled by its own "process",
// then each read back from the directory by another.
TEST(HostKernelCache, ReductionKindsGetTheirOwnKernelsFromOneDirectory) {
  TempDir dir;
  for (const char* op : kReductions) {
    auto compiler = compilerOver(dir.path());
    EXPECT_EQ(checkAgainstReference(*compiler, reductionGraph(op), {}, 3), "") << op;
    EXPECT_EQ(compiler->stats().compiles, 1u) << op << " was served another kernel";
  }
  for (const char* op : kReductions) {
    auto compiler = compilerOver(dir.path());
    EXPECT_EQ(checkAgainstReference(*compiler, reductionGraph(op), {}, 4), "") << op;
    EXPECT_EQ(compiler->stats().compiles, 0u) << op;
    EXPECT_EQ(compiler->stats().diskHits, 1u) << op;
  }
}

// Each host target attribute and option changes the key; so do the program and the version.
TEST(HostKernelCache, EveryTargetAttributeAndOptionChangesTheKey) {
  const lower::KernelProgram p = [] {
    ir::Graph g = passes::runPasses(reductionGraph("reduce_sum"));
    fusion::Plan plan =
        fusion::planGraph(g, {}, *fusion::findProfile("host"),
                          stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
    return lower::lowerKernel(g, plan.kernels.at(0), {});
  }();
  const rt::HostTarget target{"x86_64-unknown-linux-gnu", "znver3", "+avx2,+fma,-avx512f",
                              "19.1.7"};
  const rt::HostCompileOptions options{3, "sleef 3.5.1", 64 << 20};
  const std::string base = target::hostKernelKey(p, target, options).canonical();

  std::vector<std::pair<std::string, std::string>> variants;
  auto withTarget = [&](const char* what, auto change) {
    rt::HostTarget t = target;
    auto& [triple, cpu, features, llvmVersion] = t;
    change(triple, cpu, features, llvmVersion);
    variants.emplace_back(what, target::hostKernelKey(p, t, options).canonical());
  };
  withTarget("triple", [](auto& t, auto&, auto&, auto&) { t = "aarch64-unknown-linux-gnu"; });
  withTarget("cpu", [](auto&, auto& c, auto&, auto&) { c = "skylake"; });
  withTarget("a feature off", [](auto&, auto&, auto& f, auto&) { f = "+avx2,-fma,-avx512f"; });
  withTarget("a feature more", [](auto&, auto&, auto& f, auto&) { f += ",+avx512vl"; });
  withTarget("llvm version", [](auto&, auto&, auto&, auto& v) { v = "18.1.8"; });
  // Bytes moved between two attributes.
  withTarget("cpu/features boundary", [](auto&, auto& c, auto& f, auto&) {
    c = "znver3+avx2";
    f = ",+fma,-avx512f";
  });
  auto withOptions = [&](const char* what, auto change) {
    rt::HostCompileOptions o = options;
    auto& [optLevel, mathLibrary, streamingStoreBytes] = o;
    change(optLevel, mathLibrary, streamingStoreBytes);
    variants.emplace_back(what, target::hostKernelKey(p, target, o).canonical());
  };
  withOptions("opt level", [](auto& l, auto&, auto&) { l = 1; });
  withOptions("math library", [](auto&, auto& m, auto&) { m = "sleef 3.6.0"; });
  withOptions("streaming store bytes", [](auto&, auto&, auto& b) { b = 0; });
  {
    rt::CacheKey k = target::hostKernelKey(p, target, options);
    k.version = "0.0.0-other";
    variants.emplace_back("library version", k.canonical());
  }
  {
    lower::KernelProgram q = p;
    q.phases.at(0).accs.at(0).op = lower::ReduceOp::Max;
    variants.emplace_back("reduction kind", target::hostKernelKey(q, target, options).canonical());
  }
  std::set<std::string> distinct = {base};
  for (const auto& [what, key] : variants) {
    EXPECT_TRUE(key != base) << what;
    distinct.insert(key);
  }
  EXPECT_EQ(distinct.size(), variants.size() + 1);
}

// The compiler's own target is complete: the full feature string, not a digest of it.
TEST(HostKernelCache, TheTargetNamesEveryFeature) {
  auto compiler = memoryOnlyCompiler();
  const rt::HostTarget& t = compiler->target().host;
  EXPECT_FALSE(t.triple.empty());
  EXPECT_FALSE(t.cpu.empty());
  EXPECT_FALSE(t.llvmVersion.empty());
  // LLVM reports dozens of x86 features, each "+name" or "-name".
  EXPECT_GT(std::count(t.features.begin(), t.features.end(), ','), 10) << t.features;
  EXPECT_TRUE(t.features.starts_with("+") || t.features.starts_with("-")) << t.features;
}

// Every example and 300 random graphs (each with a reduction also with another reduction kind),
// one after another through one compiler on one shared directory, then again through a fresh
// compiler (a new process) that must take every kernel from the directory: every output matches the
// reference both times.
TEST(HostKernelCache, ExamplesAndRandomGraphsShareOneDirectory) {
  struct Case {
    std::string name;
    ir::Graph graph;
    ir::Bindings bindings;
    uint64_t seed;
  };
  std::vector<Case> cases;
  for (auto& [name, g] : stitch::testdata::exampleGraphs()) {
    ir::Bindings b;
    for (const std::string& s : g.symbols()) b[s] = 5;
    cases.push_back({name, std::move(g), std::move(b), 7});
  }
  const size_t examples = cases.size();
  ASSERT_GT(examples, 10u);
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    st::RandomGraphOptions o;
    o.symbolic = seed % 4 == 0;
    ir::Graph g = st::randomGraph(seed, o);
    ir::Bindings b = st::randomBindings(g, seed);
    // The same graph with its first reduction of another kind: a pair that differs only there
    // (issue 11's collisions), run right after it.
    std::string text = ir::printGraph(g);
    std::optional<ir::Graph> swapped;
    for (size_t k = 0; k < std::size(kReductions) && !swapped; ++k) {
      const std::string from = std::string(kReductions[k]) + "(";
      const size_t at = text.find(from);
      if (at == std::string::npos) continue;
      text.replace(at, from.size() - 1, kReductions[(k + 1 + seed % 4) % std::size(kReductions)]);
      try {
        swapped = ir::parseModule(text, "swapped.stitch").at(0);
      } catch (const std::exception&) {
        // e.g. a mean of an int: not a graph; this seed has no pair
      }
    }
    cases.push_back({"random seed " + std::to_string(seed), std::move(g), b, seed});
    if (swapped)
      cases.push_back({"random seed " + std::to_string(seed) + ", reduction swapped",
                       std::move(*swapped), std::move(b), seed});
  }

  TempDir dir;
  rt::CacheStats pass[2];
  for (int round = 0; round < 2; ++round) {
    auto compiler = compilerOver(dir.path());
    int failures = 0;
    for (const Case& c : cases) {
      std::string f = checkAgainstReference(*compiler, c.graph, c.bindings, c.seed + round);
      if (!f.empty() && failures++ < 5)
        ADD_FAILURE() << "pass " << round + 1 << ", " << c.name << ": " << f;
    }
    EXPECT_EQ(failures, 0) << "pass " << round + 1;
    pass[round] = compiler->stats();
    std::cout << "pass " << round + 1 << ": " << cases.size() << " graphs (" << examples
              << " examples), " << pass[round].toString() << "\n";
  }
  EXPECT_GT(pass[0].compiles, 100u);
  EXPECT_EQ(pass[0].corruptEntries, 0u);
  // The second pass compiles nothing: each distinct kernel comes from the directory once, then
  // from memory.
  EXPECT_EQ(pass[1].compiles, 0u);
  EXPECT_EQ(pass[1].diskHits, pass[0].compiles);
  EXPECT_EQ(pass[1].corruptEntries, 0u);
}

// Shape classes (lower/size_args.h, fusion/plan_cache.h): the memory-bound graph of a
// transformer block at 100 (batch, sequence) pairs in one process compiles at most 3 kernels per
// kernel of its plan, runs the plan search once per plan class (and where a class splits), and
// every result matches the reference. Batch 1 is a class of its own (a size-1 axis broadcasts).
TEST(ShapeClasses, TransformerBlockAt100ShapesCompilesAtMostThreePerKernel) {
  const ir::Graph g = ir::parseModule(readExample("transformer_block.stitch"), "tb.stitch").at(0);
  const ir::Graph optimized = passes::runPasses(g);
  fusion::PlanCache plans(optimized);
  auto compiler = memoryOnlyCompiler();
  std::set<std::pair<int64_t, int64_t>> pairs;
  for (uint64_t i = 0; pairs.size() < 100; ++i) {
    const uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull;
    pairs.emplace(1 + static_cast<int64_t>(h % 4), 2 + static_cast<int64_t>((h >> 20) % 159));
  }
  size_t kernels = 0;
  int failures = 0;
  for (auto [batch, seq] : pairs) {
    const ir::Bindings b = {{"B", batch}, {"S", seq}};
    kernels = std::max(kernels,
                       driver::build(optimized, b, pricedTarget(*compiler), {}, driver::Stage::Plan)
                           .plan.kernels.size());
    std::string f =
        checkAgainstReference(*compiler, g, b, static_cast<uint64_t>(batch * seq), &plans);
    if (!f.empty() && failures++ < 5) ADD_FAILURE() << "B=" << batch << " S=" << seq << ": " << f;
  }
  EXPECT_EQ(failures, 0);
  const rt::CacheStats s = compiler->stats();
  const fusion::PlanCacheStats p = plans.stats();
  std::cout << "100 shapes, " << kernels << " kernels a plan: " << s.toString()
            << "; plans: " << p.searches << " searches, " << p.reuses << " kept, " << p.classes
            << " classes\n";
  EXPECT_GT(s.compiles, 0u);
  EXPECT_LE(s.compiles, 3 * kernels);
  EXPECT_EQ(s.classSizes, 100 * kernels);  // every kernel of every shape ran as a class kernel
  // B in 1..4 and S in 2..160 fall in at most 3 x 7 plan classes; each searches once, or twice
  // where the cost model splits it.
  EXPECT_EQ(p.searches + p.reuses, 100u);
  EXPECT_LE(p.classes, 21u);
  EXPECT_LE(p.searches, 2 * p.classes);
}

// Sharing is sound on every example with symbols and on symbolic random graphs: each at several
// sizes through one compiler (later sizes run the kernels of the first of their class, with
// their own size arguments) matches the reference, and kernels were shared.
TEST(ShapeClasses, ExamplesAndRandomGraphsShareKernelsAcrossSizesSoundly) {
  auto compiler = memoryOnlyCompiler();
  int failures = 0, runs = 0;
  uint64_t reusedPlans = 0;
  auto sweep = [&](const std::string& name, const ir::Graph& g, const ir::Bindings& first) {
    const ir::Graph optimized = passes::runPasses(g);
    fusion::PlanCache plans(optimized);
    // 5, 16, 21 and 56 from 5: the second and third share a plan class.
    for (int64_t scale : {1, 3, 4, 11}) {
      ir::Bindings b = first;
      for (auto& [sym, size] : b) size = size * scale + (scale > 1 ? 1 : 0);
      ++runs;
      std::string f = checkAgainstReference(*compiler, g, b, static_cast<uint64_t>(scale), &plans);
      if (!f.empty() && failures++ < 5) ADD_FAILURE() << name << " x" << scale << ": " << f;
    }
    reusedPlans += plans.stats().reuses;
  };
  for (auto& [name, g] : stitch::testdata::exampleGraphs()) {
    if (g.symbols().empty()) continue;
    ir::Bindings b;
    for (const std::string& sym : g.symbols()) b[sym] = 5;
    sweep(name, g, b);
  }
  for (uint64_t seed = 4; seed <= 240; seed += 4) {
    st::RandomGraphOptions o;
    o.symbolic = true;
    ir::Graph g = st::randomGraph(seed, o);
    if (g.symbols().empty()) continue;
    ir::Bindings b = st::randomBindings(g, seed);
    for (auto& [sym, size] : b) size = std::min<int64_t>(size, 6);
    sweep("random seed " + std::to_string(seed), g, b);
  }
  EXPECT_EQ(failures, 0);
  const rt::CacheStats s = compiler->stats();
  std::cout << runs << " runs: " << s.toString() << "; " << reusedPlans << " ran a kept plan\n";
  EXPECT_GT(reusedPlans, 40u);
  EXPECT_GT(s.shapeClasses, 20u);
  EXPECT_GT(s.classSizes, 2 * s.shapeClasses);  // classes served several sizes each
}

// STITCH_SHAPE_CLASSES=0 compiles every size in: no size arguments, a kernel per row length.
// (A size the code never uses as a value, such as a row kernel's row count, which only the
// launch reads, needs no argument: such kernels share one code either way.)
TEST(ShapeClasses, TheToggleCompilesSizesIn) {
  const ir::Graph g = ir::parseModule(readExample("attention_softmax.stitch"), "a.stitch").at(1);
  ASSERT_EQ(g.name(), "attention_softmax_additive");
  auto compiler = memoryOnlyCompiler();
  auto sizes = [](int64_t s) { return ir::Bindings{{"B", 2}, {"H", 3}, {"S", s}}; };
  ::setenv("STITCH_SHAPE_CLASSES", "0", 1);
  for (int64_t s : {7, 9, 13}) EXPECT_EQ(checkAgainstReference(*compiler, g, sizes(s), 1), "");
  ::unsetenv("STITCH_SHAPE_CLASSES");
  EXPECT_EQ(compiler->stats().compiles, 3u);
  EXPECT_EQ(compiler->stats().shapeClasses, 0u);
  for (int64_t s : {17, 19, 23}) EXPECT_EQ(checkAgainstReference(*compiler, g, sizes(s), 1), "");
  EXPECT_EQ(compiler->stats().compiles, 4u);
  EXPECT_EQ(compiler->stats().shapeClasses, 1u);
  EXPECT_EQ(compiler->stats().classSizes, 3u);
}

// A class kernel's row phases come in two versions (llvm_emitter.cpp, kRowMultiple): rows that
// are a multiple of 64 long run the one that reads the length as such a multiple, others the
// general one. One code serves both: sizes on either side of the choice, first seen on either
// side, compile one kernel and match the reference.
TEST(ShapeClasses, RowLengthsThatAreMultiplesOf64RunTheirOwnVersionOfOneKernel) {
  const ir::Graph g = ir::parseModule(readExample("attention_softmax.stitch"), "a.stitch").at(1);
  ASSERT_EQ(g.name(), "attention_softmax_additive");
  const ir::Graph optimized = passes::runPasses(g);
  fusion::PlanCache plans(optimized);
  auto compiler = memoryOnlyCompiler();
  for (int64_t s : {128, 100, 256, 77, 192, 64, 129}) {
    const ir::Bindings b = {{"B", 2}, {"H", 3}, {"S", s}};
    EXPECT_EQ(checkAgainstReference(*compiler, g, b, static_cast<uint64_t>(s), &plans), "")
        << "S=" << s;
  }
  EXPECT_EQ(compiler->stats().compiles, 1u);
  const driver::Build build =
      driver::build(optimized, {{"B", 2}, {"H", 3}, {"S", 100}}, pricedTarget(*compiler), {},
                    driver::Stage::Emit, &plans);
  const std::string& ir = build.artifact.kernels.at(0).forms.at(0).text;
  EXPECT_NE(ir.find("_multiple("), std::string::npos) << ir;
  EXPECT_NE(ir.find("and i64 %row_length, 63"), std::string::npos) << ir;
}

}  // namespace
