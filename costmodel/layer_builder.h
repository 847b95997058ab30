// Internal to costmodel/layer_*.cpp: the accumulator each layer's decomposition writes its ops
// into, with the conventions of costmodel/layer_ops.h.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "costmodel/layer_ops.h"

namespace hetplan::layer_detail {

constexpr double kNormStatBytes = 8;  // mean and rstd (or rstd alone, padded) per token, fp32

// Megatron-LM pads the vocabulary to a multiple of 128 x tp (--make-vocab-size-divisible-by).
inline int64_t padded_vocab(int64_t vocab, int64_t tp) {
  const int64_t m = 128 * tp;
  return (vocab + m - 1) / m * m;
}

// How a linear layer runs: `batch` independent copies batched (experts: a grouped GEMM);
// `flop_fraction` scales its GEMMs' share of the model FLOPs (expert GEMMs padded to the busiest
// expert's tokens count the routed tokens only); `shared_weight`: the weight is another layer's
// (an MTP module's logits use the LM head's); `quantizable`: a low-precision recipe runs it in
// fp8 / fp4 (Transformer Engine's linear layers: not the router, the embedding or the LM head,
// which Megatron-Core keeps in bf16).
struct LinearOptions {
  int64_t batch = 1;
  bool input_gradient = true;
  double flop_fraction = 1;
  bool shared_weight = false;
  bool quantizable = true;
  bool routed_expert = false;  // a routed expert's weights (LayerWork's expert_ parts)
  // The output widths of the separate linears a PyTorch model runs for this fused projection, in
  // its order (torchtitan's wq, wk, wv; w1, w3), for per-op recomputation's count of matmuls;
  // all 0: one matmul.
  std::array<int64_t, 3> parts = {0, 0, 0};
};

class Builder {
 public:
  Builder(const LayerShape& shape, LayerWork& work)
      : s_(shape),
        w_(work),
        act_(dtype_bytes(shape.dtype)),
        autocast_(shape.framework &&
                  shape.framework->param_precision == ParamPrecision::kAutocast && act_ < 4),
        stream_(autocast_ ? 4 : act_) {}

  // A linear layer y = x W^T with `in` -> `out` features over `tokens` rows: forward GEMM,
  // input-gradient GEMM, weight-gradient GEMM, and under a low-precision recipe the quantisation
  // of its input (forward) and output gradient (backward).
  void linear(const std::string& name, int64_t tokens, int64_t in, int64_t out,
              LinearOptions o = {}) {
    if (tokens <= 0 || in <= 0 || out <= 0) return;
    const bool low = o.quantizable && is_quantized(s_.precision);
    const Pass Bi = Pass::kBackwardInput, W = Pass::kBackwardWeight;
    const int64_t b = o.batch;
    const int64_t streams = expert_gemm_streams(o);
    gemm(name, Pass::kForward, {out, tokens, in, b, true, false}, OpGroup::kDefault,
         o.flop_fraction, low, streams);
    w_.gemms.back().op_rerun = op_policy_rerun(name, tokens, out, o, low);
    if (o.input_gradient)
      gemm(name, Bi, {in, tokens, out, b, false, false}, OpGroup::kDefault, o.flop_fraction, low,
           streams);
    gemm(name, W, {in, out, tokens, b, false, true}, OpGroup::kDefault, o.flop_fraction, low,
         streams);
    if (low) {
      const double per = quantize_bytes_per_element(s_.precision, act_);
      const double rows = static_cast<double>(tokens) * b;
      memory("quantize_input", Pass::kForward, rows * in * per);
      memory("quantize_grad", o.input_gradient ? Bi : W, rows * out * per);
      if (!o.shared_weight) {
        const double weights = static_cast<double>(in) * out * b;
        const double amax =
            s_.precision == Precision::kFp8Current || s_.precision == Precision::kNvfp4 ? act_ : 0;
        const double copy = weight_copy_bytes_per_element(s_.precision);
        w_.weight_quantize_bytes += weights * (act_ + amax + copy);
        w_.low_precision_weight_bytes += weights * copy;
        w_.quantized_weight_params += in * out * b;
        if (o.routed_expert) {
          w_.expert_low_precision_weight_bytes += weights * copy;
          w_.expert_quantized_weight_params += in * out * b;
        }
      }
    }
    if (o.shared_weight) return;
    if (autocast_) {  // its weight cast per forward (kept for the input gradient), the gradient
                      // back
      const double weights = static_cast<double>(in) * out * b;
      memory("autocast_weight_cast", Pass::kForward, weights * (4 + act_), OpGroup::kDefault, b);
      if (o.input_gradient) keep(weights * act_);
      memory("autocast_weight_grad_cast", W, weights * (act_ + 4), OpGroup::kDefault, b);
    }
    if (adapter_scope_) {
      w_.adapter_params += in * out * b;
      w_.adapter_tensors += b;
      return;
    }
    w_.gemm_weight_params += in * out * b;
    w_.param_tensors += b;
    w_.gemm_weight_tensors += b;
  }

  // A LoRA adapter beside targeted linear layer `t` (costmodel/layer_lora.cpp), whose shard on
  // this rank is `in` -> `out` over `tokens` rows (a column-parallel layer's `out`, a row-parallel
  // one's `in` split over tp), as Megatron-Bridge's ParallelLinearAdapter runs it
  // (src/megatron/bridge/peft/utils.py at 067f987df03b). Beside a column-parallel layer
  // (linear_qkv, linear_fc1) A is a ColumnParallelLinear of rank / tp outputs gathered
  // (gather_output: an all-gather of tokens x rank) and B one of the layer's `out` outputs; A reads
  // the norm's output the base layer gathered (Transformer Engine's
  // return_layernorm_output_gathered), and without sequence parallelism its input gradient is
  // all-reduced over the group (copy_to_tensor_model_parallel_region; disable_grad_reduce under
  // sequence parallelism). Beside a row-parallel layer (linear_proj, linear_fc2) A is a
  // RowParallelLinear (its tokens x rank output all-reduced) and B a ColumnParallelLinear whose
  // output is gathered (an all-gather of tokens x out), then scattered back to the sequence shard
  // under sequence parallelism (a split). Each B's input gradient is all-reduced (tokens x rank).
  // The output is scaled by alpha / rank and added to the layer's (two elementwise kernels).
  // Adapters run in the activations' dtype (plain Megatron linear layers: no low-precision recipe),
  // and keep A's output for B's weight gradient (A's input is the base layer's, kept already).
  void lora_adapter(LoraTarget t, int64_t tokens, int64_t in, int64_t out, bool column_parallel);

  // Work of the passes that train a LoRA adapter while the base weights stay frozen.
  class AdapterScope {
   public:
    explicit AdapterScope(Builder& b) : b_(b), outer_(b.adapter_scope_) {
      b_.adapter_scope_ = true;
    }
    ~AdapterScope() { b_.adapter_scope_ = outer_; }
    AdapterScope(const AdapterScope&) = delete;
    AdapterScope& operator=(const AdapterScope&) = delete;

   private:
    Builder& b_;
    bool outer_;
  };

  // GemmOp::streams of a linear layer: the framework's per-expert GEMMs for routed experts (one
  // kernel for all of them otherwise, and for every other batched GEMM).
  int64_t expert_gemm_streams(const LinearOptions& o) const {
    if (!o.routed_expert || o.batch <= 1 || !s_.framework) return 0;
    const ExpertGemms& e = s_.framework->expert_gemms;
    return e.kernels == ExpertGemmKernels::kPerExpert ? e.streams : 0;
  }

  // A bias's gradient: column sums of the output gradient over `rows` x `cols` (a reduction
  // kernel of its own, as PyTorch's linear backward and Megatron-LM's non-TE linear run it). The
  // forward's bias add rides in the GEMM's epilogue (cuBLASLt) and costs nothing apart.
  void bias_grad(double rows, double cols) {
    memory("bias_grad", Pass::kBackwardWeight, rows * cols * act_);
    if (autocast_) {  // the bias is cast with its weight, its gradient back
      memory("autocast_bias_cast", Pass::kForward, cols * (4 + act_));
      memory("autocast_bias_grad_cast", Pass::kBackwardWeight, cols * (act_ + 4));
    }
    ++w_.param_tensors;
  }

  // Under autocast a linear layer's fp32 input (a norm's output) is cast to the training dtype,
  // and the gradient of that copy back to fp32: one kernel each way.
  void autocast_input(double elements) {
    if (!autocast_) return;
    memory("autocast_input_cast", Pass::kForward, elements * (4 + act_));
    memory("autocast_input_grad_cast", Pass::kBackwardInput, elements * (act_ + 4));
  }

  // What the framework's sequence for `family` keeps (`kept`) or holds while it runs
  // (`transient`) beyond hetplan's kernel, over `elements` values.
  double kept(std::string_view family, double elements) const {
    const OpRecipe* r = recipe(family);
    return r ? r->kept.total_bytes(elements, act_) : 0;
  }
  double transient(std::string_view family, double elements) const {
    const OpRecipe* r = recipe(family);
    return r ? r->transient.total_bytes(elements, act_) : 0;
  }

  void gemm(const std::string& name, Pass pass, GemmShape shape, OpGroup group = OpGroup::kDefault,
            double flop_fraction = 1, bool quantized = false, int64_t streams = 0) {
    if (frozen(pass)) return;
    group = in_scope(group);
    w_.gemms.push_back({name, pass, shape, group, quantized,
                        quantized ? quantized_dtype(s_.precision) : s_.dtype, streams});
    w_.model_flops[static_cast<int>(pass)] +=
        flop_fraction == 1 ? shape.flops() : shape.flops() * flop_fraction;
  }

  void memory(const std::string& kernel, Pass pass, double bytes, OpGroup group = OpGroup::kDefault,
              int64_t launches = 1) {
    if (bytes <= 0 || frozen(pass)) return;
    w_.memory_ops.push_back({kernel, pass, bytes, in_scope(group), launches});
    // Per-op recomputation saves no memory-bound op's output (a quantiser's amax, which
    // torchtitan saves, is a few bytes of its work).
    if (op_policy_ && pass == Pass::kForward) w_.memory_ops.back().op_rerun = 1;
  }

  // The framework's recipe for `family`, when it runs that family its own way (framework.h), in
  // the mode the layer's part runs in (torch.compile may cover the blocks alone).
  const OpRecipe* recipe(std::string_view family) const {
    if (!s_.framework) return nullptr;
    return s_.framework->recipe(family, s_.framework->mode_for(part_of(family), s_.host_mode));
  }
  // The part of the model (FrameworkSpec::compiled_parts) `family` runs in on this layer.
  std::string_view part_of(std::string_view family) const {
    return w_.key.kind == LayerKind::kLmHead && family == "cross_entropy" ? "loss"
                                                                          : model_part(w_.key.kind);
  }

  // One pass of `family` over `elements` values: the framework's eager sequence where its recipe
  // has this pass (an "eager_" kernel of its launches and bytes), else hetplan's `kernel` moving
  // `fused_bytes`.
  void op(std::string_view family, const std::optional<OpPass> OpRecipe::*pass_of, Pass pass,
          const std::string& kernel, double elements, double fused_bytes,
          OpGroup group = OpGroup::kDefault) {
    const OpRecipe* r = recipe(family);
    if (r && (r->*pass_of)) {
      const OpPass& p = *(r->*pass_of);
      memory("eager_" + kernel, pass, p.total_bytes(elements, act_), group, p.launches);
    } else {
      memory(kernel, pass, fused_bytes, group);
    }
  }

  // Elementwise kernel over `elements` values: forward reads `in` tensors and writes `out`;
  // backward reads the `out` output gradients and `saved_in_bwd` saved inputs and writes the `in`
  // input gradients (GeLU and SwiGLU read their inputs again: the kernel bench counts them too).
  void elementwise(const std::string& name, double elements, int in, int out, int saved_in_bwd) {
    op(name, &OpRecipe::forward, Pass::kForward, name + "_fwd", elements,
       elements * act_ * (in + out));
    op(name, &OpRecipe::backward, Pass::kBackwardInput, name + "_bwd", elements,
       elements * act_ * (out + saved_in_bwd + in));
  }

  // A norm over `tokens` x `hidden`: forward reads x (and the gain), writes y and statistics;
  // input gradient reads dy, x and statistics, writes dx; weight gradient reads dy and x again.
  void norm(NormKind kind, double tokens, int64_t hidden) {
    if (kind == NormKind::kNone) return;
    const std::string k = kind == NormKind::kLayerNorm ? "layernorm" : "rmsnorm";
    w_.param_tensors += kind == NormKind::kLayerNorm ? 2 : 1;  // gain (and bias)
    const double elements = tokens * static_cast<double>(hidden);
    const double x = elements * stream_;
    op(k, &OpRecipe::forward, Pass::kForward, k + "_fwd", elements,
       2 * x + tokens * kNormStatBytes);
    op(k, &OpRecipe::backward, Pass::kBackwardInput, k + "_bwd", elements,
       3 * x + tokens * kNormStatBytes);
    op(k, &OpRecipe::weight, Pass::kBackwardWeight, k + "_bwd_weight", elements, 2 * x);
  }

  // What a norm over `tokens` x `hidden` keeps for backward: its input (the residual stream's
  // type) and statistics, and what the framework's sequence keeps beyond them.
  void keep_norm(NormKind kind, double tokens, int64_t hidden) {
    const double elements = tokens * static_cast<double>(hidden);
    keep(elements * stream_ + tokens * kNormStatBytes +
         (kind == NormKind::kRmsNorm ? kept("rmsnorm", elements) : 0));
  }

  // A norm and what it keeps for backward.
  void kept_norm(NormKind kind, double tokens, int64_t hidden) {
    if (kind == NormKind::kNone) return;
    norm(kind, tokens, hidden);
    keep_norm(kind, tokens, hidden);
  }

  // Dropout as CUDA runs it (one kernel each way): forward reads x and writes y and a one-byte
  // mask; backward reads dy and the mask and writes dx; values of `value_bytes` (default: the
  // activations').
  void dropout(double elements, double value_bytes = 0) {
    const double v = value_bytes > 0 ? value_bytes : act_;
    memory("dropout_fwd", Pass::kForward, elements * (2 * v + 1));
    memory("dropout_bwd", Pass::kBackwardInput, elements * (2 * v + 1));
  }

  // The ranks of the group of `scope` in this shape, and whether it has more than one.
  int64_t group_size(CommScope scope) const {
    switch (scope) {
      case CommScope::kTensor:
        return s_.tp;
      case CommScope::kContext:
        return s_.cp;
      case CommScope::kExpert:
        return s_.ep;
      case CommScope::kExpertTensor:
        return s_.expert_tp();
    }
    return 1;
  }
  bool spans(CommScope scope) const { return group_size(scope) > 1; }
  void comm(const std::string& name, Pass pass, CollectiveKind kind, double bytes,
            CommScope scope = CommScope::kTensor, CommOverlap overlap = CommOverlap::kNone,
            int64_t repeats = 1, int64_t group_ranks = 0) {
    if (spans(scope) && repeats > 0 && !frozen(pass)) {
      w_.comms.push_back({name, pass, kind, bytes, scope, overlap, repeats, group_ranks});
      w_.comms.back().group = in_scope(OpGroup::kDefault);
      op_policy_collective(w_.comms.back());
    }
  }

  // The host reads a device value back before it can issue what follows (LayerWork::host_syncs).
  void host_sync() { ++w_.host_syncs; }

  // The all-to-all of routed token copies over the expert group; the flex dispatcher sends a
  // token once per destination node and GPU (CommOp::dedup_experts).
  void routed_all_to_all(const std::string& name, Pass pass, double bytes, int64_t experts,
                         int64_t top_k) {
    if (!spans(CommScope::kExpert)) return;
    CommOp op{name, pass, CollectiveKind::kAllToAll, bytes, CommScope::kExpert};
    op.group = in_scope(OpGroup::kDefault);
    if (s_.dispatcher == MoeDispatcher::kFlex) {
      op.dedup_experts = experts;
      op.dedup_top_k = top_k;
    }
    w_.comms.push_back(op);
    op_policy_collective(w_.comms.back());
  }

  // The Megatron "g" (forward reduce) and "f" (backward reduce) around a tensor-parallel region of
  // `bytes` (whole activation): all-reduce, or with sequence parallelism all-gather +
  // reduce-scatter.
  void enter_tp_region(const std::string& name, double bytes) {
    if (s_.sequence_parallel) {
      comm(name + "_allgather", Pass::kForward, CollectiveKind::kAllGather, bytes);
      comm(name + "_reducescatter", Pass::kBackwardInput, CollectiveKind::kReduceScatter, bytes);
      // The weight gradient needs the gathered input again (Megatron re-gathers it).
      comm(name + "_regather", Pass::kBackwardWeight, CollectiveKind::kAllGather, bytes);
    } else {
      comm(name + "_allreduce_grad", Pass::kBackwardInput, CollectiveKind::kAllReduce, bytes);
    }
  }
  void leave_tp_region(const std::string& name, double bytes) {
    if (s_.sequence_parallel) {
      comm(name + "_reducescatter", Pass::kForward, CollectiveKind::kReduceScatter, bytes);
      comm(name + "_allgather_grad", Pass::kBackwardInput, CollectiveKind::kAllGather, bytes);
    } else {
      comm(name + "_allreduce", Pass::kForward, CollectiveKind::kAllReduce, bytes);
    }
  }

  // Activation bytes kept for backward without recomputation; selective recomputation of any
  // module of `dropped_by` (and of the modules in scope) drops them.
  void keep(double bytes, OpGroup dropped_by = OpGroup::kDefault) {
    dropped_by = in_scope(dropped_by);
    w_.activation_bytes[0] += bytes;
    if (!intersects(dropped_by, OpGroup::kCoreAttention)) w_.activation_bytes[1] += bytes;
    if (dropped_by != OpGroup::kDefault && bytes != 0) {
      auto& d = w_.dropped_bytes;
      auto it =
          std::find_if(d.begin(), d.end(), [&](const auto& e) { return e.first == dropped_by; });
      if (it == d.end())
        d.emplace_back(dropped_by, bytes);
      else
        it->second += bytes;
    }
  }
  // What full recomputation keeps: the layer's input, which per-op recomputation keeps too.
  void keep_full(double bytes) {
    w_.activation_bytes[static_cast<int>(Recompute::kFull)] += bytes;
    w_.activation_bytes[static_cast<int>(Recompute::kOp)] += bytes;
  }
  // An output per-op recomputation saves (it keeps nothing else but the layer's input).
  void keep_op(double bytes) { w_.activation_bytes[static_cast<int>(Recompute::kOp)] += bytes; }

  // Fused attention under per-op recomputation: saved with its output (`output_bytes`) and
  // logsumexp (`lse_bytes`) where the framework saves attention, else run again.
  void op_policy_attention(AttentionOp& forward, double output_bytes, double lse_bytes) {
    if (!op_policy_) return;
    if (op_policy_->attention)
      keep_op(output_bytes + lse_bytes);
    else
      forward.op_rerun = 1;
  }

  // The ops and kept tensors of a module of Megatron-Core's --recompute-modules, for as long as
  // the scope lives: a checkpointed module's forward ops re-run and its kept tensors drop when it
  // is recomputed (the tensors it keeps as its input are kept outside the scope).
  class ModuleScope {
   public:
    ModuleScope(Builder& b, RecomputeModule m) : b_(b), outer_(b.scope_) {
      b_.scope_ = b_.scope_ | module_group(m);
      b_.w_.modules = b_.w_.modules | module_group(m);
    }
    ~ModuleScope() { b_.scope_ = outer_; }
    ModuleScope(const ModuleScope&) = delete;
    ModuleScope& operator=(const ModuleScope&) = delete;

   private:
    Builder& b_;
    OpGroup outer_;
  };
  // Marks the layer as having module `m` (its recomputation changes something) without a scope.
  void has(RecomputeModule m) { w_.modules = w_.modules | module_group(m); }

  double act() const { return act_; }
  // Bytes per element a quantisable linear layer's input is kept in: the recipe's quantised copy
  // (costmodel/precision.h), else the activations' dtype.
  double linear_input() const {
    return is_quantized(s_.precision) ? saved_input_bytes_per_element(s_.precision) : act_;
  }
  // The residual stream's, the norms' and the embedding's values: fp32 under autocast.
  double stream() const { return stream_; }
  bool autocast() const { return autocast_; }
  const LayerShape& shape() const { return s_; }
  LayerWork& work() { return w_; }

 private:
  const LayerShape& s_;
  LayerWork& w_;
  double act_ = 2;
  bool autocast_ = false;
  double stream_ = 2;
  OpGroup scope_ = OpGroup::kDefault;
  bool adapter_scope_ = false;  // inside a LoRA adapter (AdapterScope)
  // The framework's per-op recomputation and the matmuls of the layer counted so far.
  const OpRecompute* op_policy_ =
      s_.framework && s_.framework->op_recompute ? &*s_.framework->op_recompute : nullptr;
  int64_t matmuls_ = 0;

  OpGroup in_scope(OpGroup group) const { return group | scope_; }
  // Under LoRA the base weights are frozen: their weight-gradient work (GEMMs, bias and norm
  // gradients, the embedding's scatter, the gradients' adds and the collectives that feed them)
  // does not run; the adapters' does.
  bool frozen(Pass pass) const {
    return pass == Pass::kBackwardWeight && s_.lora.enabled() && !adapter_scope_;
  }

  // The share of a linear's forward GEMM that per-op recomputation re-runs, keeping the saved
  // outputs (OpRecompute: each matmul of `parts` counted; even ones re-run under
  // every_second_matmul).
  double op_policy_rerun(const std::string& name, int64_t tokens, int64_t out,
                         const LinearOptions& o, bool quantized) {
    if (!op_policy_) return 0;
    const OpRecompute& p = *op_policy_;
    const double rows = static_cast<double>(tokens) * o.batch;
    const auto& forced = p.recomputed_linears;
    if (std::find(forced.begin(), forced.end(), name) != forced.end()) return 1;
    if ((quantized && !p.quantized_linears_as_matmuls) || o.batch > 1) {
      // torch._scaled_mm, torch._grouped_mm: not counted
      const bool saved = quantized ? p.quantized_matmuls : p.grouped_matmuls;
      if (saved) keep_op(rows * static_cast<double>(out) * act_);
      return saved ? 0 : 1;
    }
    int64_t rerun = 0;
    const bool split = o.parts[0] > 0;
    for (size_t i = 0; i < (split ? o.parts.size() : 1); ++i) {
      const int64_t width = split ? o.parts[i] : out;
      if (width <= 0) break;
      ++matmuls_;
      const bool saved = p.matmuls && !(p.every_second_matmul && matmuls_ % 2 == 0);
      if (saved)
        keep_op(rows * static_cast<double>(width) * act_);
      else
        rerun += width;
    }
    return static_cast<double>(rerun) / static_cast<double>(out);
  }

  // A forward collective under per-op recomputation: its output saved (the framework saves
  // reduce-scatters or all-to-alls: no second transfer), else sent again.
  void op_policy_collective(CommOp& c) {
    if (!op_policy_ || c.pass != Pass::kForward) return;
    const OpRecompute& p = *op_policy_;
    const bool saved = (c.kind == CollectiveKind::kReduceScatter && p.reduce_scatter) ||
                       (c.kind == CollectiveKind::kAllToAll && p.all_to_all) ||
                       (c.kind == CollectiveKind::kAllGather && p.all_gather);
    if (!saved) {
      c.op_rerun = 1;
      return;
    }
    // nccl-tests' sizes: a reduce-scatter's output is 1/n of `bytes`, an all-gather's and an
    // all-to-all's the whole of it.
    const double ranks =
        static_cast<double>(c.group_ranks > 0 ? c.group_ranks : group_size(c.scope));
    keep_op(c.kind == CollectiveKind::kReduceScatter ? c.bytes / ranks : c.bytes);
  }
};

// A whole-block decomposition's common sizes on one rank.
struct BlockSizes {
  int64_t h = 0, seq = 0, mb = 0;
  int64_t cp = 1;
  int64_t T = 0;       // tokens this rank's GEMMs see inside tensor-parallel regions: mb x seq / cp
  double Tr = 0;       // tokens outside them: T / tp under sequence parallelism, else T
  double x_bytes = 0;  // one whole hidden activation of T tokens
};

BlockSizes block_sizes(const LayerSpec& layer, const LayerShape& s, double act);

// Attention of a block (its norm to its residual add), the MLP or MoE (norm to residual add), and
// an MTP module's parts around its block: costmodel/layer_attention.cpp, layer_moe.cpp,
// layer_mtp.cpp.
void attention_part(const LayerSpec& layer, const TransformerLayer& b, const BlockSizes& z,
                    Builder& B);
void mlp_part(const LayerSpec& layer, const TransformerLayer& b, const BlockSizes& z, Builder& B);
// Why LoRA cannot adapt `layer` at tensor width `tp` ("" when it can, or the layer is not a
// block): costmodel/layer_lora.cpp.
std::string lora_layer_problem(const LayerSpec& layer, const Lora& lora, int64_t tp);
// A hybrid model's Mamba-2 layer: its norm to its residual add (costmodel/layer_mamba.cpp).
void mamba_part(const TransformerLayer& b, const BlockSizes& z, Builder& B);
void mtp_prologue(const TransformerLayer& b, const BlockSizes& z, Builder& B);
void mtp_epilogue(const TransformerLayer& b, const BlockSizes& z, Builder& B);
// The residual branch after a row-parallel projection: bias gradient, dropout, add.
void residual(const TransformerLayer& b, const BlockSizes& z, bool bias, Builder& B);
// Megatron-LM's vocabulary-parallel cross-entropy over `tokens` x `vocab_per_rank` logits.
void cross_entropy(double tokens, int64_t vocab_per_rank, Builder& B);

}  // namespace hetplan::layer_detail
