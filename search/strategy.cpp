#include "search/strategy.h"

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/whole_number.h"
#include "search/pipeline/schedule.h"

namespace hetplan {

int64_t Strategy::microbatches() const {
  const int64_t per_pipeline = dp * micro_batch;
  if (per_pipeline <= 0 || global_batch % per_pipeline != 0) return 0;
  return global_batch / per_pipeline;
}

Json to_json(const Strategy& s) {
  Json j;
  j["dp"] = s.dp;
  j["tp"] = s.tp;
  j["pp"] = s.pp;
  j["micro_batch"] = s.micro_batch;
  j["global_batch"] = s.global_batch;
  j["schedule"] = s.schedule;
  j["recompute"] = to_string(s.recompute);
  j["zero"] = s.zero;
  j["sequence_parallel"] = s.sequence_parallel;
  j["chunks"] = s.chunks;
  j["flash_attention"] = s.flash_attention;
  j["grad_accumulation_fusion"] = s.grad_accumulation_fusion;
  Json stages = Json::array();
  for (const auto& st : s.stages) {
    Json sj = {{"gpu_type", st.gpu_type}, {"devices", st.devices}};
    if (st.first_layer >= 0) sj["layers"] = {st.first_layer, st.last_layer};
    stages.push_back(sj);
  }
  j["stages"] = stages;
  return j;
}

Strategy strategy_from_json(ObjectReader r) {
  Strategy s;
  s.dp = r.positive_integer("dp");
  s.tp = r.positive_integer("tp");
  s.pp = r.positive_integer("pp");
  s.micro_batch = r.positive_integer("micro_batch");
  s.global_batch = r.positive_integer("global_batch");
  s.schedule = r.string_or("schedule", "1f1b");
  const std::string rc = r.choice_or("recompute", {"none", "selective", "full"}, "none");
  parse_recompute(rc, s.recompute);
  const int64_t zero = r.integer_or("zero", 0);
  if (zero < 0 || zero > 3)
    r.fail("zero", fmt::format("expected a ZeRO stage 0-3, found {}", zero));
  s.zero = static_cast<int>(zero);
  s.sequence_parallel = r.boolean_or("sequence_parallel", false);
  if (s.sequence_parallel && s.tp == 1)
    r.fail("sequence_parallel",
           "sequence parallelism splits activations over the tensor-parallel "
           "group: it needs tp > 1");
  // Without "chunks" a schedule runs its default (interleaved and the V schedules: 2), as predict
  // and search do.
  const pipeline::ScheduleInfo* schedule = nullptr;
  for (const auto& info : pipeline::schedules())
    if (info.name == s.schedule) schedule = &info;
  if (schedule == nullptr)
    r.fail("schedule",
           fmt::format("expected one of {}, found \"{}\"", pipeline::schedule_names(), s.schedule));
  s.chunks = r.positive_integer_or("chunks", schedule->default_chunks);
  if (s.schedule == "interleaved" && s.chunks < 2)
    r.fail("chunks", fmt::format("schedule interleaved runs 2 or more chunks per device, found {} "
                                 "(one chunk is schedule 1f1b)",
                                 s.chunks));
  if (schedule->default_chunks <= 1 && s.chunks != 1)
    r.fail("chunks", fmt::format("schedule {} runs one chunk per device, found {} (interleaved and "
                                 "the V schedules run several)",
                                 s.schedule, s.chunks));
  s.flash_attention = r.boolean_or("flash_attention", true);
  s.grad_accumulation_fusion = r.boolean_or("grad_accumulation_fusion", true);
  for (auto& st : r.objects_or_empty("stages")) {
    StageSpec spec;
    if (st.has("layers")) {
      auto layers = st.integers("layers");
      if (layers.size() != 2 || layers[0] < 0 || layers[1] < layers[0])
        st.fail("layers", "expected [first, last] layer indices with 0 <= first <= last");
      spec.first_layer = layers[0];
      spec.last_layer = layers[1];
    }
    spec.gpu_type = st.string_or("gpu_type", "");
    if (st.has("devices")) spec.devices = st.integers("devices");
    for (int64_t d : spec.devices)
      if (d < 0) st.fail("devices", fmt::format("expected device indices >= 0, found {}", d));
    st.finish();
    s.stages.push_back(std::move(spec));
  }
  // Fields a predict or search output carries along with the strategy.
  r.optional_object("predicted");
  r.optional_string("model");
  r.optional_string("cluster");
  r.finish();
  const auto n = static_cast<int64_t>(s.stages.size());
  if (n != 0 && n != s.pp && (s.chunks <= 1 || n != s.pp * s.chunks))
    r.fail("stages", fmt::format("expected pp = {} stages{}, found {}", s.pp,
                                 s.chunks > 1 ? fmt::format(" or pp x chunks = {}", s.pp * s.chunks)
                                              : std::string(),
                                 n));
  return s;
}

Strategy load_strategy(const std::string& path, size_t index) {
  Document doc = load_document(path);
  ObjectReader r(doc);
  if (!r.has("strategies")) return strategy_from_json(r);
  auto list = r.objects("strategies");
  if (index >= list.size())
    r.fail("strategies",
           fmt::format("expected at least {} strategies, found {}", index + 1, list.size()));
  return strategy_from_json(list[index]);
}

Json to_json(const Prediction& p) {
  Json j;
  j["feasible"] = p.feasible;
  j["reason"] = p.reason;
  j["reason_code"] = p.reason_code;  // "" when feasible: the contract's field is always there
  j["iteration_s"] = p.iteration_s;
  j["samples_per_s"] = p.samples_per_s;
  j["tokens_per_s"] = p.tokens_per_s;
  j["mfu"] = p.mfu;
  j["peak_memory_bytes"] = whole_numbers_json(p.peak_memory_bytes);  // nearest byte
  Json breakdown = Json::object();
  for (const auto& [name, s] : p.breakdown) breakdown[name] = s;
  j["breakdown"] = breakdown;
  j["bubble_rate"] = p.bubble_rate;
  j["kernels_per_iteration"] = p.kernels_per_iteration;
  j["host_s"] = p.host_s;
  Json stages = Json::array();
  for (const auto& s : p.stages) {
    stages.push_back({{"layers", {s.stage.first_layer, s.stage.last_layer}},
                      {"gpu_type", s.stage.gpu_type},
                      {"devices", s.stage.devices},
                      {"forward_s", s.forward_s},
                      {"backward_input_s", s.backward_input_s},
                      {"backward_weight_s", s.backward_weight_s},
                      {"tp_comm_s", s.tp_comm_s},
                      {"recompute_s", s.recompute_s},
                      {"p2p_s", s.p2p_s},
                      {"dp_sync_s", s.dp_sync_s},
                      {"optimizer_s", s.optimizer_s},
                      {"in_flight_microbatches", s.in_flight},
                      {"memory", to_json(s.memory)}});
  }
  j["stages"] = stages;
  j["notes"] = p.notes;
  return j;
}

Prediction infeasible(std::string code, std::string reason) {
  Prediction p;
  p.feasible = false;
  p.reason_code = std::move(code);
  p.reason = std::move(reason);
  return p;
}

}  // namespace hetplan
