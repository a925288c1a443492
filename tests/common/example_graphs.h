// Every graph of examples/*.stitch, named "FILE:GRAPH", for the tests that sweep the examples.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/parser.h"

namespace stitch::testdata {

inline std::vector<std::pair<std::string, ir::Graph>> exampleGraphs() {
  std::vector<std::pair<std::string, ir::Graph>> out;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(STITCH_SOURCE_DIR) + "/examples")) {
    if (e.path().extension() != ".stitch") continue;
    std::ifstream f(e.path());
    std::stringstream ss;
    ss << f.rdbuf();
    std::string file = e.path().filename().string();
    for (ir::Graph& g : ir::parseModule(ss.str(), file))
      out.emplace_back(file + ":" + g.name(), std::move(g));
  }
  return out;
}

}  // namespace stitch::testdata
