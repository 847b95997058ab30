// The stage column of `hetplan search`'s table (report/run_text.h): one format for every
// pipeline, short or long.
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "report/run_text.h"

namespace hetplan {
namespace {

// Stages of `layers` layers each on the GPU types `gpus`, in model order from layer 0.
std::vector<StagePrediction> stages_of(const std::vector<int64_t>& layers,
                                       const std::vector<std::string>& gpus) {
  std::vector<StagePrediction> out;
  int64_t first = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    StagePrediction s;
    s.stage.first_layer = first;
    s.stage.last_layer = first + layers[i] - 1;
    s.stage.gpu_type = gpus[i];
    first += layers[i];
    out.push_back(s);
  }
  return out;
}

// QA: the column switched from "0-13 a100-40gb | 14-14 t4 | ..." to "layers/stage 5,5,4,1" (no
// GPU types) once the first form passed 60 characters.
TEST(SearchTable, LayersPerStageByGpuTypeWhateverTheLength) {
  EXPECT_EQ(stage_layers_summary(stages_of({26}, {"t4"})), "t4 26");
  EXPECT_EQ(stage_layers_summary(stages_of({14, 1, 1, 10}, {"a100-40gb", "t4", "t4", "a100-40gb"})),
            "a100-40gb 14 | t4 1,1 | a100-40gb 10");
  // amp-hetero's V schedule: 8 virtual stages, V100 and T4 alternating in model order.
  EXPECT_EQ(stage_layers_summary(stages_of({5, 5, 4, 1, 1, 5, 4, 1}, {"v100", "v100", "v100", "t4",
                                                                      "t4", "v100", "v100", "t4"})),
            "v100 5,5,4 | t4 1,1 | v100 5,4 | t4 1");
  // Runs of three or more stages of one count: "6(x4)" is four stages of 6 layers ("4x6" was
  // read both ways).
  EXPECT_EQ(stage_layers_summary(stages_of(
                {7, 6, 6, 6, 6, 5, 5},
                {"h100-sxm", "h100-sxm", "h100-sxm", "h100-sxm", "h100-sxm", "v100", "v100"})),
            "h100-sxm 7,6(x4) | v100 5,5");
  // Past the width: cut at the last stage that fits, the rest counted.
  std::vector<int64_t> layers;
  std::vector<std::string> gpus;
  for (int i = 0; i < 20; ++i) {
    layers.push_back(1 + i % 2);
    gpus.push_back(i < 10 ? "a100-40gb" : "v100");
  }
  const std::string all = stage_layers_summary(stages_of(layers, gpus), 1000);
  EXPECT_EQ(all, "a100-40gb 1,2,1,2,1,2,1,2,1,2 | v100 1,2,1,2,1,2,1,2,1,2");
  EXPECT_EQ(stage_layers_summary(stages_of(layers, gpus), 40),
            "a100-40gb 1,2,1,2,1,2,1,2 ... +12 stages");
  EXPECT_LE(stage_layers_summary(stages_of(layers, gpus), 40).size(), 40u);
  EXPECT_EQ(stage_layers_summary(stages_of(layers, gpus)),
            "a100-40gb 1,2,1,2,1,2,1,2,1,2 | v100 1,2,1,2,1 ... +5 stages");  // 60 characters
}

// Every row of a real search prints the column in that one format, and its counts add up to the
// model's 26 layers (gpt2-medium: embedding, 24 blocks, head) where the list is whole.
TEST(SearchTable, EveryRowOfASearchHasTheOneFormat) {
  const auto r = testing::run_hetplan(
      "search --model gpt2-medium --cluster amp-hetero --global-batch 64 --top 20");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::regex item(R"((?:^| \| )([a-z0-9.-]+) (\d+(?:\(x\d+\))?(?:,\d+(?:\(x\d+\))?)*))");
  std::istringstream lines(r.output);
  std::string line;
  int rows = 0;
  bool header = false;
  while (std::getline(lines, line)) {
    const size_t at = line.find("  ", line.find("GiB"));
    if (line.find("layers per stage") != std::string::npos) header = true;
    if (!header || line.find("GiB") == std::string::npos || at == std::string::npos) continue;
    std::string column = line.substr(at + 2);
    // A list cut short ends "... +N stages" (the interleaved rows of 3 chunks and more).
    const std::regex cut(R"( \.\.\. \+\d+ stages$)");
    const bool whole = !std::regex_search(column, cut);
    column = std::regex_replace(column, cut, "");
    int64_t layers = 0;
    std::string rebuilt;
    for (auto it = std::sregex_iterator(column.begin(), column.end(), item);
         it != std::sregex_iterator(); ++it) {
      rebuilt += it->str();
      std::istringstream counts((*it)[2].str());
      std::string c;
      while (std::getline(counts, c, ',')) {
        const size_t x = c.find("(x");
        layers += x == std::string::npos ? std::stoll(c)
                                         : std::stoll(c.substr(0, x)) * std::stoll(c.substr(x + 2));
      }
    }
    EXPECT_EQ(rebuilt, column) << line;
    if (whole)
      EXPECT_EQ(layers, 26) << line;
    else
      EXPECT_LT(layers, 26) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 20) << r.output;
}

}  // namespace
}  // namespace hetplan
