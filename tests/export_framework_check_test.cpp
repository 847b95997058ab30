// Issue 7: exports produce arguments the frameworks accept. A broad matrix of strategies and
// models goes through the real exporters, and every Megatron-LM flag, DeepSpeed key path and
// torchtitan section and field they write is checked against the frameworks' own definitions in
// tests/data/frameworks/ (provenance and refresh: docs/exports.md). The checkers themselves are
// tested on hand-written misspellings first.
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

// hetplan's own DeepSpeed keys (docs/exports.md): the placement at the top level, which
// DeepSpeedConfig does not read, and the stage boundaries in the pipeline dict, which
// get_pipeline_config copies without reading.
const std::set<std::string> kDeepSpeedExtensions = {"hetplan_placement", "pipeline.parts"};

TEST(FrameworkDefinitions, TranscribedFilesHoldTheFlagsHetplanReliesOn) {
  EXPECT_EQ(megatron().names.size(), 591u);
  EXPECT_EQ(megatron().names.at("--use-flash-attn").kind, "flag");
  EXPECT_EQ(megatron().names.at("--recompute-granularity").choices,
            (std::vector<std::string>{"full", "selective"}));
  EXPECT_EQ(megatron().names.count("--overlap-p2p-comm"), 0u);
  EXPECT_EQ(deepspeed().names.at("zero_optimization").choices, std::vector<std::string>{"closed"});
  EXPECT_EQ(torchtitan().names.at("parallelism.pipeline_parallel_schedule").choices.size(), 9u);
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
            }));
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
                "pipeline.partition = \"best\": not one of its allowed values",
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

TEST(FrameworkCheck, TorchtitanUnknownSectionsFieldsAndValuesAreFound) {
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
      "  [\"layers.1\", \"norm\", \"output\"],\n"
      "]\n"
      "\n[activation]\n"
      "mode = \"full\"\n"
      "\n[activation_checkpoint]\n"
      "mode = \"partial\"\n"
      "selective_ac_option = \"op\"\n";
  EXPECT_EQ(testing::torchtitan_problems(toml, torchtitan()),
            (std::vector<std::string>{
                "training.seq_len = \"4096\": not a value of kind int",
                "parallelism.pipeline_parallel_schedule = \"ZeroBubbleV\": not one of its allowed "
                "values",
                "parallelism.pipeline_parallel_degre: not a field of torchtitan's job config",
                "[activation]: not a torchtitan config section",
                "activation.mode: not a field of torchtitan's job config",
                "activation_checkpoint.mode = \"partial\": not one of its allowed values",
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
  const Recompute kRecompute[] = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
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
                s.recompute = kRecompute[i % 3];
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

TEST(ExportFrameworkCheck, EveryFlagAndKeyOfABroadMatrixIsOneTheFrameworkAccepts) {
  const std::vector<ModelSpec> all = models();
  const std::vector<Case> cases = matrix(all);
  Findings findings;
  std::set<std::string> megatron_seen, deepspeed_seen, torchtitan_lines;
  int64_t refused = 0;
  for (const Case& c : cases) {
    ExportOptions options;
    options.torchtitan_split_points = c.split_points;
    const ExportResult mg = export_megatron(*c.model, c.strategy, options);
    findings.add(testing::megatron_problems(mg.text, megatron()), c, mg.text);
    for (const auto& [flag, value] : testing::megatron_options(mg.text)) {
      megatron_seen.insert(flag);
      megatron_seen.insert(flag + " " + value);
    }
    refused += mg.unsupported.empty() ? 0 : 1;

    const ExportResult ds = export_deepspeed(*c.model, c.strategy, options);
    findings.add(testing::deepspeed_problems(ds.text, deepspeed(), kDeepSpeedExtensions), c,
                 ds.text);
    // DeepSpeedConfig._batch_assertion: train = micro x accumulation x data-parallel size.
    const Json j = Json::parse(ds.text);
    const auto batch = [&j](const char* key) { return j.value(key, int64_t{-1}); };
    if (batch("train_batch_size") != batch("train_micro_batch_size_per_gpu") *
                                         batch("gradient_accumulation_steps") * c.strategy.dp)
      findings.add({"train_batch_size != train_micro_batch_size_per_gpu x "
                    "gradient_accumulation_steps x dp"},
                   c, ds.text);
    for (const auto& [key, value] : j.items()) deepspeed_seen.insert(key);

    const ExportResult tt = export_torchtitan(*c.model, c.strategy, options);
    findings.add(testing::torchtitan_problems(tt.text, torchtitan()), c, tt.text);
    for (const auto& line : testing::split(tt.text, '\n'))
      if (line.find("schedule = ") != std::string::npos ||
          line.find("mode = ") != std::string::npos)
        torchtitan_lines.insert(line);
  }
  EXPECT_TRUE(findings.first_case.empty()) << findings.report();

  // The matrix reaches every mapping the exports have (a check that covers less proves less).
  // 15 models x 292 strategies (pp 1: 4 (tp, dp); pp 2 and 4: 4 (tp, dp) x 9 (schedule, chunks) x
  // 4 partitions each). Megatron-LM refuses part of them (zb/V schedules, BERT, the funnel, fewer
  // micro-batches than pp with virtual stages), and their files are checked all the same.
  EXPECT_EQ(cases.size(), 4380u);
  EXPECT_EQ(refused, 2843);
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
                               "--use-flash-attn",
                               "--attention-backend unfused"})
    EXPECT_TRUE(megatron_seen.count(expected)) << expected;
  for (const char* expected : {"bf16", "fp16", "zero_optimization", "tensor_parallel",
                               "activation_checkpointing", "pipeline"})
    EXPECT_TRUE(deepspeed_seen.count(expected)) << expected;
  for (const char* expected :
       {"pipeline_parallel_schedule = \"GPipe\"", "pipeline_parallel_schedule = \"1F1B\"",
        "pipeline_parallel_schedule = \"Interleaved1F1B\"",
        "pipeline_parallel_schedule = \"ZBVZeroBubble\"", "mode = \"none\"", "mode = \"full\"",
        "mode = \"selective\""})
    EXPECT_TRUE(torchtitan_lines.count(expected)) << expected;
}

}  // namespace
}  // namespace hetplan
