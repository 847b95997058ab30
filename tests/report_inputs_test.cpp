// What `hetplan report` takes as predictions and what it says with nothing to score (QA's cases:
// a strategy file scored as a prediction of 0 s, metrics of no pairs written as 0% errors).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/document.h"
#include "report_fixture.h"
#include "test_util.h"

namespace hetplan {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::run_hetplan;

TEST(ReportInputs, AStrategyWithoutItsPredictionIsBadInput) {
  const auto& in = testing::report_inputs();
  const auto dir = testing::temp_dir("report_unpredicted");
  const std::string bare = (in.dir / "strategy0.json").string();  // a plain strategy file
  auto r = run_hetplan("report --predictions " + bare + " --measurements " + in.measurements +
                       " --out " + (dir / "r.html").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, bare + ": predicted: missing: expected the output of hetplan "
                                        "predict --json or search --json (a strategy with its "
                                        "prediction), not a strategy file"))
      << r.output;
  EXPECT_FALSE(fs::exists(dir / "r.html"));

  // {"model", "strategy"} without "predicted", and a search output missing one.
  Json p = load_document(in.predictions[0]).root;
  p.erase("predicted");
  std::ofstream(dir / "nopredicted.json") << p.dump();
  r = run_hetplan("report --predictions " + (dir / "nopredicted.json").string() + " --out " +
                  (dir / "r.html").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "nopredicted.json: predicted: missing")) << r.output;
  Json s = load_document(in.search).root;
  s["strategies"][1].erase("predicted");
  std::ofstream(dir / "search.json") << s.dump();
  r = run_hetplan("report --predictions " + (dir / "search.json").string() + " --out " +
                  (dir / "r.html").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "search.json: strategies[1]: predicted: missing")) << r.output;
  fs::remove_all(dir);
}

TEST(ReportInputs, MetricsOfNoPairsAreNullAndJsonToStdoutIsJsonAlone) {
  const auto& in = testing::report_inputs();
  const auto dir = testing::temp_dir("report_nopairs");
  // The search's strategies match none of the measured ones.
  const std::string cmd =
      "report --predictions " + in.search + " --out " + (dir / "r.html").string();
  auto r = run_hetplan(cmd + " --json " + (dir / "r.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Json data = load_document(dir / "r.json").root;
  const Json& it = data["metrics"]["iteration"];
  EXPECT_EQ(it["count"], 0);
  for (const char* key : {"median_ape", "p90_ape", "max_ape", "median_signed"}) {
    EXPECT_TRUE(it[key].is_null()) << key;
    EXPECT_TRUE(data["metrics"]["memory"][key].is_null()) << key;
  }
  std::ifstream html(dir / "r.html");
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(contains(page, "no matched pair with both times"));

  // stdout alone parses as the report (the summary goes to stderr).
  const std::string out = (dir / "stdout.json").string();
  const int status = std::system(
      (std::string(HETPLAN_BINARY) + " " + cmd + " --json - > " + out + " 2>/dev/null").c_str());
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(load_document(out).root["format"], "hetplan-report");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
