// A block's attention on one rank: norm, projections (standard or MLA), q/k norms, rotary, the
// attention core (fused or unfused, windowed, context-parallel), the output projection and the
// residual branch.
#include <algorithm>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/layer_builder.h"

namespace hetplan::layer_detail {
namespace {

// Flash kernels are compiled for a few head sizes and run the next one up: FlashAttention-2
// rounds the head size up to a multiple of 32 up to 192, else to 256 (`head_size_rounded` in its
// csrc/flash_attn/flash_api.cpp), so a head of 80 costs what one of 96 does.
int64_t kernel_head_dim(int64_t hd) { return hd <= 192 ? (hd + 31) / 32 * 32 : 256; }

// The projections into queries, keys and values on this rank, what they keep, and the widths the
// core sees.
struct Projected {
  int64_t heads = 0, kv = 0;  // per tensor rank
  int64_t qk_dim = 0, v_dim = 0;
};

Projected standard_projections(const TransformerLayer& b, const BlockSizes& z, Builder& B) {
  const LayerShape& s = B.shape();
  const double act = B.act();
  const int64_t T = z.T;
  Projected p{b.heads / s.tp, b.kv_heads / s.tp, b.head_dim, b.head_dim};
  const int64_t heads = p.heads, kv = p.kv, hd = b.head_dim;
  B.enter_tp_region("attn", z.x_bytes);
  const int64_t qkv_width = (heads + 2 * kv) * hd;
  B.autocast_input(z.Tr * z.h);
  B.linear("qkv", T, z.h, qkv_width, {.parts = {heads * hd, kv * hd, kv * hd}});
  B.lora_adapter(LoraTarget::kQkv, T, z.h, qkv_width, /*column_parallel=*/true);
  if (b.qkv_biased()) B.bias_grad(static_cast<double>(T), static_cast<double>(qkv_width));
  // Q, K and V are views of the projection's output; their gradients are joined again (a copy
  // kernel), in PyTorch as in Megatron-LM.
  B.memory("qkv_grad_concat", Pass::kBackwardInput, 2.0 * T * qkv_width * act);
  B.keep(z.Tr * z.h * B.linear_input());  // QKV input (the norm output; sharded under SP)
  if (b.qk_norm) {
    // RMSNorm over each head's queries and keys (one gain of head_dim each): rows of head_dim.
    B.kept_norm(NormKind::kRmsNorm, static_cast<double>(T) * heads, hd);
    B.kept_norm(NormKind::kRmsNorm, static_cast<double>(T) * kv, hd);
  }
  if (b.rotary) {
    const double rotated = static_cast<double>(T) * (heads + kv) * hd;
    B.elementwise("rotary", rotated, 1, 1, 0);
    B.keep(B.kept("rotary", rotated));
  }
  const double qk_bytes = static_cast<double>(T) * (heads + kv) * hd * act;
  const double v_bytes = static_cast<double>(T) * kv * hd * act;
  B.keep(qk_bytes + v_bytes);  // Q, K, V
  return p;
}

// MLA (Megatron-Core's MLASelfAttention): the down-projections of queries and of the key-value
// latent run duplicated on every tensor rank over the rank's tokens (T / tp under sequence
// parallelism, whose latents are then gathered), their norms too; the up-projections are
// column-parallel over the heads. The tensor-parallel region's boundary sits at the latents
// (q_lora_rank + kv_lora_rank + qk_rope_head_dim wide) instead of the hidden state.
Projected mla_projections(const TransformerLayer& b, const BlockSizes& z, Builder& B) {
  const LayerShape& s = B.shape();
  const MlaSpec& m = b.mla;
  const double act = B.act();
  const int64_t T = z.T, rank_tokens = static_cast<int64_t>(z.Tr);
  Projected p{b.heads / s.tp, b.heads / s.tp, m.qk_nope_head_dim + m.qk_rope_head_dim,
              m.v_head_dim};
  const int64_t heads = p.heads;
  const int64_t kv_latent = m.kv_lora_rank + m.qk_rope_head_dim;
  const int64_t latent = m.q_lora_rank + kv_latent;
  // The down-projections' input: the input norm's output, which recomputing the norm drops.
  B.keep(z.Tr * z.h * B.linear_input(), module_group(RecomputeModule::kLayernorm));
  B.autocast_input(z.Tr * z.h);
  if (m.q_lora_rank > 0) B.linear("q_down", rank_tokens, z.h, m.q_lora_rank);
  B.linear("kv_down", rank_tokens, z.h, kv_latent);
  B.enter_tp_region("attn_latent",
                    static_cast<double>(T) * (m.q_lora_rank > 0 ? latent : kv_latent + z.h) * act);
  // mla_up_proj checkpoints the latents' norms (fused into the up-projections, Transformer
  // Engine's LayerNormColumnParallelLinear), the up-projections, rotary and the joins
  // (qkv_up_proj_and_rope_apply in multi_latent_attention.py at d98e8a64dd): the latents are its
  // inputs and stay; the queries, keys and values it gives, and what it keeps inside, drop.
  if (m.q_lora_rank > 0) B.keep_norm(NormKind::kRmsNorm, static_cast<double>(T), m.q_lora_rank);
  B.keep_norm(NormKind::kRmsNorm, static_cast<double>(T), m.kv_lora_rank);
  Builder::ModuleScope up(B, RecomputeModule::kMlaUpProj);
  if (m.q_lora_rank > 0) {
    B.norm(NormKind::kRmsNorm, static_cast<double>(T), m.q_lora_rank);
    B.linear("q_up", T, m.q_lora_rank, heads * p.qk_dim);
  } else {
    B.linear("q_proj", T, z.h, heads * p.qk_dim);
  }
  B.norm(NormKind::kRmsNorm, static_cast<double>(T), m.kv_lora_rank);
  B.linear("kv_up", T, m.kv_lora_rank, heads * (m.qk_nope_head_dim + m.v_head_dim));
  // The rotary part of the queries and the one shared key part, applied and joined to each head.
  const double rotated = static_cast<double>(T) * (heads + 1) * m.qk_rope_head_dim;
  B.elementwise("rotary", rotated, 1, 1, 0);
  B.keep(B.kept("rotary", rotated));
  const double q_bytes = static_cast<double>(T) * heads * p.qk_dim * act;
  const double k_bytes = q_bytes;
  const double v_bytes = static_cast<double>(T) * heads * p.v_dim * act;
  B.memory("mla_kv_concat", Pass::kForward, 2 * k_bytes);
  B.memory("mla_kv_concat_grad", Pass::kBackwardInput, 2 * k_bytes);
  B.keep(q_bytes + k_bytes + v_bytes + static_cast<double>(T) * m.kv_lora_rank * act);
  return p;
}

// FLOPs of the core's QK^T and PV products over all of a rank's heads, whole sequence (no mask).
double core_flops(int64_t mb, int64_t heads, int64_t seq, int64_t kv_seq, double qk_dim,
                  double v_dim) {
  return 2.0 * mb * heads * static_cast<double>(seq) * static_cast<double>(kv_seq) *
         (qk_dim + v_dim);
}

// The context-parallel exchanges of keys and values around the core (none at cp = 1).
void context_exchange(const BlockSizes& z, const Projected& p, Builder& B) {
  const LayerShape& s = B.shape();
  if (s.cp <= 1) return;
  const double act = B.act();
  const double kv_chunk = static_cast<double>(z.T) * p.kv * (p.qk_dim + p.v_dim) * act;
  const double q_bytes = static_cast<double>(z.T) * p.heads * p.qk_dim * act;
  const double o_bytes = static_cast<double>(z.T) * p.heads * p.v_dim * act;
  const Pass F = Pass::kForward, Bi = Pass::kBackwardInput;
  const CommScope C = CommScope::kContext;
  auto ring = [&](int64_t steps, int64_t group) {
    // Forward sends keys and values around the ring; backward keys, values and their gradients.
    B.comm("cp_kv_ring", F, CollectiveKind::kSendRecv, kv_chunk, C, CommOverlap::kAttention, steps,
           group);
    B.comm("cp_kv_ring_grad", Bi, CollectiveKind::kSendRecv, 2 * kv_chunk, C,
           CommOverlap::kAttention, steps, group);
  };
  auto ulysses = [&](int64_t group) {
    const double kv_bytes = kv_chunk;
    B.comm("cp_a2a_qkv", F, CollectiveKind::kAllToAll, q_bytes + kv_bytes, C, CommOverlap::kNone, 1,
           group);
    B.comm("cp_a2a_out", F, CollectiveKind::kAllToAll, o_bytes, C, CommOverlap::kNone, 1, group);
    B.comm("cp_a2a_out_grad", Bi, CollectiveKind::kAllToAll, o_bytes, C, CommOverlap::kNone, 1,
           group);
    B.comm("cp_a2a_qkv_grad", Bi, CollectiveKind::kAllToAll, q_bytes + kv_bytes, C,
           CommOverlap::kNone, 1, group);
  };
  switch (s.cp_comm) {
    case CpComm::kP2p:
      ring(s.cp - 1, 0);
      break;
    case CpComm::kAllGather:
      // Keys and values of the whole sequence gathered (the whole array: cp chunks), their
      // gradients reduce-scattered.
      B.comm("cp_kv_allgather", F, CollectiveKind::kAllGather, kv_chunk * s.cp, C);
      B.comm("cp_kv_reducescatter_grad", Bi, CollectiveKind::kReduceScatter, kv_chunk * s.cp, C);
      break;
    case CpComm::kA2a:
      ulysses(0);
      break;
    case CpComm::kA2aP2p:
      ulysses(s.cp_a2a);
      ring(s.cp / s.cp_a2a - 1, 0);
      break;
  }
}

// The attention core on this rank's heads and tokens.
void core(const TransformerLayer& b, const BlockSizes& z, const Projected& p, Builder& B) {
  const LayerShape& s = B.shape();
  LayerWork& w = B.work();
  const double act = B.act();
  const int64_t mb = z.mb, seq = z.seq, cp = s.cp;
  const bool dropout = b.dropout > 0;
  const int64_t window = b.window > 0 && b.window < seq ? b.window : 0;
  const int64_t heads = p.heads, kv = p.kv;
  const bool ulysses = cp > 1 && (s.cp_comm == CpComm::kA2a || s.cp_comm == CpComm::kA2aP2p);
  if (s.flash_attention) {
    const int64_t hd = p.qk_dim;
    const double full = core_flops(mb, heads, seq, seq, static_cast<double>(p.qk_dim),
                                   static_cast<double>(p.v_dim));
    const double padded =
        core_flops(mb, heads, seq, seq, kernel_head_dim(p.qk_dim), kernel_head_dim(p.v_dim));
    const double pairs = attended_pairs(seq, seq, b.causal, window);
    const double fraction = pairs / (static_cast<double>(seq) * seq);
    // Causal attention without a window runs half the pairs (the existing convention, exactly).
    const double executed = window == 0 ? (b.causal ? padded / 2 : padded) : padded * fraction;
    // Model FLOPs count attention in full over the keys a query may see (Megatron-LM, PaLM).
    const double model = window == 0 ? full : full * static_cast<double>(window) / seq;
    // Each context-parallel rank runs 1/cp of it: its two chunks of 2cp under causal balancing
    // against the whole sequence (p2p, all_gather), or every token on 1/cp of the heads (a2a).
    const int64_t a2a_group = s.cp_comm == CpComm::kA2a ? cp : s.cp_a2a;
    const int64_t run_heads = ulysses ? heads / a2a_group : heads;
    const int64_t run_kv = ulysses ? kv / a2a_group : kv;
    const int64_t queries = ulysses ? seq / (cp / a2a_group) : seq / cp;
    const int64_t keys = cp > 1 && !(ulysses && a2a_group == cp) ? seq : 0;
    AttentionOp f{Pass::kForward, mb,   run_heads, run_kv, queries, hd, b.causal,
                  executed / cp,  keys, window};
    if (s.attention_kernel) f.speed = s.attention_kernel->speed(true, hd);
    B.op_policy_attention(f, static_cast<double>(mb) * run_heads * queries * p.v_dim * act,
                          static_cast<double>(mb) * run_heads * queries * 4);
    w.attention.push_back(f);
    // Backward recomputes P and runs dV, dP, dQ, dK: 2.5x the forward GEMM work.
    AttentionOp bwd = f;
    bwd.pass = Pass::kBackwardInput;
    bwd.flops = 2.5 * f.flops;
    if (s.attention_kernel) bwd.speed = s.attention_kernel->speed(false, hd);
    w.attention.push_back(bwd);
    w.model_flops[0] += model / cp;
    w.model_flops[1] += 2 * model / cp;
    B.keep(static_cast<double>(mb) * heads * (seq / cp) * 4);  // logsumexp, fp32
    // Soft-capping (a tanh of every logit) and sinks (one more logit per softmax row) run inside
    // the fused kernel (FlashAttention's softcap argument): no bytes of their own.
  } else {
    if (cp > 1)
      throw InputError(
          "context parallelism needs fused attention (Megatron-Core's CP runs "
          "Transformer Engine's fused kernels): unfused attention was asked for");
    B.has(RecomputeModule::kCoreAttn);
    const OpGroup core_group = OpGroup::kCoreAttention;
    const int64_t hd = p.qk_dim;
    const int64_t bh = mb * heads;
    const double scores = static_cast<double>(mb) * heads * seq * seq;
    B.gemm("scores", Pass::kForward, {seq, seq, hd, bh, true, false}, core_group);
    if (b.attn_softcap > 0) {
      // tanh soft-capping of the scores: an elementwise kernel each way (the backward reads the
      // saved scores again), kept for backward.
      B.memory("softcap_fwd", Pass::kForward, 2 * scores * act, core_group);
      B.memory("softcap_bwd", Pass::kBackwardInput, 3 * scores * act);
      B.keep(scores * act, OpGroup::kCoreAttention);
    }
    // fp32 scores where the framework's fused scale-mask-softmax kernel takes fp16 and bf16 only
    // take its other sequence (family softmax_fp32: Megatron-LM's torch path, scale, mask and
    // softmax as kernels of their own).
    const std::string_view softmax =
        act >= 4 && B.recipe("softmax_fp32") ? "softmax_fp32" : "softmax";
    B.op(softmax, &OpRecipe::forward, Pass::kForward, "softmax_fwd", scores, 2 * scores * act,
         core_group);
    if (dropout) B.memory("dropout_fwd", Pass::kForward, scores * (2 * act + 1), core_group);
    B.gemm("context", Pass::kForward, {p.v_dim, seq, seq, bh, false, false}, core_group);
    B.gemm("context_dprobs", Pass::kBackwardInput, {seq, seq, p.v_dim, bh, true, false});
    B.gemm("context_dv", Pass::kBackwardInput, {p.v_dim, seq, seq, bh, false, true});
    if (dropout) B.memory("dropout_bwd", Pass::kBackwardInput, scores * (2 * act + 1));
    B.op(softmax, &OpRecipe::backward, Pass::kBackwardInput, "softmax_bwd", scores,
         3 * scores * act);
    B.gemm("scores_dq", Pass::kBackwardInput, {hd, seq, seq, bh, false, false});
    B.gemm("scores_dk", Pass::kBackwardInput, {hd, seq, seq, bh, false, true});
    // Softmax output, dropout mask and dropout output (Korthikanti et al. 2022, 5as^2b/t).
    B.keep(scores * act + B.kept(softmax, scores), OpGroup::kCoreAttention);
    if (dropout) B.keep(scores * (1 + act), OpGroup::kCoreAttention);
  }
}

}  // namespace

void residual(const TransformerLayer& b, const BlockSizes& z, bool bias, Builder& B) {
  // The row-parallel projection's bias (added once, after the reduction; its gradient over this
  // rank's tokens), dropout (one kernel each way, its mask kept) and the residual add (reads both,
  // writes the sum). In backward the residual stream's gradient is the sum of its two consumers'
  // (the norm and the add): one more add. Megatron-LM fuses bias, dropout and add into one
  // forward kernel (3 x act + 1 bytes per element instead of 5 x act + 1).
  // A framework's own bias-dropout-add (framework.h, family bias_dropout_add) replaces the
  // dropout and the add of each pass it lists.
  const double act = B.act();
  const double res_elems = z.Tr * z.h;
  const double stream = B.stream();
  // Under autocast the branch's (half-precision) output is added to the fp32 stream, and the
  // stream's gradient is cast back for the branch: one more kernel in backward.
  const auto residual_add = [&] {
    B.memory("residual_add", Pass::kForward, res_elems * (2 * stream + act));
    if (B.autocast())
      B.memory("autocast_residual_grad_cast", Pass::kBackwardInput, res_elems * (stream + act));
  };
  if (bias) B.bias_grad(z.Tr, static_cast<double>(z.h));
  if (b.dropout > 0) {
    B.keep(res_elems);  // mask, one byte per element
    const OpRecipe* fused = B.recipe("bias_dropout_add");
    if (fused && fused->forward) {
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
}

void attention_part(const LayerSpec& layer, const TransformerLayer& b, const BlockSizes& z,
                    Builder& B) {
  (void)layer;
  // Megatron-Core's layer specs fuse the input norm into the QKV projection (Transformer Engine's
  // LayerNormColumnParallelLinear) but keep MLA's apart (gpt_layer_specs.py at d98e8a64dd):
  // recompute_modules layernorm re-runs only a norm apart (transformer_layer.py skips IdentityOp).
  if (b.mla.enabled() && b.norm != NormKind::kNone) {
    Builder::ModuleScope norm(B, RecomputeModule::kLayernorm);
    B.norm(b.norm, z.Tr, z.h);
  } else {
    B.norm(b.norm, z.Tr, z.h);
  }
  B.keep_norm(b.norm, z.Tr, z.h);  // norm input and statistics
  const Projected p = b.mla.enabled() ? mla_projections(b, z, B) : standard_projections(b, z, B);
  context_exchange(z, p, B);
  core(b, z, p, B);
  const double out_in_bytes = static_cast<double>(z.T) * p.heads * p.v_dim * B.linear_input();
  B.linear("attn_out", z.T, p.heads * p.v_dim, z.h);
  B.lora_adapter(LoraTarget::kProj, z.T, p.heads * p.v_dim, z.h, /*column_parallel=*/false);
  B.keep(out_in_bytes);
  B.leave_tp_region("attn", z.x_bytes);
  if (b.post_norms) B.kept_norm(b.norm, z.Tr, z.h);  // Gemma's post_attention_layernorm
  residual(b, z, b.bias, B);
}

}  // namespace hetplan::layer_detail
