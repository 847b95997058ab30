#include "costmodel/calibration_merge.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>
#include <unistd.h>

#include "costmodel/errors.h"
#include "costmodel/fit_collectives.h"

namespace hetplan {
namespace {

CollectiveMeasurement coll(int64_t group, int64_t nodes, double bytes, double t, bool ok = true) {
  CollectiveMeasurement m;
  m.op = CollectiveKind::kAllReduce;
  m.dtype = Dtype::kBf16;
  m.group_size = group;
  m.nodes = nodes;
  m.gpus_per_node = group / nodes;
  m.bytes = bytes;
  m.link = nodes > 1 ? "net" : "nvswitch";
  m.ok = ok;
  if (ok)
    m.time_s = summarize({t});
  else
    m.error = "NCCL timeout";
  return m;
}

CalibrationFile node_file(const std::string& gpu_type, double scale) {
  CalibrationFile f;
  f.context.source = "measured";
  f.context.gpu_type = gpu_type;
  f.context.gpu_count = 8;
  for (int e = 10; e <= 30; e += 2)
    f.collectives.push_back(
        coll(8, 1, std::ldexp(1.0, e), scale * (10e-6 + std::ldexp(1.0, e) / 200e9)));
  HostDeviceMeasurement h;
  h.direction = "h2d";
  h.bytes = 1 << 26;
  h.time_s = summarize({(1 << 26) / (25e9 / scale)});
  f.host_device.push_back(h);
  return f;
}

TEST(CalibrationMerge, NodeKindsStayApartAndRemeasurementsReplace) {
  CalibrationFile a100 = node_file("a100-sxm", 2.0);
  CalibrationFile h100 = node_file("h100-sxm", 1.0);
  // A first try at the network failed; the second run of the same key succeeded.
  CalibrationFile net1, net2;
  net1.context.source = net2.context.source = "measured";
  net1.collectives.push_back(coll(2, 2, 1 << 20, 0, false));
  net2.collectives.push_back(coll(2, 2, 1 << 20, 100e-6));
  net1.failures.push_back({"p2p/0-8/4096", "NCCL timeout"});
  net2.failures.push_back({"p2p/0-8/4096", "NCCL timeout"});
  const CalibrationFile merged = merge_calibration_files({a100, h100, net1, net2});
  EXPECT_EQ(merged.collectives.size(), 11u + 11u + 1u);
  EXPECT_EQ(merged.host_device.size(), 2u);
  EXPECT_EQ(merged.failures.size(), 1u);   // the same failure twice is kept once
  EXPECT_EQ(merged.context.gpu_type, "");  // two kinds: no single GPU type
  EXPECT_EQ(merged.collectives[0].gpus, std::vector<std::string>{"a100-sxm"});
  EXPECT_EQ(merged.collectives[11].gpus, std::vector<std::string>{"h100-sxm"});
  const CollectiveMeasurement& net = merged.collectives.back();
  EXPECT_TRUE(net.ok);
  EXPECT_DOUBLE_EQ(net.time_s.median, 100e-6);
  // A failed re-run does not replace a good measurement.
  const CalibrationFile again = merge_calibration_files({merged, net1});
  EXPECT_TRUE(again.collectives.back().ok);
  // Fitted separately per node kind: the A100 node is 2x slower at every size.
  const CommunicationFit fit = fit_communication(merged);
  const auto* fa = fit.find(CollectiveKind::kAllReduce, Dtype::kBf16, 8, 1, "", {"a100-sxm"});
  const auto* fh = fit.find(CollectiveKind::kAllReduce, Dtype::kBf16, 8, 1, "", {"h100-sxm"});
  ASSERT_NE(fa, nullptr);
  ASSERT_NE(fh, nullptr);
  EXPECT_NEAR(fa->time_s(1e9) / fh->time_s(1e9), 2.0, 1e-6);
  EXPECT_NEAR(fh->large.bandwidth_GBps, 200, 1e-6);
}

std::string merge_error(const std::vector<CalibrationFile>& files) {
  try {
    merge_calibration_files(files);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

CalibrationFile amp_like(const std::string& gpu_type, const std::string& origin) {
  CalibrationFile f;
  f.origin = origin;
  f.context.source = "imported:amp";
  f.context.gpu_type = gpu_type;
  f.context.citations[origin + ".npy"] = "AMP";
  LayerForwardMeasurement m;
  m.model = "gpt2";
  m.forward_s = summarize({1e-3});
  f.layer_forward.push_back(m);
  return f;
}

// QA: merging V100 and T4 layer times cleared gpu_type and fit then dropped every record.
TEST(CalibrationMerge, PerGpuMeasurementsOfTwoTypesAreRefusedNamingTheFiles) {
  EXPECT_EQ(merge_error({amp_like("v100", "v100.json"), amp_like("t4", "t4.json")}),
            "merge: v100.json (v100: 1 layer_forward) and t4.json (t4: 1 layer_forward) hold "
            "measurements of different GPU types, which a merged file would lose (a calibration "
            "file holds one GPU type's GEMM, kernel and layer measurements): pass them separately "
            "to fit or --calibration, each keeps its type; merge joins ranks and runs of one GPU "
            "type, and communication-only files of several node kinds");
  // One GPU type's runs merge, with every file's citations.
  const CalibrationFile both = merge_calibration_files({amp_like("t4", "a"), amp_like("t4", "b")});
  EXPECT_EQ(both.context.gpu_type, "t4");
  EXPECT_EQ(both.layer_forward.size(), 2u);
  EXPECT_EQ(both.context.citations.size(), 2u);
}

// Communication of another node kind joins a file of GEMMs: the GEMMs keep their GPU type (the
// merged context is theirs, whatever the order) and the collectives are tagged with theirs.
TEST(CalibrationMerge, CommunicationOfAnotherKindKeepsTheGemmsGpu) {
  CalibrationFile gemms;
  gemms.origin = "a100.json";
  gemms.context.source = "measured";
  gemms.context.gpu_type = "a100-40gb";
  GemmMeasurement g;
  g.shape = {1024, 1024, 1024};
  g.time_s = summarize({1e-4});
  gemms.gemm.push_back(g);
  for (const auto& files : {std::vector<CalibrationFile>{node_file("h100-sxm", 1.0), gemms},
                            std::vector<CalibrationFile>{gemms, node_file("h100-sxm", 1.0)}}) {
    const CalibrationFile merged = merge_calibration_files(files);
    EXPECT_EQ(merged.context.gpu_type, "a100-40gb");
    EXPECT_EQ(merged.gemm.size(), 1u);
    EXPECT_EQ(merged.collectives.front().gpus, std::vector<std::string>{"h100-sxm"});
  }
}

// QA: datasheet + measured came out "datasheet", measured + datasheet "measured".
TEST(CalibrationMerge, PerGpuFilesOfDifferentSourcesAreRefusedInEitherOrder) {
  CalibrationFile datasheet = amp_like("t4", "datasheet/t4.json");
  datasheet.context.source = "datasheet";
  datasheet.layer_forward.clear();
  datasheet.datasheet = DatasheetPriors{{{"fp16", 0.7}}, 0.8, 5e-6, 0.3};
  const CalibrationFile imported = amp_like("t4", "t4.json");
  const std::string expected =
      "hold measurements of one GPU type from different sources; fit and --calibration rank "
      "sources (measured > imported > datasheet), a merged file has one: pass them separately";
  EXPECT_NE(merge_error({datasheet, imported}).find(expected), std::string::npos);
  EXPECT_NE(merge_error({imported, datasheet}).find(expected), std::string::npos);
  EXPECT_EQ(
      merge_error({imported, datasheet}),
      "merge: t4.json (source imported:amp) and datasheet/t4.json (source datasheet) " + expected);
}

TEST(CalibrationMerge, CommandWritesTheMergedFile) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("hetplan_merge_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  save_calibration(node_file("a100-sxm", 2.0), dir / "a.json");
  save_calibration(node_file("h100-sxm", 1.0), dir / "b.json");
  const std::string cmd = std::string(HETPLAN_BINARY) + " merge " + (dir / "a.json").string() +
                          " " + (dir / "b.json").string() + " --out " + (dir / "c.json").string() +
                          " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const CalibrationFile c = load_calibration(dir / "c.json");
  EXPECT_EQ(c.collectives.size(), 22u);
  EXPECT_NE(c.context.notes.find("merged"), std::string::npos);
  // A missing input is bad input: exit status 2.
  const std::string bad = std::string(HETPLAN_BINARY) + " merge " + (dir / "nope.json").string() +
                          " --out " + (dir / "d.json").string() + " 2> /dev/null";
  EXPECT_EQ(WEXITSTATUS(std::system(bad.c_str())), 2);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
