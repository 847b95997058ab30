#include "costmodel/layer_ops.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodel/errors.h"
#include "costmodel/layer_builder.h"

namespace hetplan {

AttentionWork attention_work(const AttentionOp& op) {
  return {op.flops,  op.batch * op.heads, op.seq_len, op.head_dim,
          op.causal, op.kv_seq_len,       op.window};
}

std::string_view to_string(CpComm c) {
  switch (c) {
    case CpComm::kP2p:
      return "p2p";
    case CpComm::kAllGather:
      return "all_gather";
    case CpComm::kA2a:
      return "a2a";
    case CpComm::kA2aP2p:
      return "a2a+p2p";
  }
  return "?";
}

bool parse_cp_comm(std::string_view text, CpComm& out) {
  for (CpComm c : {CpComm::kP2p, CpComm::kAllGather, CpComm::kA2a, CpComm::kA2aP2p})
    if (text == to_string(c)) {
      out = c;
      return true;
    }
  return false;
}

std::string_view to_string(MoeDispatcher d) {
  switch (d) {
    case MoeDispatcher::kAllGather:
      return "allgather";
    case MoeDispatcher::kAllToAll:
      return "alltoall";
    case MoeDispatcher::kFlex:
      return "flex";
  }
  return "alltoall";
}

bool parse_moe_dispatcher(std::string_view text, MoeDispatcher& out) {
  for (MoeDispatcher d :
       {MoeDispatcher::kAllGather, MoeDispatcher::kAllToAll, MoeDispatcher::kFlex})
    if (text == to_string(d)) {
      out = d;
      return true;
    }
  return false;
}

std::string_view to_string(CommScope s) {
  switch (s) {
    case CommScope::kTensor:
      return "tensor";
    case CommScope::kContext:
      return "context";
    case CommScope::kExpert:
      return "expert";
    case CommScope::kExpertTensor:
      return "expert_tensor";
  }
  return "?";
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
    case Recompute::kOp:
      return "op";
  }
  return "?";
}

bool parse_recompute(std::string_view text, Recompute& out) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull, Recompute::kOp}) {
    if (text == to_string(r)) {
      out = r;
      return true;
    }
  }
  return false;
}

namespace {
// In the order of TransformerConfig.recompute_modules' docstring (d98e8a64dd).
constexpr RecomputeModule kModuleOrder[] = {
    RecomputeModule::kCoreAttn,     RecomputeModule::kMoeAct, RecomputeModule::kLayernorm,
    RecomputeModule::kMlaUpProj,    RecomputeModule::kMlp,    RecomputeModule::kMoe,
    RecomputeModule::kSharedExperts};
}  // namespace

std::string_view to_string(RecomputeModule m) {
  switch (m) {
    case RecomputeModule::kCoreAttn:
      return "core_attn";
    case RecomputeModule::kMlp:
      return "mlp";
    case RecomputeModule::kMoeAct:
      return "moe_act";
    case RecomputeModule::kLayernorm:
      return "layernorm";
    case RecomputeModule::kMlaUpProj:
      return "mla_up_proj";
    case RecomputeModule::kMoe:
      return "moe";
    case RecomputeModule::kSharedExperts:
      return "shared_experts";
  }
  return "?";
}

bool parse_recompute_module(std::string_view text, RecomputeModule& out) {
  for (RecomputeModule m : kModuleOrder) {
    if (text == to_string(m)) {
      out = m;
      return true;
    }
  }
  return false;
}

std::string recompute_module_names() {
  std::vector<std::string_view> names;
  for (RecomputeModule m : kModuleOrder) names.push_back(to_string(m));
  return fmt::format("{}", fmt::join(names, ", "));
}

std::vector<RecomputeModule> modules_of(OpGroup set) {
  std::vector<RecomputeModule> out;
  for (RecomputeModule m : kModuleOrder)
    if (has_module(set, m)) out.push_back(m);
  return out;
}

double LayerWork::activation(const Recomputation& r) const {
  if (r.granularity != Recompute::kSelective || r.modules == OpGroup::kCoreAttention)
    return activation(r.granularity);
  double bytes = activation_bytes[0];
  for (const auto& [group, dropped] : dropped_bytes)
    if (intersects(group, r.modules)) bytes -= dropped;
  return std::max(0.0, bytes);
}

namespace layer_detail {

BlockSizes block_sizes(const LayerSpec& layer, const LayerShape& s, double act) {
  BlockSizes z;
  z.h = layer.hidden;
  z.seq = layer.seq_len;
  z.mb = s.micro_batch;
  z.cp = s.cp;
  z.T = z.mb * (z.seq / z.cp);
  // Tokens a rank processes outside the tensor-parallel regions: all of them, or 1/t with SP.
  z.Tr = s.sequence_parallel ? static_cast<double>(z.T) / s.tp : static_cast<double>(z.T);
  z.x_bytes = static_cast<double>(z.T) * z.h * act;
  return z;
}

void cross_entropy(double tokens, int64_t v, Builder& B) {
  // Vocabulary-parallel cross-entropy as Megatron-LM runs it by default (no loss fusion; the
  // reference harness the same): the logits to fp32 (a copy when they are fp32 already), max,
  // subtract in place, exp in place, sum, divide in place: the fp32 softmax is kept for backward
  // (4sbv/t in Korthikanti et al.). Max, sum of exponentials and target logit are all-reduced (one
  // fp32 per token each). Backward scales the kept softmax in place and converts it back.
  // A framework's own loss kernels (framework.h, family cross_entropy) replace each pass listed.
  const double act = B.act();
  const double logits = tokens * static_cast<double>(v);
  const Pass F = Pass::kForward, Bi = Pass::kBackwardInput;
  const OpRecipe* ce = B.recipe("cross_entropy");
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
    B.comm(name, Pass::kForward, CollectiveKind::kAllReduce, tokens * 4);
  B.keep(logits * 4);
}

}  // namespace layer_detail

namespace {

using layer_detail::BlockSizes;
using layer_detail::Builder;
using layer_detail::kNormStatBytes;
using layer_detail::padded_vocab;

void check_divides(const LayerSpec& layer, const char* what, int64_t value, int64_t tp) {
  if (value % tp != 0)
    throw InputError(fmt::format("tensor-parallel width {} does not divide {} {} of layer {}", tp,
                                 what, value, layer.name));
}

void check_context_parallel(const LayerSpec& layer, const TransformerLayer* b,
                            const LayerShape& s) {
  if (s.cp <= 1) return;
  if (b != nullptr && b->mamba.enabled())
    throw InputError(
        fmt::format("context parallelism over the Mamba-2 layer {} is not modelled", layer.name));
  const bool causal = b == nullptr || b->causal;
  const int64_t chunks = causal ? 2 * s.cp : s.cp;
  if (layer.seq_len % chunks != 0)
    throw InputError(
        fmt::format("context-parallel width {} needs the sequence of layer {} ({}) "
                    "to divide into {} chunks{}",
                    s.cp, layer.name, layer.seq_len, chunks,
                    causal ? " (2 x cp, for causal load balancing)" : ""));
}

void transformer(const LayerSpec& layer, const TransformerLayer& b, const LayerShape& s, Builder& B,
                 LayerWork& w) {
  const int64_t t = s.tp;
  check_divides(layer, "the heads", b.heads, t);
  check_divides(layer, "the KV heads", b.kv_heads, t);
  if (!b.is_moe()) check_divides(layer, "the MLP width", b.ffn_hidden, t);
  if (b.mamba.enabled()) {
    check_divides(layer, "the Mamba-2 heads", b.mamba.heads, t);
    check_divides(layer, "the Mamba-2 groups", b.mamba.groups, t);
  }
  check_context_parallel(layer, &b, s);
  const BlockSizes z = layer_detail::block_sizes(layer, s, B.act());
  if (b.mtp_vocab > 0) layer_detail::mtp_prologue(b, z, B);
  if (b.has_attention()) layer_detail::attention_part(layer, b, z, B);
  if (b.mamba.enabled()) layer_detail::mamba_part(b, z, B);
  if (b.has_mlp()) layer_detail::mlp_part(layer, b, z, B);
  B.keep_full(z.Tr * z.h * B.stream());  // full recomputation keeps the layer input only
  if (b.mtp_vocab > 0) layer_detail::mtp_epilogue(b, z, B);
  w.output_bytes = static_cast<double>(z.T) * z.h * B.stream();
}

void embedding(const LayerSpec& layer, const EmbeddingLayer& e, const LayerShape& s, Builder& B,
               LayerWork& w) {
  check_context_parallel(layer, nullptr, s);
  const int64_t T = s.micro_batch * (layer.seq_len / s.cp);
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
  B.kept_norm(e.norm, Tr, layer.hidden);
  if (e.dropout > 0) {
    B.dropout(Tr * layer.hidden, B.stream());
    B.keep(Tr * layer.hidden);
  }
  B.keep(static_cast<double>(T) * 8);  // token ids (int64)
  w.output_bytes = stream_bytes;
}

void lm_head(const LayerSpec& layer, const LmHeadLayer& head, const LayerShape& s, Builder& B,
             LayerWork& w) {
  check_context_parallel(layer, nullptr, s);
  const int64_t T = s.micro_batch * (layer.seq_len / s.cp), h = layer.hidden;
  const double act = B.act();
  const double Tr = s.sequence_parallel ? static_cast<double>(T) / s.tp : static_cast<double>(T);
  const double x_bytes = static_cast<double>(T) * h * act;
  const int64_t v = (s.pad_vocab ? padded_vocab(head.vocab, s.tp) : head.vocab) / s.tp;
  B.kept_norm(head.final_norm, Tr, h);
  if (head.transform) {  // BERT: dense + GeLU + LayerNorm, replicated
    B.autocast_input(Tr * h);
    B.linear("transform", static_cast<int64_t>(Tr), h, h, {.quantizable = false});
    B.bias_grad(Tr, static_cast<double>(h));
    B.elementwise("gelu", Tr * h, 1, 1, 1);
    B.norm(NormKind::kLayerNorm, Tr, h);
    B.keep(3 * Tr * h * act + Tr * kNormStatBytes);
  }
  B.enter_tp_region("logits", x_bytes);
  B.autocast_input(Tr * h);
  B.linear("logits", T, h, v, {.quantizable = false});
  if (head.output_bias) B.bias_grad(static_cast<double>(T), static_cast<double>(v));
  B.keep(Tr * h * act);  // logits input
  if (head.logit_softcap > 0) {
    // Gemma 2's final soft-capping, tanh(logits / c) x c, on the fp32 logits in place before the
    // loss: it reads and writes them; its backward reads the gradient and the saved logits.
    const double logits = static_cast<double>(T) * v;
    B.memory("logit_softcap_fwd", Pass::kForward, logits * 8);
    B.memory("logit_softcap_bwd", Pass::kBackwardInput, logits * 12);
    B.keep(logits * 4);
  }
  const size_t before_loss = w.memory_ops.size();
  layer_detail::cross_entropy(static_cast<double>(T), v, B);
  for (size_t i = before_loss; i < w.memory_ops.size(); ++i)
    w.loss_launches += static_cast<double>(w.memory_ops[i].launches);
  w.transient_bytes = B.transient("cross_entropy", static_cast<double>(T) * v);
  w.output_bytes = static_cast<double>(T) * 4;  // the loss per token
}

}  // namespace

LayerKey layer_key(const LayerSpec& layer, const LayerShape& shape) {
  LayerKey k;
  k.kind = layer.kind();
  k.hidden = layer.hidden;
  k.seq_len = layer.seq_len;
  k.tp = shape.tp;
  k.cp = shape.cp;
  if (const auto* b = layer.block()) {
    k.heads = b->heads;
    k.kv_heads = b->kv_heads > 0 ? b->kv_heads : b->heads;
    k.head_dim = b->head_dim > 0 ? b->head_dim : layer.hidden / std::max<int64_t>(1, b->heads);
    k.ffn_hidden = b->ffn_hidden;
    k.experts = b->experts;
    k.gated = is_gated(b->activation);
    k.flash_attention = shape.flash_attention;
    k.precision = shape.precision;
    k.window = b->window > 0 && b->window < layer.seq_len ? b->window : 0;
    k.kv_lora_rank = b->mla.kv_lora_rank;
    k.shared_experts = b->shared_experts;
    k.mtp = b->mtp_vocab > 0;
    k.mamba_heads = b->mamba.heads;
    k.mamba_head_dim = b->mamba.head_dim;
    k.mamba_state = b->mamba.state;
    if (b->is_moe()) {
      k.top_k = b->top_k;
      k.ep = shape.ep;
      k.etp = shape.expert_tp();
    }
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
  if (k.mamba_heads > 0)
    return fmt::format("mamba2 h{} m{}x{} n{} s{} tp{}", k.hidden, k.mamba_heads, k.mamba_head_dim,
                       k.mamba_state, k.seq_len, k.tp);
  std::string d = fmt::format("block h{} a{}", k.hidden, k.heads);
  if (k.kv_heads != k.heads) d += fmt::format(" kv{}", k.kv_heads);
  if (k.head_dim * k.heads != k.hidden) d += fmt::format(" d{}", k.head_dim);
  d += fmt::format(" s{} ffn{}{}", k.seq_len, k.ffn_hidden, k.gated ? " swiglu" : "");
  if (k.experts > 1) d += fmt::format(" x{} experts", k.experts);
  if (k.window > 0) d += fmt::format(" window{}", k.window);
  if (k.kv_lora_rank > 0) d += fmt::format(" mla{}", k.kv_lora_rank);
  if (k.mtp) d += " mtp";
  d += fmt::format(" tp{}", k.tp);
  if (k.cp > 1) d += fmt::format(" cp{}", k.cp);
  if (k.precision != Precision::kBf16) d += fmt::format(" {}", to_string(k.precision));
  if (k.ep > 1) d += fmt::format(" ep{}", k.ep);
  if (k.experts > 1 && k.etp != k.tp) d += fmt::format(" etp{}", k.etp);
  if (!k.flash_attention) d += " unfused";
  return d;
}

namespace {
void uncheckpointed(LayerWork& w) {
  w.checkpointed = false;
  for (auto& g : w.gemms) g.op_rerun = 0;
  for (auto& m : w.memory_ops) m.op_rerun = 0;
  for (auto& a : w.attention) a.op_rerun = 0;
  for (auto& c : w.comms) c.op_rerun = 0;
  for (double& kept : w.activation_bytes) kept = w.activation_bytes[0];
}
}  // namespace

LayerWork layer_work(const LayerSpec& layer, const LayerShape& shape) {
  if (shape.micro_batch <= 0 || shape.tp <= 0)
    throw InputError(fmt::format("micro-batch ({}) and tensor width ({}) must be > 0",
                                 shape.micro_batch, shape.tp));
  if (shape.cp <= 0 || shape.ep <= 0 || shape.etp < 0)
    throw InputError(
        fmt::format("context ({}), expert ({}) and expert tensor ({}) widths must be "
                    "> 0 (etp 0: tp)",
                    shape.cp, shape.ep, shape.etp));
  if (shape.moe_imbalance < 1)
    throw InputError(
        fmt::format("the MoE load imbalance is the busiest expert's tokens over the "
                    "mean: expected >= 1, found {}",
                    shape.moe_imbalance));
  if (shape.cp_comm == CpComm::kA2aP2p &&
      (shape.cp_a2a <= 1 || shape.cp % shape.cp_a2a != 0 || shape.cp_a2a == shape.cp))
    throw InputError(
        fmt::format("a2a+p2p needs an all-to-all group of 2..cp/2 ranks dividing cp "
                    "({}), found {}",
                    shape.cp, shape.cp_a2a));
  if (std::string problem = layer_detail::lora_layer_problem(layer, shape.lora, shape.tp);
      !problem.empty())
    throw InputError(problem);
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
  w.params = layer_parameters(layer, shape.tp, /*unique=*/false, shape.ep, shape.expert_tp());
  w.expert_params = expert_parameters(layer, shape.ep, shape.expert_tp());
  // Each micro-batch's gradients are added into fp32 main gradients (Megatron-LM's and the
  // harness's mixed precision): reads the gradient and the main gradient, writes the latter. With
  // gradient-accumulation fusion the weight-gradient GEMMs write into them directly, and only the
  // other parameters (norms, biases, embedding tables) take the add. Under LoRA only the adapters
  // have gradients, all of them of GEMM weights.
  int64_t added = shape.grad_accumulation_fusion ? w.params - w.gemm_weight_params : w.params;
  w.accumulated_tensors =
      shape.grad_accumulation_fusion ? w.param_tensors - w.gemm_weight_tensors : w.param_tensors;
  std::optional<Builder::AdapterScope> adapters;
  if (shape.lora.enabled()) {
    w.frozen_params = w.params;
    w.expert_frozen_params = w.expert_params;
    w.params += w.adapter_params;
    added = shape.grad_accumulation_fusion ? 0 : w.adapter_params;
    w.accumulated_tensors = shape.grad_accumulation_fusion ? 0 : w.adapter_tensors;
    adapters.emplace(B);
  }
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
  adapters.reset();
  // Full and per-op recomputation never keep more than no recomputation.
  for (Recompute r : {Recompute::kFull, Recompute::kOp}) {
    double& kept = w.activation_bytes[static_cast<int>(r)];
    kept = std::min(kept, w.activation_bytes[0]);
  }
  // Recomputation checkpoints the blocks alone (LayerWork::checkpointed): the embedding and the
  // head keep what they keep and run once.
  if (!layer.block()) uncheckpointed(w);
  return w;
}

std::string_view model_part(LayerKind kind) {
  switch (kind) {
    case LayerKind::kEmbedding:
      return "embedding";
    case LayerKind::kLmHead:
      return "head";
    default:
      return "blocks";
  }
}

LayerKernels layer_kernels(const LayerWork& w, const Recomputation& asked) {
  const Recomputation mode = layer_recomputation(w, asked);
  LayerKernels k;
  // An op any share of which runs again launches again (a fused projection's re-run part is one
  // of the framework's separate linears).
  auto add = [&](Pass pass, OpGroup group, double op_rerun, double n) {
    k.pass[static_cast<int>(pass)] += n;
    if (rerun_share(mode, pass, group, op_rerun) > 0) k.recompute += n;
  };
  for (const auto& g : w.gemms)
    add(g.pass, g.group, g.op_rerun, g.streams > 0 ? static_cast<double>(g.shape.batch) : 1.0);
  for (const auto& m : w.memory_ops)
    add(m.pass, m.group, m.op_rerun,
        m.kernel == "grad_accumulate"
            ? static_cast<double>(w.accumulated_tensors) * w.accumulate_share
            : static_cast<double>(m.launches));
  for (const auto& a : w.attention) add(a.pass, OpGroup::kDefault, a.op_rerun, 1);
  for (const auto& c : w.comms) add(c.pass, c.group, c.op_rerun, static_cast<double>(c.repeats));
  return k;
}

std::string tensor_parallel_problem(const ModelSpec& model, int64_t tp) {
  for (const auto& l : model.layers) {
    if (const auto* b = l.block()) {
      if (b->heads % tp)
        return fmt::format("tp {} does not divide the {} heads of {}", tp, b->heads, l.name);
      if (b->kv_heads % tp)
        return fmt::format("tp {} does not divide the {} KV heads of {}", tp, b->kv_heads, l.name);
      if (!b->is_moe() && b->ffn_hidden % tp)  // the experts' width is etp's (the ep rule)
        return fmt::format("tp {} does not divide the MLP width {} of {}", tp, b->ffn_hidden,
                           l.name);
      if (b->mamba.enabled() && (b->mamba.heads % tp || b->mamba.groups % tp))
        return fmt::format("tp {} does not divide the {} Mamba-2 heads and {} groups of {}", tp,
                           b->mamba.heads, b->mamba.groups, l.name);
    }
  }
  return "";
}

std::string context_parallel_problem(const ModelSpec& model, int64_t cp, int64_t tp, CpComm comm,
                                     int64_t cp_a2a) {
  if (cp <= 1) return "";
  for (const auto& l : model.layers) {
    const auto* b = l.block();
    const bool causal = b == nullptr || b->causal;
    const int64_t chunks = causal ? 2 * cp : cp;
    if (l.seq_len % chunks != 0)
      return fmt::format("cp {} needs the sequence of {} ({}) to divide into {} chunks{}", cp,
                         l.name, l.seq_len, chunks,
                         causal ? " (2 x cp, causal load balancing)" : "");
    if (b != nullptr && b->mamba.enabled())
      return fmt::format("context parallelism over the Mamba-2 layer {} is not modelled", l.name);
    if (b == nullptr || !b->has_attention() || (comm != CpComm::kA2a && comm != CpComm::kA2aP2p))
      continue;
    const int64_t group = comm == CpComm::kA2a ? cp : cp_a2a;
    if ((b->heads / tp) % group != 0 || (b->kv_heads / tp) % group != 0)
      return fmt::format(
          "{} {} splits the heads: it does not divide the {} heads and {} KV heads "
          "per tensor rank of {}",
          to_string(comm), group, b->heads / tp, b->kv_heads / tp, l.name);
  }
  return "";
}

std::string expert_parallel_problem(const ModelSpec& model, int64_t ep, int64_t etp) {
  for (const auto& l : model.layers) {
    const auto* b = l.block();
    if (b == nullptr || !b->is_moe()) continue;
    if (b->experts % ep != 0)
      return fmt::format("ep {} does not divide the {} experts of {}", ep, b->experts, l.name);
    if (etp > 0 && b->ffn_hidden % etp != 0)
      return fmt::format("etp {} does not divide the experts' MLP width {} of {}", etp,
                         b->ffn_hidden, l.name);
  }
  return "";
}

OpGroup recompute_modules_of(const ModelSpec& model) {
  OpGroup out = OpGroup::kCoreAttention;
  const auto add = [&](RecomputeModule m) { out = out | module_group(m); };
  for (const auto& l : model.layers) {
    const auto* b = l.block();
    if (b == nullptr) continue;
    if (b->mla.enabled()) add(RecomputeModule::kMlaUpProj);
    // The norms Megatron-Core keeps apart from a linear layer (layer_attention.cpp, layer_moe.cpp).
    if ((b->mla.enabled() || b->is_moe()) && b->norm != NormKind::kNone)
      add(RecomputeModule::kLayernorm);
    if (b->is_moe()) {
      add(RecomputeModule::kMoe);
      add(RecomputeModule::kMoeAct);
      if (b->shared_experts > 0) add(RecomputeModule::kSharedExperts);
    } else {
      add(RecomputeModule::kMlp);
    }
  }
  return out;
}

std::string_view absent_module_reason(RecomputeModule m) {
  switch (m) {
    case RecomputeModule::kCoreAttn:
      return "";
    case RecomputeModule::kMlp:
      return "the model has no dense MLP (Megatron-Core's mlp recomputes dense MLPs only; an MoE "
             "layer's is moe)";
    case RecomputeModule::kMoeAct:
      return "the model has no MoE layer (Megatron-Core: moe_act is only supported with "
             "moe_grouped_gemm)";
    case RecomputeModule::kLayernorm:
      return "the model has neither MoE layers nor MLA, whose norms Megatron-Core keeps apart; "
             "its other norms are fused into the linear layer after them (Transformer Engine's "
             "LayerNormLinear), where layernorm recomputes nothing";
    case RecomputeModule::kMlaUpProj:
      return "the model has no MLA attention (Megatron-Core: mla_up_proj is only supported with "
             "multi_latent_attention)";
    case RecomputeModule::kMoe:
      return "the model has no MoE layer";
    case RecomputeModule::kSharedExperts:
      return "the model has no shared experts";
  }
  return "";
}

double model_flops_per_sample(const ModelSpec& model, const Lora& lora) {
  double total = 0;
  LayerShape one;
  one.pad_vocab = false;  // count the real vocabulary, not Megatron's padding
  one.lora = lora;
  for (const auto& l : model.layers) {
    LayerWork w = layer_work(l, one);
    for (double f : w.model_flops) total += f;
  }
  return total;
}

}  // namespace hetplan
