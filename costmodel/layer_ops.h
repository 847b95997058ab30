// The work of one layer on one tensor-parallel rank: GEMMs, memory-bound kernels, attention and
// tensor-parallel collectives per pass, parameters, FLOPs, and the activation bytes it keeps for
// backward under each recomputation mode. Megatron-LM's layout of tensor and sequence parallelism.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "costmodel/attention_model.h"
#include "costmodel/calibration.h"
#include "costmodel/framework.h"
#include "costmodel/model.h"
#include "costmodel/precision.h"

namespace hetplan {

// F = forward, B = input gradient, W = weight gradient (split as zero-bubble schedules do).
enum class Pass { kForward = 0, kBackwardInput = 1, kBackwardWeight = 2 };
inline constexpr int kNumPasses = 3;
std::string_view to_string(Pass pass);

// kOp: per-op selective recomputation (torchtitan's SelectiveAC): inside each block the outputs of
// the ops its framework saves are kept and every other forward op runs again in backward
// (FrameworkSpec::op_recompute says which; GemmOp::op_rerun and the others how much of each).
enum class Recompute { kNone, kSelective, kFull, kOp };
std::string_view to_string(Recompute r);
bool parse_recompute(std::string_view text, Recompute& out);
// The one of `a` and `b` that keeps less (none, selective, op, full in that order).
constexpr Recompute keeps_less(Recompute a, Recompute b) {
  constexpr auto rank = [](Recompute r) {
    return r == Recompute::kNone ? 0 : r == Recompute::kSelective ? 1 : r == Recompute::kOp ? 2 : 3;
  };
  return rank(a) >= rank(b) ? a : b;
}

// Megatron-Core's --recompute-modules: the parts of a block selective recomputation re-runs
// (TransformerConfig.recompute_modules, megatron/core/transformer/transformer_config.py at
// d98e8a64dd). core_attn, mlp, moe and shared_experts checkpoint the module (its input kept, the
// rest dropped and re-run in backward); layernorm, moe_act and mla_up_proj drop their output
// and re-run the function before the backward that reads it (CheckpointWithoutOutput).
enum class RecomputeModule {
  kCoreAttn,
  kMlp,
  kMoeAct,
  kLayernorm,
  kMlaUpProj,
  kMoe,
  kSharedExperts
};
std::string_view to_string(RecomputeModule m);  // Megatron's name: "core_attn", "moe_act", ...
bool parse_recompute_module(std::string_view text, RecomputeModule& out);
std::string recompute_module_names();  // "core_attn, moe_act, ..." for messages

// The modules an op or a kept tensor belongs to, as bits (1 << RecomputeModule): selective
// recomputation of any of them re-runs a forward op in backward or drops a kept tensor.
// kDefault: none (re-run only under full recomputation).
enum class OpGroup : uint32_t { kDefault = 0, kCoreAttention = 1u << 0 };
constexpr OpGroup module_group(RecomputeModule m) {
  return static_cast<OpGroup>(1u << static_cast<int>(m));
}
constexpr OpGroup operator|(OpGroup a, OpGroup b) {
  return static_cast<OpGroup>(static_cast<uint32_t>(a) | static_cast<uint32_t>(b));
}
constexpr bool intersects(OpGroup a, OpGroup b) {
  return (static_cast<uint32_t>(a) & static_cast<uint32_t>(b)) != 0;
}
constexpr bool has_module(OpGroup set, RecomputeModule m) {
  return intersects(set, module_group(m));
}
// The modules of `set` in Megatron's order of TransformerConfig's docstring.
std::vector<RecomputeModule> modules_of(OpGroup set);

// How a layer recomputes: the granularity, and under selective the modules re-run. A plain
// Recompute converts as the strategy key `recompute` alone means it: selective = core_attn
// (Megatron-Core's default recompute_modules).
struct Recomputation {
  Recompute granularity = Recompute::kNone;
  OpGroup modules = OpGroup::kDefault;  // under kSelective only

  constexpr Recomputation() = default;
  constexpr Recomputation(Recompute g)  // NOLINT(google-explicit-constructor): the common case
      : granularity(g),
        modules(g == Recompute::kSelective ? OpGroup::kCoreAttention : OpGroup::kDefault) {}
  constexpr Recomputation(Recompute g, OpGroup m)
      : granularity(g), modules(g == Recompute::kSelective ? m : OpGroup::kDefault) {}
  bool operator==(const Recomputation&) const = default;
};

// Megatron-Core's --cp-comm-type: how context parallelism moves keys and values. p2p: a ring of
// cp - 1 point-to-point KV exchanges, each hidden behind a step of attention (Transformer
// Engine's AttnFuncWithCPAndKVP2P); all_gather: keys and values gathered before attention, their
// gradients reduce-scattered after; a2a: DeepSpeed-Ulysses' all-to-alls of Q, K, V and the output
// between sequence and head splits; a2a+p2p: all-to-alls inside groups of cp_a2a ranks and a ring
// between the groups (--hierarchical-context-parallel-sizes).
enum class CpComm { kP2p, kAllGather, kA2a, kA2aP2p };
std::string_view to_string(CpComm c);
bool parse_cp_comm(std::string_view text, CpComm& out);

// Megatron-Core's --moe-token-dispatcher-type. allgather (its default): every rank gathers the
// tokens of its expert-parallel x expert-tensor group and runs its local experts on those routed to
// them; alltoall: each rank sends its routed tokens to the experts' ranks and back, one copy per
// routed expert; flex (with --moe-flex-dispatcher-backend deepep or hybridep): the same exchange
// through DeepEP's or HybridEP's kernels, which send a token once to each node and each GPU that
// holds any of its experts and copy it to the experts there (DeepEP's README: "intranode and
// internode" dispatch with NVLink forwarding inside the destination node).
enum class MoeDispatcher { kAllGather, kAllToAll, kFlex };
std::string_view to_string(MoeDispatcher d);
bool parse_moe_dispatcher(std::string_view text, MoeDispatcher& out);

// Whether an MoE layer runs inside the tensor-parallel region (every rank all of the experts'
// tokens at the tensor width: no expert parallelism, the expert width tp, the all-gather
// dispatcher); otherwise Megatron-Core leaves the region, which needs sequence parallelism at
// tp > 1. The layer decomposition and the strategy rules ask the same question.
inline bool moe_in_tensor_region(int64_t ep, int64_t expert_tp, int64_t tp, MoeDispatcher d) {
  return ep == 1 && expert_tp == tp && d == MoeDispatcher::kAllGather;
}

// LoRA fine-tuning (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models"): the
// model's weights are frozen and beside each targeted linear layer W (in -> out) a low-rank
// adapter trains, A (in -> rank) then B (rank -> out), its output added to W's. The targets are
// Megatron-Bridge's module names (src/megatron/bridge/peft/lora.py at 067f987df03b: LoRA's
// target_modules, default all four; NeMo 1.x's attention_qkv, attention_dense, mlp_fc1 and
// mlp_fc2 are the same layers).
enum class LoraTarget : uint32_t {
  kQkv = 1u << 0,
  kProj = 1u << 1,
  kFc1 = 1u << 2,
  kFc2 = 1u << 3
};
inline constexpr uint32_t kAllLoraTargets = 0xf;
std::string_view to_string(LoraTarget t);  // "linear_qkv", "linear_proj", "linear_fc1", ...
bool parse_lora_target(std::string_view text, LoraTarget& out);
std::string lora_target_names();  // "linear_qkv, linear_proj, linear_fc1, linear_fc2"
// The targets of `mask` in Megatron's order.
std::vector<LoraTarget> lora_targets_of(uint32_t mask);

struct Lora {
  int64_t rank = 0;  // 0: no LoRA (every parameter trains)
  uint32_t targets = kAllLoraTargets;
  bool enabled() const { return rank > 0; }
  bool targets_module(LoraTarget t) const {
    return enabled() && (targets & static_cast<uint32_t>(t)) != 0;
  }
  bool operator==(const Lora&) const = default;
};

// How a layer runs: micro-batch, tensor width, options.
struct LayerShape {
  int64_t micro_batch = 1;
  int64_t tp = 1;
  // Context parallelism: cp ranks each hold micro_batch x seq / cp tokens (with causal load
  // balancing: chunks i and 2cp - 1 - i of 2cp). Expert parallelism: ep ranks each hold experts /
  // ep of an MoE block's routed experts, at expert tensor width etp (0: tp, Megatron-Core's
  // default for --expert-tensor-parallel-size).
  int64_t cp = 1, ep = 1, etp = 0;
  CpComm cp_comm = CpComm::kP2p;
  int64_t cp_a2a = 2;  // a2a+p2p: ranks of each all-to-all group (it divides cp)
  MoeDispatcher dispatcher = MoeDispatcher::kAllGather;
  // Tokens the busiest expert of a rank receives over the mean (routing's load imbalance): a
  // measured or cited factor for dropless routing, or the capacity factor where tokens beyond it
  // are dropped (each expert's GEMMs run at capacity). 1: balanced (Megatron's
  // --moe-router-force-load-balancing, which NVIDIA's published MoE benchmarks use).
  double moe_imbalance = 1;
  // The low-precision recipe of the blocks' linear layers (costmodel/precision.h).
  Precision precision = Precision::kBf16;
  bool sequence_parallel = false;
  bool flash_attention = true;  // fused attention (no s^2 tensors kept); false = unfused GEMMs
  // The framework's fused attention kernel on this GPU where it is not the one the calibration
  // timed (FlashAttention-2): its speed against that one scales the fused attention's time.
  const AttentionKernel* attention_kernel = nullptr;
  Dtype dtype = Dtype::kBf16;  // activations and GEMM operands
  bool pad_vocab = true;       // pad the vocabulary as Megatron-LM does (128 x tp)
  // Weight-gradient GEMMs add into the fp32 main gradients themselves (Megatron-LM's default with
  // Transformer Engine or APEX); false: every gradient is added by a kernel of its own (plain
  // PyTorch, the reference harness).
  bool grad_accumulation_fusion = true;
  // The framework's own kernels for the op families it runs differently (framework.h), under the
  // host mode the strategy runs; nullptr: hetplan's fused kernels throughout.
  const FrameworkSpec* framework = nullptr;
  HostMode host_mode = HostMode::kEager;
  // Micro-batches per iteration, where the framework's precision is autocast: autograd's first
  // micro-batch's gradients become .grad, later ones are added (0: every micro-batch adds).
  int64_t microbatches = 0;
  // LoRA: the base weights frozen, adapters beside the targeted linear layers train.
  Lora lora;

  int64_t expert_tp() const { return etp > 0 ? etp : tp; }
};

// The share of an op of `pass` and `group` that runs again in backward under `r`: all of every
// forward op under full recomputation, of those of the recomputed modules under selective, and
// under per-op recomputation its own share `op_rerun`.
inline double rerun_share(const Recomputation& r, Pass pass, OpGroup group, double op_rerun) {
  if (pass != Pass::kForward) return 0;
  switch (r.granularity) {
    case Recompute::kNone:
      return 0;
    case Recompute::kSelective:
      return intersects(group, r.modules) ? 1 : 0;
    case Recompute::kFull:
      return 1;
    case Recompute::kOp:
      return op_rerun;
  }
  return 0;
}

// A GEMM in cuBLAS's column-major terms, as PyTorch issues it: forward of a linear layer
// (m = out, n = tokens, k = in, A transposed), its input gradient (m = in, n = tokens, k = out) and
// its weight gradient (m = in, n = out, k = tokens, B transposed).
// `quantized`: it runs in `dtype` (fp8 or fp4) under a low-precision recipe; else in the layer's
// dtype.
struct GemmOp {
  std::string name;
  Pass pass;
  GemmShape shape;
  OpGroup group = OpGroup::kDefault;
  bool quantized = false;
  Dtype dtype = Dtype::kBf16;
  // 0: one kernel for all shape.batch copies (a batched or grouped GEMM); n >= 1: shape.batch
  // GEMMs of their own, one kernel each, issued round-robin over n streams (a framework's
  // per-expert GEMMs, FrameworkSpec::expert_gemms).
  int64_t streams = 0;
  // Under per-op recomputation (Recompute::kOp), the share of this forward GEMM's work that runs
  // again in backward: the matmuls of a fused projection the framework runs apart (torchtitan's
  // wq, wk, wv) are saved or re-run one by one.
  double op_rerun = 0;
};

// A memory-bound kernel; `kernel` names a kernels/ registry entry (layernorm_fwd, gelu_bwd, ...),
// or a framework's eager sequence of `launches` kernels ("eager_rmsnorm_fwd", ...).
struct MemoryOp {
  std::string kernel;
  Pass pass;
  double bytes = 0;  // minimum bytes moved: inputs read once, outputs written once
  OpGroup group = OpGroup::kDefault;
  int64_t launches = 1;
  double op_rerun = 0;  // 1: runs again in backward under per-op recomputation (GemmOp::op_rerun)
};

// Fused (flash-style) attention of one rank's heads. seq_len is its queries' length; under context
// parallelism kv_seq_len the keys' (0: seq_len) and window the sliding window (0: none).
struct AttentionOp {
  Pass pass;
  int64_t batch = 0, heads = 0, kv_heads = 0, seq_len = 0, head_dim = 0;
  bool causal = true;
  double flops = 0;  // executed: causal attention skips the masked half
  int64_t kv_seq_len = 0;
  int64_t window = 0;
  double speed = 1;     // the framework's kernel against the calibrated one (LayerShape)
  double op_rerun = 0;  // 1: runs again in backward under per-op recomputation (GemmOp::op_rerun)
};

// Its work as the attention time model takes it (costmodel/attention_model.h).
AttentionWork attention_work(const AttentionOp& op);

// The group a layer's collective runs over: the tensor-parallel group, the context-parallel
// group, the expert-parallel group, or the expert-tensor-parallel group (where etp is not tp: at
// etp = tp the expert tensor group is the tensor group, and its collectives say kTensor).
enum class CommScope { kTensor = 0, kContext = 1, kExpert = 2, kExpertTensor = 3 };
inline constexpr int kNumCommScopes = 4;
std::string_view to_string(CommScope s);

// What a collective hides behind. kAttention: ring attention's KV exchange, each of its
// `repeats` transfers behind one step of the same pass's attention (Transformer Engine sends step
// i + 1's keys and values while step i's attention runs): exposed only where a transfer outlasts
// a step, cp - 1 transfers against cp steps.
enum class CommOverlap { kNone, kAttention };

// A collective of a layer; bytes follow nccl-tests (the whole array), per transfer.
struct CommOp {
  std::string name;
  Pass pass;
  CollectiveKind kind;
  double bytes = 0;
  CommScope scope = CommScope::kTensor;
  CommOverlap overlap = CommOverlap::kNone;
  int64_t repeats = 1;      // transfers of `bytes` (a ring's cp - 1 steps)
  int64_t group_ranks = 0;  // 0: the scope's whole group; else groups of this many of its ranks
  // An all-to-all of routed token copies (`bytes` = every copy) that sends a token once per
  // destination node and GPU (the flex dispatcher): each token picked `top_k` of `experts`
  // spread evenly over the group's ranks. 0: every copy is sent.
  int64_t dedup_experts = 0, dedup_top_k = 0;
  OpGroup group = OpGroup::kDefault;  // a recomputed module's forward collectives run again
  double op_rerun = 0;  // 1: runs again in backward under per-op recomputation (GemmOp::op_rerun)
};

// What makes two layers the same for whole-layer timings (costmodel/layer_correction.h): the kind
// and the sizes that set its GEMMs and attention, its tensor width and whether attention is fused.
// Norms, biases, dropout and the vocabulary are left out: a timing's ratio to the cost model's
// prediction carries over them, as the prediction itself follows them.
struct LayerKey {
  LayerKind kind = LayerKind::kTransformer;
  int64_t hidden = 0, seq_len = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0, ffn_hidden = 0, experts = 1;  // blocks
  bool gated = false;  // SwiGLU: three MLP GEMMs
  int64_t tp = 1;
  bool flash_attention = true;
  Precision precision = Precision::kBf16;
  // The variants beyond those (0 / false / 1 for layers without them): a window shorter than the
  // sequence, MLA's latent, shared experts, an MTP module, and the context and expert widths.
  int64_t window = 0, kv_lora_rank = 0, shared_experts = 0, top_k = 1;
  bool mtp = false;
  int64_t cp = 1, ep = 1, etp = 1;
  // A Mamba-2 layer's mixer (0 elsewhere): its heads, head size and state.
  int64_t mamba_heads = 0, mamba_head_dim = 0, mamba_state = 0;

  auto operator<=>(const LayerKey&) const = default;
};
LayerKey layer_key(const LayerSpec& layer, const LayerShape& shape);
std::string describe(const LayerKey& key);  // "block h1024 a16 s1024 ffn4096 tp1"

struct LayerWork {
  LayerKey key;
  int64_t micro_batch = 1;
  std::vector<GemmOp> gemms;
  std::vector<MemoryOp> memory_ops;
  std::vector<AttentionOp> attention;
  std::vector<CommOp> comms;  // empty at tp = cp = ep = etp = 1
  // Activation bytes kept for backward per micro-batch on one rank, by recomputation mode
  // (selective: its default, core_attn; op: the block's input and the outputs the framework's
  // per-op policy saves).
  double activation_bytes[4] = {0, 0, 0, 0};  // indexed by Recompute
  // Of activation_bytes[kNone], the bytes selective recomputation drops, by the modules whose
  // recomputation drops them (any one of them does).
  std::vector<std::pair<OpGroup, double>> dropped_bytes;
  // The modules this layer has (those whose recomputation changes anything).
  OpGroup modules = OpGroup::kDefault;
  double output_bytes = 0;         // the activation handed to the next layer (whole tensor)
  int64_t params = 0;              // held on one rank (a tied head holds its copy)
  int64_t expert_params = 0;       // of those, the routed experts' (their gradients reduce over the
                                   // expert data-parallel group, dp x cp x tp / (ep x etp) ranks)
  int64_t gemm_weight_params = 0;  // of those, the weights of its GEMMs (linear layers)
  // Under LoRA: of `params`, the frozen ones (weights alone: no gradient, master copy or optimizer
  // state), and of those the routed experts'; and the adapters' parameters and tensors (the rest
  // of `params`, the ones that train).
  int64_t frozen_params = 0, expert_frozen_params = 0;
  int64_t adapter_params = 0, adapter_tensors = 0;
  // Parameter tensors (a weight, a bias, a norm's gain: what a gradient hook fires for) and, of
  // them, the tensors whose gradients are added into the fp32 main gradients by a kernel of their
  // own: the `grad_accumulate` op is one kernel per such tensor.
  int64_t param_tensors = 0;
  int64_t gemm_weight_tensors = 0;
  int64_t accumulated_tensors = 0;
  // The share of micro-batches whose gradients are added (autocast: all but the first).
  double accumulate_share = 1;
  // Working buffers of the framework's own ops beyond hetplan's fused kernels' (an eager loss's
  // fp32 gradients of the logits), while the layer's backward runs.
  double transient_bytes = 0;
  // Model FLOPs of the layer on one rank per pass (no recomputation; attention counted in full,
  // as Megatron-LM and PaLM count it for MFU).
  double model_flops[kNumPasses] = {0, 0, 0};
  // Under a low-precision recipe: the bytes that quantise the layer's GEMM weights once per step
  // (the first micro-batch's; the copies are kept for the rest), and the bytes those copies hold
  // on the rank (both orientations and their scales) for the memory model to add.
  double weight_quantize_bytes = 0;
  double low_precision_weight_bytes = 0;
  int64_t quantized_weight_params = 0;  // the parameters of those weights
  // Of those, the routed experts' (sharded with the experts' states, over expert_dp).
  double expert_low_precision_weight_bytes = 0;
  int64_t expert_quantized_weight_params = 0;
  // Points in the forward where the host waits for the device (a token count read back to size
  // the next kernels): the device's queue runs dry there, and the host issues what follows while
  // the device waits (search/eval/layer_costs.cpp host_sync_stall).
  int64_t host_syncs = 0;
  // Of the memory-bound kernels a micro-batch, those of the loss (the head's cross-entropy): the
  // part torch.compile may cover apart from the head (FrameworkSpec::compiled_parts `loss`).
  double loss_launches = 0;
  // Whether recomputation reaches the layer: the transformer blocks; the embedding and the head
  // run outside the checkpointed blocks of every framework hetplan describes (Megatron's
  // TransformerBlock, DeepSpeed's checkpointable ParallelTransformerLayerPipe, torchtitan's
  // model.layers), so they keep what they keep and never run again.
  bool checkpointed = true;

  double activation(Recompute r) const { return activation_bytes[static_cast<int>(r)]; }
  double activation(const Recomputation& r) const;
};

// Decomposes `layer` for one rank. Throws InputError when `shape.tp` does not divide the heads,
// KV heads or MLP width, 2 x cp the sequence (cp the sequence of a bidirectional layer; cp the
// per-rank heads under a2a), ep the experts or etp the experts' width.
LayerWork layer_work(const LayerSpec& layer, const LayerShape& shape);

// Kernels one micro-batch of a layer launches on one rank: every GEMM (each copy of per-expert
// GEMMs), memory-bound op, fused attention pass and collective is one launch, and gradient
// accumulation one per accumulated tensor. `recompute` counts the forward launches re-run in
// backward under `mode`. The host's time to issue them bounds the step of small configurations
// (search/evaluate.cpp). Counts are per micro-batch, so fractional where a share of the
// micro-batches launches a kernel (autocast's gradient accumulation).
struct LayerKernels {
  double pass[kNumPasses] = {0, 0, 0};
  double recompute = 0;
  double total() const { return pass[0] + pass[1] + pass[2] + recompute; }
};
LayerKernels layer_kernels(const LayerWork& work, const Recomputation& mode);

// The part of the model (FrameworkSpec::compiled_parts) a layer of `kind` runs in: "embedding",
// "blocks" or "head"; the head's loss is the part "loss" (LayerWork::loss_launches).
std::string_view model_part(LayerKind kind);

// The recomputation `work` runs under `r`: `r`, or none where the layer is not checkpointed.
inline Recomputation layer_recomputation(const LayerWork& work, const Recomputation& r) {
  return work.checkpointed ? r : Recomputation(Recompute::kNone);
}

// Checks that tensor width `tp` divides every layer of `model`; returns the reason or "".
std::string tensor_parallel_problem(const ModelSpec& model, int64_t tp);
// Checks context parallelism: 2 x cp divides every causal layer's sequence (causal load
// balancing), cp every other's; under a2a (and a2a+p2p, its cp_a2a) the heads and KV heads per
// tensor rank. Returns the reason or "".
std::string context_parallel_problem(const ModelSpec& model, int64_t cp, int64_t tp = 1,
                                     CpComm comm = CpComm::kP2p, int64_t cp_a2a = 2);
// Checks expert parallelism: ep divides every MoE block's experts and the expert tensor width etp
// (0: tp) their MLP width. Returns the reason or "".
std::string expert_parallel_problem(const ModelSpec& model, int64_t ep, int64_t etp = 1);

// Checks LoRA on `model` at tensor width `tp`: the rank splits over tp beside column-parallel
// targets, and the targets are layers hetplan models (not MLA's projections, not routed experts).
// Returns the reason or "".
std::string lora_problem(const ModelSpec& model, const Lora& lora, int64_t tp);

// The modules of Megatron-Core's --recompute-modules whose recomputation changes something in
// `model` (core_attn always: it is the default).
OpGroup recompute_modules_of(const ModelSpec& model);
// Why recomputing `m` changes nothing in a model without it (Megatron-Core's assertions where
// it has them); "" for core_attn.
std::string_view absent_module_reason(RecomputeModule m);

// Model FLOPs of one training step for `samples` samples (forward + backward, no recompute);
// under LoRA, those it runs: the frozen weights' gradients are not computed, the adapters' are.
double model_flops_per_sample(const ModelSpec& model, const Lora& lora = {});

}  // namespace hetplan
