// The one way passes rewrite a graph: copy it node by node into a new graph through
// ir::GraphBuilder, with an operand remap from old value ids to new ones.
//
// Graphs are immutable, so a pass is a function from graph to graph. Rewriter::run visits every
// old node in order (which is topological); the visitor either returns the new value the node
// becomes (a replacement it built, or an existing value it folds to), kDrop to leave it out, or
// nullopt to have it copied as is. Copies keep the node's name and source location, and inputs
// keep their names and order, so the signature never changes. Names the pass makes are fresh:
// "tN" that collides with no name of the old graph (so a later copied node keeps its own name)
// nor of the new one.
//
// Output names: a graph output keeps its name when its node survives. When an output value is
// replaced by another value (a reshape folded into its operand, a node merged with an equal one)
// the output list simply points at that value, and the graph's `return` names it; an output that
// is an input returns the input. Passes that build a replacement for an output (decomposition,
// constant folding) give the replacement the old name.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"

namespace stitch::passes {

class Rewriter {
 public:
  // A visitor's answer: leave the node out of the new graph (nothing may refer to it later).
  static constexpr int kDrop = -1;
  using Visit = std::function<std::optional<int>(Rewriter&, int oldId)>;

  explicit Rewriter(const ir::Graph& src);

  const ir::Graph& src() const { return src_; }
  // The new graph as built so far.
  const ir::Graph& graph() const { return b_.graph(); }
  const ir::Node& node(int newId) const { return b_.graph().node(newId); }
  // The new value an old value became.
  int mapped(int oldId) const;

  // `base` when no name of the old or new graph is that, else `base_N` for the first free N: a
  // name the pass derives from an old node's (a check named after the gather it keeps).
  std::string freshName(const std::string& base);

  // Adds an op to the new graph; an empty name makes a fresh one.
  int add(ir::OpCode op, std::vector<int> operands, ir::Attrs attrs = {}, std::string name = {});
  int constant(double value, ir::DType dtype);
  // Copies old node oldId with its operands remapped (an Input becomes a new input).
  int copy(int oldId);

  // Visits every old node in order and returns the finished, verified graph.
  ir::Graph run(const Visit& visit) &&;

 private:
  std::string freshName();

  const ir::Graph& src_;
  ir::GraphBuilder b_;
  std::vector<int> map_;
  std::unordered_set<std::string> oldNames_;
  int nextFresh_ = 0;
};

// Rewrites g with visit (see Rewriter::run).
ir::Graph rewrite(const ir::Graph& g, const Rewriter::Visit& visit);

}  // namespace stitch::passes
