#include "report/layer_ops_text.h"

#include <algorithm>

#include <fmt/format.h>

#include "report/run_text.h"

namespace hetplan {
namespace {

constexpr const char* kPassKeys[kNumPasses] = {"forward_s", "backward_input_s",
                                               "backward_weight_s"};

Json layer_json(const ModelSpec& model, const LayerOps& l) {
  Json j;
  j["first_layer"] = l.first_layer;
  j["name"] = model.layers[static_cast<size_t>(l.first_layer)].name;
  j["count"] = l.count;
  for (int p = 0; p < kNumPasses; ++p) j[kPassKeys[p]] = l.cost.times.pass_s[p];
  j["recompute_s"] = l.cost.times.recompute_s;
  j["host_sync_s"] = l.cost.times.host_sync_s;
  j["corrected"] = l.cost.times.correction != nullptr;
  j["kernels"] = l.cost.kernel_launches;
  j["host_s"] = l.cost.host_s;
  Json ops = Json::array();
  for (const OpTime& op : l.ops) {
    ops.push_back({{"name", op.name},
                   {"kind", op.kind},
                   {"pass", to_string(op.pass)},
                   {"seconds", op.seconds},
                   {"what", op.what}});
    if (op.rerun > 0) ops.back()["rerun_share"] = op.rerun;
  }
  j["ops"] = std::move(ops);
  return j;
}

std::string layer_heading(const Json& l) {
  double total_s = 0;
  for (const char* key : kPassKeys) total_s += l[key].get<double>();
  std::string out =
      fmt::format("layer {} {}", l["first_layer"].get<int64_t>(), l["name"].get<std::string>());
  if (const auto count = l["count"].get<int64_t>(); count > 1)
    out += fmt::format(" and {} alike", count - 1);
  out += fmt::format(": F {}  B {}  W {} = {} a micro-batch",
                     format_seconds(l["forward_s"].get<double>()),
                     format_seconds(l["backward_input_s"].get<double>()),
                     format_seconds(l["backward_weight_s"].get<double>()), format_seconds(total_s));
  if (const double r = l["recompute_s"].get<double>(); r > 0)
    out += fmt::format(" (B re-runs {})", format_seconds(r));
  if (const double h = l["host_sync_s"].get<double>(); h > 0)
    out += fmt::format(" (F waits {} for the host)", format_seconds(h));
  if (l["corrected"].get<bool>()) out += "; whole-layer timings scale its ops";
  out += fmt::format("\n  {:.0f} kernels a micro-batch", l["kernels"].get<double>());
  if (const double host_s = l["host_s"].get<double>(); host_s > 0)
    out += fmt::format(", {} for the host to issue them", format_seconds(host_s));
  return out + "\n";
}

std::string pass_rows(const Json& l, Pass pass) {
  const std::string name(to_string(pass));
  std::vector<const Json*> ops;
  double sum_s = 0;
  for (const Json& op : l["ops"])
    if (op["pass"].get<std::string>() == name) {
      ops.push_back(&op);
      sum_s += op["seconds"].get<double>();
    }
  if (ops.empty()) return "";
  std::stable_sort(ops.begin(), ops.end(), [](const Json* a, const Json* b) {
    return (*a)["seconds"].get<double>() > (*b)["seconds"].get<double>();
  });
  std::string out = fmt::format("  {} ops, {} in all:\n", name, format_seconds(sum_s));
  for (const Json* op : ops) {
    const double s = (*op)["seconds"].get<double>();
    std::string rerun;
    if (const double r = op->value("rerun_share", 0.0); r > 0)
      rerun = r < 1 ? fmt::format("; {:.0f}% re-run in backward", 100 * r) : "; re-run in backward";
    out += fmt::format("    {:>10} {:>5.1f}%  {:<9} {:<34} {}{}\n", format_seconds(s),
                       sum_s > 0 ? 100 * s / sum_s : 0.0, (*op)["kind"].get<std::string>(),
                       (*op)["name"].get<std::string>(), (*op)["what"].get<std::string>(), rerun);
  }
  return out;
}

}  // namespace

Json layer_ops_json(const ModelSpec& model, const std::string& gpu_type, int64_t tp,
                    int64_t micro_batch, const std::vector<LayerOps>& layers) {
  Json out;
  out["gpu_type"] = gpu_type;
  out["tp"] = tp;
  out["micro_batch"] = micro_batch;
  Json list = Json::array();
  for (const LayerOps& l : layers) list.push_back(layer_json(model, l));
  out["layers"] = std::move(list);
  return out;
}

std::string layer_ops_text(const Json& document, bool replicas) {
  if (!document.contains("layer_ops")) return "";
  std::string out;
  for (const Json& type : document["layer_ops"]) {
    std::string title = type["gpu_type"].get<std::string>();
    if (replicas)
      title += fmt::format(" at tp {}, micro-batch {}", type["tp"].get<int64_t>(),
                           type["micro_batch"].get<int64_t>());
    out += fmt::format(
        "\nlayer ops on {} (a micro-batch; each op's own time, before whole-layer corrections, "
        "recomputation and overlap):\n",
        title);
    for (const Json& l : type["layers"]) {
      out += layer_heading(l);
      for (Pass p : {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight})
        out += pass_rows(l, p);
    }
  }
  return out;
}

}  // namespace hetplan
