#include "search/rules.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodel/layer_ops.h"
#include "search/pipeline/schedule.h"

namespace hetplan {
namespace {

template <class T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string batch(const RuleContext&, const Strategy& s) {
  if (s.microbatches() != 0) return "";
  return fmt::format("global batch {} is not a multiple of dp x micro_batch = {} x {}",
                     s.global_batch, s.dp, s.micro_batch);
}

std::string devices(const RuleContext& c, const Strategy& s) {
  if (c.cluster_gpus == 0 || s.devices() <= c.cluster_gpus) return "";
  return fmt::format("dp x tp x pp = {} GPUs, the cluster has {}", s.devices(), c.cluster_gpus);
}

std::string tensor_width(const RuleContext& c, const Strategy& s) {
  return tensor_parallel_problem(c.model, s.tp);
}

std::string tensor_parallel(const RuleContext& c, const Strategy& s) {
  if (s.tp == 1 || c.framework.can_run.tensor_parallel) return "";
  return fmt::format("{} has no tensor parallelism: tp must be 1", c.framework.name);
}

std::string chunks(const RuleContext&, const Strategy& s) {
  const int64_t v = s.chunks_per_device();
  if (s.schedule.rfind("v-", 0) != 0 || v == 2) return "";
  return fmt::format("the V schedules place exactly 2 chunks per device, not {}", v);
}

std::string stages(const RuleContext& c, const Strategy& s) {
  const int64_t v = s.chunks_per_device();
  const int64_t layers = static_cast<int64_t>(c.model.layers.size());
  if (s.pp * v <= layers) return "";
  return fmt::format("pp {} x {} chunks exceeds the model's {} layers", s.pp, v, layers);
}

std::string schedule(const RuleContext& c, const Strategy& s) {
  if (s.pp == 1 || c.framework.can_run_schedule(s.schedule)) return "";
  return fmt::format("{} runs the pipeline schedules {}, not {}", c.framework.name,
                     fmt::join(c.framework.can_run.schedules, ", "), s.schedule);
}

std::string recompute(const RuleContext& c, const Strategy& s) {
  const std::string mode(to_string(s.recompute));
  if (contains(c.framework.can_run.recompute, mode)) return "";
  return fmt::format("{} runs recomputation {}, not {}", c.framework.name,
                     fmt::join(c.framework.can_run.recompute, ", "), mode);
}

std::string zero(const RuleContext& c, const Strategy& s) {
  const Capabilities& can = c.framework.can_run;
  const auto& stages = s.pp > 1 ? can.zero_with_pipeline : can.zero;
  if (contains(stages, s.zero)) return "";
  return fmt::format("{} runs ZeRO stages {}{}, not ZeRO-{}", c.framework.name,
                     fmt::join(stages, ", "), s.pp > 1 ? " with pipeline parallelism" : "", s.zero);
}

std::string sequence_parallel(const RuleContext& c, const Strategy& s) {
  if (!(s.sequence_parallel && s.tp > 1) || c.framework.can_run.sequence_parallel) return "";
  return fmt::format("{} has no sequence parallelism", c.framework.name);
}

std::string tp_comm_overlap(const RuleContext& c, const Strategy& s) {
  if (!s.tp_comm_overlap) return "";
  if (!c.framework.can_run.tp_comm_overlap)
    return fmt::format("{} does not overlap tensor-parallel communication", c.framework.name);
  if (!(s.sequence_parallel && s.tp > 1))
    return "tensor-parallel communication overlap needs sequence parallelism and tp > 1";
  return "";
}

std::string overlap_grad_reduce(const RuleContext& c, const Strategy& s) {
  if (s.dp == 1 || contains(c.framework.can_run.overlap_grad_reduce, s.overlap_grad_reduce))
    return "";
  return fmt::format("{} reduces gradients {} the backward", c.framework.name,
                     s.overlap_grad_reduce ? "after" : "during");
}

std::string grad_accumulation_fusion(const RuleContext& c, const Strategy& s) {
  if (contains(c.framework.can_run.grad_accumulation_fusion, s.grad_accumulation_fusion)) return "";
  return fmt::format("{} {} weight-gradient GEMMs into the main gradients", c.framework.name,
                     s.grad_accumulation_fusion ? "does not accumulate" : "always accumulates");
}

std::string attention(const RuleContext& c, const Strategy& s) {
  const std::string kernel = s.flash_attention ? "fused" : "unfused";
  if (contains(c.framework.can_run.attention, kernel)) return "";
  return fmt::format("{} runs {} attention only", c.framework.name,
                     fmt::join(c.framework.can_run.attention, " or "));
}

std::string host_mode(const RuleContext& c, const Strategy& s) {
  if (contains(c.framework.can_run.host_modes, s.host_mode)) return "";
  std::vector<std::string_view> modes;
  for (HostMode m : c.framework.can_run.host_modes) modes.push_back(to_string(m));
  return fmt::format("{} runs {}, not {}", c.framework.name, fmt::join(modes, ", "),
                     to_string(s.host_mode));
}

}  // namespace

const std::vector<StrategyRule>& strategy_rules() {
  static const std::vector<StrategyRule> kRules = {
      {"batch", "global_batch", batch},
      {"devices", "dp", devices},
      {"tp", "tp", tensor_width},
      {"tp", "tp", tensor_parallel},
      {"chunks", "chunks", chunks},
      {"pp", "pp", stages},
      {"zero", "zero", zero},
      {"schedule", "schedule", schedule},
      {"recompute", "recompute", recompute},
      {"sequence_parallel", "sequence_parallel", sequence_parallel},
      {"tp_comm_overlap", "tp_comm_overlap", tp_comm_overlap},
      {"overlap_grad_reduce", "overlap_grad_reduce", overlap_grad_reduce},
      {"grad_accumulation_fusion", "grad_accumulation_fusion", grad_accumulation_fusion},
      {"attention", "flash_attention", attention},
      {"host_mode", "host_mode", host_mode},
  };
  return kRules;
}

std::optional<RuleViolation> first_broken_rule(const RuleContext& context, const Strategy& s) {
  pipeline::schedule_info(s.schedule);  // throws InputError naming the known schedules
  for (const StrategyRule& rule : strategy_rules())
    if (std::string why = rule.broken(context, s); !why.empty())
      return RuleViolation{std::string(rule.code), std::string(rule.key), std::move(why)};
  return std::nullopt;
}

std::string framework_problem(const FrameworkSpec& framework) {
  for (const auto& name : framework.can_run.schedules) {
    const auto& known = pipeline::schedules();
    if (std::none_of(known.begin(), known.end(), [&](const auto& k) { return k.name == name; })) {
      std::vector<std::string> names;
      for (const auto& k : known) names.push_back(k.name);
      return fmt::format(
          "can_run.schedules: expected schedules hetplan simulates ({}), found \"{}\"",
          fmt::join(names, ", "), name);
    }
  }
  return "";
}

std::string framework_reference(const FrameworkSpec& framework) {
  return framework.origin.rfind("presets/", 0) == 0 ? framework.name : framework.origin;
}

Strategy with_framework_defaults(Strategy s, const FrameworkSpec& framework) {
  const FrameworkDefaults& d = framework.defaults;
  if (!(s.given & kGivenFlashAttention)) s.flash_attention = d.flash_attention;
  if (!(s.given & kGivenGradAccumulationFusion))
    s.grad_accumulation_fusion = d.grad_accumulation_fusion;
  if (!(s.given & kGivenOverlapGradReduce)) s.overlap_grad_reduce = d.overlap_grad_reduce;
  if (!(s.given & kGivenTpCommOverlap))
    s.tp_comm_overlap = d.tp_comm_overlap && s.sequence_parallel && s.tp > 1;
  if (!(s.given & kGivenHostMode)) s.host_mode = d.host_mode;
  if (!(s.given & kGivenFp32GradReduce)) s.fp32_grad_reduce = d.fp32_grad_reduce;
  s.framework = framework_reference(framework);
  return s;
}

}  // namespace hetplan
