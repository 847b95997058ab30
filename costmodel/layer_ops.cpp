#include "costmodel/layer_ops.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan {

AttentionWork attention_work(const AttentionOp& op) {
  return {op.flops, op.batch * op.heads, op.seq_len, op.head_dim, op.causal};
}

std::string_view to_string(Pass pass) {
  switch (pass) {
    case Pass::kForward:
      return "forward";
    case Pass::kBackwardInput:
      return "backward_input";
    case Pass::kBackwardWeight:
      return "backward_weight";
  }
  return "?";
}

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

bool parse_recompute(std::string_view text, Recompute& out) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    if (text == to_string(r)) {
      out = r;
      return true;
    }
  }
  return false;
}

namespace {

// Megatron-LM pads the vocabulary to a multiple of 128 x tp (--make-vocab-size-divisible-by).
int64_t padded_vocab(int64_t vocab, int64_t tp) {
  const int64_t m = 128 * tp;
  return (vocab + m - 1) / m * m;
}

constexpr double kNormStatBytes = 8;  // mean and rstd (or rstd alone, padded) per token, fp32

// Accumulates one layer's ops with the conventions of the header.
class Builder {
 public:
  Builder(const LayerShape& shape, LayerWork& work) : s_(shape), w_(work) {
    act_ = dtype_bytes(shape.dtype);
    autocast_ = shape.framework && shape.framework->precision == Precision::kAutocast && act_ < 4;
    stream_ = autocast_ ? 4 : act_;
  }

  // A linear layer y = x W^T with `in` -> `out` features over `tokens` rows: forward GEMM,
  // input-gradient GEMM, weight-gradient GEMM. `experts` independent copies are batched.
  void linear(const std::string& name, int64_t tokens, int64_t in, int64_t out, int64_t batch = 1,
              bool input_gradient = true) {
    if (tokens <= 0 || in <= 0 || out <= 0) return;
    gemm(name, Pass::kForward, {out, tokens, in, batch, true, false});
    if (input_gradient) gemm(name, Pass::kBackwardInput, {in, tokens, out, batch, false, false});
    gemm(name, Pass::kBackwardWeight, {in, out, tokens, batch, false, true});
    if (autocast_) {  // its weight cast per forward (kept for the input gradient), the gradient
                      // back
      const double weights = static_cast<double>(in) * out * batch;
      memory("autocast_weight_cast", Pass::kForward, weights * (4 + act_), OpGroup::kDefault,
             batch);
      if (input_gradient) keep(weights * act_);
      memory("autocast_weight_grad_cast", Pass::kBackwardWeight, weights * (act_ + 4),
             OpGroup::kDefault, batch);
    }
    w_.gemm_weight_params += in * out * batch;
    w_.param_tensors += batch;
    w_.gemm_weight_tensors += batch;
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

  void gemm(const std::string& name, Pass pass, GemmShape shape,
            OpGroup group = OpGroup::kDefault) {
    w_.gemms.push_back({name, pass, shape, group});
    w_.model_flops[static_cast<int>(pass)] += shape.flops();
  }

  void memory(const std::string& kernel, Pass pass, double bytes, OpGroup group = OpGroup::kDefault,
              int64_t launches = 1) {
    if (bytes > 0) w_.memory_ops.push_back({kernel, pass, bytes, group, launches});
  }

  // The framework's recipe for `family`, when it runs that family its own way (framework.h).
  const OpRecipe* recipe(std::string_view family) const {
    return s_.framework ? s_.framework->recipe(family, s_.host_mode) : nullptr;
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

  // Dropout as CUDA runs it (one kernel each way): forward reads x and writes y and a one-byte
  // mask; backward reads dy and the mask and writes dx; values of `value_bytes` (default: the
  // activations').
  void dropout(double elements, double value_bytes = 0) {
    const double v = value_bytes > 0 ? value_bytes : act_;
    memory("dropout_fwd", Pass::kForward, elements * (2 * v + 1));
    memory("dropout_bwd", Pass::kBackwardInput, elements * (2 * v + 1));
  }

  void comm(const std::string& name, Pass pass, CollectiveKind kind, double bytes) {
    if (s_.tp > 1) w_.comms.push_back({name, pass, kind, bytes});
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

  // Activation bytes kept for backward under none / selective / full recomputation.
  void keep(double bytes, bool core_attention = false) {
    w_.activation_bytes[0] += bytes;
    if (!core_attention) w_.activation_bytes[1] += bytes;
  }
  void keep_full(double bytes) { w_.activation_bytes[2] += bytes; }

  double act() const { return act_; }
  // The residual stream's, the norms' and the embedding's values: fp32 under autocast.
  double stream() const { return stream_; }
  bool autocast() const { return autocast_; }

 private:
  const LayerShape& s_;
  LayerWork& w_;
  double act_ = 2;
  double stream_ = 2;
  bool autocast_ = false;
};

void check_divides(const LayerSpec& layer, const char* what, int64_t value, int64_t tp) {
  if (value % tp != 0)
    throw InputError(fmt::format("tensor-parallel width {} does not divide {} {} of layer {}", tp,
                                 what, value, layer.name));
}

void transformer(const LayerSpec& layer, const TransformerLayer& b, const LayerShape& s, Builder& B,
                 LayerWork& w) {
  const int64_t t = s.tp;
  check_divides(layer, "the heads", b.heads, t);
  check_divides(layer, "the KV heads", b.kv_heads, t);
  check_divides(layer, "the MLP width", b.ffn_hidden, t);
  const int64_t h = layer.hidden, seq = layer.seq_len, mb = s.micro_batch;
  const int64_t T = mb * seq;
  const double act = B.act();
  // Tokens a rank processes outside the tensor-parallel regions: all of them, or 1/t with SP.
  const double Tr = s.sequence_parallel ? static_cast<double>(T) / t : static_cast<double>(T);
  const double x_bytes = static_cast<double>(T) * h * act;  // one whole hidden activation
  const int64_t heads = b.heads / t, kv = b.kv_heads / t, hd = b.head_dim;
  const bool dropout = b.dropout > 0;

  // Attention: norm, QKV projection, (rotary), attention core, output projection, residual.
  B.norm(b.norm, Tr, h);
  B.keep_norm(b.norm, Tr, h);  // norm input and statistics
  B.enter_tp_region("attn", x_bytes);
  const int64_t qkv_width = (heads + 2 * kv) * hd;
  B.autocast_input(Tr * h);
  B.linear("qkv", T, h, qkv_width);
  if (b.bias) B.bias_grad(static_cast<double>(T), static_cast<double>(qkv_width));
  // Q, K and V are views of the projection's output; their gradients are joined again (a copy
  // kernel), in PyTorch as in Megatron-LM.
  B.memory("qkv_grad_concat", Pass::kBackwardInput, 2.0 * T * qkv_width * act);
  B.keep(Tr * h * act);  // QKV input (the norm output; sharded under SP and re-gathered)
  if (b.rotary) {
    const double rotated = static_cast<double>(T) * (heads + kv) * hd;
    B.elementwise("rotary", rotated, 1, 1, 0);
    B.keep(B.kept("rotary", rotated));
  }
  const double qk_bytes = static_cast<double>(T) * (heads + kv) * hd * act;
  const double v_bytes = static_cast<double>(T) * kv * hd * act;
  const double out_in_bytes = static_cast<double>(T) * heads * hd * act;
  B.keep(qk_bytes + v_bytes);  // Q, K, V
  const double scores = static_cast<double>(mb) * heads * seq * seq;
  if (s.flash_attention) {
    const double full = 4.0 * mb * heads * seq * seq * hd;  // QK^T and PV, 2 flops per MAC
    // Flash kernels are compiled for a few head sizes and run the next one up: FlashAttention-2
    // rounds the head size up to a multiple of 32 up to 192, else to 256 (`head_size_rounded` in
    // its csrc/flash_attn/flash_api.cpp), so a head of 80 costs what one of 96 does.
    const int64_t kernel_hd = hd <= 192 ? (hd + 31) / 32 * 32 : 256;
    const double padded = full * static_cast<double>(kernel_hd) / static_cast<double>(hd);
    const double executed = b.causal ? padded / 2 : padded;
    w.attention.push_back({Pass::kForward, mb, heads, kv, seq, hd, b.causal, executed});
    // Backward recomputes P and runs dV, dP, dQ, dK: 2.5x the forward GEMM work.
    w.attention.push_back({Pass::kBackwardInput, mb, heads, kv, seq, hd, b.causal, 2.5 * executed});
    w.model_flops[0] += full;
    w.model_flops[1] += 2 * full;
    B.keep(static_cast<double>(mb) * heads * seq * 4);  // logsumexp, fp32
  } else {
    const OpGroup core = OpGroup::kCoreAttention;
    const int64_t bh = mb * heads;
    B.gemm("scores", Pass::kForward, {seq, seq, hd, bh, true, false}, core);
    B.op("softmax", &OpRecipe::forward, Pass::kForward, "softmax_fwd", scores, 2 * scores * act,
         core);
    if (dropout) B.memory("dropout_fwd", Pass::kForward, scores * (2 * act + 1), core);
    B.gemm("context", Pass::kForward, {hd, seq, seq, bh, false, false}, core);
    B.gemm("context_dprobs", Pass::kBackwardInput, {seq, seq, hd, bh, true, false});
    B.gemm("context_dv", Pass::kBackwardInput, {hd, seq, seq, bh, false, true});
    if (dropout) B.memory("dropout_bwd", Pass::kBackwardInput, scores * (2 * act + 1));
    B.op("softmax", &OpRecipe::backward, Pass::kBackwardInput, "softmax_bwd", scores,
         3 * scores * act);
    B.gemm("scores_dq", Pass::kBackwardInput, {hd, seq, seq, bh, false, false});
    B.gemm("scores_dk", Pass::kBackwardInput, {hd, seq, seq, bh, false, true});
    // Softmax output, dropout mask and dropout output (Korthikanti et al. 2022, 5as^2b/t).
    B.keep(scores * act + B.kept("softmax", scores), true);
    if (dropout) B.keep(scores * (1 + act), true);
  }
  B.linear("attn_out", T, heads * hd, h);
  B.keep(out_in_bytes);
  B.leave_tp_region("attn", x_bytes);
  // The residual branch: the row-parallel projection's bias (added once, after the reduction; its
  // gradient over this rank's tokens), dropout (one kernel each way, its mask kept) and the
  // residual add (reads both, writes the sum). In backward the residual stream's gradient is the
  // sum of its two consumers' (the norm and the add): one more add. Megatron-LM fuses bias,
  // dropout and add into one forward kernel (3 x act + 1 bytes per element instead of 5 x act + 1).
  const double res_elems = Tr * h;
  const double stream = B.stream();
  // Under autocast the branch's (bf16) output is added to the fp32 stream, and the stream's
  // gradient is cast back for the branch: one more kernel in backward.
  const auto residual_add = [&] {
    B.memory("residual_add", Pass::kForward, res_elems * (2 * stream + act));
    if (B.autocast())
      B.memory("autocast_residual_grad_cast", Pass::kBackwardInput, res_elems * (stream + act));
  };
  auto residual = [&](bool bias) {
    if (bias) B.bias_grad(Tr, static_cast<double>(h));
    const OpRecipe* fused = dropout ? B.recipe("bias_dropout_add") : nullptr;
    if (dropout) {
      B.keep(res_elems);              // mask, one byte per element
      if (fused && fused->forward) {  // one kernel: the framework's bias-dropout-add
        B.op("bias_dropout_add", &OpRecipe::forward, Pass::kForward, "bias_dropout_add_fwd",
             res_elems, 0);
      } else {
        B.memory("dropout_fwd", Pass::kForward, res_elems * (2 * act + 1));
        residual_add();
      }
      if (fused && fused->backward) {
        B.op("bias_dropout_add", &OpRecipe::backward, Pass::kBackwardInput, "bias_dropout_add_bwd",
             res_elems, 0);
      } else {
        B.memory("dropout_bwd", Pass::kBackwardInput, res_elems * (2 * act + 1));
        B.memory("residual_grad_add", Pass::kBackwardInput, 3 * res_elems * stream);
      }
      return;
    }
    residual_add();
    B.memory("residual_grad_add", Pass::kBackwardInput, 3 * res_elems * stream);
  };
  residual(b.bias);

  // MLP (dense or mixture of experts).
  B.norm(b.norm, Tr, h);
  B.keep_norm(b.norm, Tr, h);
  B.enter_tp_region("mlp", x_bytes);
  B.autocast_input(Tr * h);
  const int64_t f = b.ffn_hidden / t;
  const bool swiglu = b.activation == MlpActivation::kSwiglu;
  const int64_t up = swiglu ? 2 * f : f;
  int64_t tokens = T;  // tokens through each expert (all of them for a dense MLP)
  int64_t experts = 1;
  if (b.experts > 1) {
    B.linear("router", T, h, b.experts);
    B.memory("router_topk", Pass::kForward, static_cast<double>(T) * b.experts * 4);
    // Dispatch and combine copies of the routed tokens (top-k copies each).
    B.elementwise("moe_permute", static_cast<double>(T) * b.top_k * h, 1, 1, 0);
    experts = b.experts;
    tokens = T * b.top_k / b.experts;                    // balanced routing, capacity factor 1
    B.keep(static_cast<double>(T) * b.top_k * h * act);  // dispatched expert inputs
  } else {
    B.keep(Tr * h * act);  // fc1 input
  }
  B.linear("fc1", tokens, h, up, experts);
  const double expert_rows = static_cast<double>(tokens) * experts;
  if (b.mlp_bias) B.bias_grad(expert_rows, static_cast<double>(up));
  const double act_elems = expert_rows * f;
  if (swiglu) {
    B.elementwise("swiglu", act_elems, 2, 1, 2);
  } else {
    B.elementwise(b.activation == MlpActivation::kGelu ? "gelu" : "relu", act_elems, 1, 1, 1);
  }
  B.keep(act_elems * act * (swiglu ? 2 : 1));  // activation input
  if (swiglu) B.keep(B.kept("swiglu", act_elems));
  B.keep(act_elems * act);  // fc2 input (activation output)
  B.linear("fc2", tokens, f, h, experts);
  B.leave_tp_region("mlp", x_bytes);
  residual(b.mlp_bias);

  B.keep_full(Tr * h * stream);  // full recomputation keeps the layer input only
  w.output_bytes = static_cast<double>(T) * h * stream;
}

void embedding(const LayerSpec& layer, const EmbeddingLayer& e, const LayerShape& s, Builder& B,
               LayerWork& w) {
  const int64_t T = s.micro_batch * layer.seq_len;
  const double act = B.act();
  const double x_bytes = static_cast<double>(T) * layer.hidden * act;
  // The tables and what they give are in the stream's type (fp32 parameters under autocast).
  const double stream_bytes = static_cast<double>(T) * layer.hidden * B.stream();
  const double Tr = s.sequence_parallel ? static_cast<double>(T) / s.tp : static_cast<double>(T);
  // One gather per table (rows read, hidden states written; positions and token types have
  // tables of their own), and an add per extra table.
  const int tables = 1 + (e.max_positions > 0) + (e.token_types > 0);
  w.param_tensors += tables;
  B.memory("embedding_fwd", Pass::kForward, stream_bytes * 2 * tables);
  if (tables > 1) B.memory("embedding_add", Pass::kForward, stream_bytes * 3 * (tables - 1));
  // The vocabulary-parallel lookup ends with a reduction over the tensor-parallel group.
  B.leave_tp_region("embedding", x_bytes);
  // Weight gradient: a dense gradient of every whole table (zeroed, then the rows of dy added),
  // as PyTorch's embedding backward and Megatron-LM form it.
  const int64_t vocab_rows = (s.pad_vocab ? padded_vocab(e.vocab, s.tp) : e.vocab) / s.tp;
  const double table_rows = static_cast<double>(vocab_rows + e.max_positions + e.token_types);
  B.memory("embedding_bwd", Pass::kBackwardWeight,
           stream_bytes * tables + table_rows * layer.hidden * B.stream());
  if (e.norm != NormKind::kNone) {
    B.norm(e.norm, Tr, layer.hidden);
    B.keep_norm(e.norm, Tr, layer.hidden);
  }
  if (e.dropout > 0) {
    B.dropout(Tr * layer.hidden, B.stream());
    B.keep(Tr * layer.hidden);
  }
  B.keep(static_cast<double>(T) * 8);  // token ids (int64)
  B.keep_full(static_cast<double>(T) * 8);
  w.output_bytes = stream_bytes;
}

void lm_head(const LayerSpec& layer, const LmHeadLayer& head, const LayerShape& s, Builder& B,
             LayerWork& w) {
  const int64_t T = s.micro_batch * layer.seq_len, h = layer.hidden;
  const double act = B.act();
  const double Tr = s.sequence_parallel ? static_cast<double>(T) / s.tp : static_cast<double>(T);
  const double x_bytes = static_cast<double>(T) * h * act;
  const int64_t v = (s.pad_vocab ? padded_vocab(head.vocab, s.tp) : head.vocab) / s.tp;
  B.norm(head.final_norm, Tr, h);
  if (head.final_norm != NormKind::kNone) B.keep_norm(head.final_norm, Tr, h);
  if (head.transform) {  // BERT: dense + GeLU + LayerNorm, replicated
    B.autocast_input(Tr * h);
    B.linear("transform", static_cast<int64_t>(Tr), h, h);
    B.bias_grad(Tr, static_cast<double>(h));
    B.elementwise("gelu", Tr * h, 1, 1, 1);
    B.norm(NormKind::kLayerNorm, Tr, h);
    B.keep(3 * Tr * h * act + Tr * kNormStatBytes);
  }
  B.enter_tp_region("logits", x_bytes);
  B.autocast_input(Tr * h);
  B.linear("logits", T, h, v);
  if (head.output_bias) B.bias_grad(static_cast<double>(T), static_cast<double>(v));
  B.keep(Tr * h * act);  // logits input
  // Vocabulary-parallel cross-entropy as Megatron-LM runs it by default (no loss fusion; the
  // reference harness the same): the logits to fp32 (a copy when they are fp32 already), max,
  // subtract in place, exp in place, sum, divide in place: the fp32 softmax is kept for backward
  // (4sbv/t in Korthikanti et al.). Max, sum of exponentials and target logit are all-reduced (one
  // fp32 per token each). Backward scales the kept softmax in place and converts it back.
  const double logits = static_cast<double>(T) * v;
  const Pass F = Pass::kForward, Bi = Pass::kBackwardInput;
  const OpRecipe* ce = B.recipe("cross_entropy");  // a framework's own loss kernels
  if (ce && ce->forward) {
    B.op("cross_entropy", &OpRecipe::forward, F, "cross_entropy_fwd", logits, 0);
  } else {
    B.memory(act == 4 ? "ce_copy" : "ce_to_fp32", F, logits * (act + 4));
    B.memory("ce_max", F, logits * 4);
    B.memory("ce_subtract_max", F, logits * 8);
    B.memory("ce_exp", F, logits * 8);
    B.memory("ce_sum", F, logits * 4);
    B.memory("ce_normalise", F, logits * 8);
  }
  if (ce && ce->backward) {
    B.op("cross_entropy", &OpRecipe::backward, Bi, "cross_entropy_bwd", logits, 0);
  } else {
    B.memory("ce_grad_scale", Bi, logits * 8);
    if (act != 4) B.memory("ce_grad_to_act", Bi, logits * (4 + act));
  }
  for (const char* name : {"ce_max", "ce_sum", "ce_target"})
    B.comm(name, Pass::kForward, CollectiveKind::kAllReduce, static_cast<double>(T) * 4);
  B.keep(logits * 4);
  w.transient_bytes = B.transient("cross_entropy", logits);
  B.keep_full(Tr * h * B.stream());
  w.output_bytes = static_cast<double>(T) * 4;  // the loss per token
}

}  // namespace

LayerKey layer_key(const LayerSpec& layer, const LayerShape& shape) {
  LayerKey k;
  k.kind = layer.kind();
  k.hidden = layer.hidden;
  k.seq_len = layer.seq_len;
  k.tp = shape.tp;
  if (const auto* b = layer.block()) {
    k.heads = b->heads;
    k.kv_heads = b->kv_heads > 0 ? b->kv_heads : b->heads;
    k.head_dim = b->head_dim > 0 ? b->head_dim : layer.hidden / std::max<int64_t>(1, b->heads);
    k.ffn_hidden = b->ffn_hidden;
    k.experts = b->experts;
    k.gated = b->activation == MlpActivation::kSwiglu;
    k.flash_attention = shape.flash_attention;
  }
  return k;
}

std::string describe(const LayerKey& k) {
  switch (k.kind) {
    case LayerKind::kEmbedding:
      return fmt::format("embedding h{} s{} tp{}", k.hidden, k.seq_len, k.tp);
    case LayerKind::kLmHead:
      return fmt::format("lm_head h{} s{} tp{}", k.hidden, k.seq_len, k.tp);
    case LayerKind::kTransformer:
      break;
  }
  std::string d = fmt::format("block h{} a{}", k.hidden, k.heads);
  if (k.kv_heads != k.heads) d += fmt::format(" kv{}", k.kv_heads);
  if (k.head_dim * k.heads != k.hidden) d += fmt::format(" d{}", k.head_dim);
  d += fmt::format(" s{} ffn{}{}", k.seq_len, k.ffn_hidden, k.gated ? " swiglu" : "");
  if (k.experts > 1) d += fmt::format(" x{} experts", k.experts);
  d += fmt::format(" tp{}", k.tp);
  if (!k.flash_attention) d += " unfused";
  return d;
}

LayerWork layer_work(const LayerSpec& layer, const LayerShape& shape) {
  if (shape.micro_batch <= 0 || shape.tp <= 0)
    throw InputError(fmt::format("micro-batch ({}) and tensor width ({}) must be > 0",
                                 shape.micro_batch, shape.tp));
  LayerWork w;
  w.key = layer_key(layer, shape);
  w.micro_batch = shape.micro_batch;
  Builder B(shape, w);
  if (const auto* b = layer.block()) {
    transformer(layer, *b, shape, B, w);
  } else if (const auto* e = layer.embedding()) {
    embedding(layer, *e, shape, B, w);
  } else {
    lm_head(layer, std::get<LmHeadLayer>(layer.op), shape, B, w);
  }
  w.params = layer_parameters(layer, shape.tp, /*unique=*/false);
  // Each micro-batch's gradients are added into fp32 main gradients (Megatron-LM's and the
  // harness's mixed precision): reads the gradient and the main gradient, writes the latter. With
  // gradient-accumulation fusion the weight-gradient GEMMs write into them directly, and only the
  // other parameters (norms, biases, embedding tables) take the add.
  const int64_t added = shape.grad_accumulation_fusion ? w.params - w.gemm_weight_params : w.params;
  w.accumulated_tensors =
      shape.grad_accumulation_fusion ? w.param_tensors - w.gemm_weight_tensors : w.param_tensors;
  if (added > 0 && B.autocast()) {
    // Autograd accumulates the fp32 gradients (cast back from the half-precision GEMMs above)
    // into .grad: the first micro-batch's become .grad, each later one is added (12 B).
    const int64_t m = shape.microbatches;
    w.accumulate_share = m > 0 ? static_cast<double>(m - 1) / static_cast<double>(m) : 1.0;
    B.memory("grad_accumulate", Pass::kBackwardWeight,
             static_cast<double>(added) * 12 * w.accumulate_share);
  } else if (added > 0) {
    B.memory("grad_accumulate", Pass::kBackwardWeight, static_cast<double>(added) * (B.act() + 8));
  }
  // Full recomputation never keeps more than no recomputation.
  w.activation_bytes[2] = std::min(w.activation_bytes[2], w.activation_bytes[0]);
  return w;
}

LayerKernels layer_kernels(const LayerWork& w, Recompute mode) {
  LayerKernels k;
  auto add = [&](Pass pass, OpGroup group, double n) {
    k.pass[static_cast<int>(pass)] += n;
    if (recomputed(mode, pass, group)) k.recompute += n;
  };
  for (const auto& g : w.gemms) add(g.pass, g.group, 1);
  for (const auto& m : w.memory_ops)
    add(m.pass, m.group,
        m.kernel == "grad_accumulate"
            ? static_cast<double>(w.accumulated_tensors) * w.accumulate_share
            : static_cast<double>(m.launches));
  for (const auto& a : w.attention) add(a.pass, OpGroup::kDefault, 1);
  for (const auto& c : w.comms) add(c.pass, OpGroup::kDefault, 1);
  return k;
}

std::string tensor_parallel_problem(const ModelSpec& model, int64_t tp) {
  for (const auto& l : model.layers) {
    if (const auto* b = l.block()) {
      if (b->heads % tp)
        return fmt::format("tp {} does not divide the {} heads of {}", tp, b->heads, l.name);
      if (b->kv_heads % tp)
        return fmt::format("tp {} does not divide the {} KV heads of {}", tp, b->kv_heads, l.name);
      if (b->ffn_hidden % tp)
        return fmt::format("tp {} does not divide the MLP width {} of {}", tp, b->ffn_hidden,
                           l.name);
    }
  }
  return "";
}

double model_flops_per_sample(const ModelSpec& model) {
  double total = 0;
  LayerShape one;
  one.pad_vocab = false;  // count the real vocabulary, not Megatron's padding
  for (const auto& l : model.layers) {
    LayerWork w = layer_work(l, one);
    for (double f : w.model_flops) total += f;
  }
  return total;
}

}  // namespace hetplan
