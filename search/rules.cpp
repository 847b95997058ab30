#include "search/rules.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodel/layer_ops.h"
#include "search/pipeline/schedule.h"
#include "search/replicas.h"

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
  return fmt::format("dp x cp x tp x pp = {} GPUs, the cluster has {}", s.devices(),
                     c.cluster_gpus);
}

// Context parallelism (Megatron-Core): a way of moving keys and values the framework runs, fused
// attention (Transformer Engine's kernels), sequences that split into 2 x cp chunks for causal
// load balancing, heads that split over an all-to-all group.
std::string context_parallel(const RuleContext& c, const Strategy& s) {
  if (s.cp == 1) return "";
  const std::string comm(to_string(s.cp_comm));
  if (!contains(c.framework.can_run.context_parallel, comm))
    return c.framework.can_run.context_parallel.empty()
               ? fmt::format("{} has no context parallelism: cp must be 1", c.framework.name)
               : fmt::format("{} runs context parallelism by {}, not {}", c.framework.name,
                             fmt::join(c.framework.can_run.context_parallel, ", "), comm);
  if (!s.flash_attention)
    return "context parallelism runs fused attention (Transformer Engine's kernels with CP): "
           "flash_attention must be true";
  return context_parallel_problem(c.model, s.cp, s.tp, s.cp_comm, s.cp_a2a);
}

// Expert parallelism: a model with routed experts, a framework that runs it, widths that divide
// the experts and their MLPs, and ep x etp groups carved out of the rank's dp x cp x tp devices.
std::string expert_parallel(const RuleContext& c, const Strategy& s) {
  const bool own_width = s.expert_tp() != s.tp;
  if (!c.model.is_moe())
    return s.ep == 1 && !own_width
               ? ""
               : fmt::format("{} has no routed experts: ep must be 1 and etp tp", c.model.name);
  if (s.ep > 1 && !c.framework.can_run.expert_parallel)
    return fmt::format("{} has no expert parallelism: ep must be 1", c.framework.name);
  if (own_width && !c.framework.can_run.expert_tensor_parallel)
    return fmt::format("{} runs the experts at the tensor width: etp must be tp", c.framework.name);
  if (std::string why = expert_parallel_problem(c.model, s.ep, s.expert_tp()); !why.empty())
    return why;
  if (s.rank_devices() % (s.ep * s.expert_tp()) != 0)
    return fmt::format("ep x etp = {} x {} does not divide dp x cp x tp = {}", s.ep, s.expert_tp(),
                       s.rank_devices());
  return "";
}

// The token dispatcher: one the framework runs (only an MoE model's strategy is asked).
std::string moe_dispatcher(const RuleContext& c, const Strategy& s) {
  if (!c.model.is_moe()) return "";
  const std::string name(to_string(s.moe_dispatcher));
  if (contains(c.framework.can_run.moe_dispatchers, name)) return "";
  return fmt::format("{} dispatches tokens by {}, not {}", c.framework.name,
                     fmt::join(c.framework.can_run.moe_dispatchers, ", "), name);
}

// The shared experts are one tensor-parallel MLP (as wide as all of them).
std::string shared_experts(const RuleContext& c, const Strategy& s) {
  for (const LayerSpec& l : c.model.layers)
    if (const auto* b = l.block();
        b && b->is_moe() && (b->shared_experts * b->shared_ffn_hidden) % s.tp)
      return fmt::format("tp {} does not divide the shared experts' MLP width {} of {}", s.tp,
                         b->shared_experts * b->shared_ffn_hidden, l.name);
  return "";
}

// Megatron-Core's MoE layer with tp > 1 leaves the tensor-parallel region (all-gather dispatcher
// at ep 1 and etp tp) only under sequence parallelism.
std::string moe_sequence_parallel(const RuleContext& c, const Strategy& s) {
  if (!c.model.is_moe() || s.tp == 1 || s.sequence_parallel) return "";
  if (moe_in_tensor_region(s.ep, s.expert_tp(), s.tp, s.moe_dispatcher)) return "";
  return "expert parallelism, an expert tensor width other than tp or the all-to-all dispatcher "
         "at tp > 1 needs sequence parallelism, as Megatron-Core requires";
}

// A low-precision recipe the framework runs, on GPUs that have its GEMMs: fp8 from Hopper (and
// Ada), MXFP8 and NVFP4's block scaling on Blackwell (the GPUs with fp4 tensor cores).
std::string precision(const RuleContext& c, const Strategy& s) {
  if (s.precision == Precision::kBf16) return "";
  const std::string name(to_string(s.precision));
  if (!contains(c.framework.can_run.precisions, name))
    return fmt::format("{} runs the precisions {}, not {}", c.framework.name,
                       fmt::join(c.framework.can_run.precisions, ", "), name);
  if (c.cluster == nullptr) return "";
  const bool block_scaled = s.precision == Precision::kMxfp8 || s.precision == Precision::kNvfp4;
  for (const NodeGroup& g : c.cluster->groups) {
    const GpuSpec& gpu = g.node.gpu;
    if (!gpu.supports(Dtype::kFp8))
      return fmt::format("{} has no fp8 tensor cores: precision {} needs them", gpu.name, name);
    if (block_scaled && !gpu.supports(Dtype::kFp4))
      return fmt::format("{} has no block-scaled (Blackwell) tensor cores: precision {} needs them",
                         gpu.name, name);
  }
  return "";
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

// torch.distributed.pipelining (schedules.py, the classes' __init__): Schedule1F1B raises with
// fewer micro-batches than stages; ScheduleInterleaved1F1B runs m micro-batches in max(1, m / pp)
// rounds and raises unless the rounds divide m.
std::string pytorch_schedule(const RuleContext& c, const Strategy& s) {
  if (c.framework.can_run.pipeline_runtime != "pytorch") return "";
  const int64_t m = s.microbatches();
  if (s.schedule == "1f1b" && m < s.pp)
    return fmt::format(
        "{} runs 1F1B as torch.distributed.pipelining's Schedule1F1B, which refuses {} "
        "micro-batch{} over pp {} (at least one a stage)",
        c.framework.name, m, m == 1 ? "" : "es", s.pp);
  if (s.schedule != "interleaved" || s.chunks_per_device() == 1) return "";
  const int64_t rounds = pipeline::pytorch_interleaved_rounds(m, s.pp);
  if (m % rounds == 0) return "";
  return fmt::format(
      "{} runs interleaved 1F1B as torch.distributed.pipelining's ScheduleInterleaved1F1B: {} "
      "micro-batches in max(1, {} / pp {}) = {} rounds, which it refuses unless the rounds divide "
      "them",
      c.framework.name, m, m, s.pp, rounds);
}

std::string schedule(const RuleContext& c, const Strategy& s) {
  if (s.pp == 1) return "";
  if (!c.framework.can_run_schedule(s.schedule))
    return fmt::format("{} runs the pipeline schedules {}, not {}", c.framework.name,
                       fmt::join(c.framework.can_run.schedules, ", "), s.schedule);
  return pytorch_schedule(c, s);
}

std::string recompute(const RuleContext& c, const Strategy& s) {
  const std::string mode(to_string(s.recompute));
  if (contains(c.framework.can_run.recompute, mode)) return "";
  return fmt::format("{} runs recomputation {}, not {}", c.framework.name,
                     fmt::join(c.framework.can_run.recompute, ", "), mode);
}

// Megatron-Core's --recompute-method block: the first N blocks of a stage only.
std::string recompute_num_layers(const RuleContext& c, const Strategy& s) {
  if (s.recompute_num_layers <= 0 || c.framework.can_run.recompute_block) return "";
  return fmt::format(
      "{} recomputes every block under full recomputation, not the first {} of each stage",
      c.framework.name, s.recompute_num_layers);
}

// Megatron-Core's --recompute-modules: ones the framework runs, and that the model has.
std::string recompute_modules(const RuleContext& c, const Strategy& s) {
  if (s.recompute != Recompute::kSelective) return "";
  const std::vector<RecomputeModule> asked = modules_of(s.recomputation().modules);
  for (RecomputeModule m : asked)
    if (!contains(c.framework.can_run.recompute_modules, std::string(to_string(m))))
      return fmt::format("{} recomputes the modules {} selectively, not {}", c.framework.name,
                         fmt::join(c.framework.can_run.recompute_modules, ", "), to_string(m));
  const OpGroup has = recompute_modules_of(c.model);
  for (RecomputeModule m : asked)
    if (!has_module(has, m))
      return fmt::format("recompute_modules {}: {}", to_string(m), absent_module_reason(m));
  return "";
}

// LoRA: a framework that runs it, on layers hetplan models, at a rank the tensor width divides.
std::string lora(const RuleContext& c, const Strategy& s) {
  if (!s.lora.enabled()) return "";
  if (!c.framework.can_run.lora)
    return fmt::format(
        "{} does not run LoRA fine-tuning as hetplan models it (can_run.lora; `hetplan "
        "frameworks {}` gives its source)",
        c.framework.name, c.framework.name);
  return lora_problem(c.model, s.lora, s.tp);
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
  const auto& modes = c.framework.can_run.tp_comm_overlap_modes;
  if (!modes.empty() && !contains(modes, s.host_mode))
    return fmt::format("{} overlaps tensor-parallel communication under host_mode {} only, not {}",
                       c.framework.name, fmt::join(host_mode_names(modes), " or "),
                       to_string(s.host_mode));
  return "";
}

std::string ep_comm_overlap(const RuleContext& c, const Strategy& s) {
  if (!s.ep_comm_overlap) return "";
  if (!c.framework.can_run.ep_comm_overlap)
    return fmt::format("{} does not overlap the experts' all-to-alls", c.framework.name);
  if (!ep_comm_overlap_fits(s))
    return "the experts' all-to-all overlap needs ep > 1, the alltoall or flex dispatcher, no full "
           "recomputation and, with a pipeline, virtual stages (Megatron-Core's assertions)";
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
  // The dtypes a framework's fused kernel takes (can_run.fused_attention_dtypes).
  if (s.flash_attention && !c.framework.can_run.fused_attention_takes(c.model.dtype))
    return fmt::format(
        "{}'s activations are {}: {}'s fused attention takes {}, so its "
        "attention runs unfused (flash_attention false)",
        c.model.name, to_string(c.model.dtype), c.framework.name,
        fmt::join(c.framework.can_run.fused_attention_dtypes, " or "));
  const std::string kernel = s.flash_attention ? "fused" : "unfused";
  if (contains(c.framework.can_run.attention, kernel)) return "";
  return fmt::format("{} runs {} attention only", c.framework.name,
                     fmt::join(c.framework.can_run.attention, " or "));
}

std::string host_mode(const RuleContext& c, const Strategy& s) {
  if (contains(c.framework.can_run.host_modes, s.host_mode)) {
    if (s.host_mode != HostMode::kCudaGraphs) return "";
    const std::string why = c.framework.cuda_graphs_refusal(s.pp, s.ep);
    return why.empty() ? "" : why + ": host_mode eager or compiled";
  }
  return fmt::format("{} runs {}, not {}", c.framework.name,
                     fmt::join(host_mode_names(c.framework.can_run.host_modes), ", "),
                     to_string(s.host_mode));
}

}  // namespace

const std::vector<StrategyRule>& strategy_rules() {
  static const std::vector<StrategyRule> kRules = {
      {"batch", "global_batch", batch},
      {"devices", "dp", devices},
      {"tp", "tp", tensor_width},
      {"tp", "tp", tensor_parallel},
      {"cp", "cp", context_parallel},
      {"tp", "tp", shared_experts},
      {"ep", "ep", expert_parallel},
      {"ep", "sequence_parallel", moe_sequence_parallel},
      {"moe_dispatcher", "moe_dispatcher", moe_dispatcher},
      {"precision", "precision", precision},
      {"lora", "lora", lora},
      {"chunks", "chunks", chunks},
      {"pp", "pp", stages},
      {"zero", "zero", zero},
      {"schedule", "schedule", schedule},
      {"recompute", "recompute", recompute},
      {"recompute", "recompute_modules", recompute_modules},
      {"recompute", "recompute_num_layers", recompute_num_layers},
      {"sequence_parallel", "sequence_parallel", sequence_parallel},
      {"tp_comm_overlap", "tp_comm_overlap", tp_comm_overlap},
      {"ep_comm_overlap", "ep_comm_overlap", ep_comm_overlap},
      {"overlap_grad_reduce", "overlap_grad_reduce", overlap_grad_reduce},
      {"grad_accumulation_fusion", "grad_accumulation_fusion", grad_accumulation_fusion},
      {"attention", "flash_attention", attention},
      {"host_mode", "host_mode", host_mode},
  };
  return kRules;
}

namespace {

// With replica groups (search/replicas.h): what the first version runs, then every rule for each
// group as the uniform strategy it is costed as, the key naming the group.
std::optional<RuleViolation> first_broken_replica_rule(const RuleContext& context,
                                                       const Strategy& s) {
  if (std::string why = replicas_limit(s); !why.empty())
    return RuleViolation{"replicas", "stages", std::move(why)};
  for (size_t k = 0; k < s.stages.size(); ++k)
    for (size_t g = 0; g < s.stages[k].replicas.size(); ++g) {
      const Strategy v = group_strategy(s, k, g);
      for (const StrategyRule& rule : strategy_rules()) {
        // The group's devices are its own list (placed and checked against the cluster then),
        // not dp x tp x pp of its uniform strategy.
        if (rule.code == "devices") continue;
        if (std::string why = rule.broken(context, v); !why.empty()) {
          return RuleViolation{
              std::string(rule.code), fmt::format("stages[{}].replicas[{}].{}", k, g, rule.key),
              fmt::format("stage {} group {} ({} x {} at tp {}, micro_batch {}): "
                          "{}",
                          k, g, v.dp, s.stages[k].replicas[g].gpu_type, v.tp, v.micro_batch, why)};
        }
      }
    }
  return std::nullopt;
}

}  // namespace

std::optional<RuleViolation> first_broken_rule(const RuleContext& context, const Strategy& s) {
  pipeline::schedule_info(s.schedule);  // throws InputError naming the known schedules
  if (s.has_replicas()) return first_broken_replica_rule(context, s);
  for (const StrategyRule& rule : strategy_rules())
    if (std::string why = rule.broken(context, s); !why.empty())
      return RuleViolation{std::string(rule.code), std::string(rule.key), std::move(why)};
  return std::nullopt;
}

std::string rule_problem(std::string_view code, const RuleContext& context, const Strategy& s) {
  bool known = false;
  for (const StrategyRule& rule : strategy_rules()) {
    if (rule.code != code) continue;
    known = true;
    if (std::string why = rule.broken(context, s); !why.empty()) return why;
  }
  if (!known) throw std::logic_error(fmt::format("rule_problem: no rule {}", code));
  return "";
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

bool ep_comm_overlap_fits(const Strategy& s) {
  return s.ep > 1 && s.moe_dispatcher != MoeDispatcher::kAllGather &&
         s.recompute != Recompute::kFull && (s.pp == 1 || s.chunks_per_device() > 1);
}

std::string framework_reference(const FrameworkSpec& framework) {
  return framework.origin.rfind("presets/", 0) == 0 ? framework.name : framework.origin;
}

Strategy with_framework_defaults(Strategy s, const FrameworkSpec& framework,
                                 const ModelSpec* model) {
  const FrameworkDefaults& d = framework.defaults;
  if (!(s.given & kGivenFlashAttention))
    s.flash_attention =
        d.flash_attention && (!model || framework.can_run.fused_attention_takes(model->dtype));
  if (!(s.given & kGivenGradAccumulationFusion))
    s.grad_accumulation_fusion = d.grad_accumulation_fusion;
  if (!(s.given & kGivenOverlapGradReduce)) s.overlap_grad_reduce = d.overlap_grad_reduce;
  if (!(s.given & kGivenTpCommOverlap))
    s.tp_comm_overlap = d.tp_comm_overlap && s.sequence_parallel && s.tp > 1;
  if (!(s.given & kGivenHostMode)) {
    s.host_mode = d.host_mode;
    if (s.host_mode == HostMode::kCudaGraphs && !framework.cuda_graphs_refusal(s.pp, s.ep).empty())
      s.host_mode = HostMode::kEager;  // FrameworkDefaults::host_mode
  }
  if (!(s.given & kGivenFp32GradReduce)) s.fp32_grad_reduce = d.fp32_grad_reduce;
  if (!(s.given & kGivenLowPrecisionParams)) s.low_precision_params = d.low_precision_params;
  if (!(s.given & kGivenEpCommOverlap))
    s.ep_comm_overlap = d.ep_comm_overlap && ep_comm_overlap_fits(s);
  s.framework = framework_reference(framework);
  return s;
}

}  // namespace hetplan
