// The host code generator end to end: lowering, LLVM IR, ORC JIT, run, compare with the
// reference. Every example and 500 seeded random graphs (composites on), planned for the host in
// modes stitch and off, compiled kernel by kernel and run serially in plan order with the
// intermediates in plain vectors; plus unit tests of the lowering's index math and of f16/bf16
// rounding on store.
//
// The JIT runs at O3 (the backend's level) for the examples and one random seed in four, at O1
// for the others: a thousand small plans all at O3 would take most of a minute in a Debug build on
// a shared two-core machine. The compile driver builds each plan's artifacts as a program's run
// would; the kernels of one plan are then compiled as one module (compileArtifacts) for the same
// reason.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "codegen/llvm/llvm_emitter.h"
#include "common/example_graphs.h"
#include "common/planning.h"
#include "common/sweep.h"
#include "driver/driver.h"
#include "fusion/explain.h"
#include "fusion/hardware.h"
#include "fusion/planner.h"
#include "ir/graph.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/signature.h"
#include "lower/kernel_program.h"
#include "lower/launch.h"
#include "lower/row_cache.h"
#include "passes/pipeline.h"
#include "runtime/cpu/cached_compiler.h"
#include "runtime/cpu/cpu_compiler.h"
#include "runtime/cpu/math_library.h"
#include "runtime/cpu/orc_jit.h"
#include "runtime/cpu/streaming_stores.h"
#include "runtime/cpu/vector_math.h"
#include "target/cpu/host_schedule.h"
#include "testing/random_graph.h"
#include "testing/reference_check.h"

using namespace stitch;
namespace st = stitch::testing;
using rt::cpu::CompiledKernel;

namespace {

rt::cpu::OrcJit& jitAt(int level) {
  static std::map<int, std::unique_ptr<rt::cpu::OrcJit>> jits;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto& j = jits[level];
  if (!j) {
    auto made = rt::cpu::OrcJit::Create(level);
    if (!made) {
      ADD_FAILURE() << llvm::toString(made.takeError());
      std::abort();
    }
    j = std::move(*made);
  }
  return *j;
}

// Kernel k of g lowered for the host and scheduled as the cpu target schedules it (tiles,
// prefetch, row caches, interleaving: target/cpu/host_schedule.h), without streaming stores.
lower::KernelProgram lowerForHost(const ir::Graph& g, const fusion::Kernel& k,
                                  const ir::Bindings& b) {
  lower::KernelProgram p = lower::lowerKernel(g, k, b);
  target::cpu::scheduleHost(p, fusion::findProfile("host")->taskElements, 0);
  return p;
}

// The tile a scheduled phase runs in, when it is of kind `t` (0 otherwise).
int64_t tileOf(const lower::Phase& ph, lower::HostTiling t) {
  return ph.host.tiling == t ? ph.host.tile : 0;
}

// What the driver emits for a JIT: its machine and options.
rt::Target targetOf(const rt::cpu::OrcJit& jit) {
  rt::Target t;
  t.backend = "cpu";
  t.host = rt::cpu::hostTargetOf(jit);
  t.hostOptions = rt::cpu::hostOptionsOf(jit);
  return t;
}

// The driver's build of g for the host in `mode`, compiled by the JIT at `level` as one module.
struct Compiled {
  driver::Build build;
  std::vector<std::vector<CompiledKernel>> kernels;
};
// streamBytes: HostCompileOptions::streamingStoreBytes (0: no streaming stores, the default of a
// bare JIT's options).
Compiled compileGraph(const ir::Graph& g, const ir::Bindings& b, fusion::Mode mode, int level,
                      rt::cpu::CompileStats* stats = nullptr, int64_t streamBytes = 0) {
  Compiled c;
  rt::Target target = targetOf(jitAt(level));
  target.hostOptions.streamingStoreBytes = streamBytes;
  c.build = driver::build(g, b, target, driver::Options{mode});
  c.kernels = rt::cpu::compileArtifacts(c.build.artifact.kernels, jitAt(level), stats);
  return c;
}

// Runs a plan's compiled kernels serially; returns the graph outputs. Buffers are vectors' own
// storage (misalign < 0), or start `misalign` bytes past a 64-byte boundary.
std::vector<reference::HostTensor> runCompiled(
    const ir::Graph& g, const ir::Bindings& b, const fusion::Plan& plan,
    const std::vector<std::vector<CompiledKernel>>& kernels,
    const std::vector<reference::HostTensor>& inputs, int misalign = -1) {
  auto shapes = ir::concreteShapes(g, b);
  const size_t pad = misalign < 0 ? 0 : 64 + static_cast<size_t>(misalign);
  auto start = [&](std::vector<uint8_t>& v) {
    if (misalign < 0) return v.data();
    auto at = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + ((64 - at % 64) % 64) + static_cast<size_t>(misalign);
  };
  std::map<int, std::vector<uint8_t>> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const reference::HostTensor& h = inputs[i];
    std::vector<uint8_t>& v = values[g.inputs()[i]];
    v.resize(static_cast<size_t>(h.numel() * ir::dtypeBytes(h.dtype)) + 1 + pad);
    reference::encode(h, {h.dtype, h.shape, start(v)});
  }
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    std::map<int, std::vector<uint8_t>> scratch;
    for (const CompiledKernel& ck : kernels[k]) {
      std::vector<void*> ptrs;
      auto bufferOf = [&](const rt::cpu::KernelBuffer& kb, bool write) -> void* {
        auto size = static_cast<size_t>(kb.elements * ir::dtypeBytes(kb.dtype)) + 1 + pad;
        std::vector<uint8_t>& v = kb.value >= 0 ? values[kb.value] : scratch[kb.scratch];
        if (write && v.size() < size) v.resize(size);
        if (v.size() < size)
          throw std::runtime_error(
              "kernel " + std::to_string(k) + " reads " +
              (kb.value >= 0 ? g.node(kb.value).name : "scratch " + std::to_string(kb.scratch)) +
              " before it was written");
        return start(v);
      };
      // Outputs first: a phase may read back what it writes (column partials).
      for (const auto& kb : ck.outputs) bufferOf(kb, true);
      for (const auto& kb : ck.inputs) ptrs.push_back(bufferOf(kb, false));
      for (const auto& kb : ck.outputs) ptrs.push_back(bufferOf(kb, true));
      // A shape-class kernel's size arguments follow its buffers (cpu_kernel.h).
      if (!ck.sizes.empty()) ptrs.push_back(const_cast<int64_t*>(ck.sizes.data()));
      ck.fn(ptrs.data(), 0, ck.units);
    }
  }
  std::vector<reference::HostTensor> out;
  for (int o : g.outputs()) {
    auto it = values.find(o);
    if (it == values.end()) throw std::runtime_error("no kernel wrote output " + g.node(o).name);
    out.push_back(reference::decode({g.node(o).type.dtype, shapes[o], start(it->second)}));
  }
  return out;
}

struct Totals {
  int graphs = 0, kernels = 0, phases = 0, mismatches = 0, plannerFailures = 0;
  int columnPartials = 0;  // phases carrying column partials (lower/column_partials.h)
  int columnTiles = 0;     // phases the emitter runs in column tiles (llvm_emitter.h)
  int elementTiles = 0;    // loop phases the emitter runs in element tiles
  int rowTiles = 0;        // reduce phases whose rows it walks in row tiles
  double buildMs = 0;      // the driver: plan, lower, emit
  rt::cpu::CompileStats stats;
};

// Plans `original` (after the passes) for the host in `mode`, compiles, runs and compares with
// the reference on the original graph. Returns an empty string or the failure.
std::string checkGraph(const ir::Graph& original, const ir::Bindings& b, uint64_t seed,
                       fusion::Mode mode, int level, Totals& totals) {
  ir::Graph g = passes::runPasses(original);
  driver::Build build;
  auto t0 = std::chrono::steady_clock::now();
  try {
    build = driver::build(g, b, targetOf(jitAt(level)), driver::Options{mode});
  } catch (const std::exception& e) {
    // A planner, lowering or emitter bug, not the JIT's; counted apart, and the tests expect none.
    ++totals.plannerFailures;
    std::cout << "the driver failed on seed " << seed << " mode " << fusion::modeName(mode) << ": "
              << e.what() << "\n";
    return {};
  }
  totals.buildMs +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const fusion::Plan& plan = build.plan;
  auto inputs = st::randomInputs(original, b, seed);
  auto want = st::evaluateReference(original, inputs);
  std::string failure;
  try {
    auto kernels = rt::cpu::compileArtifacts(build.artifact.kernels, jitAt(level), &totals.stats);
    auto got = runCompiled(g, b, plan, kernels, inputs);
    failure = st::compareOutputs(want, got, st::graphTolerance(original));
  } catch (const std::exception& e) {
    failure = std::string("exception: ") + e.what();
  }
  ++totals.graphs;
  totals.kernels += static_cast<int>(plan.kernels.size());
  for (const lower::KernelProgram& p : build.programs)
    for (const lower::Phase& ph : p.phases) {
      totals.columnPartials += ph.workers > 0;
      totals.columnTiles += tileOf(ph, lower::HostTiling::Column) > 0;
      totals.elementTiles += tileOf(ph, lower::HostTiling::Element) > 0;
      totals.rowTiles += tileOf(ph, lower::HostTiling::Row) > 0;
    }
  if (!failure.empty()) {
    ++totals.mismatches;
    std::string programs;
    for (const lower::KernelProgram& p : build.programs) programs += lower::printProgram(p);
    return "seed " + std::to_string(seed) + " mode " + std::string(fusion::modeName(mode)) + ": " +
           failure + "\n" + ir::printGraph(original) + "\nafter passes:\n" + ir::printGraph(g) +
           "\n" + programs;
  }
  return {};
}

void report(const char* what, const Totals& t) {
  const auto& s = t.stats;
  std::cout << what << ": " << t.graphs << " graph plans, " << s.kernels << " kernels (" << s.phases
            << " phases, " << t.columnPartials << " with column partials, " << t.columnTiles
            << " in column tiles, " << t.elementTiles << " in element tiles, " << t.rowTiles
            << " in row tiles), " << t.mismatches << " mismatches, " << t.plannerFailures
            << " plans the driver failed to make; per kernel: plan+lower+emit "
            << t.buildMs / std::max(1, s.kernels) << " ms, parse "
            << s.parseMs / std::max(1, s.kernels) << " ms, jit " << s.jitMs / std::max(1, s.kernels)
            << " ms\n";
}

ir::Bindings fives(const ir::Graph& g) {
  ir::Bindings b;
  for (const std::string& s : g.symbols()) b[s] = 5;
  return b;
}

void checkExamples(int level, const char* what) {
  Totals t;
  auto all = stitch::testdata::exampleGraphs();
  ASSERT_FALSE(all.empty());
  for (const auto& [file, g] : all)
    for (fusion::Mode mode : {fusion::Mode::Stitch, fusion::Mode::Off}) {
      std::string f = checkGraph(g, fives(g), 7, mode, level, t);
      EXPECT_TRUE(f.empty()) << file << ": " << f;
    }
  report(what, t);
  EXPECT_EQ(t.plannerFailures, 0);
}

TEST(CpuCodegen, ExamplesMatchReference) { checkExamples(1, "examples O1"); }

TEST(CpuCodegen, ExamplesMatchReferenceAtO3) { checkExamples(3, "examples O3"); }

TEST(CpuCodegen, RandomGraphsMatchReference) {
  Totals t;
  int printed = 0;
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(st::sweepCount(500)); ++seed) {
    st::RandomGraphOptions o;
    o.composites = true;
    o.symbolic = seed % 4 == 0;
    ir::Graph g = st::randomGraph(seed, o);
    ir::Bindings b = st::randomBindings(g, seed);
    for (fusion::Mode mode : {fusion::Mode::Stitch, fusion::Mode::Off}) {
      // One seed in four at O3 (vectorized: reassociated reductions, SLEEF vector math), the rest
      // at O1.
      std::string f = checkGraph(g, b, seed, mode, seed % 4 == 1 ? 3 : 1, t);
      if (!f.empty() && printed++ < 5) ADD_FAILURE() << f;
    }
  }
  report("random graphs O1/O3", t);
  EXPECT_EQ(t.mismatches, 0);
  EXPECT_EQ(t.plannerFailures, 0);
}

// --- Lowering: index math ---------------------------------------------------------------------

ir::Graph parseOne(const char* text) { return ir::parseModule(text, "test.stitch").at(0); }

// The flat source index of every output element of a one-op kernel that loads one input.
std::vector<int64_t> loadIndices(const char* text) {
  ir::Graph g = parseOne(text);
  fusion::PlannerOptions opts;
  opts.mode = fusion::Mode::Off;
  fusion::Plan plan =
      fusion::planGraph(g, {}, *fusion::findProfile("host"),
                        stitch::testing::plannerOptions(opts, *fusion::findProfile("host")));
  EXPECT_EQ(plan.kernels.size(), 1u);
  lower::KernelProgram p = lowerForHost(g, plan.kernels.at(0), {});
  EXPECT_EQ(p.phases.size(), 1u);
  const lower::Phase& ph = p.phases.at(0);
  EXPECT_FALSE(ph.reduce);
  int load = -1;
  for (int id : ph.elems.insts)
    if (ph.insts[static_cast<size_t>(id)].kind == lower::InstKind::Load) load = id;
  EXPECT_GE(load, 0) << lower::printProgram(p);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < ph.total; ++i)
    out.push_back(lower::evalIndex(ph, ph.insts[static_cast<size_t>(load)].args[0], 0, i));
  return out;
}

TEST(CpuLowering, TransposeIndexMath) {
  // x[2,3] -> y[3,2]: y[i,j] = x[j,i].
  auto idx = loadIndices("graph t(x: f32[2, 3]) {\n y = transpose(x, perm=[1, 0])\n return y\n}\n");
  EXPECT_EQ(idx, (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
}

TEST(CpuLowering, SliceIndexMath) {
  // x[4,5][1:4:2, 0:5:2] -> y[2,3]: rows 1, 3; columns 0, 2, 4.
  auto idx = loadIndices(
      "graph s(x: f32[4, 5]) {\n y = slice(x, starts=[1, 0], ends=[4, 5], steps=[2, 2])\n "
      "return y\n}\n");
  EXPECT_EQ(idx, (std::vector<int64_t>{5, 7, 9, 15, 17, 19}));
}

TEST(CpuLowering, BroadcastIndexMath) {
  auto idx =
      loadIndices("graph b(x: f32[3, 1]) {\n y = broadcast_to(x, shape=[2, 3, 2])\n return y\n}\n");
  EXPECT_EQ(idx, (std::vector<int64_t>{0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2}));
}

// The instruction ids of the loads of `node` in block b of phase ph of program p.
std::vector<int> loadsOf(const lower::KernelProgram& p, const lower::Phase& ph,
                         const lower::Block& b, int node) {
  std::vector<int> out;
  for (int id : b.insts) {
    const lower::Inst& in = ph.insts[static_cast<size_t>(id)];
    if (in.kind == lower::InstKind::Load &&
        p.params[static_cast<size_t>(ph.buffers[static_cast<size_t>(in.buffer)])].value == node)
      out.push_back(id);
  }
  return out;
}

// On a GPU (one grid for the whole loop) a concat is a select over its parts, each read at a
// clamped, always in-bounds index.
TEST(CpuLowering, ConcatOnAGpuClampsEachPartAndSelects) {
  ir::Graph g =
      parseOne("graph c(a: f32[2, 1], b: f32[2, 2]) {\n y = concat(a, b, axis=1)\n return y\n}\n");
  fusion::PlannerOptions opts;
  opts.mode = fusion::Mode::Off;
  const fusion::HardwareProfile hw = *fusion::findProfile("sm_90");  // findProfile's is a value
  fusion::Plan plan = fusion::planGraph(g, {}, hw, stitch::testing::plannerOptions(opts, hw));
  lower::KernelProgram p = lower::lowerKernel(g, plan.kernels.at(0), {}, lower::launchTarget(hw));
  ASSERT_EQ(p.phases.size(), 1u) << lower::printProgram(p);
  const lower::Phase& ph = p.phases.at(0);
  std::vector<int> loads;
  for (int id : ph.elems.insts)
    if (ph.insts[static_cast<size_t>(id)].kind == lower::InstKind::Load) loads.push_back(id);
  ASSERT_EQ(loads.size(), 2u) << lower::printProgram(p);
  // Each part is read at an in-bounds (clamped) index for every output element.
  std::vector<int64_t> a, b;
  for (int64_t i = 0; i < 6; ++i) {
    a.push_back(lower::evalIndex(ph, ph.insts[static_cast<size_t>(loads[0])].args[0], 0, i));
    b.push_back(lower::evalIndex(ph, ph.insts[static_cast<size_t>(loads[1])].args[0], 0, i));
  }
  EXPECT_EQ(a, (std::vector<int64_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(b, (std::vector<int64_t>{0, 0, 1, 2, 2, 3}));
}

// Whether phase ph computes a select (a concat's choice between its parts).
bool selects(const lower::Phase& ph) {
  return std::any_of(ph.insts.begin(), ph.insts.end(), [](const lower::Inst& in) {
    return in.kind == lower::InstKind::Op && in.op == ir::OpCode::Select;
  });
}

// On the host a concat is walked part by part (one phase per part, a box of the domain): each
// phase reads one part contiguously and stores it where the part lies in the result; no clamp,
// no select. (A select over clamped reads of every part took 20x eager's time for torch.cat.)
TEST(CpuLowering, ConcatOnTheHostWalksEachPartInItsOwnPhase) {
  ir::Graph g = parseOne(
      "graph c(a: f32[2, 1, 3], b: f32[2, 2, 3]) {\n y = concat(a, b, axis=1)\n return y\n}\n");
  fusion::PlannerOptions opts;
  opts.mode = fusion::Mode::Off;
  fusion::Plan plan =
      fusion::planGraph(g, {}, *fusion::findProfile("host"),
                        stitch::testing::plannerOptions(opts, *fusion::findProfile("host")));
  lower::KernelProgram p = lowerForHost(g, plan.kernels.at(0), {});
  ASSERT_EQ(p.phases.size(), 2u) << lower::printProgram(p);
  const int parts[2] = {*g.find("a"), *g.find("b")};
  const int64_t lens[2] = {1, 2}, offsets[2] = {0, 1};
  for (size_t j = 0; j < 2; ++j) {
    const lower::Phase& ph = p.phases[j];
    EXPECT_FALSE(selects(ph)) << lower::printProgram(p);
    EXPECT_EQ(ph.total, 2 * lens[j] * 3);
    std::vector<int> loads = loadsOf(p, ph, ph.elems, parts[j]);
    ASSERT_EQ(loads.size(), 1u) << lower::printProgram(p);
    int store = -1;
    for (int id : ph.elems.insts)
      if (ph.insts[static_cast<size_t>(id)].kind == lower::InstKind::Store) store = id;
    ASSERT_GE(store, 0);
    for (int64_t i = 0; i < ph.total; ++i) {
      EXPECT_EQ(lower::evalIndex(ph, ph.insts[static_cast<size_t>(loads[0])].args[0], 0, i), i);
      const int64_t row = i / (lens[j] * 3), rest = i % (lens[j] * 3);
      EXPECT_EQ(lower::evalIndex(ph, ph.insts[static_cast<size_t>(store)].args[0], 0, i),
                row * 9 + offsets[j] * 3 + rest);
    }
  }
  Totals t;
  std::string f = checkGraph(g, {}, 5, fusion::Mode::Off, 1, t);
  EXPECT_TRUE(f.empty()) << f;
}

// GroupNorm's layout boundary (issue 15): statistics over groups of a [N, 2, 8] view, the
// per-channel affine transform in the [N, 4, 2, 2] layout. One row reduction kernel: a unit is
// a group; the element loop reads x and writes y at the unit's flat index plus the loop index
// (reshapes keep the flat index), and reads gamma at that index's channel.
TEST(CpuLowering, ReshapedViewsKeepTheFlatIndexAcrossARowReduction) {
  ir::Graph g = passes::runPasses(
      parseOne("graph gn(x: f32[N, 4, 2, 2], gamma: f32[4]) {\n xg = reshape(x, shape=[N, 2, 8])\n"
               " m = reduce_mean(xg, axes=[2], keepdims=true)\n xc = sub(xg, m)\n"
               " xr = reshape(xc, shape=[N, 4, 2, 2])\n gr = reshape(gamma, shape=[4, 1, 1])\n"
               " y = mul(xr, gr)\n return y\n}\n"));
  const ir::Bindings b{{"N", 3}};
  fusion::Plan plan =
      fusion::planGraph(g, b, *fusion::findProfile("host"),
                        stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
  ASSERT_EQ(plan.kernels.size(), 1u);
  lower::KernelProgram p = lowerForHost(g, plan.kernels[0], b);
  ASSERT_EQ(p.phases.size(), 1u) << lower::printProgram(p);
  const lower::Phase& ph = p.phases[0];
  ASSERT_TRUE(ph.reduce);
  EXPECT_EQ(ph.units, 6);
  EXPECT_EQ(ph.rowLength, 8);
  std::vector<int> x = loadsOf(p, ph, ph.elems, *g.find("x"));
  std::vector<int> gamma = loadsOf(p, ph, ph.elems, *g.find("gamma"));
  ASSERT_EQ(x.size(), 1u) << lower::printProgram(p);
  ASSERT_EQ(gamma.size(), 1u) << lower::printProgram(p);
  int store = -1;
  for (int id : ph.elems.insts)
    if (ph.insts[static_cast<size_t>(id)].kind == lower::InstKind::Store) store = id;
  ASSERT_GE(store, 0);
  auto at = [&](int id, int64_t unit, int64_t k) {
    return lower::evalIndex(ph, ph.insts[static_cast<size_t>(id)].args[0], unit, k);
  };
  for (int64_t u = 0; u < 6; ++u)
    for (int64_t k = 0; k < 8; ++k) {
      int64_t flat = u * 8 + k;  // [N, 2, 8] and [N, 4, 2, 2] alike
      EXPECT_EQ(at(x[0], u, k), flat);
      EXPECT_EQ(at(store, u, k), flat);
      EXPECT_EQ(at(gamma[0], u, k), flat / 4 % 4) << "unit " << u << " k " << k;
    }
  Totals t;
  for (int64_t n : {1, 3, 5}) {
    std::string f = checkGraph(g, {{"N", n}}, 3, fusion::Mode::Stitch, 1, t);
    EXPECT_TRUE(f.empty()) << f;
  }
  EXPECT_EQ(t.plannerFailures, 0);
}

// GPT-2's qkv gradient beside its bias gradient: the heads' gradients viewed as [B, T, C],
// concatenated, viewed as [B * T, 3C] and summed over the rows. The column sum's kept axis is
// the concat's (through the view), so its rows are walked one part at a time (three reduce
// phases of C columns each), each part read where it lies, no select (4.2 ms -> 0.1 ms on the
// dev VM for [8, 128, 4, 64] parts: the select's clamps had kept the columns from tiling).
TEST(CpuLowering, AColumnSumOfAViewedConcatWalksEachPartsColumns) {
  ir::Graph g = parseOne(
      "graph q(a: f32[2, 3, 2, 4], b: f32[2, 3, 2, 4], c: f32[2, 3, 2, 4]) {\n"
      " t0 = reshape(a, shape=[2, 3, 8])\n t1 = reshape(b, shape=[2, 3, 8])\n"
      " t2 = reshape(c, shape=[2, 3, 8])\n t3 = concat(t2, t1, t0, axis=2)\n"
      " t4 = reshape(t3, shape=[6, 24])\n t5 = reduce_sum(t4, axes=[0], keepdims=true)\n"
      " return t4, t5\n}\n");
  ir::Graph opt = passes::runPasses(g);
  fusion::Plan plan =
      fusion::planGraph(opt, {}, *fusion::findProfile("host"),
                        stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
  ASSERT_EQ(plan.kernels.size(), 1u);
  lower::KernelProgram p = lowerForHost(opt, plan.kernels[0], {});
  ASSERT_EQ(p.phases.size(), 3u) << lower::printProgram(p);
  for (const lower::Phase& ph : p.phases) {
    EXPECT_TRUE(ph.reduce);
    EXPECT_EQ(ph.units, 8);
    EXPECT_FALSE(selects(ph)) << lower::printProgram(p);
  }
  Totals t;
  std::string f = checkGraph(g, {}, 5, fusion::Mode::Stitch, 1, t);
  EXPECT_TRUE(f.empty()) << f;
  EXPECT_EQ(t.plannerFailures, 0);
}

// A rotary embedding's backward beside its Linear layer's bias gradient (Qwen2's q and k
// projections have biases): the halves' concat runs along the head dim of [B, H, T, D], a factor
// of the column sum's kept axis (H * D of [B * T, H * D], through a transpose). The domain is
// refined to [B * T, H, D], so the boxes hold whole columns of one half each: no select, 4x
// faster than eager on the 2-core VM where the select ran 2x slower. Halves of 8 (runs shorter
// than kMinRefinedRun) keep the select. Without the column sum, the loop phase's domain has the
// concat's axis as it is. Each against the reference.
TEST(CpuLowering, AConcatAlongAFactorOfAKeptAxisWalksBoxesOfARefinedDomain) {
  const char* text =
      "graph r(g: f32[2, 3, 4, {D}], c: f32[1, 1, 4, {D}], s: f32[1, 1, 4, {D}]) {{\n"
      " t0 = mul(g, c)\n"
      " t1 = slice(t0, starts=[0, 0, 0, 0], ends=[2, 3, 4, {H}], steps=[1, 1, 1, 1])\n"
      " t2 = slice(t0, starts=[0, 0, 0, {H}], ends=[2, 3, 4, {D}], steps=[1, 1, 1, 1])\n"
      " t3 = neg(t1)\n t4 = full(shape=[2, 3, 4, {H}], value=0, dtype=f32)\n"
      " t5 = concat(t4, t3, axis=3)\n t6 = concat(t2, t4, axis=3)\n t7 = add(t5, t6)\n"
      " t8 = mul(g, s)\n t9 = add(t7, t8)\n t10 = transpose(t9, perm=[0, 2, 1, 3])\n"
      " t11 = reshape(t10, shape=[8, {HD}])\n{tail}}}\n";
  for (int64_t half : {16, 8})
    for (bool sum : {true, false}) {
      std::string src =
          fmt::format(fmt::runtime(text), fmt::arg("D", 2 * half), fmt::arg("H", half),
                      fmt::arg("HD", 6 * half),
                      fmt::arg("tail", sum ? " t12 = reduce_sum(t11, axes=[0], keepdims=true)\n"
                                             " return t11, t12\n"
                                           : " return t11\n"));
      ir::Graph g = parseOne(src.c_str());
      ir::Graph opt = passes::runPasses(g);
      fusion::Plan plan =
          fusion::planGraph(opt, {}, *fusion::findProfile("host"),
                            stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
      ASSERT_EQ(plan.kernels.size(), 1u) << src;
      lower::KernelProgram p = lowerForHost(opt, plan.kernels[0], {});
      // A loop phase's domain has the concat's axis (the kernel's is [B, H, T, D]): boxes at
      // any length.
      const bool boxes = half >= 16 || !sum;
      ASSERT_EQ(p.phases.size(), boxes ? 2u : 1u) << lower::printProgram(p);
      for (const lower::Phase& ph : p.phases) {
        EXPECT_EQ(ph.reduce, sum);
        if (sum && boxes) {
          EXPECT_EQ(ph.domain, (std::vector<int64_t>{8, 3, 2 * half})) << lower::printProgram(p);
          EXPECT_EQ(ph.units, 3 * half);  // the box's columns: 3 heads x a half
        }
        EXPECT_EQ(selects(ph), !boxes) << lower::printProgram(p);
      }
      Totals t;
      std::string f = checkGraph(g, {}, 5, fusion::Mode::Stitch, 1, t);
      EXPECT_TRUE(f.empty()) << src << f;
      EXPECT_EQ(t.plannerFailures, 0);
    }
}

// Grouped-query attention's keys (Qwen2): rotated, then repeated for the query heads, so the
// kernel's domain is the broadcast [B, KV, G, T, D] and the concat ([B, KV, T, D]) is smaller
// than it. Its head-dim axis is still the domain's last: one phase per half, no select (the
// bf16 piece ran 0.44 ms with the select, 0.045 ms in boxes: bf16 has no gathers).
TEST(CpuLowering, AConcatReadAtBroadcastPositionsWalksBoxes) {
  for (const char* dt : {"f32", "bf16"}) {
    std::string text = fmt::format(
        "graph k(a: {0}[16, 64], c: f32[1, 1, 8, 32], s: f32[1, 1, 8, 32]) {{\n"
        " t1 = reshape(a, shape=[2, 8, 2, 32])\n t2 = transpose(t1, perm=[0, 2, 1, 3])\n"
        " t3 = cast(t2, to=f32)\n t4 = mul(t3, c)\n"
        " t5 = slice(t2, starts=[0, 0, 0, 0], ends=[2, 2, 8, 16], steps=[1, 1, 1, 1])\n"
        " t6 = slice(t2, starts=[0, 0, 0, 16], ends=[2, 2, 8, 32], steps=[1, 1, 1, 1])\n"
        " t7 = neg(t6)\n t8 = concat(t7, t5, axis=3)\n t9 = cast(t8, to=f32)\n"
        " t10 = mul(t9, s)\n t11 = add(t4, t10)\n t12 = reshape(t11, shape=[2, 2, 1, 8, 32])\n"
        " t13 = broadcast_to(t12, shape=[2, 2, 2, 8, 32])\n"
        " t14 = reshape(t13, shape=[2, 4, 8, 32])\n t15 = cast(t14, to={0})\n return t15\n}}\n",
        dt);
    ir::Graph g = parseOne(text.c_str());
    ir::Graph opt = passes::runPasses(g);
    fusion::Plan plan =
        fusion::planGraph(opt, {}, *fusion::findProfile("host"),
                          stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
    ASSERT_EQ(plan.kernels.size(), 1u) << text;
    lower::KernelProgram p = lowerForHost(opt, plan.kernels[0], {});
    ASSERT_EQ(p.phases.size(), 2u) << lower::printProgram(p);
    for (const lower::Phase& ph : p.phases) EXPECT_FALSE(selects(ph)) << lower::printProgram(p);
    Totals t;
    std::string f = checkGraph(g, {}, 5, fusion::Mode::Stitch, 1, t);
    EXPECT_TRUE(f.empty()) << text << f;
    EXPECT_EQ(t.plannerFailures, 0);
  }
}

// Rotary embeddings' concat of two halves computed in the kernel (issue 15): one loop kernel,
// walked half by half; every output element reads x at its own position within a half in both
// halves (the rotation pairs element j with j + 2), and the result matches the reference.
TEST(CpuLowering, ConcatOfHalvesComputedInTheKernel) {
  ir::Graph g = parseOne(
      "graph r(x: f32[3, 4], c: f32[2]) {\n x1 = slice(x, starts=[0, 0], ends=[3, 2])\n"
      " x2 = slice(x, starts=[0, 2], ends=[3, 4])\n a = mul(x1, c)\n lo = sub(a, x2)\n"
      " hi = add(x2, x1)\n y = concat(lo, hi, axis=1)\n return y\n}\n");
  fusion::Plan plan =
      fusion::planGraph(g, {}, *fusion::findProfile("host"),
                        stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
  ASSERT_EQ(plan.kernels.size(), 1u);
  lower::KernelProgram p = lowerForHost(g, plan.kernels[0], {});
  // One phase per half (each a [3, 2] box of the [3, 4] domain).
  ASSERT_EQ(p.phases.size(), 2u) << lower::printProgram(p);
  for (size_t half = 0; half < 2; ++half) {
    const lower::Phase& ph = p.phases[half];
    ASSERT_FALSE(ph.reduce);
    EXPECT_FALSE(selects(ph)) << lower::printProgram(p);
    std::vector<int> x = loadsOf(p, ph, ph.elems, *g.find("x"));
    for (int64_t i = 0; i < ph.total; ++i) {
      std::set<int64_t> read;
      for (int id : x)
        read.insert(lower::evalIndex(ph, ph.insts[static_cast<size_t>(id)].args[0], 0, i));
      int64_t row = i / 2, j = i % 2;
      EXPECT_EQ(read, (std::set<int64_t>{row * 4 + j, row * 4 + 2 + j}))
          << "half " << half << ", element " << i << "\n"
          << lower::printProgram(p);
    }
  }
  Totals t;
  std::string f = checkGraph(g, {}, 5, fusion::Mode::Stitch, 1, t);
  EXPECT_TRUE(f.empty()) << f;
  EXPECT_EQ(t.plannerFailures, 0);
}

// A kernel of two unconnected parts: a row reduction over [8, 4], and beside it an output
// broadcast to [4, 8] from another output of shape [8, 1]. The analysis placed both over the
// kernel's [8, 4] domain; a loop over the second part's own [4, 8] could not store the [8, 1]
// output, so that part runs over the kernel's domain too.
TEST(CpuLowering, APartInOtherCoordinatesRunsOverTheKernelsDomain) {
  ir::Graph g = parseOne(
      "graph adv(x: f32[8, 4], u: f32[8, 1]) {\n r = reduce_sum(x, axes=[1], keepdims=true)\n"
      " q = exp(u)\n q2 = reshape(q, shape=[1, 8])\n t = broadcast_to(q2, shape=[4, 8])\n"
      " t2 = mul(t, 2)\n return r, q, t2\n}\n");
  fusion::Plan plan =
      fusion::planGraph(g, {}, *fusion::findProfile("host"),
                        stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
  ASSERT_EQ(plan.kernels.size(), 1u);
  lower::KernelProgram p = lowerForHost(g, plan.kernels[0], {});
  ASSERT_EQ(p.phases.size(), 2u) << lower::printProgram(p);
  for (const lower::Phase& ph : p.phases) {
    EXPECT_EQ(ph.domain, (std::vector<int64_t>{8, 4})) << ph.name;
    EXPECT_TRUE(ph.reduce) << ph.name;
  }
  Totals t;
  std::string f = checkGraph(g, {}, 5, fusion::Mode::Stitch, 1, t);
  EXPECT_TRUE(f.empty()) << f;
  EXPECT_EQ(t.plannerFailures, 0);
}

// Layout boundaries over many shapes (issue 15): GroupNorm with its group view and channel
// layout (channels per group, spatial size, batch), and rotary-style concats of halves computed
// in the kernel along the last or an outer axis, beside a transpose of a computed value. Each is
// planned for the host, run, and compared with the reference; most plan into one kernel.
TEST(CpuLowering, LayoutBoundariesOnManyShapes) {
  Totals t;
  int graphs = 0, oneKernel = 0;
  for (int64_t groups : {1, 2, 3})
    for (int64_t perGroup : {1, 2, 4})
      for (int64_t hw : {1, 3, 4}) {
        int64_t c = groups * perGroup;
        std::string text = fmt::format(
            "graph gn(x: f32[N, {0}, {2}, 2], gamma: f32[{0}], beta: f32[{0}]) {{\n"
            " xg = reshape(x, shape=[N, {1}, -1])\n"
            " m = reduce_mean(xg, axes=[2], keepdims=true)\n xc = sub(xg, m)\n"
            " sq = mul(xc, xc)\n v = reduce_mean(sq, axes=[2], keepdims=true)\n"
            " ve = add(v, 1e-5)\n r = rsqrt(ve)\n xn = mul(xc, r)\n"
            " xr = reshape(xn, shape=[N, {0}, {2}, 2])\n g = reshape(gamma, shape=[{0}, 1, 1])\n"
            " b = reshape(beta, shape=[{0}, 1, 1])\n y0 = mul(xr, g)\n y1 = add(y0, b)\n"
            " y = silu(y1)\n return y\n}}\n",
            c, groups, hw);
        ir::Graph g = parseOne(text.c_str());
        for (int64_t n : {1, 3}) {
          ir::Bindings b{{"N", n}};
          std::string f =
              checkGraph(g, b, static_cast<uint64_t>(n + c), fusion::Mode::Stitch, 1, t);
          EXPECT_TRUE(f.empty()) << f;
          ir::Graph opt = passes::runPasses(g);
          oneKernel +=
              fusion::planGraph(opt, b, *fusion::findProfile("host"),
                                stitch::testing::plannerOptions({}, *fusion::findProfile("host")))
                  .kernels.size() == 1;
          ++graphs;
        }
      }
  for (int64_t half : {1, 2, 3})
    for (int axis : {1, 3}) {
      std::string text = fmt::format(
          "graph rope(x: f32[2, 4, 3, {0}], cs: f32[3, {1}]) {{\n"
          " x1 = slice(x, starts=[0, 0, 0, 0], ends=[2147483647, 2147483647, 2147483647, {1}])\n"
          " x2 = slice(x, starts=[0, 0, 0, {1}], ends=[2, 4, 3, {0}])\n"
          " a = mul(x1, cs)\n e = exp(x2)\n lo = sub(a, e)\n hi = add(e, x1)\n"
          " y = concat(lo, hi, axis={2})\n t = transpose(e, perm=[0, 2, 1, 3])\n"
          " return y, t\n}}\n",
          2 * half, half, axis);
      ir::Graph g = parseOne(text.c_str());
      std::string f =
          checkGraph(g, {}, static_cast<uint64_t>(half + axis), fusion::Mode::Stitch, 1, t);
      EXPECT_TRUE(f.empty()) << f;
      oneKernel +=
          fusion::planGraph(passes::runPasses(g), {}, *fusion::findProfile("host"),
                            stitch::testing::plannerOptions({}, *fusion::findProfile("host")))
              .kernels.size() == 1;
      ++graphs;
    }
  EXPECT_EQ(t.plannerFailures, 0);
  EXPECT_EQ(t.mismatches, 0);
  EXPECT_GT(oneKernel, graphs / 2) << oneKernel << " of " << graphs << " graphs in one kernel";
  std::cout << oneKernel << " of " << graphs << " layout-boundary graphs in one kernel\n";
}

TEST(CpuLowering, RowReductionHasStagesAndRowUnits) {
  ir::Graph g = passes::runPasses(
      parseOne("graph s(x: f32[4, 8]) {\n y = softmax(x, axis=-1)\n return y\n}\n"));
  fusion::Plan plan =
      fusion::planGraph(g, {}, *fusion::findProfile("host"),
                        stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
  ASSERT_EQ(plan.kernels.size(), 1u);
  lower::KernelProgram p = lowerForHost(g, plan.kernels[0], {});
  ASSERT_EQ(p.phases.size(), 1u);
  const lower::Phase& ph = p.phases[0];
  EXPECT_TRUE(ph.reduce);
  EXPECT_EQ(ph.units, 4);
  EXPECT_EQ(ph.rowLength, 8);
  EXPECT_EQ(ph.stages.size(), 2u) << lower::printProgram(p);  // max, then sum of exp
}

TEST(CpuLowering, GlobalReductionBecomesPhases) {
  // A row reduction and a second-level reduction of its rows: a grid barrier.
  ir::Graph g = parseOne(
      "graph s(x: f32[64, 512]) {\n r = reduce_sum(x, axes=[1], keepdims=true)\n"
      " t = reduce_max(r)\n y = sub(x, t)\n z = mul(y, r)\n return z\n}\n");
  fusion::Plan plan =
      fusion::planGraph(g, {}, *fusion::findProfile("host"),
                        stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
  Totals t;
  std::string f = checkGraph(g, {}, 3, fusion::Mode::Stitch, 1, t);
  EXPECT_TRUE(f.empty()) << f;
  bool barrier = false;
  for (const auto& k : plan.kernels) {
    bool global = std::any_of(k.edges.begin(), k.edges.end(), [](const fusion::Edge& e) {
      return e.scheme == fusion::Scheme::Global;
    });
    if (!global) continue;
    barrier = true;
    // Store r per row, reduce it in one unit, then the rest with t read back.
    lower::KernelProgram p = lowerForHost(g, k, {});
    EXPECT_EQ(p.phases.size(), 3u) << lower::printProgram(p);
    EXPECT_EQ(p.scratchSlots, 2) << lower::printProgram(p);
  }
  EXPECT_TRUE(barrier) << "the planner no longer stitches across a grid barrier here";
}

// Few, very long rows are split over several units and combined by a second phase
// (lower/split_rows.h), for every reduction op and dtype; other shapes are left alone.
TEST(CpuLowering, LongRowsAreSplitAndMatchTheReference) {
  const char* ops[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"};
  for (const char* dt : {"f32", "bf16", "f64"})
    for (const char* op : ops) {
      std::string text = fmt::format(
          "graph s(x: {0}[R, N]) {{\n y = mul(x, 0.999)\n r = {1}(y, axes=[1], "
          "keepdims=true)\n z = add(r, 1.0)\n return z, r\n}}\n",
          dt, op);
      ir::Graph g = parseOne(text.c_str());
      for (auto [rows, n] : {std::pair<int64_t, int64_t>{1, 1 << 18}, {3, 3 << 16}, {2, 1000}}) {
        ir::Bindings b{{"R", rows}, {"N", n}};
        fusion::Plan plan =
            fusion::planGraph(g, b, *fusion::findProfile("host"),
                              stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
        ASSERT_EQ(plan.kernels.size(), 1u);
        lower::KernelProgram p = lowerForHost(g, plan.kernels[0], b);
        EXPECT_EQ(p.phases.size(), n >= (1 << 16) ? 2u : 1u) << text << lower::printProgram(p);
        Totals t;
        std::string f = checkGraph(g, b, 5, fusion::Mode::Stitch, 1, t);
        EXPECT_TRUE(f.empty()) << text << " rows " << rows << " x " << n << ": " << f;
      }
    }
}

// Row and column reductions of one tensor in one kernel (lower/column_partials.h): the column
// sums ride the rows phase as per-worker partials. Every float dtype, sum and mean, a column
// reduction of a computed value and of a kernel input, and row counts around the worker count
// (64 on the host: fewer rows than workers, one more, many), including none.
TEST(CpuLowering, ColumnPartialsMatchTheReference) {
  for (const char* dt : {"f32", "bf16", "f16", "f64"})
    for (const char* op : {"reduce_sum", "reduce_mean"}) {
      std::string text = fmt::format(
          "graph s(x: {0}[R, N], dy: {0}[R, N]) {{\n m = reduce_mean(x, axes=[1], keepdims=true)"
          "\n xc = sub(x, m)\n g = mul(dy, xc)\n dg = {1}(g, axes=[0])\n db = {1}(dy, axes=[0], "
          "keepdims=true)\n return xc, dg, db\n}}\n",
          dt, op);
      ir::Graph g = parseOne(text.c_str());
      for (auto [rows, n] :
           {std::pair<int64_t, int64_t>{0, 8}, {1, 7}, {3, 33}, {64, 16}, {65, 100}, {1000, 24}}) {
        ir::Bindings b{{"R", rows}, {"N", n}};
        ir::Graph opt = passes::runPasses(g);
        fusion::Plan plan =
            fusion::planGraph(opt, b, *fusion::findProfile("host"),
                              stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
        // One row: the column reductions reduce a size-1 axis (no partials to carry).
        if (rows > 1) {
          ASSERT_EQ(plan.kernels.size(), 1u) << text << fusion::explainText(opt, plan);
          lower::KernelProgram p = lowerForHost(opt, plan.kernels[0], b);
          EXPECT_TRUE(std::any_of(p.phases.begin(), p.phases.end(),
                                  [](const lower::Phase& ph) { return ph.workers > 0; }))
              << text << lower::printProgram(p);
        }
        Totals t;
        std::string f = checkGraph(g, b, 5, fusion::Mode::Stitch, 1, t);
        EXPECT_TRUE(f.empty()) << text << " rows " << rows << " x " << n << ": " << f;
      }
    }
}

// Values of column results run in the combine phase that completes them (issue 33): the cast of
// an f32 column sum to the tensors' dtype, as mixed-precision training writes dgamma, and a weight
// updated by a column sum and a column mean (a kernel input and a recomputed cast read at the
// column's index). One kernel whose last phase stores them, at row counts around the host's 64
// workers and with no rows (every column sum 0, every mean 0/0).
TEST(CpuLowering, ValuesOfColumnResultsRunInTheCombinePhase) {
  for (const char* dt : {"f32", "bf16", "f16"}) {
    std::string text = fmt::format(
        "graph s(x: {0}[R, N], dy: {0}[R, N], w: {0}[N]) {{\n"
        " xf = cast(x, to=f32)\n dyf = cast(dy, to=f32)\n wf = cast(w, to=f32)\n"
        " m = reduce_mean(xf, axes=[1], keepdims=true)\n xc = sub(xf, m)\n"
        " dxf = mul(dyf, xc)\n dx = cast(dxf, to={0})\n"
        " dgf = reduce_sum(dxf, axes=[0])\n dbf = reduce_mean(dyf, axes=[0], keepdims=true)\n"
        " dg = cast(dgf, to={0})\n s = mul(dgf, 0.01)\n u = sub(wf, s)\n e = exp(dbf)\n"
        " v = add(u, e)\n upd = cast(v, to={0})\n return dx, dg, upd\n}}\n",
        dt);
    ir::Graph g = parseOne(text.c_str());
    for (auto [rows, n] :
         {std::pair<int64_t, int64_t>{0, 8}, {3, 33}, {64, 16}, {65, 100}, {1000, 24}}) {
      ir::Bindings b{{"R", rows}, {"N", n}};
      ir::Graph opt = passes::runPasses(g);
      fusion::Plan plan =
          fusion::planGraph(opt, b, *fusion::findProfile("host"),
                            stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
      if (rows > 1) {
        ASSERT_EQ(plan.kernels.size(), 1u) << text << fusion::explainText(opt, plan);
        lower::KernelProgram p = lowerForHost(opt, plan.kernels[0], b);
        const lower::Phase& combine = p.phases.back();
        std::set<std::string> stored;
        for (int i = combine.numInputs; i < static_cast<int>(combine.buffers.size()); ++i) {
          const lower::Param& q = p.params[static_cast<size_t>(combine.buffers[i])];
          if (q.value >= 0) stored.insert(opt.node(q.value).name);
        }
        EXPECT_EQ(stored, (std::set<std::string>{"dg", "upd"})) << lower::printProgram(p);
      }
      Totals t;
      std::string f = checkGraph(g, b, 5, fusion::Mode::Stitch, 1, t);
      EXPECT_TRUE(f.empty()) << text << " rows " << rows << " x " << n << ": " << f;
    }
  }
}

// Tall column reductions split their rows over sub-columns (lower/split_rows.h), with an
// elementwise output computed beside them in the split phase.
TEST(CpuLowering, TallColumnsAreSplitAndMatchTheReference) {
  for (const char* dt : {"f32", "bf16"})
    for (const char* op : {"reduce_sum", "reduce_mean", "reduce_max"}) {
      std::string text = fmt::format(
          "graph s(h: {0}[R, N], dy: {0}[R, N]) {{\n e = exp(h)\n dh = mul(dy, e)\n"
          " r = {1}(dh, axes=[0])\n return dh, r\n}}\n",
          dt, op);
      ir::Graph g = parseOne(text.c_str());
      // 300 rows split into sub-columns of 75; 301 (odd) do not split.
      for (auto [rows, n, split] : {std::tuple<int64_t, int64_t, bool>{4096, 40, true},
                                    {1536, 3, true},
                                    {300, 40, true},
                                    {301, 40, false}}) {
        ir::Bindings b{{"R", rows}, {"N", n}};
        ir::Graph opt = passes::runPasses(g);
        fusion::Plan plan =
            fusion::planGraph(opt, b, *fusion::findProfile("host"),
                              stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
        ASSERT_EQ(plan.kernels.size(), 1u) << text << fusion::explainText(opt, plan);
        lower::KernelProgram p = lowerForHost(opt, plan.kernels[0], b);
        EXPECT_EQ(p.phases.size(), split ? 2u : 1u) << text << lower::printProgram(p);
        Totals t;
        std::string f = checkGraph(g, b, 5, fusion::Mode::Stitch, 1, t);
        EXPECT_TRUE(f.empty()) << text << " rows " << rows << " x " << n << ": " << f;
      }
    }
}

// Column and middle-axis reductions run in column tiles (llvm_emitter.h), with an elementwise
// output of the same walk beside them: every reduction and dtype, unit counts that leave partial
// tiles, tall columns that lower/split_rows.h splits into sub-columns (their combine phase is tiled
// too), and a middle axis whose units tile only in groups of 64; each against the reference.
TEST(CpuLowering, ColumnTilesMatchTheReference) {
  struct Case {
    const char* shape;
    const char* axes;
    ir::Bindings b;
  };
  const Case cases[] = {{"[R, N]", "[0]", {{"R", 700}, {"N", 300}}},
                        {"[R, N]", "[0]", {{"R", 8192}, {"N", 96}}},
                        {"[A, R, N]", "[1]", {{"A", 3}, {"R", 200}, {"N", 64}}}};
  for (const char* dt : {"f32", "bf16", "i32"})
    for (const char* op :
         {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"}) {
      if (std::string_view(dt) == "i32" && std::string_view(op) == "reduce_mean") continue;
      for (const Case& c : cases) {
        std::string text = fmt::format(
            "graph s(x: {0}{1}, y: {0}{1}) {{\n p = mul(x, y)\n r = {2}(p, axes={3})\n"
            " q = {2}(x, axes={3})\n e = add(p, y)\n return r, q, e\n}}\n",
            dt, c.shape, op, c.axes);
        ir::Graph g = parseOne(text.c_str());
        Totals t;
        std::string f = checkGraph(g, c.b, 7, fusion::Mode::Stitch, 1, t);
        EXPECT_TRUE(f.empty()) << text << f;
        EXPECT_GT(t.columnTiles, 0) << text;
        // The elementwise output is stored by a tiled phase's walk.
        ir::Graph opt = passes::runPasses(g);
        int tiledWithElems = 0;
        std::string programs;
        for (const fusion::Kernel& k :
             fusion::planGraph(opt, c.b, *fusion::findProfile("host"),
                               stitch::testing::plannerOptions({}, *fusion::findProfile("host")))
                 .kernels) {
          lower::KernelProgram prog = lowerForHost(opt, k, c.b);
          programs += lower::printProgram(prog);
          for (const lower::Phase& ph : prog.phases)
            tiledWithElems += tileOf(ph, lower::HostTiling::Column) > 0 && !ph.elems.insts.empty();
        }
        EXPECT_GT(tiledWithElems, 0) << text << programs;
      }
    }
}

// Loop phases whose operands broadcast along inner axes run in element tiles
// (llvm_emitter.h): a bias over the last axis, a per-channel value over a middle axis; extents
// that tile by a power of two (3072, 256) or by themselves (100, 37), one too short to be worth
// a tile (7: the flat loop), partial tiles at the chunks' ends; a rotary embedding's halves (runs
// of 32 in a transposed view: bf16 has no gather, so its flat loop ran 8x slower than its tiles);
// each against the reference.
TEST(CpuLowering, ElementTilesMatchTheReference) {
  struct Case {
    const char* text;
    ir::Bindings b;
    bool tiled;
  };
  const Case cases[] = {
      {"graph g(h: {0}[R, C], bias: {0}[C], r: {0}[R, C]) {{\n a = add(h, bias)\n"
       " e = erf(a)\n y = add(e, r)\n return y\n}}\n",
       {{"R", 37}, {"C", 3072}},
       true},
      {"graph g(h: {0}[R, C], bias: {0}[C], r: {0}[R, C]) {{\n a = add(h, bias)\n"
       " e = tanh(a)\n y = mul(e, r)\n return y\n}}\n",
       {{"R", 300}, {"C", 100}},
       true},
      {"graph g(h: {0}[R, C], bias: {0}[C], r: {0}[R, C]) {{\n a = add(h, bias)\n"
       " y = mul(a, r)\n return y\n}}\n",
       {{"R", 300}, {"C", 37}},
       true},
      {"graph g(h: {0}[R, C], bias: {0}[C], r: {0}[R, C]) {{\n a = add(h, bias)\n"
       " y = mul(a, r)\n return y\n}}\n",
       {{"R", 300}, {"C", 7}},
       false},
      {"graph g(x: {0}[N, C, S], s: {0}[C, 1]) {{\n y = mul(x, s)\n z = exp(y)\n return z\n}}\n",
       {{"N", 5}, {"C", 24}, {"S", 256}},
       true},
      {"graph g(m: {0}[256, 256], c: f32[1, 1, 32, 64], s: f32[1, 1, 32, 64]) {{\n"
       " t = reshape(m, shape=[8, 32, 4, 64])\n u = transpose(t, perm=[0, 2, 1, 3])\n"
       " lo = slice(u, starts=[0, 0, 0, 0], ends=[8, 4, 32, 32], steps=[1, 1, 1, 1])\n"
       " hi = slice(u, starts=[0, 0, 0, 32], ends=[8, 4, 32, 64], steps=[1, 1, 1, 1])\n"
       " n = neg(hi)\n r = concat(n, lo, axis=3)\n uc = cast(u, to=f32)\n"
       " rc = cast(r, to=f32)\n a = mul(uc, c)\n b = mul(rc, s)\n y = add(a, b)\n"
       " z = cast(y, to={0})\n w = transpose(z, perm=[0, 2, 1, 3])\n return w\n}}\n",
       {},
       true}};
  for (const char* dt : {"f32", "bf16"})
    for (const Case& c : cases) {
      std::string text = fmt::format(fmt::runtime(c.text), dt);
      ir::Graph g = parseOne(text.c_str());
      ir::Graph opt = passes::runPasses(g);
      fusion::Plan plan =
          fusion::planGraph(opt, c.b, *fusion::findProfile("host"),
                            stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
      int tiled = 0;
      for (const fusion::Kernel& k : plan.kernels)
        for (const lower::Phase& ph : lowerForHost(opt, k, c.b).phases)
          tiled += tileOf(ph, lower::HostTiling::Element) > 0;
      EXPECT_EQ(tiled > 0, c.tiled) << text;
      Totals t;
      std::string f = checkGraph(g, c.b, 3, fusion::Mode::Stitch, 1, t);
      EXPECT_TRUE(f.empty()) << text << f;
    }
}

// Reduce phases whose walks divide the position in the row run them in row tiles
// (llvm_emitter.h): GroupNorm + SiLU with its per-channel affine transform inside the group's
// row, in f32 and bf16, against the reference.
TEST(CpuLowering, RowTilesMatchTheReference) {
  const char* text = R"(
graph gn(x: f32[N, 64, 16, 16], gamma: f32[64], beta: f32[64]) {
  xg   = reshape(x, shape=[N, 8, 2048])
  mean = reduce_mean(xg, axes=[2], keepdims=true)
  xc   = sub(xg, mean)
  sq   = mul(xc, xc)
  var  = reduce_mean(sq, axes=[2], keepdims=true)
  ve   = add(var, 1e-5)
  rstd = rsqrt(ve)
  xn   = mul(xc, rstd)
  xr   = reshape(xn, shape=[N, 64, 16, 16])
  g    = reshape(gamma, shape=[64, 1, 1])
  bb   = reshape(beta, shape=[64, 1, 1])
  y0   = mul(xr, g)
  y1   = add(y0, bb)
  s    = sigmoid(y1)
  y    = mul(y1, s)
  return y
})";
  ir::Graph g = parseOne(text);
  ir::Bindings b{{"N", 3}};
  ir::Graph opt = passes::runPasses(g);
  int tiled = 0;
  std::string programs;
  for (const fusion::Kernel& k :
       fusion::planGraph(opt, b, *fusion::findProfile("host"),
                         stitch::testing::plannerOptions({}, *fusion::findProfile("host")))
           .kernels) {
    lower::KernelProgram prog = lowerForHost(opt, k, b);
    programs += lower::printProgram(prog);
    for (const lower::Phase& ph : prog.phases) tiled += tileOf(ph, lower::HostTiling::Row) > 0;
  }
  EXPECT_GT(tiled, 0) << programs;
  Totals t;
  std::string f = checkGraph(g, b, 5, fusion::Mode::Stitch, 1, t);
  EXPECT_TRUE(f.empty()) << f;
}

// Row caches (lower/row_cache.h): softmax's exp is computed in the walk that sums it and kept
// for the output walk; of a chain of costly values only the outermost the later walk needs is
// kept. Both run against the reference (a row tile with a cache too: the channel's scale is
// read at k / 256).
TEST(CpuLowering, RowCachesKeepCostlyValuesForLaterWalks) {
  struct Case {
    const char* text;
    ir::OpCode kept;  // the op of the one cached value
    bool rowTiled = false;
  };
  const Case cases[] = {
      {R"(
graph sm(x: f32[N, 1000]) {
  y = softmax(x, axis=-1)
  return y
})",
       ir::OpCode::Exp},
      {R"(
graph chain(x: f32[N, 300]) {
  m = reduce_max(x, axes=[1], keepdims=true)
  d = sub(x, m)
  e = exp(d)
  l = log1p(e)
  s = reduce_sum(l, axes=[1], keepdims=true)
  y = div(l, s)
  return y
})",
       ir::OpCode::Log1p},
      {R"(
graph tiled(x: f32[N, 2048], scale: f32[8]) {
  xs = reshape(x, shape=[N, 8, 256])
  sc = reshape(scale, shape=[8, 1])
  z  = mul(xs, sc)
  zf = reshape(z, shape=[N, 2048])
  y  = softmax(zf, axis=-1)
  return y
})",
       ir::OpCode::Exp, true},
  };
  for (const Case& c : cases) {
    ir::Graph g = parseOne(c.text);
    ir::Bindings b{{"N", 5}};
    ir::Graph opt = passes::runPasses(g);
    int slots = 0;
    std::string programs;
    for (const fusion::Kernel& k :
         fusion::planGraph(opt, b, *fusion::findProfile("host"),
                           stitch::testing::plannerOptions({}, *fusion::findProfile("host")))
             .kernels) {
      lower::KernelProgram prog = lowerForHost(opt, k, b);
      programs += lower::printProgram(prog);
      for (const lower::Phase& ph : prog.phases) {
        lower::RowCache rc = lower::rowCache(ph, 1 << 20);
        for (const lower::RowCache::Slot& slot : rc.slots) {
          ++slots;
          EXPECT_EQ(ph.insts[static_cast<size_t>(slot.producer)].op, c.kept) << programs;
        }
        int loads = 0;
        for (int l : rc.loadSlot) loads += l >= 0;
        EXPECT_EQ(loads, static_cast<int>(rc.slots.size())) << programs;
        EXPECT_TRUE(lower::rowCache(ph, 4).slots.empty()) << "a row of 300 f32 is over 4 bytes";
        if (c.rowTiled && ph.reduce) {
          EXPECT_GT(tileOf(ph, lower::HostTiling::Row), 0) << programs;
        }
      }
    }
    EXPECT_EQ(slots, 1) << programs;
    for (int level : {1, 3}) {
      Totals t;
      std::string f = checkGraph(g, b, 5, fusion::Mode::Stitch, level, t);
      EXPECT_TRUE(f.empty()) << f;
    }
  }
}

// Whether any kernel of `c` names buffers for streaming stores (runtime/cpu/streaming_stores.h).
bool streamsAny(const Compiled& c) {
  for (const rt::KernelArtifact& k : c.build.artifact.kernels)
    if (k.forms.at(0).text.find(rt::cpu::kStreamingBuffersAttr) != std::string::npos) return true;
  return false;
}

// Runs `c` on inputs from `seed` with its buffers at each of `misaligns` (see runCompiled): ""
// if every run matches the reference, else the first mismatch and its misalignment.
std::string mismatchAtAlignments(const ir::Graph& g, const ir::Bindings& b, const Compiled& c,
                                 uint64_t seed, std::initializer_list<int> misaligns) {
  std::vector<reference::HostTensor> inputs = st::randomInputs(g, b, seed);
  auto want = st::evaluateReference(g, inputs);
  for (int misalign : misaligns) {
    auto got = runCompiled(g, b, c.build.plan, c.kernels, inputs, misalign);
    std::string f = st::compareOutputs(want, got, st::graphTolerance(g));
    if (!f.empty()) return f + "\nmisaligned by " + std::to_string(misalign);
  }
  return "";
}

// Streaming stores (runtime/cpu/streaming_stores.h), forced on for small tensors: the phases that
// wait on memory name their written buffers, a phase bound by transcendentals (softmax) does
// not, and the results match the reference with buffers aligned to 64 bytes (the non-temporal
// path), off by 4 or 32 bytes (the plain path, or each path for half the stores), and vectors'.
TEST(CpuCodegen, StreamingStoresMatchTheReferenceAlignedOrNot) {
  struct Case {
    const char* text;
    bool streams;
  };
  const Case cases[] = {
      {R"(
graph ln(x: f32[N, 256], g: f32[256], b: f32[256]) {
  y = layer_norm(x, g, b, axis=-1, eps=1e-5)
  return y
})",
       true},
      {R"(
graph adam(p: f32[N, 256], gr: f32[N, 256], m: f32[N, 256], v: f32[N, 256]) {
  m1 = mul(m, 0.9)
  g1 = mul(gr, 0.1)
  m2 = add(m1, g1)
  g2 = mul(gr, gr)
  va = abs(v)
  v1 = mul(va, 0.999)
  v2 = add(v1, g2)
  s  = sqrt(v2)
  d  = add(s, 1e-8)
  u  = div(m2, d)
  p2 = sub(p, u)
  return p2, m2, v2
})",
       true},
      {R"(
graph half(x: f16[N, 256], y: f16[N, 256]) {
  z = add(x, y)
  w = mul(z, y)
  return w
})",
       true},
      {R"(
graph sm(x: f32[N, 256]) {
  y = softmax(x, axis=-1)
  return y
})",
       false},
  };
  for (const Case& c : cases) {
    ir::Graph g = passes::runPasses(parseOne(c.text));
    ir::Bindings b{{"N", 37}};
    Compiled compiled = compileGraph(g, b, fusion::Mode::Stitch, 3, nullptr, /*streamBytes=*/1);
    EXPECT_EQ(streamsAny(compiled), c.streams) << c.text;
    EXPECT_EQ(mismatchAtAlignments(g, b, compiled, 7, {-1, 0, 4, 32}), "") << c.text;
  }
}

// Next-row prefetch (PhaseEmitter::prefetchNext): a row phase whose first walk reads rows of 16 KB
// or more prefetches the next row during its second walk (a later stage, or the element loop of
// a one-stage phase); shorter rows do not. A prefetch is only a hint: what can go wrong is the
// second walk, split into blocks around the prefetches, so the results must match the reference
// with rows that end mid-block, and with the streaming stores such phases take whatever their
// transcendentals (forced on for small tensors).
TEST(CpuCodegen, NextRowPrefetchInLongRowsMatchesTheReference) {
  struct Case {
    const char* text;
    bool prefetches;
  };
  const Case cases[] = {
      {R"(
graph sm(x: f32[N, 4100]) {
  y = softmax(x, axis=-1)
  return y
})",
       true},
      {R"(
graph ce(logits: f32[N, 4500], labels: i64[N, 1]) {
  m      = reduce_max(logits, axes=[1], keepdims=true)
  d      = sub(logits, m)
  e      = exp(d)
  s      = reduce_sum(e, axes=[1], keepdims=true)
  lse    = log(s)
  lp     = sub(d, lse)
  cls    = iota(shape=[N, 4500], axis=1, dtype=i64)
  hit    = eq(cls, labels)
  picked = select(hit, lp, 0)
  nll    = reduce_sum(picked, axes=[1], keepdims=true)
  p      = div(e, s)
  return nll, p
})",
       true},
      {R"(
graph centered(x: f32[N, 5000]) {
  s = reduce_sum(x, axes=[1], keepdims=true)
  y = sub(x, s)
  return y
})",
       true},
      {R"(
graph short(x: f32[N, 1000]) {
  y = softmax(x, axis=-1)
  return y
})",
       false},
  };
  for (const Case& c : cases) {
    ir::Graph g = passes::runPasses(parseOne(c.text));
    ir::Bindings b{{"N", 5}};
    bool prefetches = false;
    for (const fusion::Kernel& k :
         fusion::planGraph(g, b, *fusion::findProfile("host"),
                           stitch::testing::plannerOptions({}, *fusion::findProfile("host")))
             .kernels)
      prefetches =
          prefetches ||
          codegen::programIR(lowerForHost(g, k, b), "t").find("llvm.prefetch") != std::string::npos;
    EXPECT_EQ(prefetches, c.prefetches) << c.text;
    Compiled compiled = compileGraph(g, b, fusion::Mode::Stitch, 3, nullptr, /*streamBytes=*/1);
    EXPECT_TRUE(streamsAny(compiled) || !c.prefetches) << c.text;
    EXPECT_EQ(mismatchAtAlignments(g, b, compiled, 11, {-1, 0}), "") << c.text;
  }
}

// Kernels compiled from several threads at once on one JIT, then run.
TEST(CpuCodegen, ConcurrentCompiles) {
  auto all = stitch::testdata::exampleGraphs();
  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < failures.size(); ++t)
    threads.emplace_back([&, t] {
      Totals totals;
      for (size_t i = t; i < all.size(); i += failures.size()) {
        std::string f =
            checkGraph(all[i].second, fives(all[i].second), 11, fusion::Mode::Stitch, 1, totals);
        if (!f.empty()) failures[t] += f;
      }
    });
  for (auto& th : threads) th.join();
  for (const auto& f : failures) EXPECT_TRUE(f.empty()) << f;
}

// --- f16 / bf16 stores round to nearest even ---------------------------------------------------

TEST(CpuCodegen, HalfStoresRoundToNearestEven) {
  ir::Graph g = parseOne(
      "graph h(x: f32[12]) {\n a = cast(x, to=f16)\n b = cast(x, to=bf16)\n return a, b\n}\n");
  double inf = std::numeric_limits<double>::infinity();
  std::vector<double> xs = {1.0 + std::ldexp(1.0, -11),      // f16 tie -> 1 (even)
                            1.0 + 3 * std::ldexp(1.0, -11),  // f16 tie -> 1 + 2^-9 (even)
                            1.0 + std::ldexp(1.0, -8),       // bf16 tie -> 1
                            1.0 + 3 * std::ldexp(1.0, -8),   // bf16 tie -> 1 + 2^-6
                            -(1.0 + 3 * std::ldexp(1.0, -11)),
                            65520.0,  // rounds to f16 inf
                            70000.0,
                            std::ldexp(1.0, -25),  // f16 subnormal tie -> 0
                            3 * std::ldexp(1.0, -25),
                            std::numeric_limits<double>::quiet_NaN(),
                            inf,
                            0.1};
  reference::HostTensor in;
  in.dtype = ir::DType::F32;
  in.shape = {12};
  for (double x : xs) in.floats.push_back(ir::roundToFloat(x, ir::DType::F32));
  Compiled c = compileGraph(g, {}, fusion::Mode::Off, 3);
  auto got = runCompiled(g, {}, c.build.plan, c.kernels, {in});
  auto want = st::evaluateReference(g, std::vector<reference::HostTensor>{in});
  ASSERT_EQ(got.size(), 2u);
  for (size_t o = 0; o < 2; ++o)
    for (size_t i = 0; i < xs.size(); ++i) {
      double w = want[o].floats[i], v = got[o].floats[i];
      if (std::isnan(w)) EXPECT_TRUE(std::isnan(v)) << o << " " << i;
      else EXPECT_EQ(v, w) << "output " << o << " element " << i << " of " << in.floats[i];
    }
}

// A bf16 op rounds its result where it computes it (as PyTorch rounds each op's), and its store
// writes those bits without rounding them a second time: one round-to-nearest-even (its NaN test,
// `fcmp uno`) per rounded result in the emitted IR, none for a bf16 value loaded and stored.
// The values are the reference's (the sigmoid's intermediate cast rounds as eager's does).
TEST(CpuCodegen, Bf16ResultsRoundOnceBeforeTheirStore) {
  ir::Graph g = parseOne(
      "graph s(a: bf16[64, 48], b: bf16[64, 48]) {\n f = cast(a, to=f32)\n"
      " e = sigmoid(f)\n h = cast(e, to=bf16)\n y = mul(h, b)\n c = add(a, b)\n"
      " return y, a, c\n}\n");
  fusion::PlannerOptions opts;
  opts.mode = fusion::Mode::Stitch;
  fusion::Plan plan =
      fusion::planGraph(g, {}, *fusion::findProfile("host"),
                        stitch::testing::plannerOptions(opts, *fusion::findProfile("host")));
  ASSERT_EQ(plan.kernels.size(), 1u);
  lower::KernelProgram p = lowerForHost(g, plan.kernels[0], {});
  const std::string ir = codegen::programIR(p, "s");
  size_t roundings = 0;
  for (size_t at = ir.find("fcmp uno"); at != std::string::npos; at = ir.find("fcmp uno", at + 1))
    ++roundings;
  EXPECT_EQ(roundings, 3u) << ir;  // h, y and c; the copy of a none
  Totals t;
  std::string f = checkGraph(g, {}, 7, fusion::Mode::Stitch, 3, t);
  EXPECT_TRUE(f.empty()) << f;
}

// Element loops whose body evaluates a transcendental or a division ask LLVM to interleave them
// (llvm_emitter.cpp, "Interleaved element loops"): a sigmoid and a GELU do; a loop of adds and a
// softmax's row walks (a reduce phase) keep LLVM's choice. Each still computes what the
// reference does.
TEST(CpuCodegen, LatencyBoundElementLoopsAreInterleaved) {
  struct Case {
    const char* text;
    bool interleaved;
  };
  const Case cases[] = {
      {"graph s(a: bf16[64, 48], b: bf16[64, 48]) {\n f = cast(a, to=f32)\n e = sigmoid(f)\n"
       " h = cast(e, to=bf16)\n y = mul(h, b)\n return y\n}\n",
       true},
      {"graph g(x: f32[4096]) {\n t = mul(x, 0.7071067811865476)\n e = erf(t)\n"
       " u = add(e, 1)\n v = mul(x, u)\n return v\n}\n",
       true},
      {"graph a(x: f32[4096], y: f32[4096]) {\n s = add(x, y)\n t = mul(s, 2)\n return t\n}\n",
       false},
      {"graph m(x: f32[64, 300]) {\n mx = reduce_max(x, axes=[1], keepdims=true)\n"
       " d = sub(x, mx)\n e = exp(d)\n s = reduce_sum(e, axes=[1], keepdims=true)\n"
       " p = div(e, s)\n return p\n}\n",
       false},
  };
  for (const Case& c : cases) {
    ir::Graph g = parseOne(c.text);
    fusion::PlannerOptions opts;
    opts.mode = fusion::Mode::Stitch;
    fusion::Plan plan =
        fusion::planGraph(g, {}, *fusion::findProfile("host"),
                          stitch::testing::plannerOptions(opts, *fusion::findProfile("host")));
    ASSERT_EQ(plan.kernels.size(), 1u) << c.text;
    lower::KernelProgram p = lowerForHost(g, plan.kernels[0], {});
    const std::string ir = codegen::programIR(p, "k");
    EXPECT_EQ(ir.find("llvm.loop.interleave.count") != std::string::npos, c.interleaved)
        << c.text << ir;
    Totals t;
    std::string f = checkGraph(g, {}, 11, fusion::Mode::Stitch, 3, t);
    EXPECT_TRUE(f.empty()) << f;
  }
}

// The inline f32 transcendentals (codegen/llvm/inline_math.h) at their edges: NaN, infinities,
// signed zeros, the overflow threshold, subnormal inputs and results (rounded once), |x| past the
// clamps of erf and tanh, log and log1p at 0, -1, below their domain and at the largest floats.
// Against the function in double rounded to f32: equal where that is 0, +-1, an infinity or NaN,
// else within the function's bound plus one ULP (a subnormal's ULP is the smallest subnormal).
TEST(CpuCodegen, InlineTranscendentalsAtTheirEdges) {
  ir::Graph g = parseOne(
      "graph e(x: f32[96]) {\n a = exp(x)\n b = erf(x)\n c = tanh(x)\n d = log(x)\n"
      " e = log1p(x)\n return a, b, c, d, e\n}\n");
  struct Fn {
    const char* name;
    double (*ref)(double);
    int ulps;
  };
  const Fn fns[] = {{"exp", [](double x) { return std::exp(x); }, 2},
                    {"erf", [](double x) { return std::erf(x); }, 7},
                    {"tanh", [](double x) { return std::tanh(x); }, 6},
                    {"log", [](double x) { return std::log(x); }, 2},
                    {"log1p", [](double x) { return std::log1p(x); }, 3}};
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> xs = {
      std::nan(""), inf,   -inf,       0.0,       -0.0,      88.72,      88.7228,   88.73,   89.0,
      100.0,        -87.3, -87.34,     -90.0,     -95.5,     -100.0,     -103.2,    -103.97, -104.0,
      -110.0,       1e-30, -1e-30,     1e-10,     3.83,      -3.83,      3.999,     4.0,     4.001,
      -4.5,         1e-45, 0.5,        -0.5,      1.0,       -1.0,       2.0,       8.99,    9.0,
      9.01,         -9.02, 20.0,       1e-38,     1.2e-38,   3.4e38,     -0.999999, -0.5,    1e-7,
      -1e-7,        6e-8,  0.70710677, 1.4142135, 1.0000001, 0.99999994, -1.0000001};
  for (int i = 0; xs.size() < 96; ++i) xs.push_back(-104.0 + 193.0 * i / 43.0);
  reference::HostTensor in;
  in.dtype = ir::DType::F32;
  in.shape = {96};
  for (double x : xs) in.floats.push_back(ir::roundToFloat(x, ir::DType::F32));
  Compiled c = compileGraph(g, {}, fusion::Mode::Stitch, 3);
  auto got = runCompiled(g, {}, c.build.plan, c.kernels, {in});
  ASSERT_EQ(got.size(), std::size(fns));
  for (size_t i = 0; i < xs.size(); ++i) {
    double x = in.floats[i];
    for (size_t o = 0; o < std::size(fns); ++o) {
      auto want = static_cast<float>(fns[o].ref(x));
      auto v = static_cast<float>(got[o].floats[i]);
      std::string what = fmt::format("{} of {}: got {}, want {}", fns[o].name, x, v, want);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(v)) << what;
      } else if (want == 0 || std::isinf(want) || std::fabs(want) == 1) {
        EXPECT_EQ(v, want) << what;
        EXPECT_EQ(std::signbit(v), std::signbit(want)) << what;
      } else {
        float ulp = std::max(std::nextafter(std::fabs(want), INFINITY) - std::fabs(want),
                             std::numeric_limits<float>::denorm_min());
        EXPECT_LE(std::fabs(v - want), fns[o].ulps * ulp) << what;
      }
    }
  }
}

// pow with constant exponents, expanded by the passes (src/passes/expand_pow.h) into products,
// sqrt, rsqrt and reciprocals, on the cpu backend against pow on the reference: every special
// value pow defines (signed zeros, infinities, NaN, negative bases of half-integer powers).
TEST(CpuCodegen, ExpandedPowsMatchPowOnSpecialValues) {
  for (const char* dtype : {"f32", "f64", "f16", "bf16"}) {
    std::string text = fmt::format(
        "graph p(x: {0}[64]) {{\n a = pow(x, 2)\n b = pow(x, 3)\n c = pow(x, -1)\n"
        " d = pow(x, 0.5)\n e = pow(x, -0.5)\n f = pow(x, 1.5)\n g = pow(x, -2.5)\n"
        " h = pow(x, 0)\n i = pow(x, 16)\n return a, b, c, d, e, f, g, h, i\n}}\n",
        dtype);
    ir::Graph g = parseOne(text.c_str());
    ir::DType t = g.node(g.inputs()[0]).type.dtype;
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> xs = {0.0,   -0.0, 1.0,  -1.0,  inf,   -inf,  std::nan(""),
                              0.5,   -0.5, 2.0,  -2.0,  3.25,  -3.25, 1e-3,
                              -1e-3, 7.5,  -7.5, 0.999, 1.001, 40.0};
    for (int i = 0; xs.size() < 64; ++i)
      xs.push_back(std::ldexp(1.0 + 0.37 * i, i % 9 - 4) * (i % 2 ? -1 : 1));
    reference::HostTensor in;
    in.dtype = t;
    in.shape = {64};
    for (double x : xs) in.floats.push_back(ir::roundToFloat(x, t));
    ir::Graph optimized = passes::runPasses(g);
    int pows = 0;
    for (const ir::Node& n : optimized.nodes()) pows += n.op == ir::OpCode::Pow;
    EXPECT_EQ(pows, 0) << dtype;
    Compiled c = compileGraph(optimized, {}, fusion::Mode::Stitch, 3);
    auto got = runCompiled(optimized, {}, c.build.plan, c.kernels, {in});
    auto want = st::evaluateReference(g, std::vector<reference::HostTensor>{in});
    EXPECT_EQ(st::compareOutputs(want, got, st::dtypeTolerance(t)), "") << dtype;
  }
}

// --- SLEEF: vectorized transcendentals, their accuracy ----------------------------------------

// The undefined symbols of an object file: the functions its code calls.
std::set<std::string> calledSymbols(const std::vector<char>& bytes) {
  auto obj = llvm::object::ObjectFile::createObjectFile(
      llvm::MemoryBufferRef(llvm::StringRef(bytes.data(), bytes.size()), "kernel.o"));
  if (!obj) {
    ADD_FAILURE() << llvm::toString(obj.takeError());
    return {};
  }
  std::set<std::string> out;
  for (const llvm::object::SymbolRef& sym : (*obj)->symbols()) {
    auto flags = sym.getFlags();
    auto name = sym.getName();
    if (flags && name && (*flags & llvm::object::SymbolRef::SF_Undefined)) out.insert(name->str());
    if (!flags) llvm::consumeError(flags.takeError());
    if (!name) llvm::consumeError(name.takeError());
  }
  return out;
}

// Every transcendental of the IR but sqrt, in f32 and f64, on 1003 elements (a vector body and a
// remainder at every width): the O3 object calls SLEEF's vector function at a width the host has
// (so the loop was vectorized around the call); at O1 (no loop vectorizer) only the scalar one.
// Either way the results are within 3 ULP of the function computed in double (f32) or of libm
// (f64): SLEEF's u10 bound is 1 ULP, glibc's known errors 1-2, sigmoid adds an add and a divide.
// f32 exp, erf, tanh, log, log1p and sigmoid (through exp) are inline code
// (codegen/llvm/inline_math.h) and call nothing: within their bound of the exact value plus one
// (of the rounded one): exp 2, erf 7, tanh 6, log 2, log1p 3.
TEST(OrcJit, TranscendentalsCallSleefVectorFunctionsWithinTheirBound) {
  struct Op {
    const char* ir;     // the op as the graph writes it (x the input)
    const char* sleef;  // the SLEEF function it calls
    double lo, hi;      // the input range
    double (*ref)(double);
    int inlineF32Ulps = 0;  // f32 is inline code within this many ULP (0: a call)
  };
  const Op ops[] = {
      {"exp(x)", "exp", -80, 80, [](double x) { return std::exp(x); }, 2},
      {"log(x)", "log", 1e-30, 1e30, [](double x) { return std::log(x); }, 2},
      {"log1p(x)", "log1p", -0.999, 50, [](double x) { return std::log1p(x); }, 3},
      {"tanh(x)", "tanh", -12, 12, [](double x) { return std::tanh(x); }, 6},
      {"erf(x)", "erf", -5, 5, [](double x) { return std::erf(x); }, 7},
      {"sin(x)", "sin", -100, 100, [](double x) { return std::sin(x); }},
      {"cos(x)", "cos", -100, 100, [](double x) { return std::cos(x); }},
      {"sigmoid(x)", "exp", -30, 30, [](double x) { return 1 / (1 + std::exp(-x)); }, 3},
      {"pow(x, 2.25)", "pow", 1e-3, 1e3, [](double x) { return std::pow(x, 2.25); }},
  };
  const int n = 1003;
  for (int level : {3, 1}) {
    auto& jit = jitAt(level);
    const llvm::Triple& triple = jit.triple();
    for (const Op& op : ops) {
      for (bool f32 : {true, false}) {
        std::string dtype = f32 ? "f32" : "f64";
        std::string what = std::string(op.ir) + " " + dtype + " O" + std::to_string(level);
        std::string text =
            fmt::format("graph t(x: {0}[{1}]) {{\n y = {2}\n return y\n}}\n", dtype, n, op.ir);
        ir::Graph g = parseOne(text.c_str());
        fusion::Plan plan =
            fusion::planGraph(g, {}, *fusion::findProfile("host"),
                              stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
        lower::KernelProgram p = lowerForHost(g, plan.kernels.at(0), {});
        auto ctx = std::make_unique<llvm::LLVMContext>();
        auto m = std::make_unique<llvm::Module>("sleef_" + std::string(op.sleef), *ctx);
        m->setDataLayout(jit.dataLayout());
        m->setTargetTriple(triple.str());
        auto names = codegen::emitProgram(p, "sleef", *m);
        auto bytes = jit.compileToObject(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx)),
                                         names[0]);
        ASSERT_TRUE(static_cast<bool>(bytes)) << llvm::toString(bytes.takeError());

        // The vector calls: one of the widths the target has (the vectorizer picks the width).
        std::set<std::string> called = calledSymbols(*bytes);
        const bool inlined = f32 && op.inlineF32Ulps > 0;
        if (inlined) {
          EXPECT_TRUE(called.empty()) << what << fmt::format(" calls {}", fmt::join(called, ", "));
        }
        bool vector = false;
        for (int lanes : f32 ? std::vector<int>{4, 8, 16} : std::vector<int>{2, 4, 8})
          vector |= called.count(rt::cpu::sleefVectorName(op.sleef, f32, lanes)) > 0;
        if (level == 1 || inlined) {
          EXPECT_FALSE(vector) << what;
        } else if (triple.getArch() == llvm::Triple::x86_64) {
          EXPECT_TRUE(vector) << what << " calls no vector SLEEF function; it calls "
                              << fmt::format("{}", fmt::join(called, ", "));
        }
        // Scalar code (the remainder; everything at O1): libm.
        if (!inlined) {
          EXPECT_TRUE(called.count(rt::cpu::mathScalarName(op.sleef, f32))) << what;
        }

        auto rt = jit.loadObject(*bytes, "sleef.o");
        ASSERT_TRUE(static_cast<bool>(rt)) << llvm::toString(rt.takeError());
        auto fn = jit.lookup(names[0]);
        ASSERT_TRUE(static_cast<bool>(fn)) << llvm::toString(fn.takeError());
        // Inputs spread log-uniformly over positive ranges, uniformly over the others.
        std::vector<double> xs(n);
        for (int i = 0; i < n; ++i) {
          double t = static_cast<double>(i) / (n - 1);
          xs[static_cast<size_t>(i)] =
              op.lo > 0 ? op.lo * std::pow(op.hi / op.lo, t) : op.lo + (op.hi - op.lo) * t;
        }
        int worst = 0;
        double worstX = 0;
        auto check = [&](double x, double got, double want) {
          if (got == want) return;  // infinities included
          double ulp = f32 ? std::nextafter(static_cast<float>(std::fabs(want)), INFINITY) -
                                 static_cast<float>(std::fabs(want))
                           : std::nextafter(std::fabs(want), INFINITY) - std::fabs(want);
          auto ulps = static_cast<int>(std::ceil(std::fabs(got - want) / ulp));
          if (ulps > worst) {
            worst = ulps;
            worstX = x;
          }
        };
        if (f32) {
          std::vector<float> x(xs.begin(), xs.end()), y(n);
          void* bufs[2] = {x.data(), y.data()};
          reinterpret_cast<rt::cpu::KernelFn> (*fn)(bufs, 0, p.phases[0].units);
          for (int i = 0; i < n; ++i)
            check(x[i], y[i], static_cast<float>(op.ref(static_cast<double>(x[i]))));
        } else {
          std::vector<double> y(n);
          void* bufs[2] = {xs.data(), y.data()};
          reinterpret_cast<rt::cpu::KernelFn> (*fn)(bufs, 0, p.phases[0].units);
          for (int i = 0; i < n; ++i) check(xs[i], y[i], op.ref(xs[i]));
        }
        EXPECT_LE(worst, inlined ? op.inlineF32Ulps : 3)
            << what << ": " << worst << " ULP at x = " << worstX;
        EXPECT_FALSE(static_cast<bool>(jit.remove(*rt)));
      }
    }
  }
}

// STITCH_CPU_FEATURES (runtime/cpu/orc_jit.h): on an AVX-512 host, -avx512f makes the code an
// AVX2 host runs (SLEEF's 256-bit functions, not its 512-bit ones, for an f64 log), changes the
// host's cache key, and still computes the same results; bad lists are errors naming the value.
TEST(OrcJit, CpuFeaturesFromTheEnvironmentMakeCodeForAnotherHost) {
  struct Unset {
    ~Unset() { ::unsetenv(rt::cpu::kCpuFeaturesEnv); }
  } unset;
  for (const char* bad : {"avx512f", "-avx512f,", "-no-such-feature", "+"}) {
    ::setenv(rt::cpu::kCpuFeaturesEnv, bad, 1);
    try {
      (void)rt::cpu::cpuFeaturesFromEnv();
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(e.message().find(fmt::format("STITCH_CPU_FEATURES={} is not valid", bad)),
                std::string::npos)
          << e.message();
    }
  }
  ::unsetenv(rt::cpu::kCpuFeaturesEnv);
  if (!llvm::sys::getHostCPUFeatures().lookup("avx512f")) GTEST_SKIP() << "the host has no AVX-512";
  const std::string hostFeatures = rt::cpu::hostTargetOf(jitAt(3)).features;
  ::setenv(rt::cpu::kCpuFeaturesEnv, "-avx512f", 1);
  auto made = rt::cpu::OrcJit::Create(3);
  ASSERT_TRUE(static_cast<bool>(made)) << llvm::toString(made.takeError());
  rt::cpu::OrcJit& jit = **made;
  const std::string features = rt::cpu::hostTargetOf(jit).features;
  EXPECT_NE(features.find("-avx512f"), std::string::npos) << features;
  EXPECT_NE(hostFeatures.find("+avx512f"), std::string::npos) << hostFeatures;

  const int n = 1003;
  ir::Graph g =
      parseOne(fmt::format("graph t(x: f64[{}]) {{\n y = log(x)\n return y\n}}\n", n).c_str());
  fusion::Plan plan =
      fusion::planGraph(g, {}, *fusion::findProfile("host"),
                        stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
  lower::KernelProgram p = lowerForHost(g, plan.kernels.at(0), {});
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m = std::make_unique<llvm::Module>("avx2_log", *ctx);
  m->setDataLayout(jit.dataLayout());
  m->setTargetTriple(jit.triple().str());
  auto names = codegen::emitProgram(p, "avx2", *m);
  auto bytes =
      jit.compileToObject(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx)), names[0]);
  ASSERT_TRUE(static_cast<bool>(bytes)) << llvm::toString(bytes.takeError());
  std::set<std::string> called = calledSymbols(*bytes);
  EXPECT_TRUE(called.count(rt::cpu::sleefVectorName("log", false, 4)))
      << fmt::format("{}", fmt::join(called, ", "));
  EXPECT_FALSE(called.count(rt::cpu::sleefVectorName("log", false, 8)))
      << fmt::format("{}", fmt::join(called, ", "));
  auto loaded = jit.loadObject(*bytes, "avx2_log.o");
  ASSERT_TRUE(static_cast<bool>(loaded)) << llvm::toString(loaded.takeError());
  auto fn = jit.lookup(names[0]);
  ASSERT_TRUE(static_cast<bool>(fn)) << llvm::toString(fn.takeError());
  std::vector<double> x(n), y(n);
  for (int i = 0; i < n; ++i) x[static_cast<size_t>(i)] = 1e-3 + 0.37 * i;
  void* bufs[2] = {x.data(), y.data()};
  reinterpret_cast<rt::cpu::KernelFn> (*fn)(bufs, 0, p.phases[0].units);
  for (int i = 0; i < n; ++i)
    EXPECT_NEAR(y[static_cast<size_t>(i)], std::log(x[static_cast<size_t>(i)]),
                1e-14 * std::fabs(std::log(x[static_cast<size_t>(i)])) + 1e-300)
        << x[static_cast<size_t>(i)];
}

TEST(OrcJit, ObjectBytesRoundTrip) {
  ir::Graph g = parseOne("graph e(x: f32[5]) {\n y = exp(x)\n return y\n}\n");
  fusion::Plan plan =
      fusion::planGraph(g, {}, *fusion::findProfile("host"),
                        stitch::testing::plannerOptions({}, *fusion::findProfile("host")));
  lower::KernelProgram p = lowerForHost(g, plan.kernels.at(0), {});
  auto& jit = jitAt(3);
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m = std::make_unique<llvm::Module>("object_round_trip", *ctx);
  m->setDataLayout(jit.dataLayout());
  m->setTargetTriple(jit.triple().str());
  auto names = codegen::emitProgram(p, "roundtrip", *m);
  auto bytes =
      jit.compileToObject(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx)), names[0]);
  ASSERT_TRUE(static_cast<bool>(bytes)) << llvm::toString(bytes.takeError());
  EXPECT_GT(bytes->size(), 100u);
  auto rt = jit.loadObject(*bytes, "roundtrip.o");
  ASSERT_TRUE(static_cast<bool>(rt)) << llvm::toString(rt.takeError());
  auto fn = jit.lookup(names[0]);
  ASSERT_TRUE(static_cast<bool>(fn)) << llvm::toString(fn.takeError());
  float x[5] = {0, 1, -1, 2, 0.5f}, y[5] = {};
  void* bufs[2] = {x, y};
  reinterpret_cast<rt::cpu::KernelFn> (*fn)(bufs, 0, p.phases[0].units);
  for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(y[i], std::exp(x[i]));
  EXPECT_FALSE(static_cast<bool>(jit.remove(*rt)));
}

}  // namespace
