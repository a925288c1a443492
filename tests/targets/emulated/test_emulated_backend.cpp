// The test-only "emulated" backend (emulated_backend.cpp), found through the registries by name
// as the C API finds a backend: every example graph is planned, lowered, scheduled and emitted by
// its target, compiled and run by its backend, and compared with the reference interpreter.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "common/fiber_sanitizers.h"
#include "driver/driver.h"
#include "gpu/gpu_test_graphs.h"
#include "ir/printer.h"
#include "ir/shape.h"
#include "ir/signature.h"
#include "runtime/backend.h"
#include "target/target.h"
#include "testing/random_graph.h"
#include "testing/reference_check.h"

using namespace stitch;
namespace st = stitch::testing;

namespace {

TEST(EmulatedBackend, IsRegisteredByNameAndNeverChosenByAuto) {
  const std::vector<std::string_view> choices = rt::backendChoices();
  EXPECT_NE(std::find(choices.begin(), choices.end(), "emulated"), choices.end());
  EXPECT_EQ(rt::resolveBackend("emulated"), "emulated");
  EXPECT_NE(rt::resolveBackend("auto"), "emulated");
  const rt::Target named = target::namedTarget("emulated");
  EXPECT_EQ(named.backend, "emulated");
  EXPECT_EQ(target::makeTarget(named)->language(), "cuda");
  // An unknown name lists the registered targets' names, this one's among them.
  try {
    target::namedTarget("tpu");
    ADD_FAILURE() << "tpu was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("emulated"), std::string::npos) << e.what();
  }
}

// The outputs of `artifact` (a build of `g` under `b`) run by `backend` on `inputs`.
std::vector<reference::HostTensor> run(rt::Backend& backend, const ir::Graph& g,
                                       const ir::Bindings& b, const rt::ProgramArtifact& artifact,
                                       std::span<const reference::HostTensor> inputs) {
  const std::vector<std::vector<int64_t>> shapes = ir::concreteShapes(g, b);
  std::map<int, std::vector<std::byte>> memory;  // every external value, once
  std::vector<rt::BoundValue> bound;
  for (int id : artifact.external) {
    if (memory.count(id)) continue;
    int64_t n = 1;
    for (int64_t d : shapes[static_cast<size_t>(id)]) n *= d;
    memory[id].resize(static_cast<size_t>(n * ir::dtypeBytes(g.node(id).type.dtype)));
    bound.push_back({id, memory[id].data()});
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int id = g.inputs()[i];
    reference::encode(inputs[i], {inputs[i].dtype, inputs[i].shape, memory.at(id).data()});
  }
  backend.load(artifact)->run(bound, nullptr);
  std::vector<reference::HostTensor> out;
  for (int id : g.outputs())
    out.push_back(reference::decode(
        {g.node(id).type.dtype, shapes[static_cast<size_t>(id)], memory.at(id).data()}));
  return out;
}

TEST(EmulatedBackend, RunsTheExamplesAgainstTheReference) {
  SKIP_UNDER_SANITIZERS();
  rt::Backend& backend = rt::requireBackend("emulated");
  const std::unique_ptr<target::Target> t = target::makeTarget(backend.target());
  int runs = 0;
  for (const gputest::NamedGraph& ng : gputest::exampleGraphs({37}, 1 << 14)) {
    const ir::Graph optimized = driver::optimize(ng.graph);
    const driver::Build build = driver::build(optimized, ng.bindings, *t, {});
    const auto inputs = st::randomInputs(ng.graph, ng.bindings, 11);
    std::string mismatch;
    try {
      mismatch = st::compareOutputs(st::evaluateReference(ng.graph, inputs),
                                    run(backend, optimized, ng.bindings, build.artifact, inputs),
                                    st::graphTolerance(ng.graph));
    } catch (const std::exception& e) {
      mismatch = e.what();
    }
    EXPECT_EQ(mismatch, "") << ng.name << ":\n" << ir::printGraph(ng.graph);
    ++runs;
  }
  EXPECT_GT(runs, 30);
}

}  // namespace
