// LoRA fine-tuning (the strategy key `lora`): the frozen weights' gradient work dropped, the
// adapters' GEMMs, collectives and parameters as Megatron-Bridge lays them out, the memory of
// frozen parameters, the rules, the strategy key, search and export.
#include <algorithm>

#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "costmodel/layer_ops.h"
#include "costmodel/memory.h"
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

// gpt2-medium's first block: hidden 1024, 16 heads, QKV 3072 wide, sequence 1024, biases.
const LayerSpec& gpt2_block() {
  static const ModelSpec model = load_model("gpt2-medium");
  return model.layers[1];
}

LayerShape lora_shape(int64_t tp, uint32_t targets, int64_t rank = 16) {
  LayerShape shape;
  shape.tp = tp;
  shape.lora.rank = rank;
  shape.lora.targets = targets;
  return shape;
}

std::vector<const GemmOp*> gemms_of(const LayerWork& w, Pass pass) {
  std::vector<const GemmOp*> out;
  for (const GemmOp& g : w.gemms)
    if (g.pass == pass) out.push_back(&g);
  return out;
}

const CommOp* comm_named(const LayerWork& w, const std::string& name) {
  for (const CommOp& c : w.comms)
    if (c.name == name) return &c;
  return nullptr;
}

TEST(Lora, OnlyTheAdaptersComputeWeightGradients) {
  const LayerSpec& block = gpt2_block();
  const LayerWork w = layer_work(block, lora_shape(1, static_cast<uint32_t>(LoraTarget::kQkv)));
  // The two adapter GEMMs alone: A (1024 -> 16) and B (16 -> 3072) over 1024 tokens.
  const auto weight = gemms_of(w, Pass::kBackwardWeight);
  ASSERT_EQ(weight.size(), 2u);
  EXPECT_EQ(weight[0]->name, "linear_qkv_lora_a");
  EXPECT_EQ(weight[0]->shape, (GemmShape{1024, 16, 1024, 1, false, true}));
  EXPECT_EQ(weight[1]->name, "linear_qkv_lora_b");
  EXPECT_EQ(weight[1]->shape, (GemmShape{16, 3072, 1024, 1, false, true}));
  EXPECT_DOUBLE_EQ(w.model_flops[2], 2.0 * 1024 * 16 * (1024 + 3072));
  // No bias, norm or gradient-add kernels for the frozen weights.
  for (const MemoryOp& m : w.memory_ops) EXPECT_NE(m.pass, Pass::kBackwardWeight) << m.kernel;
  // The base QKV GEMM and both adapters' in the forward; their input gradients too.
  const auto forward = gemms_of(w, Pass::kForward);
  EXPECT_EQ(std::count_if(forward.begin(), forward.end(),
                          [](const GemmOp* g) { return contains(g->name, "lora"); }),
            2);
  const int64_t base = layer_parameters(block, 1, /*unique=*/false, 1, 1);
  EXPECT_EQ(w.adapter_params, 1024 * 16 + 16 * 3072);
  EXPECT_EQ(w.frozen_params, base);
  EXPECT_EQ(w.params, base + w.adapter_params);
  EXPECT_EQ(w.accumulated_tensors, 0);  // the adapters' gradients accumulate in their GEMMs

  // The same block trained in full keeps its weight gradients.
  const LayerWork full = layer_work(block, LayerShape{});
  EXPECT_GT(gemms_of(full, Pass::kBackwardWeight).size(), 2u);
  EXPECT_EQ(full.frozen_params, 0);
}

TEST(Lora, BesideAColumnParallelLayerTheRankSplitsAndIsGathered) {
  const LayerWork w =
      layer_work(gpt2_block(), lora_shape(2, static_cast<uint32_t>(LoraTarget::kQkv)));
  const auto weight = gemms_of(w, Pass::kBackwardWeight);
  ASSERT_EQ(weight.size(), 2u);
  EXPECT_EQ(weight[0]->shape, (GemmShape{1024, 8, 1024, 1, false, true}));   // A: rank / tp
  EXPECT_EQ(weight[1]->shape, (GemmShape{16, 1536, 1024, 1, false, true}));  // B: out / tp
  const CommOp* gather = comm_named(w, "linear_qkv_lora_a_gather");
  ASSERT_NE(gather, nullptr);
  EXPECT_EQ(gather->pass, Pass::kForward);
  EXPECT_DOUBLE_EQ(gather->bytes, 1024.0 * 16 * 2);
  // Without sequence parallelism A's input gradient is all-reduced over the group.
  const CommOp* grad = comm_named(w, "linear_qkv_lora_a_grad_allreduce");
  ASSERT_NE(grad, nullptr);
  EXPECT_EQ(grad->pass, Pass::kBackwardInput);
  EXPECT_DOUBLE_EQ(grad->bytes, 1024.0 * 1024 * 2);
  LayerShape sp = lora_shape(2, static_cast<uint32_t>(LoraTarget::kQkv));
  sp.sequence_parallel = true;
  EXPECT_EQ(comm_named(layer_work(gpt2_block(), sp), "linear_qkv_lora_a_grad_allreduce"), nullptr);
}

TEST(Lora, BesideARowParallelLayerTheOutputIsGathered) {
  const LayerWork w =
      layer_work(gpt2_block(), lora_shape(2, static_cast<uint32_t>(LoraTarget::kProj)));
  const auto weight = gemms_of(w, Pass::kBackwardWeight);
  ASSERT_EQ(weight.size(), 2u);
  EXPECT_EQ(weight[0]->name, "linear_proj_lora_a");
  EXPECT_EQ(weight[0]->shape, (GemmShape{512, 16, 1024, 1, false, true}));  // A: in / tp
  EXPECT_EQ(weight[1]->shape, (GemmShape{16, 512, 1024, 1, false, true}));  // B: out / tp
  const CommOp* reduce = comm_named(w, "linear_proj_lora_a_allreduce");
  ASSERT_NE(reduce, nullptr);
  EXPECT_DOUBLE_EQ(reduce->bytes, 1024.0 * 16 * 2);
  const CommOp* gather = comm_named(w, "linear_proj_lora_b_gather");
  ASSERT_NE(gather, nullptr);
  EXPECT_DOUBLE_EQ(gather->bytes, 1024.0 * 1024 * 2);  // the whole hidden output
  EXPECT_EQ(w.adapter_params, 512 * 16 + 16 * 512);
}

TEST(Lora, TheRulesNameWhatCannotBeAdapted) {
  Lora lora;
  lora.rank = 30;
  const ModelSpec gpt2 = load_model("gpt2-medium");
  std::string why = lora_problem(gpt2, lora, 4);
  EXPECT_TRUE(contains(why, "LoRA rank 30 beside linear_qkv or linear_fc1")) << why;
  EXPECT_TRUE(contains(why, "tp 4 must divide it")) << why;
  lora.targets = static_cast<uint32_t>(LoraTarget::kProj) | static_cast<uint32_t>(LoraTarget::kFc2);
  EXPECT_EQ(lora_problem(gpt2, lora, 4), "");  // row-parallel A keeps the whole rank
  lora.rank = 32;
  lora.targets = static_cast<uint32_t>(LoraTarget::kQkv);
  why = lora_problem(load_model("deepseek-v3"), lora, 1);
  EXPECT_TRUE(contains(why, "is an MLA block: it has no linear_qkv")) << why;
  const ModelSpec moe = load_model("qwen3-30b-a3b");
  EXPECT_EQ(lora_problem(moe, lora, 1), "");
  lora.targets = static_cast<uint32_t>(LoraTarget::kFc1);
  why = lora_problem(moe, lora, 1);
  EXPECT_TRUE(contains(why, "is an MoE block: LoRA adapters on its routed experts")) << why;

  Strategy s;
  s.dp = 8;
  s.global_batch = 8;
  s.lora.rank = 16;
  EXPECT_FALSE(first_broken_rule({gpt2, load_framework("megatron-core"), 8}, s).has_value());
  const auto v = first_broken_rule({gpt2, load_framework("deepspeed"), 8}, s);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->key, "lora");
  EXPECT_TRUE(contains(v->reason, "deepspeed does not run LoRA fine-tuning")) << v->reason;
}

TEST(Lora, FrozenParametersHoldTheirWeightsAlone) {
  MemoryInput in;
  in.param_count = 1000;
  in.frozen_param_count = 900;
  const MemoryBreakdown m = device_memory(in);  // Megatron's 2 + 4 + 4 + 8 B a trained one
  EXPECT_DOUBLE_EQ(m.weights, 1000 * 2.0);
  EXPECT_DOUBLE_EQ(m.gradients, 100 * 4.0);
  EXPECT_DOUBLE_EQ(m.optimizer, 100 * 12.0);
  in.zero = 3;  // ZeRO-3 shards the frozen weights with the rest
  in.dp = 4;
  EXPECT_DOUBLE_EQ(device_memory(in).weights, 1000 * 2.0 / 4);
}

TEST(Lora, TheStrategyKeyRoundTripsAndNamesWhatIsWrong) {
  const Strategy s = read_strategy(
      R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1, "lora": {"rank": 32}})");
  EXPECT_EQ(s.lora.rank, 32);
  EXPECT_EQ(s.lora.targets, kAllLoraTargets);  // Megatron-Bridge's four by default
  const Json j = to_json(s);
  EXPECT_EQ(j["lora"]["rank"], 32);
  EXPECT_EQ(j["lora"]["target_modules"],
            Json::parse(R"(["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"])"));
  EXPECT_EQ(read_strategy(j.dump()).lora, s.lora);
  EXPECT_TRUE(
      contains(framework_switches(s), " lora-32(linear_qkv,linear_proj,linear_fc1,linear_fc2)"));
  EXPECT_FALSE(to_json(read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1,
                                         "global_batch": 1})"))
                   .contains("lora"));
  std::string e = error_of([] {
    read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1,
                      "lora": {"rank": 8, "target_modules": ["q_proj"]}})");
  });
  EXPECT_TRUE(contains(e, "lora.target_modules")) << e;
  EXPECT_TRUE(contains(e, "found \"q_proj\"")) << e;
  e = error_of([] {
    read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1,
                      "lora": {"rank": 0}})");
  });
  EXPECT_TRUE(contains(e, "lora.rank")) << e;
}

// gpt2-medium on one p4d node, dp 8, at the shipped calibration.
struct LoraPrediction : ::testing::Test {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1");
  const CostModel cost{load_profile_inputs({default_calibration_dir().string()}), cluster};
  const Evaluator ev{model, cluster, cost, load_framework("megatron-core")};
  Strategy full() const {
    Strategy s;
    s.dp = 8;
    s.global_batch = 64;
    s.micro_batch = 8;
    s.overlap_grad_reduce = false;  // the reduction exposed, to compare
    s.given |= kGivenOverlapGradReduce;
    return s;
  }
  static double part(const Prediction& p, const std::string& name) {
    for (const auto& [key, s] : p.breakdown)
      if (key == name) return s;
    return -1;
  }
};

TEST_F(LoraPrediction, TheOptimizerStepsTheAdaptersAlone) {
  Strategy s = full();
  s.lora.rank = 16;
  s.lora.targets = static_cast<uint32_t>(LoraTarget::kQkv);
  const Prediction lora = ev.predict(s), trained = ev.predict(full());
  ASSERT_TRUE(lora.feasible) << lora.reason;
  ASSERT_TRUE(trained.feasible) << trained.reason;
  // 24 blocks of one adapter each, 1024 x 16 + 16 x 3072 parameters.
  const double adapters = 24.0 * (1024 * 16 + 16 * 3072);
  EXPECT_DOUBLE_EQ(part(lora, "optimizer"), cost.optimizer_s(load_gpu("a100-40gb"), adapters));
  EXPECT_LT(part(lora, "dp_sync"), part(trained, "dp_sync"));
  EXPECT_LT(lora.iteration_s, trained.iteration_s);
  EXPECT_LT(lora.peak_memory_bytes[0], trained.peak_memory_bytes[0]);
}

TEST_F(LoraPrediction, SearchFineTunesEveryCandidateAndRefusesWhatItCannotAdapt) {
  SearchOptions o;
  o.global_batch = 64;
  o.lora.rank = 16;
  o.top_k = 3;
  const SearchResult r = search_training(ev, o);
  ASSERT_FALSE(r.top.empty());
  for (const auto& t : r.top) EXPECT_EQ(t.strategy.lora, o.lora);
  const ModelSpec mla = load_model("deepseek-v3");
  const ClusterSpec big = load_cluster("dgx-h100:8");
  const CostModel big_cost{load_profile_inputs({default_calibration_dir().string()}), big};
  const Evaluator mla_ev{mla, big, big_cost, load_framework("megatron-core")};
  const std::string e = error_of([&] { search_training(mla_ev, o); });
  EXPECT_TRUE(contains(e, "lora: ")) << e;
  EXPECT_TRUE(contains(e, "MLA block")) << e;
}

TEST(Lora, ExportsSayTheyCannotWriteIt) {
  const ModelSpec model = load_model("gpt2-medium");
  Strategy s;
  s.dp = 8;
  s.global_batch = 8;
  s.lora.rank = 32;
  s.lora.targets = static_cast<uint32_t>(LoraTarget::kQkv);
  const ExportResult m = export_megatron(model, s, {});
  ASSERT_FALSE(m.unsupported.empty());
  EXPECT_TRUE(std::any_of(m.unsupported.begin(), m.unsupported.end(), [](const std::string& u) {
    return contains(u, "LoRA (rank 32, \"linear_qkv\"): not written");
  }));
  EXPECT_TRUE(std::any_of(m.instructions.begin(), m.instructions.end(), [](const std::string& i) {
    return contains(i, "cfg.peft = LoRA(target_modules=[\"linear_qkv\"], dim=32, alpha=32)");
  }));
  using Exporter = ExportResult (*)(const ModelSpec&, const Strategy&, const ExportOptions&);
  for (Exporter run : {Exporter{&export_deepspeed}, Exporter{&export_torchtitan}}) {
    const ExportResult r = run(model, s, {});
    EXPECT_TRUE(std::any_of(r.unsupported.begin(), r.unsupported.end(),
                            [](const std::string& u) { return contains(u, "LoRA (rank 32"); }));
  }
}

}  // namespace
}  // namespace hetplan
