#include "report/export/exporters.h"

#include <algorithm>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan {

const std::vector<ExporterSpec>& exporters() {
  static const std::vector<ExporterSpec> kExporters = {
      {"megatron", "Megatron-LM command-line arguments (a bash array)", export_megatron},
      {"deepspeed", "a DeepSpeed config (JSON)", export_deepspeed},
      {"torchtitan",
       "a torchtitan config (a Python module returning Trainer.Config; --torchtitan-toml: the "
       "TOML job config of releases before 2026-02)",
       export_torchtitan},
      {"sailor",
       "Sailor's dist_config.json (stages, replicas, ranks; a Megatron-DeepSpeed fork that runs a "
       "stage's replicas at their own tensor widths) and its launch arguments",
       export_sailor, /*replica_groups=*/true},
  };
  return kExporters;
}

const ExporterSpec& find_exporter(std::string_view format) {
  std::string names;
  for (const auto& spec : exporters()) {
    if (spec.format == format) return spec;
    names += (names.empty() ? "" : ", ") + std::string(spec.format);
  }
  throw InputError(fmt::format("--format: unknown format \"{}\" (expected {})", format, names));
}

namespace export_detail {

const LayerSpec* uniform_block(const ModelSpec& model, ExportResult& out) {
  for (const std::string& problem : {layer_structure_problem(model), hybrid_export_problem(model)})
    if (!problem.empty()) {
      out.unsupported.push_back(problem);
      return nullptr;
    }
  const LayerSpec& first = model.layers[1];
  for (size_t i = 2; i + 1 < model.layers.size(); ++i) {
    const LayerSpec& l = model.layers[i];
    const TransformerLayer& a = *first.block();
    const TransformerLayer& b = *l.block();
    if (l.hidden != first.hidden || l.seq_len != first.seq_len || a.heads != b.heads ||
        a.kv_heads != b.kv_heads || a.head_dim != b.head_dim || a.ffn_hidden != b.ffn_hidden ||
        a.activation != b.activation || a.experts != b.experts) {
      out.unsupported.push_back(fmt::format(
          "model {}: block {} differs in shape from block 1; the frameworks build identical "
          "transformer layers",
          model.name, i));
      break;
    }
  }
  return &first;
}

std::vector<StageBlocks> pipeline_segments(const ModelSpec& model, const Strategy& s,
                                           ExportResult& out, bool* from_strategy) {
  if (from_strategy) *from_strategy = false;
  if (s.pp <= 1) return {};
  const int64_t blocks = model.num_blocks();
  const int64_t n = s.pp * std::max<int64_t>(s.chunks, 1);
  const bool ranges = !s.stages.empty() && s.stages.front().first_layer >= 0;
  if (ranges && static_cast<int64_t>(s.stages.size()) == n) {
    if (from_strategy) *from_strategy = true;
    return strategy_stage_blocks(s, blocks);
  }
  if (ranges)
    out.unsupported.push_back(fmt::format(
        "the strategy gives {} layer ranges, but schedule {} runs {} chunks per device: the "
        "partition needs one range per virtual stage ({})",
        s.stages.size(), s.schedule, s.chunks, n));
  if (s.chunks <= 1) return {};
  std::vector<int64_t> counts(n, blocks / n);
  for (int64_t i = 0; i < blocks % n; ++i) ++counts[i];
  return split_by_counts(counts);
}

std::string lora_targets_text(const Lora& lora) {
  std::vector<std::string> targets;
  for (LoraTarget t : lora_targets_of(lora.targets))
    targets.push_back(fmt::format("\"{}\"", to_string(t)));
  return fmt::format("{}", fmt::join(targets, ", "));
}

void lora_notes(const Strategy& s, std::string_view why, ExportResult& out) {
  if (!s.lora.enabled()) return;
  out.unsupported.push_back(fmt::format("LoRA (rank {}, {}): not written: {}", s.lora.rank,
                                        lora_targets_text(s.lora), why));
}

void eager_engine_notes(const Strategy& s, std::string_view engine, ExportResult& out) {
  if (s.host_mode == HostMode::kEager) return;
  out.approximations.push_back(fmt::format(
      "{} issues its kernels eagerly: hetplan predicted host mode {} (predict with \"host_mode\": "
      "\"eager\" for its time)",
      engine, to_string(s.host_mode)));
}

std::string strategy_summary(const Strategy& s) {
  return fmt::format(
      "dp {} x tp {} x pp {} = {} GPUs, micro-batch {}, global batch {}, {}{}, "
      "recompute {}, ZeRO {}{}",
      s.dp, s.tp, s.pp, s.devices(), s.micro_batch, s.global_batch, s.schedule,
      s.chunks > 1 ? fmt::format(" x {} chunks", s.chunks) : "", s.recompute_label(), s.zero,
      s.sequence_parallel ? ", sequence parallel" : "");
}

}  // namespace export_detail
}  // namespace hetplan
