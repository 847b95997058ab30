// hetplan search: ranked training strategies for a model on a cluster.
#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/lora_options.h"
#include "cli/progress_line.h"
#include "cli/validators.h"
#include "costmodel/cost_model.h"
#include "costmodel/errors.h"
#include "costmodel/model.h"
#include "report/run_documents.h"
#include "report/run_text.h"
#include "search/pipeline/schedule.h"
#include "search/replica_search.h"
#include "search/search.h"

namespace hetplan::cli {
namespace {

struct SearchCliOptions {
  std::string model, cluster, json, framework, host_mode;
  std::vector<std::string> calibration, schedules, recompute, precisions;
  std::vector<int64_t> micro_batches, tensor_widths, context_widths, expert_widths;
  std::vector<int64_t> expert_tensor_widths;
  int64_t global_batch = 0, seq_len = 0, top = 10;
  double time_limit_s = 0;
  int threads = 1;
  int max_zero = 3;
  bool exhaustive = false, no_default_calibration = false, quiet = false;
  bool allow_idle_nodes = false;
  bool mixed_replicas = false, even_replica_shares = false;
  bool no_grad_accumulation_fusion = false;
  bool no_overlap_grad_reduce = false;
  bool no_sequence_parallel = false;
  bool no_flash_attention = false;
  bool tp_comm_overlap = false;
  bool half_grad_reduce = false;
  LoraCliOptions lora;
};

}  // namespace

CommandRunner declare_search(CLI::App& app) {
  auto o = std::make_shared<SearchCliOptions>();
  app.add_option("--model", o->model, "Model preset, model file or Hugging Face config.json")
      ->required();
  app.add_option("--cluster", o->cluster, "Cluster preset, cluster file, or NODE:COUNT,...")
      ->required();
  app.add_option("--global-batch", o->global_batch, "Samples per iteration")
      ->required()
      ->check(kPositive);
  app.add_option("--seq-len", o->seq_len, "Sequence length (default: the model's)")
      ->check(kPositive);
  app.add_option("--calibration", o->calibration,
                 "Calibration files, profiles or directories (repeatable)");
  app.add_flag("--no-default-calibration", o->no_default_calibration,
               "Do not load the shipped calibration_data/");
  app.add_option("--top", o->top, "How many strategies to keep (default 10)")->check(kPositive);
  app.add_option("--json", o->json, "Write the result as JSON to FILE ('-' for stdout)");
  app.add_option("--threads", o->threads, "Worker threads (the result does not depend on it)")
      ->check(kThreadCount);
  app.add_option("--framework", o->framework, kFrameworkHelp);
  app.add_option("--schedules", o->schedules,
                 "Pipeline schedules to consider (default: all the framework runs)")
      ->delimiter(',');
  app.add_option("--recompute", o->recompute,
                 "Recomputation modes to consider: none, selective, full, op (default: all "
                 "the framework runs)")
      ->delimiter(',')
      ->check(CLI::IsMember({"none", "selective", "full", "op"}));
  app.add_flag("--no-sequence-parallel", o->no_sequence_parallel,
               "Tensor parallelism without sequence parallelism only (frameworks that lack it)");
  app.add_option("--micro-batches", o->micro_batches,
                 "Micro-batch sizes to consider (default: divisors of the batch up to 64)")
      ->delimiter(',')
      ->check(kPositive);
  app.add_option("--tensor-widths", o->tensor_widths,
                 "Tensor-parallel widths to consider (default: powers of two up to 2 nodes)")
      ->delimiter(',')
      ->check(kPositive);
  app.add_option("--context-widths", o->context_widths,
                 "Context-parallel widths to consider (default: powers of two keeping 4096 "
                 "tokens per rank, where the framework runs CP)")
      ->delimiter(',')
      ->check(kPositive);
  app.add_option("--expert-widths", o->expert_widths,
                 "Expert-parallel widths to consider (default for MoE models: powers of two "
                 "dividing the experts, up to 64)")
      ->delimiter(',')
      ->check(kPositive);
  app.add_option("--expert-tensor-widths", o->expert_tensor_widths,
                 "Expert tensor widths to consider besides tp (default: 1, where the framework "
                 "runs it)")
      ->delimiter(',')
      ->check(kPositive);
  app.add_option("--precision", o->precisions,
                 "Low-precision recipes to consider: bf16, fp8-delayed, fp8-current, "
                 "fp8-blockwise, mxfp8, nvfp4 (default: bf16)")
      ->delimiter(',')
      ->check(
          CLI::IsMember({"bf16", "fp8-delayed", "fp8-current", "fp8-blockwise", "mxfp8", "nvfp4"}));
  app.add_option("--max-zero", o->max_zero, "Highest ZeRO stage to consider (0-3, default 3)")
      ->check(CLI::Range(0, 3));
  app.add_flag("--exhaustive", o->exhaustive, "Cost every valid candidate (no bound pruning)");
  app.add_flag("--allow-idle-nodes", o->allow_idle_nodes,
               "Also plans that leave whole node groups idle (every subset of the groups)");
  app.add_flag(
      "--no-grad-accumulation-fusion", o->no_grad_accumulation_fusion,
      "Gradients added into the fp32 main gradients by a kernel per parameter and "
      "micro-batch (plain PyTorch), not by the weight-gradient GEMMs (Megatron-LM's default)");
  app.add_flag("--no-overlap-grad-reduce", o->no_overlap_grad_reduce,
               "Data-parallel gradients reduced after the backward has finished (Megatron-LM's "
               "default without --overlap-grad-reduce, DeepSpeed at ZeRO 0), not in buckets "
               "during it (PyTorch DDP and FSDP)");
  app.add_flag("--no-flash-attention", o->no_flash_attention,
               "Unfused attention (two batched GEMMs around a softmax, its s x s probabilities "
               "kept), as frameworks without a fused attention kernel run it");
  app.add_flag("--tp-comm-overlap", o->tp_comm_overlap,
               "Overlap tensor-parallel collectives with the GEMMs (Megatron-Core's "
               "--tp-comm-overlap) wherever sequence parallelism runs");
  app.add_flag("--half-grad-reduce", o->half_grad_reduce,
               "Reduce data-parallel gradients in the training dtype, not fp32");
  app.add_option("--host-mode", o->host_mode,
                 "How the host issues kernels: eager, compiled or cuda-graphs (default: the "
                 "framework's)")
      ->check(CLI::IsMember({"eager", "compiled", "cuda-graphs"}));
  app.add_option("--time-limit", o->time_limit_s,
                 "Seconds the search may take (default: none); then the best found so far")
      ->check(kNonNegative);
  app.add_flag("--mixed-replicas", o->mixed_replicas,
               "Also search plans whose stages hold replica groups of several GPU types, each "
               "at its own tp and micro-batch, the batch split by speed; report the gain over "
               "the best uniform plan");
  app.add_flag("--even-replica-shares", o->even_replica_shares,
               "With --mixed-replicas: every replica takes the same samples at one micro-batch, "
               "as Sailor's framework runs them (export --format sailor)")
      ->needs("--mixed-replicas");
  add_lora_options(app, o->lora);
  app.add_flag("--quiet", o->quiet, "No progress on stderr (shown only on a terminal)");
  return [o]() {
    std::vector<std::string> inputs = {o->model, o->cluster};
    inputs.insert(inputs.end(), o->calibration.begin(), o->calibration.end());
    check_outputs(inputs, {{"--json", o->json}});
    const ModelSpec model = load_model(o->model, o->seq_len);
    const ClusterSpec cluster = load_cluster(o->cluster);
    for (const auto& s : o->schedules) pipeline::schedule_info(s);  // InputError names the known
    const Profile profile = load_run_profile(o->calibration, cluster, o->no_default_calibration);
    const CostModel cost(profile, cluster);
    const FrameworkSpec framework = load_run_framework(o->framework);
    const Evaluator evaluator(model, cluster, cost, framework);
    SearchOptions opts;
    opts.global_batch = o->global_batch;
    opts.threads = o->threads;
    opts.top_k = o->top;
    opts.exhaustive = o->exhaustive;
    opts.allow_idle_nodes = o->allow_idle_nodes;
    // The --no-* switches override the framework's defaults where given.
    if (o->no_grad_accumulation_fusion) opts.grad_accumulation_fusion = false;
    if (o->no_overlap_grad_reduce) opts.overlap_grad_reduce = false;
    if (o->no_flash_attention) opts.flash_attention = false;
    if (o->tp_comm_overlap) opts.tp_comm_overlap = true;
    if (o->half_grad_reduce) opts.fp32_grad_reduce = false;
    if (!o->host_mode.empty()) {
      HostMode mode;
      parse_host_mode(o->host_mode, mode);  // checked by the option's IsMember
      opts.host_mode = mode;
    }
    opts.sequence_parallel = !o->no_sequence_parallel;
    if (!o->recompute.empty()) {
      opts.recompute.clear();
      for (const auto& name : o->recompute) {
        Recompute rc;
        parse_recompute(name, rc);  // checked by the option's IsMember
        if (std::find(opts.recompute.begin(), opts.recompute.end(), rc) == opts.recompute.end())
          opts.recompute.push_back(rc);
      }
    }
    opts.schedules = o->schedules;
    opts.micro_batches = o->micro_batches;
    opts.tensor_widths = o->tensor_widths;
    opts.context_widths = o->context_widths;
    opts.expert_widths = o->expert_widths;
    opts.expert_tensor_widths = o->expert_tensor_widths;
    for (const auto& name : o->precisions) {
      Precision p;
      parse_precision(name, p);
      opts.precisions.push_back(p);
    }
    opts.max_zero = o->max_zero;
    opts.lora = lora_of(o->lora);
    opts.time_limit_s = o->time_limit_s;
    ProgressLine progress(!o->quiet);
    const auto started = std::chrono::steady_clock::now();
    if (progress.active())
      opts.progress = [&](int64_t done, int64_t total, double best, bool enumerating) {
        const double spent_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        const double limit_left_s =
            o->time_limit_s > 0 ? std::max(0.0, o->time_limit_s - spent_s) : -1;
        progress.update(done, total,
                        enumerating ? "shapes enumerated"
                                    : fmt::format("candidates costed, best {}",
                                                  best > 0 ? format_seconds(best) : "-"),
                        limit_left_s);
      };
    const SearchResult r = search_training(evaluator, opts);
    progress.finish();
    const RunDocumentInputs in{
        run_context("search", profile), o->model, o->cluster, model, cluster, framework};
    Json document = search_document(in, o->global_batch, r);
    if (o->mixed_replicas)
      document["mixed_replicas"] =
          mixed_replicas_json(evaluator, o->global_batch, r, o->even_replica_shares);
    if (o->json != "-") {
      fmt::print(
          "{} ({:.2f}B parameters, sequence {}, global batch {}) on {} ({} GPUs) under {}{}\n",
          model.name, model.parameters() / 1e9, model.seq_len, o->global_batch, cluster.name,
          cluster.num_gpus(), framework.name, lora_label(opts.lora));
      fmt::print("{}", search_table_text(document));
      if (!r.top.empty()) {
        const Strategy& bs = r.top.front().strategy;
        if (bs.devices() < cluster.num_gpus())
          fmt::print("note: the best plan uses {} of the {} GPUs; {}\n", bs.devices(),
                     cluster.num_gpus(), idle_groups_text(cluster, bs));
      }
      fmt::print("{}", search_counts_text(document));
      fmt::print("{}", mixed_replicas_text(document));
    }
    if (!o->json.empty()) write_json_output(document, o->json);
    return 0;
  };
}

}  // namespace hetplan::cli
