// Whole-program entries (driver/program_entry.h): an artifact survives encoding exactly, bytes
// that are not an encoded artifact are refused (never a crash), the key changes with everything a
// build reads, and validateProgramArtifact accepts every build and refuses each defect a backend
// would trip on (issue 33: a bad entry is a miss, never a failed run).
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "common/driver_targets.h"
#include "common/example_graphs.h"
#include "driver/driver.h"
#include "driver/program_entry.h"
#include "ir/parser.h"
#include "runtime/backend.h"
#include "runtime/support/error.h"

using namespace stitch;

namespace {

// A signature with every symbol at 7.
std::vector<std::vector<int64_t>> shapesOf(const ir::Graph& g, int64_t size = 7) {
  std::vector<std::vector<int64_t>> shapes;
  for (int id : g.inputs()) {
    std::vector<int64_t> s;
    for (const ir::Dim& d : g.node(id).type.shape) s.push_back(d.isStatic() ? d.size : size);
    shapes.push_back(s);
  }
  return shapes;
}

std::vector<ir::ConcreteInput> signatureOf(const ir::Graph& g,
                                           const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<ir::ConcreteInput> sig;
  for (size_t i = 0; i < shapes.size(); ++i)
    sig.push_back({g.node(g.inputs()[i]).type.dtype, shapes[i]});
  return sig;
}

}  // namespace

TEST(ProgramEntry, EveryExampleArtifactSurvivesEncoding) {
  int artifacts = 0;
  for (const rt::Target& t : stitch::testing::driverTargets())
    for (const auto& [name, graph] : testdata::exampleGraphs()) {
      ir::Graph g = driver::optimize(graph);
      auto shapes = shapesOf(g);
      driver::Build b = driver::build(g, ir::bindInputs(g, signatureOf(g, shapes)), t, {});
      const std::vector<uint8_t> bytes = driver::encodeProgramArtifact(b.artifact);
      const std::unique_ptr<target::Target> target = target::makeTarget(t);
      const rt::ProgramArtifact back = driver::decodeProgramArtifact(bytes, *target);
      EXPECT_EQ(driver::encodeProgramArtifact(back), bytes) << name << " " << t.arch;
      ASSERT_EQ(back.kernels.size(), b.artifact.kernels.size());
      for (size_t k = 0; k < back.kernels.size(); ++k)
        for (size_t f = 0; f < back.kernels[k].forms.size(); ++f) {
          const rt::KernelCode& was = b.artifact.kernels[k].forms[f];
          const rt::KernelCode& is = back.kernels[k].forms[f];
          EXPECT_EQ(is.key.canonical(), was.key.canonical()) << name;
          EXPECT_EQ(is.text, was.text) << name;
          // GPU code gets this build's device headers back.
          EXPECT_EQ(is.headers, was.headers) << name;
        }
      EXPECT_EQ(back.external, b.artifact.external) << name;
      EXPECT_EQ(back.valueLabels, b.artifact.valueLabels) << name;
      // Every build is a well-formed one (the checks refuse nothing the driver makes).
      EXPECT_NO_THROW(driver::validateProgramArtifact(back, g, signatureOf(g, shapes), *target))
          << name << " " << t.arch;
      ++artifacts;
    }
  EXPECT_GT(artifacts, 30);
}

TEST(ProgramEntry, BytesThatAreNotAnArtifactAreRefused) {
  ir::Graph g = driver::optimize(
      ir::parseModule("graph f(x: f32[N, 64]) {\n  y = softmax(x)\n  return y\n}\n", "t").at(0));
  auto shapes = shapesOf(g);
  const std::unique_ptr<target::Target> t = target::makeTarget(target::namedTarget("sm_90"));
  driver::Build b = driver::build(g, ir::bindInputs(g, signatureOf(g, shapes)), *t, {});
  const std::vector<uint8_t> bytes = driver::encodeProgramArtifact(b.artifact);
  // Every truncation, and bytes past the end.
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(driver::decodeProgramArtifact(std::span(bytes.data(), n), *t), Error) << n;
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_THROW(driver::decodeProgramArtifact(longer, *t), Error);
  // Huge lengths are refused before anything is allocated.
  std::vector<uint8_t> huge = bytes;
  for (size_t i = 4 + 8 + b.artifact.name.size(); i < 4 + 8 + b.artifact.name.size() + 8; ++i)
    huge[i] = 0xff;
  EXPECT_THROW(driver::decodeProgramArtifact(huge, *t), Error);
  // Any single flipped byte decodes to something or throws: never a crash (a flip in text or a
  // number decodes; the entry's checksum is what catches those, runtime/kernel_cache.h).
  for (size_t i = 0; i < bytes.size(); i += 7) {
    std::vector<uint8_t> flipped = bytes;
    flipped[i] ^= 0xa5;
    try {
      driver::decodeProgramArtifact(flipped, *t);
    } catch (const Error&) {
    }
  }
}

TEST(ProgramEntry, TheKeyChangesWithEverythingABuildReads) {
  const std::string text =
      "graph f(x: f32[N, 64], b: f32[64]) {\n  s = add(x, b)\n  y = softmax(s, axis=-1)\n"
      "  return y\n}\n";
  ir::Graph g = driver::optimize(ir::parseModule(text, "t").at(0));
  const rt::Target t = target::namedTarget("sm_90");
  auto shapes = shapesOf(g);
  const std::vector<ir::ConcreteInput> sig = signatureOf(g, shapes);
  const std::string base = driver::programEntryKey(g, sig, t, {}).canonical();
  EXPECT_EQ(driver::programEntryKey(driver::optimize(ir::parseModule(text, "t").at(0)), sig, t, {})
                .canonical(),
            base);
  std::set<std::string> keys = {base};
  auto expectNew = [&](const rt::CacheKey& k, const char* what) {
    EXPECT_TRUE(keys.insert(k.canonical()).second) << what;
  };
  // The graph: an attribute, an op, a name, the node numbering.
  for (const char* other :
       {"graph f(x: f32[N, 64], b: f32[64]) {\n  s = add(x, b)\n  y = softmax(s, axis=0)\n"
        "  return y\n}\n",
        "graph f(x: f32[N, 64], b: f32[64]) {\n  s = sub(x, b)\n  y = softmax(s, axis=-1)\n"
        "  return y\n}\n",
        "graph g(x: f32[N, 64], b: f32[64]) {\n  s = add(x, b)\n  y = softmax(s, axis=-1)\n"
        "  return y\n}\n",
        "graph f(b: f32[64], x: f32[N, 64]) {\n  s = add(x, b)\n  y = softmax(s, axis=-1)\n"
        "  return y\n}\n"}) {
    ir::Graph o = driver::optimize(ir::parseModule(other, "t").at(0));
    expectNew(driver::programEntryKey(o, signatureOf(o, shapesOf(o)), t, {}), other);
  }
  // The signature.
  auto longer = shapesOf(g, 8);
  expectNew(driver::programEntryKey(g, signatureOf(g, longer), t, {}), "signature");
  // Options.
  expectNew(driver::programEntryKey(g, sig, t, {fusion::Mode::Basic, 0}), "fusion");
  expectNew(driver::programEntryKey(g, sig, t, {fusion::Mode::Stitch, 1}), "plan candidate");
  // Target fields, each.
  auto mutated = [&](auto&& change, const char* what) {
    rt::Target m = t;
    change(m);
    expectNew(driver::programEntryKey(g, sig, m, {}), what);
  };
  mutated([](rt::Target& m) { m.arch = "sm_80"; }, "arch");
  mutated([](rt::Target& m) { m.warpSize = 64; }, "warp size");
  mutated([](rt::Target& m) { m.processors = 7; }, "processors");
  mutated([](rt::Target& m) { m.host.features = "+avx2"; }, "host features");
  mutated([](rt::Target& m) { m.hostOptions.streamingStoreBytes = 1; }, "streaming stores");
  mutated([](rt::Target& m) { m.hostProfile.memoryBandwidth = 1e9; }, "host bandwidth");
  mutated([](rt::Target& m) { m.hostProfile.threads = 3; }, "host threads");
  mutated([](rt::Target& m) { m.compiler.options = {"-lineinfo"}; }, "compiler options");
  mutated([](rt::Target& m) { m.device.memoryBandwidth = 3e12; }, "device bandwidth");
  mutated([](rt::Target& m) { m.device.sharedMemoryPerBlock = 1; }, "shared memory");
}

namespace {

// A graph that plans into several kernels with fusion off (one per op), for the defects below.
struct Built {
  ir::Graph graph;
  std::vector<std::vector<int64_t>> shapes;
  rt::ProgramArtifact artifact;
  std::shared_ptr<const target::Target> target;
  std::string backend;
};

Built buildFor(const rt::Target& t, int64_t size = 7) {
  Built b;
  b.graph = driver::optimize(
      ir::parseModule("graph f(x: f32[N, 64], b: f32[64]) {\n  s = add(x, b)\n"
                      "  e = exp(s)\n  y = reduce_sum(e, axes=[1], keepdims=true)\n"
                      "  z = div(e, y)\n  return z, y\n}\n",
                      "t")
          .at(0));
  b.shapes = shapesOf(b.graph, size);
  b.artifact = driver::build(b.graph, ir::bindInputs(b.graph, signatureOf(b.graph, b.shapes)), t,
                             {fusion::Mode::Off, 0})
                   .artifact;
  b.target = target::makeTarget(t);
  b.backend = t.backend;
  return b;
}

// The message of validateProgramArtifact's refusal, or "" when it accepted.
std::string refusal(const Built& b, const rt::ProgramArtifact& a) {
  try {
    driver::validateProgramArtifact(a, b.graph, signatureOf(b.graph, b.shapes), *b.target);
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    return e.what();
  }
}

// The first kernel that reads a value an earlier kernel wrote.
size_t firstConsumer(const rt::ProgramArtifact& a) {
  for (size_t k = 1; k < a.kernels.size(); ++k)
    for (const rt::KernelBuffer& p : a.kernels[k].params)
      for (size_t j = 0; j < k; ++j)
        for (const rt::KernelBuffer& q : a.kernels[j].params)
          if (p.value >= 0 && p.value == q.value) return k;
  return 0;
}

}  // namespace

TEST(ProgramEntry, EveryDefectABackendWouldTripOnIsRefused) {
  for (const rt::Target& t : stitch::testing::driverTargets()) {
    const Built b = buildFor(t);
    const rt::ProgramArtifact& good = b.artifact;
    ASSERT_GE(good.kernels.size(), 3u) << t.arch;
    ASSERT_EQ(refusal(b, good), "") << t.arch;
    struct Defect {
      const char* what;
      std::function<void(rt::ProgramArtifact&)> make;
      const char* expect;
    };
    const std::vector<Defect> defects = {
        {"another graph's name", [](rt::ProgramArtifact& a) { a.name = "g"; }, "not 'f'"},
        {"external values", [](rt::ProgramArtifact& a) { a.external.pop_back(); },
         "not the graph's inputs and outputs"},
        {"labels", [](rt::ProgramArtifact& a) { a.valueLabels.pop_back(); }, "value labels for"},
        {"no phases", [](rt::ProgramArtifact& a) { a.kernels[0].phases.clear(); }, "no phases"},
        {"no code", [](rt::ProgramArtifact& a) { a.kernels[0].forms.clear(); }, "has no code"},
        {"another language",
         [](rt::ProgramArtifact& a) {
           std::string& l = a.kernels[0].forms[0].language;
           l = l == "llvm-ir" ? "cuda" : "llvm-ir";
         },
         "another backend's language"},
        {"another build",
         [](rt::ProgramArtifact& a) { a.kernels[0].forms[0].key.version = "0.0.1+other"; },
         "another build"},
        {"an entry point missing",
         [](rt::ProgramArtifact& a) { a.kernels[0].forms[0].phases.push_back({}); },
         "entry points for"},
        {"a block of 0 threads",
         [](rt::ProgramArtifact& a) { a.kernels[0].forms[0].phases[0].block = 0; },
         "launch figures out of range"},
        {"a grain of 0", [](rt::ProgramArtifact& a) { a.kernels[1].forms[0].phases[0].grain = 0; },
         "launch figures out of range"},
        {"negative units",
         [](rt::ProgramArtifact& a) { a.kernels[1].forms[0].phases[0].units = -1; },
         "launch figures out of range"},
        {"no symbol", [](rt::ProgramArtifact& a) { a.kernels[0].forms[0].phases[0].symbol = ""; },
         "has no symbol"},
        {"a parameter naming a value past the graph",
         [](rt::ProgramArtifact& a) { a.kernels[0].params[0].value = 1 << 20; },
         "past the graph's"},
        {"a parameter naming a value and a scratch slot",
         [](rt::ProgramArtifact& a) { a.kernels[0].params[0].scratch = 0; },
         "names both a value and a scratch slot"},
        {"a parameter naming nothing",
         [](rt::ProgramArtifact& a) { a.kernels[0].params[0].value = -1; }, "names neither"},
        {"a scratch slot past the program's",
         [](rt::ProgramArtifact& a) {
           a.kernels[0].params[0].value = -1;
           a.kernels[0].params[0].scratch = 1 << 30;
         },
         "past the program's"},
        {"another dtype",
         [](rt::ProgramArtifact& a) { a.kernels[0].params[0].dtype = ir::DType::F16; },
         "but the value is"},
        {"another size (an entry of another signature)",
         [](rt::ProgramArtifact& a) { a.kernels[0].params.back().elements *= 2; },
         "but the value is"},
        {"a parameter index past the kernel's",
         [](rt::ProgramArtifact& a) { a.kernels[0].phases[0].params[0] = 99; },
         "uses parameter 99"},
        {"more inputs than parameters",
         [](rt::ProgramArtifact& a) { a.kernels[0].phases[0].numInputs = 99; }, "inputs of"},
        {"a kernel writing a graph input",
         [](rt::ProgramArtifact& a) {
           rt::PhaseBuffers& p = a.kernels[0].phases[0];
           p.numInputs = 0;  // its reads become writes
         },
         "writes graph input"},
        {"kernels out of order (issue 33: \"step 0 reads value 1 before any step writes it\")",
         [](rt::ProgramArtifact& a) {
           const size_t k = firstConsumer(a);
           std::swap(a.kernels[0], a.kernels[k]);
         },
         "before any step writes it"},
        {"an output nobody writes", [](rt::ProgramArtifact& a) { a.kernels.pop_back(); },
         "no kernel writes output value"},
    };
    for (const Defect& d : defects) {
      rt::ProgramArtifact a = good;
      d.make(a);
      const std::string why = refusal(b, a);
      EXPECT_NE(why.find(d.expect), std::string::npos)
          << t.arch << ", " << d.what << ": " << (why.empty() ? "accepted" : why);
    }
    // Host code defines its symbols once in a JIT: they are named after the key, and another
    // kernel's symbols under this key (issue 33: "Duplicate definition of symbol") are refused.
    if (b.backend == "cpu") {
      rt::ProgramArtifact a = good;
      a.kernels[1].forms[0].phases = a.kernels[0].forms[0].phases;
      a.kernels[1].phases.resize(a.kernels[0].phases.size(), a.kernels[1].phases[0]);
      EXPECT_NE(refusal(b, a).find("is not the one its key names"), std::string::npos)
          << refusal(b, a);
    } else {
      rt::ProgramArtifact a = good;
      a.kernels[0].forms[0].phases.push_back(a.kernels[0].forms[0].phases[0]);
      a.kernels[0].phases.push_back(a.kernels[0].phases[0]);
      EXPECT_NE(refusal(b, a).find("twice"), std::string::npos) << refusal(b, a);
    }
    // The artifact of another signature of the same graph: every index in range, the sizes not.
    const Built other = buildFor(t, 9);
    EXPECT_NE(refusal(b, other.artifact).find("but the value is"), std::string::npos)
        << t.arch << ": " << refusal(b, other.artifact);
  }
}
