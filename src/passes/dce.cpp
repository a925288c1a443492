#include "passes/dce.h"

#include "passes/rewriter.h"

namespace stitch::passes {

ir::Graph eliminateDeadCode(const ir::Graph& g) {
  // Node order is topological, so one backward sweep marks everything the outputs reach.
  std::vector<bool> live(g.nodes().size(), false);
  for (int o : g.outputs()) live[static_cast<size_t>(o)] = true;
  for (size_t i = live.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (int o : g.nodes()[i].operands) live[static_cast<size_t>(o)] = true;
  }
  return rewrite(g, [&live](Rewriter&, int id) -> std::optional<int> {
    if (live[static_cast<size_t>(id)]) return std::nullopt;
    return Rewriter::kDrop;
  });
}

}  // namespace stitch::passes
