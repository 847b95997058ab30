// The export to Sailor's training framework (report/export/sailor_export.cpp): dist_config.json's
// stages, replicas and ranks, and the launch arguments, written out by hand from Sailor's
// deepspeed/topology.py (PipeHeterogeneousTopology) and run_from_file.sh at cf2c8e3.
#include <gtest/gtest.h>

#include "costmodel/errors.h"
#include "costmodel/model.h"
#include "report/export/exporters.h"
#include "test_util.h"

namespace hetplan {
namespace {

using testing::contains;

using testing::read_strategy;

// Two stages of gpt2-medium's 24 blocks, two replicas each: stage 0 one A100 at tp 1 beside two
// V100s at tp 2, stage 1 two A100s at tp 1 (group g of each stage is pipeline g); 8 samples a
// replica.
const char* kReplicas = R"({"dp": 2, "tp": 1, "pp": 2, "micro_batch": 2, "global_batch": 16,
  "schedule": "1f1b", "recompute": "none", "zero": 0, "stages": [
  {"layers": [0, 12], "replicas": [
    {"gpu_type": "a100-40gb", "devices": [0], "tp": 1, "micro_batch": 2, "samples": 8},
    {"gpu_type": "v100", "devices": [8, 9], "tp": 2, "micro_batch": 2, "samples": 8}]},
  {"layers": [13, 25], "replicas": [
    {"gpu_type": "a100-40gb", "devices": [1], "tp": 1, "micro_batch": 2, "samples": 8},
    {"gpu_type": "a100-40gb", "devices": [2], "tp": 1, "micro_batch": 2, "samples": 8}]}]})";

bool has_line(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& l : lines)
    if (contains(l, part)) return true;
  return false;
}

TEST(SailorExport, ReplicaGroupsBecomeStagesOfReplicasOfRanks) {
  const ModelSpec model = load_model("gpt2-medium");
  const ExportResult r = find_exporter("sailor").run(model, read_strategy(kReplicas), {});
  EXPECT_TRUE(r.unsupported.empty()) << r.unsupported.front();
  // One agent per replica in stage order, tp fastest: agents of tp 1, 2, 1, 1.
  EXPECT_EQ(Json::parse(r.text), Json::parse("[[[0], [1, 2]], [[3], [4]]]"));
  EXPECT_TRUE(has_line(r.instructions,
                       "bash run_from_file.sh 4 a MASTER_ADDR MASTER_PORT 2 2 "
                       "NODE_TP 2 16 2"));
  EXPECT_TRUE(has_line(r.instructions, "NODE_TP of agents 0..3: 1 2 1 1"));
  EXPECT_TRUE(has_line(r.instructions, "--layers-per-stage '[12, 12]'"));
  EXPECT_TRUE(has_line(r.instructions, "--num-layers 24 "));
  EXPECT_TRUE(has_line(r.instructions, "--hidden-size 1024 --num-attention-heads 16"));
  EXPECT_TRUE(has_line(r.placement, "agent 1 (stage 0, v100 x 2): device 8, device 9"));
  // The fork's script trains in fp32: a bf16 model says what to add.
  EXPECT_TRUE(has_line(r.instructions, "for bf16 add --bf16 to CONSTANT_ARGS"));
  ModelSpec fp32 = model;
  fp32.dtype = Dtype::kTf32;
  EXPECT_TRUE(has_line(find_exporter("sailor").run(fp32, read_strategy(kReplicas), {}).instructions,
                       "precision: the script trains in fp32 as it is (tf32 here"));
  EXPECT_TRUE(find_exporter("sailor").replica_groups);
  EXPECT_FALSE(find_exporter("megatron").replica_groups);
}

TEST(SailorExport, AUniformStrategyIsItsOwnTopology) {
  const ModelSpec model = load_model("gpt2-medium");
  const ExportResult r = find_exporter("sailor").run(
      model, read_strategy(R"({"dp": 2, "tp": 2, "pp": 2, "micro_batch": 1, "global_batch": 8})"),
      {});
  EXPECT_TRUE(r.unsupported.empty());
  EXPECT_EQ(Json::parse(r.text), Json::parse("[[[0, 1], [2, 3]], [[4, 5], [6, 7]]]"));
  EXPECT_TRUE(has_line(r.instructions, "NODE_TP of agents 0..3: 2 2 2 2"));
}

TEST(SailorExport, WhatTheForkRunsOneOfIsSaid) {
  const ModelSpec model = load_model("gpt2-medium");
  // Pipeline 1 (the V100s, then the second A100) at micro-batch 1: the fork's ds_config has one.
  const std::string uneven = R"({"dp": 2, "tp": 1, "pp": 2, "micro_batch": 2, "global_batch": 16,
    "stages": [
    {"layers": [0, 12], "replicas": [
      {"gpu_type": "a100-40gb", "devices": [0], "tp": 1, "micro_batch": 2, "samples": 8},
      {"gpu_type": "v100", "devices": [8, 9], "tp": 2, "micro_batch": 1, "samples": 8}]},
    {"layers": [13, 25], "replicas": [
      {"gpu_type": "a100-40gb", "devices": [1], "tp": 1, "micro_batch": 2, "samples": 8},
      {"gpu_type": "a100-40gb", "devices": [2], "tp": 1, "micro_batch": 1, "samples": 8}]}]})";
  const ExportResult mb = find_exporter("sailor").run(model, read_strategy(uneven), {});
  ASSERT_FALSE(mb.unsupported.empty());
  EXPECT_TRUE(contains(mb.unsupported.front(), "train_micro_batch_size_per_gpu"))
      << mb.unsupported.front();
  const ExportResult v = find_exporter("sailor").run(
      model, read_strategy(R"({"dp": 1, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8,
                   "schedule": "interleaved", "chunks": 2})"),
      {});
  EXPECT_TRUE(has_line(v.unsupported, "runs 1F1B"));
  // Its engine issues kernels eagerly: another host mode is written as eager, and said.
  const ExportResult graphs = find_exporter("sailor").run(
      model, read_strategy(R"({"dp": 2, "tp": 2, "pp": 2, "micro_batch": 1, "global_batch": 8,
                               "host_mode": "cuda-graphs"})"),
      {});
  EXPECT_TRUE(has_line(graphs.approximations, "host mode cuda-graphs"));
}

}  // namespace
}  // namespace hetplan
