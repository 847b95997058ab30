#include "search/strategy.h"

#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodel/errors.h"
#include "costmodel/whole_number.h"
#include "search/pipeline/schedule.h"
#include "search/replicas.h"

namespace hetplan {

int64_t Strategy::microbatches() const {
  const int64_t per_pipeline = dp * micro_batch;
  if (per_pipeline <= 0 || global_batch % per_pipeline != 0) return 0;
  return global_batch / per_pipeline;
}

int64_t Strategy::chunks_per_device() const {
  const pipeline::ScheduleInfo& info = pipeline::schedule_info(schedule);
  if (info.default_chunks <= 1) return 1;
  return chunks > 1 ? chunks : info.default_chunks;
}

int64_t Strategy::rank_of_virtual_stage(int64_t j) const {
  if (chunks_per_device() == 1) return j;
  // The V turns back at the last rank; interleaved goes round robin.
  if (schedule.rfind("v-", 0) == 0) return j < pp ? j : 2 * pp - 1 - j;
  return j % pp;
}

int64_t Strategy::rank_of_stage(size_t i) const {
  const auto j = static_cast<int64_t>(i);
  return static_cast<int64_t>(stages.size()) == pp ? j : rank_of_virtual_stage(j);
}

std::string stage_devices_problem(const Strategy& s, size_t& stage) {
  const int64_t per_rank = s.rank_devices();
  const auto n = static_cast<int64_t>(s.stages.size());
  if (n != s.pp && n != s.pp * s.chunks_per_device()) return "";  // the count's own error
  std::vector<int64_t> first_stage(s.pp, -1);  // of each rank that lists its devices
  std::map<int64_t, int64_t> rank_of_device;
  for (size_t i = 0; i < s.stages.size(); ++i) {
    stage = i;
    const std::vector<int64_t>& devices = s.stages[i].devices;
    if (devices.empty()) continue;
    const int64_t rank = s.rank_of_stage(i);
    if (static_cast<int64_t>(devices.size()) != per_rank)
      return fmt::format("expected dp x cp x tp = {} x {} x {} = {} device indices, found {}", s.dp,
                         s.cp, s.tp, per_rank, devices.size());
    if (const int64_t other = first_stage[rank]; other >= 0) {
      if (devices != s.stages[other].devices)
        return fmt::format(
            "expected the devices of stage {}, the other chunk of pipeline rank {}: [{}]", other,
            rank, fmt::join(s.stages[other].devices, ", "));
      continue;
    }
    first_stage[rank] = static_cast<int64_t>(i);
    for (int64_t device : devices) {
      const auto [it, fresh] = rank_of_device.emplace(device, rank);
      if (fresh) continue;
      if (it->second == rank) return fmt::format("device {} is listed twice", device);
      return fmt::format("device {} is pipeline rank {}'s too (stage {})", device, it->second,
                         first_stage[it->second]);
    }
  }
  return "";
}

std::string framework_switches(const Strategy& s) {
  std::string words;
  if (!s.flash_attention) words += " unfused-attention";
  if (!s.grad_accumulation_fusion) words += " unfused-grad-add";
  if (!s.overlap_grad_reduce) words += " serial-grad-reduce";
  if (s.tp_comm_overlap) words += " tp-comm-overlap";
  if (s.ep_comm_overlap) words += " ep-comm-overlap";
  if (!s.fp32_grad_reduce) words += " half-grad-reduce";
  if (s.host_mode != HostMode::kEager) words += fmt::format(" {}", to_string(s.host_mode));
  if (s.precision != Precision::kBf16) words += fmt::format(" {}", to_string(s.precision));
  if (s.lora.enabled()) {
    std::vector<std::string_view> targets;
    for (LoraTarget t : lora_targets_of(s.lora.targets)) targets.push_back(to_string(t));
    words += fmt::format(" lora-{}({})", s.lora.rank, fmt::join(targets, ","));
  }
  return words;
}

namespace {

// The keys of context and expert parallelism and of the low-precision recipe.
void read_context_and_experts(ObjectReader& r, Strategy& s) {
  s.cp = r.integer_in_or("cp", 1, kMaxParallelDegree, 1);
  parse_cp_comm(r.choice_or("cp_comm", {"p2p", "all_gather", "a2a", "a2a+p2p"}, "p2p"), s.cp_comm);
  s.cp_a2a = r.integer_in_or("cp_a2a", 2, kMaxParallelDegree, 2);
  s.ep = r.integer_in_or("ep", 1, kMaxParallelDegree, 1);
  s.etp = r.integer_in_or("etp", 1, kMaxParallelDegree, s.tp);
  if (s.etp == s.tp) s.etp = 0;  // follows tp
  parse_moe_dispatcher(r.choice_or("moe_dispatcher", {"alltoall", "allgather", "flex"}, "alltoall"),
                       s.moe_dispatcher);
  s.moe_imbalance = r.number_in_or("moe_imbalance", 1, 64, 1);
  parse_precision(
      r.choice_or("precision",
                  {"bf16", "fp8-delayed", "fp8-current", "fp8-blockwise", "mxfp8", "nvfp4"},
                  "bf16"),
      s.precision);
}

Json replicas_json(const std::vector<ReplicaGroup>& groups) {
  Json out = Json::array();
  for (const ReplicaGroup& g : groups)
    out.push_back({{"gpu_type", g.gpu_type},
                   {"devices", g.devices},
                   {"tp", g.tp},
                   {"micro_batch", g.micro_batch},
                   {"samples", g.samples}});
  return out;
}

// A stage's replica groups (the rules that need the other stages are checked after).
std::vector<ReplicaGroup> read_replicas(std::vector<ObjectReader>& readers) {
  std::vector<ReplicaGroup> groups;
  for (ObjectReader& g : readers) {
    ReplicaGroup r;
    r.gpu_type = g.string("gpu_type");
    r.devices = g.integers("devices");
    for (int64_t d : r.devices)
      if (d < 0) g.fail("devices", fmt::format("expected device indices >= 0, found {}", d));
    r.tp = g.integer_in("tp", 1, kMaxParallelDegree);
    r.micro_batch = g.integer_in("micro_batch", 1, kMaxBatchSamples);
    r.samples = g.integer_in("samples", 1, kMaxBatchSamples);
    g.finish();
    groups.push_back(std::move(r));
  }
  return groups;
}

}  // namespace

Json to_json(const Strategy& s) {
  Json j;
  j["dp"] = s.dp;
  j["tp"] = s.tp;
  j["pp"] = s.pp;
  j["cp"] = s.cp;
  j["cp_comm"] = to_string(s.cp_comm);
  if (s.cp_comm == CpComm::kA2aP2p) j["cp_a2a"] = s.cp_a2a;
  j["ep"] = s.ep;
  j["etp"] = s.expert_tp();
  j["moe_dispatcher"] = to_string(s.moe_dispatcher);
  j["moe_imbalance"] = s.moe_imbalance;
  j["ep_comm_overlap"] = s.ep_comm_overlap;
  j["precision"] = to_string(s.precision);
  j["low_precision_params"] = s.low_precision_params;
  j["micro_batch"] = s.micro_batch;
  j["global_batch"] = s.global_batch;
  j["schedule"] = s.schedule;
  j["recompute"] = to_string(s.recompute);
  if (const Recomputation r = s.recomputation();
      r.granularity == Recompute::kSelective && r.modules != OpGroup::kCoreAttention) {
    Json modules = Json::array();
    for (RecomputeModule m : modules_of(r.modules)) modules.push_back(to_string(m));
    j["recompute_modules"] = modules;
  }
  if (s.recompute_num_layers > 0) j["recompute_num_layers"] = s.recompute_num_layers;
  j["zero"] = s.zero;
  j["sequence_parallel"] = s.sequence_parallel;
  j["chunks"] = s.chunks;
  j["flash_attention"] = s.flash_attention;
  j["grad_accumulation_fusion"] = s.grad_accumulation_fusion;
  j["overlap_grad_reduce"] = s.overlap_grad_reduce;
  j["tp_comm_overlap"] = s.tp_comm_overlap;
  j["fp32_grad_reduce"] = s.fp32_grad_reduce;
  j["host_mode"] = to_string(s.host_mode);
  if (s.lora.enabled()) {
    Json targets = Json::array();
    for (LoraTarget t : lora_targets_of(s.lora.targets)) targets.push_back(to_string(t));
    j["lora"] = {{"rank", s.lora.rank}, {"target_modules", targets}};
  }
  if (!s.framework.empty()) j["framework"] = s.framework;
  Json stages = Json::array();
  for (const auto& st : s.stages) {
    Json sj = Json::object();
    if (st.replicas.empty()) {
      sj["gpu_type"] = st.gpu_type;
      sj["devices"] = st.devices;
    } else {
      sj["replicas"] = replicas_json(st.replicas);
    }
    if (st.first_layer >= 0) sj["layers"] = {st.first_layer, st.last_layer};
    stages.push_back(sj);
  }
  j["stages"] = stages;
  return j;
}

// Megatron-Core's --recompute-modules, which it reads under --recompute-granularity selective
// only (TransformerConfig.__post_init__ at d98e8a64dd).
std::string Strategy::recompute_label() const {
  const Recomputation r = recomputation();
  if (recompute == Recompute::kFull && recompute_num_layers > 0)
    return fmt::format("full({} a stage)", recompute_num_layers);
  if (r.granularity != Recompute::kSelective || r.modules == OpGroup::kCoreAttention)
    return std::string(to_string(recompute));
  std::vector<std::string_view> names;
  for (RecomputeModule m : modules_of(r.modules)) names.push_back(to_string(m));
  return fmt::format("selective({})", fmt::join(names, ","));
}

// The strategy key `lora`: {"rank": R, "target_modules": [...]} (Megatron-Bridge's LoRA dim and
// target_modules; the modules default to its four).
static Lora read_lora(ObjectReader r) {
  Lora lora;
  lora.rank = r.integer_in("rank", 1, kMaxLoraRank);
  if (r.has("target_modules")) {
    const std::string expected =
        fmt::format("expected a list of one or more of {}", lora_target_names());
    const std::vector<std::string> names = r.strings("target_modules");
    if (names.empty()) r.fail("target_modules", expected);
    lora.targets = 0;
    for (const auto& name : names) {
      LoraTarget t;
      if (!parse_lora_target(name, t))
        r.fail("target_modules", fmt::format("{}, found \"{}\"", expected, name));
      lora.targets |= static_cast<uint32_t>(t);
    }
  }
  r.finish();
  return lora;
}

static void read_recompute_modules(ObjectReader& r, Strategy& s) {
  const std::string expected =
      fmt::format("expected a list of one or more of {}", recompute_module_names());
  const std::vector<std::string> names = r.strings("recompute_modules");
  if (names.empty()) r.fail("recompute_modules", expected);
  if (s.recompute != Recompute::kSelective)
    r.fail("recompute_modules",
           fmt::format("the modules selective recomputation re-runs: it needs recompute "
                       "\"selective\", found \"{}\"",
                       to_string(s.recompute)));
  OpGroup modules = OpGroup::kDefault;
  for (const auto& name : names) {
    RecomputeModule m;
    if (!parse_recompute_module(name, m))
      r.fail("recompute_modules", fmt::format("{}, found \"{}\"", expected, name));
    modules = modules | module_group(m);
  }
  s.recompute_modules = modules;
}

Strategy strategy_from_json(ObjectReader r) {
  Strategy s;
  s.dp = r.integer_in("dp", 1, kMaxParallelDegree);
  s.tp = r.integer_in("tp", 1, kMaxParallelDegree);
  s.pp = r.integer_in("pp", 1, kMaxParallelDegree);
  read_context_and_experts(r, s);
  s.micro_batch = r.integer_in("micro_batch", 1, kMaxBatchSamples);
  s.global_batch = r.integer_in("global_batch", 1, kMaxBatchSamples);
  s.schedule = r.string_or("schedule", "1f1b");
  const std::string rc = r.choice_or("recompute", {"none", "selective", "full", "op"}, "none");
  parse_recompute(rc, s.recompute);
  if (r.has("recompute_modules")) read_recompute_modules(r, s);
  if (r.has("recompute_num_layers")) {
    s.recompute_num_layers = r.integer_in("recompute_num_layers", 1, 1 << 20);
    if (s.recompute != Recompute::kFull)
      r.fail("recompute_num_layers",
             fmt::format("the blocks of a stage full recomputation re-runs: it needs recompute "
                         "\"full\", found \"{}\"",
                         to_string(s.recompute)));
  }
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
  s.chunks = r.integer_in_or("chunks", 1, kMaxParallelDegree, schedule->default_chunks);
  if (s.schedule == "interleaved" && s.chunks < 2)
    r.fail("chunks", fmt::format("schedule interleaved runs 2 or more chunks per device, found {} "
                                 "(one chunk is schedule 1f1b)",
                                 s.chunks));
  if (schedule->default_chunks <= 1 && s.chunks != 1)
    r.fail("chunks", fmt::format("schedule {} runs one chunk per device, found {} (interleaved and "
                                 "the V schedules run several)",
                                 s.schedule, s.chunks));
  // Switches the file leaves out take the framework's defaults (with_framework_defaults): until
  // then they hold the struct's.
  const auto switch_or = [&](std::string_view key, bool fallback, uint32_t bit) {
    if (r.has(key)) s.given |= bit;
    return r.boolean_or(key, fallback);
  };
  s.flash_attention = switch_or("flash_attention", true, kGivenFlashAttention);
  s.grad_accumulation_fusion =
      switch_or("grad_accumulation_fusion", true, kGivenGradAccumulationFusion);
  s.overlap_grad_reduce = switch_or("overlap_grad_reduce", true, kGivenOverlapGradReduce);
  s.tp_comm_overlap = switch_or("tp_comm_overlap", false, kGivenTpCommOverlap);
  s.fp32_grad_reduce = switch_or("fp32_grad_reduce", true, kGivenFp32GradReduce);
  s.low_precision_params = switch_or("low_precision_params", false, kGivenLowPrecisionParams);
  s.ep_comm_overlap = switch_or("ep_comm_overlap", false, kGivenEpCommOverlap);
  if (s.tp_comm_overlap && !(s.sequence_parallel && s.tp > 1))
    r.fail("tp_comm_overlap",
           "tensor-parallel communication overlap runs with sequence parallelism: it needs "
           "sequence_parallel true and tp > 1");
  if (r.has("host_mode")) {
    s.given |= kGivenHostMode;
    parse_host_mode(r.choice("host_mode", {"eager", "compiled", "cuda-graphs"}), s.host_mode);
  }
  s.framework = r.string_or("framework", "");
  if (r.has("lora")) s.lora = read_lora(r.object("lora"));
  std::vector<ObjectReader> stage_readers = r.objects_or_empty("stages");
  std::vector<std::vector<ObjectReader>> group_readers;
  for (auto& st : stage_readers) {
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
    group_readers.push_back(st.objects_or_empty("replicas"));
    spec.replicas = read_replicas(group_readers.back());
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
  size_t stage = 0;
  if (std::string problem = stage_devices_problem(s, stage); !problem.empty())
    stage_readers[stage].fail("devices", problem);
  if (const auto problem = replicas_problem(s)) {
    const ObjectReader& where = problem->stage < 0 ? r
                                : problem->group < 0
                                    ? stage_readers[problem->stage]
                                    : group_readers[problem->stage][problem->group];
    where.fail(problem->key, problem->reason);
  }
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
  j["reason_code"] = p.reason_code();  // "" when feasible: the contract's field is always there
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
                      {"cp_comm_s", s.cp_comm_s},
                      {"ep_comm_s", s.ep_comm_s},
                      {"host_sync_s", s.host_sync_s},
                      {"recompute_s", s.recompute_s},
                      {"p2p_s", s.p2p_s},
                      {"dp_sync_s", s.dp_sync_s},
                      {"optimizer_s", s.optimizer_s},
                      {"in_flight_microbatches", s.in_flight},
                      {"memory", to_json(s.memory)}});
  }
  j["stages"] = stages;
  if (!p.groups.empty()) {
    Json groups = Json::array();
    for (const GroupPrediction& g : p.groups)
      groups.push_back({{"stage", g.stage},
                        {"group", g.group},
                        {"gpu_type", g.spec.gpu_type},
                        {"devices", g.spec.devices},
                        {"replicas", g.spec.replicas()},
                        {"tp", g.spec.tp},
                        {"micro_batch", g.spec.micro_batch},
                        {"samples", g.spec.samples},
                        {"microbatches", g.microbatches},
                        {"forward_s", g.forward_s},
                        {"backward_input_s", g.backward_input_s},
                        {"backward_weight_s", g.backward_weight_s},
                        {"p2p_s", g.p2p_s},
                        {"pipeline_s", g.pipeline_s},
                        {"sync_slices", g.sync_slices},
                        {"sync_rounds", g.sync_rounds},
                        {"sync_s", g.sync_s},
                        {"optimizer_s", g.optimizer_s},
                        {"in_flight_microbatches", g.in_flight},
                        {"peak_memory_bytes", whole_number_json(g.memory.total())},
                        {"memory", to_json(g.memory)}});
    j["replica_groups"] = groups;
  }
  j["notes"] = p.notes;
  return j;
}

std::string Prediction::reason_code() const {
  switch (kind) {
    case Infeasible::kNone:
      return "";
    case Infeasible::kRule:
      return rule;
    case Infeasible::kPlacement:
      return "placement";
    case Infeasible::kSchedule:
      return "schedule";
    case Infeasible::kMemory:
    case Infeasible::kNoPartition:
      return "memory";
  }
  return "";
}

Prediction infeasible(Infeasible kind, std::string reason, std::string rule) {
  Prediction p;
  p.feasible = false;
  p.kind = kind;
  p.rule = std::move(rule);
  p.reason = std::move(reason);
  return p;
}

Infeasible infeasible_kind(const std::string& reason_code, std::string& rule) {
  rule.clear();
  if (reason_code.empty()) return Infeasible::kNone;
  if (reason_code == "placement") return Infeasible::kPlacement;
  if (reason_code == "schedule") return Infeasible::kSchedule;
  if (reason_code == "memory") return Infeasible::kMemory;
  rule = reason_code;
  return Infeasible::kRule;
}

}  // namespace hetplan
