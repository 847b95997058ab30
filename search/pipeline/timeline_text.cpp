#include "search/pipeline/timeline_text.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace hetplan::pipeline {

std::string render_timeline(const PipelineResult& result, int devices, int max_columns) {
  if (result.timeline.empty() || result.makespan_s <= 0 || max_columns < 1) return "";
  double shortest = std::numeric_limits<double>::infinity();
  for (const TimedPass& t : result.timeline)
    if (t.end_s > t.start_s) shortest = std::min(shortest, t.end_s - t.start_s);
  // One cell per shortest pass when that fits, otherwise as many cells as allowed.
  int columns = max_columns;
  if (std::isfinite(shortest)) {
    const double exact = std::ceil(result.makespan_s / shortest - 1e-9);
    if (exact <= max_columns) columns = static_cast<int>(exact);
  }
  const double cell = result.makespan_s / columns;
  std::vector<std::string> rows(devices, std::string(columns, '.'));
  for (const TimedPass& t : result.timeline) {
    if (t.device < 0 || t.device >= devices || t.end_s <= t.start_s) continue;
    const char letter = t.chunk == 0 ? t.op : static_cast<char>(std::tolower(t.op));
    // Cells whose start falls inside the pass.
    const int first = static_cast<int>(std::ceil(t.start_s / cell - 1e-9));
    const int last = static_cast<int>(std::ceil(t.end_s / cell - 1e-9));
    for (int c = std::max(first, 0); c < std::min(last, columns); ++c) rows[t.device][c] = letter;
  }
  std::string out;
  const int label = static_cast<int>(fmt::format("{}", devices - 1).size());
  for (int d = 0; d < devices; ++d) out += fmt::format("d{:<{}} |{}|\n", d, label, rows[d]);
  out += fmt::format(
      "{:>{}}  one cell = {:.4g} time unit(s); F/B/W first chunk, f/b/w later "
      "chunks, . idle\n",
      "", label, cell);
  return out;
}

}  // namespace hetplan::pipeline
