// The graph IR: a named SSA function from input tensors to output tensors.
//
// Nodes are immutable once made, and are made in one place, GraphBuilder, which checks operands
// and attributes against the op's schema and runs its inference; so a Graph in hand is always
// well typed. Node ids are positions in nodes(), which is in definition order (topological).
// Every op has one result; a node's name is its result's name. Inputs are nodes of op Input and
// number literals are nodes of op Constant (unnamed; printed inline).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/ops.h"

namespace stitch::ir {

// Where a node was written, for diagnostics; line 0 means "not from text".
struct SourceLoc {
  int line = 0;
  int col = 0;
};

struct Node {
  OpCode op;
  std::vector<int> operands;
  Attrs attrs;
  TensorType type;
  std::string name;  // empty for constants
  SourceLoc loc;
};

// What an index error names for node n, a gather or check_index: "gather 'y' (axis 1)",
// "check_index 'label_ok'" (support/error.h, indexErrorMessage).
std::string indexCheckLabel(const Node& n);

class Graph {
 public:
  const std::string& name() const { return name_; }
  std::span<const Node> nodes() const { return nodes_; }
  const Node& node(int id) const { return nodes_.at(static_cast<size_t>(id)); }
  std::span<const int> inputs() const { return inputs_; }
  std::span<const int> outputs() const { return outputs_; }
  // The node named `name`, if any.
  std::optional<int> find(std::string_view name) const;
  // The symbols of the input types, in order of first appearance.
  std::vector<std::string> symbols() const;
  // Number of nodes that are ops (not inputs or constants).
  size_t numOps() const;

  // Structural equality: same name, nodes (op, operands, attributes, types, names), inputs and
  // outputs. Source locations are ignored.
  bool operator==(const Graph& o) const;

 private:
  friend class GraphBuilder;
  std::string name_;
  std::vector<Node> nodes_;
  std::vector<int> inputs_;
  std::vector<int> outputs_;
  std::unordered_map<std::string, int> byName_;  // so building and lookup stay linear in size
};

// Builds a graph node by node. Every add* either appends a fully checked node or throws (an
// OpError for op problems, InvalidGraph otherwise) and leaves the graph unchanged.
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name);
  // Continues building on an existing (well-typed) graph.
  explicit GraphBuilder(Graph g);

  int addInput(std::string name, TensorType type, SourceLoc loc = {});
  int addConstant(double value, DType dtype, SourceLoc loc = {});
  // name empty: a fresh name "tN" is made.
  int addOp(OpCode op, std::vector<int> operands, Attrs attrs, std::string name = {},
            SourceLoc loc = {});
  void setOutputs(std::vector<int> outputs);

  const Graph& graph() const { return g_; }
  // The finished graph; verified (outputs must have been set).
  Graph finish() &&;

 private:
  void checkName(const std::string& name) const;
  bool isInputSymbol(const std::string& symbol) const;
  std::string freshName();
  Graph g_;
  int nextTemp_ = 0;
};

bool isIdentifier(std::string_view s);
// Words the text format reserves; they cannot name values, graphs or symbols.
bool isReservedWord(std::string_view s);

// Checks every invariant of a graph; throws InvalidGraph describing the first violation.
void verify(const Graph& g);

}  // namespace stitch::ir
