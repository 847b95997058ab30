// The work of one layer on one tensor-parallel rank: GEMMs, memory-bound kernels, attention and
// tensor-parallel collectives per pass, parameters, FLOPs, and the activation bytes it keeps for
// backward under each recomputation mode. Megatron-LM's layout of tensor and sequence parallelism.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/attention_model.h"
#include "costmodel/calibration.h"
#include "costmodel/framework.h"
#include "costmodel/model.h"

namespace hetplan {

// F = forward, B = input gradient, W = weight gradient (split as zero-bubble schedules do).
enum class Pass { kForward = 0, kBackwardInput = 1, kBackwardWeight = 2 };
inline constexpr int kNumPasses = 3;
std::string_view to_string(Pass pass);

enum class Recompute { kNone, kSelective, kFull };
std::string_view to_string(Recompute r);
bool parse_recompute(std::string_view text, Recompute& out);

// How a layer runs: micro-batch, tensor width, options.
struct LayerShape {
  int64_t micro_batch = 1;
  int64_t tp = 1;
  bool sequence_parallel = false;
  bool flash_attention = true;  // fused attention (no s^2 tensors kept); false = unfused GEMMs
  Dtype dtype = Dtype::kBf16;   // activations and GEMM operands
  bool pad_vocab = true;        // pad the vocabulary as Megatron-LM does (128 x tp)
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
};

// Forward ops re-run in backward under selective recomputation (softmax, dropout, attention GEMMs).
enum class OpGroup { kDefault, kCoreAttention };

// Whether an op of `pass` and `group` runs again in backward under `mode`: every forward op under
// full recomputation, the core-attention ones under selective.
inline bool recomputed(Recompute mode, Pass pass, OpGroup group) {
  return pass == Pass::kForward && (mode == Recompute::kFull || (mode == Recompute::kSelective &&
                                                                 group == OpGroup::kCoreAttention));
}

// A GEMM in cuBLAS's column-major terms, as PyTorch issues it: forward of a linear layer
// (m = out, n = tokens, k = in, A transposed), its input gradient (m = in, n = tokens, k = out) and
// its weight gradient (m = in, n = out, k = tokens, B transposed).
struct GemmOp {
  std::string name;
  Pass pass;
  GemmShape shape;
  OpGroup group = OpGroup::kDefault;
};

// A memory-bound kernel; `kernel` names a kernels/ registry entry (layernorm_fwd, gelu_bwd, ...),
// or a framework's eager sequence of `launches` kernels ("eager_rmsnorm_fwd", ...).
struct MemoryOp {
  std::string kernel;
  Pass pass;
  double bytes = 0;  // minimum bytes moved: inputs read once, outputs written once
  OpGroup group = OpGroup::kDefault;
  int64_t launches = 1;
};

// Fused (flash-style) attention of one rank's heads.
struct AttentionOp {
  Pass pass;
  int64_t batch = 0, heads = 0, kv_heads = 0, seq_len = 0, head_dim = 0;
  bool causal = true;
  double flops = 0;  // executed: causal attention skips the masked half
};

// Its work as the attention time model takes it (costmodel/attention_model.h).
AttentionWork attention_work(const AttentionOp& op);

// A collective over the tensor-parallel group; bytes follow nccl-tests (the whole array).
struct CommOp {
  std::string name;
  Pass pass;
  CollectiveKind kind;
  double bytes = 0;
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
  std::vector<CommOp> comms;  // empty at tp = 1
  // Activation bytes kept for backward per micro-batch on one rank, by recomputation mode.
  double activation_bytes[3] = {0, 0, 0};  // indexed by Recompute
  double output_bytes = 0;                 // the activation handed to the next layer (whole tensor)
  int64_t params = 0;                      // held on one rank (a tied head holds its copy)
  int64_t gemm_weight_params = 0;          // of those, the weights of its GEMMs (linear layers)
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

  double activation(Recompute r) const { return activation_bytes[static_cast<int>(r)]; }
};

// Decomposes `layer` for one rank. Throws InputError when `shape.tp` does not divide the heads,
// KV heads or MLP width.
LayerWork layer_work(const LayerSpec& layer, const LayerShape& shape);

// Kernels one micro-batch of a layer launches on one rank: every GEMM, memory-bound op, fused
// attention pass and collective is one launch, and gradient accumulation one per accumulated
// tensor. `recompute` counts the forward launches re-run in backward under `mode`. The host's
// time to issue them bounds the step of small configurations (search/evaluate.cpp).
// Counts are per micro-batch, so fractional where a share of the micro-batches launches a kernel
// (autocast's gradient accumulation).
struct LayerKernels {
  double pass[kNumPasses] = {0, 0, 0};
  double recompute = 0;
  double total() const { return pass[0] + pass[1] + pass[2] + recompute; }
};
LayerKernels layer_kernels(const LayerWork& work, Recompute mode);

// Checks that tensor width `tp` divides every layer of `model`; returns the reason or "".
std::string tensor_parallel_problem(const ModelSpec& model, int64_t tp);

// Model FLOPs of one training step for `samples` samples (forward + backward, no recompute).
double model_flops_per_sample(const ModelSpec& model);

}  // namespace hetplan
