// Per-op selective recomputation (recompute "op", torchtitan's SelectiveAC; FrameworkSpec::
// op_recompute): which of a block's forward ops run again and what it keeps, what that costs, the
// frameworks that run it and those that do not, its exports, and framework files that start from
// a preset (`base`).
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/cost_model.h"
#include "costmodel/framework.h"
#include "costmodel/layer_ops.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"
#include "report/export/exporters.h"
#include "search/evaluate.h"
#include "search/rules.h"
#include "search/search.h"
#include "search/strategy.h"
#include "test_util.h"

namespace hetplan {
namespace {

using testing::contains;
using testing::error_of;
using testing::read_strategy;

const GemmOp& forward_gemm(const LayerWork& w, const std::string& name) {
  for (const auto& g : w.gemms)
    if (g.name == name && g.pass == Pass::kForward) return g;
  throw std::runtime_error("no forward GEMM " + name);
}

LayerWork block_work(const FrameworkSpec& f, Precision precision = Precision::kBf16,
                     int64_t tp = 1) {
  LayerShape s;
  s.framework = &f;
  s.precision = precision;
  s.tp = tp;
  s.sequence_parallel = tp > 1;
  return layer_work(testing::llama_block(1024), s);
}

// testing::llama_block: hidden 1024, 16 heads of 64, 4 KV heads, SwiGLU 2816, 1024 tokens. The
// block's matmuls in torchtitan's order: wq 1 (kept), wk 2 (re-run), wv 3 (kept), wo 4 (re-run),
// w1 5 (kept), w3 6 (re-run), w2 7 (kept).
TEST(RecomputeOp, EverySecondMatmulOfTheBlockRunsAgain) {
  const FrameworkSpec tt = load_framework("torchtitan");
  const LayerWork w = block_work(tt);
  EXPECT_DOUBLE_EQ(forward_gemm(w, "qkv").op_rerun, 256.0 / 1536.0);  // wk of wq, wk, wv
  EXPECT_DOUBLE_EQ(forward_gemm(w, "attn_out").op_rerun, 1);
  EXPECT_DOUBLE_EQ(forward_gemm(w, "fc1").op_rerun, 0.5);  // w3 of w1, w3
  EXPECT_DOUBLE_EQ(forward_gemm(w, "fc2").op_rerun, 0);
  for (const auto& g : w.gemms)
    if (g.pass != Pass::kForward) {
      EXPECT_EQ(g.op_rerun, 0) << g.name;
    }
  for (const auto& a : w.attention) EXPECT_EQ(a.op_rerun, 0);  // SDPA's output is saved
  for (const auto& m : w.memory_ops)
    EXPECT_EQ(m.op_rerun, m.pass == Pass::kForward ? 1 : 0) << m.kernel;
  // Kept: the block's input, wq's, wv's, w1's and w2's outputs, attention's output and its
  // logsumexp (fp32 per head and token), all bf16 over 1024 tokens.
  const double T = 1024;
  const double kept = T * 2 * (1024 + 1024 + 256 + 2816 + 1024) + T * 2 * 1024 + T * 16 * 4;
  EXPECT_DOUBLE_EQ(w.activation(Recompute::kOp), kept);
  EXPECT_LT(w.activation(Recompute::kFull), w.activation(Recompute::kOp));
  EXPECT_LT(w.activation(Recompute::kOp), w.activation(Recompute::kNone));
  // The re-run kernels: wk, wo, w3 and every forward memory-bound kernel.
  double memory_kernels = 0;
  for (const auto& m : w.memory_ops)
    if (m.pass == Pass::kForward) memory_kernels += static_cast<double>(m.launches);
  EXPECT_DOUBLE_EQ(layer_kernels(w, Recompute::kOp).recompute, 3 + memory_kernels);
  // A framework without the policy re-runs nothing per op.
  const LayerWork mc = block_work(load_framework("megatron-core"));
  EXPECT_EQ(forward_gemm(mc, "qkv").op_rerun, 0);
  EXPECT_EQ(layer_kernels(mc, Recompute::kOp).recompute, 0);
}

TEST(RecomputeOp, Float8LinearsCountAsMatmuls) {
  // torchao's Float8Linear runs torch.mm on float8 tensor subclasses, which the policy sees as
  // aten.mm: its GEMMs are counted and kept as the bf16 ones, in both releases (9dec370's save list
  // has no torch._scaled_mm, today's has it; neither sees one). A framework that calls
  // torch._scaled_mm itself keeps or re-runs every quantised GEMM by the saves' entry.
  const LayerWork bf16 = block_work(load_framework("torchtitan"));
  for (const char* framework : {"torchtitan", "torchtitan-2024"}) {
    const LayerWork fp8 = block_work(load_framework(framework), Precision::kFp8Current);
    for (const char* name : {"qkv", "attn_out", "fc1", "fc2"}) {
      EXPECT_TRUE(forward_gemm(fp8, name).quantized) << name;
      EXPECT_EQ(forward_gemm(fp8, name).op_rerun, forward_gemm(bf16, name).op_rerun) << name;
    }
    EXPECT_DOUBLE_EQ(fp8.activation(Recompute::kOp), bf16.activation(Recompute::kOp));
  }
  const auto path = std::filesystem::temp_directory_path() / "scaled_mm.yaml";
  std::ofstream(path) << "base: torchtitan\n"
                         "op_recompute: {saves: [matmul, attention], every_second_matmul: true,\n"
                         "               quantized_linears: scaled_mm}\n"
                         "sources: {op_recompute: \"test\"}\n";
  const FrameworkSpec direct = load_framework(path.string());
  std::filesystem::remove(path);
  const LayerWork fp8 = block_work(direct, Precision::kFp8Current);
  for (const char* name : {"qkv", "attn_out", "fc1", "fc2"})
    EXPECT_EQ(forward_gemm(fp8, name).op_rerun, 1) << name;
  const double T = 1024;  // the block's input, attention's output and logsumexp
  EXPECT_DOUBLE_EQ(fp8.activation(Recompute::kOp), T * 2 * 1024 + T * 2 * 1024 + T * 16 * 4);
}

TEST(RecomputeOp, ReduceScattersAreKeptAndGathersSentAgain) {
  // tp 2 with sequence parallelism: the forward's all-gathers run again in backward, its
  // reduce-scatters are saved (their output: 1/2 of the 1024 x 1024 bf16 activation each).
  const FrameworkSpec tt = load_framework("torchtitan");
  const LayerWork w = block_work(tt, Precision::kBf16, 2);
  int gathers = 0, scatters = 0;
  for (const auto& c : w.comms) {
    if (c.pass != Pass::kForward) continue;
    if (c.kind == CollectiveKind::kAllGather) {
      ++gathers;
      EXPECT_EQ(c.op_rerun, 1) << c.name;
    }
    if (c.kind == CollectiveKind::kReduceScatter) {
      ++scatters;
      EXPECT_EQ(c.op_rerun, 0) << c.name;
    }
  }
  EXPECT_EQ(gathers, 2);
  EXPECT_EQ(scatters, 2);
  const double T = 1024;
  // Per rank: the block's input (1/2 of the tokens), wq's, wv's and w1's outputs (half width),
  // attention's output and logsumexp on 8 heads, the two reduce-scatters' outputs.
  const double kept = T / 2 * 1024 * 2 + T * 2 * (512 + 128 + 1408) + T * 2 * 512 + T * 8 * 4 +
                      2 * (T * 1024 * 2 / 2);
  // wo and w2 (row-parallel) are matmuls 4 and 7: wo re-runs, w2's output (half width in, full
  // out) is kept.
  EXPECT_DOUBLE_EQ(w.activation(Recompute::kOp), kept + T * 1024 * 2);
}

TEST(RecomputeOp, CostsItsShareOfTheForwardAndKeepsWhatItSaves) {
  const ModelSpec model = load_model("llama3-8b");
  const ClusterSpec cluster = load_cluster("dgx-h100:1");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), cluster);
  const Evaluator ev(model, cluster, cost, load_framework("torchtitan"));
  Strategy s = read_strategy(R"({"dp": 8, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8,
                                 "zero": 3, "recompute": "op", "framework": "torchtitan",
                                 "grad_accumulation_fusion": false,
                                 "host_mode": "cuda-graphs"})");
  Strategy none = s, full = s;
  none.recompute = Recompute::kNone;
  full.recompute = Recompute::kFull;
  const LayerCost op_block = ev.layer_costs(0, 1, s)[1];
  const LayerCost full_block = ev.layer_costs(0, 1, full)[1];
  const LayerCost plain_block = ev.layer_costs(0, 1, none)[1];
  EXPECT_GT(op_block.times.recompute_s, 0.2 * full_block.times.recompute_s);
  EXPECT_LT(op_block.times.recompute_s, 0.8 * full_block.times.recompute_s);
  EXPECT_NEAR(op_block.times.pass_s[1] - op_block.times.recompute_s, plain_block.times.pass_s[1],
              1e-9 * plain_block.times.pass_s[1]);
  // The embedding and the head are not checkpointed (torchtitan wraps model.layers).
  EXPECT_EQ(ev.layer_costs(0, 1, s)[0].times.recompute_s, 0);
  const Prediction po = ev.predict(s), pf = ev.predict(full), pn = ev.predict(none);
  // Without recomputation the 8,192 tokens' activations do not fit in 80 GB beside the
  // gradients (kept through the step under torchtitan's CUDA graphs); per op they do.
  ASSERT_TRUE(po.feasible && pf.feasible) << po.reason << pf.reason;
  EXPECT_FALSE(pn.feasible);
  EXPECT_LT(pn.iteration_s, po.iteration_s);
  EXPECT_LT(po.iteration_s, pf.iteration_s);
  EXPECT_LT(pf.stages[0].memory.activations, po.stages[0].memory.activations);
  EXPECT_LT(po.stages[0].memory.activations, pn.stages[0].memory.activations);
}

TEST(RecomputeOp, OnlyAFrameworkWithThePolicyRunsItAndTheSearchTriesIt) {
  const ModelSpec model = load_model("gpt2-medium");
  const Strategy s = read_strategy(R"({"dp": 8, "tp": 1, "pp": 1, "micro_batch": 1,
                                       "global_batch": 8, "zero": 3, "recompute": "op",
                                       "grad_accumulation_fusion": false})");
  EXPECT_FALSE(first_broken_rule({model, load_framework("torchtitan"), 8}, s).has_value());
  const auto v = first_broken_rule({model, load_framework("megatron-core"), 8}, s);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->key, "recompute");
  EXPECT_TRUE(contains(v->reason, "not op")) << v->reason;
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), cluster);
  SearchOptions o;
  o.global_batch = 16;
  o.top_k = 100000;
  o.exhaustive = true;  // every candidate costed: those a twin settles too
  const auto tries_op = [&](const char* framework) {
    const Evaluator ev(model, cluster, cost, load_framework(framework));
    for (const auto& t : search_training(ev, o).top)
      if (t.strategy.recompute == Recompute::kOp) return true;
    return false;
  };
  EXPECT_TRUE(tries_op("torchtitan"));
  EXPECT_FALSE(tries_op("megatron-core"));
}

// Per-op candidates are costed after the rest and skipped where a twin settles them (no
// recomputation fits: slower; full recomputation fits nowhere: neither do they). The best plans
// are those of the exhaustive search.
TEST(RecomputeOp, TheSearchSkipsWhatItsTwinsSettleAndFindsTheSameBest) {
  const ModelSpec model = load_model("llama3-8b");
  const ClusterSpec cluster = load_cluster("dgx-h100:2");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), cluster);
  const Evaluator ev(model, cluster, cost, load_framework("torchtitan"));
  SearchOptions o;
  o.global_batch = 32;
  o.top_k = 5;
  const SearchResult fast = search_training(ev, o);
  o.exhaustive = true;
  const SearchResult all = search_training(ev, o);
  ASSERT_EQ(fast.top.size(), 5u);
  ASSERT_EQ(all.top.size(), 5u);
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(to_json(fast.top[k].strategy), to_json(all.top[k].strategy)) << k;
    EXPECT_DOUBLE_EQ(fast.top[k].predicted.iteration_s, all.top[k].predicted.iteration_s) << k;
  }
  const auto& pruned = fast.stats.pruned;
  const auto count = [&](const char* why) {
    const auto it = pruned.find(why);
    return it == pruned.end() ? 0 : it->second;
  };
  EXPECT_GT(count("recompute_twin") + count("memory_twin"), 0);
  EXPECT_EQ(all.stats.pruned.count("recompute_twin"), 0u);
}

TEST(RecomputeOp, ExportsAsSelectiveAcWhereTorchtitanRunsIt) {
  const ModelSpec model = load_model("gpt2-medium");
  const Strategy s = read_strategy(R"({"dp": 8, "tp": 1, "pp": 1, "micro_batch": 1,
                                       "global_batch": 8, "zero": 3, "recompute": "op",
                                       "framework": "torchtitan"})");
  EXPECT_EQ(to_json(s)["recompute"], "op");
  const ExportResult t = find_exporter("torchtitan").run(model, s, {});
  EXPECT_TRUE(contains(t.text, "config.activation_checkpoint = SelectiveAC.Config()")) << t.text;
  for (const auto& a : t.approximations) EXPECT_FALSE(contains(a, "selective")) << a;
  const ExportResult m = find_exporter("megatron").run(model, s, {});
  EXPECT_TRUE(std::any_of(m.unsupported.begin(), m.unsupported.end(), [](const std::string& u) {
    return contains(u, "per-op selective recomputation");
  }));
  EXPECT_FALSE(contains(m.text, "--recompute-granularity")) << m.text;
}

std::string load_error(const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / "recompute_op_framework.yaml";
  std::ofstream(path) << text;
  const std::string e = error_of([&] { load_framework(path.string()); });
  std::filesystem::remove(path);
  return e;
}

TEST(RecomputeOp, TheCapabilityAndThePolicyComeTogether) {
  std::ifstream in(std::string(HETPLAN_TEST_DATA) + "/framework_fixture.yaml");
  std::string fixture((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string listed = "recompute: [none, selective, full]";
  const size_t at = fixture.find(listed);
  ASSERT_NE(at, std::string::npos);
  std::string lists_op = fixture;
  lists_op.replace(at, listed.size(), "recompute: [none, selective, full, op]");
  const std::string missing = load_error(lists_op);
  EXPECT_TRUE(contains(missing, "op_recompute")) << missing;
  EXPECT_TRUE(contains(missing, "can_run.recompute lists op")) << missing;
  const std::string policy = "op_recompute: {saves: [matmul, attention]}\n";
  const std::string unlisted = load_error(policy + fixture);
  EXPECT_TRUE(contains(unlisted, "can_run.recompute to list op")) << unlisted;
  const std::string bad = load_error("op_recompute: {saves: [softmax]}\n" + lists_op);
  EXPECT_TRUE(contains(bad, "op_recompute.saves")) << bad;
  EXPECT_TRUE(contains(bad, "\"softmax\"")) << bad;
}

TEST(RecomputeOp, AFrameworkFileStartsFromAPreset) {
  const auto path = std::filesystem::temp_directory_path() / "tt_fork.yaml";
  std::ofstream(path) << "base: torchtitan\n"
                         "version: \"a fork\"\n"
                         "op_recompute: {saves: [attention], every_second_matmul: false}\n"
                         "sources: {op_recompute: \"the fork's policy\"}\n";
  const FrameworkSpec f = load_framework(path.string());
  std::filesystem::remove(path);
  const FrameworkSpec tt = load_framework("torchtitan");
  EXPECT_EQ(f.name, "tt_fork");
  EXPECT_EQ(f.version, "a fork");
  ASSERT_TRUE(f.op_recompute.has_value());
  EXPECT_FALSE(f.op_recompute->matmuls);
  EXPECT_TRUE(f.op_recompute->attention);
  // Everything else is the preset's, section by section.
  EXPECT_EQ(f.can_run.schedules, tt.can_run.schedules);
  EXPECT_EQ(f.host_s_per_kernel, tt.host_s_per_kernel);
  EXPECT_EQ(f.sources.at("op_recompute"), "the fork's policy");
  EXPECT_EQ(f.sources.at("memory.states"), tt.sources.at("memory.states"));
  const std::string e = load_error("base: torchtitan-2023\n");
  EXPECT_TRUE(contains(e, "base")) << e;
  EXPECT_TRUE(contains(e, "torchtitan-2024")) << e;  // the presets it may start from
}

}  // namespace
}  // namespace hetplan

namespace hetplan {
namespace {

// torchtitan with a pipeline keeps FSDP2's gathered bf16 weights and whole fp32 gradients for the
// step (memory.gathered_with_pipeline), and gathers once a step: a framework file that says
// otherwise (base torchtitan) holds neither and gathers before every pass.
TEST(GatheredWithPipeline, WeightsAndWholeGradientsStayAndAreGatheredOnce) {
  const ModelSpec model = load_model("llama3-8b");
  const ClusterSpec cluster = load_cluster("dgx-h100:4");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), cluster);
  const auto path = std::filesystem::temp_directory_path() / "tt_resharded.yaml";
  std::ofstream(path) << "base: torchtitan\n"
                         "memory: {gathered_with_pipeline: false}\n"
                         "sources: {memory.gathered_with_pipeline: \"test\"}\n";
  const FrameworkSpec resharded = load_framework(path.string());
  std::filesystem::remove(path);
  const FrameworkSpec tt = load_framework("torchtitan");
  ASSERT_TRUE(tt.memory.gathered_with_pipeline);
  const Strategy s = read_strategy(R"({"dp": 8, "tp": 1, "pp": 4, "micro_batch": 1,
                                       "global_batch": 64, "zero": 3, "recompute": "full",
                                       "grad_accumulation_fusion": false})");
  const Prediction kept = Evaluator(model, cluster, cost, tt).predict(s);
  const Prediction freed = Evaluator(model, cluster, cost, resharded).predict(s);
  ASSERT_TRUE(kept.feasible && freed.feasible) << kept.reason << freed.reason;
  ASSERT_EQ(kept.stages.size(), freed.stages.size());
  for (size_t j = 0; j < kept.stages.size(); ++j) {
    const MemoryBreakdown& k = kept.stages[j].memory;
    const MemoryBreakdown& f = freed.stages[j].memory;
    // The same partition (a pipeline of alike blocks): bf16 weights (2 B) and fp32 gradients
    // (4 B) of the stage's parameters on top: 6 B per parameter over 4 B of sharded weights.
    EXPECT_NEAR((k.weights - f.weights) / 2, (k.gradients - f.gradients) / 4, 1.0) << j;
    EXPECT_GT(k.weights, 1.4 * f.weights) << j;
    // Without the per-layer gathers' transient.
    EXPECT_LT(k.transient, f.transient) << j;
    // One gather a step: a shorter forward and backward.
    EXPECT_LT(kept.stages[j].forward_s, freed.stages[j].forward_s) << j;
    EXPECT_LT(kept.stages[j].backward_input_s, freed.stages[j].backward_input_s) << j;
  }
  EXPECT_LT(kept.iteration_s, freed.iteration_s);
  // Without a pipeline FSDP2 reshards after every forward: no difference.
  Strategy flat = s;
  flat.pp = 1;
  flat.dp = 32;
  const Prediction a = Evaluator(model, cluster, cost, tt).predict(flat);
  const Prediction b = Evaluator(model, cluster, cost, resharded).predict(flat);
  EXPECT_DOUBLE_EQ(a.iteration_s, b.iteration_s);
  EXPECT_DOUBLE_EQ(a.stages[0].memory.total(), b.stages[0].memory.total());
}

}  // namespace
}  // namespace hetplan

namespace hetplan {
namespace {

// torchtitan-2024 reads TOML (its export says torchtitan-toml): an export of a strategy planned
// for it writes the job config of the time, with its per-op recomputation; `frameworks` shows the
// policy.
TEST(RecomputeOp, TheDecemberTwentyFourReleaseExportsItsToml) {
  const auto dir = testing::temp_dir("recompute_op_export");
  const std::string strategy = (dir / "s.json").string();
  std::ofstream(strategy) << R"({"dp": 8, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8,
                                 "zero": 3, "recompute": "op", "framework": "torchtitan-2024"})";
  const auto r = testing::run_hetplan("export --strategy " + strategy + " --model llama3-8b");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "[activation_checkpoint]")) << r.output;
  EXPECT_TRUE(contains(r.output, "selective_ac_option = \"op\"")) << r.output;
  const auto head = testing::run_hetplan("export --strategy " + strategy +
                                         " --model llama3-8b --framework torchtitan");
  ASSERT_EQ(head.exit_code, 0) << head.output;
  EXPECT_TRUE(contains(head.output, "SelectiveAC.Config()")) << head.output;
  const auto shown = testing::run_hetplan("frameworks torchtitan-2024");
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_TRUE(contains(shown.output, "export: torchtitan-toml")) << shown.output;
  EXPECT_TRUE(contains(shown.output,
                       "per-op recomputation keeps: matmul, attention, reduce_scatter (every "
                       "second matmul re-run)"))
      << shown.output;
  EXPECT_TRUE(contains(shown.output, "ZeRO-3 with a pipeline: weights stay gathered"))
      << shown.output;
}

}  // namespace
}  // namespace hetplan

namespace hetplan {
namespace {

// No framework checkpoints the embedding or the head (Megatron's TransformerBlock, DeepSpeed's
// ParallelTransformerLayerPipe, torchtitan's model.layers): under every recomputation they keep
// what they keep without it and run once.
TEST(RecomputeOp, TheEmbeddingAndTheHeadAreNeverRecomputed) {
  const ModelSpec model = load_model("llama3-8b", 2048);
  const ClusterSpec cluster = load_cluster("dgx-h100:1");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), cluster);
  const FrameworkSpec tt = load_framework("torchtitan");
  LayerShape shape;
  shape.framework = &tt;
  for (size_t i : {size_t{0}, model.layers.size() - 1}) {
    const LayerWork w = layer_work(model.layers[i], shape);
    EXPECT_FALSE(w.checkpointed) << i;
    for (Recompute r : {Recompute::kSelective, Recompute::kFull, Recompute::kOp}) {
      EXPECT_EQ(w.activation(r), w.activation(Recompute::kNone)) << i << " " << to_string(r);
      EXPECT_EQ(layer_kernels(w, r).recompute, 0) << i << " " << to_string(r);
    }
  }
  const LayerWork head = layer_work(model.layers.back(), shape);
  EXPECT_GT(head.activation(Recompute::kNone), 1e8);  // the fp32 softmax of 2,048 x 128,256
  const LayerWork block = layer_work(model.layers[1], shape);
  EXPECT_TRUE(block.checkpointed);
  EXPECT_LT(block.activation(Recompute::kFull), block.activation(Recompute::kNone));
  const Evaluator ev(model, cluster, cost, tt);
  const Strategy s = read_strategy(R"({"dp": 8, "tp": 1, "pp": 1, "micro_batch": 1,
                                       "global_batch": 8, "zero": 3, "recompute": "full",
                                       "grad_accumulation_fusion": false})");
  const std::vector<LayerCost>& costs = ev.layer_costs(0, 1, s);
  EXPECT_EQ(costs.back().times.recompute_s, 0);
  EXPECT_GT(costs[1].times.recompute_s, 0);
}

}  // namespace
}  // namespace hetplan
