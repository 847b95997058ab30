// Inputs that hung hetplan or ate the machine (issue 39): an alias bomb in each kind of YAML input,
// integers past what the strategy's arithmetic holds. Each is exit status 2 naming the file and
// what was expected.
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/document.h"
#include "test_util.h"

namespace hetplan {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::run_hetplan;
using testing::temp_dir;

const fs::path kExamples = fs::path(HETPLAN_SOURCE_DIR) / "examples";

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// Nine lines of nested aliases, 9^9 strings when expanded, under `key` (a key each reader knows,
// so that only the expansion can refuse it); its fifth line is where the bound is crossed
// (tests/yaml_document_test.cpp works the count out).
std::string alias_bomb(const std::string& key) {
  std::string text = key +
                     ":\n  a: &a [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", "
                     "\"lol\", \"lol\", \"lol\"]\n";
  const std::string names = "abcdefghi";
  for (size_t i = 1; i < names.size(); ++i) {
    std::string aliases;
    for (int k = 0; k < 9; ++k) aliases += fmt::format("{}*{}", k ? ", " : "", names[i - 1]);
    text += fmt::format("  {}: &{} [{}]\n", names[i], names[i], aliases);
  }
  return text;
}

// Every YAML input of the commands: the bomb is refused at line 6 (the key's line first), exit 2,
// naming the file. Before, `predict --model FILE` grew past 3.9 GB until it was killed.
TEST(HostileInput, AnAliasBombInAnyYamlInputIsExit2NamingTheFileAndLine) {
  const auto dir = temp_dir("alias_bomb");
  const std::string strategy = (kExamples / "strategies" / "gpt2-medium-g4dn.json").string();
  struct Case {
    std::string file, key, args;
  };
  const std::vector<Case> cases = {
      {"model.yaml", "block",
       "predict --model {} --cluster g4dn.12xlarge:4 --strategy " + strategy},
      {"cluster.yaml", "nodes", "search --model gpt2-medium --cluster {} --global-batch 8 --quiet"},
      {"strategy.yaml", "stages",
       "predict --model gpt2-medium --cluster g4dn.12xlarge:4 --strategy {}"},
      {"serving.yaml", "machine_types", "serve --model gpt2-medium --cluster {} --quiet"},
      {"node.yaml", "citations", "provision --model gpt2-medium --nodes {} --global-batch 8"},
      {"calibration.yaml", "gemm",
       "predict --model gpt2-medium --cluster g4dn.12xlarge:4 --strategy " + strategy +
           " --calibration {}"},
  };
  for (const Case& c : cases) {
    const fs::path file = dir / c.file;
    write_text(file, alias_bomb(c.key));
    const auto r = run_hetplan(fmt::format(fmt::runtime(c.args), file.string()));
    EXPECT_EQ(r.exit_code, 2) << c.file << ": " << r.output;
    EXPECT_TRUE(contains(r.output, file.string() + ": " + c.key +
                                       ".e[0]: line 6: *d takes what "
                                       "the file's aliases add past "
                                       "10000 values"))
        << c.file << ": " << r.output;
  }
  fs::remove_all(dir);
}

// QA: global_batch 4611686018427387904 (2^62) answered "stages: micro-batches: need at least 1":
// the micro-batch count did not fit the pipeline model's int. Each integer key of a strategy now
// names its range.
TEST(HostileInput, StrategyIntegersPastTheirRangeNameTheKeyAndTheLimit) {
  const auto dir = temp_dir("strategy_range");
  struct Case {
    std::string key, value;
  };
  const std::vector<Case> cases = {{"global_batch", "4611686018427387904"},
                                   {"micro_batch", "1048577"},
                                   {"dp", "1099511627776"},
                                   {"tp", "0"},
                                   {"pp", "9223372036854775807"},
                                   {"chunks", "4294967298"}};
  for (const Case& c : cases) {
    Json s = {{"dp", 4}, {"tp", 4}, {"pp", 1}, {"micro_batch", 1}, {"global_batch", 32}};
    s[c.key] = Json::parse(c.value);
    if (c.key == "chunks") s["schedule"] = "interleaved";
    const fs::path file = dir / "s.json";
    write_text(file, s.dump());
    const auto r = run_hetplan("predict --model gpt2-medium --cluster g4dn.12xlarge:4 --strategy " +
                               file.string());
    EXPECT_EQ(r.exit_code, 2) << c.key << ": " << r.output;
    const int64_t limit = 1 << 20;
    EXPECT_TRUE(contains(r.output, fmt::format("{}: {}: expected a whole number from 1 to {}, "
                                               "found {}",
                                               file.string(), c.key, limit, c.value)))
        << r.output;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
