// A training strategy (the JSON contract of docs/cli.md) and its predicted performance.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "costmodel/document.h"
#include "costmodel/framework.h"
#include "costmodel/layer_ops.h"
#include "costmodel/memory.h"

namespace hetplan {

// The largest values the strategy keys take (a strategy file, and search's --global-batch,
// --micro-batches and --tensor-widths). Past them the products hetplan forms (dp x tp x pp devices,
// dp x micro_batch samples per step) and the pipeline model's 32-bit counts of micro-batches and
// chunks would overflow; a larger value was read as another, e.g. global_batch 2^62 as no
// micro-batch at all.
// dp, tp, pp, chunks: 2^20, eight times the GPUs of the largest cluster issue 37 plans for
// (131,072).
inline constexpr int64_t kMaxParallelDegree = int64_t{1} << 20;
// micro_batch, global_batch (samples): 2^20, 16 times the largest batch of a published
// transformer run we know of (65,536 sequences: BERT with LAMB, You et al., ICLR 2020).
inline constexpr int64_t kMaxBatchSamples = int64_t{1} << 20;
// LoRA's rank: 2^16, far above the ranks LoRA is run at (Hu et al. 2021 use 1-64; Megatron-Bridge
// defaults to 32) and below any model's width that hetplan holds.
inline constexpr int64_t kMaxLoraRank = int64_t{1} << 16;

// One group of a stage's data-parallel replicas (issue 38, as Sailor, Metis and Cephalo plan
// them): replicas on one GPU type at their own tensor width and micro-batch, taking `samples` of
// the global batch each step. Group g of every stage forms pipeline g (search/replicas.h).
struct ReplicaGroup {
  std::string gpu_type;
  std::vector<int64_t> devices;  // replicas x tp global device indices, tp fastest
  int64_t tp = 1, micro_batch = 1;
  int64_t samples = 0;  // of the global batch, per step, over all the group's replicas
  int64_t replicas() const { return tp > 0 ? static_cast<int64_t>(devices.size()) / tp : 0; }
  // Micro-batches the busiest replica runs per step: the group's samples / micro_batch spread
  // over its replicas, some running one more (0 when the samples are not whole micro-batches, at
  // least one per replica).
  int64_t microbatches() const;
};

// A pipeline stage: the layers it holds (inclusive, model order) and where it runs.
struct StageSpec {
  int64_t first_layer = -1, last_layer = -1;  // -1: chosen by the layer partition
  std::string gpu_type;
  std::vector<int64_t> devices;  // global device indices, dp x cp x tp of them (tp fastest)
  // Replica groups in place of gpu_type and devices (then the strategy's tp and micro_batch are
  // the first group's); empty: one group at the strategy's tp and micro_batch, as before.
  std::vector<ReplicaGroup> replicas;
};

// The switches a strategy file set itself (Strategy::given); the others take the framework's
// defaults (search/rules.h, with_framework_defaults).
enum GivenSwitch : uint32_t {
  kGivenFlashAttention = 1,
  kGivenGradAccumulationFusion = 2,
  kGivenOverlapGradReduce = 4,
  kGivenTpCommOverlap = 8,
  kGivenHostMode = 16,
  kGivenFp32GradReduce = 32,
  kGivenLowPrecisionParams = 64,
  kGivenEpCommOverlap = 128,
};

struct Strategy {
  int64_t dp = 1, tp = 1, pp = 1;
  // Context parallelism: each sequence split over cp ranks (world size dp x cp x tp x pp, as
  // Megatron-Core counts it; each pipeline rank's devices are tp fastest, then cp, then dp).
  int64_t cp = 1;
  CpComm cp_comm = CpComm::kP2p;  // Megatron-Core's --cp-comm-type
  int64_t cp_a2a = 2;             // a2a+p2p: ranks of each all-to-all group
  // Expert parallelism: the MoE layers' routed experts over ep ranks at expert tensor width etp
  // (0: tp), carved out of the dp x cp x tp ranks of a pipeline rank (etp fastest, then ep, then
  // the expert data-parallel replicas: Megatron-Core's expert layout).
  int64_t ep = 1, etp = 0;
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  // The busiest expert's tokens over the mean (costmodel/layer_ops.h, LayerShape::moe_imbalance).
  double moe_imbalance = 1;
  // The experts' all-to-alls hidden behind another micro-batch's compute where they can be
  // (Megatron-Core's --overlap-moe-expert-parallel-comm).
  bool ep_comm_overlap = false;
  // The linear layers' low-precision recipe (costmodel/precision.h).
  Precision precision = Precision::kBf16;
  // Under a recipe other than bf16: the quantised layers' weights are held only in it (no bf16
  // copy), as Megatron-LM's --fp8-param-gather / --fp4-param-gather keep them.
  bool low_precision_params = false;
  int64_t micro_batch = 1, global_batch = 1;
  std::string schedule = "1f1b";
  Recompute recompute = Recompute::kNone;
  // Under selective: the modules re-run (Megatron-Core's --recompute-modules); kDefault: its
  // default, core_attn.
  OpGroup recompute_modules = OpGroup::kDefault;
  // Under full: the first N transformer blocks of each (virtual) stage recompute, the others keep
  // their activations (Megatron-Core's --recompute-method block --recompute-num-layers N); 0:
  // every block.
  int64_t recompute_num_layers = 0;
  int zero = 0;
  bool sequence_parallel = false;
  int64_t chunks = 1;  // model chunks per device (interleaved and V schedules)
  bool flash_attention = true;
  // Weight-gradient GEMMs accumulate into the fp32 main gradients (Megatron-LM's default with
  // Transformer Engine or APEX); false: an add kernel per parameter and micro-batch (plain
  // PyTorch).
  bool grad_accumulation_fusion = true;
  // Data-parallel gradients are reduced in buckets while the last micro-batch's backward still
  // runs (PyTorch DDP and FSDP, DeepSpeed ZeRO's overlap_comm, Megatron-LM --overlap-grad-reduce);
  // false: after the backward has finished (Megatron-LM's default, DeepSpeed at ZeRO 0).
  bool overlap_grad_reduce = true;
  // Tensor-parallel collectives overlapped with the GEMMs around them (Megatron-Core's
  // --tp-comm-overlap through Transformer Engine's userbuffers; needs sequence parallelism).
  bool tp_comm_overlap = false;
  // Data-parallel gradients reduced in fp32 (Megatron-LM's main gradients, --fp32-allreduce),
  // else in the training dtype (DeepSpeed's fp16 default, --grad-reduce-in-bf16).
  bool fp32_grad_reduce = true;
  // How the host issues the kernels: eager, torch.compile, CUDA graphs (the host floor).
  HostMode host_mode = HostMode::kEager;
  // LoRA fine-tuning: the model's weights frozen, low-rank adapters beside the targeted linear
  // layers train (costmodel/layer_ops.h); rank 0: every parameter trains.
  Lora lora;
  // The framework it runs under (a preset name or a framework file; "" where not recorded).
  std::string framework;
  uint32_t given = 0;             // GivenSwitch bits of the switches the strategy set itself
  std::vector<StageSpec> stages;  // empty: the default placement and a balanced partition

  // Some stage lists replica groups (search/replicas.h: the rules and the cost's other path).
  bool has_replicas() const {
    for (const auto& st : stages)
      if (!st.replicas.empty()) return true;
    return false;
  }
  // Devices it uses: every replica group's where it has them.
  int64_t devices() const {
    int64_t n = 0;
    for (const auto& st : stages)
      for (const auto& r : st.replicas) n += static_cast<int64_t>(r.devices.size());
    return n > 0 ? n : dp * cp * tp * pp;
  }
  // Devices of one pipeline rank: dp x cp x tp.
  int64_t rank_devices() const { return dp * cp * tp; }
  // Ranks the dense parameters' gradients are reduced over (and ZeRO shards them over): dp x cp.
  int64_t grad_replicas() const { return dp * cp; }
  int64_t expert_tp() const { return etp > 0 ? etp : tp; }
  // "none", "full", "selective", or with modules other than the default
  // "selective(mla_up_proj,mlp)".
  std::string recompute_label() const;
  // The recomputation as the cost model takes it (selective without modules: core_attn).
  Recomputation recomputation() const {
    return recompute_modules == OpGroup::kDefault ? Recomputation(recompute)
                                                  : Recomputation(recompute, recompute_modules);
  }
  // Ranks the routed experts' gradients are reduced over: dp x cp x tp / (ep x etp).
  int64_t expert_dp() const { return rank_devices() / (ep * expert_tp()); }
  // Micro-batches per iteration on each pipeline (0 when the global batch does not divide).
  int64_t microbatches() const;
  // Model chunks per device the schedule runs: 1 for one-chunk schedules, else `chunks`, or the
  // schedule's default where `chunks` is 1.
  int64_t chunks_per_device() const;
  // The pipeline rank (device group) of virtual stage j: j for one chunk, j mod pp for
  // interleaved, the V's turn (j < pp ? j : 2pp - 1 - j) for the V schedules.
  int64_t rank_of_virtual_stage(int64_t j) const;
  // The pipeline rank of listed stage i: `stages` holds one per rank or one per virtual stage.
  int64_t rank_of_stage(size_t i) const;
};

// What is wrong with the stages' devices as far as the strategy alone can tell (the cluster's size
// and GPU types are checked where the cluster is known): a stage that lists devices lists dp x tp
// of them, the chunks of one pipeline rank list the same ones, and no device serves two ranks or
// appears twice in one. "" when nothing is, else the problem, with the stage's index in `stage`.
std::string stage_devices_problem(const Strategy& s, size_t& stage);

// The framework switches that differ from hetplan's defaults, each as a word after a space
// (" unfused-attention", " unfused-grad-add", " serial-grad-reduce", " tp-comm-overlap",
// " compiled", " cuda-graphs"), the recipe and LoRA (" fp8-current", " lora-32(linear_qkv)"),
// or "" when none does: what predict prints and the report's matching key ends with.
std::string framework_switches(const Strategy& s);

Json to_json(const Strategy& s);
// Reads a strategy object (the whole file, or an element of "strategies").
Strategy strategy_from_json(ObjectReader r);
// Reads a strategy file: a strategy object, or {"strategies": [...]} (the first one is taken
// unless `index` says otherwise).
Strategy load_strategy(const std::string& path, size_t index = 0);

// Per-stage detail of a prediction.
struct StagePrediction {
  StageSpec stage;
  double forward_s = 0, backward_input_s = 0, backward_weight_s = 0;  // one micro-batch
  double tp_comm_s = 0;                                               // inside those three
  double cp_comm_s = 0;    // context parallelism's exchange, where the attention does not hide it
  double ep_comm_s = 0;    // the experts' dispatch and combine (expert and expert-tensor groups)
  double recompute_s = 0;  // inside backward_input_s
  double host_sync_s = 0;  // inside forward_s: waiting for the host after its syncs
  double p2p_s = 0;        // one activation to the next stage
  double dp_sync_s = 0;    // gradient synchronisation (total, before overlap)
  double optimizer_s = 0;
  int64_t in_flight = 0;  // micro-batch activations held at the peak
  MemoryBreakdown memory;
};

// Per replica group of a strategy with replicas (search/replicas.h): what the group runs. Its
// gradient synchronisation is the stage's, in slices (docs/costmodel.md, "Replica groups").
struct GroupPrediction {
  int64_t stage = 0, group = 0;  // group g of every stage is pipeline g
  ReplicaGroup spec;
  int64_t microbatches = 0;                                           // per replica and step
  double forward_s = 0, backward_input_s = 0, backward_weight_s = 0;  // one micro-batch
  double p2p_s = 0;         // one activation to group g of the next stage
  double pipeline_s = 0;    // pipeline g's makespan (its micro-batches through every stage)
  int64_t sync_slices = 1;  // the stage's gradients are all-reduced in slices of its widest tp
  int64_t sync_rounds = 1;  // slice all-reduces each device of this group joins, one after another
  double sync_s = 0;        // the stage's whole reduction over every replica of its groups
  double optimizer_s = 0;
  int64_t in_flight = 0;  // micro-batch activations held at the peak
  MemoryBreakdown memory;
};

// What makes a strategy infeasible: a rule it breaks (search/rules.h, with the rule's code), a
// placement the cluster cannot hold, a schedule that cannot be built, a pipeline rank over its
// device's memory (the prediction is complete otherwise), or no layer partition that fits (the
// search's fast path stops there, with how far off the average device is).
enum class Infeasible { kNone, kRule, kPlacement, kSchedule, kMemory, kNoPartition };

// The parts of Prediction::breakdown in the order the evaluator reports them
// (search/eval/summarise.cpp) and the printed breakdown lists them (a JSON object keeps no order).
inline constexpr std::array<std::string_view, 10> kBreakdownParts = {
    "compute",   "tp_comm", "cp_comm",   "ep_comm",   "pp_p2p",
    "pp_bubble", "dp_sync", "optimizer", "host_sync", "host_wait"};

struct Prediction {
  bool feasible = true;
  std::string reason;  // why not, when infeasible
  Infeasible kind = Infeasible::kNone;
  std::string rule;     // kRule: the broken rule's code ("batch", "tp", "zero", ...)
  double overflow = 0;  // kNoPartition: bytes needed over bytes available, the average device
  // The short key a search counts and the JSON's reason_code: the rule's code, "placement",
  // "schedule" or "memory" (both memory kinds); "" when feasible.
  std::string reason_code() const;
  bool out_of_memory() const {
    return kind == Infeasible::kMemory || kind == Infeasible::kNoPartition;
  }
  double iteration_s = 0, samples_per_s = 0, tokens_per_s = 0, mfu = 0;
  std::vector<double> peak_memory_bytes;  // per pipeline rank (every device of a rank alike)
  // Named seconds summing to iteration_s, in the order of kBreakdownParts.
  std::vector<std::pair<std::string, double>> breakdown;
  double bubble_rate = 0;
  // The host floor (search/evaluate.cpp): the most kernels one device's host issues per iteration,
  // and the time it takes them at the profile's host_s_per_kernel (0 when not measured).
  double kernels_per_iteration = 0;
  double host_s = 0;
  std::vector<StagePrediction> stages;  // per virtual stage, in model order
  std::vector<GroupPrediction> groups;  // per stage and replica group (strategies with replicas)
  std::vector<std::string> notes;       // e.g. "bf16 runs as fp16 on v100"
};

Json to_json(const Prediction& p);
// An infeasible prediction of `kind` (kRule with the rule's code) and its reason.
Prediction infeasible(Infeasible kind, std::string reason, std::string rule = "");
// The kind a JSON reason_code names (a rule's code is kRule, with the code as `rule`).
Infeasible infeasible_kind(const std::string& reason_code, std::string& rule);

}  // namespace hetplan
