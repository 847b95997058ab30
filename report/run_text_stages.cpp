// The stage column of `hetplan search`'s table (report/run_text.h, stage_layers_summary).
#include "report/run_text.h"

#include <fmt/format.h>

namespace hetplan {
namespace {

// One item of the column: a GPU type's name before its first stage, then a count or a run.
struct Item {
  std::string text;
  int64_t stages = 0;
};

int64_t layers_of(const StagePrediction& s) { return s.stage.last_layer - s.stage.first_layer + 1; }

std::vector<Item> summary_items(const std::vector<StagePrediction>& stages) {
  constexpr size_t kShortestRun = 3;  // "5,5" reads as easily as "5(x2)"
  std::vector<Item> items;
  size_t i = 0;
  while (i < stages.size()) {
    const std::string& gpu = stages[i].stage.gpu_type;
    size_t end = i;
    while (end < stages.size() && stages[end].stage.gpu_type == gpu &&
           layers_of(stages[end]) == layers_of(stages[i]))
      ++end;
    const bool new_gpu = i == 0 || stages[i - 1].stage.gpu_type != gpu;
    const std::string sep = i == 0 ? "" : new_gpu ? " | " : ",";
    const std::string head = sep + (new_gpu ? gpu + " " : "");
    const int64_t n = layers_of(stages[i]);
    if (end - i >= kShortestRun) {
      items.push_back({head + fmt::format("{}(x{})", n, end - i), static_cast<int64_t>(end - i)});
    } else {
      for (size_t k = i; k < end; ++k)
        items.push_back({(k == i ? head : std::string(",")) + std::to_string(n), 1});
    }
    i = end;
  }
  return items;
}

}  // namespace

std::string stage_layers_summary(const std::vector<StagePrediction>& stages, size_t width) {
  const std::vector<Item> items = summary_items(stages);
  std::string out;
  int64_t shown = 0;
  const auto total = static_cast<int64_t>(stages.size());
  for (const Item& item : items) {
    const int64_t left = total - shown - item.stages;
    const std::string tail = left > 0 ? fmt::format(" ... +{} stages", left) : "";
    if (out.size() + item.text.size() + tail.size() > width && !out.empty())
      return out + fmt::format(" ... +{} stages", total - shown);
    out += item.text;
    shown += item.stages;
  }
  return out;
}

}  // namespace hetplan
