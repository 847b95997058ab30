#include "report/run_documents.h"

#include <fmt/format.h>

#include "costmodel/utc_time.h"
#include "costmodel/version.h"
#include "report/predictions.h"

namespace hetplan {
namespace {

// The head both documents share: format, schema, context (with the input files), model, cluster.
Json document_head(const char* format, const RunDocumentInputs& in) {
  Json out;
  out["format"] = format;
  out["schema_version"] = 1;
  out["context"] = in.context;
  add_input_sources(out["context"], in.model_arg, in.cluster_arg, in.model.seq_len);
  out["model"] = in.model.name;
  out["cluster"] = in.cluster.name;
  out["cluster_gpus"] = in.cluster.num_gpus();
  return out;
}

Json ranked_list(const std::vector<RankedStrategy>& ranked) {
  Json list = Json::array();
  for (const auto& r : ranked) {
    Json j = to_json(r.strategy);
    j["predicted"] = to_json(r.predicted);
    list.push_back(j);
  }
  return list;
}

}  // namespace

Json run_context(const std::string& command, const Profile& profile) {
  Json sources = Json::object();
  for (const auto& [type, fit] : profile.gpus) sources[type] = fit.source;
  return {
      {"hetplan_version", version()}, {"hetplan_commit", commit()},     {"command", command},
      {"date", utc_now_iso8601()},    {"calibration", profile.origins}, {"gpu_sources", sources}};
}

Json prediction_document(const RunDocumentInputs& in, const Strategy& strategy,
                         const Prediction& predicted) {
  Json out = document_head("hetplan-prediction", in);
  out["framework"] = in.framework.name;
  out["strategy"] = to_json(strategy);
  out["predicted"] = to_json(predicted);
  return out;
}

Json search_document(const RunDocumentInputs& in, int64_t global_batch, const SearchResult& r) {
  Json out = document_head("hetplan-search", in);
  out["global_batch"] = global_batch;
  out["framework"] = in.framework.name;
  out["strategies"] = ranked_list(r.top);
  out["closest_infeasible"] = ranked_list(r.closest_infeasible);
  if (r.top.empty() && r.min_static_bytes > 0) {
    out["min_static_bytes"] = r.min_static_bytes;
    out["static_limit_bytes"] = r.static_limit_bytes;
    out["why_none"] = fmt::format(
        "weights, gradients and optimizer state alone need at least {:.1f} GiB per GPU; the "
        "largest GPU has {:.1f} GiB",
        r.min_static_bytes / (1ull << 30), r.static_limit_bytes / (1ull << 30));
  }
  out["stats"] = to_json(r.stats);
  return out;
}

}  // namespace hetplan
