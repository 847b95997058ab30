// LoRA fine-tuning's part of the layers (costmodel/layer_ops.h, Lora): the target names, the rules
// on what can be adapted, and the adapters' ops beside a targeted linear layer.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodel/layer_builder.h"

namespace hetplan {
namespace {

constexpr LoraTarget kLoraOrder[] = {LoraTarget::kQkv, LoraTarget::kProj, LoraTarget::kFc1,
                                     LoraTarget::kFc2};

}  // namespace

std::string_view to_string(LoraTarget t) {
  switch (t) {
    case LoraTarget::kQkv:
      return "linear_qkv";
    case LoraTarget::kProj:
      return "linear_proj";
    case LoraTarget::kFc1:
      return "linear_fc1";
    case LoraTarget::kFc2:
      return "linear_fc2";
  }
  return "?";
}

bool parse_lora_target(std::string_view text, LoraTarget& out) {
  for (LoraTarget t : kLoraOrder)
    if (to_string(t) == text) {
      out = t;
      return true;
    }
  return false;
}

std::string lora_target_names() {
  std::vector<std::string_view> names;
  for (LoraTarget t : kLoraOrder) names.push_back(to_string(t));
  return fmt::format("{}", fmt::join(names, ", "));
}

std::vector<LoraTarget> lora_targets_of(uint32_t mask) {
  std::vector<LoraTarget> out;
  for (LoraTarget t : kLoraOrder)
    if ((mask & static_cast<uint32_t>(t)) != 0) out.push_back(t);
  return out;
}

namespace layer_detail {

// lora_problem for one layer ("" for a layer that is not a block).
std::string lora_layer_problem(const LayerSpec& l, const Lora& lora, int64_t tp) {
  const auto* b = l.block();
  if (b == nullptr || !lora.enabled()) return "";
  // ParallelLinearAdapter's A beside a column-parallel layer is a ColumnParallelLinear of `rank`
  // outputs, which Megatron divides over the tensor-parallel group.
  const bool column_target =
      lora.targets_module(LoraTarget::kQkv) || lora.targets_module(LoraTarget::kFc1);
  if (column_target && tp > 1 && lora.rank % tp != 0)
    return fmt::format(
        "LoRA rank {} beside linear_qkv or linear_fc1 splits over the tensor-parallel group: "
        "tp {} must divide it",
        lora.rank, tp);
  if (b->mla.enabled() && lora.targets_module(LoraTarget::kQkv))
    return fmt::format(
        "{} is an MLA block: it has no linear_qkv (Megatron-Bridge's LoRA targets its "
        "linear_q_proj, linear_kv_down_proj and the others, which hetplan does not model)",
        l.name);
  const bool fc = lora.targets_module(LoraTarget::kFc1) || lora.targets_module(LoraTarget::kFc2);
  if (b->is_moe() && fc)
    return fmt::format(
        "{} is an MoE block: LoRA adapters on its routed experts (Megatron-Bridge's "
        "GroupedExpertLinearAdapter) are not modelled; target linear_qkv and linear_proj",
        l.name);
  return "";
}

void Builder::lora_adapter(LoraTarget t, int64_t tokens, int64_t in, int64_t out,
                           bool column_parallel) {
  if (!s_.lora.targets_module(t) || tokens <= 0) return;
  AdapterScope adapter(*this);
  const int64_t r = s_.lora.rank, tp = s_.tp;
  const double rows = static_cast<double>(tokens);
  const std::string name(to_string(t));
  if (column_parallel) {
    linear(name + "_lora_a", tokens, in, r / tp, {.quantizable = false});
    comm(name + "_lora_a_gather", Pass::kForward, CollectiveKind::kAllGather, rows * r * act_);
    if (!s_.sequence_parallel)
      comm(name + "_lora_a_grad_allreduce", Pass::kBackwardInput, CollectiveKind::kAllReduce,
           rows * in * act_);
    linear(name + "_lora_b", tokens, r, out, {.quantizable = false});
  } else {
    linear(name + "_lora_a", tokens, in, r, {.quantizable = false});
    comm(name + "_lora_a_allreduce", Pass::kForward, CollectiveKind::kAllReduce, rows * r * act_);
    linear(name + "_lora_b", tokens, r, out / tp, {.quantizable = false});
    comm(name + "_lora_b_gather", Pass::kForward, CollectiveKind::kAllGather, rows * out * act_);
  }
  comm(name + "_lora_b_grad_allreduce", Pass::kBackwardInput, CollectiveKind::kAllReduce,
       rows * r * act_);
  keep(rows * r * act_);  // B's input
  const double outputs = rows * (column_parallel ? out : out / tp);
  memory("lora_scale_fwd", Pass::kForward, 2 * outputs * act_);
  memory("lora_add_fwd", Pass::kForward, 3 * outputs * act_);
  memory("lora_scale_bwd", Pass::kBackwardInput, 2 * outputs * act_);
}

}  // namespace layer_detail

std::string lora_problem(const ModelSpec& model, const Lora& lora, int64_t tp) {
  if (!lora.enabled()) return "";
  bool blocks = false;
  for (const auto& l : model.layers) {
    if (std::string problem = layer_detail::lora_layer_problem(l, lora, tp); !problem.empty())
      return problem;
    blocks = blocks || l.block() != nullptr;
  }
  if (!blocks) return "LoRA needs transformer blocks to adapt: the model has none";
  return "";
}

}  // namespace hetplan
