// Exports to Megatron-LM, DeepSpeed and torchtitan. Expected outputs written out by hand from the
// flag mapping of docs/exports.md (flag names checked against Megatron-LM's arguments.py,
// DeepSpeed's config docs and torchtitan's job_config.py).
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/errors.h"
#include "costmodel/model.h"
#include "report/export/exporters.h"
#include "report/megatron_layout.h"
#include "test_util.h"

namespace hetplan {
namespace {

using testing::read_strategy;

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
  const ExportResult r = export_megatron(gpt2(), read_strategy(kUneven), {});
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
            "  --overlap-grad-reduce\n"     // hetplan's default; Megatron-LM's is off
            "  --attention-backend auto\n"  // no --use-flash-attn: nothing reads it
            ")\n");
  EXPECT_TRUE(r.instructions.empty());  // tp 1 without FSDP: no environment to set
}

TEST(MegatronExport, ParallelismRecomputeAndOptimizerFlags) {
  const ExportResult r = export_megatron(
      gpt2(), read_strategy(R"({"dp": 2, "tp": 2, "pp": 2, "micro_batch": 4, "global_batch": 64,
                          "recompute": "full", "zero": 1, "sequence_parallel": true,
                          "flash_attention": false, "grad_accumulation_fusion": false,
                          "overlap_grad_reduce": false,
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
  // tp 2: validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS=1 before Blackwell.
  EXPECT_NE(r.text.find("# tensor parallelism: validate_args requires "
                        "CUDA_DEVICE_MAX_CONNECTIONS=1 before Blackwell (compute capability < 10); "
                        "later GPUs accept it\n"
                        "export CUDA_DEVICE_MAX_CONNECTIONS=1\n"
                        "MEGATRON_ARGS=(\n"),
            std::string::npos)
      << r.text;
  ASSERT_EQ(r.instructions.size(), 1u);
  EXPECT_NE(r.instructions[0].find("it exports CUDA_DEVICE_MAX_CONNECTIONS=1"), std::string::npos);
}

// Megatron-FSDP (ZeRO 2 and 3) asserts CUDA_DEVICE_MAX_CONNECTIONS unset or above 1, whatever the
// GPU; with tp > 1 it only warns of the clash with tp's "1" (validate_args).
// GPT-OSS: 128-key windows on every other layer (layer_types) and learned sinks; Megatron-LM takes
// TE's (left, right) window, (127, 0) for 128 keys, with the full layers as 0 in
// --window-attn-skip-freq, and softmax_type learnable (Megatron-Bridge's GPT-OSS bridge).
TEST(MegatronExport, SlidingWindowsAndSinks) {
  const ModelSpec m = load_model("gpt-oss-120b");
  const ExportResult r =
      export_megatron(m, read_strategy(R"({"dp": 8, "tp": 1, "pp": 1, "ep": 8, "micro_batch": 1,
                          "global_batch": 8})"),
                      {});
  EXPECT_TRUE(r.unsupported.empty()) << r.unsupported.front();
  EXPECT_NE(r.text.find("  --window-size \"127,0\"\n"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("  --window-attn-skip-freq \"[1,0,1,0,"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("  --softmax-type learnable\n"), std::string::npos) << r.text;
  // Two window sizes cannot be said.
  ModelSpec odd = m;
  std::get<TransformerLayer>(odd.layers[3].op).window = 64;
  const ExportResult bad =
      export_megatron(odd, read_strategy(R"({"dp": 8, "tp": 1, "pp": 1, "ep": 8, "micro_batch": 1,
                            "global_batch": 8})"),
                      {});
  ASSERT_FALSE(bad.unsupported.empty());
  EXPECT_NE(bad.unsupported.front().find("sliding windows of 128 and 64 keys"), std::string::npos)
      << bad.unsupported.front();
}

TEST(MegatronExport, SquaredReluIsItsFlagAndPlainReluIsRefused) {
  // Nemotron-4's squared-ReLU MLP (activation relu2) is Megatron-LM's --squared-relu; a plain ReLU
  // MLP has no flag (Megatron-LM has GeLU, SwiGLU and squared ReLU).
  const std::string text =
      "name: m\nseq_len: 1024\nvocab: 1000\nlayers: 2\n"
      "block: {hidden: 256, heads: 4, activation: ACT, bias: false}\n";
  const auto model = [&](const std::string& act) {
    std::string t = text;
    t.replace(t.find("ACT"), 3, act);
    return parse_model(parse_document(t, "m.yaml", DocumentFormat::kYaml));
  };
  const Strategy s = read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1,
                                       "global_batch": 1})");
  const ExportResult squared = export_megatron(model("relu2"), s, {});
  EXPECT_NE(squared.text.find("  --squared-relu\n"), std::string::npos) << squared.text;
  EXPECT_TRUE(squared.unsupported.empty());
  const ExportResult plain = export_megatron(model("relu"), s, {});
  EXPECT_EQ(plain.text.find("--squared-relu"), std::string::npos);
  ASSERT_EQ(plain.unsupported.size(), 1u);
  EXPECT_NE(plain.unsupported[0].find("ReLU MLPs"), std::string::npos);
}

TEST(MegatronExport, FsdpUnsetsTheConnectionLimit) {
  const ExportResult r = export_megatron(
      gpt2(), read_strategy(R"({"dp": 4, "tp": 2, "pp": 1, "micro_batch": 1, "global_batch": 8,
                          "zero": 3})"),
      {});
  EXPECT_NE(r.text.find("# Megatron-FSDP requires CUDA_DEVICE_MAX_CONNECTIONS unset or above 1 "
                        "(validate_args)\nunset CUDA_DEVICE_MAX_CONNECTIONS\nMEGATRON_ARGS=(\n"),
            std::string::npos)
      << r.text;
  EXPECT_EQ(r.text.find("export CUDA_DEVICE_MAX_CONNECTIONS"), std::string::npos);
  EXPECT_NE(r.text.find("  --use-megatron-fsdp\n  --data-parallel-sharding-strategy "
                        "optim_grads_params\n  --ckpt-format fsdp_dtensor\n"),
            std::string::npos);
  ASSERT_EQ(r.approximations.size(), 1u);
  EXPECT_NE(r.approximations[0].find("tensor parallelism with Megatron-FSDP"), std::string::npos);
}

TEST(MegatronExport, LayoutWhereFirstLastCannotSayIt) {
  const ExportResult r = export_megatron(gpt2(), read_strategy(kEmbeddingAlone), {});
  EXPECT_NE(r.text.find("  --pipeline-model-parallel-layout \"E|t*9|t*9|t*6L\"\n"),
            std::string::npos)
      << r.text;
  EXPECT_EQ(r.text.find("--decoder-first"), std::string::npos);
  ASSERT_EQ(r.approximations.size(), 1u);
  EXPECT_NE(r.approximations[0].find("only recent Megatron-LM versions"), std::string::npos);
}

TEST(MegatronExport, InterleavedAndUnsupportedSchedules) {
  const ExportResult inter = export_megatron(
      gpt2(), read_strategy(R"({"dp": 1, "tp": 1, "pp": 4, "micro_batch": 1, "global_batch": 8,
                          "schedule": "interleaved", "chunks": 2})"),
      {});
  EXPECT_NE(inter.text.find("  --num-layers-per-virtual-pipeline-stage 3\n"), std::string::npos);
  const ExportResult zb = export_megatron(
      gpt2(), read_strategy(R"({"dp": 1, "tp": 1, "pp": 4, "micro_batch": 1, "global_batch": 8,
                          "schedule": "zb-h1"})"),
      {});
  EXPECT_EQ(zb.unsupported,
            std::vector<std::string>{"schedule zb-h1: Megatron-LM runs 1F1B and interleaved 1F1B "
                                     "only"});
  EXPECT_NE(zb.text.find("# NOT EXPRESSED: schedule zb-h1"), std::string::npos);
  // A funnel's blocks change width: Megatron-LM builds identical layers.
  const ExportResult funnel = export_megatron(
      load_model("funnel-uneven"),
      read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1})"), {});
  ASSERT_FALSE(funnel.unsupported.empty());
  EXPECT_NE(funnel.unsupported[0].find("differs in shape"), std::string::npos);
  // BERT is not a GPT-style decoder.
  const ExportResult bert = export_megatron(
      load_model("bert-large"),
      read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1})"), {});
  ASSERT_FALSE(bert.unsupported.empty());
  EXPECT_NE(bert.unsupported.back().find("not a GPT-style decoder"), std::string::npos);
  // Attention biases without MLP biases (an HF LLaMA with attention_bias): Megatron-LM has all
  // four projections' biases or none.
  ModelSpec llama = load_model("llama2-7b");
  for (auto& layer : llama.layers)
    if (auto* b = std::get_if<TransformerLayer>(&layer.op)) b->bias = true;
  const ExportResult biased = export_megatron(
      llama, read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1})"),
      {});
  EXPECT_EQ(biased.unsupported,
            std::vector<std::string>{"biases on the attention projections only (Megatron-LM "
                                     "biases all four or none; QKV alone with --add-qkv-bias)"});
  EXPECT_EQ(biased.text.find("--disable-bias-linear"), std::string::npos);
}

// DeepSpeed has no training CUDA graphs or torch.compile in its config: another host mode is
// written as eager, and said.
TEST(DeepSpeedExport, AHostModeOtherThanEagerIsNoted) {
  const ExportResult graphs = export_deepspeed(
      gpt2(), read_strategy(R"({"dp": 8, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8,
                                "host_mode": "cuda-graphs"})"),
      {});
  EXPECT_EQ(std::count_if(graphs.approximations.begin(), graphs.approximations.end(),
                          [](const std::string& a) {
                            return a.find("host mode cuda-graphs") != std::string::npos;
                          }),
            1);
  const ExportResult eager = export_deepspeed(
      gpt2(), read_strategy(R"({"dp": 8, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8})"),
      {});
  for (const auto& a : eager.approximations) EXPECT_EQ(a.find("host mode"), std::string::npos);
}

TEST(DeepSpeedExport, ExplicitParts) {
  const ExportResult r = export_deepspeed(gpt2(), read_strategy(kEmbeddingAlone), {});
  EXPECT_TRUE(r.unsupported.empty());
  // Stage boundaries in hetplan's layer list [embedding, 24 blocks, head] (26 layers).
  // PipelineModule takes the stages and partition as arguments (DeepSpeed reads no
  // pipeline.stages, parts or partition): hetplan_pipeline_module, which DeepSpeed does not read.
  EXPECT_EQ(Json::parse(r.text), Json::parse(R"({
    "train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8,
    "bf16": {"enabled": true}, "zero_optimization": {"stage": 0},
    "hetplan_pipeline_module": {"num_stages": 4, "parts": [0, 1, 10, 19, 26]}})"));
  ASSERT_EQ(r.approximations.size(), 2u);
  EXPECT_NE(r.approximations[0].find("set self.parts = hetplan_pipeline_module.parts "
                                     "([0,1,10,19,26]) in a PipelineModule subclass's "
                                     "_partition_layers"),
            std::string::npos);
  EXPECT_EQ(r.instructions,
            std::vector<std::string>{
                "build the model as PipelineModule(layers, num_stages=4) (the config's "
                "hetplan_pipeline_module; DeepSpeed reads no pipeline stages or partition from "
                "the config)"});
  // Predicted with gradient-accumulation fusion, which DeepSpeed does not have.
  EXPECT_NE(r.approximations[1].find("\"grad_accumulation_fusion\": false"), std::string::npos);
  const ExportResult unfused = export_deepspeed(
      gpt2(), read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8,
                          "grad_accumulation_fusion": false})"),
      {});
  EXPECT_TRUE(unfused.approximations.empty());
}

TEST(DeepSpeedExport, UniformPartsZeroAndCheckpointing) {
  // 26 layers over 2 stages: DeepSpeed's partition_uniform gives [0, 13, 26].
  const ExportResult r = export_deepspeed(
      gpt2(), read_strategy(R"({"dp": 4, "tp": 1, "pp": 2, "micro_batch": 2, "global_batch": 64,
                          "recompute": "full", "zero": 1,
                          "stages": [{"layers": [0, 12]}, {"layers": [13, 25]}]})"),
      {});
  EXPECT_EQ(Json::parse(r.text), Json::parse(R"({
    "train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 8,
    "bf16": {"enabled": true}, "zero_optimization": {"stage": 1},
    "activation_checkpointing": {"partition_activations": false, "cpu_checkpointing": false,
      "contiguous_memory_optimization": false, "number_checkpoints": null,
      "synchronize_checkpoint_boundary": false, "profile": false},
    "pipeline": {"activation_checkpoint_interval": 1},
    "hetplan_pipeline_module": {"num_stages": 2, "partition_method": "uniform"}})"));
  // The pipeline engine reduces the gradients after the flush: overlap_comm cannot say otherwise.
  // It reads pipeline.activation_checkpoint_interval itself (no argument to pass by hand).
  ASSERT_EQ(r.approximations.size(), 2u);
  EXPECT_NE(r.approximations[0].find("DeepSpeed with a pipeline reduces the gradients after the "
                                     "backward"),
            std::string::npos);
  const ExportResult z3 = export_deepspeed(
      gpt2(), read_strategy(R"({"dp": 4, "tp": 1, "pp": 2, "micro_batch": 2, "global_batch": 64,
                          "zero": 3})"),
      {});
  EXPECT_EQ(z3.unsupported, std::vector<std::string>{"ZeRO-3 with pipeline parallelism "
                                                     "(DeepSpeed's PipelineModule supports ZeRO-0 "
                                                     "and 1)"});
}

// DeepSpeedConfig._batch_assertion: train_batch_size = micro x accumulation x the data-parallel
// size DeepSpeed counts. AutoTP (pp 1, no mpu) counts the world, dp 2 x tp 2 = 4: micro 2 x
// accumulation 32 / (2 x 2) = 8 x 4 = 64. With a pipeline, tp needs the model's own layers over a
// PipeModelDataParallelTopology(pp, tp, dp), whose data axis, dp 2, is counted: 2 x 8 x 2 = 32.
TEST(DeepSpeedExport, BatchAsDeepSpeedCountsItWithTensorParallelism) {
  const ExportResult autotp = export_deepspeed(
      gpt2(), read_strategy(R"({"dp": 2, "tp": 2, "pp": 1, "micro_batch": 2, "global_batch": 32,
                          "grad_accumulation_fusion": false})"),
      {});
  const Json a = Json::parse(autotp.text);
  EXPECT_EQ(a.at("train_batch_size"), 64);
  EXPECT_EQ(a.at("gradient_accumulation_steps"), 8);
  EXPECT_EQ(a.at("tensor_parallel"), Json({{"autotp_size", 2}}));
  // The batch, AutoTP itself, and ZeRO-0's reduction after the backward.
  ASSERT_EQ(autotp.approximations.size(), 3u);
  EXPECT_EQ(autotp.approximations[0],
            "train_batch_size is 64 = global batch 32 x tp 2: DeepSpeed without an mpu counts all "
            "4 ranks as data-parallel (DeepSpeedConfig world_size = dist.get_world_size()), though "
            "AutoTP's 2 tensor-parallel ranks share each batch; with Megatron-DeepSpeed's mpu it "
            "counts dp 2 and train_batch_size is 32");
  const ExportResult piped = export_deepspeed(
      gpt2(), read_strategy(R"({"dp": 2, "tp": 2, "pp": 2, "micro_batch": 2, "global_batch": 32,
                          "grad_accumulation_fusion": false,
                          "stages": [{"layers": [0, 12]}, {"layers": [13, 25]}]})"),
      {});
  const Json p = Json::parse(piped.text);
  EXPECT_EQ(p.at("train_batch_size"), 32);
  EXPECT_FALSE(p.contains("tensor_parallel"));  // AutoTP's mesh has no pipeline axis
  EXPECT_EQ(p.at("hetplan_pipeline_module"), Json::parse(R"({"topology": {"class":
      "PipeModelDataParallelTopology", "num_pp": 2, "num_mp": 2, "num_dp": 2},
      "partition_method": "uniform"})"));
  EXPECT_EQ(piped.instructions,
            std::vector<std::string>{
                "build the model as PipelineModule(layers, "
                "topology=PipeModelDataParallelTopology(num_pp=2, num_mp=2, num_dp=2), "
                "partition_method=\"uniform\") (the config's hetplan_pipeline_module; DeepSpeed "
                "reads no pipeline stages or partition from the config): its data axis, dp 2, is "
                "the data-parallel size DeepSpeed checks train_batch_size against"});
}

// The TOML job config of torchtitan before its February 2026 refactor (--torchtitan-toml).
TEST(TorchtitanExport, TomlModulePartsAndSplitPoints) {
  ExportOptions toml;
  toml.torchtitan_toml = true;
  const ExportResult r = export_torchtitan(gpt2(), read_strategy(kUneven), toml);
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
  const ExportResult old = export_torchtitan(gpt2(), read_strategy(kUneven), legacy);
  EXPECT_NE(old.text.find("pipeline_parallel_split_points = [\"layers.5\", \"layers.12\", "
                          "\"layers.19\"]\n"),
            std::string::npos);
  // An embedding-only stage is a split point at layers.0; a head-only one has no block to name.
  const ExportResult head_alone = export_torchtitan(
      gpt2(), read_strategy(R"({"dp": 1, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8,
                          "stages": [{"layers": [0, 24]}, {"layers": [25, 25]}]})"),
      legacy);
  EXPECT_EQ(head_alone.unsupported.size(), 1u);
  EXPECT_NE(head_alone.unsupported[0].find("stage 1 holds no transformer block"),
            std::string::npos);
}

// The Python configuration of current torchtitan: a module whose function starts from the config
// that builds the model and replaces its batch, parallelism and activation checkpointing. kUneven:
// dp 2 (ZeRO-0: replicated), pp 4 with blocks 5 | 7 | 7 | 5, micro-batch 2 of 1024 tokens, 64 a
// step: 2048 tokens a micro-batch, 65,536 a step, 64 / (2 x 2) = 16 micro-batches a pipeline step.
TEST(TorchtitanExport, PythonTrainerConfig) {
  const ExportResult r = export_torchtitan(gpt2(), read_strategy(kUneven), {});
  EXPECT_TRUE(r.unsupported.empty());
  EXPECT_EQ(r.text.substr(r.text.find("import importlib")),
            "import importlib\n"
            "import os\n"
            "\n"
            "from torchtitan.config import ParallelismConfig\n"
            "\n"
            "\n"
            "def hetplan_config():\n"
            "    module, _, function = os.environ.get(\"HETPLAN_BASE_CONFIG\", "
            "\"\").partition(\":\")\n"
            "    if not module or not function:\n"
            "        raise ValueError(\"set HETPLAN_BASE_CONFIG=MODULE:FUNCTION, the torchtitan "
            "config function that builds the model\")\n"
            "    config = getattr(importlib.import_module(module), function)()\n"
            "    config.training.num_tokens_per_microbatch_per_dp_rank = 2048\n"
            "    config.training.num_tokens_per_train_step = 65536\n"
            "    config.training.max_context_length = 1024\n"
            "    config.training.mixed_precision_param = \"bfloat16\"\n"
            "    config.training.disable_cuda_graphs = True\n"
            "    config.parallelism = ParallelismConfig(\n"
            "        data_parallel_replicate_degree=2,\n"
            "        data_parallel_shard_degree=1,\n"
            "        tensor_parallel_degree=1,\n"
            "        pipeline_parallel_degree=4,\n"
            "        pipeline_parallel_schedule=\"1F1B\",\n"
            "        num_pp_microbatches=16,\n"
            "        module_fqns_per_model_part=[\n"
            "            [\"tok_embeddings\", \"layers.0\", \"layers.1\", \"layers.2\", "
            "\"layers.3\", \"layers.4\"],\n"
            "            [\"layers.5\", \"layers.6\", \"layers.7\", \"layers.8\", \"layers.9\", "
            "\"layers.10\", \"layers.11\"],\n"
            "            [\"layers.12\", \"layers.13\", \"layers.14\", \"layers.15\", "
            "\"layers.16\", \"layers.17\", \"layers.18\"],\n"
            "            [\"layers.19\", \"layers.20\", \"layers.21\", \"layers.22\", "
            "\"layers.23\", \"norm\", \"lm_head\"],\n"
            "        ],\n"
            "    )\n"
            "    config.activation_checkpoint = None\n"
            "    return config\n");
  EXPECT_NE(r.text.find("-m torchtitan.train --module hetplan_torchtitan --config "
                        "hetplan_config\n"),
            std::string::npos);
  EXPECT_NE(r.text.find("pick the one with 24 layers, hidden 1024, 16 heads (torchtitan's models "
                        "use rotary embeddings; this one does not)"),
            std::string::npos);
  ASSERT_EQ(r.instructions.size(), 1u);
  // Without a pipeline torchtitan accumulates 64 / (4 x 8) = 2 steps of 4 x 1024 tokens; ZeRO-3
  // reshards after the forward, selective recomputation is SelectiveAC, tp without sequence
  // parallelism says so.
  const ExportResult flat = export_torchtitan(
      gpt2(), read_strategy(R"({"dp": 8, "tp": 2, "pp": 1, "micro_batch": 4, "global_batch": 64,
                          "zero": 3, "recompute": "selective", "sequence_parallel": false,
                          "host_mode": "cuda-graphs"})"),
      {});
  for (const char* line :
       {"    config.training.num_tokens_per_microbatch_per_dp_rank = 4096\n",
        "    config.training.num_tokens_per_train_step = 65536\n",
        "        data_parallel_replicate_degree=1,\n        data_parallel_shard_degree=8,\n"
        "        fsdp_reshard_after_forward=\"always\",\n        tensor_parallel_degree=2,\n"
        "        enable_sequence_parallel=False,\n        pipeline_parallel_degree=1,\n    )\n",
        "from torchtitan.distributed.activation_checkpoint import SelectiveAC\n",
        "    config.activation_checkpoint = SelectiveAC.Config()\n"})
    EXPECT_NE(flat.text.find(line), std::string::npos) << line << flat.text;
  // torchtitan's default CUDA graphs, which the strategy's host mode asks for.
  EXPECT_EQ(flat.text.find("disable_cuda_graphs"), std::string::npos);
}

TEST(TorchtitanExport, DataParallelSchedulesAndRecompute) {
  const ExportResult ddp = export_torchtitan(
      gpt2(), read_strategy(R"({"dp": 8, "tp": 1, "pp": 1, "micro_batch": 4, "global_batch": 64})"),
      {});
  EXPECT_NE(ddp.text.find("        data_parallel_replicate_degree=8,\n"
                          "        data_parallel_shard_degree=1,\n"
                          "        tensor_parallel_degree=1,\n"
                          "        pipeline_parallel_degree=1,\n"),
            std::string::npos)
      << ddp.text;
  const ExportResult v = export_torchtitan(
      gpt2(), read_strategy(R"({"dp": 1, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8,
                          "schedule": "v-zb", "chunks": 2, "recompute": "full", "zero": 3})"),
      {});
  EXPECT_TRUE(v.unsupported.empty());
  EXPECT_NE(v.text.find("pipeline_parallel_schedule=\"ZBVZeroBubble\",\n"), std::string::npos);
  EXPECT_NE(v.text.find("    config.activation_checkpoint = FullAC.Config()\n"), std::string::npos);
  EXPECT_NE(v.text.find("from torchtitan.distributed.activation_checkpoint import FullAC\n"),
            std::string::npos);
  const ExportResult vmin = export_torchtitan(
      gpt2(), read_strategy(R"({"dp": 1, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8,
                          "schedule": "v-min", "chunks": 2})"),
      {});
  ASSERT_EQ(vmin.unsupported.size(), 1u);
  EXPECT_NE(vmin.unsupported[0].find("schedule v-min with 2 chunks"), std::string::npos);
}

// torch.distributed.pipelining refuses micro-batch counts its schedules cannot run
// (schedules.py): Interleaved1F1B takes M in max(1, M // pp) rounds and needs M to be a multiple
// of them; 1F1B needs M >= pp. Over pp 4 with 2 chunks, M = 9 makes 2 rounds and 9 mod 2 = 1
// (refused), M = 10 makes 2 rounds and 10 mod 2 = 0, M = 3 one round; 1F1B with M = 3 < 4 is
// refused. Both forms say so; the command fails unless --allow-approximate.
TEST(TorchtitanExport, MicroBatchCountsPytorchsSchedulesRefuse) {
  const auto interleaved = [](int64_t m) {
    return read_strategy(fmt::format(R"({{"dp": 1, "tp": 1, "pp": 4, "micro_batch": 1,
        "global_batch": {}, "schedule": "interleaved", "chunks": 2}})",
                                     m));
  };
  ExportOptions toml;
  toml.torchtitan_toml = true;
  for (const ExportOptions& o : {ExportOptions{}, toml}) {
    EXPECT_EQ(export_torchtitan(gpt2(), interleaved(9), o).unsupported,
              std::vector<std::string>{
                  "9 micro-batches over 4 pipeline ranks: torch.distributed.pipelining's "
                  "Interleaved1F1B runs them in max(1, 9 // 4) = 2 rounds and refuses a count "
                  "that is no multiple of the rounds (9 mod 2 = 1)"});
    EXPECT_TRUE(export_torchtitan(gpt2(), interleaved(10), o).unsupported.empty());
    EXPECT_TRUE(export_torchtitan(gpt2(), interleaved(3), o).unsupported.empty());
    EXPECT_EQ(
        export_torchtitan(gpt2(), read_strategy(R"({"dp": 1, "tp": 1, "pp": 4, "micro_batch": 1,
                                             "global_batch": 3})"),
                          o)
            .unsupported,
        std::vector<std::string>{
            "3 micro-batches over 4 pipeline ranks: torch.distributed.pipelining's "
            "Schedule1F1B refuses fewer micro-batches than stages"});
  }
  // GPipe takes any count (the 1F1B rule is Schedule1F1B's).
  EXPECT_TRUE(export_torchtitan(gpt2(),
                                read_strategy(R"({"dp": 1, "tp": 1, "pp": 4, "micro_batch": 1,
                                                      "global_batch": 3, "schedule": "gpipe"})"),
                                {})
                  .unsupported.empty());
  const auto dir = testing::temp_dir("export_rounds");
  const auto s = dir / "s.json";
  std::ofstream(s) << R"({"dp": 1, "tp": 1, "pp": 4, "micro_batch": 1, "global_batch": 9,
                         "schedule": "interleaved", "chunks": 2})";
  auto r = testing::run_hetplan("export --strategy " + s.string() +
                                " --model gpt2-medium --format torchtitan");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("torchtitan cannot express this strategy:\n  - 9 micro-batches over 4 "
                          "pipeline ranks"),
            std::string::npos)
      << r.output;
  r = testing::run_hetplan("export --strategy " + s.string() +
                           " --model gpt2-medium --format torchtitan --allow-approximate");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("# NOT EXPRESSED: 9 micro-batches over 4 pipeline ranks"),
            std::string::npos);
  r = testing::run_hetplan("export --strategy " + s.string() +
                           " --model gpt2-medium --format megatron --torchtitan-toml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--torchtitan-toml: a torchtitan option; --format megatron does not "
                          "read it"),
            std::string::npos)
      << r.output;
  std::filesystem::remove_all(dir);
}

// Gradient reduction during the backward (overlap_grad_reduce, hetplan's default) or after it: each
// framework says it its own way, or the export says where it cannot.
TEST(Export, GradientReductionOverlapInEachFramework) {
  const auto dp = [](int zero, bool overlap) {
    return read_strategy(fmt::format(R"({{"dp": 4, "tp": 1, "pp": 1, "micro_batch": 2,
        "global_batch": 64, "zero": {}, "overlap_grad_reduce": {},
        "grad_accumulation_fusion": false}})",
                                     zero, overlap));
  };
  const auto has = [](const ExportResult& r, const std::string& text) {
    return r.text.find(text) != std::string::npos;
  };
  // Megatron-LM: --overlap-grad-reduce (off by default), with and without the distributed
  // optimizer; nothing to say on one replica.
  EXPECT_TRUE(has(export_megatron(gpt2(), dp(0, true), {}), "  --overlap-grad-reduce\n"));
  EXPECT_TRUE(has(export_megatron(gpt2(), dp(1, true), {}), "  --overlap-grad-reduce\n"));
  EXPECT_FALSE(has(export_megatron(gpt2(), dp(0, false), {}), "--overlap-grad-reduce"));
  // Gradients reduced in bf16: --grad-reduce-in-bf16 (fp32 is Megatron-LM's default).
  EXPECT_FALSE(has(export_megatron(gpt2(), dp(1, true), {}), "--grad-reduce-in-bf16"));
  Strategy half = dp(1, true);
  half.fp32_grad_reduce = false;
  EXPECT_TRUE(has(export_megatron(gpt2(), half, {}), "  --grad-reduce-in-bf16\n"));
  // A framework whose loss is its own fused kernel (megatron-core's ops.cross_entropy).
  EXPECT_FALSE(has(export_megatron(gpt2(), half, {}), "--cross-entropy-loss-fusion"));
  ExportOptions fused;
  fused.fused_cross_entropy = true;
  EXPECT_TRUE(has(export_megatron(gpt2(), half, fused),
                  "  --cross-entropy-loss-fusion\n  --cross-entropy-fusion-impl te\n"));
  EXPECT_FALSE(
      has(export_megatron(gpt2(), read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1,
                                                "global_batch": 8})"),
                          {}),
          "--overlap-grad-reduce"));
  // DeepSpeed: ZeRO 1-3's overlap_comm either way; ZeRO-0 reduces after the backward, which a
  // prediction of overlap is told.
  for (bool overlap : {true, false}) {
    const ExportResult z1 = export_deepspeed(gpt2(), dp(1, overlap), {});
    EXPECT_EQ(Json::parse(z1.text)["zero_optimization"],
              Json({{"stage", 1}, {"overlap_comm", overlap}}));
    EXPECT_TRUE(z1.approximations.empty());
  }
  const ExportResult z0 = export_deepspeed(gpt2(), dp(0, true), {});
  EXPECT_EQ(Json::parse(z0.text)["zero_optimization"], Json({{"stage", 0}}));
  EXPECT_EQ(z0.approximations,
            std::vector<std::string>{
                "DeepSpeed at ZeRO-0 reduces the gradients after the backward; hetplan predicted "
                "them reduced during it (predict with \"overlap_grad_reduce\": false for "
                "DeepSpeed's time)"});
  EXPECT_TRUE(export_deepspeed(gpt2(), dp(0, false), {}).approximations.empty());
  // torchtitan (DDP, FSDP2) always overlaps.
  EXPECT_TRUE(export_torchtitan(gpt2(), dp(0, true), {}).approximations.empty());
  const ExportResult late = export_torchtitan(gpt2(), dp(0, false), {});
  ASSERT_EQ(late.approximations.size(), 1u);
  EXPECT_NE(late.approximations[0].find("torchtitan (FSDP2 or DDP) reduces gradients during the "
                                        "backward"),
            std::string::npos);
}

// pp 4 x 2 chunks of gpt2-medium as predict and search write them: one range per virtual stage,
// model order (virtual stage j on pipeline rank j mod 4). 24 blocks, 3 per virtual stage.
const char* kInterleavedEven = R"({"dp": 1, "tp": 1, "pp": 4, "micro_batch": 1, "global_batch": 8,
  "schedule": "interleaved", "chunks": 2,
  "stages": [{"layers": [0, 3]}, {"layers": [4, 6]}, {"layers": [7, 9]}, {"layers": [10, 12]},
             {"layers": [13, 15]}, {"layers": [16, 18]}, {"layers": [19, 21]},
             {"layers": [22, 25]}]})";
// Blocks per virtual stage 2 4 4 2 | 2 4 4 2: every chunk of pipeline rank 0 and 3 holds 2 blocks,
// of ranks 1 and 2 four. Megatron-LM: first rank 4 blocks, last 4, the middle ones (24 - 8) / 2 =
// 8, each rank's blocks split evenly over its 2 chunks (get_num_layers_to_build).
const char* kInterleavedFirstLast = R"({"dp": 1, "tp": 1, "pp": 4, "micro_batch": 1,
  "global_batch": 8, "schedule": "interleaved", "chunks": 2,
  "stages": [{"layers": [0, 2]}, {"layers": [3, 6]}, {"layers": [7, 10]}, {"layers": [11, 12]},
             {"layers": [13, 14]}, {"layers": [15, 18]}, {"layers": [19, 22]},
             {"layers": [23, 25]}]})";
// v-zb over pp 2 (virtual stages 0 1 | 2 3 on ranks 0 1 1 0), blocks 5 7 7 5.
const char* kVzb = R"({"dp": 1, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8,
  "schedule": "v-zb", "stages": [{"layers": [0, 5]}, {"layers": [6, 12]}, {"layers": [13, 19]},
                                 {"layers": [20, 25]}]})";

std::string megatron_tail(const ExportResult& r) {
  return r.text.substr(r.text.find("  --tensor-model-parallel-size"));
}

TEST(MegatronExport, VirtualStagesOfTheStrategy) {
  const ExportResult even = export_megatron(gpt2(), read_strategy(kInterleavedEven), {});
  EXPECT_TRUE(even.unsupported.empty());
  EXPECT_TRUE(even.approximations.empty());
  EXPECT_EQ(megatron_tail(even),
            "  --tensor-model-parallel-size 1\n"
            "  --pipeline-model-parallel-size 4\n"
            "  --num-layers-per-virtual-pipeline-stage 3\n"
            "  --micro-batch-size 1\n"
            "  --global-batch-size 8\n"
            "  --attention-backend auto\n"
            ")\n");
  const ExportResult fl = export_megatron(gpt2(), read_strategy(kInterleavedFirstLast), {});
  EXPECT_TRUE(fl.unsupported.empty());
  EXPECT_TRUE(fl.approximations.empty());
  EXPECT_NE(fl.text.find("  --pipeline-model-parallel-size 4\n"
                         "  --decoder-first-pipeline-num-layers 4\n"
                         "  --decoder-last-pipeline-num-layers 4\n"
                         "  --num-virtual-stages-per-pipeline-rank 2\n"
                         "  --micro-batch-size 1\n"),
            std::string::npos)
      << fl.text;
  // Blocks 3 3 3 3 | 3 3 2 4: not "uniform except the first and last rank".
  const ExportResult other = export_megatron(
      gpt2(), read_strategy(R"({"dp": 1, "tp": 1, "pp": 4, "micro_batch": 1, "global_batch": 8,
        "schedule": "interleaved", "chunks": 2,
        "stages": [{"layers": [0, 3]}, {"layers": [4, 6]}, {"layers": [7, 9]},
                   {"layers": [10, 12]}, {"layers": [13, 15]}, {"layers": [16, 18]},
                   {"layers": [19, 20]}, {"layers": [21, 25]}]})"),
      {});
  EXPECT_TRUE(other.unsupported.empty());
  EXPECT_NE(
      other.text.find("  --pipeline-model-parallel-layout \"Ettt|ttt|ttt|ttt|ttt|ttt|tt|t*4L\"\n"),
      std::string::npos)
      << other.text;
  EXPECT_EQ(other.approximations,
            std::vector<std::string>{
                "the partition is not uniform except the first and last pipeline rank's chunks, "
                "so it is written as --pipeline-model-parallel-layout, which only recent "
                "Megatron-LM versions have (older ones cannot express it)"});
}

// QA: interleaved plans were written whatever their micro-batch count; Megatron-LM's interleaved
// schedule stops at its first step unless the count splits into groups of
// --microbatch-group-size-per-virtual-pipeline-stage N (default pp) with no last group of
// 0 < M mod N < pp, and needs M >= N >= pp (megatron/core/pipeline_parallel/schedules.py).
TEST(MegatronExport, InterleavedMicroBatchesAsMegatronGroupsThem) {
  auto interleaved = [](int64_t global_batch) {
    return read_strategy(fmt::format(R"({{"dp": 1, "tp": 1, "pp": 4, "micro_batch": 1,
        "global_batch": {}, "schedule": "interleaved", "chunks": 2}})",
                                     global_batch));
  };
  // 8 = 2 groups of 4: Megatron-LM's default.
  const ExportResult eight = export_megatron(gpt2(), interleaved(8), {});
  EXPECT_TRUE(eight.approximations.empty());
  EXPECT_EQ(eight.text.find("--microbatch-group-size"), std::string::npos);
  // 10: groups of 4 leave 2 < pp; groups of 5 leave none.
  const ExportResult ten = export_megatron(gpt2(), interleaved(10), {});
  EXPECT_TRUE(ten.unsupported.empty());
  EXPECT_NE(ten.text.find("  --num-layers-per-virtual-pipeline-stage 3\n"
                          "  --microbatch-group-size-per-virtual-pipeline-stage 5\n"),
            std::string::npos)
      << ten.text;
  EXPECT_EQ(ten.approximations,
            std::vector<std::string>{
                "10 micro-batches are no multiple of pp 4: Megatron-LM's interleaved schedule "
                "refuses a last group of fewer than pp, so they run in groups of 5 "
                "(--microbatch-group-size-per-virtual-pipeline-stage, recent Megatron-LM; older "
                "versions refuse them), where hetplan simulated groups of 4 and a last one of 2"});
  // 6: no group size in [4, 6] but 6 itself leaves a last group of 0 or >= 4.
  EXPECT_NE(export_megatron(gpt2(), interleaved(6), {})
                .text.find("  --microbatch-group-size-per-virtual-pipeline-stage 6\n"),
            std::string::npos);
  // 3 < pp: nothing Megatron-LM's interleaved schedule takes.
  const ExportResult three = export_megatron(gpt2(), interleaved(3), {});
  EXPECT_EQ(three.unsupported,
            std::vector<std::string>{
                "3 micro-batches over 4 pipeline ranks with virtual stages: Megatron-LM's "
                "interleaved schedule needs at least pp micro-batches per iteration (schedules.py "
                "refuses fewer at the first step)"});
  EXPECT_EQ(three.text.find("--microbatch-group-size"), std::string::npos);
}

TEST(MegatronExport, VScheduleAndRangesPerRankAreRefusedForTheirRealReason) {
  const ExportResult v = export_megatron(gpt2(), read_strategy(kVzb), {});
  EXPECT_EQ(v.unsupported,
            std::vector<std::string>{
                "schedule v-zb: Megatron-LM runs 1F1B and interleaved 1F1B only (its 2 chunks "
                "per rank are written as interleaved virtual stages, which Megatron-LM places "
                "round-robin, not in a V)"});
  // Written anyway (--allow-approximate): the virtual stages in model order as interleaving over 2
  // ranks (rank 0's chunks would hold 5 and 7 blocks: no first/last flags), which Megatron-LM runs
  // only with p2p overlap: its default, which no flag turns on (arguments.py has only
  // --no-overlap-p2p-communication), so nothing follows the layout.
  EXPECT_NE(v.text.find("  --pipeline-model-parallel-size 2\n"
                        "  --pipeline-model-parallel-layout \"Et*5|t*7|t*7|t*5L\"\n"
                        "  --micro-batch-size"),
            std::string::npos)
      << v.text;
  EXPECT_EQ(v.text.find("  --overlap-p2p-comm"), std::string::npos);
  ASSERT_EQ(v.approximations.size(), 2u);
  EXPECT_EQ(v.approximations[1],
            "Megatron-LM interleaves 2 pipeline ranks only with p2p overlap, its default (do not "
            "pass --no-overlap-p2p-communication); older versions refuse interleaving over 2 "
            "ranks");
  // One range per pipeline rank with 2 chunks: the chunks' ranges are missing.
  const ExportResult per_rank = export_megatron(
      gpt2(), read_strategy(R"({"dp": 1, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8,
        "schedule": "interleaved", "chunks": 2,
        "stages": [{"layers": [0, 12]}, {"layers": [13, 25]}]})"),
      {});
  EXPECT_EQ(per_rank.unsupported,
            std::vector<std::string>{
                "the strategy gives 2 layer ranges, but schedule interleaved runs 2 chunks per "
                "device: the partition needs one range per virtual stage (4)"});
}

TEST(DeepSpeedExport, VirtualStagesAreMergedNotLeftToHetplan) {
  const ExportResult r = export_deepspeed(gpt2(), read_strategy(kVzb), {});
  EXPECT_EQ(r.unsupported,
            std::vector<std::string>{"schedule v-zb: DeepSpeed's pipeline engine runs 1F1B only"});
  // Virtual stages [0-5], [6-12] | [13-19], [20-25] merged two at a time: parts [0, 13, 26], which
  // is DeepSpeed's partition_uniform of 26 layers over 2 stages.
  EXPECT_EQ(Json::parse(r.text).at("hetplan_pipeline_module"),
            Json::parse(R"({"num_stages": 2, "partition_method": "uniform"})"));
  EXPECT_FALSE(Json::parse(r.text).contains("pipeline"));
  ASSERT_EQ(r.approximations.size(), 2u);
  EXPECT_EQ(r.approximations[0],
            "DeepSpeed's pipeline holds one contiguous layer range per rank: hetplan's 4 virtual "
            "stages are merged 2 at a time into 2 stages");
}

TEST(TorchtitanExport, VirtualStagesOfTheStrategy) {
  const ExportResult inter = export_torchtitan(gpt2(), read_strategy(kInterleavedFirstLast), {});
  EXPECT_TRUE(inter.unsupported.empty());
  EXPECT_NE(
      inter.text.find("        pipeline_parallel_schedule=\"Interleaved1F1B\",\n"
                      "        num_pp_microbatches=8,\n"
                      "        module_fqns_per_model_part=[\n"
                      "            [\"tok_embeddings\", \"layers.0\", \"layers.1\"],\n"
                      "            [\"layers.2\", \"layers.3\", \"layers.4\", \"layers.5\"],\n"
                      "            [\"layers.6\", \"layers.7\", \"layers.8\", \"layers.9\"],\n"
                      "            [\"layers.10\", \"layers.11\"],\n"
                      "            [\"layers.12\", \"layers.13\"],\n"
                      "            [\"layers.14\", \"layers.15\", \"layers.16\", \"layers.17\"],\n"
                      "            [\"layers.18\", \"layers.19\", \"layers.20\", \"layers.21\"],\n"
                      "            [\"layers.22\", \"layers.23\", \"norm\", \"lm_head\"],\n"
                      "        ],\n"),
      std::string::npos)
      << inter.text;
  // torchtitan's V style puts model parts r and 2pp-1-r on rank r, as hetplan's V does.
  const ExportResult v = export_torchtitan(gpt2(), read_strategy(kVzb), {});
  EXPECT_TRUE(v.unsupported.empty());
  EXPECT_NE(v.text.find("pipeline_parallel_schedule=\"ZBVZeroBubble\",\n"), std::string::npos);
  EXPECT_NE(v.text.find("            [\"layers.19\", \"layers.20\", \"layers.21\", "
                        "\"layers.22\", \"layers.23\", \"norm\", \"lm_head\"],\n        ],\n"),
            std::string::npos)
      << v.text;
  // The TOML releases name the output projection "output".
  ExportOptions toml;
  toml.torchtitan_toml = true;
  EXPECT_NE(export_torchtitan(gpt2(), read_strategy(kVzb), toml)
                .text.find("  [\"layers.19\", \"layers.20\", \"layers.21\", \"layers.22\", "
                           "\"layers.23\", \"norm\", \"output\"],\n]\n"),
            std::string::npos);
}

// search/strategy.cpp: without "chunks" a schedule runs its default, as predict simulates it.
TEST(StrategyChunks, DefaultIsTheSchedulesAndInterleavedNeedsTwo) {
  const std::string base = R"("dp": 4, "tp": 1, "pp": 4, "micro_batch": 1, "global_batch": 32)";
  EXPECT_EQ(read_strategy("{" + base + R"(, "schedule": "v-zb"})").chunks, 2);
  EXPECT_EQ(read_strategy("{" + base + R"(, "schedule": "v-min"})").chunks, 2);
  EXPECT_EQ(read_strategy("{" + base + R"(, "schedule": "interleaved"})").chunks, 2);
  EXPECT_EQ(read_strategy("{" + base + R"(, "schedule": "interleaved", "chunks": 3})").chunks, 3);
  EXPECT_EQ(read_strategy("{" + base + R"(, "schedule": "zb-h1"})").chunks, 1);
  EXPECT_EQ(read_strategy("{" + base + "}").chunks, 1);
  try {
    read_strategy("{" + base + R"(, "schedule": "interleaved", "chunks": 1})");
    FAIL() << "interleaved with 1 chunk was accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "s.json: chunks: schedule interleaved runs 2 or more chunks per device, found 1 "
                 "(one chunk is schedule 1f1b)");
  }
}

// search/strategy.cpp: the devices a strategy file gives its stages are checked as it is read,
// before any cluster is known: dp x tp per stage, one list per pipeline rank, no device twice.
TEST(StrategyDevices, EachRankListsItsOwnDpTimesTpDevices) {
  const std::string base = R"("dp": 2, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8)";
  const auto problem = [&](const std::string& rest) {
    try {
      read_strategy("{" + base + rest + "}");
      return std::string("accepted");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(read_strategy("{" + base + R"(, "stages": [{"devices": [2, 3]}, {"devices": [0, 1]}]})")
                .stages[1]
                .devices,
            (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(problem(R"(, "stages": [{"devices": [0, 1]}, {}])"), "accepted");  // one left open
  EXPECT_EQ(
      problem(R"(, "stages": [{"devices": [0, 1]}, {"devices": [2]}])"),
      "s.json: stages[1].devices: expected dp x cp x tp = 2 x 1 x 1 = 2 device indices, found 1");
  EXPECT_EQ(problem(R"(, "stages": [{"devices": [0, 1]}, {"devices": [1, 2]}])"),
            "s.json: stages[1].devices: device 1 is pipeline rank 0's too (stage 0)");
  EXPECT_EQ(problem(R"(, "stages": [{"devices": [0, 0]}, {"devices": [1, 2]}])"),
            "s.json: stages[0].devices: device 0 is listed twice");
  // Per virtual stage: interleaved's stage 2 is rank 0's second chunk, the V's stage 2 rank 1's.
  const std::string four = R"(, "stages": [{"devices": [0, 1]}, {"devices": [2, 3]},
      {"devices": [%s]}, {"devices": [%s]}])";
  const auto chunks = [&](const std::string& schedule, const std::string& a, const std::string& b) {
    std::string text = four;
    text.replace(text.find("%s"), 2, a);
    text.replace(text.find("%s"), 2, b);
    return problem(R"(, "schedule": ")" + schedule + '"' + text);
  };
  EXPECT_EQ(chunks("interleaved", "0, 1", "2, 3"), "accepted");
  EXPECT_EQ(chunks("v-min", "2, 3", "0, 1"), "accepted");
  EXPECT_EQ(chunks("v-min", "0, 1", "2, 3"),
            "s.json: stages[2].devices: expected the devices of stage 1, the other chunk of "
            "pipeline rank 1: [2, 3]");
}

// amp-hetero: 3 p3.8xlarge (4 x V100, devices 0-11) then 1 g4dn.12xlarge (4 x T4, devices 12-15).
// hetplan's plan puts pipeline rank 0 on the T4 node.
const char* kT4First = R"({"dp": 2, "tp": 2, "pp": 4, "micro_batch": 1, "global_batch": 32,
  "zero": 1, "stages": [
  {"layers": [0, 2], "gpu_type": "t4", "devices": [12, 13, 14, 15]},
  {"layers": [3, 10], "gpu_type": "v100", "devices": [0, 1, 2, 3]},
  {"layers": [11, 18], "gpu_type": "v100", "devices": [4, 5, 6, 7]},
  {"layers": [19, 25], "gpu_type": "v100", "devices": [8, 9, 10, 11]}]})";

const ClusterSpec& amp_hetero() {
  static const ClusterSpec c = load_cluster("amp-hetero");
  return c;
}

TEST(ExportPlacement, NodeOrderOfAMixedCluster) {
  ExportOptions o;
  o.cluster = &amp_hetero();
  const ExportResult mt = export_megatron(gpt2(), read_strategy(kT4First), o);
  const std::vector<std::string> nodes = {
      "  node 3 (g4dn.12xlarge, t4): ranks 0-3 (pipeline rank 0) on GPUs 0-3",
      "  node 0 (p3.8xlarge, v100): ranks 4-7 (pipeline rank 1) on GPUs 0-3",
      "  node 1 (p3.8xlarge, v100): ranks 8-11 (pipeline rank 2) on GPUs 0-3",
      "  node 2 (p3.8xlarge, v100): ranks 12-15 (pipeline rank 3) on GPUs 0-3"};
  std::vector<std::string> expected = {
      "Megatron-LM numbers ranks tensor-parallel fastest, then data-parallel, then pipeline "
      "rank; hetplan's plan runs them on these nodes (numbered in cluster order):"};
  expected.insert(expected.end(), nodes.begin(), nodes.end());
  expected.push_back(
      "start node 3 as --node-rank 0, node 0 as --node-rank 1, node 1 as --node-rank 2, node 2 "
      "as --node-rank 3, each with --nproc-per-node 4 (torchrun's default static rendezvous: "
      "--nnodes 4 and the same --master-addr and --master-port on every node; with "
      "--rdzv-backend c10d torchrun ignores --node-rank)");
  EXPECT_EQ(mt.placement, expected);
  EXPECT_NE(mt.text.find("# placement:   node 3 (g4dn.12xlarge, t4): ranks 0-3 (pipeline rank 0) "
                         "on GPUs 0-3\n"),
            std::string::npos);
  EXPECT_NE(mt.text.find("HETPLAN_RANK_DEVICES=(12 13 14 15 0 1 2 3 4 5 6 7 8 9 10 11)  # hetplan "
                         "device of rank r\n"
                         "HETPLAN_NODE_RANK=(1 2 3 0)  # torchrun --node-rank of cluster node i "
                         "(-1: unused)\n"
                         "# tensor parallelism: validate_args requires "
                         "CUDA_DEVICE_MAX_CONNECTIONS=1 before Blackwell (compute capability < "
                         "10); later GPUs accept it\n"
                         "export CUDA_DEVICE_MAX_CONNECTIONS=1\n"
                         "MEGATRON_ARGS=(\n"),
            std::string::npos)
      << mt.text;

  const ExportResult tt = export_torchtitan(gpt2(), read_strategy(kT4First), o);
  EXPECT_EQ(tt.placement.size(), 6u);
  EXPECT_NE(tt.text.find("# hetplan_rank_devices = [12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, "
                         "10, 11]  # hetplan device of rank r\n"
                         "# hetplan_node_rank = [1, 2, 3, 0]  # torchrun --node-rank of cluster "
                         "node i (-1: unused)\n"),
            std::string::npos)
      << tt.text;

  const ExportResult ds = export_deepspeed(gpt2(), read_strategy(kT4First), o);
  expected[0] =
      "DeepSpeed numbers ranks tensor-parallel fastest, then data-parallel, then pipeline rank; "
      "hetplan's plan runs them on these nodes (numbered in cluster order):";
  expected.back() =
      "list the nodes in the DeepSpeed hostfile in this order: node 3, node 0, node 1, node 2 (its "
      "launcher numbers ranks in hostfile order, a node's GPUs in ascending order)";
  EXPECT_EQ(ds.placement, expected);
  EXPECT_EQ(Json::parse(ds.text).at("hetplan_placement"), Json::parse(R"({
    "rank_devices": [12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
    "hostfile_order": [
      {"node": 3, "node_kind": "g4dn.12xlarge", "gpu_type": "t4", "gpus": [0, 1, 2, 3], "first_rank": 0},
      {"node": 0, "node_kind": "p3.8xlarge", "gpu_type": "v100", "gpus": [0, 1, 2, 3], "first_rank": 4},
      {"node": 1, "node_kind": "p3.8xlarge", "gpu_type": "v100", "gpus": [0, 1, 2, 3], "first_rank": 8},
      {"node": 2, "node_kind": "p3.8xlarge", "gpu_type": "v100", "gpus": [0, 1, 2, 3], "first_rank": 12}]})"));
}

TEST(ExportPlacement, PartNodesGapsAndNoCluster) {
  using export_detail::Launcher;
  // Pipeline rank 0 on GPUs 2 and 3 of node 0, rank 1 on the T4 node; nodes 1 and 2 idle.
  const Strategy part = read_strategy(R"({"dp": 1, "tp": 2, "pp": 2, "micro_batch": 1,
    "global_batch": 8, "stages": [{"devices": [2, 3]}, {"devices": [12, 13]}]})");
  auto p = export_detail::rank_placement(part, &amp_hetero());
  EXPECT_EQ(export_detail::node_ranks(p), (std::vector<int64_t>{0, -1, -1, 1}));
  EXPECT_EQ(export_detail::placement_lines(part, p, "torchtitan", Launcher::kTorchrun),
            (std::vector<std::string>{
                "torchtitan numbers ranks tensor-parallel fastest, then data-parallel, then "
                "pipeline rank; hetplan's plan runs them on these nodes (numbered in cluster "
                "order):",
                "  node 0 (p3.8xlarge, v100): ranks 0-1 (pipeline rank 0) on GPUs 2-3 "
                "(CUDA_VISIBLE_DEVICES=2,3)",
                "  node 3 (g4dn.12xlarge, t4): ranks 2-3 (pipeline rank 1) on GPUs 0-1",
                "  the cluster's other 2 nodes are not used",
                "start node 0 as --node-rank 0, node 3 as --node-rank 1, each with "
                "--nproc-per-node 2 (torchrun's default static rendezvous: --nnodes 2 and the "
                "same --master-addr and --master-port on every node; with --rdzv-backend c10d "
                "torchrun ignores --node-rank)"}));
  // Node 0 holds ranks 0-1 and 4-5: no node order starts them so.
  const Strategy gap = read_strategy(R"({"dp": 1, "tp": 2, "pp": 3, "micro_batch": 1,
    "global_batch": 8, "stages": [{"devices": [0, 1]}, {"devices": [4, 5]},
    {"devices": [2, 3]}]})");
  p = export_detail::rank_placement(gap, &amp_hetero());
  EXPECT_TRUE(export_detail::node_ranks(p).empty());
  const auto lines = export_detail::placement_lines(gap, p, "Megatron-LM", Launcher::kTorchrun);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[1], "  ranks 0-1 (pipeline rank 0): node 0 (p3.8xlarge, v100) GPUs 0-1");
  EXPECT_EQ(lines[2], "  ranks 2-3 (pipeline rank 1): node 1 (p3.8xlarge, v100) GPUs 0-1");
  EXPECT_EQ(lines[3], "  ranks 4-5 (pipeline rank 2): node 0 (p3.8xlarge, v100) GPUs 2-3");
  EXPECT_EQ(lines[4],
            "a node's ranks are not one contiguous block, so no node order gives this placement: "
            "start each rank yourself on its node and GPU (RANK, LOCAL_RANK, WORLD_SIZE, "
            "MASTER_ADDR, MASTER_PORT and CUDA_VISIBLE_DEVICES set per process)");
  // Without the cluster: hetplan device indices and the GPU types the strategy names.
  p = export_detail::rank_placement(read_strategy(kT4First), nullptr);
  EXPECT_EQ(
      export_detail::placement_lines(read_strategy(kT4First), p, "DeepSpeed", Launcher::kDeepSpeed),
      (std::vector<std::string>{
          "DeepSpeed numbers ranks tensor-parallel fastest, then data-parallel, then "
          "pipeline rank; hetplan's plan runs them on these devices:",
          "  ranks 0-3 (pipeline rank 0, t4): hetplan devices 12-15",
          "  ranks 4-7 (pipeline rank 1, v100): hetplan devices 0-3",
          "  ranks 8-11 (pipeline rank 2, v100): hetplan devices 4-7",
          "  ranks 12-15 (pipeline rank 3, v100): hetplan devices 8-11",
          "hetplan numbers devices in cluster order (node groups as listed, nodes, GPUs); "
          "start the nodes so that every rank runs on its device"}));
  // A homogeneous cluster in device order needs one line; a strategy without devices none.
  const ClusterSpec four = load_cluster("g4dn.12xlarge:4");
  const Strategy in_order = read_strategy(R"({"dp": 4, "tp": 1, "pp": 2, "micro_batch": 1,
    "global_batch": 8, "stages": [{"devices": [0, 1, 2, 3]}, {"devices": [4, 5, 6, 7]}]})");
  EXPECT_EQ(export_detail::placement_lines(in_order, export_detail::rank_placement(in_order, &four),
                                           "Megatron-LM", Launcher::kTorchrun),
            std::vector<std::string>{
                "rank r runs on hetplan device r (4 ranks per node, nodes in cluster order): the "
                "launcher's default order, with node i started as torchrun --node-rank i"});
  EXPECT_TRUE(export_megatron(gpt2(), read_strategy(kUneven), {}).placement.empty());
}

// From search to export on the command line.
using testing::run_hetplan;

TEST(ExportCli, SearchedInterleavedAndVSchedulesExport) {
  const auto dir = testing::temp_dir("export_virtual");
  // The fixture framework runs every schedule (megatron-core runs 1F1B and interleaved only).
  const std::string search =
      "search --model gpt2-medium --cluster g4dn.12xlarge:4 --global-batch "
      "32 --threads 1 --top 1 --framework " HETPLAN_TEST_DATA "/framework_fixture.yaml --json ";
  const auto inter = (dir / "inter.json").string(), v = (dir / "v.json").string();
  ASSERT_EQ(run_hetplan(search + inter + " --schedules interleaved").exit_code, 0);
  ASSERT_EQ(run_hetplan(search + v + " --schedules v-zb").exit_code, 0);
  auto r = run_hetplan("export --strategy " + inter + " --format megatron");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("NOT EXPRESSED"), std::string::npos) << r.output;
  r = run_hetplan("export --strategy " + inter + " --format torchtitan");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pipeline_parallel_schedule=\"Interleaved1F1B\",\n"), std::string::npos)
      << r.output;
  r = run_hetplan("export --strategy " + v + " --format torchtitan");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pipeline_parallel_schedule=\"ZBVZeroBubble\",\n"), std::string::npos);
  // DeepSpeed: the schedule is the one reason, and the partition is not "left to hetplan".
  r = run_hetplan("export --strategy " + v + " --format deepspeed");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("deepspeed cannot express this strategy:\n  - schedule v-zb: DeepSpeed's "
                          "pipeline engine runs 1F1B only\n(--allow-approximate"),
            std::string::npos)
      << r.output;
  r = run_hetplan("export --strategy " + v + " --format deepspeed --allow-approximate");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("leaves the layer partition"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("virtual stages are merged 2 at a time into 4 stages"),
            std::string::npos);
  // One strategy, singular.
  r = run_hetplan("export --strategy " + v + " --index 1 --format megatron");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--index 1: the file holds 1 strategy\n"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

TEST(ExportCli, VScheduleWithoutChunksIsTwoChunksEverywhere) {
  const auto dir = testing::temp_dir("export_chunks");
  const auto s = dir / "v.json";
  std::ofstream(s) << R"({"dp": 4, "tp": 1, "pp": 4, "micro_batch": 1, "global_batch": 32,
                         "schedule": "v-zb", "recompute": "none", "zero": 1})";
  const auto pv = (dir / "pv.json").string();
  auto r =
      run_hetplan("predict --model gpt2-medium --cluster g4dn.12xlarge:4 --strategy " + s.string() +
                  " --framework " HETPLAN_TEST_DATA "/framework_fixture.yaml" + " --json " + pv);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(load_document(pv).root.at("strategy").at("chunks"), 2);
  EXPECT_EQ(load_document(pv).root.at("predicted").at("stages").size(), 8u);
  r = run_hetplan("export --strategy " + pv + " --format torchtitan");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pipeline_parallel_schedule=\"ZBVZeroBubble\","), std::string::npos);
  std::ofstream(s) << R"({"dp": 4, "tp": 1, "pp": 4, "micro_batch": 1, "global_batch": 32,
                         "schedule": "interleaved", "chunks": 1})";
  r = run_hetplan("export --strategy " + s.string() + " --model gpt2-medium --format megatron");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("v.json: chunks: schedule interleaved runs 2 or more chunks per device, "
                          "found 1 (one chunk is schedule 1f1b)"),
            std::string::npos)
      << r.output;
  std::filesystem::remove_all(dir);
}

TEST(ExportCli, FindsTheModelFileTheSearchRead) {
  namespace fs = std::filesystem;
  const auto dir = testing::temp_dir("export_model_file");
  fs::create_directories(dir / "a");
  fs::copy_file(std::string(HETPLAN_EXTERNAL_DATA) + "/../models/tiny-gpt.yaml",
                dir / "a/tiny.yaml");
  const auto json = (dir / "a/s.json").string();
  auto r = run_hetplan("search --model " + (dir / "a/tiny.yaml").string() +
                       " --cluster g4dn.12xlarge:1 --global-batch 8 --seq-len 16 --threads 1 "
                       "--schedules 1f1b --top 1 --json " +
                       json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(load_document(json).root.at("context").at("model_source"),
            fs::absolute(dir / "a/tiny.yaml").lexically_normal().string());
  r = run_hetplan("export --strategy " + json + " --format megatron");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("# Megatron-LM arguments for tiny-gpt:"), std::string::npos);
  EXPECT_NE(r.output.find("  --seq-length 16\n"), std::string::npos);  // the search's --seq-len
  // The folder moved: the model file is found next to the predictions file.
  fs::rename(dir / "a", dir / "b");
  r = run_hetplan("export --strategy " + (dir / "b/s.json").string() + " --format megatron");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  fs::remove(dir / "b/tiny.yaml");
  r = run_hetplan("export --strategy " + (dir / "b/s.json").string() + " --format megatron");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("s.json: model: model \"tiny-gpt\" was read from " +
                          fs::absolute(dir / "a/tiny.yaml").lexically_normal().string() +
                          ", which no longer exists (nor next to this file): give --model with "
                          "the model file"),
            std::string::npos)
      << r.output;
  fs::remove_all(dir);
}

TEST(ExportCli, SaysWhichNodeRunsWhichRanks) {
  const auto dir = testing::temp_dir("export_placement");
  const auto s = dir / "p.json";
  std::ofstream(s) << R"({"model": "gpt2-medium", "cluster": "amp-hetero", "strategy": )"
                   << kT4First << "}";
  for (const std::string format : {"megatron", "deepspeed", "torchtitan"}) {
    const auto r = run_hetplan("export --strategy " + s.string() + " --format " + format);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("placement:   node 3 (g4dn.12xlarge, t4): ranks 0-3 (pipeline rank 0) "
                            "on GPUs 0-3\n"),
              std::string::npos)
        << format << "\n"
        << r.output;
  }
  std::filesystem::remove_all(dir);
}

// A predictions file whose stages were edited by hand: the export names the file and the key.
TEST(ExportCli, NamesTheFileOfStagesThatDoNotFit) {
  const auto dir = testing::temp_dir("export_bad_stages");
  const auto s = dir / "p.json";
  Json doc = {
      {"model", "gpt2-medium"}, {"cluster", "amp-hetero"}, {"strategy", Json::parse(kT4First)}};
  doc["strategy"]["stages"][1]["layers"] = {4, 10};
  std::ofstream(s) << doc.dump();
  auto r = run_hetplan("export --strategy " + s.string() + " --format megatron");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("p.json: stages: stage 1 holds layers 4-10; expected it to start at "
                          "layer 3 (stages hold contiguous layers in order)"),
            std::string::npos)
      << r.output;
  // Devices the prediction filled in are checked as the strategy's own are.
  doc["strategy"]["stages"][1]["layers"] = {3, 10};
  for (auto& stage : doc["strategy"]["stages"]) stage.erase("devices");
  Json predicted = {{"feasible", true}, {"stages", Json::array()}};
  for (const std::vector<int64_t>& devices :
       {std::vector<int64_t>{12, 13, 14, 15}, {0, 1, 2, 3}, {4, 5, 6, 7}, {4, 5, 6, 7}})
    predicted["stages"].push_back({{"layers", {0, 0}}, {"gpu_type", ""}, {"devices", devices}});
  doc["predicted"] = predicted;
  std::ofstream(s) << doc.dump();
  r = run_hetplan("export --strategy " + s.string() + " --format megatron");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("p.json: predicted.stages[3].devices: device 4 is pipeline rank 2's too "
                          "(stage 2)"),
            std::string::npos)
      << r.output;
  std::filesystem::remove_all(dir);
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
  // A repeat count past any model: an error, not gigabytes of stage letters.
  try {
    parse_megatron_layout("E|t*99999999999|L", 3, fail);
    ADD_FAILURE() << "a count of 10^11 was unrolled";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "t*99999999999 unrolls to over 100000 stage letters");
  }
  EXPECT_THROW(parse_megatron_layout("E|(t*1000|)*1000|L", 3, fail), std::runtime_error);
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

namespace hetplan {
namespace {

// Without --format, a strategy is written for the framework it was planned for: a search under
// deepspeed exports a DeepSpeed config; the reference harness has no export of its own.
TEST(ExportCli, TheFormatDefaultsToTheStrategysFramework) {
  const auto dir = testing::temp_dir("export_framework");
  const auto ds = (dir / "ds.json").string(), ref = (dir / "ref.json").string();
  const std::string search =
      "search --model gpt2-medium --cluster p3.8xlarge:2 --global-batch "
      "32 --threads 1 --top 1 --quiet --framework ";
  ASSERT_EQ(testing::run_hetplan(search + "deepspeed --json " + ds).exit_code, 0);
  EXPECT_EQ(load_document(ds).root["strategies"][0]["framework"], "deepspeed");
  auto r = testing::run_hetplan("export --strategy " + ds + " --allow-approximate");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"train_micro_batch_size_per_gpu\""), std::string::npos) << r.output;
  // Another format is still the user's to choose, and says what was planned.
  r = testing::run_hetplan("export --strategy " + ds + " --format megatron --allow-approximate");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("note: planned for deepspeed, written for megatron"), std::string::npos)
      << r.output;
  ASSERT_EQ(testing::run_hetplan(search + "reference --json " + ref).exit_code, 0);
  r = testing::run_hetplan("export --strategy " + ref);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--format: a format to write: framework reference has no export of its "
                          "own (one of megatron, deepspeed, torchtitan, sailor)"),
            std::string::npos)
      << r.output;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
