// Column partials' sizing (design note in schedule.h and lower/column_partials.h).
#include "fusion/schedule.h"

#include <algorithm>
#include <cstdint>

namespace stitch::fusion {

int64_t columnPartialWorkers(int64_t units, int64_t rowLength, int gpuProcessors) {
  // GPU: 32 unit slots per processor (4 blocks of 8 warp-wide rows, or more blocks of wider
  // rows); host: a few tasks per core of any machine this runs on. Not measured yet on a GPU
  // (issue 15): the constants are where the rows phase and the partials' traffic balance on paper.
  if (units == 0) return 0;  // no rows: the combine phase reduces no partials (identities)
  const bool gpu = gpuProcessors > 0;
  const int64_t machine = gpu ? int64_t{32} * gpuProcessors : 64;
  const int64_t budget = std::max<int64_t>(1, kPartialBudget / std::max<int64_t>(rowLength, 1));
  // At least kRowsPerWorker rows each, so the partials (one row per worker, written and read
  // once) stay a small part of the traffic on short inputs too.
  const int64_t enough = (units + kRowsPerWorker - 1) / kRowsPerWorker;
  const int64_t workers = std::max<int64_t>(1, std::min({enough, machine, budget}));
  if (gpu) return workers;
  // The host deals blocks of ceil(units / workers) units (Phase::workerBlocks): as many workers
  // as it takes, so that none is left without a unit (its partials would never be written).
  const int64_t per = (units + workers - 1) / workers;
  return (units + per - 1) / per;
}

ir::DType partialDType(ir::DType t) {
  return t == ir::DType::F16 || t == ir::DType::BF16 ? ir::DType::F32 : t;
}

}  // namespace stitch::fusion
