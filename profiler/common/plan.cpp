#include "profiler/common/plan.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "costmodel/journal.h"
#include "profiler/common/progress.h"
#include "profiler/common/records.h"

namespace hetplan::profiler {

int64_t PlanSummary::items() const {
  int64_t n = 0;
  for (const auto& r : rows) n += r.items;
  return n;
}

int64_t PlanSummary::done() const {
  int64_t n = 0;
  for (const auto& r : rows) n += r.done;
  return n;
}

double PlanSummary::estimate_s() const {
  double s = 0;
  for (const auto& r : rows) s += r.estimate_s;
  return s;
}

std::vector<PlanItem> deduplicate(std::vector<PlanItem> items) {
  std::unordered_map<std::string, size_t> seen;
  std::vector<PlanItem> out;
  out.reserve(items.size());
  for (auto& item : items) {
    auto [it, added] = seen.emplace(item.key, out.size());
    if (added) {
      out.push_back(std::move(item));
      continue;
    }
    // Same measurement planned twice (a grid shape that is also a layer's GEMM): keep one, with
    // every origin.
    Json& kept = out[it->second].spec;
    if (kept.contains("origins") && item.spec.contains("origins")) {
      for (const auto& o : item.spec["origins"])
        if (std::find(kept["origins"].begin(), kept["origins"].end(), o) == kept["origins"].end())
          kept["origins"].push_back(o);
    }
  }
  return out;
}

std::vector<PlanItem> remaining(const std::vector<PlanItem>& plan, const Journal& journal,
                                bool retry_failed) {
  std::vector<PlanItem> out;
  for (const auto& item : plan)
    if (!finished(journal, item.key, retry_failed)) out.push_back(item);
  return out;
}

PlanSummary summarize_plan(const std::vector<PlanItem>& plan, const Journal* journal,
                           bool retry_failed) {
  PlanSummary s;
  for (const auto& item : plan) {
    auto it = std::find_if(s.rows.begin(), s.rows.end(),
                           [&](const PlanSummary::Row& r) { return r.section == item.section; });
    if (it == s.rows.end()) {
      s.rows.push_back({item.section});
      it = s.rows.end() - 1;
    }
    ++it->items;
    if (journal && finished(*journal, item.key, retry_failed)) {
      ++it->done;
    } else {
      it->estimate_s += item.estimate_s;
    }
  }
  return s;
}

std::string format_plan(const PlanSummary& summary) {
  std::string out = "plan:\n";
  for (const auto& r : summary.rows) {
    out += fmt::format("  {:<12} {:>6} measurements", r.section, r.items);
    if (r.done > 0) out += fmt::format(" ({} already journalled)", r.done);
    out += fmt::format(", about {}\n", format_duration(r.estimate_s));
  }
  out += fmt::format("  {:<12} {:>6} measurements", "total", summary.items());
  if (summary.done() > 0) out += fmt::format(" ({} already journalled)", summary.done());
  out += fmt::format(", about {} (estimate for an H100; the ETA adapts as it runs)\n",
                     format_duration(summary.estimate_s()));
  return out;
}

}  // namespace hetplan::profiler
