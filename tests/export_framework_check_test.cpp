// Issues 7 and 36: exports produce files the frameworks accept as they are at their current heads.
// A broad matrix of strategies and models goes through the real exporters, and every Megatron-LM
// flag and environment variable, DeepSpeed key path and PipelineModule argument, and torchtitan
// field (Python Trainer.Config, and the TOML of older releases) they write is checked against the
// frameworks' own definitions in tests/data/frameworks/ (made by scripts/framework_definitions.py;
// provenance and refresh: docs/exports.md), and every export that claims to be expressed against
// the frameworks' rules (validate_args, DeepSpeed's batch assertion under its topology, PyTorch's
// schedule rules). The checkers themselves are tested on hand-written mistakes first.
#include <gtest/gtest.h>

#include "costmodel/model.h"
#include "framework_definitions.h"
#include "report/export/exporters.h"
#include "search/pipeline/schedule.h"

namespace hetplan {
namespace {

using testing::Definitions;
using testing::load_definitions;

const Definitions& megatron() {
  static const Definitions d = load_definitions("megatron_arguments.txt");
  return d;
}
const Definitions& deepspeed() {
  static const Definitions d = load_definitions("deepspeed_config.txt");
  return d;
}
const Definitions& torchtitan() {
  static const Definitions d = load_definitions("torchtitan_config.txt");
  return d;
}
const Definitions& torchtitan_toml() {
  static const Definitions d = load_definitions("torchtitan_toml_config.txt");
  return d;
}
const Definitions& torchtitan_split_points() {
  static const Definitions d = load_definitions("torchtitan_toml_split_points_config.txt");
  return d;
}

// hetplan's own DeepSpeed keys (docs/exports.md): the placement and PipelineModule's arguments at
// the top level, which DeepSpeedConfig does not read.
const std::set<std::string> kDeepSpeedExtensions = {"hetplan_placement", "hetplan_pipeline_module"};

// Facts of the definitions files that the exports rely on, each read from the framework's head
// (the files' headers name the commits) by scripts/framework_definitions.py.
TEST(FrameworkDefinitions, FilesHoldTheFlagsHetplanReliesOn) {
  // arguments.py's add_argument calls plus the options ArgumentGroupFactory builds from
  // TransformerConfig (and ModelParallelConfig), TrainingConfig, ... (Megatron-LM d98e8a64ddf3).
  EXPECT_EQ(megatron().names.size(), 878u);
  EXPECT_EQ(megatron().names.at("--attention-backend").choices,
            (std::vector<std::string>{"flash", "fused", "unfused", "local", "auto"}));
  // Parsed still, but read by nothing (no args.use_flash_attn at d98e8a64ddf3).
  EXPECT_EQ(megatron().names.at("--use-flash-attn").kind, "flag");
  // TransformerConfig.add_bias_linear: a bool defaulting to true, renamed by its argparse_meta.
  EXPECT_EQ(megatron().names.at("--disable-bias-linear").kind, "flag");
  EXPECT_EQ(megatron().names.count("--no-add-bias-linear"), 0u);
  // A bool field defaulting to true without metadata: --no- and --disable- forms.
  EXPECT_EQ(megatron().names.count("--no-tp-comm-bulk-wgrad"), 1u);
  EXPECT_EQ(megatron().names.count("--disable-tp-comm-bulk-wgrad"), 1u);
  EXPECT_EQ(megatron().names.at("--recompute-granularity").choices,
            (std::vector<std::string>{"full", "selective"}));
  EXPECT_EQ(megatron().names.count("--overlap-p2p-comm"), 0u);
  // The validate_args rules: six on the options, four on CUDA_DEVICE_MAX_CONNECTIONS; every
  // option a rule names is one of arguments.py's.
  EXPECT_EQ(megatron().exclusive.size(), 5u);
  ASSERT_EQ(megatron().requirements.size(), 5u);
  EXPECT_EQ(megatron().requirements[1].then, "$CUDA_DEVICE_MAX_CONNECTIONS=1");
  EXPECT_EQ(megatron().requirements[3].when, std::vector<std::string>{"--use-megatron-fsdp"});
  EXPECT_EQ(megatron().requirements[3].then, "$CUDA_DEVICE_MAX_CONNECTIONS!=1");
  for (const auto& r : megatron().requirements)
    for (std::string term : r.when) {
      term = term.substr(term[0] == '!' ? 1 : 0);
      term = term.substr(0, term.find_first_of("=>"));
      EXPECT_TRUE(megatron().names.count(term)) << term;
    }
  EXPECT_EQ(deepspeed().names.at("zero_optimization").choices, std::vector<std::string>{"closed"});
  EXPECT_EQ(deepspeed().names.at("zero_optimization.stage").choices,
            (std::vector<std::string>{"0", "1", "2", "3"}));
  // get_pipeline_config's defaults: the pipeline engine reads activation_checkpoint_interval and
  // not stages or partition (PipelineModule takes them as arguments).
  EXPECT_EQ(deepspeed().names.at("pipeline.stages").kind, "ignored");
  EXPECT_EQ(deepspeed().names.at("pipeline.partition").kind, "ignored");
  EXPECT_EQ(deepspeed().names.at("pipeline.activation_checkpoint_interval").kind, "int");
  EXPECT_EQ(deepspeed().names.at("PipelineModule.partition_method").choices,
            (std::vector<std::string>{"uniform", "parameters", "type:*"}));
  EXPECT_EQ(deepspeed().names.count("PipeModelDataParallelTopology.num_mp"), 1u);
  EXPECT_EQ(testing::keyed(deepspeed(), "pipeline-zero-max"),
            std::vector<std::vector<std::string>>{{"1"}});
  // torchtitan b5bcd76c66d0: Trainer.Config in Python; the head is lm_head; PyTorch's schedules.
  EXPECT_EQ(torchtitan().names.at("ParallelismConfig.pipeline_parallel_schedule").choices.size(),
            9u);
  EXPECT_EQ(torchtitan().names.at("TrainingConfig.disable_cuda_graphs").kind, "bool");
  EXPECT_EQ(torchtitan().names.count("ParallelismConfig.pipeline_parallel_microbatch_size"), 0u);
  EXPECT_TRUE(testing::known_module("lm_head", torchtitan()));
  EXPECT_FALSE(testing::known_module("output", torchtitan()));
  EXPECT_TRUE(testing::known_module("layers.17", torchtitan()));
  EXPECT_FALSE(testing::known_module("layers.x", torchtitan()));
  EXPECT_EQ(testing::keyed(torchtitan(), "policy").at(0).at(1),
            "SelectiveAC.Config(),FullAC.Config(),MemoryBudgetAC.Config(),None");
  // The last TOML release (9810191bbb03^) and the one with split points (6404b932421f).
  EXPECT_TRUE(testing::known_module("output", torchtitan_toml()));
  EXPECT_EQ(torchtitan_toml().names.count("parallelism.pipeline_parallel_split_points"), 0u);
  EXPECT_EQ(torchtitan_split_points().names.count("parallelism.pipeline_parallel_split_points"),
            1u);
}

// PyTorch's schedule rules as the checker reads them (schedules.py). Interleaved1F1B over pp 4
// runs n micro-batches in max(1, n // 4) rounds and needs n to be a multiple of them: 3, 5, 6 (1
// round), 8, 10 (2), 15 (3) are taken; 9 (2 rounds, 9 mod 2 = 1), 14 (3, 14 mod 3 = 2) and 18 (4,
// 18 mod 4 = 2) refused. 1F1B needs n >= pp and one stage per rank; ZBVZeroBubble two.
TEST(FrameworkCheck, PytorchScheduleRules) {
  const auto problems = [](const std::string& name, int64_t n, int64_t stages) {
    return testing::schedule_problems(name, 4, n, stages, torchtitan()).size();
  };
  for (int64_t n : {3, 5, 6, 8, 10, 15}) EXPECT_EQ(problems("Interleaved1F1B", n, 8), 0u) << n;
  for (int64_t n : {9, 14, 18}) EXPECT_EQ(problems("Interleaved1F1B", n, 8), 1u) << n;
  EXPECT_EQ(problems("1F1B", 3, 4), 1u);
  EXPECT_EQ(problems("1F1B", 4, 4), 0u);
  EXPECT_EQ(problems("1F1B", 8, 8), 1u);  // a single-stage schedule with 2 stages per rank
  EXPECT_EQ(problems("GPipe", 1, 4), 0u);
  EXPECT_EQ(problems("ZBVZeroBubble", 1, 8), 0u);
  EXPECT_EQ(problems("ZBVZeroBubble", 8, 12), 1u);
}

TEST(FrameworkCheck, MegatronMisspellingsArityAndChoicesAreFound) {
  const std::string text =
      "MEGATRON_ARGS=(\n"
      "  --num-layers 24\n"
      "  --hidden-sise 1024\n"                           // misspelled
      "  --swiglu 1\n"                                   // store_true with a value
      "  --seq-length\n"                                 // value missing
      "  --recompute-granularity some\n"                 // not a choice
      "  --micro-batch-size 1.5\n"                       // not an integer
      "  --pipeline-model-parallel-layout E|t*4|t*4L\n"  // unquoted: the shell pipes it
      "  --bf16\n"
      "  --fp16\n"               // exclusive with --bf16
      "  --use-megatron-fsdp\n"  // requires --ckpt-format fsdp_dtensor
      ")\n";
  EXPECT_EQ(testing::megatron_problems(text, megatron()),
            (std::vector<std::string>{
                "--hidden-sise: not an option of arguments.py",
                "--swiglu takes no value, given 1",
                "--seq-length takes a value (int), given none",
                "--recompute-granularity some: not one of its choices",
                "--micro-batch-size 1.5: not a value of kind int",
                "--pipeline-model-parallel-layout E|t*4|t*4L: the shell would read the value",
                "at most one of --fp16, --bf16 may be given",
                "--use-megatron-fsdp requires --ckpt-format=fsdp_dtensor",
                "--use-megatron-fsdp requires $CUDA_DEVICE_MAX_CONNECTIONS!=1",
            }));
}

// validate_args on CUDA_DEVICE_MAX_CONNECTIONS: "1" with tp > 1 (before Blackwell; accepted on
// every GPU) unless an FSDP is used, which wants it unset or above 1. The file's export / unset
// lines set it; a file that says nothing leaves it to the environment, which fails both rules.
TEST(FrameworkCheck, MegatronEnvironmentRules) {
  const auto problems = [](const std::string& env, const std::string& args) {
    return testing::megatron_problems(env + "MEGATRON_ARGS=(\n" + args + ")\n", megatron());
  };
  const std::string tp2 = "  --tensor-model-parallel-size 2\n";
  const std::string fsdp = tp2 + "  --use-megatron-fsdp\n  --ckpt-format fsdp_dtensor\n";
  EXPECT_EQ(problems("", tp2),
            std::vector<std::string>{
                "--tensor-model-parallel-size>1, !--use-megatron-fsdp, !--use-torch-fsdp2, "
                "!--overlap-moe-expert-parallel-comm requires $CUDA_DEVICE_MAX_CONNECTIONS=1"});
  EXPECT_TRUE(problems("export CUDA_DEVICE_MAX_CONNECTIONS=1\n", tp2).empty());
  EXPECT_EQ(problems("export CUDA_DEVICE_MAX_CONNECTIONS=8\n", tp2).size(), 1u);
  EXPECT_TRUE(problems("", "  --tensor-model-parallel-size 1\n").empty());
  // Megatron-FSDP lifts the tp rule (a warning then) and forbids "1".
  EXPECT_EQ(
      problems("export CUDA_DEVICE_MAX_CONNECTIONS=1\n", fsdp),
      std::vector<std::string>{"--use-megatron-fsdp requires $CUDA_DEVICE_MAX_CONNECTIONS!=1"});
  EXPECT_TRUE(problems("unset CUDA_DEVICE_MAX_CONNECTIONS\n", fsdp).empty());
  EXPECT_TRUE(problems("export CUDA_DEVICE_MAX_CONNECTIONS=32\n", fsdp).empty());
  EXPECT_EQ(problems("CUDA_DEVICE_MAX_CONNECTIONS=1\n", "  --tensor-model-parallel-size 1\n"),
            std::vector<std::string>{"cannot read line \"CUDA_DEVICE_MAX_CONNECTIONS=1\""});
}

TEST(FrameworkCheck, DeepSpeedUnknownKeysAndValuesAreFound) {
  EXPECT_EQ(testing::deepspeed_problems(
                R"({"train_batch_size": 8, "zero_optimisation": {"stage": 1},
                    "zero_optimization": {"stage": 4, "hetplan_placement": 1},
                    "bf16": {"enabled": 1}, "pipeline": {"parts": [0, 3], "partition": "best"},
                    "hetplan_placement": {}})",
                deepspeed(), kDeepSpeedExtensions),
            (std::vector<std::string>{
                "bf16.enabled = 1: not a value of kind bool",
                "pipeline.partition: DeepSpeed does not read it",
                "pipeline.parts: not a DeepSpeed config key",
                "zero_optimisation: not a DeepSpeed config key",
                "zero_optimization.hetplan_placement: not a DeepSpeed config key",
                "zero_optimization.stage = 4: not one of its allowed values",
            }));
  // A key of hetplan's own is allowed only where DeepSpeed does not check the keys (bf16 is a
  // pydantic model that rejects unknown ones).
  EXPECT_EQ(testing::deepspeed_problems(R"({"bf16": {"enabled": true, "note": 1}})", deepspeed(),
                                        {"bf16.note"}),
            std::vector<std::string>{"bf16.note: hetplan's own key in a section DeepSpeed checks"});
}

// DeepSpeedConfig._batch_assertion counts the data-parallel size as the pipeline grid's data axis
// (with a PipelineModule) or the whole world (no mpu: AutoTP's tp ranks included). 8 ranks, micro
// 2 x accumulation 8: AutoTP tp 2 x dp 4 counts 8 (train 128, not 64); num_stages 2 counts 8 / 2
// = 4 (train 64); PipeModelDataParallelTopology(2, 2, 2) counts its num_dp 2 (train 32).
TEST(FrameworkCheck, DeepSpeedBatchUnderItsTopology) {
  const auto problems = [](const std::string& json) {
    return testing::deepspeed_run_problems(json, deepspeed(), 8);
  };
  const std::string batch =
      R"("train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 8)";
  EXPECT_EQ(problems("{\"train_batch_size\": 64, " + batch + "}"),
            std::vector<std::string>{
                "train_batch_size 64 != train_micro_batch_size_per_gpu 2 x "
                "gradient_accumulation_steps 8 x the data-parallel size DeepSpeed counts, 8 "
                "(DeepSpeedConfig._batch_assertion)"});
  EXPECT_TRUE(problems("{\"train_batch_size\": 128, " + batch + "}").empty());
  EXPECT_TRUE(problems("{\"train_batch_size\": 64, " + batch +
                       R"(, "hetplan_pipeline_module": {"num_stages": 2,
                          "partition_method": "uniform"}})")
                  .empty());
  const std::string topology = R"(, "hetplan_pipeline_module": {"topology": {"class":
      "PipeModelDataParallelTopology", "num_pp": 2, "num_mp": 2, "num_dp": 2}})";
  EXPECT_TRUE(problems("{\"train_batch_size\": 32, " + batch + topology + "}").empty());
  EXPECT_EQ(problems("{\"train_batch_size\": 64, " + batch + topology + "}").size(), 1u);
  EXPECT_EQ(problems(R"({"train_batch_size": 48, "train_micro_batch_size_per_gpu": 2,
                         "gradient_accumulation_steps": 8, "zero_optimization": {"stage": 2},
                         "hetplan_pipeline_module": {"num_stages": 3, "stages": 3,
                         "partition_method": "best"}})"),
            (std::vector<std::string>{
                "hetplan_pipeline_module.partition_method = \"best\": not one of its allowed "
                "values",
                "hetplan_pipeline_module.stages: not an argument of PipelineModule",
                "num_stages 3 must divide the 8 ranks (PipelineModule)",
                "ZeRO stage 2 with a pipeline (the engine takes 1 at most)",
                "train_batch_size 48 != train_micro_batch_size_per_gpu 2 x "
                "gradient_accumulation_steps 8 x the data-parallel size DeepSpeed counts, 8 "
                "(DeepSpeedConfig._batch_assertion)"}));
}

TEST(FrameworkCheck, TorchtitanTomlUnknownSectionsFieldsAndValuesAreFound) {
  const std::string toml =
      "# comment\n"
      "\n[training]\n"
      "local_batch_size = 8\n"
      "seq_len = \"4096\"\n"
      "\n[parallelism]\n"
      "pipeline_parallel_schedule = \"ZeroBubbleV\"\n"
      "pipeline_parallel_degre = 2\n"
      "module_fqns_per_model_part = [\n"
      "  [\"tok_embeddings\", \"layers.0\"],\n"
      "  [\"layers.1\", \"norm\", \"lm_head\"],\n"
      "]\n"
      "\n[activation]\n"
      "mode = \"full\"\n"
      "\n[activation_checkpoint]\n"
      "mode = \"partial\"\n"
      "selective_ac_option = \"op\"\n";
  EXPECT_EQ(testing::torchtitan_problems(toml, torchtitan_toml()),
            (std::vector<std::string>{
                "training.seq_len = \"4096\": not a value of kind int",
                "parallelism.pipeline_parallel_schedule = \"ZeroBubbleV\": not one of its allowed "
                "values",
                "parallelism.pipeline_parallel_degre: not a field of torchtitan's config",
                // The TOML releases named the output projection "output".
                "parallelism.module_fqns_per_model_part: \"lm_head\" is not a module of "
                "torchtitan's model",
                "[activation]: not a torchtitan config section",
                "activation.mode: not a field of torchtitan's config",
                "activation_checkpoint.mode = \"partial\": not one of its allowed values",
            }));
}

// The Python module of current torchtitan: imports, config.training fields, the ParallelismConfig
// call, the activation checkpointing policy; then what torchtitan and PyTorch refuse when run.
TEST(FrameworkCheck, TorchtitanPythonFieldsAndRules) {
  const std::string py =
      "from torchtitan.config import ParallelismConfig, JobConfig\n"
      "def hetplan_config():\n"
      "    config = base()\n"
      "    config.training.global_batch_size = 8\n"
      "    config.training.num_tokens_per_microbatch_per_dp_rank = 1023\n"
      "    config.training.num_tokens_per_train_step = 4092\n"
      "    config.parallelism = ParallelismConfig(\n"
      "        tensor_parallel_degree=2,\n"
      "        enable_sequence_parallel=True,\n"
      "        pipeline_parallel_degree=4,\n"
      "        pipeline_parallel_microbatch_size=1,\n"
      "        pipeline_parallel_schedule=\"Interleaved1F1B\",\n"
      "        num_pp_microbatches=9,\n"
      "        module_fqns_per_model_part=[\n"
      "            [\"tok_embeddings\", \"layers.0\"],\n"
      "            [\"layers.1\", \"norm\", \"output\"],\n"
      "        ],\n"
      "    )\n"
      "    config.activation_checkpoint = \"full\"\n"
      "    return config\n";
  const auto file = testing::torchtitan_python(py, torchtitan());
  EXPECT_EQ(file.problems,
            (std::vector<std::string>{
                "torchtitan.config does not export JobConfig",
                "TrainingConfig.global_batch_size: not a field of torchtitan's config",
                "ParallelismConfig.pipeline_parallel_microbatch_size: not a field of torchtitan's "
                "config",
                "ParallelismConfig.module_fqns_per_model_part: \"output\" is not a module of "
                "torchtitan's model",
                "config.activation_checkpoint = \"full\": not one of its values",
            }));
  // 9 micro-batches over pp 4 (2 stages: 0.5 per rank); 1023 tokens over tp 2; no
  // disable_cuda_graphs with a pipeline; 4092 tokens a step over 1023 x 9 a pipeline step.
  EXPECT_EQ(
      testing::torchtitan_run_problems(file, torchtitan(), "ParallelismConfig.", 9),
      (std::vector<std::string>{
          "Interleaved1F1B: 9 micro-batches are no multiple of its 2 rounds",
          "ParallelismConfig.pipeline_parallel_degree>1 requires "
          "TrainingConfig.disable_cuda_graphs=True",
          "TrainingConfig.num_tokens_per_microbatch_per_dp_rank 1023 is no multiple of "
          "ParallelismConfig.tensor_parallel_degree 2",
          "TrainingConfig.num_tokens_per_train_step 4092 is no multiple of the 9207 tokens of "
          "one accumulation step",
      }));
}

// --- The matrix ---

// Virtual-stage block counts for `blocks` over pp x chunks virtual stages (model order: stage j on
// pipeline rank j mod pp): the even split (first ones larger); "uniform except the first and last
// rank" (every chunk of a rank equal, the last rank's one block fewer than the others', the first
// rank's the rest); an embedding-only first stage (only the layout flag says it); or none (the
// strategy leaves the partition to hetplan).
enum class Partition { kNone, kEven, kFirstLast, kEmbeddingAlone };

std::vector<int64_t> block_counts(int64_t blocks, int64_t pp, int64_t chunks, Partition p) {
  const int64_t n = pp * chunks, middle = blocks / n, last = middle - 1;
  const int64_t first = blocks / chunks - last - (pp - 2) * middle;
  std::vector<int64_t> counts(n, middle);
  for (int64_t i = 0; i < blocks % n; ++i) ++counts[i];
  if (p == Partition::kFirstLast && blocks % chunks == 0 && last > 0 && first > 0) {
    for (int64_t j = 0; j < n; ++j)
      counts[j] = j % pp == 0 ? first : j % pp == pp - 1 ? last : middle;
  } else if (p == Partition::kEmbeddingAlone) {
    counts[1] += counts[0];
    counts[0] = 0;
  }
  return counts;
}

// Stage ranges in hetplan's layer list: embedding 0, blocks 1..L, head L + 1.
std::vector<StageSpec> stage_ranges(const std::vector<int64_t>& counts) {
  std::vector<StageSpec> stages;
  int64_t next_block = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    StageSpec st;
    st.first_layer = i == 0 ? 0 : next_block + 1;
    next_block += counts[i];
    st.last_layer = i + 1 == counts.size() ? next_block + 1 : next_block;
    stages.push_back(st);
  }
  return stages;
}

struct Case {
  std::string label;
  const ModelSpec* model;
  Strategy strategy;
  bool split_points;
};

std::vector<Case> matrix(const std::vector<ModelSpec>& models) {
  std::vector<Case> cases;
  const Recompute kRecompute[] = {Recompute::kNone, Recompute::kSelective, Recompute::kFull,
                                  Recompute::kOp};
  const int64_t kMicro[] = {1, 2, 4}, kMicrobatches[] = {8, 3, 5, 12, 1, 6, 16};
  int64_t i = 0;
  for (const auto& m : models)
    for (int64_t pp : {1, 2, 4})
      for (int64_t tp : {1, 2})
        for (int64_t dp : {1, 2})
          for (const auto& sched : pipeline::schedules())
            for (int64_t chunks : {int64_t{sched.default_chunks}, int64_t{3}}) {
              if ((pp == 1 && sched.name != "1f1b") || (chunks == 3 && sched.name != "interleaved"))
                continue;
              for (Partition part : {Partition::kNone, Partition::kEven, Partition::kFirstLast,
                                     Partition::kEmbeddingAlone}) {
                if (pp == 1 && part != Partition::kNone) continue;
                Strategy s;
                s.dp = dp, s.tp = tp, s.pp = pp, s.schedule = sched.name, s.chunks = chunks;
                s.micro_batch = kMicro[i % 3];
                s.global_batch = s.micro_batch * dp * kMicrobatches[i % 7];
                s.recompute = kRecompute[i % 4];
                s.zero = static_cast<int>((i / 3) % 4);
                s.sequence_parallel = tp > 1 && i % 2 == 0;
                s.flash_attention = i % 5 != 0;
                s.grad_accumulation_fusion = i % 7 != 0;
                s.overlap_grad_reduce = i % 11 != 0;
                if (part != Partition::kNone)
                  s.stages = stage_ranges(block_counts(m.num_blocks(), pp, chunks, part));
                cases.push_back({fmt::format("{} {} #{}", m.name, to_json(s).dump(), i), &m, s,
                                 (i / 2) % 2 == 1});
                ++i;
              }
            }
  return cases;
}

// The models: learned positions and LayerNorm (GPT), rotary/RMSNorm/SwiGLU without biases
// (LLaMA-2), GQA (LLaMA-2 70B), MoE (Mixtral), each in bf16, fp16 and fp32, GPT-2 with wider
// heads; and two the exports refuse (BERT, a funnel), whose files are written anyway with
// --allow-approximate.
std::vector<ModelSpec> models() {
  std::vector<ModelSpec> out;
  const Dtype kDtypes[] = {Dtype::kBf16, Dtype::kFp16, Dtype::kFp32};
  for (const char* name : {"gpt2-medium", "llama2-7b", "llama2-70b", "mixtral-8x7b"})
    for (Dtype d : kDtypes) {
      out.push_back(load_model(name));
      out.back().dtype = d;
    }
  // Heads wider than hidden / heads (--kv-channels).
  ModelSpec wide = load_model("gpt2-medium");
  for (auto& layer : wide.layers)
    if (auto* b = std::get_if<TransformerLayer>(&layer.op)) b->head_dim = 128;
  out.push_back(wide);
  out.push_back(load_model("bert-large"));
  out.push_back(load_model("funnel-uneven"));
  return out;
}

// Problems across the matrix, each with the first case that shows it.
struct Findings {
  std::map<std::string, std::string> first_case;
  void add(const std::vector<std::string>& problems, const Case& c, const std::string& text) {
    for (const auto& p : problems) first_case.emplace(p, c.label + "\n" + text);
  }
  std::string report() const {
    std::string out;
    for (const auto& [problem, where] : first_case)
      out += fmt::format("\n{}\n  first in: {}\n", problem, where);
    return out;
  }
};

// The micro-batches per pipeline step a torchtitan file runs: num_pp_microbatches (Python), or
// local_batch_size / pipeline_parallel_microbatch_size (TOML).
int64_t torchtitan_microbatches(const testing::TorchtitanFile& f) {
  const auto get = [&f](const std::string& path) {
    const auto it = f.values.find(path);
    return it == f.values.end() ? int64_t{1} : it->second.get<int64_t>();
  };
  if (f.values.count("ParallelismConfig.num_pp_microbatches"))
    return get("ParallelismConfig.num_pp_microbatches");
  return get("training.local_batch_size") /
         std::max<int64_t>(1, get("parallelism.pipeline_parallel_microbatch_size"));
}

// Whether an export's only "not expressed" entry is PyTorch's micro-batch rule.
bool refused_for_microbatches(const ExportResult& r) {
  return r.unsupported.size() == 1 &&
         r.unsupported[0].find("torch.distributed.pipelining's") != std::string::npos &&
         r.unsupported[0].find("micro-batch") != std::string::npos;
}

struct Seen {
  std::set<std::string> megatron, deepspeed, torchtitan;
  void lines(const std::string& text, std::set<std::string>& into,
             const std::vector<std::string>& markers) {
    for (const auto& line : testing::split(text, '\n'))
      for (const auto& m : markers)
        if (line.find(m) != std::string::npos)
          into.insert(line.substr(line.find_first_not_of(' ')));
  }
};

// Checks one case's torchtitan file: its fields (every export), and, when it claims to be
// expressed, what torchtitan and PyTorch refuse; a file refused for its micro-batches alone must
// be one they refuse (the exporter says "not expressed" exactly where they would stop).
void check_torchtitan(const ExportResult& r, const testing::TorchtitanFile& file,
                      const Definitions& d, const std::string& prefix, const Case& c,
                      Findings& findings) {
  findings.add(file.problems, c, r.text);
  const auto run = testing::torchtitan_run_problems(file, d, prefix, torchtitan_microbatches(file));
  if (r.unsupported.empty()) findings.add(run, c, r.text);
  if (refused_for_microbatches(r) && run.empty())
    findings.add({"refused for its micro-batches, which PyTorch's rules take"}, c, r.text);
}

TEST(ExportFrameworkCheck, EveryFlagAndKeyOfABroadMatrixIsOneTheFrameworkAccepts) {
  const std::vector<ModelSpec> all = models();
  const std::vector<Case> cases = matrix(all);
  Findings findings;
  Seen seen;
  int64_t refused = 0, deepspeed_expressed = 0, torchtitan_expressed = 0, microbatch_refused = 0;
  for (const Case& c : cases) {
    const ExportResult mg = export_megatron(*c.model, c.strategy, {});
    findings.add(testing::megatron_problems(mg.text, megatron()), c, mg.text);
    for (const auto& [flag, value] : testing::megatron_options(mg.text)) {
      seen.megatron.insert(flag);
      seen.megatron.insert(flag + " " + value);
    }
    seen.lines(mg.text, seen.megatron, {"CUDA_DEVICE_MAX_CONNECTIONS"});
    refused += mg.unsupported.empty() ? 0 : 1;

    const ExportResult ds = export_deepspeed(*c.model, c.strategy, {});
    findings.add(testing::deepspeed_problems(ds.text, deepspeed(), kDeepSpeedExtensions), c,
                 ds.text);
    if (ds.unsupported.empty()) {
      ++deepspeed_expressed;
      findings.add(testing::deepspeed_run_problems(ds.text, deepspeed(), c.strategy.devices()), c,
                   ds.text);
    }
    const Json j = Json::parse(ds.text);
    for (const auto& [key, value] : j.items()) seen.deepspeed.insert(key);
    if (j.contains("hetplan_pipeline_module")) {
      for (const auto& [key, value] : j["hetplan_pipeline_module"].items())
        seen.deepspeed.insert("hetplan_pipeline_module." + key + " " +
                              (value.is_object() ? value.value("class", "") : value.dump()));
    }

    const ExportResult tt = export_torchtitan(*c.model, c.strategy, {});
    check_torchtitan(tt, testing::torchtitan_python(tt.text, torchtitan()), torchtitan(),
                     "ParallelismConfig.", c, findings);
    torchtitan_expressed += tt.unsupported.empty() ? 1 : 0;
    microbatch_refused += refused_for_microbatches(tt) ? 1 : 0;
    seen.lines(
        tt.text, seen.torchtitan,
        {"schedule=", "activation_checkpoint =", "disable_cuda_graphs", "sequence_parallel"});

    // The TOML of older releases: with split points (before module_fqns_per_model_part) for half
    // the cases, the module lists of the last TOML release for the others.
    ExportOptions toml;
    toml.torchtitan_toml = true;
    toml.torchtitan_split_points = c.split_points;
    const Definitions& toml_d = c.split_points ? torchtitan_split_points() : torchtitan_toml();
    const ExportResult old = export_torchtitan(*c.model, c.strategy, toml);
    check_torchtitan(old, testing::torchtitan_toml(old.text, toml_d), toml_d, "parallelism.", c,
                     findings);
    seen.lines(old.text, seen.torchtitan, {"schedule = ", "mode = "});
  }
  EXPECT_TRUE(findings.first_case.empty()) << findings.report();

  // The matrix reaches every mapping the exports have (a check that covers less proves less).
  // 15 models x 292 strategies (pp 1: 4 (tp, dp); pp 2 and 4: 4 (tp, dp) x 9 (schedule, chunks) x
  // 4 partitions each). Megatron-LM refuses part of them (zb/V schedules, BERT, the funnel, fewer
  // micro-batches than pp with virtual stages, torchtitan's per-op recomputation in a quarter of
  // the cases), and their files are checked all the same.
  EXPECT_EQ(cases.size(), 4380u);
  EXPECT_EQ(refused, 3227);
  EXPECT_GT(deepspeed_expressed, 400) << deepspeed_expressed;
  EXPECT_GT(torchtitan_expressed, 400) << torchtitan_expressed;
  EXPECT_GT(microbatch_refused, 0) << microbatch_refused;
  for (const char* expected : {"--pipeline-model-parallel-layout",
                               "--decoder-first-pipeline-num-layers",
                               "--decoder-last-pipeline-num-layers",
                               "--num-virtual-stages-per-pipeline-rank",
                               "--num-layers-per-virtual-pipeline-stage",
                               "--microbatch-group-size-per-virtual-pipeline-stage",
                               "--group-query-attention",
                               "--num-query-groups",
                               "--num-experts",
                               "--moe-router-topk",
                               "--kv-channels",
                               "--position-embedding-type rope",
                               "--normalization RMSNorm",
                               "--swiglu",
                               "--disable-bias-linear",
                               "--untie-embeddings-and-output-weights",
                               "--bf16",
                               "--fp16",
                               "--sequence-parallel",
                               "--recompute-granularity selective",
                               "--recompute-granularity full",
                               "--recompute-method uniform",
                               "--use-distributed-optimizer",
                               "--use-megatron-fsdp",
                               "--data-parallel-sharding-strategy optim_grads",
                               "--data-parallel-sharding-strategy optim_grads_params",
                               "--ckpt-format fsdp_dtensor",
                               "--no-gradient-accumulation-fusion",
                               "--overlap-grad-reduce",
                               "--attention-backend auto",
                               "--attention-backend unfused",
                               "export CUDA_DEVICE_MAX_CONNECTIONS=1",
                               "unset CUDA_DEVICE_MAX_CONNECTIONS"})
    EXPECT_TRUE(seen.megatron.count(expected)) << expected;
  EXPECT_FALSE(seen.megatron.count("--use-flash-attn"));
  for (const char* expected :
       {"bf16", "fp16", "zero_optimization", "tensor_parallel", "activation_checkpointing",
        "pipeline", "hetplan_pipeline_module", "hetplan_pipeline_module.num_stages 4",
        "hetplan_pipeline_module.topology PipeModelDataParallelTopology",
        "hetplan_pipeline_module.partition_method \"uniform\"",
        "hetplan_pipeline_module.partition_method \"parameters\""})
    EXPECT_TRUE(seen.deepspeed.count(expected)) << expected;
  for (const char* expected :
       {"pipeline_parallel_schedule=\"GPipe\",", "pipeline_parallel_schedule=\"1F1B\",",
        "pipeline_parallel_schedule=\"Interleaved1F1B\",",
        "pipeline_parallel_schedule=\"ZBVZeroBubble\",", "config.activation_checkpoint = None",
        "config.activation_checkpoint = FullAC.Config()",
        "config.activation_checkpoint = SelectiveAC.Config()",
        "config.training.disable_cuda_graphs = True", "enable_sequence_parallel=False,",
        "enable_sequence_parallel=True,", "pipeline_parallel_schedule = \"GPipe\"",
        "pipeline_parallel_schedule = \"1F1B\"", "pipeline_parallel_schedule = \"Interleaved1F1B\"",
        "pipeline_parallel_schedule = \"ZBVZeroBubble\"", "mode = \"none\"", "mode = \"full\"",
        "mode = \"selective\""})
    EXPECT_TRUE(seen.torchtitan.count(expected)) << expected;
}

// Issue 37: context and expert parallelism and the low-precision recipes of 2026's runs, through
// every exporter, checked as the matrix above: DeepSeek-V3 (MLA, dense first layers, shared
// experts, MTP), Qwen3-30B-A3B (q/k norms, 128 experts), Llama 3.1 405B, GPT-OSS-120B.
TEST(ExportFrameworkCheck, AHybridModelIsMegatronsHybridLayerPattern) {
  // Nemotron 3 Nano (Mamba-2, attention and MoE layers): pretrain_hybrid.py's pattern and Mamba
  // flags, each one Megatron-LM's arguments.py declares; under a pipeline the strategy's stages
  // become the pattern's | segments.
  const ModelSpec m = load_model("nemotron3-nano-30b-a3b");
  Strategy s;
  s.dp = 4, s.pp = 4, s.ep = 4, s.etp = 1;
  s.micro_batch = 1;
  s.global_batch = 64;
  s.moe_dispatcher = MoeDispatcher::kAllToAll;
  for (int64_t i = 0; i < 4; ++i) {
    StageSpec st;
    st.first_layer = i == 0 ? 0 : 1 + 13 * i;
    st.last_layer = i == 3 ? 53 : 13 * (i + 1);
    s.stages.push_back(st);
  }
  const ExportResult r = export_megatron(m, s, {});
  EXPECT_TRUE(r.unsupported.empty()) << r.unsupported.front();
  EXPECT_TRUE(testing::megatron_problems(r.text, megatron()).empty()) << r.text;
  for (const char* expected :
       {"pretrain_hybrid.py",
        "  --hybrid-layer-pattern \"MEMEM*EMEMEM*|EMEMEM*EMEMEM|*EMEMEM*EMEME|MEM*EMEMEMEME\"\n",
        "  --mamba-num-heads 64\n", "  --mamba-head-dim 64\n", "  --mamba-state-dim 128\n",
        "  --mamba-num-groups 8\n", "  --squared-relu\n", "  --position-embedding-type none\n",
        "  --num-experts 128\n", "  --moe-shared-expert-intermediate-size 3712\n"})
    EXPECT_NE(r.text.find(expected), std::string::npos) << expected << "\n" << r.text;
  // The pattern places the MoE layers: no --moe-layer-freq, no partition flags beside it.
  for (const char* absent : {"--moe-layer-freq", "--decoder-first-pipeline-num-layers",
                             "--pipeline-model-parallel-layout"})
    EXPECT_EQ(r.text.find(absent), std::string::npos) << absent;
}

// torchtitan captures each step's forward and backward in a CUDA graph unless
// training.disable_cuda_graphs is set, and its check refuses that with a pipeline or with the
// all-to-all dispatcher's host synchronisation (expert parallelism): an export with either turns
// the graphs off; one with neither leaves torchtitan's default.
TEST(ExportFrameworkCheck, TorchtitanTurnsCudaGraphsOffWhereItsCheckRefusesThem) {
  const ModelSpec moe = load_model("qwen3-30b-a3b");
  Strategy s;
  s.dp = 8, s.tp = 2, s.pp = 1, s.cp = 2, s.ep = 8;
  s.cp_comm = CpComm::kAllGather;
  s.sequence_parallel = true;
  s.micro_batch = 1;
  s.global_batch = 128;
  s.zero = 3;
  s.framework = "torchtitan";
  const ExportResult ep = export_torchtitan(moe, s, {});
  ASSERT_TRUE(ep.unsupported.empty()) << ep.text;
  const auto file = testing::torchtitan_python(ep.text, torchtitan());
  EXPECT_TRUE(file.problems.empty()) << ep.text;
  EXPECT_TRUE(testing::torchtitan_run_problems(file, torchtitan(), "ParallelismConfig.", 1).empty())
      << ep.text;
  EXPECT_NE(ep.text.find("config.training.disable_cuda_graphs = True"), std::string::npos);
  s.ep = 1;
  s.host_mode = HostMode::kCudaGraphs;  // the torchtitan framework's default
  const ExportResult dense = export_torchtitan(moe, s, {});
  EXPECT_EQ(dense.text.find("disable_cuda_graphs"), std::string::npos) << dense.text;
  // Compiled, with async tensor parallelism: compile's fields, without graphs (as predicted).
  s.host_mode = HostMode::kCompiled;
  s.tp_comm_overlap = true;
  const ExportResult compiled = export_torchtitan(moe, s, {});
  ASSERT_TRUE(compiled.unsupported.empty()) << compiled.text;
  const auto cfile = testing::torchtitan_python(compiled.text, torchtitan());
  EXPECT_TRUE(cfile.problems.empty()) << compiled.text;
  for (const char* line :
       {"config.training.disable_cuda_graphs = True", "config.compile.enable = True",
        "config.compile.enable_async_tensor_parallel = True"})
    EXPECT_NE(compiled.text.find(line), std::string::npos) << line;
  // The TOML releases: [compile] and parallelism's async TP key, no graphs.
  ExportOptions toml;
  toml.torchtitan_toml = true;
  const ExportResult old = export_torchtitan(moe, s, toml);
  ASSERT_TRUE(old.unsupported.empty()) << old.text;
  EXPECT_TRUE(testing::torchtitan_toml(old.text, torchtitan_toml()).problems.empty()) << old.text;
  for (const char* line : {"[compile]\nenable = true\n", "enable_async_tensor_parallel = true\n"})
    EXPECT_NE(old.text.find(line), std::string::npos) << line << old.text;
  // Async tensor parallelism in eager mode: torchtitan has none.
  s.host_mode = HostMode::kEager;
  EXPECT_FALSE(export_torchtitan(moe, s, {}).unsupported.empty());
  EXPECT_FALSE(export_torchtitan(moe, s, toml).unsupported.empty());
}

// hetplan's cuda-graphs host mode is Megatron-Core's whole-forward-backward graph, with the NaN
// check validate_args asks to be off beside it.
TEST(ExportFrameworkCheck, MegatronCudaGraphsAreTheFullIterationGraph) {
  const ModelSpec dense = load_model("llama3-8b");
  Strategy s;
  s.dp = 8, s.tp = 1, s.pp = 1;
  s.micro_batch = 1;
  s.global_batch = 16;
  s.zero = 1;
  s.host_mode = HostMode::kCudaGraphs;
  const ExportResult mg = export_megatron(dense, s, {});
  ASSERT_TRUE(mg.unsupported.empty()) << mg.text;
  EXPECT_TRUE(testing::megatron_problems(mg.text, megatron()).empty()) << mg.text;
  const auto options = testing::megatron_options(mg.text);
  const auto has = [&](const std::string& flag, const std::string& value) {
    return std::count(options.begin(), options.end(), std::make_pair(flag, value));
  };
  EXPECT_EQ(has("--cuda-graph-impl", "full_iteration"), 1) << mg.text;
  EXPECT_EQ(has("--no-check-for-nan-in-loss-and-grad", ""), 1) << mg.text;
  s.host_mode = HostMode::kEager;
  EXPECT_EQ(export_megatron(dense, s, {}).text.find("--cuda-graph-impl"), std::string::npos);
}

TEST(ExportFrameworkCheck, ContextExpertParallelismAndPrecisionsAreFlagsTheFrameworksAccept) {
  std::vector<ModelSpec> models;
  for (const char* name : {"deepseek-v3", "qwen3-30b-a3b", "llama3.1-405b", "gpt-oss-120b"})
    models.push_back(load_model(name));
  const Precision kPrecisions[] = {Precision::kBf16,       Precision::kFp8Delayed,
                                   Precision::kFp8Current, Precision::kFp8Blockwise,
                                   Precision::kMxfp8,      Precision::kNvfp4};
  const CpComm kComms[] = {CpComm::kP2p, CpComm::kAllGather, CpComm::kA2a, CpComm::kA2aP2p};
  Findings findings;
  Seen seen;
  int64_t i = 0, megatron_expressed = 0;
  for (const auto& m : models)
    for (int64_t cp : {1, 2, 4})
      for (int64_t ep : {1, 8})
        for (int64_t etp : {0, 1}) {
          if (!m.is_moe() && (ep > 1 || etp == 1)) continue;
          Strategy s;
          s.dp = 8, s.tp = 2, s.pp = 2, s.cp = cp, s.ep = ep, s.etp = etp;
          s.cp_comm = kComms[i % 4];
          s.cp_a2a = 2;
          s.precision = kPrecisions[i % 6];
          constexpr MoeDispatcher kDispatchers[] = {MoeDispatcher::kAllGather,
                                                    MoeDispatcher::kAllToAll, MoeDispatcher::kFlex};
          s.moe_dispatcher = kDispatchers[i % 3];
          s.sequence_parallel = true;
          s.micro_batch = 1;
          s.global_batch = 8 * 16;
          s.zero = 1;
          const Case c{fmt::format("{} {} #{}", m.name, to_json(s).dump(), i), &m, s, false};
          ++i;
          const ExportResult mg = export_megatron(m, s, {});
          findings.add(testing::megatron_problems(mg.text, megatron()), c, mg.text);
          if (mg.unsupported.empty()) ++megatron_expressed;
          for (const auto& [flag, value] : testing::megatron_options(mg.text)) {
            seen.megatron.insert(flag);
            seen.megatron.insert(flag + " " + value);
          }
          const ExportResult ds = export_deepspeed(m, s, {});
          findings.add(testing::deepspeed_problems(ds.text, deepspeed(), kDeepSpeedExtensions), c,
                       ds.text);
          const ExportResult tt = export_torchtitan(m, s, {});
          check_torchtitan(tt, testing::torchtitan_python(tt.text, torchtitan()), torchtitan(),
                           "ParallelismConfig.", c, findings);
          seen.lines(tt.text, seen.torchtitan, {"context_parallel_degree", "expert_parallel"});
          ExportOptions toml;
          toml.torchtitan_toml = true;
          const ExportResult old = export_torchtitan(m, s, toml);
          check_torchtitan(old, testing::torchtitan_toml(old.text, torchtitan_toml()),
                           torchtitan_toml(), "parallelism.", c, findings);
          seen.lines(old.text, seen.torchtitan, {"context_parallel", "expert_"});
        }
  EXPECT_TRUE(findings.first_case.empty()) << findings.report();
  EXPECT_EQ(i, 39);  // 3 MoE models x 3 cp x 2 ep x 2 etp, and Llama's 3 cp
  EXPECT_GT(megatron_expressed, 0);
  for (const char* expected : {"--context-parallel-size 2",
                               "--cp-comm-type p2p",
                               "--cp-comm-type all_gather",
                               "--cp-comm-type a2a",
                               "--hierarchical-context-parallel-sizes",
                               "--expert-model-parallel-size 8",
                               "--expert-tensor-parallel-size 1",
                               "--fp8-format hybrid",
                               "--fp8-recipe delayed",
                               "--fp8-recipe tensorwise",
                               "--fp8-recipe blockwise",
                               "--fp8-recipe mxfp8",
                               "--fp4-format e2m1",
                               "--fp4-recipe nvfp4",
                               "--moe-token-dispatcher-type alltoall",
                               "--moe-token-dispatcher-type allgather",
                               "--moe-grouped-gemm",
                               "--moe-ffn-hidden-size",
                               "--moe-shared-expert-intermediate-size",
                               "--moe-layer-freq",
                               "--mtp-num-layers 1",
                               "--multi-latent-attention",
                               "--kv-lora-rank 512",
                               "--q-lora-rank 1536",
                               "--qk-layernorm",
                               "--num-layers 61",
                               "--num-experts 256"})
    EXPECT_TRUE(seen.megatron.count(expected)) << expected;
  for (const char* expected :
       {"context_parallel_degree=2,", "expert_parallel_degree=8,", "context_parallel_degree = 2",
        "expert_parallel_degree = 8", "expert_tensor_parallel_degree = 1"})
    EXPECT_TRUE(seen.torchtitan.count(expected)) << expected;
}

}  // namespace
}  // namespace hetplan
