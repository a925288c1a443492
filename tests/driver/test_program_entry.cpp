// Whole-program entries (driver/program_entry.h): an artifact survives encoding exactly, bytes
// that are not an encoded artifact are refused (never a crash), and the key changes with
// everything a build reads.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/driver_targets.h"
#include "common/example_graphs.h"
#include "driver/driver.h"
#include "driver/program_entry.h"
#include "ir/parser.h"
#include "runtime/backend.h"
#include "support/error.h"

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
      const rt::ProgramArtifact back = driver::decodeProgramArtifact(bytes);
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
      ++artifacts;
    }
  EXPECT_GT(artifacts, 30);
}

TEST(ProgramEntry, BytesThatAreNotAnArtifactAreRefused) {
  ir::Graph g = driver::optimize(
      ir::parseModule("graph f(x: f32[N, 64]) {\n  y = softmax(x)\n  return y\n}\n", "t").at(0));
  auto shapes = shapesOf(g);
  driver::Build b =
      driver::build(g, ir::bindInputs(g, signatureOf(g, shapes)), driver::namedTarget("sm_90"), {});
  const std::vector<uint8_t> bytes = driver::encodeProgramArtifact(b.artifact);
  // Every truncation, and bytes past the end.
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(driver::decodeProgramArtifact(std::span(bytes.data(), n)), Error) << n;
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_THROW(driver::decodeProgramArtifact(longer), Error);
  // Huge lengths are refused before anything is allocated.
  std::vector<uint8_t> huge = bytes;
  for (size_t i = 4 + 8 + b.artifact.name.size(); i < 4 + 8 + b.artifact.name.size() + 8; ++i)
    huge[i] = 0xff;
  EXPECT_THROW(driver::decodeProgramArtifact(huge), Error);
  // Any single flipped byte decodes to something or throws: never a crash (a flip in text or a
  // number decodes; the entry's checksum is what catches those, runtime/kernel_cache.h).
  for (size_t i = 0; i < bytes.size(); i += 7) {
    std::vector<uint8_t> flipped = bytes;
    flipped[i] ^= 0xa5;
    try {
      driver::decodeProgramArtifact(flipped);
    } catch (const Error&) {
    }
  }
}

TEST(ProgramEntry, TheKeyChangesWithEverythingABuildReads) {
  const std::string text =
      "graph f(x: f32[N, 64], b: f32[64]) {\n  s = add(x, b)\n  y = softmax(s, axis=-1)\n"
      "  return y\n}\n";
  ir::Graph g = driver::optimize(ir::parseModule(text, "t").at(0));
  const rt::Target t = driver::namedTarget("sm_90");
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
