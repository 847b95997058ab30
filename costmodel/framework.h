// A training framework as data (presets/frameworks/NAME.yaml, docs/frameworks.md): what it can run,
// how it runs the memory-bound ops of a layer, what the host spends per launched kernel, how it
// lays out memory, and which export it writes. The evaluator takes each where it matters:
// validation (what it can run), layer costs (its kernels), synchronisation (its reduction dtype),
// memory (its layout) and the host floor (its host cost).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "costmodel/document.h"
#include "costmodel/dtype.h"

namespace hetplan {

// How the host issues kernels: one by one from Python (eager), from compiled graphs of fused
// kernels (torch.compile), or replayed as CUDA graphs.
enum class HostMode { kEager, kCompiled, kCudaGraphs };
inline constexpr HostMode kAllHostModes[] = {HostMode::kEager, HostMode::kCompiled,
                                             HostMode::kCudaGraphs};
std::string_view to_string(HostMode mode);
bool parse_host_mode(std::string_view text, HostMode& out);
// Each mode's name, in order (for messages and listings).
std::vector<std::string_view> host_mode_names(const std::vector<HostMode>& modes);

// Values per element of an op's tensor: `act_values` activation-sized values, `fp32_values` fp32
// values and `bytes` single bytes (an eager RMSNorm under autocast works in fp32, a dropout mask
// is one byte).
struct OpValues {
  double act_values = 0, fp32_values = 0, bytes = 0;
  double total_bytes(double elements, double act_size) const {
    return elements * (act_values * act_size + fp32_values * 4 + bytes);
  }
};

// One pass of one memory-bound op as a framework runs it, where that differs from hetplan's fused
// kernel (one launch moving the fewest bytes, costmodel/layer_ops.cpp): `launches` kernels that
// together move these values per element (read and written alike). `launches: 0` with no values:
// the pass runs inside another pass's sequence (an eager norm's backward that forms the gain's
// gradient with the input's).
struct OpPass : OpValues {
  int64_t launches = 1;
};

// The passes of one op family (rmsnorm, swiglu, rotary, ...) the framework runs its own way; an
// absent pass runs as hetplan's kernel. `weight` is the backward of a norm's gain. `kept`: what
// the sequence keeps for backward beyond the tensors hetplan's fused kernel keeps (an eager
// RMSNorm's normalised input, an eager SwiGLU's silu output); `transient`: working buffers of
// its backward beyond hetplan's (an eager loss's two fp32 gradients of the logits).
struct OpRecipe {
  std::optional<OpPass> forward, backward, weight;
  OpValues kept, transient;
};

// How a framework holds parameters and activations. `half`: parameters in the training dtype
// (with fp32 master weights where its memory layout keeps them), activations in it throughout.
// `autocast`: fp32 parameters, and the forward under torch.autocast: every linear layer casts its
// weight (once per forward) and an fp32 input to the training dtype, keeps the weight's copy for
// backward and casts the gradients back; the residual stream, the norms and the embedding stay
// fp32; autograd accumulates fp32 gradients (the first micro-batch's become .grad, later ones
// are added).
enum class ParamPrecision { kHalf, kAutocast };
std::string_view to_string(ParamPrecision precision);

// The op families a framework may describe, with what one "element" is (docs/frameworks.md).
struct OpFamilyInfo {
  std::string_view name, element;
};
const std::vector<OpFamilyInfo>& op_families();

// Bytes per parameter held for one training dtype: half-precision (or fp32) weights, gradients as
// kept between micro-batches, fp32 master weights, optimizer moments.
struct StateBytes {
  double weights = 0, gradients = 0, master = 0, optimizer = 0;
};

// Which of the four parameter states a ZeRO stage (or FSDP) shards over the data-parallel group.
struct ShardedStates {
  bool weights = false, gradients = false, master = false, optimizer = false;
};

// What "peak memory" means where a framework reports it: what its allocator holds for tensors,
// what it has reserved from the device, or the whole device in use.
enum class PeakKind { kAllocated, kReserved, kDevice };
std::string_view to_string(PeakKind kind);

struct MemoryLayout {
  PeakKind reported_peak = PeakKind::kAllocated;
  std::map<Dtype, StateBytes> states;     // by the model's training dtype (fp8 trains as bf16)
  std::map<int, ShardedStates> sharding;  // by ZeRO stage 1-3 (0 shards nothing)
  // Half-precision copies of the weights made for each micro-batch's forward and kept for its
  // backward (autocast over fp32 parameters), bytes per parameter.
  double cast_copy_bytes = 0;
  // Under ZeRO-3 with a pipeline, the weights stay gathered (in the training dtype) from a step's
  // first forward to its last backward, gathered once a step instead of before every pass of
  // every micro-batch (FSDP2 with reshard_after_forward off, torchtitan's default with PP).
  bool gathered_with_pipeline = false;
  // The gradient buffer is of the dtype gradients are reduced in (Strategy::fp32_grad_reduce): its
  // `states` gradient bytes under fp32 reduction, the training dtype's otherwise (Megatron-Core's
  // grad_dtype: fp32 with grad_reduce_in_fp32, else the parameters' dtype).
  bool gradients_in_reduce_dtype = false;
  // The host modes in which the step ends with zero_grad(set_to_none=True) (PyTorch's default
  // since 2.0): the gradients are freed after each optimizer step and allocated again by the next
  // step's first gradient pass, so the activations its first micro-batches hold before that pass
  // are held without them. Empty: the gradients live through the step (Megatron-Core's gradient
  // buffer; torchtitan under CUDA graphs, whose captured step needs them in place).
  std::vector<HostMode> gradients_freed_after_step;
  // Bytes per trained parameter of the data-parallel communication buckets held beside the
  // gradients where dp > 1 and nothing is sharded: PyTorch DDP copies each gradient into its
  // bucket unless gradient_as_bucket_view (False by default). 0: the gradients are the buckets.
  double dp_bucket_bytes = 0;
  // The caching allocator's reserve beyond its peak allocation, as a share of it.
  double fragmentation = 0;
  // CUDA context, library workspaces and NCCL buffers per device, before calibration measures
  // the context (a profile's context_reserve_bytes replaces it), and per communicator.
  double context_bytes = 0;
  double communicator_bytes = 0;
};

// What a framework can run; a strategy asking for anything else is infeasible with the reason.
struct Capabilities {
  std::vector<std::string> schedules;  // pipeline schedules (any with one stage)
  // Whose schedule classes run its pipelines: "megatron" (hetplan's orders as Megatron-Core runs
  // them) or "pytorch" (torch.distributed.pipelining's: Schedule1F1B needs at least pp
  // micro-batches, ScheduleInterleaved1F1B runs them in rounds; search/pipeline/schedule.h
  // InterleavedOrder).
  std::string pipeline_runtime = "megatron";
  std::vector<std::string> recompute;  // none, selective, full, op
  // The modules selective recomputation re-runs that it runs (Megatron-Core's --recompute-modules:
  // costmodel/layer_ops.h RecomputeModule); a file without the key: core_attn where it runs
  // selective (the attention core, as Korthikanti et al. 2022 recompute it).
  std::vector<std::string> recompute_modules;
  std::vector<int> zero;                // sharding stages it runs without a pipeline
  std::vector<int> zero_with_pipeline;  // ... and with one
  bool tensor_parallel = true;
  bool sequence_parallel = true;
  bool tp_comm_overlap = false;
  // The host modes it overlaps tensor-parallel communication in; empty: every one it runs
  // (torchtitan's async tensor parallelism is a torch.compile pass: compiled only).
  std::vector<HostMode> tp_comm_overlap_modes;
  // Pipeline sends and receives overlap compute (asynchronous, on their own stream); false: each
  // one holds both its stages until the transfer is done (DeepSpeed's synchronous p2p).
  bool p2p_overlap = true;
  std::vector<bool> overlap_grad_reduce;       // the values it runs
  std::vector<bool> grad_accumulation_fusion;  // the values it runs
  std::vector<std::string> attention;          // "fused" and/or "unfused"
  // The activation dtypes its fused attention takes (FlashAttention, cuDNN and Transformer
  // Engine: fp16 and bf16; PyTorch's SDPA also fp32, in its memory-efficient kernel).
  std::vector<std::string> fused_attention_dtypes = {"fp16", "bf16"};
  bool fused_attention_takes(Dtype model_dtype) const;
  std::vector<HostMode> host_modes;
  // What its CUDA graphs (host mode cuda-graphs) can capture: a step with a pipeline, and one
  // with expert parallelism over its dispatchers (a dispatcher that reads token counts back to
  // the host cannot be captured). torchtitan refuses both (trainer.py _validate_cuda_graphs).
  bool cuda_graphs_pipeline = true, cuda_graphs_expert_parallel = true;
  // Context parallelism's ways of moving keys and values it runs (--cp-comm-type: p2p,
  // all_gather, a2a, a2a+p2p); empty: none.
  std::vector<std::string> context_parallel;
  bool expert_parallel = false;         // routed experts over ep ranks
  bool expert_tensor_parallel = false;  // an expert tensor width other than tp
  // The token dispatchers it runs (costmodel/layer_ops.h MoeDispatcher: allgather, alltoall,
  // flex).
  std::vector<std::string> moe_dispatchers = {"allgather", "alltoall"};
  // The experts' all-to-alls of one micro-batch run beside another's compute (Megatron-Core's
  // --overlap-moe-expert-parallel-comm, batch-level overlap in the 1F1B steady state).
  bool ep_comm_overlap = false;
  // Full recomputation of the first N blocks of each stage only (Megatron-Core's
  // --recompute-method block --recompute-num-layers; Strategy::recompute_num_layers).
  bool recompute_block = false;
  // LoRA fine-tuning (a strategy's `lora`: frozen weights, trained low-rank adapters), through the
  // framework's own PEFT or the library its users run it with.
  bool lora = false;
  std::vector<std::string> precisions = {"bf16"};  // low-precision recipes (costmodel/precision.h)
};

// The framework's own choice where a strategy does not say.
struct FrameworkDefaults {
  bool flash_attention = true;
  bool grad_accumulation_fusion = true;
  bool overlap_grad_reduce = true;
  bool tp_comm_overlap = false;
  bool fp32_grad_reduce = true;  // gradients reduced in fp32, else in the training dtype
  // Under a low-precision recipe the quantised layers' weights are held in it alone (Megatron's
  // --fp8-param-gather / --fp4-param-gather: no bf16 copy beside the fp32 master weights).
  bool low_precision_params = false;
  bool ep_comm_overlap = false;  // where the strategy allows it (search/rules.h)
  // Where the framework cannot capture a strategy in CUDA graphs (Capabilities::
  // cuda_graphs_pipeline, cuda_graphs_expert_parallel), a cuda-graphs default gives way to
  // eager: what the framework runs once told not to capture (torchtitan's
  // training.disable_cuda_graphs).
  HostMode host_mode = HostMode::kEager;
};

// How the routed experts' GEMMs of an MoE layer run on one rank: one grouped kernel over every
// local expert (torch._grouped_mm, a CUTLASS or cuBLASLt grouped GEMM), or one GEMM per local
// expert issued round-robin over `streams` CUDA streams (Transformer Engine's GroupedLinear: 4; an
// eager loop over expert modules: 1). Per expert, each GEMM is a kernel the host issues.
enum class ExpertGemmKernels { kGrouped, kPerExpert };
struct ExpertGemms {
  ExpertGemmKernels kernels = ExpertGemmKernels::kGrouped;
  int64_t streams = 1;  // per_expert only
};

// Per-op selective recomputation (`recompute: op`; torchtitan's SelectiveAC): each block is
// checkpointed whole, and its forward keeps only the block's input and the outputs of the ops
// saved here; every other forward op runs again in backward. Matmuls are counted in the block's
// order (a fused projection the model runs as separate linears counts each: wq, wk, wv; w1, w3),
// and with `every_second_matmul` the even ones are re-run. Quantised linears count as matmuls
// where they reach the policy as aten.mm on float8 tensor subclasses (`quantized_linears:
// matmul`, torchao's Float8Linear), else as torch._scaled_mm, saved or re-run by their own entry
// and not counted; grouped GEMMs (torch._grouped_mm) likewise. `recomputed_linears` names linear
// layers always re-run and not counted (hetplan's names: "router").
struct OpRecompute {
  bool matmuls = false, every_second_matmul = false;
  bool quantized_linears_as_matmuls = false;
  bool quantized_matmuls = false, grouped_matmuls = false;
  bool attention = false;
  bool reduce_scatter = false, all_to_all = false, all_gather = false;
  std::vector<std::string> recomputed_linears;
};
// The `saves` entries of `o`, by the names its file gives them.
std::vector<std::string> saved_op_names(const OpRecompute& o);

// The fused attention kernel a framework runs on GPUs of compute capability from
// `min_compute_capability` to `max_compute_capability`, and its
// speed against FlashAttention-2's (the kernel hetplan's calibration times through torch SDPA and
// its datasheet priors assume) by head size, forward and backward: interpolated in log head size
// between the points given, the nearest point's outside them.
struct AttentionKernel {
  double min_compute_capability = 0;
  double max_compute_capability = 0;  // 0: no upper end
  std::string kernel;                 // "flash2" (the calibration's own: speed 1), "cudnn", ...
  std::map<int64_t, double> forward_speed, backward_speed;
  double speed(bool forward, int64_t head_dim) const;
};

struct FrameworkSpec {
  std::string name;
  std::string description;
  std::string version;  // the release or commit the file describes
  std::string origin;   // the preset or file it was read from
  Capabilities can_run;
  FrameworkDefaults defaults;
  ParamPrecision param_precision = ParamPrecision::kHalf;
  // The style of the reference harness (scripts/reference) that runs as this framework for
  // `hetplan measure`, or "" (none).
  std::string harness;
  std::map<std::string, OpRecipe> ops;           // eager (and CUDA-graph) kernels, by family
  std::map<std::string, OpRecipe> compiled_ops;  // under torch.compile
  // What torch.compile covers under host mode compiled: "blocks" (the transformer blocks),
  // "embedding", "head" (the final norm and output projection), "loss" (the cross-entropy). The
  // parts it leaves out run their eager recipes (`ops`), and their kernels cost the host its eager
  // time each, as does the optimizer step (no part of these). Empty: all of them.
  std::vector<std::string> compiled_parts;
  // What its CUDA graphs capture under host mode cuda-graphs, by the same part names and
  // "optimizer" (the optimizer step): the parts left out are issued eagerly, kernel by kernel.
  // Empty: all of them (torchtitan graphs each micro-batch's forward and backward, not its
  // optimizer step).
  std::vector<std::string> graphed_parts;
  std::map<HostMode, double> host_s_per_kernel;
  ExpertGemms expert_gemms;
  std::optional<OpRecompute> op_recompute;  // where can_run.recompute lists op
  // First entry whose compute capability range holds the GPU's; none: FlashAttention-2.
  std::vector<AttentionKernel> attention_kernels;
  MemoryLayout memory;
  std::string export_format;  // "megatron", "deepspeed", "torchtitan", or "" (none)
  // torchtitan releases before its February 2026 refactor read a TOML job config (`export:
  // torchtitan-toml`): the export writes that by default.
  bool export_toml = false;
  std::map<std::string, std::string> sources;  // key path -> the file and commit, or measurement

  // The recipe of `family` under `mode` (`compiled_ops` when compiled, else `ops`); nullptr where
  // the framework runs hetplan's fused kernel (under torch.compile every family not listed in
  // compiled_ops: Inductor fuses a norm's or an activation's pointwise and reduction ops).
  const OpRecipe* recipe(std::string_view family, HostMode mode) const;
  // The mode a model `part` (as compiled_parts and graphed_parts name them, or "optimizer") runs
  // in under the strategy's `mode`.
  HostMode mode_for(std::string_view part, HostMode mode) const;
  // Whether its CUDA graphs can capture a step with `pp` stages and `ep` expert ranks; the
  // reason they cannot otherwise ("" where they can).
  std::string cuda_graphs_refusal(int64_t pp, int64_t ep) const;
  bool can_run_schedule(std::string_view schedule) const;
  // The attention kernel it runs on a GPU of compute capability `cc` (nullptr: FlashAttention-2).
  const AttentionKernel* attention_kernel(double cc) const;
};

// The framework every strategy runs under unless it names another: Megatron-Core.
inline constexpr std::string_view kDefaultFramework = "megatron-core";

// Reads a framework: a preset name (presets/frameworks) or a framework file (YAML or JSON).
// Throws InputError naming the file and key when it is malformed, or when a value has no source.
FrameworkSpec load_framework(const std::string& name_or_path);
// load_framework's result, read once per name or path for the process (safe from several
// threads); a framework that fails to load throws each time, as load_framework does.
const FrameworkSpec& loaded_framework(const std::string& name_or_path);
FrameworkSpec parse_framework(const Document& doc, const std::string& name);
// The framework presets: name and one-line description, sorted by name.
std::vector<std::pair<std::string, std::string>> framework_presets();
std::string framework_preset_names();  // comma separated, for messages

}  // namespace hetplan
