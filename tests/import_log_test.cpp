// Log importers on the sample logs of tests/data/megatron and tests/data/deepspeed (hand-written in
// the frameworks' formats, values invented; see tests/data/README.md). Expected values are read
// off those files by hand.
#include <algorithm>
#include <functional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "costmodel/errors.h"
#include "report/import/deepspeed_log.h"
#include "report/import/log_text.h"
#include "report/import/megatron_log.h"
#include "search/strategy.h"
#include "test_util.h"

namespace hetplan {
namespace {

using testing::error_of;

const std::string kData = HETPLAN_TEST_DATA;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = kMiB * 1024.0;

Measurement megatron(const std::string& file, LogImportOptions o = {}) {
  const std::string path = kData + "/megatron/" + file;
  return megatron_measurement(parse_megatron_log(logs::read_text_file(path), path), path, o);
}

Measurement deepspeed(const std::string& file, LogImportOptions o) {
  const std::string path = kData + "/deepspeed/" + file;
  return deepspeed_measurement(parse_deepspeed_log(logs::read_text_file(path), path), path, o);
}

Strategy strategy_of(const Measurement& m) {
  return strategy_from_json(ObjectReader(m.strategy, "measurement", "strategy"));
}

TEST(MegatronLog, ReadsStrategyTimesAndMemoryPerStage) {
  LogImportOptions o;
  o.model = "gpt2-medium";
  const Measurement m = megatron("gpt2-medium_tp2_pp2_dp2.log", o);
  EXPECT_EQ(m.model, "gpt2-medium");
  EXPECT_EQ(m.source, "imported:megatron");
  const Strategy s = strategy_of(m);
  EXPECT_EQ(s.dp, 2);
  EXPECT_EQ(s.tp, 2);
  EXPECT_EQ(s.pp, 2);
  EXPECT_EQ(s.micro_batch, 4);
  EXPECT_EQ(s.global_batch, 64);
  EXPECT_EQ(s.recompute, Recompute::kSelective);
  EXPECT_EQ(s.zero, 1);  // use_distributed_optimizer True
  EXPECT_TRUE(s.sequence_parallel);
  // Megatron-LM's even split of 24 blocks: embedding + 12 blocks, 12 blocks + head.
  ASSERT_EQ(s.stages.size(), 2u);
  EXPECT_EQ(s.stages[0].first_layer, 0);
  EXPECT_EQ(s.stages[0].last_layer, 12);
  EXPECT_EQ(s.stages[1].first_layer, 13);
  EXPECT_EQ(s.stages[1].last_layer, 25);
  // 20 iterations at log interval 1; the first two (2113.4 and 412.9 ms) are warm-up. The 18 kept
  // sorted: ..., 196.0, 196.2, ... -> median 196.1 ms.
  ASSERT_TRUE(m.iteration_s.has_value());
  EXPECT_EQ(m.iteration_s->count, 18);
  EXPECT_NEAR(m.iteration_s->median, 0.1961, 1e-12);
  EXPECT_NEAR(m.iteration_s->min, 0.1943, 1e-12);
  EXPECT_EQ(m.warmup_iterations, 2);
  // Ranks 0, 1 are stage 0 and ranks 4, 5 stage 1 (rank = tp + 2 (dp + 2 pp)); max allocated.
  ASSERT_EQ(m.peak_memory_bytes.size(), 2u);
  EXPECT_DOUBLE_EQ(m.peak_memory_bytes[0], 3010.5625 * kMiB);
  EXPECT_DOUBLE_EQ(m.peak_memory_bytes[1], 2870.8125 * kMiB);
  EXPECT_EQ(m.peak_memory_kind, "allocated");
  EXPECT_FALSE(m.oom);
  EXPECT_TRUE(m.assumed.empty());  // the block prints every key the strategy is read from
}

TEST(MegatronLog, UnevenFirstLastStagesAndLogIntervals) {
  const Measurement m = megatron("gpt2-medium_tp1_pp4_dp2_uneven.log");
  EXPECT_EQ(m.model, "megatron:l24-h1024-a16-s1024");  // no --model: named after its shape
  const Strategy s = strategy_of(m);
  EXPECT_EQ(s.pp, 4);
  EXPECT_EQ(s.recompute, Recompute::kNone);
  EXPECT_EQ(s.zero, 0);
  // decoder_first/last_pipeline_num_layers 5: blocks 5, 7, 7, 5.
  ASSERT_EQ(s.stages.size(), 4u);
  EXPECT_EQ(s.stages[0].last_layer, 5);
  EXPECT_EQ(s.stages[1].first_layer, 6);
  EXPECT_EQ(s.stages[1].last_layer, 12);
  EXPECT_EQ(s.stages[2].last_layer, 19);
  EXPECT_EQ(s.stages[3].first_layer, 20);
  EXPECT_EQ(s.stages[3].last_layer, 25);
  // Lines every 5 iterations: the first (iterations 1-5) holds the warm-up; 7 kept, sorted
  // 202.2 202.8 203.7 204.4 205.5 207.2 207.9.
  EXPECT_EQ(m.iteration_s->count, 7);
  EXPECT_NEAR(m.iteration_s->median, 0.2044, 1e-12);
  ASSERT_EQ(m.peak_memory_bytes.size(), 4u);  // ranks 0, 2, 4, 6 = stages 0-3
  EXPECT_DOUBLE_EQ(m.peak_memory_bytes[2], 2499.25 * kMiB);
  EXPECT_NE(m.notes.find("log interval of 5"), std::string::npos);
}

TEST(MegatronLog, ReservedMemoryAndFullRecompute) {
  LogImportOptions o;
  o.memory_kind = "reserved";
  const Measurement m = megatron("gpt2-medium_tp4_dp2_full.log", o);
  const Strategy s = strategy_of(m);
  EXPECT_EQ(s.tp, 4);
  EXPECT_EQ(s.recompute, Recompute::kFull);
  EXPECT_TRUE(s.stages.empty());
  EXPECT_NEAR(m.iteration_s->median, 0.2498, 1e-12);
  EXPECT_EQ(m.peak_memory_bytes, std::vector<double>{2530.0 * kMiB});
  EXPECT_EQ(m.peak_memory_kind, "reserved");
  EXPECT_TRUE(m.notes.empty()) << m.notes;  // recompute_method uniform, 1 layer: exact
}

// QA: gradient_accumulation_fusion False in the arguments block was recorded as true.
TEST(MegatronLog, GradientAccumulationFusionAsTheArgumentsSay) {
  const std::string path = kData + "/megatron/gpt2-medium_tp2_pp2_dp2.log";
  const std::string text = logs::read_text_file(path);
  EXPECT_TRUE(strategy_of(megatron("gpt2-medium_tp2_pp2_dp2.log")).grad_accumulation_fusion);
  auto with = [&](const std::string& line) {
    std::string t = text;
    const std::string arg = "  gradient_accumulation_fusion .................... True\n";
    t.replace(t.find(arg), arg.size(), line);
    return megatron_measurement(parse_megatron_log(t, "g.log"), "g.log", {});
  };
  const Measurement off = with("  gradient_accumulation_fusion .................... False\n");
  EXPECT_FALSE(strategy_of(off).grad_accumulation_fusion);
  EXPECT_EQ(off.strategy["grad_accumulation_fusion"], false);
  EXPECT_TRUE(off.assumed.empty());
  // Not printed (Megatron-LM before 2022, or a trimmed log): Megatron-LM's default, with a note.
  const Measurement unsaid = with("");
  EXPECT_TRUE(strategy_of(unsaid).grad_accumulation_fusion);
  EXPECT_EQ(unsaid.notes,
            "the arguments block does not print gradient_accumulation_fusion: recorded as true, "
            "Megatron-LM's default (versions before 2022 had no such fusion: false)");
  EXPECT_EQ(unsaid.assumed, std::vector<std::string>{"strategy.grad_accumulation_fusion"});
  // The file says so, and reads back (the reader checks that the key exists).
  const Json written = to_json(unsaid);
  EXPECT_EQ(written["assumed"], Json::parse(R"(["strategy.grad_accumulation_fusion"])"));
  EXPECT_EQ(measurement_from_json(ObjectReader(written, "m.json")).assumed, unsaid.assumed);
  EXPECT_NE(error_of([&] {
              with("  gradient_accumulation_fusion .................... yes\n");
            }).find("arguments.gradient_accumulation_fusion: expected True or False"),
            std::string::npos);
}

// --overlap-grad-reduce is off by default, and older versions do not have it: a log of dp > 1 that
// does not print it reduced the gradients after the backward, which is recorded as assumed.
TEST(MegatronLog, GradientReductionOverlapAsTheArgumentsSay) {
  const std::string text = logs::read_text_file(kData + "/megatron/gpt2-medium_tp2_pp2_dp2.log");
  auto with = [&](const std::string& line) {
    std::string t = text;
    const std::string arg = "  overlap_grad_reduce ............................. True\n";
    t.replace(t.find(arg), arg.size(), line);
    return megatron_measurement(parse_megatron_log(t, "g.log"), "g.log", {});
  };
  EXPECT_TRUE(strategy_of(megatron("gpt2-medium_tp2_pp2_dp2.log")).overlap_grad_reduce);
  const Measurement off = with("  overlap_grad_reduce ............................. False\n");
  EXPECT_FALSE(strategy_of(off).overlap_grad_reduce);
  EXPECT_EQ(off.strategy["overlap_grad_reduce"], false);
  EXPECT_TRUE(off.assumed.empty());
  const Measurement unsaid = with("");
  EXPECT_FALSE(strategy_of(unsaid).overlap_grad_reduce);
  EXPECT_EQ(unsaid.assumed, std::vector<std::string>{"strategy.overlap_grad_reduce"});
}

TEST(MegatronLog, OutOfMemoryRun) {
  const Measurement m = megatron("gpt2-medium_dp8_mb32_oom.log");
  EXPECT_TRUE(m.oom);
  EXPECT_FALSE(m.iteration_s.has_value());
  EXPECT_EQ(strategy_of(m).micro_batch, 32);
  EXPECT_NE(m.origin.find("gpt2-medium_dp8_mb32_oom.log:"), std::string::npos);
}

TEST(MegatronLog, ChecksTheModelShape) {
  LogImportOptions o;
  o.model = "gpt3-1.3b";
  const std::string e = error_of([&] { megatron("gpt2-medium_tp2_pp2_dp2.log", o); });
  EXPECT_NE(e.find("gpt2-medium_tp2_pp2_dp2.log:2: the log trains a different model than "
                   "gpt3-1.3b"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("hidden 1024 (model 2048)"), std::string::npos) << e;
}

const char* kArgs = R"(------------------------ arguments ------------------------
  global_batch_size ............................... 8
  hidden_size ..................................... 64
  micro_batch_size ................................ 2
  num_attention_heads ............................. 4
  num_layers ...................................... 2
  pipeline_model_parallel_size .................... 1
  seq_length ...................................... 128
  tensor_model_parallel_size ...................... 1
  world_size ...................................... 4
-------------------- end of arguments ---------------------
)";

std::string parse_error(const std::string& text) {
  return error_of([&] {
    const MegatronLog log = parse_megatron_log(text, "x.log");
    megatron_measurement(log, "x.log", {});
  });
}

TEST(MegatronLog, MalformedLinesNameFileAndLine) {
  const std::string args = kArgs;
  const std::string line = " iteration        3/      10 | consumed samples: 24 | ";
  EXPECT_EQ(parse_error(args + line +
                        "elapsed time per iteration (ms): fast | global batch "
                        "size:     8 |\n"),
            "x.log:12: \"elapsed time per iteration (ms)\": expected a number, found \"fast\"");
  EXPECT_EQ(parse_error(args + line + "learning rate: 1.0E-04 |\n"),
            "x.log:12: expected a \"elapsed time per iteration (ms): <number>\" field");
  EXPECT_EQ(parse_error(args + "[Rank 0] (after 3 iterations) memory (MB) | allocated: 1.0 | max "
                               "allocated: 2.0 | reserved: 3.0\n"),
            "x.log:12: expected a \"max reserved: <number>\" field");
  EXPECT_EQ(parse_error(args + line + "elapsed time per iteration (ms): 5.0 |\n" +
                        " iteration        2/      10 | elapsed time per iteration (ms): 5.0 |\n"),
            "x.log:13: iteration 2 follows iteration 3: give one run per log (a restarted run "
            "goes in its own file)");
  // 22 digits: past int64_t, which std::stoll reported as "stoll" (scripts/fuzz_inputs.py).
  EXPECT_EQ(parse_error(args + " iteration 9999999999999999999999/      10 | "
                               "elapsed time per iteration (ms): 5.0 |\n"),
            "x.log:12: iteration: expected a whole number within +-9.2e18, found "
            "\"9999999999999999999999\"");
  const std::string args_start = args.substr(0, args.find("num_attention_heads"));
  EXPECT_EQ(parse_error(args_start),
            "x.log:1: the arguments block has no \"end of arguments\" line");
  std::string bad_tp = args;
  bad_tp.replace(bad_tp.find("tensor_model_parallel_size ...................... 1"), 51,
                 "tensor_model_parallel_size ...................... two");
  EXPECT_EQ(parse_error(bad_tp + line + "elapsed time per iteration (ms): 5.0 |\n"),
            "x.log:1: arguments.tensor_model_parallel_size: expected a whole number, found "
            "\"two\"");
  EXPECT_EQ(parse_error(line + "elapsed time per iteration (ms): 5.0 |\n"),
            "x.log: no Megatron-LM arguments block (\"---- arguments ----\"), so the strategy is "
            "unknown: import rank 0's output");
  // Two warm-up iterations and nothing after them.
  EXPECT_NE(parse_error(args + line + "elapsed time per iteration (ms): 5.0 |\n")
                .find("no iteration lines after the 2 warm-up iterations"),
            std::string::npos);
}

// An arguments block that prints only the sizes (an older Megatron-LM, or a trimmed log): every
// strategy value read from an unprinted key is Megatron-LM's default, and recorded as assumed.
TEST(MegatronLog, UnprintedArgumentsAreRecordedAsAssumed) {
  std::string args = kArgs;
  args.erase(args.find("  global_batch_size"), args.find("  hidden_size") - args.find("  global"));
  args.replace(args.find("pipeline_model_parallel_size .................... 1"), 51,
               "pipeline_model_parallel_size .................... 2");
  args.replace(args.find("tensor_model_parallel_size ...................... 1"), 51,
               "tensor_model_parallel_size ...................... 2");
  std::string text = args;
  for (int i = 1; i <= 3; ++i)
    text += fmt::format(" iteration {:8d}/      10 | elapsed time per iteration (ms): 5.0 |\n", i);
  const Measurement m = megatron_measurement(parse_megatron_log(text, "a.log"), "a.log", {});
  EXPECT_EQ(m.assumed, (std::vector<std::string>{
                           "strategy.global_batch", "strategy.sequence_parallel", "strategy.zero",
                           "strategy.recompute", "strategy.grad_accumulation_fusion",
                           "strategy.flash_attention", "strategy.schedule", "strategy.chunks"}));
  const Strategy s = strategy_of(m);
  EXPECT_EQ(s.dp, 1);            // world 4 / (tp 2 x pp 2)
  EXPECT_EQ(s.global_batch, 2);  // micro-batch 2 x dp 1, as Megatron-LM's validate_args sets it
  EXPECT_FALSE(s.sequence_parallel);
  EXPECT_EQ(s.zero, 0);
  EXPECT_EQ(s.recompute, Recompute::kNone);
  EXPECT_TRUE(s.grad_accumulation_fusion);
  EXPECT_TRUE(s.flash_attention);
  EXPECT_EQ(s.schedule, "1f1b");
  EXPECT_EQ(s.chunks, 1);
  // Printed as None or False, they are what the run used: nothing is assumed.
  std::string printed = args;
  printed.insert(printed.find("  hidden_size"),
                 "  attention_backend ............................... AttnBackend.auto\n"
                 "  global_batch_size ............................... 8\n"
                 "  gradient_accumulation_fusion .................... False\n");
  printed.insert(printed.find("  seq_length"),
                 "  recompute_granularity ........................... None\n"
                 "  sequence_parallel ............................... False\n");
  printed.insert(printed.find("  world_size"),
                 "  use_distributed_optimizer ....................... False\n"
                 "  virtual_pipeline_model_parallel_size ............ None\n");
  text = printed;
  for (int i = 1; i <= 3; ++i)
    text += fmt::format(" iteration {:8d}/      10 | elapsed time per iteration (ms): 5.0 |\n", i);
  const Measurement read = megatron_measurement(parse_megatron_log(text, "a.log"), "a.log", {});
  EXPECT_TRUE(read.assumed.empty()) << fmt::format("{}", fmt::join(read.assumed, ", "));
  EXPECT_EQ(strategy_of(read).global_batch, 8);
}

// The arguments coverage found untried: the interleaved schedule from the virtual stage size,
// refusals of what hetplan does not model, and the lines of another global batch size (a ramp-up)
// left out with a note.
TEST(MegatronLog, InterleavedSchedulesAndUnmodelledArguments) {
  const std::string text = logs::read_text_file(kData + "/megatron/gpt2-medium_tp2_pp2_dp2.log");
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? t : t.replace(at, from.size(), to);
  };
  const auto import = [](const std::string& t) {
    LogImportOptions o;
    o.model = "gpt2-medium";
    return megatron_measurement(parse_megatron_log(t, "m.log"), "m.log", o);
  };
  // 6 blocks per virtual stage, 24 blocks on 2 pipeline ranks: 2 virtual stages on each.
  const std::string virtual_stage = "num_layers_per_virtual_pipeline_stage ........... ";
  const Measurement m = import(with(virtual_stage + "None", virtual_stage + "6"));
  const Strategy s = strategy_of(m);
  EXPECT_EQ(s.schedule, "interleaved");
  EXPECT_EQ(s.chunks, 2);
  EXPECT_TRUE(s.stages.empty());  // Megatron-LM's interleaved split is its own
  EXPECT_EQ(std::count(m.assumed.begin(), m.assumed.end(), "strategy.chunks"), 0);

  EXPECT_EQ(error_of([&] {
              import(with("context_parallel_size ........................... 1",
                          "context_parallel_size ........................... 2"));
            }),
            "m.log:2: arguments.context_parallel_size: context parallelism is not modelled by "
            "hetplan");
  EXPECT_EQ(error_of([&] {
              import(with("recompute_granularity ........................... selective",
                          "recompute_granularity ........................... partial"));
            }),
            "m.log:2: arguments.recompute_granularity: expected None, selective or full, found "
            "\"partial\"");
  // Megatron-LM's FSDP: its sharding strategy is the ZeRO stage (optim_grads_params: 3).
  const std::string cp = "context_parallel_size ........................... 1";
  for (const auto& [sharding, zero] : std::vector<std::pair<std::string, int64_t>>{
           {"optim", 1}, {"optim_grads", 2}, {"optim_grads_params", 3}}) {
    const Measurement fsdp =
        import(with(cp, cp +
                            "\n  use_megatron_fsdp ............................... True"
                            "\n  data_parallel_sharding_strategy ................. " +
                            sharding));
    EXPECT_EQ(strategy_of(fsdp).zero, zero) << sharding;
    // Stated by the FSDP arguments, not assumed from the distributed optimizer's default.
    EXPECT_EQ(std::count(fsdp.assumed.begin(), fsdp.assumed.end(), "strategy.zero"), 0);
  }
  // A ramp-up: an iteration after the warm-up ran at another global batch size.
  const Measurement ramp = import(with("global batch size:    64 | lm loss: 1.075000E+01",
                                       "global batch size:    32 | lm loss: 1.075000E+01"));
  EXPECT_NE(
      ramp.notes.find("1 iteration line(s) of another global batch size (a ramp-up) left out"),
      std::string::npos)
      << ramp.notes;
  EXPECT_EQ(ramp.iteration_s->count, import(text).iteration_s->count - 1);
}

TEST(MegatronLog, StripsLauncherPrefixes) {
  std::string text;
  for (const auto& l : logs::split_lines(kArgs)) text += "[default0]:" + std::string(l.text) + "\n";
  for (int i = 1; i <= 4; ++i)
    text += fmt::format("0:  iteration {:8d}/      10 | elapsed time per iteration (ms): {}.0 |\n",
                        i, 10 * i);
  const Measurement m = megatron_measurement(parse_megatron_log(text, "p.log"), "p.log", {});
  EXPECT_EQ(strategy_of(m).dp, 4);     // world 4 / (tp 1 x pp 1)
  EXPECT_EQ(m.iteration_s->count, 2);  // iterations 3 and 4
  EXPECT_DOUBLE_EQ(m.iteration_s->median, 0.035);
}

TEST(MegatronLog, MemoryStagesFollowTheRankOrder) {
  // tp 1, pp 2, dp 2. Default order: rank = tp + dp + 2 pp, so rank 2 is stage 1; with
  // --use-tp-pp-dp-mapping rank = tp + pp + 2 dp, so rank 1 is stage 1.
  auto log_with = [](bool tp_pp_dp) {
    std::string args = kArgs;
    args.replace(args.find("pipeline_model_parallel_size .................... 1"), 51,
                 "pipeline_model_parallel_size .................... 2");
    if (tp_pp_dp)
      args.insert(args.find("  world_size"),
                  "  use_tp_pp_dp_mapping ............................ True\n");
    std::string text = args;
    for (int i = 1; i <= 3; ++i)
      text +=
          fmt::format(" iteration {:8d}/      10 | elapsed time per iteration (ms): 5.0 |\n", i);
    for (int rank : {0, 1, 2})
      text += fmt::format(
          "[Rank {}] (after 1 iterations) memory (MB) | allocated: 1.0 | max "
          "allocated: {}.0 | reserved: 9.0 | max reserved: 9.0\n",
          rank, 10 * (rank + 1));
    return megatron_measurement(parse_megatron_log(text, "r.log"), "r.log", {});
  };
  EXPECT_EQ(log_with(false).peak_memory_bytes, (std::vector<double>{20 * kMiB, 30 * kMiB}));
  EXPECT_EQ(log_with(true).peak_memory_bytes, (std::vector<double>{30 * kMiB, 20 * kMiB}));
}

TEST(DeepSpeedLog, PipelineEngineStepsConfigAndMemory) {
  LogImportOptions o;
  o.model = "gpt2-medium";
  const Measurement m = deepspeed("gpt2-medium_pp2_dp4_zero1.log", o);
  EXPECT_EQ(m.source, "imported:deepspeed");
  const Strategy s = strategy_of(m);
  EXPECT_EQ(s.pp, 2);  // RANK=0 STAGE=0 and RANK=4 STAGE=1
  EXPECT_EQ(s.micro_batch, 4);
  EXPECT_EQ(s.global_batch, 64);
  EXPECT_EQ(s.dp, 4);  // 64 / (4 x accumulation 4)
  EXPECT_EQ(s.zero, 1);
  // Steps 5..30 every 5: the first line (steps 1-5, 0.842 s) is warm-up; 5 kept around 0.163.
  EXPECT_EQ(m.iteration_s->count, 5);
  EXPECT_DOUBLE_EQ(m.iteration_s->median, 0.163);
  EXPECT_EQ(m.peak_memory_bytes, std::vector<double>{5.83 * kGiB});  // the larger Max_MA
  // DeepSpeed adds gradients with kernels of its own (the report matches on this).
  EXPECT_FALSE(s.grad_accumulation_fusion);
  EXPECT_EQ(m.strategy["grad_accumulation_fusion"], false);
  // The pipeline engine reduces the gradients after the flush, whatever overlap_comm says.
  EXPECT_FALSE(s.overlap_grad_reduce);
  // tp and pp come from the RANK=r STAGE=s lines; the log says nothing of recomputation or
  // attention kernels.
  EXPECT_EQ(m.assumed,
            (std::vector<std::string>{"strategy.recompute", "strategy.flash_attention"}));
}

// QA: --tp 2 was taken for a log whose RANK=4 STAGE=1 line says a stage holds dp 4 x tp 1 ranks.
TEST(DeepSpeedLog, TensorParallelWidthFromTheStagesFirstRanks) {
  const std::string path = kData + "/deepspeed/gpt2-medium_pp2_dp4_zero1.log";
  LogImportOptions o;
  o.model = "gpt2-medium";
  o.tp = 2;
  EXPECT_EQ(error_of([&] { deepspeed("gpt2-medium_pp2_dp4_zero1.log", o); }),
            path + ":3: RANK=4 STAGE=1: 4 ranks per stage = dp 4 x tp 1; --tp says tp 2");
  o.tp = 1;
  EXPECT_EQ(strategy_of(deepspeed("gpt2-medium_pp2_dp4_zero1.log", o)).tp, 1);
  // Stage 1 starting at rank 8 with dp 4: tp 2, read from the log without --tp.
  std::string text = logs::read_text_file(path);
  const std::string line4 = "RANK=4 STAGE=1";
  text.replace(text.find(line4), line4.size(), "RANK=8 STAGE=1");
  o.tp.reset();
  const Measurement m = deepspeed_measurement(parse_deepspeed_log(text, "t.log"), "t.log", o);
  EXPECT_EQ(strategy_of(m).tp, 2);
  text.replace(text.find("RANK=8 STAGE=1"), line4.size(), "RANK=6 STAGE=1");
  EXPECT_EQ(
      error_of([&] { deepspeed_measurement(parse_deepspeed_log(text, "t.log"), "t.log", o); }),
      "t.log:3: RANK=6 STAGE=1: stage 1 starts at rank 6, not a multiple of stage x dp = 1 "
      "x 4 (DeepSpeed numbers ranks stage, data, model)");
}

TEST(DeepSpeedLog, ThroughputTimerLines) {
  LogImportOptions o;
  o.model = "gpt2-medium";
  const Measurement m = deepspeed("gpt2-medium_dp8_zero2.log", o);
  const Strategy s = strategy_of(m);
  EXPECT_EQ(s.dp, 8);
  EXPECT_EQ(s.pp, 1);
  EXPECT_EQ(s.zero, 2);
  // Five lines at steps 5-25, each one step: 64 / CurrSamplesPerSec; median of the five.
  EXPECT_EQ(m.iteration_s->count, 5);
  EXPECT_DOUBLE_EQ(m.iteration_s->median, 64 / 529.670);  // CurrSamplesPerSec 529.670
  EXPECT_EQ(m.peak_memory_bytes, std::vector<double>{10.91 * kGiB});
  // Without pipeline stage lines or autotp the widths are defaults; the options say them.
  EXPECT_EQ(m.assumed, (std::vector<std::string>{"strategy.tp", "strategy.pp", "strategy.recompute",
                                                 "strategy.flash_attention"}));
  o.tp = 1;
  o.pp = 1;
  o.recompute = "none";
  EXPECT_EQ(deepspeed("gpt2-medium_dp8_zero2.log", o).assumed,
            std::vector<std::string>{"strategy.flash_attention"});
  // ZeRO-2 with "overlap_comm": true reduces during the backward; without the key, DeepSpeed's
  // default below stage 3 is off (deepspeed/runtime/zero/config.py), and that is assumed.
  EXPECT_TRUE(s.overlap_grad_reduce);
  {
    std::string text = logs::read_text_file(kData + "/deepspeed/gpt2-medium_dp8_zero2.log");
    const std::string key = "\"overlap_comm\": true,";
    text.replace(text.find(key), key.size(), "");
    const Measurement unsaid =
        deepspeed_measurement(parse_deepspeed_log(text, "z.log"), "z.log", o);
    EXPECT_FALSE(strategy_of(unsaid).overlap_grad_reduce);
    EXPECT_EQ(unsaid.assumed, (std::vector<std::string>{"strategy.overlap_grad_reduce",
                                                        "strategy.flash_attention"}));
    text.replace(text.find("\"stage\": 2"), 10, "\"stage\": 3");
    EXPECT_TRUE(strategy_of(deepspeed_measurement(parse_deepspeed_log(text, "z.log"), "z.log", o))
                    .overlap_grad_reduce);
    text.replace(text.find("\"stage\": 3"), 10, "\"overlap_comm\": 1, \"stage\": 3");
    EXPECT_EQ(
        error_of([&] { deepspeed_measurement(parse_deepspeed_log(text, "z.log"), "z.log", o); }),
        "z.log:17: zero_optimization.overlap_comm: expected true or false, found the number "
        "1");
  }
  // 10.91 GiB = 11714523299.84 bytes: written as the nearest whole byte.
  EXPECT_EQ(to_json(m)["peak_memory_bytes"], Json::parse("[11714523300]"));
}

// A config without gradient_accumulation_steps or a ZeRO stage: DeepSpeed's defaults, 1 and 0.
TEST(DeepSpeedLog, ConfigDefaultsAreRecordedAsAssumed) {
  const std::string text =
      "[x] [INFO] [config.py:991:print_user_config]   json = {\n"
      "    \"train_batch_size\": 16,\n"
      "    \"train_micro_batch_size_per_gpu\": 2\n}\n"
      "[x] steps: 5 loss: 1.0 iter time (s): 0.5 samples/sec: 32\n"
      "[x] steps: 10 loss: 1.0 iter time (s): 0.25 samples/sec: 64\n";
  LogImportOptions o;
  o.model = "gpt2-medium";
  o.tp = 1;
  o.pp = 1;
  o.recompute = "none";
  const Measurement m = deepspeed_measurement(parse_deepspeed_log(text, "c.log"), "c.log", o);
  EXPECT_EQ(m.assumed,
            (std::vector<std::string>{"strategy.dp", "strategy.zero", "strategy.flash_attention"}));
  const Strategy s = strategy_of(m);
  EXPECT_EQ(s.dp, 8);  // 16 / (2 x accumulation 1)
  EXPECT_EQ(s.zero, 0);
  EXPECT_FALSE(s.overlap_grad_reduce);  // ZeRO-0 all-reduces after the backward
}

TEST(DeepSpeedLog, MalformedLinesAndMissingModel) {
  auto error = [](const std::string& text, const std::string& model) {
    return error_of([&] {
      LogImportOptions o;
      o.model = model;
      deepspeed_measurement(parse_deepspeed_log(text, "d.log"), "d.log", o);
    });
  };
  const std::string config =
      "[x] [INFO] [config.py:991:print_user_config]   json = {\n"
      "    \"train_batch_size\": 16,\n"
      "    \"train_micro_batch_size_per_gpu\": 2\n}\n";
  EXPECT_EQ(
      error(config + "[x] steps: 10 loss: 1.0 iter time (s): slow samples/sec: 3\n", "gpt2-medium"),
      "d.log:5: iter time (s): expected a number, found \"slow\"");
  EXPECT_EQ(error(config + "[x] steps: 10 iter time (s): 1.0\n", "gpt2-medium"),
            "d.log:5: expected \"steps: N loss: L iter time (s): T samples/sec: S\"");
  EXPECT_EQ(error("[x] [INFO] [config.py:991:print_user_config]   json = {\n  \"a\": 1,,\n}\n",
                  "gpt2-medium")
                .find("d.log:1: malformed config JSON: "),
            0u);
  // A number past a double is nlohmann's out_of_range, which escaped as "internal error".
  EXPECT_EQ(error("[x] [INFO] [config.py:991:print_user_config]   json = {\n  \"a\": 1e400\n}\n",
                  "gpt2-medium"),
            "d.log:1: malformed config JSON: number overflow parsing '1e400'");
  EXPECT_EQ(error(config + "[x] steps: 99999999999999999999 loss: 1.0 iter time (s): 1.0 "
                           "samples/sec: 3\n",
                  "gpt2-medium"),
            "d.log:5: steps: expected a whole number within +-9.2e18, found "
            "\"99999999999999999999\"");
  EXPECT_EQ(error(config + "[x] MA 1.0 GB Max_MA lots GB\n", "gpt2-medium"),
            "d.log:5: expected \"MA x GB Max_MA y GB CA z GB Max_CA w GB\"");
  EXPECT_EQ(error(config, ""), "d.log: the log does not describe the model: give --model");
  EXPECT_EQ(error("[x] steps: 10 loss: 1.0 iter time (s): 1.0 samples/sec: 3\n", "gpt2-medium"),
            "d.log: no DeepSpeed config print (\"DeepSpeedEngine configuration\" and its "
            "\"json = {...}\"): the batch sizes are unknown");
}

// The refusals and records coverage found untried: every one names the log (and line) and what
// it expected, and a run that ran out of memory is recorded as such.
TEST(DeepSpeedLog, InconsistentLogsAndOptionsAreRefusedAndOutOfMemoryIsRecorded) {
  const std::string config =
      "[x] [INFO] [config.py:991:print_user_config]   json = {\n"
      "    \"train_batch_size\": 16,\n"
      "    \"train_micro_batch_size_per_gpu\": 2\n}\n";  // lines 1-4
  const std::string step10 = "[x] steps: 10 loss: 1.0 iter time (s): 0.5 samples/sec: 32\n";
  const std::string timer =
      "[x] [INFO] [timer.py:264:stop] epoch=0/micro_step=5/global_step=5, "
      "RunningAvgSamplesPerSec=30, CurrSamplesPerSec={}, MemAllocated=2GB, "
      "MaxMemAllocated=3GB\n";
  const auto error = [](const std::string& text, LogImportOptions o = {}) {
    if (o.model.empty()) o.model = "gpt2-medium";
    return error_of([&] { deepspeed_measurement(parse_deepspeed_log(text, "d.log"), "d.log", o); });
  };
  EXPECT_EQ(error(config + "[x] steps: 10 loss: 1.0 iter time (s): 0 samples/sec: 3\n"),
            "d.log:5: iter time: expected a time > 0, found 0");
  EXPECT_EQ(error(config + step10 + step10),
            "d.log:6: step 10 follows step 10: give one run per log");
  EXPECT_EQ(error(config + fmt::format(fmt::runtime(timer), "0")),
            "d.log:5: CurrSamplesPerSec: expected > 0, found 0");
  EXPECT_EQ(
      error(config + fmt::format(fmt::runtime(timer), 30) + fmt::format(fmt::runtime(timer), 31)),
      "d.log:6: step 5 follows step 5: give one run per log");
  EXPECT_EQ(error(config + "[x] CurrSamplesPerSec=30\n"),
            "d.log:5: expected \"global_step=N, RunningAvgSamplesPerSec=x, CurrSamplesPerSec=y\"");
  EXPECT_EQ(error(config + config),
            "d.log:5: a second config block (the first is at line 1): give "
            "one run per log");
  // "auto" leaves a value to DeepSpeed at run time, which the log's config print then lacks.
  EXPECT_EQ(error("[x] [INFO] [config.py:991:print_user_config]   json = {\n"
                  "  \"train_batch_size\": 16, \"train_micro_batch_size_per_gpu\": \"auto\"\n}\n" +
                  step10),
            "d.log: the config gives no train_micro_batch_size_per_gpu and train_batch_size");
  EXPECT_EQ(
      error("[x] [INFO] [config.py:991:print_user_config]   json = {\n"
            "  \"train_batch_size\": 16, \"train_micro_batch_size_per_gpu\": 2.5\n}\n" +
            step10),
      "d.log:1: train_micro_batch_size_per_gpu: expected a whole number, found the number 2.5");
  LogImportOptions tp4;
  tp4.tp = 4;
  EXPECT_EQ(error("[x] [INFO] [config.py:991:print_user_config]   json = {\n"
                  "  \"train_batch_size\": 16, \"train_micro_batch_size_per_gpu\": 2,\n"
                  "  \"tensor_parallel\": {\"autotp_size\": 2}\n}\n" +
                      step10,
                  tp4),
            "d.log: tensor_parallel.autotp_size: the log says 2, --tp says 4");
  LogImportOptions bad_recompute;
  bad_recompute.recompute = "some";
  EXPECT_EQ(error(config + step10, bad_recompute),
            "--recompute: expected none, selective or full, found \"some\"");

  // Out of memory after the config: the measurement says so, at its line.
  LogImportOptions o;
  o.model = "gpt2-medium";
  const std::string oom =
      config + "[x] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n";
  const Measurement m = deepspeed_measurement(parse_deepspeed_log(oom, "d.log"), "d.log", o);
  EXPECT_TRUE(m.oom);
  EXPECT_FALSE(m.iteration_s.has_value());
  // An activation_checkpointing section that does not say which layers: noted, recorded as none.
  const std::string checkpointing =
      "[x] [INFO] [config.py:991:print_user_config]   json = {\n"
      "  \"train_batch_size\": 16, \"train_micro_batch_size_per_gpu\": 2,\n"
      "  \"activation_checkpointing\": {\"partition_activations\": true}\n}\n" +
      step10 + "[x] steps: 20 loss: 1.0 iter time (s): 0.5 samples/sec: 32\n";
  const Measurement c =
      deepspeed_measurement(parse_deepspeed_log(checkpointing, "d.log"), "d.log", o);
  EXPECT_EQ(strategy_of(c).recompute, Recompute::kNone);
  EXPECT_NE(c.notes.find("the config has an activation_checkpointing section"), std::string::npos)
      << c.notes;
}

}  // namespace
}  // namespace hetplan
