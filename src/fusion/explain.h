// Explaining a plan: text for people, DOT for Graphviz, JSON for tools.
//
// Every format carries, per kernel: its ops (by value name and op), the dominant op, the
// mapping, the scheme on each internal edge, inputs and outputs, estimated bytes and time; the
// totals against the unfused plan; and each edge that was cut between kernels with the reason.
// JSON has at least {"kernels": [{"ops": [...], ...}, ...]}.
#pragma once

#include <string>

#include "fusion/plan.h"
#include "ir/graph.h"

namespace stitch::fusion {

std::string explainText(const ir::Graph& g, const Plan& p);
std::string explainDot(const ir::Graph& g, const Plan& p);
std::string explainJson(const ir::Graph& g, const Plan& p);

}  // namespace stitch::fusion
