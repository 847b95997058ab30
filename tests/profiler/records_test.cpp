// Journal records, resume (planned minus journalled = remaining) and assembling the file.
#include "profiler/common/records.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "costmodel/errors.h"
#include "costmodel/journal.h"
#include "profiler/common/collective_plan.h"
#include "profiler/common/gemm_plan.h"
#include "profiler/common/plan.h"

namespace hetplan::profiler {
namespace {

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("hetplan_records_" + std::to_string(::getpid()) + "_" + name);
}

GemmMeasurement sample_gemm(int64_t m) {
  GemmMeasurement g;
  g.dtype = Dtype::kBf16;
  g.shape = {m, 64, 64, 1, true, false};
  g.origin = "grid";
  g.time_s = summarize({2e-6, 3e-6, 4e-6});
  g.kernels = {"nvjet_tst_64x8"};
  g.tensor_cores = true;
  g.trace = Json{{"gap_s_per_launch", 1e-6}};
  return g;
}

Provenance context_of(const std::string& date) {
  Provenance p;
  p.source = "measured";
  p.gpu_name = "NVIDIA H100 80GB HBM3";
  p.gpu_type = "h100-sxm";
  p.host = "gpu1";
  p.date = date;
  return p;
}

TEST(Records, RemainingIsThePlanMinusTheJournal) {
  const auto path = temp_path("remaining.journal");
  const auto plan = gemm_items(gemm_grid(true, {Dtype::kFp16}), "gemm", true);
  ASSERT_EQ(plan.size(), 27u);
  {
    Journal j(path, false);
    j.append(plan[0].key, to_json(sample_gemm(128)));
    j.append(plan[5].key, failure_record(plan[5].label, "not supported"));
    j.append("gemm/bf16/1x1x1x1/TN", to_json(sample_gemm(1)));  // not in this plan
  }
  Journal resumed(path, true);
  const auto todo = remaining(plan, resumed);
  EXPECT_EQ(todo.size(), 25u);
  for (const auto& item : todo) {
    EXPECT_NE(item.key, plan[0].key);
    EXPECT_NE(item.key, plan[5].key);
  }
  // --retry-failed measures the failure again, never the finished measurement.
  const auto retry = remaining(plan, resumed, true);
  EXPECT_EQ(retry.size(), 26u);
  EXPECT_EQ(retry[4].key, plan[5].key);
  const PlanSummary s = summarize_plan(plan, &resumed);
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.items(), 27);
  EXPECT_EQ(s.done(), 2);
  std::filesystem::remove(path);
}

TEST(Records, AssembleBuildsTheFileFromEveryRecord) {
  const auto path = temp_path("assemble.journal");
  {
    Journal j(path, false);
    j.append("context/2026-11-20T10:00:00Z", to_json(context_of("2026-11-20T10:00:00Z")));
    j.append("gemm/bf16/128x64x64x1/TN", to_json(sample_gemm(128)));
    j.append("gemm/bf16/256x64x64x1/TN", failure_record("bf16 256x64x64 TN", "incorrect"));
    j.append("gemm/bf16/512x64x64x1/TN", Json{{"dtype", "bf16"}});  // unreadable
    j.append("mystery/1", Json{{"x", 1}});                          // unknown kind
    KernelMeasurement k;
    k.kernel = "d2d_copy";
    k.dtype = Dtype::kFp32;
    k.bytes = 2e9;
    k.time_s = summarize({1e-3});
    j.append("kernel/d2d_copy/1000000000", to_json(k));
    j.append(context_key(context_of("2026-11-21T09:00:00Z"), 42),
             to_json(context_of("2026-11-21T09:00:00Z")));
  }
  Journal j(path, true);
  const Assembly a = assemble(j, context_of("2026-11-21T09:00:00Z"), 42);
  ASSERT_EQ(a.file.gemm.size(), 1u);
  EXPECT_EQ(a.file.gemm[0].shape.m, 128);
  EXPECT_DOUBLE_EQ(a.file.gemm[0].trace["gap_s_per_launch"].get<double>(), 1e-6);
  ASSERT_EQ(a.file.kernels.size(), 1u);
  EXPECT_EQ(a.measurements, 2);
  EXPECT_EQ(a.unreadable, 2);
  ASSERT_EQ(a.file.failures.size(), 3u);
  EXPECT_EQ(a.file.failures[0].what, "bf16 256x64x64 TN");
  EXPECT_EQ(a.file.failures[0].error, "incorrect");
  // The earlier run (20 Nov) is noted; this run's own context record is not.
  EXPECT_NE(a.file.context.notes.find("1 earlier run(s): 2026-11-20T10:00:00Z on gpu1"),
            std::string::npos)
      << a.file.context.notes;
  EXPECT_EQ(a.file.context.notes.find("2026-11-21"), std::string::npos);

  // The assembled file saves and loads like any calibration file.
  const auto out = temp_path("assembled.json");
  save_calibration(a.file, out);
  const CalibrationFile back = load_calibration(out);
  EXPECT_EQ(back.gemm.size(), 1u);
  EXPECT_EQ(back.failures.size(), 3u);
  EXPECT_EQ(back.context.gpu_type, "h100-sxm");
  std::filesystem::remove(out);
  std::filesystem::remove(path);
}

// `calibrate --from-journal`: the journal alone, under its last run's provenance.
TEST(Records, AJournalAloneIsAssembledUnderItsLastRun) {
  const auto path = temp_path("alone.journal");
  {
    Journal j(path, false);
    j.append(context_key(context_of("2026-11-20T10:00:00Z"), 7),
             to_json(context_of("2026-11-20T10:00:00Z")));
    j.append("gemm/bf16/128x64x64x1/TN", to_json(sample_gemm(128)));
    j.append(context_key(context_of("2026-11-21T09:00:00Z"), 42),
             to_json(context_of("2026-11-21T09:00:00Z")));
    j.append("gemm/bf16/256x64x64x1/TN", to_json(sample_gemm(256)));
    // The first run never finished; the second did.
    j.append(finished_key(context_of("2026-11-21T09:00:00Z"), 42), Json{{"measured", 1}});
  }
  const auto journal = Journal::read_only(path);
  const Assembly a = assemble_from_journal(*journal, "hetplan calibrate --from-journal");
  EXPECT_EQ(a.measurements, 2);
  EXPECT_TRUE(a.last_run_finished);
  EXPECT_EQ(a.file.gemm.size(), 2u);
  EXPECT_EQ(a.file.context.date, "2026-11-21T09:00:00Z");
  const std::string& notes = a.file.context.notes;
  EXPECT_NE(notes.find("1 earlier run(s): 2026-11-20T10:00:00Z on gpu1"), std::string::npos)
      << notes;
  EXPECT_NE(notes.find("assembled from the journal " + path.string() +
                       " alone, without measuring (`hetplan calibrate --from-journal`); its "
                       "last run finished"),
            std::string::npos)
      << notes;
  // Read only: nothing can be appended.
  EXPECT_THROW(journal->append("gemm/x", Json::object()), RuntimeFailure);
  std::filesystem::remove(path);
}

// calibrate-collectives' rank 0 journals its combined measurements as calibrate does: a run killed
// before it wrote its file becomes the file, and the note says which command completes it.
TEST(Records, ACollectiveRunsJournalIsAssembledWithItsOwnResumeCommand) {
  const auto path = temp_path("net.json.journal");
  Provenance run = context_of("2026-11-24T11:00:00Z");
  run.command = "hetplan calibrate-collectives --out net.json";
  GroupSpec group;
  group.shape = "one_per_node";
  group.members = {0, 1};
  group.nodes = 2;
  group.link = "net";
  group.gpus = {run.gpu_name};
  RankRecord rank;
  rank.bytes = 1 << 20;
  rank.samples_s = {1e-3, 1.1e-3};
  const CollectiveMeasurement m =
      combine_collective(CollectiveKind::kAllReduce, Dtype::kBf16, group, {rank, rank}, {});
  const std::string p2p = p2p_key(0, 1, 4096);
  {
    Journal j(path, false);
    j.append(context_key(run, 9), to_json(run));
    j.append(collective_key(m.op, m.dtype, group, 1 << 20), to_json(m));
    j.append(p2p, failure_record(p2p, "rank 1: NCCL timeout"));  // killed after this
  }
  const Assembly a = assemble_from_journal(*Journal::read_only(path), "cmd");
  EXPECT_FALSE(a.last_run_finished);
  ASSERT_EQ(a.file.collectives.size(), 1u);
  EXPECT_EQ(a.file.collectives[0].group_size, 2);
  EXPECT_DOUBLE_EQ(a.file.collectives[0].time_s.median, m.time_s.median);
  ASSERT_EQ(a.file.failures.size(), 1u);
  EXPECT_EQ(a.file.failures[0].error, "rank 1: NCCL timeout");
  std::filesystem::path out = path;
  out.replace_extension();
  EXPECT_NE(a.file.context.notes.find("`hetplan calibrate-collectives --out " + out.string() +
                                      " --resume` with its options, on the same GPUs and "
                                      "processes, completes it"),
            std::string::npos)
      << a.file.context.notes;
  std::filesystem::remove(path);
}

TEST(Records, AJournalAloneThatCannotMakeAFileIsNamed) {
  const auto path = temp_path("bad.journal");
  const auto message = [&](const std::vector<std::pair<std::string, Json>>& records) {
    {
      Journal j(path, false);
      for (const auto& [key, record] : records) j.append(key, record);
    }
    try {
      assemble_from_journal(*Journal::read_only(path), "cmd");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string p = path.string();
  EXPECT_EQ(message({{"gemm/bf16/128x64x64x1/TN", to_json(sample_gemm(128))}}),
            p + ": no run's provenance (a context/... record) in it: not a calibration journal, "
                "or cut before its first measurement");
  Provenance a100 = context_of("2026-11-22T08:00:00Z");
  a100.gpu_name = "NVIDIA A100-SXM4-80GB";
  EXPECT_EQ(
      message({{"context/2026-11-21T09:00:00Z/1", to_json(context_of("2026-11-21T09:00:00Z"))},
               {"context/2026-11-22T08:00:00Z/2", to_json(a100)}}),
      p + ": its runs measured different GPUs (NVIDIA H100 80GB HBM3 on "
          "2026-11-21T09:00:00Z, NVIDIA A100-SXM4-80GB on 2026-11-22T08:00:00Z); a "
          "calibration file is of one GPU");
  EXPECT_EQ(
      message({{"context/2026-11-21T09:00:00Z/1", to_json(context_of("2026-11-21T09:00:00Z"))}}),
      p + ": no measurement in it, only the provenance of 1 run(s)");
  Json guessed = to_json(context_of("2026-11-21T09:00:00Z"));
  guessed["source"] = "guessed";
  EXPECT_EQ(message({{"context/2026-11-21T09:00:00Z/1", guessed}}),
            p + " (key context/2026-11-21T09:00:00Z/1): source: expected \"measured\", "
                "\"datasheet\" or \"imported:<tool>\", found \"guessed\"");
  std::filesystem::remove(path);
  EXPECT_THROW(Journal::read_only(path), InputError);
}

// An interrupted run resumed within the same second (the GPU test does this) has the same date:
// the run id keeps the first run's record apart, and the resumed file says it continued one.
TEST(Records, ARunResumedInTheSameSecondIsNotedAsAnEarlierRun) {
  const auto path = temp_path("same_second.journal");
  const Provenance context = context_of("2026-11-23T02:41:38Z");
  {
    Journal j(path, false);
    j.append(context_key(context, 100), to_json(context));
    j.append("gemm/bf16/128x64x64x1/TN", to_json(sample_gemm(128)));
    j.append(context_key(context, 101), to_json(context));
  }
  EXPECT_NE(context_key(context, 100), context_key(context, 101));
  const Assembly a = assemble(Journal(path, true), context, 101);
  EXPECT_NE(a.file.context.notes.find("1 earlier run(s): 2026-11-23T02:41:38Z on gpu1"),
            std::string::npos)
      << a.file.context.notes;
  EXPECT_EQ(a.file.gemm.size(), 1u);
}

TEST(Records, PlanTextCountsPerSection) {
  std::vector<PlanItem> plan = {
      {"gemm", "a", "a", 30, {}}, {"gemm", "b", "b", 30, {}}, {"kernels", "c", "c", 125, {}}};
  const std::string text = format_plan(summarize_plan(plan, nullptr));
  EXPECT_NE(text.find("gemm              2 measurements, about 1m00s"), std::string::npos) << text;
  EXPECT_NE(text.find("kernels           1 measurements, about 2m05s"), std::string::npos) << text;
  EXPECT_NE(text.find("total             3 measurements, about 3m05s"), std::string::npos) << text;
}

}  // namespace
}  // namespace hetplan::profiler
