// Exports of a strategy to the frameworks people train with: Megatron-LM command-line arguments,
// a DeepSpeed config and a torchtitan config (Python, or the TOML of older releases). What a
// framework cannot express is said, never silently dropped: `approximations` were written as the
// nearest setting, `unsupported` could not be written at all. See docs/exports.md for the flag
// mapping.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "costmodel/hardware.h"
#include "costmodel/model.h"
#include "report/stage_layout.h"
#include "search/strategy.h"

namespace hetplan {

struct ExportResult {
  std::string text;                         // the file
  std::vector<std::string> approximations;  // written, but not exactly what hetplan modelled
  std::vector<std::string> unsupported;     // could not be written
  std::vector<std::string> placement;       // which ranks must run on which nodes and GPUs
  // What the user must do for the framework to run the file as exported (e.g. the arguments to
  // pass to DeepSpeed's PipelineModule, the environment Megatron-LM checks).
  std::vector<std::string> instructions;
};

struct ExportOptions {
  // torchtitan: write the TOML job config of releases before the February 2026 configuration
  // refactor instead of the Python Trainer.Config current torchtitan reads.
  bool torchtitan_toml = false;
  // torchtitan: write pipeline_parallel_split_points (TOML releases before
  // module_fqns_per_model_part) instead of module_fqns_per_model_part; implies the TOML.
  bool torchtitan_split_points = false;
  // The cluster the plan was made for: names the node of every device in the placement. nullptr:
  // devices are named by their hetplan index and GPU type only.
  const ClusterSpec* cluster = nullptr;
  // Megatron-LM: the framework runs Transformer Engine's fused cross-entropy (its ops give the
  // loss a kernel of its own): --cross-entropy-loss-fusion --cross-entropy-fusion-impl te.
  bool fused_cross_entropy = false;
};

struct ExporterSpec {
  std::string_view format;  // "megatron", "deepspeed", "torchtitan", "sailor"
  std::string_view writes;  // one line for --help
  ExportResult (*run)(const ModelSpec& model, const Strategy& s, const ExportOptions& options);
  // Whether the framework it writes for runs a stage's replicas at their own tensor widths (replica
  // groups, issue 38): only Sailor's fork of Megatron-DeepSpeed does.
  bool replica_groups = false;
};

const std::vector<ExporterSpec>& exporters();
// Throws InputError listing the known formats.
const ExporterSpec& find_exporter(std::string_view format);

ExportResult export_megatron(const ModelSpec& model, const Strategy& s, const ExportOptions& o);
ExportResult export_deepspeed(const ModelSpec& model, const Strategy& s, const ExportOptions& o);
// The Python Trainer.Config module, or (options.torchtitan_toml or torchtitan_split_points) the
// TOML job config of older releases.
ExportResult export_torchtitan(const ModelSpec& model, const Strategy& s, const ExportOptions& o);
// Sailor's dist_config.json and the run_from_file.sh arguments of each replica's launch.
ExportResult export_sailor(const ModelSpec& model, const Strategy& s, const ExportOptions& o);
ExportResult export_torchtitan_toml(const ModelSpec& model, const Strategy& s,
                                    const ExportOptions& o);

// Pieces shared by the exporters.
namespace export_detail {

// The first transformer block; adds to `out.unsupported` when the model is not
// [embedding, identical blocks, head].
const LayerSpec* uniform_block(const ModelSpec& model, ExportResult& out);

// The pipeline's (virtual) stages in layer order, pp x chunks of them: the strategy's ranges (one
// per virtual stage, as predict and search write them), or, when the strategy has none and
// chunks > 1, blocks split as evenly as possible with the first ones one block larger. Empty when
// pp = 1, or when the strategy leaves the one-chunk partition to hetplan (`*from_strategy` is
// true only for the strategy's own ranges).
std::vector<StageBlocks> pipeline_segments(const ModelSpec& model, const Strategy& s,
                                           ExportResult& out, bool* from_strategy = nullptr);

// Where each framework rank runs. Megatron-LM (order tp-cp-ep-dp-pp), torchtitan (device mesh
// [pp, dp_replicate, dp_shard, cp, tp]) and DeepSpeed (PipeModelDataParallelTopology [pipe, data,
// model]) all number ranks tensor-parallel fastest, then data-parallel, then pipeline rank; hetplan
// lists a pipeline rank's devices dp x tp with tp fastest, so rank = pipeline rank x dp x tp + i.
struct RankPlacement {
  struct Rank {
    int64_t device = 0;           // hetplan device index (cluster order)
    int64_t node = -1, gpu = -1;  // cluster node and GPU inside it; -1 without a cluster
    std::string kind, gpu_type;   // node preset ("" without a cluster) and GPU type
  };
  struct Node {
    int64_t node = 0;  // cluster node index
    std::string kind, gpu_type;
    int64_t first_rank = 0;
    std::vector<int64_t> gpus;  // local GPU of rank first_rank + i
  };
  std::vector<Rank> ranks;     // per framework rank; empty: the strategy names no devices
  bool default_order = false;  // rank r on device r, as launchers start them by default
  bool homogeneous = true;     // one node kind (or no cluster known)
  int64_t cluster_nodes = 0;   // nodes in the cluster (0 without one)
  // Launch order (torchrun --node-rank, DeepSpeed hostfile order). Empty without a cluster, or when
  // the ranks of some node are not one contiguous block (no node order gives the placement then).
  std::vector<Node> nodes;
};
RankPlacement rank_placement(const Strategy& s, const ClusterSpec* cluster);

enum class Launcher { kTorchrun, kDeepSpeed };
// The placement as text lines (no comment marker): a line per node and how to start them with
// `launcher`. Empty when the strategy names no devices.
std::vector<std::string> placement_lines(const Strategy& s, const RankPlacement& p,
                                         std::string_view framework, Launcher launcher);
// The --node-rank of each cluster node (index: node, -1: unused); empty without a launch order.
std::vector<int64_t> node_ranks(const RankPlacement& p);
// The hetplan device of each rank (index: rank).
std::vector<int64_t> rank_devices(const RankPlacement& p);

// "dp 2 x tp 2 x pp 2 = 8 GPUs, micro-batch 4, global batch 64, 1f1b, recompute selective"
std::string strategy_summary(const Strategy& s);

// The LoRA's targets as Python strings: "\"linear_qkv\", \"linear_proj\"".
std::string lora_targets_text(const Lora& lora);
// A strategy's LoRA, which none of the exported files carries: `unsupported` says so with `why`.
void lora_notes(const Strategy& s, std::string_view why, ExportResult& out);
// A strategy whose host mode is not eager, for a runtime (`engine`, e.g. "DeepSpeed's training
// engine") that issues its kernels eagerly: `approximations` says so.
void eager_engine_notes(const Strategy& s, std::string_view engine, ExportResult& out);

}  // namespace export_detail
}  // namespace hetplan
