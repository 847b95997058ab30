// A DeepSpeed config. Keys as in DeepSpeed's docs/_pages/config-json.md and
// deepspeed/runtime/config.py (the "pipeline" section is a free dict the pipeline engine reads;
// PipelineModule takes the partition itself).
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

}  // namespace

ExportResult export_deepspeed(const ModelSpec& model, const Strategy& s, const ExportOptions& o) {
  ExportResult out;
  const LayerSpec* layer = export_detail::uniform_block(model, out);
  Json j;
  j["train_batch_size"] = s.global_batch;
  j["train_micro_batch_size_per_gpu"] = s.micro_batch;
  j["gradient_accumulation_steps"] = s.global_batch / (s.micro_batch * s.dp);
  if (model.dtype == Dtype::kBf16) j["bf16"] = {{"enabled", true}};
  if (model.dtype == Dtype::kFp16) j["fp16"] = {{"enabled", true}};
  if (model.dtype == Dtype::kFp8) out.unsupported.push_back("training in fp8");
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
  if (s.zero >= 2 && s.pp > 1)
    out.unsupported.push_back(
        fmt::format("ZeRO-{} with pipeline parallelism (DeepSpeed's "
                    "PipelineModule supports ZeRO-0 and 1)",
                    s.zero));
  if (s.tp > 1) {
    j["tensor_parallel"] = {{"autotp_size", s.tp}};
    out.approximations.push_back(fmt::format(
        "tensor parallelism {} as DeepSpeed AutoTP (\"tensor_parallel.autotp_size\"); with "
        "Megatron-DeepSpeed pass --tensor-model-parallel-size {} instead",
        s.tp, s.tp));
    if (s.sequence_parallel)
      out.approximations.push_back(
          "Megatron-style sequence parallelism has no DeepSpeed config "
          "key (DeepSpeed's sequence parallelism is Ulysses)");
  }
  if (s.recompute == Recompute::kFull) {
    j["activation_checkpointing"] = {
        {"partition_activations", false},           {"cpu_checkpointing", false},
        {"contiguous_memory_optimization", false},  {"number_checkpoints", nullptr},
        {"synchronize_checkpoint_boundary", false}, {"profile", false}};
    if (s.pp <= 1)
      out.approximations.push_back(
          "full recomputation: the model must wrap each transformer "
          "layer in deepspeed.checkpointing.checkpoint");
  } else if (s.recompute == Recompute::kSelective) {
    out.approximations.push_back(
        "selective recomputation (attention core only) has no DeepSpeed "
        "config key; the model code must recompute it");
  }
  if (s.pp > 1) {
    Json pipe;
    pipe["stages"] = s.pp;
    pipe["activation_checkpoint_interval"] = s.recompute == Recompute::kFull ? 1 : 0;
    if (s.recompute == Recompute::kFull)
      out.approximations.push_back(
          "full recomputation: pass pipeline.activation_checkpoint_interval "
          "(1) to PipelineModule, which takes it as an argument");
    if (s.schedule == "gpipe")
      out.approximations.push_back("schedule gpipe: DeepSpeed's pipeline engine runs 1F1B");
    else if (s.schedule != "1f1b")
      out.unsupported.push_back(
          fmt::format("schedule {}: DeepSpeed's pipeline engine runs 1F1B "
                      "only",
                      s.schedule));
    bool from_strategy = false;
    auto stages = export_detail::pipeline_segments(model, s, out, &from_strategy);
    const int64_t layers = static_cast<int64_t>(model.layers.size());
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
      pipe["parts"] = parts;
      if (parts == deepspeed_uniform_parts(layers, s.pp)) {
        pipe["partition"] = "uniform";
      } else {
        out.approximations.push_back(fmt::format(
            "DeepSpeed's PipelineModule has no method for explicit stage boundaries: with the "
            "model listed as [embedding, {} blocks, head], set self.parts = pipeline.parts ({}) "
            "in a PipelineModule subclass's _partition_layers",
            model.num_blocks(), Json(parts).dump()));
      }
    } else {
      pipe["partition"] = "parameters";
      out.approximations.push_back(
          "the strategy leaves the layer partition to hetplan: "
          "DeepSpeed's default (balanced by parameters) is used");
    }
    j["pipeline"] = pipe;
  }
  if (!s.flash_attention)
    out.approximations.push_back("attention without a fused kernel is the model code's choice");
  if (s.grad_accumulation_fusion)
    out.approximations.push_back(
        "DeepSpeed adds each micro-batch's gradients with kernels of their own; hetplan predicted "
        "gradient-accumulation fusion (predict with \"grad_accumulation_fusion\": false for "
        "DeepSpeed's time)");
  const auto placement = export_detail::rank_placement(s, o.cluster);
  out.placement = export_detail::placement_lines(s, placement, "DeepSpeed",
                                                 export_detail::Launcher::kDeepSpeed);
  if (!placement.ranks.empty()) j["hetplan_placement"] = placement_json(placement);
  out.text = j.dump(2) + "\n";
  return out;
}

}  // namespace hetplan
