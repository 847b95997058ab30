// A hybrid model's Mamba-2 layer on one rank (Megatron-Core's MambaLayer and MambaMixer; the SSD
// layer of Dao and Gu 2024, "Transformers are SSMs", section 6): the pre-norm, in_proj, the
// causal conv1d and SiLU, the chunked state-space scan, the gated RMSNorm, out_proj and the
// residual branch, with Megatron's tensor parallelism (in_proj column-parallel over the heads and
// groups, out_proj row-parallel).
#include "costmodel/layer_builder.h"

namespace hetplan::layer_detail {
namespace {

// The chunked scan (SSD's "block decomposition", mamba_ssm's mamba_chunk_scan_combined: Triton
// kernels of batched matmuls over chunks of Q tokens) of `heads` heads of P channels and `groups`
// groups of states of N, over the rank's T tokens in C = T / Q chunks:
// - C B^T within each chunk, per group: Q x Q x N;
// - each chunk's end state, per head: N x P over Q tokens (B^T x);
// - the states passed from chunk to chunk: C x heads x N x P fp32 values read and written;
// - the outputs within a chunk, per head: (C B^T, decayed) x over Q, and from the entering state,
//   C x state over N.
// Backward computes the gradient of both operands of each matmul (two matmuls of the same size
// each) and passes the states' gradients back. The per-token decays (dt's softplus and its cumsum
// within chunks, A x dt) are memory-bound passes over T x heads fp32 values.
void chunked_scan(const Mamba2Spec& m, int64_t tokens, int64_t heads, int64_t groups, Builder& B) {
  const int64_t Q = std::min<int64_t>(m.chunk, tokens);
  const int64_t C = (tokens + Q - 1) / Q;
  const int64_t N = m.state, P = m.head_dim;
  const Pass F = Pass::kForward, Bi = Pass::kBackwardInput;
  const auto bmm = [&](const std::string& name, int64_t rows, int64_t cols, int64_t depth,
                       int64_t batch) {
    B.gemm(name, F, {rows, cols, depth, batch, false, false});
    B.gemm(name, Bi, {rows, depth, cols, batch, false, true});  // the left operand's gradient
    B.gemm(name, Bi, {depth, cols, rows, batch, true, false});  // the right operand's
  };
  bmm("ssd_cb", Q, Q, N, C * groups);
  bmm("ssd_chunk_state", N, P, Q, C * heads);
  bmm("ssd_scan_diag", Q, P, Q, C * heads);
  bmm("ssd_scan_state", Q, P, N, C * heads);
  const double states = static_cast<double>(C) * heads * N * P * 4;
  B.memory("ssd_state_passing_fwd", F, 2 * states);
  B.memory("ssd_state_passing_bwd", Bi, 3 * states);
  const double decays = static_cast<double>(tokens) * heads * 4;
  B.memory("ssd_decay_fwd", F, 4 * decays);
  B.memory("ssd_decay_bwd", Bi, 6 * decays);
}

}  // namespace

void mamba_part(const TransformerLayer& b, const BlockSizes& z, Builder& B) {
  const Mamba2Spec& m = b.mamba;
  const int64_t tp = B.shape().tp;
  const int64_t heads = m.heads / tp, groups = m.groups / tp;
  const int64_t inner = heads * m.head_dim;
  const int64_t conv = inner + 2 * groups * m.state;  // x, B, C on this rank
  const int64_t in_width = inner + conv + heads;      // z, x, B, C, dt
  const double act = B.act();
  const double T = static_cast<double>(z.T);
  B.kept_norm(b.norm, z.Tr, z.h);
  B.enter_tp_region("mamba", z.x_bytes);
  B.linear("mamba_in_proj", z.T, z.h, in_width);
  B.keep(T * z.h * B.linear_input());  // in_proj's input
  // The causal depthwise conv1d (conv_kernel taps per channel, a bias) and SiLU over x, B, C:
  // one kernel each way (causal_conv1d_fn), its input kept; its weight gradient reads the input
  // and the output gradient again.
  const double channels = T * static_cast<double>(conv);
  B.memory("mamba_conv1d_fwd", Pass::kForward, 2 * channels * act);
  B.memory("mamba_conv1d_bwd", Pass::kBackwardInput, 3 * channels * act);
  B.memory("mamba_conv1d_bwd_weight", Pass::kBackwardWeight, 2 * channels * act);
  // Megatron-Core trains through mamba_ssm's memory-efficient path (use_mamba_mem_eff_path, on by
  // default: mamba_mixer.py _ssm_training at d98e8a64dd): MambaSplitConv1dScanCombinedFn keeps
  // in_proj's whole output (z, x, B, C and dt, in the activation dtype) and the scan's output,
  // and recomputes the conv's output in backward (ssd_combined.py at state-spaces/mamba e9594ce).
  B.keep(T * static_cast<double>(in_width) * act);  // z, x, B, C, dt: the conv's input among them
  chunked_scan(m, z.T, heads, groups, B);
  // The gated RMSNorm over the heads' outputs y with z (RMSNormGated, group-wise per the groups):
  // reads y and z, writes the normed product; backward reads the gradient, y and z and writes
  // theirs; its gain's gradient reads them again.
  const double y = T * static_cast<double>(inner);
  B.memory("mamba_gated_norm_fwd", Pass::kForward, 3 * y * act + T * kNormStatBytes);
  B.memory("mamba_gated_norm_bwd", Pass::kBackwardInput, 5 * y * act + T * kNormStatBytes);
  B.memory("mamba_gated_norm_bwd_weight", Pass::kBackwardWeight, 2 * y * act);
  // The scan's output before its gate with z (the combined function's out_x), and the gated
  // output the RMSNorm reads, with its statistics (ExtendedRMSNorm after the combined function).
  B.keep(2 * y * act + T * kNormStatBytes);
  B.linear("mamba_out_proj", z.T, inner, z.h);
  B.keep(y * B.linear_input());  // out_proj's input
  B.leave_tp_region("mamba", z.x_bytes);
  residual(b, z, /*bias=*/false, B);
}

}  // namespace hetplan::layer_detail
