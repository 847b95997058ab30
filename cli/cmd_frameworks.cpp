// hetplan frameworks: the framework presets (presets/frameworks), or one framework in full.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>

#include "cli/command.h"
#include "costmodel/framework.h"

namespace hetplan::cli {
namespace {

// The framework's `export` as its file writes it.
std::string export_name(const FrameworkSpec& f) {
  if (f.export_format.empty()) return "none";
  return f.export_toml ? f.export_format + "-toml" : f.export_format;
}

Json capabilities_json(const Capabilities& c) {
  std::vector<std::string> modes;
  for (HostMode m : c.host_modes) modes.emplace_back(to_string(m));
  return {{"schedules", c.schedules},
          {"pipeline_runtime", c.pipeline_runtime},
          {"recompute", c.recompute},
          {"recompute_modules", c.recompute_modules},
          {"zero", c.zero},
          {"zero_with_pipeline", c.zero_with_pipeline},
          {"tensor_parallel", c.tensor_parallel},
          {"sequence_parallel", c.sequence_parallel},
          {"tp_comm_overlap", c.tp_comm_overlap},
          {"overlap_grad_reduce", c.overlap_grad_reduce},
          {"grad_accumulation_fusion", c.grad_accumulation_fusion},
          {"attention", c.attention},
          {"host_modes", modes},
          {"context_parallel", c.context_parallel},
          {"expert_parallel", c.expert_parallel},
          {"expert_tensor_parallel", c.expert_tensor_parallel},
          {"precisions", c.precisions},
          {"lora", c.lora}};
}

Json expert_gemms_json(const ExpertGemms& e) {
  if (e.kernels == ExpertGemmKernels::kGrouped) return {{"kernels", "grouped"}};
  return {{"kernels", "per_expert"}, {"streams", e.streams}};
}

Json attention_kernels_json(const std::vector<AttentionKernel>& kernels) {
  Json out = Json::array();
  for (const auto& k : kernels) {
    Json forward = Json::object(), backward = Json::object();
    for (const auto& [hd, v] : k.forward_speed) forward[std::to_string(hd)] = v;
    for (const auto& [hd, v] : k.backward_speed) backward[std::to_string(hd)] = v;
    out.push_back({{"kernel", k.kernel},
                   {"min_compute_capability", k.min_compute_capability},
                   {"max_compute_capability", k.max_compute_capability},
                   {"speed_vs_flash2", {{"forward", forward}, {"backward", backward}}}});
  }
  return out;
}

// "cudnn on compute capability 9.0 to 9.0 (1.62x / 1.61x FlashAttention-2 at head size 128)".
std::string attention_kernels_text(const std::vector<AttentionKernel>& kernels) {
  if (kernels.empty()) return "FlashAttention-2 (the calibrated kernel)";
  std::vector<std::string> parts;
  for (const auto& k : kernels) {
    const double lo = k.min_compute_capability, hi = k.max_compute_capability;
    const std::string range = hi == lo ? fmt::format("{:.1f}", lo)
                              : hi > 0 ? fmt::format("{:.1f} to {:.1f}", lo, hi)
                                       : fmt::format("{:.1f} and up", lo);
    parts.push_back(fmt::format(
        "{} on compute capability {} ({:.2f}x / {:.2f}x FlashAttention-2 at head size 128)",
        k.kernel, range, k.speed(true, 128), k.speed(false, 128)));
  }
  return fmt::format("{}; elsewhere FlashAttention-2", fmt::join(parts, "; "));
}

// What per-op recomputation saves (FrameworkSpec::op_recompute), as the file names it.
Json op_recompute_json(const std::optional<OpRecompute>& o) {
  if (!o) return nullptr;
  return {{"saves", saved_op_names(*o)},
          {"every_second_matmul", o->every_second_matmul},
          {"quantized_linears", o->quantized_linears_as_matmuls ? "matmul" : "scaled_mm"},
          {"recomputed_linears", o->recomputed_linears}};
}

Json framework_json(const FrameworkSpec& f) {
  Json host = Json::object();
  for (const auto& [mode, s] : f.host_s_per_kernel) host[std::string(to_string(mode))] = s;
  std::vector<std::string> ops, compiled;
  for (const auto& [family, recipe] : f.ops) ops.push_back(family);
  for (const auto& [family, recipe] : f.compiled_ops) compiled.push_back(family);
  return {{"name", f.name},
          {"description", f.description},
          {"version", f.version},
          {"origin", f.origin},
          {"export", export_name(f)},
          {"can_run", capabilities_json(f.can_run)},
          {"eager_op_families", ops},
          {"compiled_op_families", compiled},
          {"host_s_per_kernel", host},
          {"expert_gemms", expert_gemms_json(f.expert_gemms)},
          {"attention_kernels", attention_kernels_json(f.attention_kernels)},
          {"op_recompute", op_recompute_json(f.op_recompute)},
          {"memory_reported_peak", to_string(f.memory.reported_peak)},
          {"memory_gathered_with_pipeline", f.memory.gathered_with_pipeline},
          {"compiled_parts", f.compiled_parts},
          {"graphed_parts", f.graphed_parts},
          {"cuda_graphs",
           {{"pipeline", f.can_run.cuda_graphs_pipeline},
            {"expert_parallel", f.can_run.cuda_graphs_expert_parallel}}},
          {"default_host_mode", to_string(f.defaults.host_mode)},
          {"sources", f.sources}};
}

// The default host mode, what its CUDA graphs capture and refuse, and the modes whose steps free
// the gradients.
void print_host_defaults(const FrameworkSpec& f) {
  const Capabilities& c = f.can_run;
  std::string graphs;
  if (std::find(c.host_modes.begin(), c.host_modes.end(), HostMode::kCudaGraphs) !=
      c.host_modes.end()) {
    graphs = f.graphed_parts.empty()
                 ? "; CUDA graphs capture the whole step"
                 : fmt::format("; CUDA graphs capture: {}", fmt::join(f.graphed_parts, ", "));
    if (!c.cuda_graphs_pipeline) graphs += ", not with a pipeline";
    if (!c.cuda_graphs_expert_parallel) graphs += ", not with expert parallelism";
  }
  fmt::print("  default host mode: {}{}\n", to_string(f.defaults.host_mode), graphs);
  if (!f.memory.gradients_freed_after_step.empty())
    fmt::print("  gradients freed after each step under: {}\n",
               fmt::join(host_mode_names(f.memory.gradients_freed_after_step), ", "));
}

void print_framework(const FrameworkSpec& f) {
  fmt::print("{}: {}\n  version: {}\n  export: {}\n", f.name, f.description, f.version,
             export_name(f));
  const Capabilities& c = f.can_run;
  fmt::print("  schedules: {}{}\n  recompute: {}\n  ZeRO: {} (with a pipeline: {})\n",
             fmt::join(c.schedules, ", "),
             c.pipeline_runtime == "pytorch" ? " (torch.distributed.pipelining's)" : "",
             fmt::join(c.recompute, ", "), fmt::join(c.zero, ", "),
             fmt::join(c.zero_with_pipeline, ", "));
  fmt::print("  attention: {}  host modes: {}{}\n", fmt::join(c.attention, ", "),
             fmt::join(host_mode_names(c.host_modes), ", "),
             f.compiled_parts.empty()
                 ? ""
                 : fmt::format(" (torch.compile covers: {})", fmt::join(f.compiled_parts, ", ")));
  fmt::print("  context parallel: {}  expert parallel: {}{}  precisions: {}  LoRA: {}\n",
             c.context_parallel.empty() ? std::string("no")
                                        : fmt::format("{}", fmt::join(c.context_parallel, ", ")),
             c.expert_parallel ? "yes" : "no",
             c.expert_tensor_parallel ? " (with its own tensor width)" : "",
             fmt::join(c.precisions, ", "), c.lora ? "yes" : "no");
  const ExpertGemms& e = f.expert_gemms;
  const std::string experts = e.kernels == ExpertGemmKernels::kGrouped
                                  ? std::string("one grouped kernel")
                                  : fmt::format("one GEMM per local expert over {} stream{}",
                                                e.streams, e.streams == 1 ? "" : "s");
  fmt::print("  experts' GEMMs: {}\n", experts);
  fmt::print("  fused attention: {}\n", attention_kernels_text(f.attention_kernels));
  if (f.op_recompute)
    fmt::print("  per-op recomputation keeps: {}{}\n",
               fmt::join(saved_op_names(*f.op_recompute), ", "),
               f.op_recompute->every_second_matmul ? " (every second matmul re-run)" : "");
  if (f.memory.gathered_with_pipeline)
    fmt::print("  ZeRO-3 with a pipeline: weights stay gathered through the step\n");
  print_host_defaults(f);
  for (const auto& [key, source] : f.sources) fmt::print("  source of {}: {}\n", key, source);
}

}  // namespace

CommandRunner declare_frameworks(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto name = std::make_shared<std::string>();
  app.add_option("name", *name, "A framework preset or file to show in full (default: list them)");
  app.add_flag("--json", *json, "Print JSON instead of a table");
  return [json, name]() {
    if (!name->empty()) {
      const FrameworkSpec f = load_framework(*name);
      if (*json)
        fmt::print("{}\n", framework_json(f).dump(2));
      else
        print_framework(f);
      return 0;
    }
    Json out = Json::array();
    if (!*json) fmt::print("{:<18} {:<15}  {}\n", "name", "export", "description");
    for (const auto& [preset, description] : framework_presets()) {
      const FrameworkSpec f = load_framework(preset);
      if (*json) {
        out.push_back(framework_json(f));
        continue;
      }
      fmt::print("{:<18} {:<15}  {}\n", f.name, export_name(f), f.description);
    }
    if (*json) fmt::print("{}\n", out.dump(2));
    return 0;
  };
}

}  // namespace hetplan::cli
