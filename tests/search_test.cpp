#include "search/search.h"

#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/cost_model.h"
#include "partition_test_util.h"
#include "search/partition.h"
#include "tests/framework_fixture.h"

namespace hetplan {
namespace {

struct Problem {
  ModelSpec model;
  ClusterSpec cluster;
  CostModel cost;
  Evaluator ev;
  Problem(const std::string& m, const std::string& c)
      : model(load_model(m)),
        cluster(load_cluster(c)),
        cost(load_profile_inputs({default_calibration_dir().string()}), cluster),
        ev(model, cluster, cost, testing::fixture_framework()) {}
};

SearchOptions options(int64_t batch, int64_t top = 5) {
  SearchOptions o;
  o.global_batch = batch;
  o.top_k = top;
  return o;
}

int64_t layers_of(const StagePrediction& st) {
  return st.stage.last_layer - st.stage.first_layer + 1;
}

TEST(Search, HeterogeneousClusterGivesTheT4StagesFewerLayers) {
  Problem s("gpt2-medium", "p3.8xlarge:3,g4dn.12xlarge:1");
  const SearchResult r = search_training(s.ev, options(32));
  ASSERT_FALSE(r.top.empty());
  const Prediction& best = r.top.front().predicted;
  // Layers per pipeline rank (a device group may hold several virtual stages).
  std::map<std::vector<int64_t>, std::pair<std::string, int64_t>> per_rank;
  for (const auto& st : best.stages) {
    auto& [type, layers] = per_rank[st.stage.devices];
    type = st.stage.gpu_type;
    layers += layers_of(st);
  }
  int64_t min_v100 = 1 << 30, max_t4 = 0;
  for (const auto& [devices, rank] : per_rank) {
    if (rank.first == "v100") min_v100 = std::min(min_v100, rank.second);
    if (rank.first == "t4") max_t4 = std::max(max_t4, rank.second);
  }
  ASSERT_GT(max_t4, 0) << "the best strategy should use the T4 node";
  EXPECT_GT(min_v100, max_t4);
}

TEST(Search, LargeModelOnNvSwitchNodesKeepsTensorParallelismInsideANode) {
  // Megatron-LM trains GPT-3 175B with tensor parallelism 8 inside DGX A100 nodes and pipeline
  // parallelism across them (Narayanan et al. 2021, Table 1).
  Problem s("gpt3-175b", "p4d.24xlarge:16");
  SearchOptions o = options(256, 3);
  o.tensor_widths = {1, 2, 4, 8, 16, 32};
  const SearchResult r = search_training(s.ev, o);
  ASSERT_FALSE(r.top.empty());
  const Strategy& best = r.top.front().strategy;
  EXPECT_EQ(best.tp, 8);
  EXPECT_GT(best.pp, 1);
  for (const auto& t : r.top) EXPECT_LE(t.strategy.tp, 8);
}

TEST(Search, PrunedAndExhaustiveSearchAgreeOnSmallProblems) {
  for (const char* cluster : {"g4dn.12xlarge:2", "p3.8xlarge:3,g4dn.12xlarge:1"}) {
    SCOPED_TRACE(cluster);
    Problem s("gpt2-medium", cluster);
    SearchOptions pruned = options(16, 3);
    SearchOptions exhaustive = pruned;
    exhaustive.exhaustive = true;
    const SearchResult a = search_training(s.ev, pruned);
    const SearchResult b = search_training(s.ev, exhaustive);
    ASSERT_EQ(a.top.size(), b.top.size());
    for (size_t i = 0; i < a.top.size(); ++i) {
      EXPECT_EQ(to_json(a.top[i].strategy), to_json(b.top[i].strategy));
      EXPECT_DOUBLE_EQ(a.top[i].predicted.iteration_s, b.top[i].predicted.iteration_s);
    }
    EXPECT_LE(a.stats.evaluated, b.stats.evaluated);
    EXPECT_EQ(b.stats.pruned.count("time_bound"), 0u);
  }
  Problem s("gpt2-medium", "g4dn.12xlarge:4");
  SearchOptions exhaustive = options(32, 3);
  exhaustive.exhaustive = true;
  EXPECT_LT(search_training(s.ev, options(32, 3)).stats.evaluated,
            search_training(s.ev, exhaustive).stats.evaluated);  // the bound does prune
}

TEST(Search, TensorGroupsOfEightOnFourGpuNodesListedFirst) {
  // The node kinds' sizes differ: a tp-8 group spans two 4-GPU g4dn nodes but one p4d node. With
  // the 4-GPU kind listed first the lower bound once laid the p4d group over two p4d nodes (of
  // one) and read past the device list.
  Problem s("gpt2-medium", "g4dn.12xlarge:2,p4d.24xlarge:1");
  SearchOptions o = options(64, 3);
  o.tensor_widths = {8};
  const SearchResult r = search_training(s.ev, o);
  ASSERT_FALSE(r.top.empty());
  for (const auto& t : r.top) {
    EXPECT_EQ(t.strategy.tp, 8);
    // Each pipeline rank's tp group stays on one node kind: the 8 GPUs of the two g4dn nodes
    // (devices 0-7) or the p4d's (8-15).
    for (const auto& st : t.predicted.stages) {
      const auto [lo, hi] = std::minmax_element(st.stage.devices.begin(), st.stage.devices.end());
      EXPECT_TRUE(*hi < 8 || *lo >= 8) << st.stage.gpu_type;
    }
  }
}

TEST(Search, OneStageIsGradientAccumulationNotGpipe) {
  // With pp 1 the search tries one schedule for all. GPipe keeps every micro-batch's activations;
  // 1F1B, which is plain gradient accumulation at pp 1, keeps one. GPT-3 1.3B with micro-batch 8
  // (m = 2 per replica at dp 16) fits a 40 GB A100 only the latter way.
  Problem s("gpt3-1.3b", "p4d.24xlarge:2");
  const SearchResult r = search_training(s.ev, options(256, 3));
  ASSERT_FALSE(r.top.empty());
  const Strategy& best = r.top.front().strategy;
  EXPECT_EQ(best.pp, 1);  // it was dp 8 pp 2 (zb-h2), 5% slower, before
  EXPECT_EQ(best.schedule, "1f1b");
  EXPECT_EQ(best.dp, 16);
  EXPECT_EQ(best.micro_batch, 8);

  Strategy gpipe = best;
  gpipe.schedule = "gpipe";
  gpipe.stages.clear();
  const Prediction p = s.ev.predict(gpipe);
  EXPECT_FALSE(p.feasible);  // 2 micro-batches of activations do not fit
  gpipe.schedule = "1f1b";
  EXPECT_DOUBLE_EQ(s.ev.predict(gpipe).iteration_s, r.top.front().predicted.iteration_s);
}

TEST(Search, SameResultForAnyThreadCount) {
  Problem s("gpt2-medium", "g4dn.12xlarge:4");
  SearchOptions one = options(32, 8);
  SearchOptions two = one;
  two.threads = 2;
  const SearchResult a = search_training(s.ev, one);
  const SearchResult b = search_training(s.ev, two);
  ASSERT_EQ(a.top.size(), b.top.size());
  for (size_t i = 0; i < a.top.size(); ++i)
    EXPECT_EQ(to_json(a.top[i].strategy), to_json(b.top[i].strategy));
  EXPECT_EQ(a.stats.evaluated, b.stats.evaluated);
  EXPECT_EQ(a.stats.pruned, b.stats.pruned);
}

// Interleaved runs its own 2 chunks per device, and every count up to 8 that splits GPT-2
// medium's 24 blocks evenly over pp x chunks, or its 26 layers with the embedding and loss
// counted: at pp 2 3, 4 and 6 (not 12 and 13, past the cap); at pp 4 3 and 6; at pp 8 3.
TEST(Search, InterleavedTriesEveryChunkCountThatSplitsTheBlocksEvenly) {
  Problem s("gpt2-medium", "g4dn.12xlarge:4");
  SearchOptions o = options(64, 1000);
  o.schedules = {"interleaved"};
  o.micro_batches = {1};
  o.tensor_widths = {1};
  o.recompute = {Recompute::kNone};
  o.max_zero = 0;
  o.exhaustive = true;
  const SearchResult r = search_training(s.ev, o);
  std::map<int64_t, std::set<int64_t>> chunks;  // pp -> chunks per device
  for (const auto& t : r.top)
    if (t.strategy.pp > 1) chunks[t.strategy.pp].insert(t.strategy.chunks);
  EXPECT_EQ(chunks[2], (std::set<int64_t>{2, 3, 4, 6}));
  EXPECT_EQ(chunks[4], (std::set<int64_t>{2, 3, 6}));
  EXPECT_EQ(chunks[8], (std::set<int64_t>{2, 3}));
}

TEST(Search, CountsEveryCandidateOnce) {
  Problem s("gpt2-medium", "g4dn.12xlarge:4");
  const SearchResult r = search_training(s.ev, options(32));
  int64_t pruned = 0;
  for (const auto& [reason, n] : r.stats.pruned) pruned += n;
  EXPECT_EQ(pruned + r.stats.evaluated, r.stats.candidates);
  int64_t infeasible = 0;
  for (const auto& [reason, n] : r.stats.infeasible) infeasible += n;
  EXPECT_EQ(infeasible + r.stats.feasible, r.stats.evaluated);
}

// A clock that moves one second each time the search reads it: the search reads it at the start,
// once per shape it enumerates, once per 64 lower bounds and once per batch of 64 candidates it
// costs, and once more for its elapsed time, so a limit of N seconds stops it after N such reads,
// whatever the machine's speed: three reads short of the whole search's, before its last two
// batches.
TEST(Search, TimeLimitReturnsTheBestCostedSoFarAndSaysSo) {
  Problem s("gpt2-medium", "g4dn.12xlarge:4");
  int64_t reads = 0;
  SearchOptions counted = options(32, 3);
  counted.clock_s = [&reads] { return static_cast<double>(reads++); };
  counted.time_limit_s = 1e9;
  const SearchResult full = search_training(s.ev, counted);
  EXPECT_FALSE(full.stats.time_limit_reached);
  const int64_t all_reads = reads;
  // 16 GPUs: tp 1, 2, 4, 8 with pp dividing 16 / tp: 5 + 4 + 3 + 2 = 14 shapes, then the lower
  // bounds and more than two batches.
  ASSERT_GT(all_reads, 1 + 14 + 2);
  reads = 0;
  SearchOptions limited = counted;
  limited.time_limit_s = static_cast<double>(all_reads - 3);
  const SearchResult r = search_training(s.ev, limited);
  EXPECT_TRUE(r.stats.time_limit_reached);
  EXPECT_EQ(r.stats.time_limit_s, all_reads - 3);
  EXPECT_GT(r.stats.evaluated, 0);
  EXPECT_LT(r.stats.evaluated, full.stats.evaluated);
  ASSERT_FALSE(r.top.empty());
  // What it returns is costed as the full search costs it, and no better than the full search's
  // best; the candidates it left out are counted.
  EXPECT_GE(r.top.front().predicted.iteration_s, full.top.front().predicted.iteration_s);
  EXPECT_GT(r.stats.pruned.at("time_limit"), 0);
  int64_t pruned = 0;
  for (const auto& [reason, n] : r.stats.pruned) pruned += n;
  EXPECT_EQ(pruned + r.stats.evaluated, r.stats.candidates);
  EXPECT_EQ(to_json(r.stats)["time_limit_reached"], true);
  // A limit it does not reach changes nothing.
  SearchOptions generous = options(32, 3);
  generous.time_limit_s = 3600;
  const SearchResult same = search_training(s.ev, generous);
  EXPECT_FALSE(same.stats.time_limit_reached);
  EXPECT_EQ(to_json(same.top.front().strategy), to_json(full.top.front().strategy));
  EXPECT_EQ(same.stats.evaluated, full.stats.evaluated);
}

// One A100 node and two T4 nodes: the T4s slow every plan that uses them, so with idle nodes
// allowed the best plan runs on the A100 node alone, faster than any plan over all 16 GPUs.
TEST(Search, IdleNodesAllowedLeaveTheSlowKindOut) {
  Problem s("gpt2-medium", "p4d.24xlarge:1,g4dn.12xlarge:2");
  const SearchResult all = search_training(s.ev, options(32, 3));
  SearchOptions idle = options(32, 3);
  idle.allow_idle_nodes = true;
  const SearchResult some = search_training(s.ev, idle);
  ASSERT_FALSE(all.top.empty());
  ASSERT_FALSE(some.top.empty());
  EXPECT_EQ(all.top[0].strategy.devices(), 16);
  EXPECT_EQ(some.top[0].strategy.devices(), 8);
  for (const auto& st : some.top[0].predicted.stages) EXPECT_EQ(st.stage.gpu_type, "a100-40gb");
  EXPECT_LT(some.top[0].predicted.iteration_s, 0.9 * all.top[0].predicted.iteration_s);
  // The space holds the full-cluster plans too, and those of the A100 and the T4 nodes alone.
  EXPECT_GT(some.stats.candidates, all.stats.candidates);
  int64_t pruned = 0;
  for (const auto& [reason, n] : some.stats.pruned) pruned += n;
  EXPECT_EQ(pruned + some.stats.evaluated, some.stats.candidates);
  // The bound stays safe with subsets: the exhaustive search ranks the same.
  SearchOptions exhaustive = idle;
  exhaustive.exhaustive = true;
  const SearchResult every = search_training(s.ev, exhaustive);
  ASSERT_EQ(every.top.size(), some.top.size());
  for (size_t i = 0; i < some.top.size(); ++i)
    EXPECT_EQ(to_json(some.top[i].strategy), to_json(every.top[i].strategy));
}

TEST(Search, ModelThatFitsNowhereSaysWhy) {
  Problem s("llama2-70b", "g4dn.12xlarge:1");
  const SearchResult r = search_training(s.ev, options(8));
  EXPECT_TRUE(r.top.empty());
  EXPECT_GT(r.stats.pruned.at("memory_bound"), 0);
  // 68.98B parameters x 18 bytes over 4 GPUs with ZeRO-3 is still far above a T4's 14.76 GiB
  // (15,843,721,216 bytes with ECC on: presets/gpus/t4.yaml).
  EXPECT_NEAR(r.min_static_bytes, 68'976'648'192.0 * 18 / 4, 68'976'648'192.0 * 0.05);
  EXPECT_DOUBLE_EQ(r.static_limit_bytes, 15'843'721'216.0);
}

TEST(Partition, BisectionFindsTheDynamicProgramsSlowestStage) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> time(0.1, 3.0), mem(1, 10);
  for (int trial = 0; trial < 200; ++trial) {
    const int L = 5 + trial % 20, P = 1 + trial % 5;
    if (L < P) continue;
    PartitionInput in;
    for (int s = 0; s < P; ++s) {
      const double speed = 0.5 + (s % 3) * 0.5;  // unequal stages
      std::vector<double> t, st, act, tr;
      for (int i = 0; i < L; ++i) {
        t.push_back(time(rng) * speed);
        st.push_back(mem(rng));
        act.push_back(mem(rng) / 4);
        tr.push_back(mem(rng) / 8);
      }
      in.time_s.push_back(t);
      in.static_bytes.push_back(st);
      in.activation_bytes.push_back(act);
      in.transient_bytes.push_back(tr);
      in.in_flight.push_back(P - s);
      in.limit_bytes.push_back(trial % 2 ? 1e9 : 25.0 * L / P);
    }
    const PartitionResult dp = partition_layers(in);
    const PartitionResult greedy = partition_layers_greedy(in);
    ASSERT_EQ(dp.feasible, greedy.feasible) << "trial " << trial;
    if (!dp.feasible) continue;
    EXPECT_NEAR(greedy.max_stage_s, dp.max_stage_s, 2e-4 * dp.max_stage_s) << "trial " << trial;
    ASSERT_EQ(greedy.ranges.size(), static_cast<size_t>(P));
    EXPECT_EQ(greedy.ranges.front().first, 0);
    EXPECT_EQ(greedy.ranges.back().second, L - 1);
    for (int s = 0; s < P; ++s) {
      EXPECT_LE(greedy.ranges[s].first, greedy.ranges[s].second);
      if (s > 0) {
        EXPECT_EQ(greedy.ranges[s].first, greedy.ranges[s - 1].second + 1);
      }
    }
  }
}

// A V placement: 6 stages on 3 devices (0, 1, 2, 2, 1, 0); an embedding (0.5 s), 8 blocks (1 s
// each) and a head as slow as 3 blocks. Balancing stages alone gives [emb, 2 blocks], [3 blocks],
// then a block each and the head: device 0 runs 2.5 + 3 = 5.5 s, device 2 only 2. Balancing the
// devices too gives [emb], [3], [2], [2], [1], [head]: 3.5 / 4 / 4 s, the best whole layers allow
// (device 0 holds the head and the embedding; the 8 blocks split 4 / 4).
TEST(Partition, DeviceBalanceEvensTheDevicesOfAVPlacement) {
  const std::vector<double> t = {0.5, 1, 1, 1, 1, 1, 1, 1, 1, 3};
  const PartitionInput in = testing::same_on_every_stage(t, std::vector<double>(t.size(), 1), 6);
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  const PartitionResult stages = partition_layers_greedy(in);
  ASSERT_TRUE(stages.feasible);
  EXPECT_EQ(stages.ranges, (Ranges{{0, 2}, {3, 5}, {6, 6}, {7, 7}, {8, 8}, {9, 9}}));
  const std::vector<int64_t> device = {0, 1, 2, 2, 1, 0};
  const PartitionResult balanced = balance_device_loads(in, device, {}, stages);
  EXPECT_EQ(balanced.ranges, (Ranges{{0, 0}, {1, 3}, {4, 5}, {6, 7}, {8, 8}, {9, 9}}));
  EXPECT_DOUBLE_EQ(balanced.max_stage_s, 3);  // no stage slower than before
  // Device 2 may hold no more than the 2 layers it has: device 0 sheds to device 1 alone, down
  // to [emb, block], 4.5 s, with device 1 at 5 (layers 2-4 and 7-8).
  const PartitionResult limited = balance_device_loads(in, device, {1e9, 1e9, 2}, stages);
  EXPECT_EQ(limited.ranges, (Ranges{{0, 1}, {2, 4}, {5, 5}, {6, 6}, {7, 8}, {9, 9}}));
}

TEST(SearchCli, WritesTheContractJson) {
  const auto dir = testing::temp_dir("search");
  const auto out = (dir / "out.json").string();
  auto r = testing::run_hetplan(
      "search --model gpt2-medium --cluster g4dn.12xlarge:4 "
      "--global-batch 32 --top 4 --quiet --json " +
      out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Json j = load_document(out).root;
  ASSERT_EQ(j["strategies"].size(), 4u);
  for (const auto& s : j["strategies"]) {
    for (const char* key : {"dp", "tp", "pp", "micro_batch", "global_batch", "schedule",
                            "recompute", "zero", "sequence_parallel", "stages", "predicted"})
      EXPECT_TRUE(s.contains(key)) << key;
    for (const char* key : {"iteration_s", "samples_per_s", "tokens_per_s", "mfu",
                            "peak_memory_bytes", "feasible", "reason", "breakdown"})
      EXPECT_TRUE(s["predicted"].contains(key)) << key;
  }
  EXPECT_LE(j["strategies"][0]["predicted"]["iteration_s"].get<double>(),
            j["strategies"][1]["predicted"]["iteration_s"].get<double>());
  for (const char* key : {"candidates", "infeasible", "elapsed_s", "pruned_by_reason"})
    EXPECT_TRUE(j["stats"].contains(key)) << key;
  EXPECT_TRUE(j["strategies"][0]["predicted"]["peak_memory_bytes"][0].is_number_integer());
  EXPECT_EQ(testing::fractional_bytes(j), std::vector<std::string>{});
  EXPECT_GE(testing::byte_values(j), 4u * 8);  // each strategy: peaks and 7 parts per stage
  // The file is a valid strategy input for predict.
  r = testing::run_hetplan("predict --model gpt2-medium --cluster g4dn.12xlarge:4 --strategy " +
                           out);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::filesystem::remove_all(dir);
}

// The framework switches reach every strategy searched (and so predict, export and the report's
// matching); without them, hetplan's defaults.
TEST(SearchCli, FrameworkSwitchesAreInEveryStrategy) {
  const auto dir = testing::temp_dir("search_switches");
  const auto out = (dir / "out.json").string();
  const std::string common =
      "search --model gpt2-medium --cluster g4dn.12xlarge:2 --global-batch 32 --top 3 --quiet "
      "--schedules 1f1b --json " +
      out;
  for (const bool off : {false, true}) {
    SCOPED_TRACE(off ? "switched off" : "defaults");
    auto r = testing::run_hetplan(common + (off ? " --no-grad-accumulation-fusion "
                                                  "--no-flash-attention --no-overlap-grad-reduce"
                                                : ""));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const Json j = load_document(out).root;
    ASSERT_EQ(j["strategies"].size(), 3u);
    for (const auto& s : j["strategies"]) {
      EXPECT_EQ(s["grad_accumulation_fusion"], !off);
      EXPECT_EQ(s["flash_attention"], !off);
      EXPECT_EQ(s["overlap_grad_reduce"], !off);
    }
  }
  std::filesystem::remove_all(dir);
}

// The space can be narrowed to what a framework runs: Megatron-LM of 2021 had full recomputation
// and no sequence parallelism.
TEST(SearchCli, RecomputeAndSequenceParallelNarrowTheSpace) {
  const auto dir = testing::temp_dir("search_narrow");
  const auto out = (dir / "out.json").string();
  auto r = testing::run_hetplan(
      "search --model gpt2-medium --cluster p4d.24xlarge:1 --global-batch 32 --top 20 --quiet "
      "--schedules 1f1b --max-zero 0 --recompute full --no-sequence-parallel --json " +
      out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Json j = load_document(out).root;
  ASSERT_EQ(j["strategies"].size(), 20u);
  bool tensor_parallel = false;
  for (const auto& s : j["strategies"]) {
    EXPECT_EQ(s["recompute"], "full");
    EXPECT_EQ(s["sequence_parallel"], false);
    tensor_parallel |= s["tp"].get<int64_t>() > 1;
  }
  EXPECT_TRUE(tensor_parallel);  // sequence parallelism was left out, tensor parallelism not
  // Candidates: no sp doubling and one recompute mode of three.
  r = testing::run_hetplan(
      "search --model gpt2-medium --cluster p4d.24xlarge:1 --global-batch 32 --quiet "
      "--schedules 1f1b --max-zero 0 --recompute full,none --recompute full --json " +
      out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::set<std::string> modes;
  const Json both = load_document(out).root;
  for (const auto& s : both["strategies"]) modes.insert(s["recompute"].get<std::string>());
  EXPECT_EQ(modes, (std::set<std::string>{"full", "none"}));
  r = testing::run_hetplan(
      "search --model gpt2-medium --cluster p4d.24xlarge:1 --global-batch 32 --recompute some");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--recompute"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

// AMP's GPT-2 problem: the best plan is V-shaped (two stages per T4). Balancing stages alone
// gave layers per stage 5,5,5,5,3,1,1,1: device 0 ran the embedding, 4 blocks and the head
// (44.2 ms a micro-batch against 27.3 on devices 1-2). The device-balanced split is faster.
TEST(Search, VShapedPlansBalanceTheirDevicesNotOnlyTheirStages) {
  Problem s("gpt2-medium", "g4dn.12xlarge:4");
  const SearchResult r = search_training(s.ev, options(32, 1));
  ASSERT_FALSE(r.top.empty());
  const RankedStrategy& best = r.top.front();
  ASSERT_EQ(best.strategy.schedule, "v-zb");
  ASSERT_EQ(best.strategy.pp, 4);
  Strategy stage_balanced = best.strategy;
  const std::vector<int64_t> sizes = {5, 5, 5, 5, 3, 1, 1, 1};
  int64_t first = 0;
  for (size_t j = 0; j < sizes.size(); ++j) {
    stage_balanced.stages[j].first_layer = first;
    stage_balanced.stages[j].last_layer = first + sizes[j] - 1;
    first += sizes[j];
  }
  const Prediction old = s.ev.predict(stage_balanced);
  ASSERT_TRUE(old.feasible);
  EXPECT_LT(best.predicted.iteration_s, 0.95 * old.iteration_s);
}

// Zero or negative sizes are exit 2 naming the option (a zero micro-batch once divided by zero).
TEST(SearchCli, NonPositiveSizesNameTheOption) {
  const std::string base = "--model gpt2-medium --cluster g4dn.12xlarge:4 ";
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"search " + base + "--global-batch 32 --micro-batches 0",
            "--micro-batches: expected a number > 0, got 0"},
           {"search " + base + "--global-batch 32 --tensor-widths 2,0",
            "--tensor-widths: expected a number > 0, got 0"},
           {"search " + base + "--global-batch 0", "--global-batch: expected a number > 0, got 0"},
           {"search " + base + "--global-batch 32 --seq-len -5",
            "--seq-len: expected a number > 0, got -5"},
           {"model-info --model gpt2-medium --seq-len 0",
            "--seq-len: expected a number > 0, got 0"},
           {"provision --model gpt2-medium --nodes g4dn.12xlarge --global-batch 8 --top 0",
            "--top: expected a number > 0, got 0"},
           {"provision --model gpt2-medium --nodes g4dn.12xlarge --global-batch 8 --budget -5",
            "--budget: expected a number >= 0, got -5"},
           // export took --seq-len 0 or -5 as "the model's" without a word.
           {"export --strategy s.json --format megatron --seq-len -5",
            "--seq-len: expected a number > 0, got -5"}}) {
    const auto r = testing::run_hetplan(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  }
}

// model-info's shape options only shape --work: alone they were silently ignored.
TEST(ModelInfoCli, ShapeOptionsNeedWork) {
  auto r = testing::run_hetplan("model-info --model gpt2-medium --tp 4");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--tp requires --work"), std::string::npos) << r.output;
  r = testing::run_hetplan("model-info --model gpt2-medium --tp 4 --work --json -");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The work's byte counts (memory-bound kernels, collectives, activations) are whole.
  const Json work = Json::parse(r.output);
  EXPECT_TRUE(work["layers"][1]["work"]["output_bytes"].is_number_integer());
  EXPECT_EQ(testing::fractional_bytes(work), std::vector<std::string>{});
  EXPECT_GT(testing::byte_values(work), 26u * 4);  // 26 layers: activations (3), output, ...
  EXPECT_EQ(Json::parse(r.output)["work_shape"]["tp"], 4);
}

// With idle nodes allowed, search and predict say which node groups the plan leaves idle, and
// predict times the search's plan alike.
TEST(SearchCli, IdleNodesAreNamed) {
  const auto dir = testing::temp_dir("search_idle");
  const auto out = (dir / "out.json").string();
  const std::string cluster = " --model gpt2-medium --cluster p4d.24xlarge:1,g4dn.12xlarge:2 ";
  auto r = testing::run_hetplan("search" + cluster +
                                "--global-batch 32 --top 2 --quiet "
                                "--allow-idle-nodes --json " +
                                out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("note: the best plan uses 8 of the 16 GPUs; idle: g4dn.12xlarge x2 "
                          "(8 GPUs)"),
            std::string::npos)
      << r.output;
  const Json j = load_document(out).root;
  const double searched = j["strategies"][0]["predicted"]["iteration_s"].get<double>();
  r = testing::run_hetplan("predict" + cluster + "--strategy " + out + " --json " +
                           (dir / "p.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("note: the strategy uses 8 of the 16 GPUs; idle: g4dn.12xlarge x2"),
            std::string::npos)
      << r.output;
  EXPECT_DOUBLE_EQ(load_document(dir / "p.json").root["predicted"]["iteration_s"].get<double>(),
                   searched);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
