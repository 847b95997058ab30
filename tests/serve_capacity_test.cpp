// Node capacity formula by hand, per-layer profile reading and interpolation, VRAM limits, and the
// serving model derived from model presets.
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "costmodel/errors.h"
#include "costmodel/model.h"
#include "serve/capacity.h"
#include "serve/flow.h"
#include "serve/layer_time.h"
#include "serve/serving_model.h"
#include "serve_test_util.h"

namespace hetplan::serve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::kHelix;

TEST(ServeCapacity, FormulaByHand) {
  // VRAM 100 GB, 10 GB per layer, 1e6 KV bytes per token and layer, 10 layers; prompt time
  // 1e-5 s per token, decode step 0.01 + 0.001 * batch seconds (per layer).
  Machine m{"m", "toy", "toy", 1, 100e9, 0, 0};
  ServingModel model = testing::toy_model(10);
  model.layer_weight_bytes = 10e9;
  model.kv_bytes_per_token_layer = 1e6;
  const testing::LinearTimes times(1e-5, 0.01, 0.001);
  const MachineCapacity cap = machine_capacity(m, model, times, {}, {});
  // Weights may take 52% of VRAM: 52 GB -> 5 layers.
  EXPECT_EQ(cap.max_layers, 5);
  // k = 2: KV bytes = 0.8 * 100e9 - 2 * 10e9 = 60e9; per layer held 30000 tokens.
  EXPECT_DOUBLE_EQ(cap.kv_tokens_per_layer[2], 30000.0);
  // Resident requests = 0.3 * 30000 / (750 + 240) = 9.0909...; batch = that * 2/10 = 1.81818...
  const double batch = 0.3 * 30000 / 990 * 2 / 10;
  EXPECT_NEAR(cap.decode_batch[2], 1.8181818, 1e-6);
  // Per request: 2 layers x (prompt 750 * 1e-5 + 240 steps * (0.01 + 0.001 * b) / b).
  const double request_s = 2 * (0.0075 + 240 * (0.01 + 0.001 * batch) / batch);
  EXPECT_NEAR(request_s, 2 * (0.0075 + 240 * 0.0065), 1e-9);  // = 3.135 s
  EXPECT_NEAR(cap.tokens_per_s[2], 990 / 3.135, 1e-9);        // 315.79 tokens/s
  // k = 5: KV = 80e9 - 50e9 = 30e9 -> 6000 tokens per layer; resident 1.818; batch 0.909 -> 1.
  EXPECT_DOUBLE_EQ(cap.decode_batch[5], 1.0);
  EXPECT_NEAR(cap.tokens_per_s[5], 990 / (5 * (0.0075 + 240 * 0.011)), 1e-9);
}

TEST(ServeCapacity, Bs2TimeInterpolation) {
  // examples/external/helix/profiles/llama2_70b/t4: prompt 750 -> 48 ms, 1000 -> 59 ms;
  // decode 2 -> 7.1 ms, 4 -> 7.2 ms, 480 -> 39 ms, 500 -> 40 ms.
  const ProfileDirectory dir(kHelix / "profiles/llama2_70b");
  const auto t4 = dir.for_machine_type("T4");
  EXPECT_NEAR(t4->prompt_s(875), 0.0535, 1e-12);  // halfway between 48 and 59 ms
  EXPECT_NEAR(t4->decode_s(3), 0.00715, 1e-12);   // halfway between 7.1 and 7.2 ms
  EXPECT_NEAR(t4->decode_s(1), 0.0071, 1e-12);    // below the smallest measured batch: its time
  EXPECT_NEAR(t4->decode_s(520), 0.041, 1e-12);   // the last segment extended: 40 + 1
  EXPECT_DOUBLE_EQ(t4->max_decode_batch(), 500);
  // Machine types match folders without regard to case.
  EXPECT_NEAR(dir.for_machine_type("T4x2")->prompt_s(750), 0.028, 1e-12);
}

TEST(ServeCapacity, ProfileErrors) {
  const fs::path dir = fs::temp_directory_path() / "hetplan_serve_profiles";
  fs::create_directories(dir / "x1");
  std::ofstream(dir / "x1/prompt_bs2time.csv") << "0,0\n250,2\nfast,3\n";
  std::ofstream(dir / "x1/decode_bs2time.csv") << "0,0\n2,1.4\n";
  const ProfileDirectory profiles(dir);
  try {
    profiles.for_machine_type("X1");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("prompt_bs2time.csv: line 3"));
    EXPECT_THAT(e.what(), HasSubstr("expected \"batch,milliseconds\""));
  }
  try {
    profiles.for_machine_type("H200");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no per-layer profile for machine type 'H200'"));
    EXPECT_THAT(e.what(), HasSubstr("found: x1"));
  }
}

TEST(ServeCapacity, ZeroTimeIsRejectedAndAByteOrderMarkIgnored) {
  // QA's bad/cases/zerotime_all: every batch in 0 ms gave the machine unlimited capacity. Only
  // Helix's "0,0" anchor row may take no time.
  const fs::path dir = fs::temp_directory_path() / "hetplan_serve_zero_profiles";
  fs::create_directories(dir / "z");
  std::ofstream(dir / "z/prompt_bs2time.csv") << "0,0\n250,0\n7500,0\n";
  std::ofstream(dir / "z/decode_bs2time.csv") << "0,0\n2,0\n500,0\n";
  try {
    ProfileDirectory(dir).for_machine_type("z");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("z/prompt_bs2time.csv: line 2: batch 250 in 0 ms: expected a "
                                    "measured time > 0"));
  }
  // A UTF-8 byte-order mark before the first row is not part of it.
  std::ofstream(dir / "z/prompt_bs2time.csv") << "\xEF\xBB\xBF"
                                                 "0,0\n250,18\n";
  std::ofstream(dir / "z/decode_bs2time.csv") << "\xEF\xBB\xBF"
                                                 "0,0\n2,7\n";
  EXPECT_NEAR(ProfileDirectory(dir).for_machine_type("z")->prompt_s(250), 0.018, 1e-15);
}

TEST(ServeCapacity, ServingModelFromPresets) {
  const ModelSpec spec = load_model("llama2-70b");
  const ServingModel m = serving_model_from(spec, Dtype::kFp16);
  EXPECT_EQ(m.num_layers, 80);
  // Per block: q, o 8192 x 8192; k, v 8192 x 1024; MLP 3 x 8192 x 28672; two RMSNorms 8192:
  // 855,654,400 parameters, 2 bytes each.
  EXPECT_DOUBLE_EQ(m.layer_weight_bytes, 1711308800.0);
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token_layer, 2.0 * 8 * 128 * 2);  // K and V, 8 KV heads
  EXPECT_DOUBLE_EQ(m.activation_bytes_per_token, 8192.0 * 2);       // Helix: 8192 x 2 bytes
  const ServingModel m30 = serving_model_from(load_model("llama1-30b"), Dtype::kFp16);
  EXPECT_EQ(m30.num_layers, 60);
  EXPECT_DOUBLE_EQ(m30.kv_bytes_per_token_layer, 2.0 * 52 * 128 * 2);  // no GQA
}

TEST(ServeCapacity, HelixLayerLimitsForLlama2) {
  // With 48% of VRAM kept for KV cache, LLaMA-2 70B's 1.711 GB layers give Helix's hand-set
  // limits (simulator/model_manager/llama2_70b/*): T4 4, L4 7, A100 12; on cluster42 also V100 4,
  // L4x2 14, T4x2 9 (T4x4: 19 here, 18 in Helix).
  const ServingProblem p = testing::helix_problem("clusters/cluster42.ini");
  std::map<std::string, int> limit;
  for (int i = 0; i < p.machines(); ++i)
    limit[p.cluster.machines()[i].machine_type] = p.capacity[i].max_layers;
  EXPECT_EQ(limit["T4"], 4);
  EXPECT_EQ(limit["L4"], 7);
  EXPECT_EQ(limit["A100"], 12);
  EXPECT_EQ(limit["V100"], 4);
  EXPECT_EQ(limit["L4x2"], 14);
  EXPECT_EQ(limit["T4x2"], 9);
  EXPECT_EQ(limit["T4x4"], 19);
}

TEST(ServeCapacity, PlacementErrorsNameTheMachine) {
  const ServingProblem p = testing::helix_problem("clusters/cluster24.ini");
  Placement pl;
  pl.ranges.assign(p.machines(), LayerRange{});
  pl.ranges[1] = {0, 5};  // ComputeNode-1 is a T4: at most 4 layers
  const auto errors = placement_errors(p, pl);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0],
            "ComputeNode-1: 5 layers need 8.56 GB of weights; T4 (16.0 GB of VRAM) may hold 4 "
            "(48% of VRAM stays free for KV cache and workspace)");
  EXPECT_EQ(errors[1], "layers 5..79 are held by no machine");
}

TEST(ServeCapacity, KvCacheMustHoldOneRequest) {
  // QA's tinykv.yaml: T4s of 17.12 GB with --kv-reserve 0 could take 8 layers of LLaMA-2 70B,
  // leaving 0.8 x 17.12e9 - 8 x 1711308800 = 5.5296e6 bytes of KV cache: 5.5296e6 / (8 x 4096) =
  // 168.75 tokens per layer, less than one request (750 + 240). 7 layers leave 1.717e9 bytes:
  // 59,879 tokens per layer. So a T4 may hold 7, and 8 is an error naming the KV cache.
  const ModelSpec spec = load_model("llama2-70b");
  const ServingModel model = serving_model_from(spec, spec.dtype);
  const Machine t4{"t", "T4", "T4", 1, 17.12e9, 0, 0};
  CapacityParams params;
  params.kv_reserve_fraction = 0;
  const ProfileDirectory dir(kHelix / "profiles/llama2_70b");
  const MachineCapacity cap = machine_capacity(t4, model, *dir.for_machine_type("T4"), {}, params);
  EXPECT_EQ(cap.weight_max_layers, 8);
  EXPECT_EQ(cap.max_layers, 7);
  EXPECT_NEAR(kv_tokens_per_layer(t4, model, params, 8), 168.75, 1e-6);
  EXPECT_DOUBLE_EQ(cap.tokens_per_s[8], 0.0);
  EXPECT_GT(cap.tokens_per_s[7], 0.0);

  ServingProblem p;
  p.cluster = ServingCluster("tinykv", {t4});
  p.model = model;
  p.params = params;
  p.capacity = {cap};
  p.times = {dir.for_machine_type("T4")};
  const auto errors = placement_errors(p, testing::ranges({{0, 8}}));
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors[0],
            "t: with 8 layers the KV cache holds 169 tokens per layer, less than one request of "
            "750 + 240 tokens; T4 (17.1 GB of VRAM) may hold 7 layers");
  EXPECT_DOUBLE_EQ(machine_arc_capacity(p, 0, {0, 8}), 0.0);
}

}  // namespace
}  // namespace hetplan::serve
