// A multi-token-prediction module's work around its block (DeepSeek-V3 section 2.2, Megatron-Core's
// MultiTokenPredictionLayer): before it, the embedding of the tokens one further ahead (the main
// model's table), RMSNorms of that embedding and of the hidden state coming in, and the
// projection of the two joined (2 x hidden -> hidden); after it, the final norm, the logits
// through the LM head's weights and their cross-entropy. The main model's hidden state passes on
// to the LM head unchanged.
#include "costmodel/layer_builder.h"

namespace hetplan::layer_detail {

void mtp_prologue(const TransformerLayer& b, const BlockSizes& z, Builder& B) {
  const LayerShape& s = B.shape();
  const double act = B.act();
  // The lookup in the vocabulary-parallel table, reduced over the tensor group; its gradient
  // rows are added into the embedding's gradient (the table is the embedding layer's).
  B.memory("mtp_embedding_fwd", Pass::kForward, z.x_bytes * 2);
  B.leave_tp_region("mtp_embedding", z.x_bytes);
  B.memory("mtp_embedding_bwd", Pass::kBackwardWeight, z.x_bytes * 2);
  B.kept_norm(b.norm, z.Tr, z.h);  // enorm
  B.kept_norm(b.norm, z.Tr, z.h);  // hnorm
  B.memory("mtp_concat", Pass::kForward, 4 * z.Tr * z.h * act);
  B.memory("mtp_concat_grad", Pass::kBackwardInput, 4 * z.Tr * z.h * act);
  // eh_proj, column-parallel; its output gathered back to the hidden state's layout.
  B.enter_tp_region("mtp_proj", 2 * z.x_bytes);
  B.keep(2 * z.Tr * z.h * act);
  B.linear("mtp_eh_proj", z.T, 2 * z.h, z.h / s.tp);
  B.leave_tp_region("mtp_proj", z.x_bytes);
}

void mtp_epilogue(const TransformerLayer& b, const BlockSizes& z, Builder& B) {
  const LayerShape& s = B.shape();
  const double act = B.act();
  B.kept_norm(b.norm, z.Tr, z.h);
  const int64_t v = (s.pad_vocab ? padded_vocab(b.mtp_vocab, s.tp) : b.mtp_vocab) / s.tp;
  B.enter_tp_region("mtp_logits", z.x_bytes);
  B.linear("mtp_logits", z.T, z.h, v, {.shared_weight = true, .quantizable = false});
  B.keep(z.Tr * z.h * act);
  cross_entropy(static_cast<double>(z.T), v, B);
}

}  // namespace hetplan::layer_detail
