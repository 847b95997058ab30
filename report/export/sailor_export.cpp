// Sailor's training framework (github.com/eth-easl/sailor at cf2c8e3, a Megatron-DeepSpeed fork):
// the file `--distributed-config-file` names (dist_config.json: per pipeline stage, per
// data-parallel replica, the global ranks of its tensor-parallel group; DeepSpeed's
// PipeHeterogeneousTopology in deepspeed/topology.py reads it, and lets each stage's replicas run
// their own tensor width), and the arguments of third_party/Megatron-DeepSpeed/run_from_file.sh
// that each replica's launch takes. One torchrun agent runs each replica (`--nproc_per_node` is
// its tensor width), so the ranks of agent a follow those of agents 0..a-1.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodel/topology.h"
#include "report/export/exporters.h"

namespace hetplan {
namespace {

// One data-parallel replica of a stage: its tensor width and hetplan devices (empty where the
// strategy leaves the placement to hetplan).
struct SailorReplica {
  int64_t stage = 0, tp = 1, micro_batch = 1, samples = 0;
  std::string gpu_type;
  std::vector<int64_t> devices;
};

// Every stage's replicas in launch order: replica groups as listed (their replicas in device
// order), or, for a uniform strategy, dp replicas of tp per pipeline rank.
std::vector<std::vector<SailorReplica>> sailor_stage_replicas(const Strategy& s) {
  std::vector<std::vector<SailorReplica>> stages;
  if (!s.has_replicas()) {
    for (int64_t k = 0; k < s.pp; ++k) {
      std::vector<SailorReplica> rs;
      for (int64_t r = 0; r < s.dp; ++r)
        rs.push_back({k, s.tp, s.micro_batch, s.global_batch / std::max<int64_t>(s.dp, 1), "", {}});
      stages.push_back(std::move(rs));
    }
    return stages;
  }
  for (size_t k = 0; k < s.stages.size(); ++k) {
    std::vector<SailorReplica> rs;
    for (const ReplicaGroup& g : s.stages[k].replicas) {
      const int64_t n = g.replicas();
      for (int64_t r = 0; r < n; ++r) {
        std::vector<int64_t> devices(g.devices.begin() + r * g.tp,
                                     g.devices.begin() + (r + 1) * g.tp);
        rs.push_back({static_cast<int64_t>(k), g.tp, g.micro_batch,
                      g.samples / std::max<int64_t>(n, 1), g.gpu_type, std::move(devices)});
      }
    }
    stages.push_back(std::move(rs));
  }
  return stages;
}

// What the fork runs one value of for every replica: the micro-batch (ds_config.json's
// train_micro_batch_size_per_gpu), the replicas per stage (the topology's data axis) and so each
// replica's share of the batch (gradient_accumulation_steps = batch / (micro-batch x dp)).
void sailor_check_uniform(const std::vector<std::vector<SailorReplica>>& stages,
                          ExportResult& out) {
  const SailorReplica& first = stages.front().front();
  for (const auto& rs : stages) {
    if (rs.size() != stages.front().size())
      out.unsupported.push_back(fmt::format(
          "stage {} runs {} data-parallel replicas and stage 0 {}: Sailor's topology "
          "(PipeHeterogeneousTopology, dims [pipe, data, model]) has one data-parallel size",
          rs.front().stage, rs.size(), stages.front().size()));
    for (const auto& r : rs) {
      if (r.micro_batch != first.micro_batch) {
        out.unsupported.push_back(
            fmt::format("stage {} runs micro-batch {} beside {}: run_from_file.sh writes one "
                        "train_micro_batch_size_per_gpu for every replica",
                        r.stage, r.micro_batch, first.micro_batch));
        return;
      }
      if (r.samples != first.samples) {
        out.unsupported.push_back(fmt::format(
            "a replica of stage {} takes {} samples a step beside {}: Sailor's replicas share the "
            "batch evenly (gradient_accumulation_steps = batch / (micro-batch x dp))",
            r.stage, r.samples, first.samples));
        return;
      }
    }
  }
}

std::vector<int64_t> sailor_blocks_per_stage(const ModelSpec& model, const Strategy& s,
                                             ExportResult& out) {
  std::vector<int64_t> counts;
  for (const StageBlocks& b : export_detail::pipeline_segments(model, s, out))
    counts.push_back(b.blocks);
  return counts;
}

// The script trains in fp32 as it is: run_from_file.sh at cf2c8e3 passes neither --fp16 nor
// --bf16, and the ds_config.json it writes has no fp16 or bf16 section (Sailor's own OPT-350M
// runs are fp32; NVIDIA's PyTorch image it builds on runs their GEMMs in TF32).
std::string sailor_precision(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFp32:
    case Dtype::kTf32:
      return fmt::format(
          "precision: the script trains in fp32 as it is ({} here; TF32 GEMMs where NVIDIA's "
          "PyTorch image, which Sailor's Dockerfile builds on, turns them on)",
          to_string(dtype));
    case Dtype::kFp16:
      return "precision: the script trains in fp32 as it is; for fp16 add --fp16 to "
             "CONSTANT_ARGS and \"fp16\": {\"enabled\": true} to the ds_config.json it writes";
    default:
      return "precision: the script trains in fp32 as it is; for bf16 add --bf16 to "
             "CONSTANT_ARGS and \"bf16\": {\"enabled\": true} to the ds_config.json it writes";
  }
}

}  // namespace

ExportResult export_sailor(const ModelSpec& model, const Strategy& s, const ExportOptions& o) {
  ExportResult out;
  const LayerSpec* block = export_detail::uniform_block(model, out);
  export_detail::lora_notes(s, "Sailor's fork of Megatron-DeepSpeed has no PEFT", out);
  if (s.chunks_per_device() > 1 || s.schedule != "1f1b")
    out.unsupported.push_back(fmt::format(
        "schedule {}: Sailor's pipeline engine (DeepSpeed's TrainSchedule) runs 1F1B", s.schedule));
  if (s.cp > 1 || s.ep > 1)
    out.unsupported.push_back("context and expert parallelism: Sailor's fork runs tp, pp and dp");
  if (s.zero > 1)
    out.unsupported.push_back(
        fmt::format("ZeRO {}: DeepSpeed's pipeline engine runs ZeRO 0 or 1", s.zero));
  export_detail::eager_engine_notes(s, "Sailor's Megatron-DeepSpeed fork", out);
  const auto stages = sailor_stage_replicas(s);
  if (stages.empty() || stages.front().empty()) {
    out.unsupported.push_back("no stage with a replica to export");
    return out;
  }
  sailor_check_uniform(stages, out);

  // dist_config.json: [stage][replica] -> the replica's global ranks, one agent per replica.
  Json config = Json::array();
  std::vector<int64_t> agent_tp;
  int64_t rank = 0, max_tp = 0;
  for (const auto& rs : stages) {
    Json stage = Json::array();
    for (const auto& r : rs) {
      Json ranks = Json::array();
      for (int64_t t = 0; t < r.tp; ++t) ranks.push_back(rank++);
      stage.push_back(std::move(ranks));
      agent_tp.push_back(r.tp);
      max_tp = std::max(max_tp, r.tp);
    }
    config.push_back(std::move(stage));
  }
  out.text = config.dump(1) + "\n";

  const int64_t dp = static_cast<int64_t>(stages.front().size());
  const int64_t pp = static_cast<int64_t>(stages.size());
  const int64_t mb = stages.front().front().micro_batch;
  const int64_t agents = static_cast<int64_t>(agent_tp.size());
  out.instructions.push_back(
      "save this file as dist_config.json beside third_party/Megatron-DeepSpeed/run_from_file.sh, "
      "which passes --distributed-config-file dist_config.json");
  out.instructions.push_back(fmt::format(
      "start one agent per replica, {} in all, agent a as: bash run_from_file.sh {} a MASTER_ADDR "
      "MASTER_PORT {} {} NODE_TP {} {} {} (the script reads NNODES, NODE_RANK, MASTER_ADDR, "
      "MASTER_PORT, DP_SIZE, PP_SIZE, NODE_TP_SIZE, MAX_TP_SIZE, GLOBAL_BATCH_SIZE, "
      "MICRO_BATCH_SIZE in that order; its usage line lists the last three in another)",
      agents, agents, dp, pp, max_tp, s.global_batch, mb));
  out.instructions.push_back(
      fmt::format("NODE_TP of agents 0..{}: {}", agents - 1, fmt::join(agent_tp, " ")));
  if (block) {
    const TransformerLayer& b = *block->block();
    out.instructions.push_back(fmt::format(
        "set GPT_ARGS in run_from_file.sh to the model: --num-layers {} "
        "--num-transformer-layers-original {} --hidden-size {} --num-attention-heads {} "
        "--seq-length {} --max-position-embeddings {}",
        model.num_blocks(), model.num_blocks(), block->hidden, b.heads, block->seq_len,
        block->seq_len));
  }
  out.instructions.push_back(sailor_precision(model.dtype));
  if (const auto counts = sailor_blocks_per_stage(model, s, out); !counts.empty())
    out.instructions.push_back(fmt::format(
        "add --layers-per-stage '[{}]' to the script's arguments (transformer blocks per stage; "
        "the fork adds the embedding and the loss itself)",
        fmt::join(counts, ", ")));
  // Where each agent runs.
  const std::vector<Device> devices =
      o.cluster ? cluster_devices(*o.cluster) : std::vector<Device>{};
  int64_t agent = 0;
  for (const auto& rs : stages)
    for (const auto& r : rs) {
      if (!r.devices.empty()) {
        std::vector<std::string> where;
        for (int64_t d : r.devices)
          where.push_back(d >= 0 && d < static_cast<int64_t>(devices.size())
                              ? fmt::format("node {} gpu {}", devices[d].node, devices[d].local)
                              : fmt::format("device {}", d));
        out.placement.push_back(fmt::format("agent {} (stage {}, {} x {}): {}", agent, r.stage,
                                            r.gpu_type, r.tp, fmt::join(where, ", ")));
      }
      ++agent;
    }
  if (s.recompute_num_layers > 0)
    out.unsupported.push_back(fmt::format(
        "full recomputation of the first {} blocks of each stage: the fork's pipeline runs "
        "recompute_method uniform only (megatron/model/opt_model.py: \"deepspeed's pipeline "
        "doesn't support the block recompute method\")",
        s.recompute_num_layers));
  else if (s.recompute != Recompute::kNone)
    out.approximations.push_back(fmt::format(
        "recompute {}: Sailor's fork checkpoints whole layers (--recompute-granularity full "
        "--recompute-method uniform); set them in the script",
        s.recompute_label()));
  return out;
}

}  // namespace hetplan
