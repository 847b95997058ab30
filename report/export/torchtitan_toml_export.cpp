// A torchtitan job config (TOML), for torchtitan before its February 2026 configuration refactor
// (9810191bbb03; it reads no TOML since). Keys as in torchtitan/config/job_config.py of those
// releases; schedule names as in torch.distributed.pipelining.schedules.get_schedule_class.
#include <fmt/format.h>

#include "report/export/torchtitan_shared.h"

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
  void put(const std::string& key, bool v) {
    text += fmt::format("{} = {}\n", key, v ? "true" : "false");
  }
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

// Context and expert parallelism as the TOML releases' [parallelism] keys; the recipe is the
// model's converters there, which this file does not write.
void context_and_expert_keys(const Strategy& s, Toml& t, ExportResult& out) {
  if (s.cp > 1) {
    t.put("context_parallel_degree", s.cp);
    if (s.cp_comm == CpComm::kAllGather || s.cp_comm == CpComm::kP2p)
      t.put("context_parallel_rotate_method",
            std::string(s.cp_comm == CpComm::kAllGather ? "allgather" : "alltoall"));
    else
      out.unsupported.push_back(fmt::format(
          "context parallelism by {}: torchtitan rotates keys and values by allgather or "
          "alltoall (a ring)",
          to_string(s.cp_comm)));
  }
  if (s.ep > 1) t.put("expert_parallel_degree", s.ep);
  if (s.expert_tp() != s.tp) t.put("expert_tensor_parallel_degree", s.expert_tp());
  if (s.precision != Precision::kBf16)
    out.instructions.push_back(fmt::format(
        "precision {}: enable the float8 or mx converter of your torchtitan release in the "
        "[model] converters and its [quantize] section (this file does not write them)",
        to_string(s.precision)));
}

}  // namespace

ExportResult export_torchtitan_toml(const ModelSpec& model, const Strategy& s,
                                    const ExportOptions& o) {
  namespace tt = export_detail::torchtitan;
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
  if (s.tp_comm_overlap && s.host_mode == HostMode::kCompiled)
    t.put("enable_async_tensor_parallel", true);
  if (s.tp > 1 && !s.sequence_parallel)
    out.approximations.push_back(
        "torchtitan's tensor parallelism always shards the sequence "
        "(sequence parallel)");
  context_and_expert_keys(s, t, out);
  t.put("pipeline_parallel_degree", s.pp);
  if (s.pp > 1) {
    const std::string schedule = tt::schedule_name(s, out);
    tt::check_microbatches(s, schedule, out);
    t.put("pipeline_parallel_schedule", schedule);
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
        for (const auto& seg : segments) parts.push_back(tt::stage_modules(seg, "output"));
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
  }
  // torch.compile of the blocks and the loss (host mode compiled), which async tensor
  // parallelism needs (the TOML releases' parallelism.enable_async_tensor_parallel). These
  // releases had no CUDA graph capture in their trainer.
  if (s.host_mode == HostMode::kCompiled) {
    t.table("compile");
    t.put("enable", true);
    t.put("components", std::vector<std::string>{"model", "loss"});
  } else if (s.host_mode == HostMode::kCudaGraphs) {
    out.approximations.push_back(
        "CUDA graphs: torchtitan's TOML releases capture none (the core Trainer's came with "
        "f84224af0, 2026-08-13), so the step runs eagerly (predict with \"host_mode\": "
        "\"eager\" for its time)");
  }
  if (s.tp_comm_overlap && s.host_mode != HostMode::kCompiled)
    out.unsupported.push_back(
        "asynchronous tensor parallelism without torch.compile: torchtitan runs it in a compiled "
        "model only (predict with \"host_mode\": \"compiled\")");
  tt::common_notes(s, out);
  export_detail::lora_notes(s, export_detail::torchtitan::kTorchtitanLora, out);

  std::string head = fmt::format(
      "# torchtitan job config for {}: {}\n# exported by hetplan for torchtitan before its "
      "February 2026 configuration refactor (current torchtitan reads no TOML: export without "
      "--torchtitan-toml). Launch on {} GPUs (NGPU / torchrun).\n",
      model.name, export_detail::strategy_summary(s), s.devices());
  if (layer)
    head += fmt::format(
        "# [model] name and flavor: torchtitan defines model shapes in code; pick the one with "
        "{}\n",
        tt::shape_text(*layer, model.num_blocks()));
  head += tt::comment_lines(s, o, out);
  out.text = head + t.text;
  return out;
}

}  // namespace hetplan
