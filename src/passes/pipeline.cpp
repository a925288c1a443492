#include "passes/pipeline.h"

#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/decompose.h"
#include "passes/expand_pow.h"
#include "passes/fold_constants.h"
#include "passes/fold_reshapes.h"
#include "passes/gather_rows.h"
#include "passes/sink_picks.h"

namespace stitch::passes {

ir::Graph runPasses(const ir::Graph& g) {
  constexpr int kMaxRounds = 4;
  ir::Graph cur = gatherRowsToReductions(sinkPicks(decomposeComposites(g)));
  for (int round = 0; round < kMaxRounds; ++round) {
    ir::Graph next = eliminateDeadCode(
        eliminateCommonSubexpressions(expandPowers(foldConstants(foldReshapes(cur)))));
    bool changed = !(next == cur);
    cur = std::move(next);
    if (!changed) break;
  }
  return cur;
}

}  // namespace stitch::passes
