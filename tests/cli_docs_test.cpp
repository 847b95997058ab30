// docs/cli.md against the command itself: the table at its top has one row per command (issue 40),
// and the options a row documents are exactly those `hetplan <command> --help` prints, so that
// the two cannot drift apart. A failure lists every difference at once.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace hetplan {
namespace {

using testing::run_hetplan;

const std::filesystem::path kCliDoc = std::filesystem::path(HETPLAN_SOURCE_DIR) / "docs" / "cli.md";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::set<std::string> options_in(const std::string& text) {
  static const std::regex kOption(R"((^|[^A-Za-z0-9-])(--[a-z0-9][a-z0-9-]*))");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kOption);
       it != std::sregex_iterator(); ++it)
    out.insert((*it)[2]);
  return out;
}

// The table's rows by the commands their first cell names ("| `hetplan fit ...` |"): the options
// that cell, the usage, names (the description may name other tools' flags).
std::map<std::string, std::set<std::string>> documented_options() {
  std::ifstream in(kCliDoc);
  std::stringstream text;
  text << in.rdbuf();
  static const std::regex kCommand(R"(`hetplan ([a-z][a-z-]*))");
  std::map<std::string, std::set<std::string>> out;
  for (const std::string& line : lines_of(text.str())) {
    if (line.rfind("| `hetplan ", 0) != 0) continue;
    const std::string first_cell = line.substr(0, line.find(" | ", 2));
    const std::set<std::string> options = options_in(first_cell);
    for (auto it = std::sregex_iterator(first_cell.begin(), first_cell.end(), kCommand);
         it != std::sregex_iterator(); ++it)
      out[(*it)[1]].insert(options.begin(), options.end());
  }
  return out;
}

// The commands `hetplan --help` lists (CLI11: "SUBCOMMANDS:", then one indented line each).
std::vector<std::string> commands() {
  const auto r = run_hetplan("--help");
  std::vector<std::string> out;
  bool in_list = false;
  static const std::regex kEntry(R"(^  ([a-z][a-z-]*)\s)");
  for (const std::string& line : lines_of(r.output)) {
    if (line.rfind("SUBCOMMANDS", 0) == 0 || line.rfind("Subcommands", 0) == 0) {
      in_list = true;
      continue;
    }
    std::smatch m;
    if (in_list && std::regex_search(line, m, kEntry)) out.push_back(m[1]);
  }
  return out;
}

// The options `hetplan <command> --help` prints: the names at the start of its option lines
// ("  -h,--help", "  --out TEXT REQUIRED"), --help aside; descriptions are not read.
std::set<std::string> help_options(const std::string& command) {
  const auto r = run_hetplan(command + " --help");
  static const std::regex kLine(R"(^  (-[A-Za-z],)?(--[a-z0-9][a-z0-9-]*(,-{1,2}[A-Za-z0-9-]+)*))");
  std::set<std::string> out;
  for (const std::string& line : lines_of(r.output)) {
    std::smatch m;
    if (!std::regex_search(line, m, kLine)) continue;
    for (const std::string& name : options_in(m[2])) out.insert(name);
  }
  out.erase("--help");
  return out;
}

std::string listed(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : " ") + n;
  return out;
}

TEST(CliDocs, EveryCommandHasARowInDocsCliMd) {
  const auto documented = documented_options();
  const std::vector<std::string> all = commands();
  // The command table in cli/commands.cpp has 18 commands (models ... report).
  EXPECT_EQ(all.size(), 18u);
  for (const std::string& command : all)
    EXPECT_TRUE(documented.count(command)) << command << ": no row in docs/cli.md";
  for (const auto& [command, options] : documented)
    EXPECT_NE(std::find(all.begin(), all.end(), command), all.end())
        << "docs/cli.md documents `hetplan " << command
        << "`, which `hetplan --help` does not list";
}

TEST(CliDocs, EachRowDocumentsExactlyTheOptionsOfItsCommand) {
  const auto documented = documented_options();
  for (const std::string& command : commands()) {
    const std::set<std::string> help = help_options(command);
    ASSERT_FALSE(help.empty()) << command;
    const auto row = documented.find(command);
    if (row == documented.end()) continue;  // the test above says so
    std::set<std::string> missing, extra;
    for (const auto& o : help)
      if (!row->second.count(o)) missing.insert(o);
    for (const auto& o : row->second)
      if (!help.count(o)) extra.insert(o);
    EXPECT_TRUE(missing.empty()) << command << ": --help prints, docs/cli.md does not document: "
                                 << listed(missing);
    EXPECT_TRUE(extra.empty()) << command
                               << ": docs/cli.md documents, the command lacks: " << listed(extra);
  }
}

}  // namespace
}  // namespace hetplan
