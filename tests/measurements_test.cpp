#include "costmodel/measurements.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "costmodel/errors.h"

namespace hetplan {
namespace {

Document doc_of(const std::string& text) {
  return parse_document(text, "m.json", DocumentFormat::kJson);
}

// The message of the InputError `text` raises, or "" when it reads fine.
std::string error_of(const std::string& text) {
  try {
    measurements_from_document(doc_of(text));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string file_with(const std::string& measurement) {
  return R"({"format": "hetplan-measurements", "schema_version": 1, "context": {},
             "measurements": [)" +
         measurement + "]}";
}

const char* kStrategy = R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 4, "global_batch": 4})";

TEST(Measurements, ReadsPlainNumbersAndDistributions) {
  const auto f = measurements_from_document(doc_of(
      file_with(std::string(R"({"model": "gpt2-medium", "strategy": )") + kStrategy +
                R"(, "iteration_s": 0.25, "peak_memory_bytes": 1e9, "source": "measured:pytorch"},
         {"model": "gpt2-medium", "strategy": )" +
                kStrategy +
                R"(, "iteration_s": {"count": 3, "median_s": 0.3, "min_s": 0.29, "max_s": 0.32},
          "peak_memory_bytes": [1e9, 2e9], "peak_memory_kind": "reserved",
          "source": "imported:megatron"})")));
  ASSERT_EQ(f.measurements.size(), 2u);
  const Measurement& a = f.measurements[0];
  ASSERT_TRUE(a.iteration_s.has_value());
  EXPECT_EQ(a.iteration_s->count, 1);
  EXPECT_DOUBLE_EQ(a.iteration_s->median, 0.25);
  EXPECT_EQ(a.peak_memory_bytes, std::vector<double>{1e9});
  EXPECT_EQ(a.peak_memory_kind, "allocated");  // the default
  EXPECT_EQ(a.key_path, "measurements[0]");
  const Measurement& b = f.measurements[1];
  EXPECT_EQ(b.iteration_s->count, 3);
  EXPECT_DOUBLE_EQ(b.iteration_s->p10, 0.29);  // p10 defaults to min
  EXPECT_DOUBLE_EQ(max_peak_memory(b), 2e9);
  EXPECT_EQ(b.peak_memory_kind, "reserved");
}

TEST(Measurements, RoundTripsThroughAFile) {
  MeasurementsFile f;
  f.context.host = "node1";
  f.context.gpu_type = "h100-sxm";
  f.context.framework = "pytorch";
  f.context.framework_version = "2.9.0";
  f.context.versions = {{"cuda", "13.0"}, {"nccl", "2.27.7"}};
  Measurement m;
  m.model = "gpt2-medium";
  m.strategy = Json::parse(kStrategy);
  m.iteration_s = summarize({0.5, 0.52, 0.51});
  m.iteration_samples_s = {0.5, 0.52, 0.51};
  m.warmup_iterations = 5;
  m.peak_memory_bytes = {12e9};
  m.source = "measured:pytorch";
  // The SM clock of the timed steps, as scripts/reference/clocks.py writes it.
  m.clocks = summarize_clocks({{1755, 690.0, kClockReasonSwPowerCap, 40e-6}, {1980, 600.0, 0, 0}});
  f.measurements.push_back(m);
  Measurement oom = m;
  oom.clocks.reset();
  oom.iteration_s.reset();
  oom.iteration_samples_s.clear();
  oom.oom = true;
  f.measurements.push_back(oom);
  const auto path = std::filesystem::temp_directory_path() /
                    ("hetplan_meas_" + std::to_string(::getpid()) + ".json");
  save_measurements(f, path);
  const MeasurementsFile back = load_measurements(path);
  std::filesystem::remove(path);
  ASSERT_EQ(back.measurements.size(), 2u);
  EXPECT_EQ(back.context.versions.at("nccl"), "2.27.7");
  EXPECT_DOUBLE_EQ(back.measurements[0].iteration_s->median, 0.51);
  EXPECT_EQ(back.measurements[0].warmup_iterations, 5);
  EXPECT_EQ(back.measurements[0].strategy, Json::parse(kStrategy));
  EXPECT_TRUE(back.measurements[1].oom);
  EXPECT_FALSE(back.measurements[1].iteration_s.has_value());
  ASSERT_TRUE(back.measurements[0].clocks.has_value());
  EXPECT_EQ(back.measurements[0].clocks->samples, 2);
  EXPECT_DOUBLE_EQ(back.measurements[0].clocks->sm_mhz_median, 1867.5);
  EXPECT_EQ(back.measurements[0].clocks->reasons, kClockReasonSwPowerCap);
  EXPECT_FALSE(back.measurements[1].clocks.has_value());
}

TEST(Measurements, RejectsBadInputWithKeyPaths) {
  const std::string s = kStrategy;
  EXPECT_NE(error_of(R"({"format": "hetplan-calibration", "schema_version": 1, "context": {},
                         "measurements": []})")
                .find("m.json: format: expected \"hetplan-measurements\""),
            std::string::npos);
  EXPECT_NE(error_of(file_with(R"({"model": "g", "strategy": )" + s +
                               R"(, "iteration_s": 1, "source": "pytorch"})"))
                .find("measurements[0].source: expected \"measured:<harness>\""),
            std::string::npos);
  EXPECT_NE(
      error_of(file_with(R"({"model": "g", "strategy": )" + s + R"(, "source": "measured:x"})"))
          .find("measurements[0].iteration_s: missing"),
      std::string::npos);
  EXPECT_NE(error_of(file_with(R"({"model": "g", "strategy": )" + s +
                               R"(, "iteration_s": 1, "oom": true, "source": "measured:x"})"))
                .find("has no iteration time"),
            std::string::npos);
  EXPECT_NE(error_of(file_with(R"({"model": "g", "strategy": )" + s +
                               R"(, "iteration_s": -1, "source": "measured:x"})"))
                .find("expected a time > 0"),
            std::string::npos);
  EXPECT_NE(error_of(file_with(R"({"model": "g", "strategy": )" + s +
                               R"(, "iteration_s": 1, "peak_memory_bytes": "1GB",
                                  "source": "measured:x"})"))
                .find("measurements[0].peak_memory_bytes: expected bytes"),
            std::string::npos);
  EXPECT_NE(error_of(file_with(R"({"model": "g", "strategy": 3, "iteration_s": 1,
                                  "source": "measured:x"})"))
                .find("measurements[0].strategy: expected a strategy object"),
            std::string::npos);
  EXPECT_NE(error_of(file_with(R"({"model": "g", "strategy": )" + s +
                               R"(, "iteration_s": 1, "source": "measured:x", "iter": 2})"))
                .find("measurements[0].iter: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(file_with(R"({"model": "g", "strategy": )" + s +
                               R"(, "iteration_s": 1, "source": "measured:x",
                                  "clocks": {"samples": 2, "sm_mhz_median": 0,
                                             "reasons": []}})"))
                .find("measurements[0].clocks.sm_mhz_median: expected a number > 0"),
            std::string::npos);
  // A measurement that failed needs no time.
  EXPECT_EQ(error_of(file_with(R"({"model": "g", "strategy": )" + s +
                               R"(, "error": "NCCL timeout", "source": "measured:x"})")),
            "");
}

// "assumed" lists keys of the measurement or of its strategy that the writer filled in by default.
TEST(Measurements, AssumedNamesKeysTheMeasurementHas) {
  const std::string head = std::string(R"({"model": "g", "strategy": )") + kStrategy +
                           R"(, "iteration_s": 1, "source": "imported:megatron", )";
  const auto f = measurements_from_document(doc_of(file_with(
      head + R"("peak_memory_bytes": 2e9, "assumed": ["strategy.dp", "peak_memory_bytes"]})")));
  EXPECT_EQ(f.measurements[0].assumed,
            (std::vector<std::string>{"strategy.dp", "peak_memory_bytes"}));
  EXPECT_EQ(to_json(f.measurements[0])["assumed"],
            Json::parse(R"(["strategy.dp", "peak_memory_bytes"])"));
  // kStrategy has no zero key; the measurement no notes.
  EXPECT_EQ(error_of(file_with(head + R"("assumed": ["strategy.zero"]})")),
            "m.json: measurements[0].assumed[0]: expected a key of this measurement or "
            "\"strategy.<key>\" of its strategy, found \"strategy.zero\"");
  EXPECT_NE(error_of(file_with(head + R"("assumed": ["strategy.dp", "notes"]})"))
                .find("measurements[0].assumed[1]: expected a key"),
            std::string::npos);
  EXPECT_NE(error_of(file_with(head + R"("assumed": "strategy.dp"})")).find("assumed"),
            std::string::npos);
  // Without assumed values the key is not written.
  EXPECT_FALSE(
      to_json(
          measurements_from_document(doc_of(file_with(head + R"("notes": ""})"))).measurements[0])
          .contains("assumed"));
}

// Files written before bytes were whole (a DeepSpeed import: 10.91 GiB) read, and are rewritten
// with the nearest whole byte.
TEST(Measurements, PeakMemoryWithAFractionReadsAndIsWrittenWhole) {
  const auto f = measurements_from_document(
      doc_of(file_with(std::string(R"({"model": "g", "strategy": )") + kStrategy +
                       R"(, "iteration_s": 1, "peak_memory_bytes": [11714523299.84, 3156803584.0],
          "source": "imported:deepspeed"})")));
  EXPECT_EQ(f.measurements[0].peak_memory_bytes,
            (std::vector<double>{11714523299.84, 3156803584.0}));
  const Json written = to_json(f.measurements[0])["peak_memory_bytes"];
  EXPECT_EQ(written, Json::parse("[11714523300, 3156803584]"));
  EXPECT_TRUE(written[0].is_number_integer());
  EXPECT_TRUE(written[1].is_number_integer());
}

}  // namespace
}  // namespace hetplan
