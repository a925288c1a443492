// Kernel cache keys are sound by construction (issue 11): they are made of the code the compilers
// read (target/keys.h: the GPU source here; hostKernelKey in tests/cpu/test_cpu_cache.cpp, which
// also runs programs through the cache), so one source is one key and distinct sources are
// distinct keys; every target attribute and option is in them too. The canonical serialization
// of a kernel program (lower/serialize.h) changes when any field of any struct changes. Programs
// are real ones, lowered from the examples and from seeded random graphs.
//
// The mutators below unpack each struct with a structured binding naming every member, as
// serialize.cpp does: a member added to kernel_program.h stops this file from compiling until it
// is mutated here too, and the test then proves the serializer writes it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common/planning.h"
#include "fusion/hardware.h"
#include "fusion/planner.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "lower/kernel_program.h"
#include "lower/serialize.h"
#include "lower/size_args.h"
#include "passes/pipeline.h"
#include "runtime/gpu/device_compiler.h"
#include "runtime/gpu/gpu_kernels.h"
#include "target/gpu/gpu_schedule.h"
#include "target/keys.h"
#include "testing/random_graph.h"
#include "testing/reference_check.h"

using namespace stitch;
using namespace stitch::lower;
namespace st = stitch::testing;

namespace {

// --- Real programs ----------------------------------------------------------------------------

std::string readFile(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ir::Bindings fives(const ir::Graph& g) {
  ir::Bindings b;
  for (const std::string& s : g.symbols()) b[s] = 5;
  return b;
}

// The kernel programs of g as the host backend lowers them (after the passes, planned for the
// host profile), with their size arguments (lower/size_args.h) where g has symbols.
std::vector<KernelProgram> lowerGraph(const ir::Graph& original, const ir::Bindings& b,
                                      std::string_view profile = "host") {
  ir::Graph g = passes::runPasses(original);
  fusion::Plan plan =
      fusion::planGraph(g, b, *fusion::findProfile(profile),
                        stitch::testing::plannerOptions({}, *fusion::findProfile(profile)));
  std::vector<KernelProgram> out;
  for (const fusion::Kernel& k : plan.kernels) {
    out.push_back(lowerKernel(g, k, b));
    if (!b.empty()) markSizeArgs(out.back(), lowerKernel(g, k, perturbedBindings(b)));
  }
  return out;
}

std::vector<std::pair<std::string, ir::Graph>> exampleGraphs() {
  std::vector<std::pair<std::string, ir::Graph>> out;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(STITCH_SOURCE_DIR) + "/examples")) {
    if (e.path().extension() != ".stitch") continue;
    for (ir::Graph& g : ir::parseModule(readFile(e.path()), e.path().filename().string()))
      out.emplace_back(e.path().filename().string() + ":" + g.name(), std::move(g));
  }
  return out;
}

// The programs of the examples named (file names), every kernel.
std::vector<std::pair<std::string, KernelProgram>> examplePrograms(
    const std::set<std::string>& files) {
  std::vector<std::pair<std::string, KernelProgram>> out;
  for (auto& [name, g] : exampleGraphs()) {
    if (!files.contains(name.substr(0, name.find(':')))) continue;
    int i = 0;
    for (KernelProgram& p : lowerGraph(g, fives(g)))
      out.emplace_back(name + " kernel " + std::to_string(i++), std::move(p));
  }
  return out;
}

// --- Mutations --------------------------------------------------------------------------------

// A different value of the same type.
template <class T>
void bump(T& x) {
  if constexpr (std::is_same_v<T, bool>) x = !x;
  else if constexpr (std::is_enum_v<T>)
    x = static_cast<T>(static_cast<std::underlying_type_t<T>>(x) + 1);
  else if constexpr (std::is_floating_point_v<T>) x = std::isfinite(x) ? x + 1 : 0;
  else if constexpr (std::is_same_v<T, std::string>) x += "x";
  else x = static_cast<T>(x + 1);
}

// Leaf structs: mutate(x, i) changes field i and returns its name, or nullptr past the last.
const char* mutate(Inst& x, int i) {
  auto& [kind, dtype, op, args, buffer, acc, check, ivalue, fvalue] = x;
  switch (i) {
    case 0: return bump(kind), "Inst::kind";
    case 1: return bump(dtype), "Inst::dtype";
    case 2: return bump(op), "Inst::op";
    case 3: return bump(args[0]), "Inst::args[0]";
    case 4: return bump(args[1]), "Inst::args[1]";
    case 5: return bump(args[2]), "Inst::args[2]";
    case 6: return bump(buffer), "Inst::buffer";
    case 7: return bump(acc), "Inst::acc";
    case 8: return bump(check), "Inst::check";
    case 9: return bump(ivalue), "Inst::ivalue";
    case 10: return bump(fvalue), "Inst::fvalue";
    default: return nullptr;
  }
}

const char* mutate(Param& x, int i) {
  auto& [value, scratch, dtype, elements, scope] = x;
  switch (i) {
    case 0: return bump(value), "Param::value";
    case 1: return bump(scratch), "Param::scratch";
    case 2: return bump(dtype), "Param::dtype";
    case 3: return bump(elements), "Param::elements";
    case 4: return bump(scope), "Param::scope";
    default: return nullptr;
  }
}

const char* mutate(Accumulator& x, int i) {
  auto& [node, op, dtype, count, stage, scope] = x;
  switch (i) {
    case 0: return bump(node), "Accumulator::node";
    case 1: return bump(op), "Accumulator::op";
    case 2: return bump(dtype), "Accumulator::dtype";
    case 3: return bump(count), "Accumulator::count";
    case 4: return bump(stage), "Accumulator::stage";
    case 5: return bump(scope), "Accumulator::scope";
    default: return nullptr;
  }
}

const char* mutate(HostSchedule& x, int i) {
  auto& [tiling, tile, interleave, rowCacheBytes, prefetched, streamed] = x;
  switch (i) {
    case 0: return bump(tiling), "HostSchedule::tiling";
    case 1: return bump(tile), "HostSchedule::tile";
    case 2: return bump(interleave), "HostSchedule::interleave";
    case 3: return bump(rowCacheBytes), "HostSchedule::rowCacheBytes";
    case 4: return prefetched.push_back(1), "HostSchedule::prefetched#grow";
    case 5: return streamed.push_back(1), "HostSchedule::streamed#grow";
    default: return nullptr;
  }
}

const char* mutate(Levels& x, int i) {
  auto& [units, threadsPerBlock, warpSize, elementsPerThread, blocks, vectorWidth, lanes,
         unitsPerBlock, items, unrolled, rowMajor, index64, sharedBytes, processors,
         maxThreadsPerBlock, aligned] = x;
  switch (i) {
    case 0: return bump(units), "Levels::units";
    case 1: return bump(threadsPerBlock), "Levels::threadsPerBlock";
    case 2: return bump(warpSize), "Levels::warpSize";
    case 3: return bump(elementsPerThread), "Levels::elementsPerThread";
    case 4: return bump(blocks), "Levels::blocks";
    case 5: return bump(vectorWidth), "Levels::vectorWidth";
    case 6: return bump(lanes), "Levels::lanes";
    case 7: return bump(unitsPerBlock), "Levels::unitsPerBlock";
    case 8: return bump(items), "Levels::items";
    case 9: return bump(unrolled), "Levels::unrolled";
    case 10: return bump(rowMajor), "Levels::rowMajor";
    case 11: return bump(index64), "Levels::index64";
    case 12: return bump(sharedBytes), "Levels::sharedBytes";
    case 13: return bump(processors), "Levels::processors";
    case 14: return bump(maxThreadsPerBlock), "Levels::maxThreadsPerBlock";
    case 15: return bump(aligned), "Levels::aligned";
    default: return nullptr;
  }
}

// One mutation of a program: `field` names the struct member (the coverage check counts these),
// `where` the element it was applied to.
struct Mutation {
  std::string field;
  std::string where;
  std::function<void(KernelProgram&)> apply;
};

template <class T>
using Getter = std::function<T&(KernelProgram&)>;

class Mutations {
 public:
  explicit Mutations(const KernelProgram& p) {
    const auto& [name, params, phases, scratchSlots, sizeArgs, checks] = p;
    scalar<std::string>(
        "KernelProgram::name", "", [](KernelProgram & q) -> auto& { return q.name; });
    vectorOf<Param>(
        "KernelProgram::params", "params", params,
        [](KernelProgram & q) -> auto& { return q.params; });
    for (size_t j = 0; j < phases.size(); ++j)
      phase(phases[j], "phases[" + std::to_string(j) + "]",
            [j](KernelProgram& q) -> Phase& { return q.phases[j]; });
    lengths<Phase>(
        "KernelProgram::phases", "phases", [](KernelProgram & q) -> auto& { return q.phases; },
        phases.empty());
    scalar<int>(
        "KernelProgram::scratchSlots", "",
        [](KernelProgram & q) -> auto& { return q.scratchSlots; });
    const auto& [values, phaseArgs] = sizeArgs;
    vectorOf<int64_t>(
        "SizeArgs::values", "sizeArgs.values", values,
        [](KernelProgram & q) -> auto& { return q.sizeArgs.values; });
    for (size_t j = 0; j < phaseArgs.size(); ++j) {
      const auto& [units, chunk, total, rowLength, insts, accCounts] = phaseArgs[j];
      const std::string at = "sizeArgs.phases[" + std::to_string(j) + "]";
      auto get = [j](KernelProgram& q) -> PhaseSizeArgs& { return q.sizeArgs.phases[j]; };
      scalar<int>(
          "PhaseSizeArgs::units", at, [get](KernelProgram & q) -> auto& { return get(q).units; });
      scalar<int>(
          "PhaseSizeArgs::chunk", at, [get](KernelProgram & q) -> auto& { return get(q).chunk; });
      scalar<int>(
          "PhaseSizeArgs::total", at, [get](KernelProgram & q) -> auto& { return get(q).total; });
      scalar<int>(
          "PhaseSizeArgs::rowLength",
          at, [get](KernelProgram & q) -> auto& { return get(q).rowLength; });
      vectorOf<int>(
          "PhaseSizeArgs::insts", at + ".insts",
          insts, [get](KernelProgram & q) -> auto& { return get(q).insts; });
      vectorOf<int>(
          "PhaseSizeArgs::accCounts", at + ".accCounts",
          accCounts, [get](KernelProgram & q) -> auto& { return get(q).accCounts; });
    }
    lengths<PhaseSizeArgs>(
        "SizeArgs::phases", "sizeArgs.phases",
        [](KernelProgram & q) -> auto& { return q.sizeArgs.phases; }, phaseArgs.empty());
    for (size_t j = 0; j < checks.size(); ++j)
      scalar<std::string>(
          "KernelProgram::checks[]",
          "checks[" + std::to_string(j) + "]", [j](KernelProgram & q) -> auto& {
            return q.checks[j];
          });
    lengths<std::string>(
        "KernelProgram::checks", "checks", [](KernelProgram & q) -> auto& { return q.checks; },
        checks.empty());
  }
  const std::vector<Mutation>& all() const { return all_; }

 private:
  void phase(const Phase& ph, const std::string& at, Getter<Phase> get) {
    const auto& [name, reduce, units, grain, chunk, total, rowLength, workers, workerBlocks, split,
                 levels, domain, reduced, buffers, numInputs, insts, accs, pre, stages, post, elems,
                 host] = ph;
    scalar<std::string>(
        "Phase::name", at, [get](KernelProgram & q) -> auto& { return get(q).name; });
    scalar<bool>(
        "Phase::reduce", at, [get](KernelProgram & q) -> auto& { return get(q).reduce; });
    scalar<int64_t>(
        "Phase::units", at, [get](KernelProgram & q) -> auto& { return get(q).units; });
    scalar<int64_t>(
        "Phase::grain", at, [get](KernelProgram & q) -> auto& { return get(q).grain; });
    scalar<int64_t>(
        "Phase::chunk", at, [get](KernelProgram & q) -> auto& { return get(q).chunk; });
    scalar<int64_t>(
        "Phase::total", at, [get](KernelProgram & q) -> auto& { return get(q).total; });
    scalar<int64_t>(
        "Phase::rowLength", at, [get](KernelProgram & q) -> auto& { return get(q).rowLength; });
    scalar<int64_t>(
        "Phase::workers", at, [get](KernelProgram & q) -> auto& { return get(q).workers; });
    scalar<bool>(
        "Phase::workerBlocks",
        at, [get](KernelProgram & q) -> auto& { return get(q).workerBlocks; });
    scalar<SplitRole>(
        "Phase::split", at, [get](KernelProgram & q) -> auto& { return get(q).split; });
    leaf<Levels>(
        at + ".levels", [get](KernelProgram & q) -> auto& { return get(q).levels; });
    vectorOf<int64_t>(
        "Phase::domain", at + ".domain",
        domain, [get](KernelProgram & q) -> auto& { return get(q).domain; });
    boolVector(
        "Phase::reduced", at + ".reduced",
        reduced, [get](KernelProgram & q) -> auto& { return get(q).reduced; });
    vectorOf<int>(
        "Phase::buffers", at + ".buffers",
        buffers, [get](KernelProgram & q) -> auto& { return get(q).buffers; });
    scalar<int>(
        "Phase::numInputs", at, [get](KernelProgram & q) -> auto& { return get(q).numInputs; });
    vectorOf<Inst>(
        "Phase::insts", at + ".insts",
        insts, [get](KernelProgram & q) -> auto& { return get(q).insts; });
    vectorOf<Accumulator>(
        "Phase::accs", at + ".accs",
        accs, [get](KernelProgram & q) -> auto& { return get(q).accs; });
    block(
        "Phase::pre", at + ".pre", pre, [get](KernelProgram & q) -> auto& { return get(q).pre; });
    for (size_t s = 0; s < stages.size(); ++s) {
      const std::string sat = at + ".stages[" + std::to_string(s) + "]";
      auto stage = [get, s](KernelProgram& q) -> Stage& { return get(q).stages[s]; };
      const auto& [saccs, body] = stages[s];
      vectorOf<int>(
          "Stage::accs", sat + ".accs",
          saccs, [stage](KernelProgram & q) -> auto& { return stage(q).accs; });
      block(
          "Stage::body", sat + ".body",
          body, [stage](KernelProgram & q) -> auto& { return stage(q).body; });
    }
    lengths<Stage>(
        "Phase::stages",
        at + ".stages", [get](KernelProgram & q) -> auto& { return get(q).stages; },
        stages.empty());
    block(
        "Phase::post", at + ".post",
        post, [get](KernelProgram & q) -> auto& { return get(q).post; });
    block(
        "Phase::elems", at + ".elems",
        elems, [get](KernelProgram & q) -> auto& { return get(q).elems; });
    leaf<HostSchedule>(
        at + ".host", [get](KernelProgram & q) -> auto& { return get(q).host; });
  }

  void block(const std::string& field, const std::string& at, const Block& b, Getter<Block> get) {
    const auto& [insts] = b;
    vectorOf<int>(
        field + ".insts", at + ".insts",
        insts, [get](KernelProgram & q) -> auto& { return get(q).insts; });
  }

  template <class T>
  void scalar(const std::string& field, const std::string& at, Getter<T> get) {
    all_.push_back({field, at, [get](KernelProgram& q) { bump(get(q)); }});
  }

  template <class T>
  void leaf(const std::string& at, Getter<T> get) {
    T probe{};
    for (int i = 0; const char* field = mutate(probe, i); ++i)
      all_.push_back({field, at, [get, i](KernelProgram& q) { mutate(get(q), i); }});
  }

  // Every element's fields (structs) or value (scalars), then the length.
  template <class T>
  void vectorOf(const std::string& field, const std::string& at, const std::vector<T>& xs,
                Getter<std::vector<T>> get) {
    for (size_t i = 0; i < xs.size(); ++i) {
      const std::string eat = at + "[" + std::to_string(i) + "]";
      if constexpr (std::is_class_v<T>)
        leaf<T>(eat, [get, i](KernelProgram& q) -> T& { return get(q)[i]; });
      else all_.push_back({field + "[]", eat, [get, i](KernelProgram& q) { bump(get(q)[i]); }});
    }
    lengths<T>(field, at, get, xs.empty());
  }

  void boolVector(const std::string& field, const std::string& at, const std::vector<bool>& xs,
                  Getter<std::vector<bool>> get) {
    for (size_t i = 0; i < xs.size(); ++i)
      all_.push_back({field + "[]", at + "[" + std::to_string(i) + "]",
                      [get, i](KernelProgram& q) { get(q)[i] = !get(q)[i]; }});
    lengths<bool>(field, at, get, xs.empty());
  }

  // One element more (a copy of the last, or a default one), and one fewer.
  template <class T>
  void lengths(const std::string& field, const std::string& at, Getter<std::vector<T>> get,
               bool empty) {
    all_.push_back({field + "#grow", at, [get](KernelProgram& q) {
                      auto& v = get(q);
                      v.push_back(v.empty() ? T{} : T(v.back()));
                    }});
    if (!empty)
      all_.push_back({field + "#shrink", at, [get](KernelProgram& q) { get(q).pop_back(); }});
  }

  std::vector<Mutation> all_;
};

// Every member of every struct, as Mutations names them: the coverage the test requires over its
// programs. Leaf structs are listed by their mutate() functions; the rest here.
std::set<std::string> everyField() {
  std::set<std::string> out = {
      "KernelProgram::name",
      "KernelProgram::params#grow",
      "KernelProgram::params#shrink",
      "KernelProgram::phases#grow",
      "KernelProgram::phases#shrink",
      "KernelProgram::scratchSlots",
      "SizeArgs::values[]",
      "SizeArgs::values#grow",
      "SizeArgs::values#shrink",
      "SizeArgs::phases#grow",
      "SizeArgs::phases#shrink",
      "PhaseSizeArgs::units",
      "PhaseSizeArgs::chunk",
      "PhaseSizeArgs::total",
      "PhaseSizeArgs::rowLength",
      "PhaseSizeArgs::insts[]",
      "PhaseSizeArgs::insts#grow",
      "PhaseSizeArgs::insts#shrink",
      "PhaseSizeArgs::accCounts[]",
      "PhaseSizeArgs::accCounts#grow",
      "PhaseSizeArgs::accCounts#shrink",
      "Phase::name",
      "Phase::reduce",
      "Phase::units",
      "Phase::grain",
      "Phase::chunk",
      "Phase::total",
      "Phase::rowLength",
      "Phase::workers",
      "Phase::workerBlocks",
      "Phase::split",
      "Phase::domain[]",
      "Phase::domain#grow",
      "Phase::domain#shrink",
      "Phase::reduced[]",
      "Phase::reduced#grow",
      "Phase::reduced#shrink",
      "Phase::buffers[]",
      "Phase::buffers#grow",
      "Phase::buffers#shrink",
      "Phase::numInputs",
      "Phase::insts#grow",
      "Phase::insts#shrink",
      "Phase::accs#grow",
      "Phase::accs#shrink",
      "Phase::pre.insts[]",
      "Phase::pre.insts#grow",
      "Phase::pre.insts#shrink",
      "Phase::stages#grow",
      "Phase::stages#shrink",
      "Stage::accs[]",
      "Stage::accs#grow",
      "Stage::accs#shrink",
      "Stage::body.insts[]",
      "Stage::body.insts#grow",
      "Stage::body.insts#shrink",
      "Phase::post.insts[]",
      "Phase::post.insts#grow",
      "Phase::post.insts#shrink",
      "Phase::elems.insts[]",
      "Phase::elems.insts#grow",
      "Phase::elems.insts#shrink",
  };
  auto addLeaf = [&]<class T>(T probe) {
    for (int i = 0; const char* f = mutate(probe, i); ++i) out.insert(f);
  };
  addLeaf(Inst{});
  addLeaf(Param{});
  addLeaf(Accumulator{});
  addLeaf(Levels{});
  addLeaf(HostSchedule{});
  return out;
}

// The GPU key of p for sm_90 with a fixed compiler identity.
rt::GpuCompilerId sampleCompiler() {
  return {"nvrtc", "13.0", {"--std=c++17", "--gpu-architecture=sm_90", "--ptxas-options=-v"}};
}

rt::CacheKey gpuKey(const KernelProgram& p) {
  return target::gpuKernelKey(p, codegen::gpuTarget("sm_90"), codegen::GpuEmitOptions{true},
                              sampleCompiler());
}

// --- Tests ------------------------------------------------------------------------------------

TEST(ProgramKey, SerializationIsDeterministic) {
  for (const auto& [name, p] : examplePrograms({"softmax.stitch", "layer_norm.stitch"})) {
    KernelProgram copy = p;
    EXPECT_TRUE(serializeProgram(copy) == serializeProgram(p)) << name;
    EXPECT_TRUE(gpuKey(copy).canonical() == gpuKey(p).canonical()) << name;
  }
}

// Issue 11, finding 1: two programs that differ only in the reduction kind.
TEST(ProgramKey, ReductionKindChangesTheKey) {
  std::map<std::string, std::string> bytesByOp;
  for (const char* op : {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_mean"}) {
    std::string text = std::string("graph g(x: f32[3, 25]) {\n  y = ") + op +
                       "(x, axes=[1], keepdims=true)\n  return y\n}\n";
    ir::Graph g = ir::parseModule(text, "reduce.stitch").at(0);
    auto programs = lowerGraph(g, {});
    ASSERT_EQ(programs.size(), 1u);
    bytesByOp[op] = gpuKey(programs[0]).canonical();
  }
  std::set<std::string> distinct;
  for (const auto& [op, bytes] : bytesByOp) distinct.insert(bytes);
  EXPECT_EQ(distinct.size(), bytesByOp.size());
}

// The GPU source of p (aligned, sm_90): what its key is made of.
std::string gpuSource(const KernelProgram& p) {
  const codegen::GpuTarget sm90 = codegen::gpuTarget("sm_90");
  return codegen::emitGpuKernel(target::scheduledFor(p, sm90, true), sm90,
                                codegen::GpuEmitOptions{true})
      .source;
}

// Each field of each struct, changed alone in real programs, changes the serialization; every
// field is exercised by some program. (Kernel keys are made of the code the compilers read,
// target/keys.h, complete by construction; the mutants here are not all programs an emitter
// takes, e.g. an instruction reading a later one, so they are not emitted.)
TEST(ProgramKey, EveryFieldOfEveryStructChangesTheSerialization) {
  auto programs = examplePrograms(
      {"layer_norm.stitch", "softmax.stitch", "global_reduction.stitch", "cross_entropy.stitch"});
  ASSERT_GE(programs.size(), 4u);
  std::set<std::string> covered;
  size_t checked = 0;
  for (const auto& [name, p] : programs) {
    const std::string base = serializeProgram(p);
    const Mutations mutations(p);
    for (const Mutation& m : mutations.all()) {
      KernelProgram q = p;
      m.apply(q);
      EXPECT_TRUE(serializeProgram(q) != base) << name << ": " << m.field << " at " << m.where;
      covered.insert(m.field);
      ++checked;
    }
  }
  std::set<std::string> missing;
  for (const std::string& f : everyField())
    if (!covered.contains(f)) missing.insert(f);
  EXPECT_TRUE(missing.empty()) << "no program exercised " << ::testing::PrintToString(missing);
  EXPECT_GT(checked, 1000u);
}

// Each target attribute, emit option and compiler attribute changes the GPU key.
TEST(ProgramKey, EveryGpuTargetAttributeAndOptionChangesTheKey) {
  const KernelProgram p = examplePrograms({"softmax.stitch"}).at(0).second;
  const codegen::GpuTarget target = codegen::gpuTarget("sm_90");
  const codegen::GpuEmitOptions emit{true};
  const rt::GpuCompilerId compiler = sampleCompiler();
  const std::string base = target::gpuKernelKey(p, target, emit, compiler).canonical();

  std::vector<std::pair<std::string, std::string>> variants;
  auto withTarget = [&](const char* what, auto change) {
    codegen::GpuTarget t = target;
    auto& [arch, dialect, warpSize, smCount, maxThreadsPerBlock, computeCapability] = t;
    change(arch, dialect, warpSize, smCount, maxThreadsPerBlock, computeCapability);
    variants.emplace_back(what, target::gpuKernelKey(p, t, emit, compiler).canonical());
  };
  withTarget("arch", [](auto& a, auto&, auto&, auto&, auto&, auto&) { a = "sm_80"; });
  withTarget("dialect", [](auto&, auto& v, auto&, auto&, auto&, auto&) { bump(v); });
  withTarget("warpSize", [](auto&, auto&, auto& w, auto&, auto&, auto&) { w = 64; });
  withTarget("smCount", [](auto&, auto&, auto&, auto& s, auto&, auto&) { bump(s); });
  withTarget("maxThreadsPerBlock", [](auto&, auto&, auto&, auto&, auto& m, auto&) { m = 512; });
  withTarget("computeCapability", [](auto&, auto&, auto&, auto&, auto&, auto& c) { bump(c); });
  {
    codegen::GpuEmitOptions e = emit;
    auto& [aligned] = e;
    aligned = !aligned;
    variants.emplace_back("aligned", target::gpuKernelKey(p, target, e, compiler).canonical());
  }
  auto withCompiler = [&](const char* what, auto change) {
    rt::GpuCompilerId c = compiler;
    auto& [name, version, options] = c;
    change(name, version, options);
    variants.emplace_back(what, target::gpuKernelKey(p, target, emit, c).canonical());
  };
  withCompiler("compiler name", [](auto& n, auto&, auto&) { n = "hiprtc"; });
  withCompiler("compiler version", [](auto&, auto& v, auto&) { v = "12.9"; });
  withCompiler("compiler option", [](auto&, auto&, auto& o) { o.back() = "--ptxas-options=-O2"; });
  withCompiler("one option more", [](auto&, auto&, auto& o) { o.push_back("--no-cache"); });
  withCompiler("options split differently", [](auto&, auto&, auto& o) {
    o = {"--std=c++17 --gpu-architecture=sm_90", "--ptxas-options=-v"};
  });
  {
    rt::CacheKey k = target::gpuKernelKey(p, target, emit, compiler);
    k.version = "0.0.0-other";
    variants.emplace_back("library version", k.canonical());
  }
  // The HIP target: another arch, dialect, warp.
  variants.emplace_back(
      "gfx90a", target::gpuKernelKey(p, codegen::gpuTarget("gfx90a"), emit, compiler).canonical());

  std::set<std::string> distinct = {base};
  for (const auto& [what, key] : variants) {
    EXPECT_TRUE(key != base) << what;
    distinct.insert(key);
  }
  EXPECT_EQ(distinct.size(), variants.size() + 1);
}

// The compilers' identities as keys see them (NVRTC and hipRTC need no GPU; skipped where the
// library is absent).
TEST(ProgramKey, CompilerIdentityNamesVersionAndOptions) {
  int seen = 0;
  for (auto [make, arch, option] :
       {std::tuple{&rt::gpu::nvrtcCompiler, "sm_90", "--gpu-architecture=sm_90"},
        std::tuple{&rt::gpu::hiprtcCompiler, "gfx90a", "--offload-arch=gfx90a"}}) {
    std::string why;
    rt::gpu::DeviceCompiler* c = make(&why);
    if (c == nullptr) continue;
    ++seen;
    const rt::GpuCompilerId id = rt::gpu::compilerId(*c, arch);
    EXPECT_EQ(id.name, c->name());
    // "major.minor", as the library reports it.
    EXPECT_NE(id.version.find('.'), std::string::npos) << id.version;
    EXPECT_NE(id.version, "0.0") << id.name;
    EXPECT_NE(std::find(id.options.begin(), id.options.end(), option), id.options.end()) << id.name;
  }
  if (seen == 0) GTEST_SKIP() << "neither NVRTC nor hipRTC can be opened here";
}

// Over the examples and many random graphs: identical programs (lowered twice, independently)
// give identical keys; distinct sources give distinct keys and distinct file names. Each graph
// with a reduction is also tried with every other reduction kind: that must change its programs.
TEST(ProgramKey, DistinctCodeHasDistinctKeys) {
  std::map<std::string, std::string> keyByProgram;  // serialization -> canonical GPU key
  std::map<std::string, std::string> keyBySource;   // GPU source -> canonical GPU key
  std::map<uint64_t, std::string> sourceByHash;
  size_t programs = 0, swaps = 0, unchanged = 0;
  auto record = [&](const std::string& what, const KernelProgram& p, const KernelProgram& again) {
    const std::string bytes = serializeProgram(p);
    ASSERT_TRUE(serializeProgram(again) == bytes) << what << ": lowering is not deterministic";
    const rt::CacheKey key = gpuKey(p);
    ASSERT_TRUE(gpuKey(again).canonical() == key.canonical()) << what;
    auto [it, fresh] = keyByProgram.emplace(bytes, key.canonical());
    EXPECT_TRUE(it->second == key.canonical()) << what << ": one program, two keys";
    // Programs that print the same source share a key (that is a shape class); distinct
    // sources never do, nor their file names.
    const std::string source = gpuSource(p);
    auto [st, sfresh] = keyBySource.emplace(source, key.canonical());
    EXPECT_TRUE(st->second == key.canonical()) << what << ": one source, two keys";
    auto [ht, hfresh] = sourceByHash.emplace(key.hash(), source);
    EXPECT_TRUE(ht->second == source) << what << ": two sources, one key file name";
    ++programs;
  };
  auto lowerBoth = [&](const std::string& what, const ir::Graph& g, const ir::Bindings& b) {
    auto first = lowerGraph(g, b);
    auto second = lowerGraph(g, b);
    EXPECT_EQ(first.size(), second.size()) << what;
    for (size_t i = 0; i < std::min(first.size(), second.size()); ++i)
      record(what, first[i], second[i]);
    return first;
  };
  for (const auto& [name, g] : exampleGraphs()) lowerBoth(name, g, fives(g));

  const char* kinds[] = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_mean"};
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    st::RandomGraphOptions o;
    o.symbolic = seed % 4 == 0;
    ir::Graph g = st::randomGraph(seed, o);
    ir::Bindings b = st::randomBindings(g, seed);
    auto base = lowerBoth("seed " + std::to_string(seed), g, b);
    std::set<std::string> baseBytes;
    for (const KernelProgram& p : base) baseBytes.insert(serializeProgram(p));
    // Each reduction kind swapped for each other one, through the text form.
    const std::string text = ir::printGraph(g);
    for (const char* from : kinds) {
      const size_t at = text.find(std::string(from) + "(");
      if (at == std::string::npos) continue;
      for (const char* to : kinds) {
        if (std::string_view(from) == to) continue;
        std::string swapped = text;
        swapped.replace(at, std::string_view(from).size(), to);
        std::optional<ir::Graph> h;
        try {
          h = ir::parseModule(swapped, "swapped.stitch").at(0);
        } catch (const std::exception&) {
          continue;  // e.g. mean of an int: not a valid graph, nothing to compare
        }
        auto programsOfH =
            lowerBoth("seed " + std::to_string(seed) + " " + from + "->" + to, *h, b);
        std::set<std::string> hBytes;
        for (const KernelProgram& p : programsOfH) hBytes.insert(serializeProgram(p));
        ++swaps;
        if (hBytes != baseBytes) continue;
        // The same programs (and so the same keys) are right only if the swap changed nothing
        // the outputs depend on (e.g. the reduction was dead and removed by the passes).
        ++unchanged;
        auto inputs = st::randomInputs(g, b, seed);
        EXPECT_EQ(st::compareOutputs(st::evaluateReference(g, inputs),
                                     st::evaluateReference(*h, inputs), 0),
                  "")
            << "seed " << seed << ": " << from << " -> " << to
            << " computes something else with the same kernel programs";
      }
    }
  }
  EXPECT_GT(swaps, 100u);
  // Many swaps change nothing (a reduction over extent-1 axes is simplified away by the passes,
  // as it should be); enough must reach the kernels for the sweep to mean something.
  EXPECT_GT(swaps - unchanged, 300u);
  std::cout << programs << " programs lowered, " << keyByProgram.size() << " distinct, " << swaps
            << " reduction-kind swaps (" << unchanged << " left the programs unchanged)\n";
}

}  // namespace
