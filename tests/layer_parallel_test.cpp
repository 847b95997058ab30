// Context, expert and expert-tensor parallelism in the layer decomposition, and the layer variants
// of today's families (MLA, sliding windows, q/k norms, MTP), each against values worked out by
// hand in the comments.
#include <gtest/gtest.h>

#include <algorithm>

#include "costmodel/cost_model.h"
#include "costmodel/errors.h"
#include "costmodel/layer_ops.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"
#include "test_util.h"

namespace hetplan {
namespace {

// A LLaMA-style block, over 4096 tokens unless said (testing::llama_block).
LayerSpec llama_block(int64_t seq = 4096) { return testing::llama_block(seq); }

// A MoE block: h 1024, 8 experts of SwiGLU 512, top-2, sequence 1024.
LayerSpec moe_block() {
  LayerSpec l = llama_block(1024);
  auto& b = std::get<TransformerLayer>(l.op);
  b.ffn_hidden = 512;
  b.experts = 8;
  b.top_k = 2;
  return l;
}

const GemmOp* find_gemm(const LayerWork& w, const std::string& name, Pass pass) {
  for (const auto& g : w.gemms)
    if (g.name == name && g.pass == pass) return &g;
  return nullptr;
}
const CommOp* find_comm(const LayerWork& w, const std::string& name) {
  for (const auto& c : w.comms)
    if (c.name == name) return &c;
  return nullptr;
}
double memory_bytes(const LayerWork& w, const std::string& kernel) {
  double b = 0;
  for (const auto& m : w.memory_ops)
    if (m.kernel == kernel) b += m.bytes;
  return b;
}

TEST(ContextParallel, RingSplitsTokensAndAttentionAndExchangesKvChunks) {
  LayerShape s;
  s.cp = 2;
  const LayerWork w = layer_work(llama_block(), s);
  // Each rank holds 4096 / 2 = 2048 tokens: the QKV GEMM runs on them.
  EXPECT_EQ(find_gemm(w, "qkv", Pass::kForward)->shape.n, 2048);
  // Attention: its 2048 queries against all 4096 keys, 1/2 of the causal work: 4 x 16 heads x
  // 4096^2 x 64 = 68,719,476,736 in full, half of that causal, half of it per rank.
  ASSERT_EQ(w.attention.size(), 2u);
  EXPECT_EQ(w.attention[0].seq_len, 2048);
  EXPECT_EQ(w.attention[0].kv_seq_len, 4096);
  EXPECT_DOUBLE_EQ(w.attention[0].flops, 17'179'869'184.0);
  EXPECT_DOUBLE_EQ(w.attention[1].flops, 2.5 * 17'179'869'184.0);
  // The ring: cp - 1 = 1 transfer of the rank's K and V, 2048 tokens x 4 KV heads x (64 + 64) x 2
  // bytes = 2,097,152 forward; keys, values and their gradients backward, twice that.
  const CommOp* ring = find_comm(w, "cp_kv_ring");
  ASSERT_NE(ring, nullptr);
  EXPECT_EQ(ring->scope, CommScope::kContext);
  EXPECT_EQ(ring->kind, CollectiveKind::kSendRecv);
  EXPECT_EQ(ring->overlap, CommOverlap::kAttention);
  EXPECT_EQ(ring->repeats, 1);
  EXPECT_DOUBLE_EQ(ring->bytes, 2'097'152.0);
  EXPECT_DOUBLE_EQ(find_comm(w, "cp_kv_ring_grad")->bytes, 4'194'304.0);
  // cp = 4: three transfers of half the chunk.
  s.cp = 4;
  const CommOp* four = find_comm(layer_work(llama_block(), s), "cp_kv_ring");
  EXPECT_EQ(four->repeats, 3);
  EXPECT_DOUBLE_EQ(four->bytes, 1'048'576.0);
}

TEST(ContextParallel, ActivationsAndModelFlopsDivideByCp) {
  LayerShape one, two;
  two.cp = 2;
  const LayerWork a = layer_work(llama_block(), one), b = layer_work(llama_block(), two);
  // Every tensor a block keeps is per token (the log-sum-exp per query): half the tokens, half.
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
    EXPECT_DOUBLE_EQ(b.activation(r), a.activation(r) / 2);
  for (int p = 0; p < kNumPasses; ++p) EXPECT_DOUBLE_EQ(b.model_flops[p], a.model_flops[p] / 2);
  EXPECT_TRUE(a.comms.empty());  // cp = 1, tp = 1: no communication, as before
}

TEST(ContextParallel, AllGatherAndUlyssesVariants) {
  LayerShape s;
  s.cp = 2;
  s.cp_comm = CpComm::kAllGather;
  LayerWork w = layer_work(llama_block(), s);
  // K and V of the whole sequence: 4096 x 4 x 128 x 2 = 4,194,304 gathered, the same reduced.
  EXPECT_DOUBLE_EQ(find_comm(w, "cp_kv_allgather")->bytes, 4'194'304.0);
  EXPECT_DOUBLE_EQ(find_comm(w, "cp_kv_reducescatter_grad")->bytes, 4'194'304.0);
  EXPECT_EQ(find_comm(w, "cp_kv_ring"), nullptr);
  // a2a: Q (2048 x 16 x 64 x 2 = 4,194,304) with K and V (2,097,152) to the head split and the
  // output (4,194,304) back; attention then runs every token on 16 / 2 = 8 heads.
  s.cp_comm = CpComm::kA2a;
  w = layer_work(llama_block(), s);
  EXPECT_DOUBLE_EQ(find_comm(w, "cp_a2a_qkv")->bytes, 6'291'456.0);
  EXPECT_DOUBLE_EQ(find_comm(w, "cp_a2a_out")->bytes, 4'194'304.0);
  EXPECT_EQ(find_comm(w, "cp_a2a_qkv")->kind, CollectiveKind::kAllToAll);
  EXPECT_EQ(w.attention[0].heads, 8);
  EXPECT_EQ(w.attention[0].seq_len, 4096);
  EXPECT_DOUBLE_EQ(w.attention[0].flops, 17'179'869'184.0);
  // Causal load balancing needs 2 x cp chunks: 4096 does not split into 2 x 3.
  s.cp = 3;
  s.cp_comm = CpComm::kP2p;
  EXPECT_THROW(layer_work(llama_block(), s), InputError);
  const ModelSpec m = load_model("llama3-8b");
  EXPECT_NE(context_parallel_problem(m, 3), "");
  EXPECT_EQ(context_parallel_problem(m, 2), "");
  // a2a splits the 8 KV heads of Llama 3 8B: cp 16 cannot.
  EXPECT_NE(context_parallel_problem(m, 16, 1, CpComm::kA2a), "");
}

TEST(ContextParallel, RingExchangeIsExposedOnlyBeyondTheAttentionItHidesBehind) {
  ClusterSpec cluster = load_cluster("p5.48xlarge:2");
  const CostModel cost(
      fit_profile({load_calibration(default_calibration_dir() / "datasheet" / "h100-sxm.json")}),
      cluster);
  const GpuSpec& gpu = cluster.groups[0].node.gpu;
  const auto devices = cluster_devices(cluster);
  LayerGroups groups;
  groups.context = make_comm_group(cluster, devices, {0, 8});  // two ranks on two nodes
  LayerShape s;
  s.cp = 2;
  const LayerWork w = layer_work(llama_block(), s);
  const LayerTimes t = cost.layer_times_from_ops(gpu, w, Recompute::kNone, groups, Dtype::kBf16);
  for (Pass p : {Pass::kForward, Pass::kBackwardInput}) {
    double comm = 0, attention = 0;
    for (const auto& c : w.comms)
      if (c.pass == p && c.scope == CommScope::kContext) comm += cost.comm_op_s(c, groups);
    for (const auto& a : w.attention)
      if (a.pass == p) attention += cost.attention_s(gpu, Dtype::kBf16, a);
    // One transfer behind one of the two attention steps: exposed max(0, transfer - step).
    const int pi = static_cast<int>(p);
    EXPECT_DOUBLE_EQ(t.comm_s[static_cast<int>(CommScope::kContext)][pi],
                     std::max(0.0, comm - attention / 2));
    EXPECT_GT(comm, 0);
  }
  // The one-group overload has no context group: the exchange costs nothing there.
  const LayerTimes alone =
      cost.layer_times_from_ops(gpu, w, Recompute::kNone, CommGroup{}, Dtype::kBf16);
  EXPECT_EQ(alone.comm_s[static_cast<int>(CommScope::kContext)][0], 0);
}

TEST(ExpertParallel, AllToAllDispatchGroupedGemmsAndLocalExperts) {
  LayerShape s;
  s.ep = 4;
  s.dispatcher = MoeDispatcher::kAllToAll;
  const LayerWork w = layer_work(moe_block(), s);
  // Router on the rank's 1024 tokens; 2 copies each, 2048 routed copies sent and received (a
  // balanced share: 8 experts / 4 ranks = 2 local experts of 1024 tokens each).
  EXPECT_EQ(find_gemm(w, "router", Pass::kForward)->shape.n, 1024);
  const GemmOp* fc1 = find_gemm(w, "fc1", Pass::kForward);
  EXPECT_EQ(fc1->shape.batch, 2);
  EXPECT_EQ(fc1->shape.n, 1024);
  EXPECT_EQ(fc1->shape.m, 1024);  // gate and up, 2 x 512
  // Dispatch and combine: 2048 copies x 1024 x 2 bytes = 4,194,304 each way and pass.
  for (const char* name :
       {"moe_dispatch_a2a", "moe_dispatch_a2a_grad", "moe_combine_a2a", "moe_combine_a2a_grad"}) {
    const CommOp* c = find_comm(w, name);
    ASSERT_NE(c, nullptr) << name;
    EXPECT_EQ(c->scope, CommScope::kExpert);
    EXPECT_EQ(c->kind, CollectiveKind::kAllToAll);
    EXPECT_DOUBLE_EQ(c->bytes, 4'194'304.0);
  }
  // Permutation: 2048 copies of 1024 read and written, 8,388,608 bytes forward; the unpermute
  // reads 2048 copies and writes 1024 tokens, (2048 + 1024) x 1024 x 2 = 6,291,456.
  EXPECT_DOUBLE_EQ(memory_bytes(w, "moe_permute_fwd"), 8'388'608.0);
  EXPECT_DOUBLE_EQ(memory_bytes(w, "moe_unpermute_fwd"), 6'291'456.0);
  EXPECT_DOUBLE_EQ(memory_bytes(w, "moe_sort_chunks"), 8'388'608.0);
  // Held per rank: 2 experts of 3 x 1024 x 512 = 3,145,728.
  EXPECT_EQ(w.expert_params, 3'145'728);
  EXPECT_EQ(expert_parameters(moe_block(), 4, 1), 3'145'728);
  // ep 3 does not divide 8 experts.
  s.ep = 3;
  EXPECT_THROW(layer_work(moe_block(), s), InputError);
}

TEST(ExpertParallel, ImbalanceRunsTheBusiestExpertsTokensButCountsTheRouted) {
  LayerShape s;
  s.ep = 4;
  s.dispatcher = MoeDispatcher::kAllToAll;
  const LayerWork even = layer_work(moe_block(), s);
  s.moe_imbalance = 1.25;
  const LayerWork skewed = layer_work(moe_block(), s);
  // ceil(1024 x 1.25) = 1280 tokens per local expert.
  EXPECT_EQ(find_gemm(skewed, "fc1", Pass::kForward)->shape.n, 1280);
  // Model FLOPs are the routed tokens' (1024 of the 1280): the same as balanced.
  for (int p = 0; p < kNumPasses; ++p)
    EXPECT_NEAR(skewed.model_flops[p], even.model_flops[p], 1e-6 * even.model_flops[p]);
  s.moe_imbalance = 0.5;
  EXPECT_THROW(layer_work(moe_block(), s), InputError);
}

TEST(ExpertParallel, ExpertTensorWidthAndItsScope) {
  LayerShape s;
  s.tp = 2;
  s.sequence_parallel = true;
  s.ep = 2;
  s.dispatcher = MoeDispatcher::kAllToAll;
  // etp = tp (the default): the experts' width halves and the gather over the expert-tensor group
  // is the tensor group's. Each rank routes 1024 / 2 = 512 tokens: 1024 copies sent (2,097,152
  // bytes), 2048 after the gather over 2 (4,194,304), 4 local experts of 512 tokens each.
  LayerWork w = layer_work(moe_block(), s);
  EXPECT_DOUBLE_EQ(find_comm(w, "moe_dispatch_a2a")->bytes, 2'097'152.0);
  const CommOp* gather = find_comm(w, "moe_dispatch_allgather_etp");
  ASSERT_NE(gather, nullptr);
  EXPECT_EQ(gather->scope, CommScope::kTensor);
  EXPECT_DOUBLE_EQ(gather->bytes, 4'194'304.0);
  const GemmOp* fc1 = find_gemm(w, "fc1", Pass::kForward);
  EXPECT_EQ(fc1->shape.batch, 4);
  EXPECT_EQ(fc1->shape.n, 512);
  EXPECT_EQ(fc1->shape.m, 512);  // 2 x 512 / 2
  // etp = 1: whole experts, no gather, the copies stay 1024 (4 experts of 256).
  s.etp = 1;
  w = layer_work(moe_block(), s);
  EXPECT_EQ(find_comm(w, "moe_dispatch_allgather_etp"), nullptr);
  EXPECT_EQ(find_gemm(w, "fc1", Pass::kForward)->shape.n, 256);
  EXPECT_EQ(find_gemm(w, "fc1", Pass::kForward)->shape.m, 1024);
  // Expert parallelism across tensor ranks needs sequence parallelism (Megatron-Core's rule).
  s.sequence_parallel = false;
  EXPECT_THROW(layer_work(moe_block(), s), InputError);
}

TEST(ExpertParallel, DefaultsKeepTheTensorParallelMoe) {
  LayerShape s;
  s.tp = 2;
  const LayerWork w = layer_work(moe_block(), s);
  // ep 1 with the experts split like the MLP (etp = tp, the allgather dispatcher): the MLP's
  // tensor-parallel all-reduces and every expert's shard on all 1024 tokens' 2048 copies / 8.
  for (const auto& c : w.comms) EXPECT_EQ(c.scope, CommScope::kTensor) << c.name;
  EXPECT_EQ(find_gemm(w, "fc1", Pass::kForward)->shape.batch, 8);
  EXPECT_EQ(find_gemm(w, "fc1", Pass::kForward)->shape.n, 256);
  EXPECT_EQ(find_gemm(w, "fc1", Pass::kForward)->shape.m, 512);  // 2 x 512 / 2
  EXPECT_NE(find_comm(w, "mlp_allreduce"), nullptr);
}

TEST(LayerVariants, SlidingWindowBoundsTheKeysPerQuery) {
  LayerSpec l = llama_block(4096);
  std::get<TransformerLayer>(l.op).window = 1024;
  const LayerWork w = layer_work(l, LayerShape{});
  // Pairs a causal query sees within 1024 keys: 4096 x 1024 - 1024^2 / 2 = 3,670,016 of 4096^2;
  // executed 4 x 16 x 4096^2 x 64 x 3,670,016 / 4096^2 = 15,032,385,536.
  EXPECT_DOUBLE_EQ(w.attention[0].flops, 15'032'385'536.0);
  EXPECT_EQ(w.attention[0].window, 1024);
  // Model FLOPs count each query's 1024 keys in full: 4 x 16 x 4096 x 1024 x 64 = 17,179,869,184.
  const LayerWork full = layer_work(llama_block(4096), LayerShape{});
  const double full_attention = 68'719'476'736.0;
  EXPECT_DOUBLE_EQ(full.model_flops[0] - w.model_flops[0], full_attention - 17'179'869'184.0);
  // A window no shorter than the sequence is no window.
  std::get<TransformerLayer>(l.op).window = 4096;
  EXPECT_DOUBLE_EQ(layer_work(l, LayerShape{}).attention[0].flops, full.attention[0].flops);
}

TEST(LayerVariants, MlaProjectionsAndCoreWidths) {
  const ModelSpec m = load_model("deepseek-v3");
  const LayerSpec& block = m.layers[4];  // the first MoE layer
  LayerShape s;
  s.micro_batch = 1;
  const LayerWork w = layer_work(block, s);
  // 4096 tokens: q_down 7168 -> 1536, kv_down 7168 -> 576, q_up 1536 -> 128 x 192, kv_up 512 ->
  // 128 x 256, the output 128 x 128 -> 7168.
  EXPECT_EQ(find_gemm(w, "q_down", Pass::kForward)->shape.m, 1536);
  EXPECT_EQ(find_gemm(w, "kv_down", Pass::kForward)->shape.m, 576);
  EXPECT_EQ(find_gemm(w, "q_up", Pass::kForward)->shape.m, 24576);
  EXPECT_EQ(find_gemm(w, "kv_up", Pass::kForward)->shape.m, 32768);
  EXPECT_EQ(find_gemm(w, "attn_out", Pass::kForward)->shape.k, 16384);
  // The core: QK^T over 192 features and PV over 128, 2 x 128 x 4096^2 x (192 + 128) in full,
  // half of it causal: 687,194,767,360.
  EXPECT_DOUBLE_EQ(w.attention[0].flops, 687'194'767'360.0);
  EXPECT_EQ(w.attention[0].head_dim, 192);
  // The rank's GEMM weights are the layer's parameters but its norms (the block's two, the two
  // latents' norms), router included, shared expert included.
  EXPECT_EQ(w.params, layer_parameters(block));
  EXPECT_EQ(w.params - w.gemm_weight_params, 2 * 7168 + 1536 + 512);
}

TEST(LayerVariants, QkNormsAndMtpModules) {
  LayerSpec l = llama_block(1024);
  std::get<TransformerLayer>(l.op).qk_norm = true;
  const LayerWork w = layer_work(l, LayerShape{});
  // Two RMSNorms over 1024 tokens x 16 query heads and x 4 key heads of 64: forward reads and
  // writes 1024 x 20 x 64 x 2 bytes and keeps 8 bytes of statistics per row: 2 x 2,621,440 +
  // 20,480 x 8 = 5,406,720, with the block's own two norms (2 x (2 x 2,097,152 + 8,192)).
  EXPECT_DOUBLE_EQ(memory_bytes(w, "rmsnorm_fwd"), 5'406'720.0 + 2 * (4'194'304.0 + 8'192.0));
  // An MTP module: the head's logits over the vocabulary with the head's weights (not its own).
  const ModelSpec m = load_model("deepseek-v3");
  const LayerWork mtp = layer_work(m.layers[62], LayerShape{});
  const GemmOp* logits = find_gemm(mtp, "mtp_logits", Pass::kForward);
  ASSERT_NE(logits, nullptr);
  EXPECT_EQ(logits->shape.m, 129280);  // padded to 128: 129280 already is
  EXPECT_EQ(mtp.params, layer_parameters(m.layers[62]));
  EXPECT_GT(memory_bytes(mtp, "ce_exp"), 0);
  EXPECT_EQ(mtp.output_bytes, 4096.0 * 7168 * 2);  // the main hidden state passes on
}

}  // namespace
}  // namespace hetplan
