// Each op of one layer with its time on one GPU type: what `hetplan predict --layer-ops` shows
// to say where a layer's time goes. The times are the cost model's per-op terms, before the
// whole-layer corrections, recomputation and the overlaps that CostModel::layer_times and the
// evaluator apply on top (LayerTimes has the layer's totals after them).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "costmodel/cost_model.h"
#include "costmodel/layer_ops.h"

namespace hetplan {

struct OpTime {
  std::string name;
  std::string_view kind;  // gemm, memory, attention, comm
  Pass pass = Pass::kForward;
  double seconds = 0;
  std::string what;  // its shape, bytes or group, as the model took it
  double rerun = 0;  // the share of it that runs again in backward under the recomputation
};

// Every GEMM, memory-bound kernel, attention and collective of `work`, by kind, each kind in the
// order the layer builder emitted them, with the share `recompute` re-runs of each.
std::vector<OpTime> op_times(const CostModel& cost, const GpuSpec& gpu, const LayerWork& work,
                             const LayerGroups& groups, Dtype dtype,
                             const Recomputation& recompute = Recompute::kNone);

}  // namespace hetplan
