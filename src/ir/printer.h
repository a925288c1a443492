// The `.stitch` text format writer: the inverse of parseModule (parser.h).
//
// For every graph the parser produces, parseModule(printModule(gs)) == gs (Graph::operator==):
// nodes are printed in node order, Input nodes in the header, attributes in their stored
// (normalized) order, and Constant nodes inline as number literals where they are used, which is
// where the parser re-creates them (just before the op). Float literals use formatDouble, which
// reads back as the same double; integer-dtype literals print as integers.
//
// Graphs built through the API can hold constants the text cannot write as literals: a constant
// returned as an output, used by an op that takes no literals, paired with another constant, or
// of dtype bool. Such a constant is printed as a statement `cN = full(shape=[], value=V, dtype=T)`
// with a fresh name, at its node's position. The printed text then reads back to an equivalent
// graph, not an identical one (a Full node instead of a Constant); so does a graph whose constants
// were not made just before their one user (a literal is re-created at each use) or that holds
// unused constants (they are dropped).
#pragma once

#include <span>
#include <string>

#include "ir/graph.h"

namespace stitch::ir {

// One graph, ending in "}\n".
std::string printGraph(const Graph& g);
// Graphs separated by a blank line.
std::string printModule(std::span<const Graph> graphs);

}  // namespace stitch::ir
