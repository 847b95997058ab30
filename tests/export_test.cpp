// Exports to Megatron-LM, DeepSpeed and torchtitan. Expected outputs written out by hand from the
// flag mapping of docs/exports.md (flag names checked against Megatron-LM's arguments.py,
// DeepSpeed's config docs and torchtitan's job_config.py).
#include <gtest/gtest.h>

#include "costmodel/errors.h"
#include "costmodel/model.h"
#include "report/export/exporters.h"
#include "report/megatron_layout.h"

namespace hetplan {
namespace {

Strategy strategy(const std::string& json) {
  const Json j = Json::parse(json);
  return strategy_from_json(ObjectReader(j, "s.json"));
}

const ModelSpec& gpt2() {
  static const ModelSpec m = load_model("gpt2-medium");
  return m;
}

// dp 2, pp 4, blocks 5 | 7 | 7 | 5: "uniform except first and last".
const char* kUneven = R"({"dp": 2, "tp": 1, "pp": 4, "micro_batch": 2, "global_batch": 64,
  "stages": [{"layers": [0, 5]}, {"layers": [6, 12]}, {"layers": [13, 19]}, {"layers": [20, 25]}]})";
// pp 4 with an embedding-only first stage: blocks 0 | 9 | 9 | 6.
const char* kEmbeddingAlone = R"({"dp": 1, "tp": 1, "pp": 4, "micro_batch": 1, "global_batch": 8,
  "stages": [{"layers": [0, 0]}, {"layers": [1, 9]}, {"layers": [10, 18]}, {"layers": [19, 25]}]})";

TEST(MegatronExport, UnevenFirstLastStages) {
  const ExportResult r = export_megatron(gpt2(), strategy(kUneven), {});
  EXPECT_TRUE(r.unsupported.empty());
  EXPECT_TRUE(r.approximations.empty());
  EXPECT_EQ(r.text,
            "# Megatron-LM arguments for gpt2-medium: dp 2 x tp 1 x pp 4 = 8 GPUs, micro-batch 2, "
            "global batch 64, 1f1b, recompute none, ZeRO 0\n"
            "# exported by hetplan. Launch on 8 GPUs (Megatron-LM derives the data-parallel size 2 "
            "from them), e.g.\n"
            "#   torchrun --nproc-per-node <GPUs per node> --nnodes <nodes> pretrain_gpt.py "
            "\"${MEGATRON_ARGS[@]}\" <data, tokenizer, optimizer flags>\n"
            "# vocabulary 50257: from the tokenizer\n"
            "MEGATRON_ARGS=(\n"
            "  --num-layers 24\n"
            "  --hidden-size 1024\n"
            "  --ffn-hidden-size 4096\n"
            "  --num-attention-heads 16\n"
            "  --seq-length 1024\n"
            "  --max-position-embeddings 1024\n"
            "  --hidden-dropout 0.1\n"
            "  --attention-dropout 0.1\n"
            "  --bf16\n"
            "  --tensor-model-parallel-size 1\n"
            "  --pipeline-model-parallel-size 4\n"
            "  --decoder-first-pipeline-num-layers 5\n"
            "  --decoder-last-pipeline-num-layers 5\n"
            "  --micro-batch-size 2\n"
            "  --global-batch-size 64\n"
            "  --use-flash-attn\n"
            ")\n");
}

TEST(MegatronExport, ParallelismRecomputeAndOptimizerFlags) {
  const ExportResult r = export_megatron(
      gpt2(), strategy(R"({"dp": 2, "tp": 2, "pp": 2, "micro_batch": 4, "global_batch": 64,
                          "recompute": "full", "zero": 1, "sequence_parallel": true,
                          "flash_attention": false, "grad_accumulation_fusion": false,
                          "stages": [{"layers": [0, 12]}, {"layers": [13, 25]}]})"),
      {});
  const std::string tail = r.text.substr(r.text.find("  --tensor-model-parallel-size"));
  // The even split of 24 blocks needs no partition flag.
  EXPECT_EQ(tail,
            "  --tensor-model-parallel-size 2\n"
            "  --pipeline-model-parallel-size 2\n"
            "  --micro-batch-size 4\n"
            "  --global-batch-size 64\n"
            "  --sequence-parallel\n"
            "  --recompute-granularity full\n"
            "  --recompute-method uniform\n"
            "  --recompute-num-layers 1\n"
            "  --use-distributed-optimizer\n"
            "  --no-gradient-accumulation-fusion\n"
            "  --attention-backend unfused\n"
            ")\n");
}

TEST(MegatronExport, LayoutWhereFirstLastCannotSayIt) {
  const ExportResult r = export_megatron(gpt2(), strategy(kEmbeddingAlone), {});
  EXPECT_NE(r.text.find("  --pipeline-model-parallel-layout \"E|t*9|t*9|t*6L\"\n"),
            std::string::npos)
      << r.text;
  EXPECT_EQ(r.text.find("--decoder-first"), std::string::npos);
  ASSERT_EQ(r.approximations.size(), 1u);
  EXPECT_NE(r.approximations[0].find("only recent Megatron-LM versions"), std::string::npos);
}

TEST(MegatronExport, InterleavedAndUnsupportedSchedules) {
  const ExportResult inter = export_megatron(
      gpt2(), strategy(R"({"dp": 1, "tp": 1, "pp": 4, "micro_batch": 1, "global_batch": 8,
                          "schedule": "interleaved", "chunks": 2})"),
      {});
  EXPECT_NE(inter.text.find("  --num-layers-per-virtual-pipeline-stage 3\n"), std::string::npos);
  const ExportResult zb = export_megatron(
      gpt2(), strategy(R"({"dp": 1, "tp": 1, "pp": 4, "micro_batch": 1, "global_batch": 8,
                          "schedule": "zb-h1"})"),
      {});
  EXPECT_EQ(zb.unsupported,
            std::vector<std::string>{"schedule zb-h1: Megatron-LM runs 1F1B and interleaved 1F1B "
                                     "only"});
  EXPECT_NE(zb.text.find("# NOT EXPRESSED: schedule zb-h1"), std::string::npos);
  // A funnel's blocks change width: Megatron-LM builds identical layers.
  const ExportResult funnel = export_megatron(
      load_model("funnel-uneven"),
      strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1})"), {});
  ASSERT_FALSE(funnel.unsupported.empty());
  EXPECT_NE(funnel.unsupported[0].find("differs in shape"), std::string::npos);
  // BERT is not a GPT-style decoder.
  const ExportResult bert = export_megatron(
      load_model("bert-large"),
      strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1})"), {});
  ASSERT_FALSE(bert.unsupported.empty());
  EXPECT_NE(bert.unsupported.back().find("not a GPT-style decoder"), std::string::npos);
}

TEST(DeepSpeedExport, ExplicitParts) {
  const ExportResult r = export_deepspeed(gpt2(), strategy(kEmbeddingAlone), {});
  EXPECT_TRUE(r.unsupported.empty());
  // Stage boundaries in hetplan's layer list [embedding, 24 blocks, head] (26 layers).
  EXPECT_EQ(Json::parse(r.text), Json::parse(R"({
    "train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8,
    "bf16": {"enabled": true}, "zero_optimization": {"stage": 0},
    "pipeline": {"stages": 4, "activation_checkpoint_interval": 0, "parts": [0, 1, 10, 19, 26]}})"));
  ASSERT_EQ(r.approximations.size(), 2u);
  EXPECT_NE(r.approximations[0].find("self.parts = pipeline.parts ([0,1,10,19,26])"),
            std::string::npos);
  // Predicted with gradient-accumulation fusion, which DeepSpeed does not have.
  EXPECT_NE(r.approximations[1].find("\"grad_accumulation_fusion\": false"), std::string::npos);
  const ExportResult unfused = export_deepspeed(
      gpt2(), strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8,
                          "grad_accumulation_fusion": false})"), {});
  EXPECT_TRUE(unfused.approximations.empty());
}

TEST(DeepSpeedExport, UniformPartsZeroAndCheckpointing) {
  // 26 layers over 2 stages: DeepSpeed's partition_uniform gives [0, 13, 26].
  const ExportResult r = export_deepspeed(
      gpt2(), strategy(R"({"dp": 4, "tp": 1, "pp": 2, "micro_batch": 2, "global_batch": 64,
                          "recompute": "full", "zero": 1,
                          "stages": [{"layers": [0, 12]}, {"layers": [13, 25]}]})"),
      {});
  EXPECT_EQ(Json::parse(r.text), Json::parse(R"({
    "train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 8,
    "bf16": {"enabled": true}, "zero_optimization": {"stage": 1},
    "activation_checkpointing": {"partition_activations": false, "cpu_checkpointing": false,
      "contiguous_memory_optimization": false, "number_checkpoints": null,
      "synchronize_checkpoint_boundary": false, "profile": false},
    "pipeline": {"stages": 2, "activation_checkpoint_interval": 1, "parts": [0, 13, 26],
                 "partition": "uniform"}})"));
  const ExportResult z3 = export_deepspeed(
      gpt2(), strategy(R"({"dp": 4, "tp": 1, "pp": 2, "micro_batch": 2, "global_batch": 64,
                          "zero": 3})"),
      {});
  EXPECT_EQ(z3.unsupported, std::vector<std::string>{"ZeRO-3 with pipeline parallelism "
                                                     "(DeepSpeed's PipelineModule supports ZeRO-0 "
                                                     "and 1)"});
}

TEST(TorchtitanExport, ModulePartsAndSplitPoints) {
  const ExportResult r = export_torchtitan(gpt2(), strategy(kUneven), {});
  const std::string parallelism = r.text.substr(r.text.find("[parallelism]"));
  EXPECT_EQ(parallelism,
            "[parallelism]\n"
            "data_parallel_replicate_degree = 1\n"
            "data_parallel_shard_degree = 2\n"
            "fsdp_reshard_after_forward = \"never\"\n"
            "tensor_parallel_degree = 1\n"
            "pipeline_parallel_degree = 4\n"
            "pipeline_parallel_schedule = \"1F1B\"\n"
            "pipeline_parallel_microbatch_size = 2\n"
            "module_fqns_per_model_part = [\n"
            "  [\"tok_embeddings\", \"layers.0\", \"layers.1\", \"layers.2\", \"layers.3\", "
            "\"layers.4\"],\n"
            "  [\"layers.5\", \"layers.6\", \"layers.7\", \"layers.8\", \"layers.9\", "
            "\"layers.10\", \"layers.11\"],\n"
            "  [\"layers.12\", \"layers.13\", \"layers.14\", \"layers.15\", \"layers.16\", "
            "\"layers.17\", \"layers.18\"],\n"
            "  [\"layers.19\", \"layers.20\", \"layers.21\", \"layers.22\", \"layers.23\", "
            "\"norm\", \"output\"],\n"
            "]\n"
            "\n"
            "[activation_checkpoint]\n"
            "mode = \"none\"\n");
  // A pipeline replica's whole batch per step: 64 / dp 2.
  EXPECT_NE(r.text.find("[training]\nlocal_batch_size = 32\nglobal_batch_size = 64\nseq_len = "
                        "1024\nmixed_precision_param = \"bfloat16\"\n"),
            std::string::npos);
  ExportOptions legacy;
  legacy.torchtitan_split_points = true;
  const ExportResult old = export_torchtitan(gpt2(), strategy(kUneven), legacy);
  EXPECT_NE(old.text.find("pipeline_parallel_split_points = [\"layers.5\", \"layers.12\", "
                          "\"layers.19\"]\n"),
            std::string::npos);
  // An embedding-only stage is a split point at layers.0; a head-only one has no block to name.
  const ExportResult head_alone = export_torchtitan(
      gpt2(), strategy(R"({"dp": 1, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8,
                          "stages": [{"layers": [0, 24]}, {"layers": [25, 25]}]})"),
      legacy);
  EXPECT_EQ(head_alone.unsupported.size(), 1u);
  EXPECT_NE(head_alone.unsupported[0].find("stage 1 holds no transformer block"),
            std::string::npos);
}

TEST(TorchtitanExport, DataParallelSchedulesAndRecompute) {
  const ExportResult ddp = export_torchtitan(
      gpt2(), strategy(R"({"dp": 8, "tp": 1, "pp": 1, "micro_batch": 4, "global_batch": 64})"), {});
  EXPECT_NE(ddp.text.find("[training]\nlocal_batch_size = 4\n"), std::string::npos);
  EXPECT_NE(ddp.text.find("data_parallel_replicate_degree = 8\ndata_parallel_shard_degree = 1\n"
                          "tensor_parallel_degree = 1\npipeline_parallel_degree = 1\n"),
            std::string::npos);
  const ExportResult v = export_torchtitan(
      gpt2(), strategy(R"({"dp": 1, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8,
                          "schedule": "v-zb", "chunks": 2, "recompute": "full", "zero": 3})"),
      {});
  EXPECT_TRUE(v.unsupported.empty());
  EXPECT_NE(v.text.find("pipeline_parallel_schedule = \"ZBVZeroBubble\""), std::string::npos);
  EXPECT_NE(v.text.find("mode = \"full\""), std::string::npos);
  const ExportResult vmin = export_torchtitan(
      gpt2(), strategy(R"({"dp": 1, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8,
                          "schedule": "v-min", "chunks": 2})"),
      {});
  ASSERT_EQ(vmin.unsupported.size(), 1u);
  EXPECT_NE(vmin.unsupported[0].find("schedule v-min with 2 chunks"), std::string::npos);
}

// search/strategy.cpp: without "chunks" a schedule runs its default, as predict simulates it.
TEST(StrategyChunks, DefaultIsTheSchedulesAndInterleavedNeedsTwo) {
  const std::string base = R"("dp": 4, "tp": 1, "pp": 4, "micro_batch": 1, "global_batch": 32)";
  EXPECT_EQ(strategy("{" + base + R"(, "schedule": "v-zb"})").chunks, 2);
  EXPECT_EQ(strategy("{" + base + R"(, "schedule": "v-min"})").chunks, 2);
  EXPECT_EQ(strategy("{" + base + R"(, "schedule": "interleaved"})").chunks, 2);
  EXPECT_EQ(strategy("{" + base + R"(, "schedule": "interleaved", "chunks": 3})").chunks, 3);
  EXPECT_EQ(strategy("{" + base + R"(, "schedule": "zb-h1"})").chunks, 1);
  EXPECT_EQ(strategy("{" + base + "}").chunks, 1);
  try {
    strategy("{" + base + R"(, "schedule": "interleaved", "chunks": 1})");
    FAIL() << "interleaved with 1 chunk was accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "s.json: chunks: schedule interleaved runs 2 or more chunks per device, found 1 "
                 "(one chunk is schedule 1f1b)");
  }
}

TEST(MegatronLayout, ParsesFormatsAndFindsFirstLast) {
  const auto fail = [](const std::string& what) { throw std::runtime_error(what); };
  const auto stages = parse_megatron_layout("E|(tt|)*2,tL", 4, fail);
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_TRUE(stages[0].embedding);
  EXPECT_EQ(stages[0].blocks, 0);
  EXPECT_EQ(stages[1].first_block, 0);
  EXPECT_EQ(stages[2].first_block, 2);
  EXPECT_EQ(stages[3].blocks, 1);
  EXPECT_TRUE(stages[3].head);
  EXPECT_EQ(format_megatron_layout(stages), "E|tt|tt|tL");
  EXPECT_THROW(parse_megatron_layout("E|ttm|L", 3, fail), std::runtime_error);
  EXPECT_THROW(parse_megatron_layout("E||ttL", 3, fail), std::runtime_error);
  EXPECT_EQ(megatron_first_last(split_by_counts({5, 7, 7, 5})),
            std::make_optional(std::make_pair(int64_t{5}, int64_t{5})));
  EXPECT_EQ(megatron_first_last(split_by_counts({6, 6, 6, 6})),
            std::make_optional(std::make_pair(int64_t{-1}, int64_t{-1})));
  EXPECT_EQ(megatron_first_last(split_by_counts({4, 6, 7, 7})), std::nullopt);
  EXPECT_EQ(megatron_stage_split(24, 4, 5, 5, fail).at(1).blocks, 7);
  EXPECT_THROW(megatron_stage_split(24, 4, 5, 4, fail), std::runtime_error);  // 15 over 2 stages
}

}  // namespace
}  // namespace hetplan
