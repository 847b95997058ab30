// A torchtitan job config (TOML). Keys as in torchtitan/config/job_config.py; schedule names as in
// torch.distributed.pipelining.schedules.get_schedule_class.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "report/export/exporters.h"

namespace hetplan {
namespace {

std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A small TOML writer for tables of integers, strings and lists of strings.
struct Toml {
  std::string text;
  void table(const std::string& name) { text += fmt::format("\n[{}]\n", name); }
  void put(const std::string& key, int64_t v) { text += fmt::format("{} = {}\n", key, v); }
  void put(const std::string& key, const std::string& v) {
    text += fmt::format("{} = {}\n", key, toml_string(v));
  }
  void put(const std::string& key, const std::vector<std::string>& v) {
    std::string items;
    for (const auto& s : v) items += (items.empty() ? "" : ", ") + toml_string(s);
    text += fmt::format("{} = [{}]\n", key, items);
  }
  void put(const std::string& key, const std::vector<std::vector<std::string>>& v) {
    text += key + " = [\n";
    for (const auto& part : v) {
      std::string items;
      for (const auto& s : part) items += (items.empty() ? "" : ", ") + toml_string(s);
      text += "  [" + items + "],\n";
    }
    text += "]\n";
  }
};

// torchtitan's module names for a stage: tok_embeddings, layers.<i>, norm and output.
std::vector<std::string> stage_modules(const StageBlocks& b) {
  std::vector<std::string> names;
  if (b.embedding) names.push_back("tok_embeddings");
  for (int64_t i = 0; i < b.blocks; ++i)
    names.push_back(fmt::format("layers.{}", b.first_block + i));
  if (b.head) {
    names.push_back("norm");
    names.push_back("output");
  }
  return names;
}

std::string schedule_name(const Strategy& s, ExportResult& out) {
  if (s.schedule == "gpipe") return "GPipe";
  if (s.schedule == "1f1b") return "1F1B";
  if (s.schedule == "interleaved") return "Interleaved1F1B";
  if (s.schedule == "v-zb" && s.chunks == 2) return "ZBVZeroBubble";
  // The nearest schedule with the same stages per rank and placement is written.
  const bool v_shape = s.schedule.rfind("v-", 0) == 0 && s.chunks == 2;
  const std::string written = v_shape ? "ZBVZeroBubble" : s.chunks > 1 ? "Interleaved1F1B" : "1F1B";
  out.unsupported.push_back(fmt::format(
      "schedule {}{}: torch.distributed.pipelining has GPipe, 1F1B, Interleaved1F1B, "
      "InterleavedZeroBubble (interleaved only), ZBVZeroBubble (V-shape, 2 chunks) and DualPipeV "
      "({} written)",
      s.schedule, s.chunks > 1 ? fmt::format(" with {} chunks", s.chunks) : "", written));
  return written;
}

}  // namespace

ExportResult export_torchtitan(const ModelSpec& model, const Strategy& s, const ExportOptions& o) {
  ExportResult out;
  const LayerSpec* layer = export_detail::uniform_block(model, out);
  Toml t;
  t.table("training");
  // With a pipeline, one step runs all of a replica's micro-batches (local_batch_size / micro-batch
  // of them); without one, torchtitan accumulates global / (local x dp) steps.
  t.put("local_batch_size", s.pp > 1 ? s.global_batch / s.dp : s.micro_batch);
  t.put("global_batch_size", s.global_batch);
  t.put("seq_len", model.seq_len);
  if (model.dtype == Dtype::kFp32 || model.dtype == Dtype::kTf32) {
    t.put("mixed_precision_param", std::string("float32"));
  } else {
    t.put("mixed_precision_param", std::string("bfloat16"));
    if (model.dtype != Dtype::kBf16)
      out.approximations.push_back(
          fmt::format("training in {}: torchtitan's parameters are "
                      "bfloat16 or float32",
                      to_string(model.dtype)));
  }

  t.table("parallelism");
  const bool ddp = s.zero == 0 && s.tp == 1 && s.pp == 1;
  t.put("data_parallel_replicate_degree", ddp ? s.dp : int64_t{1});
  t.put("data_parallel_shard_degree", ddp ? int64_t{1} : s.dp);
  if (!ddp && s.dp > 1) {
    t.put("fsdp_reshard_after_forward", std::string(s.zero >= 3 ? "always" : "never"));
    if (s.zero == 0)
      out.approximations.push_back(
          "ZeRO-0 with tensor or pipeline parallelism: torchtitan "
          "applies DDP only without them, so FSDP (ZeRO-2-like) is used");
    else if (s.zero == 1)
      out.approximations.push_back(
          "ZeRO-1: torchtitan's FSDP without resharding also shards "
          "gradients (ZeRO-2)");
  }
  t.put("tensor_parallel_degree", s.tp);
  if (s.tp > 1 && !s.sequence_parallel)
    out.approximations.push_back(
        "torchtitan's tensor parallelism always shards the sequence "
        "(sequence parallel)");
  t.put("pipeline_parallel_degree", s.pp);
  if (s.pp > 1) {
    t.put("pipeline_parallel_schedule", schedule_name(s, out));
    t.put("pipeline_parallel_microbatch_size", s.micro_batch);
    bool from_strategy = false;
    const auto segments = export_detail::pipeline_segments(model, s, out, &from_strategy);
    if (layer && (from_strategy || s.chunks > 1)) {
      if (o.torchtitan_split_points) {
        std::vector<std::string> points;
        for (size_t i = 1; i < segments.size(); ++i) {
          if (segments[i].blocks == 0) {
            out.unsupported.push_back(fmt::format(
                "stage {} holds no transformer block: split points name the block a stage "
                "starts at (module_fqns_per_model_part can say it)",
                i));
            continue;
          }
          points.push_back(fmt::format("layers.{}", segments[i].first_block));
        }
        t.put("pipeline_parallel_split_points", points);
      } else {
        std::vector<std::vector<std::string>> parts;
        for (const auto& seg : segments) parts.push_back(stage_modules(seg));
        t.put("module_fqns_per_model_part", parts);
      }
    } else if (layer) {
      out.approximations.push_back(
          "the strategy leaves the layer partition to hetplan: "
          "torchtitan's default split is used");
    }
  }

  t.table("activation_checkpoint");
  if (s.recompute == Recompute::kNone) {
    t.put("mode", std::string("none"));
  } else if (s.recompute == Recompute::kFull) {
    t.put("mode", std::string("full"));
  } else {
    t.put("mode", std::string("selective"));
    t.put("selective_ac_option", std::string("op"));
    out.approximations.push_back(
        "selective recomputation as torchtitan's op-level selective "
        "checkpointing (it keeps matmul outputs and recomputes the rest; "
        "hetplan models Megatron-LM's attention-core recomputation)");
  }
  if (!s.flash_attention)
    out.approximations.push_back(
        "torchtitan's attention is fused (SDPA); hetplan modelled an "
        "unfused one");
  if (s.dp > 1 && !s.overlap_grad_reduce)
    out.approximations.push_back(
        "torchtitan (FSDP2 or DDP) reduces gradients during the backward; hetplan predicted them "
        "reduced after it (predict with \"overlap_grad_reduce\": true for torchtitan's time)");
  if (s.grad_accumulation_fusion)
    out.approximations.push_back(
        "torchtitan adds each micro-batch's gradients with kernels of their own; hetplan predicted "
        "gradient-accumulation fusion (predict with \"grad_accumulation_fusion\": false for "
        "torchtitan's time)");

  const auto placement = export_detail::rank_placement(s, o.cluster);
  out.placement = export_detail::placement_lines(s, placement, "torchtitan",
                                                 export_detail::Launcher::kTorchrun);

  std::string head = fmt::format(
      "# torchtitan job config for {}: {}\n# exported by hetplan. "
      "Launch on {} GPUs (NGPU / torchrun).\n",
      model.name, export_detail::strategy_summary(s), s.devices());
  if (layer)
    head += fmt::format(
        "# [model] name and flavor: torchtitan defines model shapes in code; pick "
        "the one with {} layers, hidden {}, {} heads{}\n",
        model.num_blocks(), layer->hidden, layer->block()->heads,
        layer->block()->rotary ? ""
                               : " (torchtitan's models use rotary "
                                 "embeddings; this one does not)");
  for (const auto& note : out.approximations) head += "# note: " + note + "\n";
  for (const auto& no : out.unsupported) head += "# NOT EXPRESSED: " + no + "\n";
  for (const auto& line : out.placement) head += "# placement: " + line + "\n";
  if (!placement.ranks.empty()) {
    head += fmt::format("# hetplan_rank_devices = [{}]  # hetplan device of rank r\n",
                        fmt::join(export_detail::rank_devices(placement), ", "));
    if (const auto ranks = export_detail::node_ranks(placement); !ranks.empty())
      head += fmt::format(
          "# hetplan_node_rank = [{}]  # torchrun --node-rank of cluster node i (-1: unused)\n",
          fmt::join(ranks, ", "));
  }
  out.text = head + t.text;
  return out;
}

}  // namespace hetplan
