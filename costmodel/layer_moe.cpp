// A block's MLP on one rank: dense, or a mixture of experts with its router, token permutation,
// dispatch and combine over the expert-parallel and expert-tensor groups (Megatron-Core's
// allgather and alltoall dispatchers), grouped GEMMs at the tokens the busiest expert receives,
// and shared experts.
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/layer_builder.h"

namespace hetplan::layer_detail {
namespace {

// fc1, the activation and fc2 of `experts` batched MLPs (a grouped GEMM for experts) of width
// `f` per rank over `tokens` rows each, with what they keep.
// `routed`: the routed experts' (TEGroupedMLP; their weights' low-precision copies shard with
// them, LinearOptions::routed_expert), whose activation recompute_modules moe_act
// re-runs: it drops the activation's output (fc2's kept input) and what the activation keeps
// beyond its input (experts.py at d98e8a64dd: CheckpointWithoutOutput around bias_act_func).
void mlp_gemms(const TransformerLayer& b, int64_t h, int64_t tokens, int64_t f, int64_t experts,
               double flop_fraction, const std::string& prefix, Builder& B, bool routed = false) {
  const double act = B.act();
  const bool gated = is_gated(b.activation);
  const int64_t up = gated ? 2 * f : f;
  B.linear(prefix + "fc1", tokens, h, up,
           {.batch = experts,
            .flop_fraction = flop_fraction,
            .routed_expert = routed,
            .parts = {gated ? f : up, gated ? f : 0, 0}});
  if (!routed) B.lora_adapter(LoraTarget::kFc1, tokens, h, up, /*column_parallel=*/true);
  const double rows = static_cast<double>(tokens) * experts;
  if (b.mlp_bias) B.bias_grad(rows, static_cast<double>(up));
  const double act_elems = rows * f;
  B.keep(act_elems * act * (gated ? 2 : 1));  // activation input
  std::optional<Builder::ModuleScope> moe_act;
  if (routed) moe_act.emplace(B, RecomputeModule::kMoeAct);
  switch (b.activation) {
    case MlpActivation::kSwiglu:
      B.elementwise("swiglu", act_elems, 2, 1, 2);
      break;
    case MlpActivation::kGeglu:
      B.elementwise("geglu", act_elems, 2, 1, 2);
      break;
    case MlpActivation::kGelu:
      B.elementwise("gelu", act_elems, 1, 1, 1);
      break;
    case MlpActivation::kRelu:
    case MlpActivation::kSquaredRelu:  // one kernel each way too, moving the same bytes
      B.elementwise("relu", act_elems, 1, 1, 1);
      break;
  }
  if (b.activation == MlpActivation::kSwiglu) B.keep(B.kept("swiglu", act_elems));
  B.keep(act_elems * B.linear_input());  // fc2 input (activation output)
  moe_act.reset();
  B.linear(prefix + "fc2", tokens, f, h,
           {.batch = experts, .flop_fraction = flop_fraction, .routed_expert = routed});
  if (!routed) B.lora_adapter(LoraTarget::kFc2, tokens, f, h, /*column_parallel=*/false);
}

// Shared experts (one MLP of shared_experts x shared_ffn_hidden, tensor-parallel like a dense
// MLP, as Megatron-Core's SharedExpertMLP) over the `tokens` of a tensor-parallel region.
void shared_experts(const TransformerLayer& b, int64_t h, int64_t tokens, Builder& B) {
  if (b.shared_experts <= 0) return;
  // recompute_modules shared_experts checkpoints SharedExpertMLP (moe_layer.py at d98e8a64dd);
  // its input, the norm's output, is kept by the MoE layer (mlp_part).
  Builder::ModuleScope scope(B, RecomputeModule::kSharedExperts);
  const int64_t f = b.shared_experts * b.shared_ffn_hidden / B.shape().tp;
  mlp_gemms(b, h, tokens, f, 1, 1, "shared_", B);
  if (b.shared_expert_gate) {
    // Qwen2-MoE: sigmoid(x W_g) scales the shared experts' output (hidden -> 1).
    B.linear("shared_gate", tokens, h, 1, {.quantizable = false});
    B.elementwise("shared_gate_mul", static_cast<double>(tokens) * h, 1, 1, 1);
  }
  // The routed and shared outputs are added.
  B.memory("moe_shared_add", Pass::kForward, 3.0 * tokens * h * B.act());
}

// The experts' token counts reach the host before their grouped GEMMs can be issued (one sync a
// layer, in the forward; backward reuses them): Megatron-Core's alltoall dispatcher synchronises at
// its cuda_sync_point ("before_ep_alltoall" with ep or tp > 1) for the all-to-all's split sizes,
// and the experts' eager path calls tokens_per_expert.tolist() for the grouped GEMM's splits
// (megatron/core/transformer/moe/token_dispatcher.py, experts.py at d98e8a64dd). DeepEP's and
// HybridEP's dispatch return the received counts to the host the same way.
void experts_token_counts(Builder& B) { B.host_sync(); }

// Tokens each local expert's GEMMs run: the mean `routed / local` of the routed copies the rank
// holds, times the imbalance (rounded up); and the share of them that are routed tokens (model
// FLOPs count those).
std::pair<int64_t, double> expert_tokens(int64_t routed, int64_t local, double imbalance) {
  if (imbalance == 1) return {routed / local, 1.0};  // balanced: the mean (as before 2026-12)
  const double mean = static_cast<double>(routed) / static_cast<double>(local);
  const auto tokens = static_cast<int64_t>(std::ceil(mean * imbalance));
  return {tokens, tokens > 0 ? mean / static_cast<double>(tokens) : 1.0};
}

// The token permutation before the experts (a gather of each token's top-k copies in expert
// order) and the unpermutation after (each token's copies weighted by their probabilities and
// summed; backward reads the saved expert outputs again for the probabilities' gradient).
void permute(double copies, int64_t h, Builder& B) {
  B.elementwise("moe_permute", copies * h, 1, 1, 0);
}
void unpermute(double copies, double tokens, int64_t h, Builder& B) {
  const double act = B.act();
  B.memory("moe_unpermute_fwd", Pass::kForward, (copies + tokens) * h * act);
  B.memory("moe_unpermute_bwd", Pass::kBackwardInput, (tokens + 2 * copies) * h * act);
  B.keep(copies * h * act);  // the expert outputs, for the probabilities' gradient
}

// The scope of a collective over the expert-tensor group: the tensor group itself where they
// are the same ranks (etp = tp).
CommScope expert_tensor_scope(const LayerShape& s) {
  return s.expert_tp() == s.tp ? CommScope::kTensor : CommScope::kExpertTensor;
}

// LatentMoE's projection of the router's input into the latent (TELinear, parallel_mode
// duplicated: the whole weight on every tensor-parallel rank over that rank's `tokens`; the
// norm's output it reads is kept already); returns the width the experts work at.
int64_t latent_down(const TransformerLayer& b, int64_t h, int64_t tokens, Builder& B) {
  if (b.moe_latent <= 0) return h;
  B.linear("moe_latent_down", tokens, h, b.moe_latent);
  return b.moe_latent;
}

// And back after the combine, before the shared experts' output is added; it keeps its input.
void latent_up(const TransformerLayer& b, int64_t h, int64_t tokens, Builder& B) {
  if (b.moe_latent <= 0) return;
  B.keep(static_cast<double>(tokens) * b.moe_latent * B.linear_input());
  B.linear("moe_latent_up", tokens, b.moe_latent, h);
}

// Megatron-Core's allgather dispatcher at ep = 1 with the experts split tp ways: the MLP's own
// tensor-parallel region gathers the tokens, every rank routes all of them and runs its shard
// of every expert (hetplan's MoE before 2026-12, and at these widths still).
void moe_tensor_region(const TransformerLayer& b, const BlockSizes& z, Builder& B) {
  const int64_t T = z.T, h = z.h;
  B.enter_tp_region("mlp", z.x_bytes);
  B.linear("router", T, h, b.experts, {.quantizable = false});
  B.memory("router_topk", Pass::kForward, static_cast<double>(T) * b.experts * 4);
  const int64_t d = latent_down(b, h, T, B);
  const double copies = static_cast<double>(T) * b.top_k;
  permute(copies, d, B);
  const auto [tokens, fraction] = expert_tokens(T * b.top_k, b.experts, B.shape().moe_imbalance);
  experts_token_counts(B);
  B.keep(copies * d * B.linear_input());  // dispatched expert inputs
  mlp_gemms(b, d, tokens, b.ffn_hidden / B.shape().tp, b.experts, fraction, "", B, true);
  unpermute(copies, static_cast<double>(T), d, B);
  latent_up(b, h, T, B);
  shared_experts(b, h, T, B);
  B.leave_tp_region("mlp", z.x_bytes);
}

// Expert parallelism (or an expert tensor width other than tp): each rank routes its own
// tokens (T / tp under sequence parallelism), and the dispatcher brings the routed copies to
// the ranks of their experts.
void moe_expert_parallel(const TransformerLayer& b, const BlockSizes& z, Builder& B) {
  const LayerShape& s = B.shape();
  const double act = B.act();
  const int64_t h = z.h, E = b.experts, k = b.top_k;
  const int64_t ep = s.ep, etp = s.expert_tp();
  const int64_t N = static_cast<int64_t>(z.Tr);  // this rank's tokens
  const int64_t local = E / ep;
  const CommScope et = expert_tensor_scope(s);
  const Pass F = Pass::kForward, Bi = Pass::kBackwardInput;
  B.linear("router", N, h, E, {.quantizable = false});
  B.memory("router_topk", F, static_cast<double>(N) * E * 4);
  const int64_t d = latent_down(b, h, N, B);
  experts_token_counts(B);
  int64_t routed = 0;  // routed copies this rank's experts receive
  if (s.dispatcher == MoeDispatcher::kAllGather) {
    // Gather the hidden states of the expert-tensor and expert groups (hierarchically: etp,
    // then ep), run the local experts on the copies routed to them, reduce-scatter back.
    const double gathered_etp = static_cast<double>(N) * etp * d * act;
    const double gathered = gathered_etp * ep;
    B.comm("moe_allgather_etp", F, CollectiveKind::kAllGather, gathered_etp, et);
    B.comm("moe_allgather_ep", F, CollectiveKind::kAllGather, gathered, CommScope::kExpert);
    B.comm("moe_allgather_ep_grad", Bi, CollectiveKind::kReduceScatter, gathered,
           CommScope::kExpert);
    B.comm("moe_allgather_etp_grad", Bi, CollectiveKind::kReduceScatter, gathered_etp, et);
    routed = N * etp * ep * k / ep;
    permute(static_cast<double>(routed), d, B);
  } else {
    // All-to-all: permute this rank's copies, send them to their experts' ranks, gather them
    // over the expert tensor group, and sort them by local expert (Megatron-Core's
    // sort_chunks_by_idxs); the same back after the experts. The flex dispatcher moves the
    // same copies, a token once per destination node and GPU (the copies made there).
    const double sent = static_cast<double>(N) * k * d * act;
    permute(static_cast<double>(N) * k, d, B);
    B.routed_all_to_all("moe_dispatch_a2a", F, sent, E, k);
    B.routed_all_to_all("moe_dispatch_a2a_grad", Bi, sent, E, k);
    B.comm("moe_dispatch_allgather_etp", F, CollectiveKind::kAllGather, sent * etp, et);
    B.comm("moe_dispatch_reducescatter_etp_grad", Bi, CollectiveKind::kReduceScatter, sent * etp,
           et);
    routed = N * k * etp;
    if (ep > 1 && local > 1) {
      B.memory("moe_sort_chunks", F, 2.0 * routed * d * act);
      B.memory("moe_sort_chunks_grad", Bi, 2.0 * routed * d * act);
    }
  }
  const auto [tokens, fraction] = expert_tokens(routed, local, s.moe_imbalance);
  B.keep(static_cast<double>(routed) * d * B.linear_input());  // the experts' inputs
  mlp_gemms(b, d, tokens, b.ffn_hidden / etp, local, fraction, "", B, true);
  if (s.dispatcher == MoeDispatcher::kAllGather) {
    unpermute(static_cast<double>(routed), static_cast<double>(N) * etp * ep, d, B);
    const double gathered_etp = static_cast<double>(N) * etp * d * act;
    B.comm("moe_reducescatter_ep", F, CollectiveKind::kReduceScatter, gathered_etp * ep,
           CommScope::kExpert);
    B.comm("moe_reducescatter_etp", F, CollectiveKind::kReduceScatter, gathered_etp, et);
    B.comm("moe_reducescatter_etp_grad", Bi, CollectiveKind::kAllGather, gathered_etp, et);
    B.comm("moe_reducescatter_ep_grad", Bi, CollectiveKind::kAllGather, gathered_etp * ep,
           CommScope::kExpert);
  } else {
    const double sent = static_cast<double>(N) * k * d * act;
    if (ep > 1 && local > 1) {
      B.memory("moe_unsort_chunks", F, 2.0 * routed * d * act);
      B.memory("moe_unsort_chunks_grad", Bi, 2.0 * routed * d * act);
    }
    B.comm("moe_combine_reducescatter_etp", F, CollectiveKind::kReduceScatter, sent * etp, et);
    B.comm("moe_combine_allgather_etp_grad", Bi, CollectiveKind::kAllGather, sent * etp, et);
    B.routed_all_to_all("moe_combine_a2a", F, sent, E, k);
    B.routed_all_to_all("moe_combine_a2a_grad", Bi, sent, E, k);
    unpermute(static_cast<double>(N) * k, static_cast<double>(N), d, B);
  }
  latent_up(b, h, N, B);
  if (b.shared_experts > 0) {
    // Shared experts in a tensor-parallel region of their own (their linear layers' gathers and
    // reductions, re-run with them).
    Builder::ModuleScope scope(B, RecomputeModule::kSharedExperts);
    B.enter_tp_region("shared", z.x_bytes);
    shared_experts(b, h, z.T, B);
    B.leave_tp_region("shared", z.x_bytes);
  }
}

void check_moe_widths(const LayerSpec& layer, const TransformerLayer& b, const LayerShape& s) {
  if (b.experts % s.ep != 0)
    throw InputError(fmt::format("expert-parallel width {} does not divide the {} experts of {}",
                                 s.ep, b.experts, layer.name));
  if (b.ffn_hidden % s.expert_tp() != 0)
    throw InputError(
        fmt::format("expert tensor width {} does not divide the experts' MLP width "
                    "{} of {}",
                    s.expert_tp(), b.ffn_hidden, layer.name));
  if ((b.shared_experts * b.shared_ffn_hidden) % s.tp != 0)
    throw InputError(
        fmt::format("tensor-parallel width {} does not divide the shared experts' "
                    "MLP width {} of {}",
                    s.tp, b.shared_experts * b.shared_ffn_hidden, layer.name));
}

}  // namespace

void mlp_part(const LayerSpec& layer, const TransformerLayer& b, const BlockSizes& z, Builder& B) {
  const LayerShape& s = B.shape();
  if (b.is_moe() && b.norm != NormKind::kNone) {
    // Megatron-Core's MoE layers keep their pre-MLP norm apart (dense ones fuse it into fc1):
    // recompute_modules layernorm re-runs it (gpt_layer_specs.py, transformer_layer.py at
    // d98e8a64dd).
    Builder::ModuleScope norm(B, RecomputeModule::kLayernorm);
    B.norm(b.norm, z.Tr, z.h);
  } else {
    B.norm(b.norm, z.Tr, z.h);
  }
  B.keep_norm(b.norm, z.Tr, z.h);
  B.autocast_input(z.Tr * z.h);
  if (b.is_moe()) {
    check_moe_widths(layer, b, s);
    // The norm's output, which the router and the shared experts' fc1 keep (and recompute_modules
    // moe keeps as its checkpoint's input); recomputing the norm drops it.
    B.keep(z.Tr * z.h * B.act(), module_group(RecomputeModule::kLayernorm));
    // recompute_modules moe checkpoints the whole MoE layer: router, dispatch, experts, combine
    // and shared experts (MoELayer.forward, moe_layer.py at d98e8a64dd).
    Builder::ModuleScope moe(B, RecomputeModule::kMoe);
    if (moe_in_tensor_region(s.ep, s.expert_tp(), s.tp, s.dispatcher)) {
      moe_tensor_region(b, z, B);
    } else {
      if (s.tp > 1 && !s.sequence_parallel)
        throw InputError(
            fmt::format("{}: expert parallelism (or an expert tensor width other "
                        "than tp) with tp > 1 needs sequence parallelism, as "
                        "Megatron-Core requires",
                        layer.name));
      moe_expert_parallel(b, z, B);
    }
  } else {
    // fc1's input, which recompute_modules mlp keeps as its checkpoint's input; the rest of the
    // MLP (its gather and reduction with it) re-runs in backward (transformer_layer.py at
    // d98e8a64dd: tensor_parallel.checkpoint of self.mlp, dense layers only).
    B.keep(z.Tr * z.h * B.linear_input());  // fc1 input
    Builder::ModuleScope mlp(B, RecomputeModule::kMlp);
    B.enter_tp_region("mlp", z.x_bytes);
    mlp_gemms(b, z.h, z.T, b.ffn_hidden / s.tp, 1, 1, "", B);
    B.leave_tp_region("mlp", z.x_bytes);
  }
  if (b.post_norms) B.kept_norm(b.norm, z.Tr, z.h);  // Gemma's post_feedforward_layernorm
  residual(b, z, b.mlp_bias, B);
}

}  // namespace hetplan::layer_detail
