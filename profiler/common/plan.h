// A calibration plan: the measurements a run intends to take, each under the journal key that
// marks it finished, with an estimated duration for the printed plan and the ETA.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "costmodel/document.h"

namespace hetplan {
class Journal;
}

namespace hetplan::profiler {

struct PlanItem {
  std::string section;  // "gemm", "layer_gemm", "kernels", "layers", "collectives", ...
  std::string key;      // journal key; unique within a plan
  std::string label;    // short human text for the progress line
  double estimate_s = 0;
  Json spec;  // what to measure, read by the section that planned it
};

// Per-section counts and estimated seconds, in first-seen section order.
struct PlanSummary {
  struct Row {
    std::string section;
    int64_t items = 0;
    int64_t done = 0;       // already in the journal (resume)
    double estimate_s = 0;  // of the items still to do
  };
  std::vector<Row> rows;
  int64_t items() const;
  int64_t done() const;
  double estimate_s() const;
};

// Drops items whose key repeats an earlier item's (the same GEMM shape from two layers, say); the
// kept item's spec "origins" (when it has one) gains the dropped items' origins.
std::vector<PlanItem> deduplicate(std::vector<PlanItem> items);
// Items still to measure: those the journal holds no record for. A journalled failure counts as
// finished (a failure that lost the GPU context would otherwise stop every resumed run at the same
// item) unless `retry_failed`.
std::vector<PlanItem> remaining(const std::vector<PlanItem>& plan, const Journal& journal,
                                bool retry_failed = false);
PlanSummary summarize_plan(const std::vector<PlanItem>& plan, const Journal* journal,
                           bool retry_failed = false);
// The plan as printed at start: one line per section and a total.
std::string format_plan(const PlanSummary& summary);

}  // namespace hetplan::profiler
