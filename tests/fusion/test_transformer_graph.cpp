// The stacked-transformer generator behind the planner benchmarks: verified, connected, sized as
// asked, and printable as text that reads back to the same graph.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ir/parser.h"
#include "ir/printer.h"
#include "testing/transformer_graph.h"

using namespace stitch;
using namespace stitch::testing;

namespace {

// Every node reaches the output: one connected DAG with nothing dangling.
bool allReachOutput(const ir::Graph& g) {
  std::vector<bool> live(g.nodes().size(), false);
  for (int o : g.outputs()) live[static_cast<size_t>(o)] = true;
  for (size_t i = g.nodes().size(); i-- > 0;)
    if (live[i])
      for (int o : g.nodes()[i].operands) live[static_cast<size_t>(o)] = true;
  for (bool l : live)
    if (!l) return false;
  return true;
}

TEST(TransformerGraph, AThousandOpsVerifyAndConnect) {
  ir::Graph g = transformerGraphWithOps(1000);
  EXPECT_NO_THROW(ir::verify(g));
  int64_t perLayer = transformerOpsPerLayer();
  EXPECT_EQ(perLayer, 48);
  EXPECT_EQ(g.numOps() % static_cast<size_t>(perLayer), 0u);
  EXPECT_NEAR(static_cast<double>(g.numOps()), 1000.0, perLayer / 2.0);
  EXPECT_TRUE(g.symbols().empty());  // concrete shapes
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(ir::typeStr(g.node(g.outputs()[0]).type), "f32[512, 768]");
  EXPECT_TRUE(allReachOutput(g));
  // Inputs: x, the mask, and seven parameters a layer.
  EXPECT_EQ(g.inputs().size(), 2 + 7 * g.numOps() / static_cast<size_t>(perLayer));
}

TEST(TransformerGraph, HasTheMemoryBoundOpMix) {
  ir::Graph g = transformerGraph(1);
  auto count = [&](ir::OpCode op) {
    int n = 0;
    for (const ir::Node& node : g.nodes()) n += node.op == op;
    return n;
  };
  EXPECT_EQ(count(ir::OpCode::ReduceMax), 1);   // softmax
  EXPECT_EQ(count(ir::OpCode::ReduceSum), 2);   // softmax, down projection stand-in
  EXPECT_EQ(count(ir::OpCode::ReduceMean), 4);  // two layer norms
  EXPECT_EQ(count(ir::OpCode::Tanh), 1);        // GELU
  EXPECT_EQ(count(ir::OpCode::Transpose), 2);
  EXPECT_EQ(ir::typeStr(g.node(*g.find("l0_scores")).type), "f32[4, 6, 128, 128]");
}

TEST(TransformerGraph, PrintsAndReadsBackTheSame) {
  ir::Graph g = transformerGraph(2);
  std::vector<ir::Graph> back = ir::parseModule(ir::printGraph(g), "transformer.stitch");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_TRUE(back[0] == g);
}

TEST(TransformerGraph, RejectsOptionsThatDoNotFit) {
  EXPECT_THROW(transformerGraph(0), Error);
  TransformerGraphOptions o;
  o.heads = 12;  // head size 64 != seq 128
  EXPECT_THROW(transformerGraph(1, o), Error);
  o = {};
  o.ffn = 1000;
  EXPECT_THROW(transformerGraph(1, o), Error);
  o = {};
  o.batch = 2;
  o.seq = 64;
  o.hidden = 256;
  o.heads = 4;
  o.ffn = 1024;
  EXPECT_NO_THROW(ir::verify(transformerGraph(3, o)));
}

}  // namespace
