// A torchtitan configuration in its current form: a Python module whose function returns a
// Trainer.Config (torchtitan/trainer.py; the TOML job config is gone since the February 2026
// refactor, 9810191bbb03). The function starts from the torchtitan config that defines the model
// (torchtitan defines model shapes in code) and replaces its parallelism, batch and activation
// checkpointing. Field names as in torchtitan/config/configs.py; the run is
//   python -m torchtitan.train --module <this module> --config hetplan_config
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "report/export/torchtitan_shared.h"

namespace hetplan {
namespace {

constexpr const char* kFunction = "hetplan_config";
constexpr const char* kModule = "hetplan_torchtitan";

std::string py_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string py_list(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const auto& item : items) quoted.push_back(py_string(item));
  return fmt::format("[{}]", fmt::join(quoted, ", "));
}

// Keyword arguments of one constructor call, one a line.
struct Call {
  std::vector<std::string> lines;
  void put(const std::string& key, int64_t v) { lines.push_back(fmt::format("{}={}", key, v)); }
  void put(const std::string& key, bool v) {
    lines.push_back(fmt::format("{}={}", key, v ? "True" : "False"));
  }
  void put(const std::string& key, const char* v) { put(key, std::string(v)); }
  void put(const std::string& key, const std::string& v) {
    lines.push_back(key + "=" + py_string(v));
  }
  void put(const std::string& key, const std::vector<std::vector<std::string>>& parts) {
    std::string text = key + "=[\n";
    for (const auto& part : parts) text += "            " + py_list(part) + ",\n";
    lines.push_back(text + "        ]");
  }
  std::string text(const std::string& target, const std::string& cls) const {
    std::string out = fmt::format("    {} = {}(\n", target, cls);
    for (const auto& line : lines) out += "        " + line + ",\n";
    return out + "    )\n";
  }
};

// config.training fields: tokens per micro-batch and per step (torchtitan counts tokens, not
// samples; each sample is one max_context_length sequence), precision, CUDA graphs.
std::string training_lines(const ModelSpec& model, const Strategy& s, ExportResult& out) {
  auto set = [](const std::string& field, const std::string& value) {
    return fmt::format("    config.training.{} = {}\n", field, value);
  };
  std::string text;
  text +=
      set("num_tokens_per_microbatch_per_dp_rank", std::to_string(s.micro_batch * model.seq_len));
  text += set("num_tokens_per_train_step", std::to_string(s.global_batch * model.seq_len));
  text += set("max_context_length", std::to_string(model.seq_len));
  const bool fp32 = model.dtype == Dtype::kFp32 || model.dtype == Dtype::kTf32;
  text += set("mixed_precision_param", py_string(fp32 ? "float32" : "bfloat16"));
  if (!fp32 && model.dtype != Dtype::kBf16)
    out.approximations.push_back(fmt::format(
        "training in {}: torchtitan's parameters are bfloat16 or float32", to_string(model.dtype)));
  // torchtitan captures each step's forward and backward in a CUDA graph by default
  // (trainer.py wrap_with_cuda_graph): host mode cuda-graphs. Trainer.Config._validate_cuda_graphs
  // refuses that with a pipeline ("CUDA graphs do not support pipeline parallelism yet") and with
  // expert parallelism over a dispatcher that synchronises with the host (the standard
  // all-to-all, which this export runs).
  const bool refused = s.pp > 1 || s.ep > 1;
  if (s.host_mode == HostMode::kCudaGraphs && refused)
    out.unsupported.push_back(
        "CUDA graphs with a pipeline or expert parallelism: torchtitan's _validate_cuda_graphs "
        "refuses them (predict with \"host_mode\": \"eager\")");
  if (s.host_mode != HostMode::kCudaGraphs || refused) text += set("disable_cuda_graphs", "True");
  return text;
}

// config.compile: torch.compile of the blocks and the loss under host mode compiled (its default
// components, what the torchtitan framework's compiled_parts cost), and asynchronous tensor
// parallelism, a torch.compile pass (CompileConfig.__post_init__: "Async TP requires 'model' in
// --compile.components and --compile.enable").
std::string compile_lines(const Strategy& s, ExportResult& out) {
  std::string text;
  const bool compiled = s.host_mode == HostMode::kCompiled;
  if (compiled) {
    text += "    config.compile.enable = True\n";
    text += "    config.compile.components = [\"model\", \"loss\"]\n";
  }
  if (s.tp_comm_overlap) {
    if (compiled)
      text += "    config.compile.enable_async_tensor_parallel = True\n";
    else
      out.unsupported.push_back(
          "asynchronous tensor parallelism without torch.compile: torchtitan runs it in a compiled "
          "model only (predict with \"host_mode\": \"compiled\")");
  }
  return text;
}

// The pipeline fields of ParallelismConfig: schedule, micro-batches per step (all of a replica's,
// one flush an iteration as hetplan simulates it) and the modules of each (virtual) stage.
void pipeline_args(const ModelSpec& model, const Strategy& s, const LayerSpec* layer, Call& p,
                   ExportResult& out) {
  namespace tt = export_detail::torchtitan;
  const std::string schedule = tt::schedule_name(s, out);
  tt::check_microbatches(s, schedule, out);
  p.put("pipeline_parallel_schedule", schedule);
  p.put("num_pp_microbatches", s.microbatches());
  bool from_strategy = false;
  const auto segments = export_detail::pipeline_segments(model, s, out, &from_strategy);
  if (layer && (from_strategy || s.chunks > 1)) {
    std::vector<std::vector<std::string>> parts;
    for (const auto& seg : segments) parts.push_back(tt::stage_modules(seg, "lm_head"));
    p.put("module_fqns_per_model_part", parts);
  } else if (layer) {
    out.approximations.push_back(
        "the strategy leaves the layer partition to hetplan: torchtitan's default split is used");
  }
}

// config.parallelism, whole: the base config's degrees are replaced, not merged.
std::string parallelism_lines(const ModelSpec& model, const Strategy& s, const LayerSpec* layer,
                              ExportResult& out) {
  Call p;
  // torchtitan applies fully_shard over [dp_replicate, dp_shard] in every layout: replicated
  // parameters (ZeRO-0) are data_parallel_replicate_degree, sharded ones the shard degree.
  const bool replicate = s.zero == 0;
  p.put("data_parallel_replicate_degree", replicate ? s.dp : int64_t{1});
  p.put("data_parallel_shard_degree", replicate ? int64_t{1} : s.dp);
  if (!replicate && s.dp > 1) {
    p.put("fsdp_reshard_after_forward", s.zero >= 3 ? "always" : "never");
    if (s.zero == 1)
      out.approximations.push_back(
          "ZeRO-1: torchtitan's FSDP without resharding also shards gradients (ZeRO-2)");
  }
  p.put("tensor_parallel_degree", s.tp);
  if (s.tp > 1) p.put("enable_sequence_parallel", s.sequence_parallel);
  p.put("pipeline_parallel_degree", s.pp);
  if (s.pp > 1) pipeline_args(model, s, layer, p, out);
  if (s.cp > 1) p.put("context_parallel_degree", s.cp);
  if (s.ep > 1) p.put("expert_parallel_degree", s.ep);
  export_detail::torchtitan::python_config_notes(model, s, out);
  return p.text("config.parallelism", "ParallelismConfig");
}

// config.activation_checkpoint: a policy's Config, or None.
std::string checkpoint_line(const Strategy& s, std::vector<std::string>& imports) {
  // SelectiveAC is the per-op policy (recompute op); Megatron's selective runs as it too
  // (tt::common_notes says so).
  const char* policy = s.recompute == Recompute::kFull   ? "FullAC"
                       : s.recompute == Recompute::kNone ? nullptr
                                                         : "SelectiveAC";
  if (!policy) return "    config.activation_checkpoint = None\n";
  imports.push_back(
      fmt::format("from torchtitan.distributed.activation_checkpoint import {}", policy));
  return fmt::format("    config.activation_checkpoint = {}.Config()\n", policy);
}

std::string header(const ModelSpec& model, const LayerSpec* layer, const Strategy& s) {
  std::string text = fmt::format(
      "# torchtitan config for {}: {}\n"
      "# exported by hetplan for torchtitan's Python configuration (Trainer.Config; releases "
      "before its February 2026 refactor read a TOML job config: --torchtitan-toml). Save as {}.py "
      "where Python finds it and launch on {} GPUs, e.g.\n"
      "#   HETPLAN_BASE_CONFIG=<module>:<function> torchrun --nproc-per-node <GPUs per node> "
      "--nnodes <nodes> -m torchtitan.train --module {} --config {}\n",
      model.name, export_detail::strategy_summary(s), kModule, s.devices(), kModule, kFunction);
  if (layer)
    text += fmt::format(
        "# HETPLAN_BASE_CONFIG: the torchtitan config function that builds the model (torchtitan "
        "defines model shapes in code), e.g. torchtitan.models.llama3.config_registry:llama3_8b; "
        "pick the one with {}. Its data, optimizer and model stay; its parallelism, batch and "
        "activation checkpointing are replaced below.\n",
        export_detail::torchtitan::shape_text(*layer, model.num_blocks()));
  return text;
}

}  // namespace

ExportResult export_torchtitan(const ModelSpec& model, const Strategy& s, const ExportOptions& o) {
  if (o.torchtitan_toml || o.torchtitan_split_points) return export_torchtitan_toml(model, s, o);
  ExportResult out;
  const LayerSpec* layer = export_detail::uniform_block(model, out);
  std::vector<std::string> imports = {"from torchtitan.config import ParallelismConfig"};
  const std::string training = training_lines(model, s, out);
  const std::string parallelism = parallelism_lines(model, s, layer, out);
  const std::string compile = compile_lines(s, out);
  const std::string checkpoint = checkpoint_line(s, imports);
  export_detail::torchtitan::common_notes(s, out);
  export_detail::lora_notes(s, export_detail::torchtitan::kTorchtitanLora, out);
  std::string text = header(model, layer, s);
  text += export_detail::torchtitan::comment_lines(s, o, out);
  text += "import importlib\nimport os\n\n";
  for (const auto& line : imports) text += line + "\n";
  text += fmt::format(
      "\n\ndef {}():\n"
      "    module, _, function = os.environ.get(\"HETPLAN_BASE_CONFIG\", \"\").partition(\":\")\n"
      "    if not module or not function:\n"
      "        raise ValueError(\"set HETPLAN_BASE_CONFIG=MODULE:FUNCTION, the torchtitan config "
      "function that builds the model\")\n"
      "    config = getattr(importlib.import_module(module), function)()\n",
      kFunction);
  text += training + compile + parallelism + checkpoint + "    return config\n";
  out.instructions.push_back(fmt::format(
      "save the file as {}.py where Python finds it, set HETPLAN_BASE_CONFIG to the torchtitan "
      "config function that builds the model, and run python -m torchtitan.train --module {} "
      "--config {} under torchrun",
      kModule, kModule, kFunction));
  out.text = text;
  return out;
}

}  // namespace hetplan
