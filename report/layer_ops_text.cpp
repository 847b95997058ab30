#include "report/layer_ops_text.h"

#include <algorithm>

#include <fmt/format.h>

#include "report/run_text.h"

namespace hetplan {
namespace {

std::string layer_heading(const ModelSpec& model, const LayerOps& l) {
  const LayerSpec& first = model.layers[static_cast<size_t>(l.first_layer)];
  const double total_s = l.cost.total_s();
  std::string out = fmt::format("layer {} {}", l.first_layer, first.name);
  if (l.count > 1) out += fmt::format(" and {} alike", l.count - 1);
  out += fmt::format(": F {}  B {}  W {} = {} a micro-batch",
                     format_seconds(l.cost.times.pass_s[0]), format_seconds(l.cost.times.pass_s[1]),
                     format_seconds(l.cost.times.pass_s[2]), format_seconds(total_s));
  if (l.cost.times.recompute_s > 0)
    out += fmt::format(" (B re-runs {})", format_seconds(l.cost.times.recompute_s));
  if (l.cost.times.host_sync_s > 0)
    out += fmt::format(" (F waits {} for the host)", format_seconds(l.cost.times.host_sync_s));
  if (l.cost.times.correction != nullptr) out += "; whole-layer timings scale its ops";
  return out + "\n";
}

std::string pass_rows(const LayerOps& l, Pass pass) {
  std::vector<const OpTime*> ops;
  double sum_s = 0;
  for (const OpTime& op : l.ops)
    if (op.pass == pass) {
      ops.push_back(&op);
      sum_s += op.seconds;
    }
  if (ops.empty()) return "";
  std::stable_sort(ops.begin(), ops.end(),
                   [](const OpTime* a, const OpTime* b) { return a->seconds > b->seconds; });
  std::string out = fmt::format("  {} ops, {} in all:\n", to_string(pass), format_seconds(sum_s));
  for (const OpTime* op : ops)
    out += fmt::format("    {:>10} {:>5.1f}%  {:<9} {:<34} {}\n", format_seconds(op->seconds),
                       sum_s > 0 ? 100 * op->seconds / sum_s : 0.0, op->kind, op->name, op->what);
  return out;
}

}  // namespace

std::string layer_ops_text(const ModelSpec& model, const std::string& gpu_type,
                           const std::vector<LayerOps>& layers) {
  std::string out = fmt::format(
      "\nlayer ops on {} (a micro-batch; each op's own time, before whole-layer corrections, "
      "recomputation and overlap):\n",
      gpu_type);
  for (const LayerOps& l : layers) {
    out += layer_heading(model, l);
    for (Pass p : {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight})
      out += pass_rows(l, p);
  }
  return out;
}

}  // namespace hetplan
