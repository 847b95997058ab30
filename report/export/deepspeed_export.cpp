// A DeepSpeed config. Keys as in DeepSpeed's deepspeed/runtime/config.py (the "pipeline" section is
// a free dict of which the pipeline engine reads activation_checkpoint_interval; PipelineModule
// takes the stage count, topology and partition as arguments, written as hetplan_pipeline_module).
#include <fmt/format.h>

#include "report/export/exporters.h"

namespace hetplan {
namespace {

// DeepSpeed's partition_uniform (deepspeed/runtime/utils.py): n items over p parts, the first
// n mod p parts one larger. Boundaries: part i holds [parts[i], parts[i + 1]).
std::vector<int64_t> deepspeed_uniform_parts(int64_t n, int64_t p) {
  std::vector<int64_t> parts(p + 1, 0);
  if (n <= p) {
    for (int64_t i = 0; i <= p; ++i) parts[i] = std::min(i, n);
    return parts;
  }
  const int64_t chunk = n / p, residual = n % p;
  for (int64_t i = 0; i <= p; ++i) parts[i] = i * chunk + std::min(i, residual);
  return parts;
}

// pp stages of v consecutive virtual stages each.
std::vector<StageBlocks> merge_chunks(const std::vector<StageBlocks>& segments, int64_t pp) {
  const size_t v = segments.size() / static_cast<size_t>(pp);
  std::vector<StageBlocks> out;
  for (size_t i = 0; i < segments.size(); i += v) {
    StageBlocks b = segments[i];
    for (size_t k = 1; k < v; ++k) b.blocks += segments[i + k].blocks;
    b.head = segments[i + v - 1].head;
    out.push_back(b);
  }
  return out;
}

// hetplan's placement for the launcher: ranks and nodes in hostfile order. DeepSpeed reads the keys
// it knows and ignores the others.
Json placement_json(const export_detail::RankPlacement& p) {
  Json j;
  j["rank_devices"] = export_detail::rank_devices(p);
  if (!p.nodes.empty()) {
    Json nodes = Json::array();
    for (const auto& n : p.nodes)
      nodes.push_back({{"node", n.node},
                       {"node_kind", n.kind},
                       {"gpu_type", n.gpu_type},
                       {"gpus", n.gpus},
                       {"first_rank", n.first_rank}});
    j["hostfile_order"] = nodes;
  }
  return j;
}

// The batch keys. DeepSpeedConfig._batch_assertion requires train_batch_size =
// micro-batch x gradient_accumulation_steps x the data-parallel size it counts
// (DeepSpeedConfig.__init__): with a pipeline, the PipelineModule's grid's data axis (dp, with the
// topology pipeline_module gives); without one and without an mpu, the whole world, which under
// AutoTP is dp x tp (its tp ranks share their batch).
void batch_keys(const Strategy& s, Json& j, ExportResult& out) {
  const int64_t accumulation = s.global_batch / (s.micro_batch * s.dp);
  const int64_t counted_dp = s.pp > 1 ? s.dp : s.dp * s.tp;
  j["train_batch_size"] = s.micro_batch * accumulation * counted_dp;
  j["train_micro_batch_size_per_gpu"] = s.micro_batch;
  j["gradient_accumulation_steps"] = accumulation;
  if (counted_dp != s.dp)
    out.approximations.push_back(fmt::format(
        "train_batch_size is {} = global batch {} x tp {}: DeepSpeed without an mpu counts all {} "
        "ranks as data-parallel (DeepSpeedConfig world_size = dist.get_world_size()), though "
        "AutoTP's {} tensor-parallel ranks share each batch; with Megatron-DeepSpeed's mpu it "
        "counts dp {} and train_batch_size is {}",
        s.global_batch * s.tp, s.global_batch, s.tp, s.dp * s.tp, s.tp, s.dp, s.global_batch));
}

void zero_keys(const Strategy& s, Json& j, ExportResult& out) {
  j["zero_optimization"] = {{"stage", s.zero}};
  // Gradients are reduced during the backward only by ZeRO 1-3's overlap_comm, outside a
  // pipeline: ZeRO-0 all-reduces them after the backward, and the pipeline engine after the flush
  // (_exec_reduce_grads).
  if (s.dp > 1 && s.zero >= 1 && s.pp == 1) {
    j["zero_optimization"]["overlap_comm"] = s.overlap_grad_reduce;
  } else if (s.dp > 1 && s.overlap_grad_reduce) {
    out.approximations.push_back(fmt::format(
        "DeepSpeed {} reduces the gradients after the backward; hetplan predicted them reduced "
        "during it (predict with \"overlap_grad_reduce\": false for DeepSpeed's time)",
        s.pp > 1 ? "with a pipeline" : "at ZeRO-0"));
  }
  // PipelineEngine: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism".
  if (s.zero >= 2 && s.pp > 1)
    out.unsupported.push_back(
        fmt::format("ZeRO-{} with pipeline parallelism (DeepSpeed's "
                    "PipelineModule supports ZeRO-0 and 1)",
                    s.zero));
}

void tensor_parallel_keys(const Strategy& s, Json& j, ExportResult& out) {
  if (s.tp <= 1) return;
  if (s.pp > 1) {
    // AutoTP builds a (data, tensor) mesh over the whole world (groups._init_tp_mesh_device),
    // with no pipeline axis: with a pipeline the model's own layers must split over the
    // topology's model axis.
    out.approximations.push_back(fmt::format(
        "tensor parallelism {} with a pipeline: DeepSpeed's AutoTP has no pipeline axis, so the "
        "model's own tensor-parallel layers (Megatron-DeepSpeed's, --tensor-model-parallel-size "
        "{}) must split over the model axis of the topology given to PipelineModule",
        s.tp, s.tp));
  } else {
    j["tensor_parallel"] = {{"autotp_size", s.tp}};
    out.approximations.push_back(fmt::format(
        "tensor parallelism {} as DeepSpeed AutoTP (\"tensor_parallel.autotp_size\"); with "
        "Megatron-DeepSpeed pass --tensor-model-parallel-size {} instead",
        s.tp, s.tp));
  }
  if (s.sequence_parallel)
    out.approximations.push_back(
        "Megatron-style sequence parallelism has no DeepSpeed config "
        "key (DeepSpeed's sequence parallelism is Ulysses)");
}

void recompute_keys(const Strategy& s, Json& j, ExportResult& out) {
  if (s.recompute_num_layers > 0)
    out.unsupported.push_back(fmt::format(
        "full recomputation of the first {} blocks of each stage: DeepSpeed's pipeline engine "
        "checkpoints every activation_checkpoint_interval layers, all of them",
        s.recompute_num_layers));
  if (s.recompute == Recompute::kFull) {
    j["activation_checkpointing"] = {
        {"partition_activations", false},           {"cpu_checkpointing", false},
        {"contiguous_memory_optimization", false},  {"number_checkpoints", nullptr},
        {"synchronize_checkpoint_boundary", false}, {"profile", false}};
    // PipelineEngine sets the module's activation_checkpoint_interval from this key when > 0.
    if (s.pp > 1) j["pipeline"] = {{"activation_checkpoint_interval", 1}};
    if (s.pp <= 1)
      out.approximations.push_back(
          "full recomputation: the model must wrap each transformer "
          "layer in deepspeed.checkpointing.checkpoint");
  } else if (s.recompute == Recompute::kSelective) {
    out.approximations.push_back(
        "selective recomputation (attention core only) has no DeepSpeed "
        "config key; the model code must recompute it");
  } else if (s.recompute == Recompute::kOp) {
    out.unsupported.push_back(
        "per-op selective recomputation (recompute op, torchtitan's SelectiveAC): DeepSpeed "
        "checkpoints whole layers; no recomputation written");
  }
}

// The arguments the user passes to PipelineModule (it takes the stage count, topology and
// partition as arguments; DeepSpeed reads no pipeline.stages, parts or partition): returned as
// the top-level "hetplan_pipeline_module", which DeepSpeedConfig does not read.
Json pipeline_module(const ModelSpec& model, const Strategy& s, const LayerSpec* layer,
                     ExportResult& out) {
  Json m;
  std::string topology;
  if (s.tp > 1) {
    // PipeModelDataParallelTopology(num_pp, num_mp, num_dp): axes [pipe, data, model].
    m["topology"] = {{"class", "PipeModelDataParallelTopology"},
                     {"num_pp", s.pp},
                     {"num_mp", s.tp},
                     {"num_dp", s.dp}};
    topology =
        fmt::format("topology=PipeModelDataParallelTopology(num_pp={}, num_mp={}, num_dp={})", s.pp,
                    s.tp, s.dp);
  } else {
    m["num_stages"] = s.pp;  // the default topology: PipeDataParallelTopology(pp, world / pp)
    topology = fmt::format("num_stages={}", s.pp);
  }
  if (s.schedule == "gpipe")
    out.approximations.push_back("schedule gpipe: DeepSpeed's pipeline engine runs 1F1B");
  else if (s.schedule != "1f1b")
    out.unsupported.push_back(
        fmt::format("schedule {}: DeepSpeed's pipeline engine runs 1F1B only", s.schedule));
  bool from_strategy = false;
  auto stages = export_detail::pipeline_segments(model, s, out, &from_strategy);
  const auto layers = static_cast<int64_t>(model.layers.size());
  std::string partition;
  if (layer && from_strategy) {
    if (static_cast<int64_t>(stages.size()) > s.pp) {
      stages = merge_chunks(stages, s.pp);
      out.approximations.push_back(fmt::format(
          "DeepSpeed's pipeline holds one contiguous layer range per rank: hetplan's {} virtual "
          "stages are merged {} at a time into {} stages",
          s.pp * s.chunks, s.chunks, s.pp));
    }
    std::vector<int64_t> parts;
    for (const auto& st : to_stage_specs(stages)) parts.push_back(st.first_layer);
    parts.push_back(layers);
    if (parts == deepspeed_uniform_parts(layers, s.pp)) {
      m["partition_method"] = "uniform";
      partition = ", partition_method=\"uniform\"";
    } else {
      m["parts"] = parts;  // hetplan's: PipelineModule has no argument for explicit boundaries
      out.approximations.push_back(fmt::format(
          "DeepSpeed's PipelineModule has no partition method for explicit stage boundaries: "
          "with the model listed as [embedding, {} blocks, head], set self.parts = "
          "hetplan_pipeline_module.parts ({}) in a PipelineModule subclass's _partition_layers",
          model.num_blocks(), Json(parts).dump()));
    }
  } else {
    m["partition_method"] = "parameters";
    partition = ", partition_method=\"parameters\"";
    out.approximations.push_back(
        "the strategy leaves the layer partition to hetplan: "
        "DeepSpeed's default (balanced by parameters) is used");
  }
  out.instructions.push_back(fmt::format(
      "build the model as PipelineModule(layers, {}{}) (the config's hetplan_pipeline_module; "
      "DeepSpeed reads no pipeline stages or partition from the config){}",
      topology, partition,
      s.tp > 1 ? fmt::format(": its data axis, dp {}, is the data-parallel size DeepSpeed checks "
                             "train_batch_size against",
                             s.dp)
               : ""));
  return m;
}

// DeepSpeed's MoE takes its expert-parallel size in the model code (deepspeed.moe.layer.MoE's
// ep_size), its Ulysses sequence parallelism likewise (DistributedAttention over a sequence
// group); neither is a config key, and the rest cannot be said at all.
void context_and_expert_notes(const ModelSpec& model, const Strategy& s, ExportResult& out) {
  const TransformerLayer* moe = nullptr;
  for (const auto& l : model.layers)
    if (const auto* b = l.block(); b && b->is_moe() && !moe) moe = b;
  if (s.ep > 1 && moe)
    out.instructions.push_back(fmt::format(
        "build each MoE layer as deepspeed.moe.layer.MoE(..., num_experts={}, ep_size={}, k={}): "
        "DeepSpeed takes expert parallelism in the model code, not the config",
        moe->experts, s.ep, moe->top_k));
  if (s.expert_tp() != s.tp)
    out.unsupported.push_back(fmt::format(
        "expert tensor width {}: DeepSpeed's experts are not tensor-parallel on their own",
        s.expert_tp()));
  if (moe && moe->moe_latent > 0)
    out.instructions.push_back(fmt::format(
        "LatentMoE (experts over a latent of {}): deepspeed.moe.layer.MoE has no latent "
        "projections; the model code must project its input down and its output back",
        moe->moe_latent));
  if (s.cp > 1) {
    if (s.cp_comm == CpComm::kA2a)
      out.instructions.push_back(fmt::format(
          "context parallelism {} as DeepSpeed-Ulysses: wrap attention in "
          "deepspeed.sequence.layer.DistributedAttention over a sequence-parallel group of {} "
          "ranks (model code, not the config)",
          s.cp, s.cp));
    else
      out.unsupported.push_back(fmt::format(
          "context parallelism by {}: DeepSpeed's sequence parallelism is Ulysses' all-to-all "
          "(cp_comm a2a)",
          to_string(s.cp_comm)));
  }
  if (s.precision != Precision::kBf16)
    out.unsupported.push_back(fmt::format(
        "precision {}: DeepSpeed's engine has no fp8 or fp4 recipe", to_string(s.precision)));
}

}  // namespace

ExportResult export_deepspeed(const ModelSpec& model, const Strategy& s, const ExportOptions& o) {
  ExportResult out;
  const LayerSpec* layer = export_detail::uniform_block(model, out);
  Json j;
  batch_keys(s, j, out);
  if (model.dtype == Dtype::kBf16) j["bf16"] = {{"enabled", true}};
  if (model.dtype == Dtype::kFp16) j["fp16"] = {{"enabled", true}};
  if (model.dtype == Dtype::kFp8) out.unsupported.push_back("training in fp8");
  export_detail::lora_notes(s,
                            "DeepSpeed's config has no LoRA of the adapters hetplan predicted "
                            "(deepspeed.linear's LoRAOptimizedLinear shards the frozen weights)",
                            out);
  zero_keys(s, j, out);
  tensor_parallel_keys(s, j, out);
  context_and_expert_notes(model, s, out);
  recompute_keys(s, j, out);
  if (s.pp > 1) j["hetplan_pipeline_module"] = pipeline_module(model, s, layer, out);
  if (!s.flash_attention)
    out.approximations.push_back("attention without a fused kernel is the model code's choice");
  if (s.grad_accumulation_fusion)
    out.approximations.push_back(
        "DeepSpeed adds each micro-batch's gradients with kernels of their own; hetplan predicted "
        "gradient-accumulation fusion (predict with \"grad_accumulation_fusion\": false for "
        "DeepSpeed's time)");
  export_detail::eager_engine_notes(s, "DeepSpeed's training engine", out);
  const auto placement = export_detail::rank_placement(s, o.cluster);
  out.placement = export_detail::placement_lines(s, placement, "DeepSpeed",
                                                 export_detail::Launcher::kDeepSpeed);
  if (!placement.ranks.empty()) j["hetplan_placement"] = placement_json(placement);
  out.text = j.dump(2) + "\n";
  return out;
}

}  // namespace hetplan
