#include "report/export/torchtitan_shared.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "search/pipeline/schedule.h"

namespace hetplan::export_detail::torchtitan {

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

void check_microbatches(const Strategy& s, std::string_view schedule, ExportResult& out) {
  const int64_t m = s.microbatches();
  if (s.pp <= 1 || m <= 0) return;
  if (schedule == "1F1B" && m < s.pp) {
    // Schedule1F1B.__init__: "Number of microbatches (M) must be greater than or equal to the
    // number of stages (pp)".
    out.unsupported.push_back(fmt::format(
        "{} micro-batch{} over {} pipeline ranks: torch.distributed.pipelining's Schedule1F1B "
        "refuses fewer micro-batches than stages",
        m, m == 1 ? "" : "es", s.pp));
  } else if (schedule == "Interleaved1F1B" || schedule == "InterleavedZeroBubble") {
    // ScheduleInterleaved1F1B.__init__: rounds = max(1, M // pp), and "Interleaved 1F1B requires
    // the number of microbatches to be a multiple of the number of rounds".
    const int64_t rounds = pipeline::pytorch_interleaved_rounds(m, s.pp);
    if (m % rounds != 0)
      out.unsupported.push_back(fmt::format(
          "{} micro-batches over {} pipeline ranks: torch.distributed.pipelining's {} runs them "
          "in max(1, {} // {}) = {} rounds and refuses a count that is no multiple of the rounds "
          "({} mod {} = {})",
          m, s.pp, schedule, m, s.pp, rounds, m, rounds, m % rounds));
  }
}

std::vector<std::string> stage_modules(const StageBlocks& b, std::string_view head) {
  std::vector<std::string> names;
  if (b.embedding) names.push_back("tok_embeddings");
  for (int64_t i = 0; i < b.blocks; ++i)
    names.push_back(fmt::format("layers.{}", b.first_block + i));
  if (b.head) {
    names.push_back("norm");
    names.emplace_back(head);
  }
  return names;
}

void python_config_notes(const ModelSpec& model, const Strategy& s, ExportResult& out) {
  if (s.cp > 1 && s.cp_comm != CpComm::kAllGather)
    out.unsupported.push_back(fmt::format(
        "context parallelism by {}: torchtitan's context_parallel gathers keys and values "
        "(all_gather); the TOML releases also rotated them all-to-all",
        to_string(s.cp_comm)));
  if (s.expert_tp() != s.tp)
    out.unsupported.push_back(fmt::format(
        "expert tensor width {} (tp {}): ParallelismConfig has no expert_tensor_parallel_degree "
        "(--torchtitan-toml writes the TOML releases' one)",
        s.expert_tp(), s.tp));
  const char* linear = nullptr;
  const char* experts = nullptr;
  switch (s.precision) {
    case Precision::kBf16:
      return;
    case Precision::kFp8Current:
      linear = "Float8LinearConverter.Config(recipe_name=\"rowwise\", filter_fqns=[\"output\"])";
      experts = "Float8GroupedExpertsConverter.Config()";
      out.approximations.push_back(
          "fp8-current: torchtitan's float8 scales each row dynamically (recipe rowwise), where "
          "hetplan costed current scaling per tensor");
      break;
    case Precision::kMxfp8:
      linear = "MXFP8LinearConverter.Config()";
      experts = "MXFP8GroupedExpertsConverter.Config()";
      break;
    case Precision::kNvfp4:
      linear = "NVFP4LinearConverter.Config()";
      break;
    default:
      out.unsupported.push_back(
          fmt::format("precision {}: torchtitan's converters are float8 (rowwise), mxfp8 and nvfp4",
                      to_string(s.precision)));
      return;
  }
  const bool moe = model.is_moe() && experts;
  out.instructions.push_back(fmt::format(
      "torchtitan applies the low-precision recipe where the model registry builds the model: "
      "pass quantization=[{}{}{}] (from torchtitan.components.quantization) in the config "
      "function HETPLAN_BASE_CONFIG names",
      linear, moe ? ", " : "", moe ? experts : ""));
}

void common_notes(const Strategy& s, ExportResult& out) {
  if (s.recompute_num_layers > 0)
    out.unsupported.push_back(fmt::format(
        "full recomputation of the first {} blocks of each stage: torchtitan's full activation "
        "checkpointing wraps every block",
        s.recompute_num_layers));
  if (s.recompute == Recompute::kSelective)
    out.approximations.push_back(
        "selective recomputation as torchtitan's op-level selective "
        "checkpointing (it keeps matmul outputs and recomputes the rest; "
        "hetplan models Megatron-LM's attention-core recomputation)");
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
}

std::string shape_text(const LayerSpec& layer, int64_t blocks) {
  return fmt::format("{} layers, hidden {}, {} heads{}", blocks, layer.hidden, layer.block()->heads,
                     layer.block()->rotary ? ""
                                           : " (torchtitan's models use rotary embeddings; this "
                                             "one does not)");
}

std::string comment_lines(const Strategy& s, const ExportOptions& o, ExportResult& out) {
  const auto placement = rank_placement(s, o.cluster);
  out.placement = placement_lines(s, placement, "torchtitan", Launcher::kTorchrun);
  std::string text;
  for (const auto& note : out.approximations) text += "# note: " + note + "\n";
  for (const auto& no : out.unsupported) text += "# NOT EXPRESSED: " + no + "\n";
  for (const auto& line : out.placement) text += "# placement: " + line + "\n";
  if (!placement.ranks.empty()) {
    text += fmt::format("# hetplan_rank_devices = [{}]  # hetplan device of rank r\n",
                        fmt::join(rank_devices(placement), ", "));
    if (const auto ranks = node_ranks(placement); !ranks.empty())
      text += fmt::format(
          "# hetplan_node_rank = [{}]  # torchrun --node-rank of cluster node i (-1: unused)\n",
          fmt::join(ranks, ", "));
  }
  return text;
}

}  // namespace hetplan::export_detail::torchtitan
