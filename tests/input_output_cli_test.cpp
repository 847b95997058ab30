// Inputs given twice and outputs that would replace inputs, across the commands that read
// calibration, measurements and logs (docs/cli.md "Inputs and outputs").
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/atomic_file.h"
#include "costmodel/calibration.h"
#include "costmodel/document.h"
#include "costmodel/input_files.h"
#include "costmodel/version.h"
#include "test_util.h"

namespace hetplan {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::run_hetplan;
using testing::temp_dir;

const fs::path kAmp = fs::path(HETPLAN_EXTERNAL_DATA) / "amp" / "known_cost";
const fs::path kSample = fs::path(HETPLAN_TEST_DATA) / "calibration" / "a100-sample.json";
const fs::path kRepoStrategy = fs::path(HETPLAN_TEST_DATA).parent_path().parent_path() /
                               "examples" / "strategies" / "gpt2-medium-g4dn.json";

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

TEST(RepeatedInputs, SameFileByAnyPathOrSameBytes) {
  const auto dir = temp_dir("repeated_inputs");
  write_text(dir / "a.json", "{\"x\": 1}");
  write_text(dir / "b.json", "{\"x\": 1}");
  write_text(dir / "c.json", "{\"x\": 2}");
  fs::create_directories(dir / "sub");
  const auto r = repeated_inputs({dir / "a.json", dir / "c.json", dir / "sub" / ".." / "a.json",
                                  dir / "b.json", dir / "c.json"});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].same_file);
  EXPECT_EQ(r[0].index, 2u);
  EXPECT_EQ(r[0].first, dir / "a.json");
  EXPECT_FALSE(r[1].same_file);  // b.json is a copy of a.json
  EXPECT_EQ(r[1].index, 3u);
  EXPECT_EQ(r[1].first, dir / "a.json");
  EXPECT_TRUE(r[2].same_file);
  EXPECT_EQ(describe(r[1]),
            (dir / "b.json").string() + ": the same content as " + (dir / "a.json").string());
  EXPECT_TRUE(repeated_inputs({dir / "a.json", dir / "c.json"}).empty());
  fs::remove_all(dir);
}

// AMP's T4 layer times given twice summed every layer twice: predict took 4.358 s for 2.222 s.
TEST(RepeatedInputs, FileProducingCommandsRefuseThemAndPredictReadsThemOnce) {
  const auto dir = temp_dir("repeated_cli");
  const std::string t4 = (dir / "t4.json").string();
  ASSERT_EQ(run_hetplan("import --format amp " + (kAmp / "gpt2_G4_1.npy").string() + " " +
                        (kAmp / "gpt2_G4_2.npy").string() + " --out " + t4)
                .exit_code,
            0);
  fs::copy_file(t4, dir / "copy.json");

  auto r = run_hetplan("fit " + t4 + " " + t4 + " --out " + (dir / "p.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, t4 + ": the same file as " + t4)) << r.output;
  EXPECT_FALSE(fs::exists(dir / "p.json"));
  r = run_hetplan("fit " + t4 + " " + dir.string() + " --out " + (dir / "p.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;  // the folder holds t4.json and a copy of it
  r = run_hetplan("merge " + t4 + " " + (dir / "copy.json").string() + " --out " +
                  (dir / "m.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "copy.json: the same content as " + t4)) << r.output;
  const std::string npy = (kAmp / "gpt2_G4_1.npy").string();
  r = run_hetplan("import --format amp " + npy + " " + npy + " --out " + (dir / "a.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_FALSE(fs::exists(dir / "a.json"));

  write_text(dir / "s.json", R"({"dp": 2, "tp": 2, "pp": 4, "micro_batch": 2, "global_batch": 32,
    "schedule": "1f1b", "recompute": "none", "zero": 0, "flash_attention": false})");
  auto predict = [&](const std::string& calibration, const std::string& out) {
    auto p =
        run_hetplan("predict --model gpt2-medium --cluster g4dn.12xlarge:4 --strategy " +
                    (dir / "s.json").string() + calibration + " --json " + (dir / out).string());
    EXPECT_EQ(p.exit_code, 0) << p.output;
    return std::make_pair(load_document(dir / out).root["predicted"]["iteration_s"].get<double>(),
                          p.output);
  };
  const auto once = predict(" --calibration " + t4, "once.json");
  const auto twice = predict(" --calibration " + t4 + " --calibration " + t4, "twice.json");
  EXPECT_EQ(once.first, twice.first);
  EXPECT_TRUE(contains(twice.second, "note: " + t4 + ": the same file as " + t4 + ": read once"))
      << twice.second;
  fs::remove_all(dir);
}

// merge and fit-collectives take folders as fit does; a profile among their inputs is bad input;
// an AMP folder stands for its arrays.
TEST(FolderInputs, CalibrationFoldersAndAmpFolders) {
  const auto dir = temp_dir("folder_inputs");
  fs::create_directories(dir / "cal");
  fs::copy_file(kSample, dir / "cal" / "a100.json");
  auto r = run_hetplan("merge " + (dir / "cal").string() + " --out " + (dir / "m.json").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "merged 1 files")) << r.output;
  r = run_hetplan("fit " + (dir / "cal").string() + " --out " + (dir / "cal" / "p.json").string() +
                  " --holdout-every 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_hetplan("merge " + (dir / "cal").string() + " --out " + (dir / "m.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "p.json: format: expected \"hetplan-calibration\": this is a "
                       "profile, which merge does not read"))
      << r.output;
  r = run_hetplan("fit-collectives " + (dir / "cal").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;

  fs::create_directories(dir / "g4");
  for (int tp : {1, 2, 4}) {
    const std::string name = "gpt2_G4_" + std::to_string(tp) + ".npy";
    fs::copy_file(kAmp / name, dir / "g4" / name);
  }
  r = run_hetplan("import --format amp " + (dir / "g4").string() + " --out " +
                  (dir / "t4.json").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "90 layer_forward records for t4")) << r.output;
  fs::remove_all(dir);
}

// QA's cases: each run exited 0 and replaced its input with its output.
TEST(OutputChecks, AnOutputThatIsAnInputIsRefusedBeforeAnyWork) {
  const auto dir = temp_dir("output_checks");
  const std::string cal = (dir / "a100.json").string();
  fs::copy_file(kSample, cal);
  const auto before = fs::file_size(cal);
  struct Case {
    std::string args, message;
  };
  const std::string sub = (dir / "sub").string();
  fs::create_directories(sub);
  fs::copy_file(kSample, dir / "sub" / "in.json");
  const Case cases[] = {
      {"fit " + cal + " --out " + cal, "--out " + cal + ": also an input (" + cal + ")"},
      {"fit " + cal + " --out " + (dir / "p.json").string() + " --json " +
           (dir / "p.json").string(),
       "--json " + (dir / "p.json").string() + ": the same file as --out " +
           (dir / "p.json").string()},
      {"fit " + sub + " --out " + sub + "/in.json", "also an input"},  // under an input folder
      {"fit " + cal + " --out " + (dir / ".." / dir.filename() / "a100.json").string(),
       "also an input"},
      {"merge " + cal + " --out " + cal, "also an input"},
      {"fit-collectives " + cal + " --out " + cal, "also an input"},
      {"import --format kernel-bench " + cal + " --out " + cal, "also an input"},
      {"report --predictions " + cal + " --out " + cal, "also an input"},
      {"fit " + cal + " --out " + (dir / "no" / "p.json").string(),
       "--out " + (dir / "no" / "p.json").string() + ": no folder " + (dir / "no").string() +
           "; create it first"},
      {"fit " + cal + " --out " + dir.string(), ": a folder; expected a file to write"},
      // Before minutes of measuring, not after (with or without a GPU).
      {"calibrate --quick --out " + (dir / "no" / "c.json").string(), "no folder"},
      {"calibrate-collectives --out " + (dir / "no" / "c.json").string(), "no folder"},
  };
  for (const auto& c : cases) {
    const auto r = run_hetplan(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << "\n" << r.output;
    EXPECT_EQ(fs::file_size(cal), before) << c.args;
  }
  EXPECT_FALSE(fs::exists(dir / "p.json"));
  fs::remove_all(dir);
}

// The planning commands check their outputs too, before any work.
TEST(OutputChecks, PlanningCommandsRefuseToWriteOverTheirInputs) {
  const auto dir = temp_dir("planning_outputs");
  const std::string s = (dir / "s.json").string();
  write_text(s, R"({"dp": 4, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 32})");
  const std::string strategy = " --model gpt2-medium --cluster g4dn.12xlarge:1 --strategy " + s;
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"predict" + strategy + " --json " + s, "--json " + s + ": also an input"},
           {"export --strategy " + s + " --model gpt2-medium --format megatron --out " + s,
            "--out " + s + ": also an input"},
           {"measure --model gpt2-medium --strategy " + s + " --out " + s,
            "--out " + s + ": also an input"},
           {"search --model gpt2-medium --cluster g4dn.12xlarge:1 --global-batch 8 --json "
            "/nonexistent-hetplan/x.json",
            "--json /nonexistent-hetplan/x.json: no folder /nonexistent-hetplan"},
           {"simulate --schedule 1f1b --stages 2 --microbatches 2 --forward 1 --backward-input 1 "
            "--backward-weight 1 --json " +
                dir.string(),
            "--json " + dir.string() + ": a folder; expected a file to write"}}) {
    const auto r = run_hetplan(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, message)) << args << "\n" << r.output;
  }
  // The strategy is untouched.
  EXPECT_EQ(load_document(s).root["dp"], 4);
  fs::remove_all(dir);
}

// QA: an output that is a symbolic link was replaced by a regular file (the rename of the atomic
// write), and the file it pointed to kept its old content.
TEST(OutputChecks, AnOutputThroughASymbolicLinkReplacesItsTarget) {
  const auto dir = temp_dir("symlink_output");
  fs::create_directories(dir / "store");
  write_text(dir / "store" / "real.json", "old");
  fs::create_symlink("store/real.json", dir / "link.json");   // relative to the link's folder
  fs::create_symlink(dir / "link.json", dir / "chain.json");  // a link to a link
  write_json_atomically(Json{{"x", 1}}, dir / "chain.json");
  EXPECT_TRUE(fs::is_symlink(dir / "chain.json"));
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  EXPECT_EQ(Json::parse(std::ifstream(dir / "store" / "real.json")), (Json{{"x", 1}}));
  EXPECT_EQ(write_target(dir / "chain.json"), dir / "store" / "real.json");
  EXPECT_FALSE(fs::exists(dir / "store" / "real.json.tmp"));
  EXPECT_FALSE(fs::exists(dir / "chain.json.tmp"));
  // A link to a file not written yet: the file is created where the link leads.
  fs::create_symlink("store/new.json", dir / "dangling.json");
  write_json_atomically(Json{{"x", 2}}, dir / "dangling.json");
  EXPECT_TRUE(fs::is_symlink(dir / "dangling.json"));
  EXPECT_EQ(Json::parse(std::ifstream(dir / "store" / "new.json")), (Json{{"x", 2}}));

  // Through the CLI: the profile `fit` writes lands in the target.
  const auto r = run_hetplan("fit " + kSample.string() + " --out " + (dir / "link.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  EXPECT_EQ(Json::parse(std::ifstream(dir / "store" / "real.json"))["format"], "hetplan-profile");
  // The folder checked before any work is the target's; a loop of links is bad input.
  fs::create_symlink("nowhere/p.json", dir / "lost.json");
  auto bad = run_hetplan("fit " + kSample.string() + " --out " + (dir / "lost.json").string());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, "--out " + (dir / "lost.json").string() + ": no folder " +
                                       (dir / "nowhere").string() + "; create it first"))
      << bad.output;
  // Text outputs (simulate --json, export --out) are written the same way.
  fs::create_symlink("store/timeline.json", dir / "timeline.json");
  const auto sim = run_hetplan(
      "simulate --schedule 1f1b --stages 2 --microbatches 2 --forward 1 --backward-input 1 "
      "--backward-weight 1 --json " +
      (dir / "timeline.json").string());
  ASSERT_EQ(sim.exit_code, 0) << sim.output;
  EXPECT_TRUE(fs::is_symlink(dir / "timeline.json"));
  EXPECT_EQ(Json::parse(std::ifstream(dir / "store" / "timeline.json"))["makespan"], 9);
  fs::create_symlink("store/megatron.sh", dir / "megatron.sh");
  const auto exp =
      run_hetplan("export --strategy " + kRepoStrategy.string() +
                  " --model gpt2-medium --format megatron --out " + (dir / "megatron.sh").string());
  ASSERT_EQ(exp.exit_code, 0) << exp.output;
  EXPECT_TRUE(fs::is_symlink(dir / "megatron.sh"));
  std::stringstream exported;
  exported << std::ifstream(dir / "store" / "megatron.sh").rdbuf();
  EXPECT_TRUE(contains(exported.str(), "MEGATRON_ARGS=(")) << exported.str();
  fs::create_symlink("loop-b.json", dir / "loop-a.json");
  fs::create_symlink("loop-a.json", dir / "loop-b.json");
  bad = run_hetplan("fit " + kSample.string() + " --out " + (dir / "loop-a.json").string());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, "--out " + (dir / "loop-a.json").string() + ": " +
                                       (dir / "loop-a.json").string() +
                                       ": too many levels of symbolic links"))
      << bad.output;
  fs::remove_all(dir);
}

std::string read_text(const fs::path& p) {
  std::stringstream text;
  text << std::ifstream(p, std::ios::binary).rdbuf();
  return text.str();
}

// A QA pass over bad input, as a user who makes mistakes: each case below crashed, exited 0 or 1,
// or named neither the file nor the key.
// One version, CMake's project version, in `--version` and in what the planning commands write.
TEST(Version, OutputsCarryTheProjectVersion) {
  std::ifstream cmake(std::string(HETPLAN_SOURCE_DIR) + "/CMakeLists.txt");
  std::stringstream text;
  text << cmake.rdbuf();
  std::smatch m;
  const std::string lists = text.str();
  ASSERT_TRUE(std::regex_search(lists, m, std::regex(R"(project\(hetplan VERSION ([0-9.]+))")));
  const std::string project = m[1];
  EXPECT_EQ(std::string(version()), project);
  // The commit follows the version (install_test.cpp checks its form).
  EXPECT_EQ(run_hetplan("--version").output.rfind("hetplan " + project + " (commit ", 0), 0u);
  const auto dir = temp_dir("version");
  const auto out = dir / "p.json";
  const auto r = run_hetplan("predict --model gpt2-medium --cluster g4dn.12xlarge:4 --strategy " +
                             std::string(HETPLAN_SOURCE_DIR) +
                             "/examples/strategies/gpt2-medium-g4dn.json --json " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(out);
  EXPECT_EQ(nlohmann::json::parse(in)["context"]["hetplan_version"], project);
  std::filesystem::remove_all(dir);
}

TEST(BadInput, StrategyDocumentsNameTheFileKeyAndExpectation) {
  const auto dir = temp_dir("bad_documents");
  const std::string predict = "predict --model gpt2-medium --cluster g4dn.12xlarge:4 --strategy ";
  const std::string fields = R"("dp": 2, "pp": 4, "global_batch": 32)";
  struct Case {
    std::string name, text, message;
  };
  const Case cases[] = {
      // nlohmann's number overflow escaped as "internal error", exit 1.
      {"big.json", R"({"tp": 1e400, "micro_batch": 2, )" + fields + "}",
       "big.json: tp: expected a number within +-1.8e308 (number overflow parsing '1e400')"},
      // 2^64 - 1 wrapped to int64: "expected a whole number > 0, found -1".
      {"wrap.json", R"({"tp": 18446744073709551615, "micro_batch": 2, )" + fields + "}",
       "wrap.json: tp: expected a whole number below 2^63, found the number "
       "18446744073709551615"},
      // Said only "micro_batch: missing"; the typo beside it went unmentioned.
      {"typo.json", R"({"tp": 2, "micro_batch_sise": 2, )" + fields + "}",
       "typo.json: micro_batch: missing: expected a whole number (the file has "
       "\"micro_batch_sise\": a misspelling of micro_batch?)"},
      // A required key's null read as missing, and the neighbour guessed at as its misspelling.
      {"null.json", R"({"tp": 2, "micro_batch": null, "micro_batches": 4, )" + fields + "}",
       "null.json: micro_batch: expected a whole number, found null"},
  };
  for (const auto& c : cases) {
    write_text(dir / c.name, c.text);
    const auto r = run_hetplan(predict + (dir / c.name).string());
    EXPECT_EQ(r.exit_code, 2) << c.name << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, (dir / c.name).string() + ": ")) << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.name << "\n" << r.output;
  }
  // A folder read as an empty document: "(top level): expected an object, found null".
  fs::create_directories(dir / "strategy.json");
  const auto r = run_hetplan(predict + (dir / "strategy.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(
      r.output, (dir / "strategy.json").string() + ": a folder; expected a JSON or YAML file"))
      << r.output;
  // Short keys are not guessed at: "dp" missing says nothing of "tp".
  write_text(dir / "short.json", R"({"tp": 2, "pp": 4, "micro_batch": 2, "global_batch": 32})");
  const auto short_key = run_hetplan(predict + (dir / "short.json").string());
  EXPECT_EQ(short_key.exit_code, 2) << short_key.output;
  EXPECT_TRUE(contains(short_key.output, "short.json: dp: missing: expected a whole number\n"))
      << short_key.output;
  fs::remove_all(dir);
}

// --threads 100000 could not start its threads: std::terminate, exit 134.
TEST(BadInput, ThreadCountsAreBoundedBeforeAnyThreadStarts) {
  for (const std::string& args :
       {std::string("search --model gpt2-medium --cluster g4dn.12xlarge:1 --global-batch 8"),
        std::string("provision --model gpt2-medium --nodes g4dn.12xlarge --global-batch 8"),
        std::string("serve --model llama1-30b --cluster g4dn.12xlarge:2")}) {
    const auto r = run_hetplan(args + " --threads 100000");
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output,
                         "--threads: expected a whole number of threads from 1 to 1024, got "
                         "100000"))
        << args << "\n"
        << r.output;
  }
}

// Helix's tables: "4,nan" was imported as a NaN time (from_chars reads "nan"), and a batch given
// twice became two measurements of it.
TEST(BadInput, HelixTablesRefuseNonFiniteTimesAndRepeatedBatches) {
  const auto dir = temp_dir("bad_helix");
  const fs::path t4 = dir / "llama1_30b" / "t4";
  fs::create_directories(t4);
  const fs::path source = fs::path(HETPLAN_EXTERNAL_DATA) / "helix/profiles/llama1_30b/t4";
  fs::copy_file(source / "prompt_bs2time.csv", t4 / "prompt_bs2time.csv");
  const std::string out = (dir / "t4.json").string();
  for (const auto& [row, message] : std::vector<std::pair<std::string, std::string>>{
           {"4,nan",
            ": line 3: expected \"batch,milliseconds\" (a whole number and a number, "
            "both >= 0), found \"4,nan\""},
           {"4,inf",
            ": line 3: expected \"batch,milliseconds\" (a whole number and a number, "
            "both >= 0), found \"4,inf\""},
           {"2,4.9", ": line 3: batch 2 again (also line 2): one row per batch"},
           {"4,1e12", ": line 3: 1000000000000 ms for batch 4: expected at most a day"}}) {
    write_text(t4 / "decode_bs2time.csv", "0,0\n2,4.7\n" + row + "\n8,5.3\n");
    const auto r = run_hetplan("import --format helix " + t4.string() + " --out " + out);
    EXPECT_EQ(r.exit_code, 2) << row << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, (t4 / "decode_bs2time.csv").string() + message)) << row << "\n"
                                                                                    << r.output;
    EXPECT_FALSE(fs::exists(out));
  }
  fs::remove_all(dir);
}

// AMP's file names carry the tensor-parallel degree: 0 divided by zero (SIGFPE, exit 136) and 20
// digits overflowed std::stoll ("internal error: stoll", exit 1).
TEST(BadInput, AmpDegreeInTheNameIsAWholeNumberOfAtLeastOne) {
  const auto dir = temp_dir("bad_amp_names");
  const fs::path array = kAmp / "gpt2_G4_1.npy";
  for (const std::string degree : {"0", "99999999999999999999"}) {
    const fs::path named = dir / ("gpt2_G4_" + degree + ".npy");
    fs::copy_file(array, named);
    const auto r = run_hetplan("import --format amp " + named.string() + " --out " +
                               (dir / "a.json").string());
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_TRUE(contains(r.output, named.string() + ": tensor-parallel degree " + degree +
                                       " in the name: expected a whole number >= 1"))
        << r.output;
    fs::remove(named);
  }
  EXPECT_FALSE(fs::exists(dir / "a.json"));
  // A data block shorter than its header says: the shape as Python writes it.
  std::string bytes = read_text(array);
  bytes.resize(bytes.size() - 40);
  write_text(dir / "gpt2_G4_1.npy", bytes);
  const auto r = run_hetplan("import --format amp " + (dir / "gpt2_G4_1.npy").string() + " --out " +
                             (dir / "a.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "expected 240 bytes of data for shape (30,) ('<f8'), found 200"))
      << r.output;
  // A time that is not finite or over a day: the calibration file could not hold the one (JSON
  // has no infinity; it was written as null) and the fit would be absurd with the other.
  for (const auto& [value, shown] : std::vector<std::pair<double, std::string>>{
           {std::numeric_limits<double>::infinity(), "inf"}, {1e300, "1e+300"}}) {
    bytes = read_text(array);
    std::memcpy(&bytes[bytes.size() - 240 + 3 * sizeof(double)], &value, sizeof(double));
    write_text(dir / "gpt2_G4_1.npy", bytes);
    const auto bad = run_hetplan("import --format amp " + (dir / "gpt2_G4_1.npy").string() +
                                 " --out " + (dir / "a.json").string());
    EXPECT_EQ(bad.exit_code, 2) << bad.output;
    EXPECT_TRUE(contains(bad.output,
                         "gpt2_G4_1.npy: [3]: expected a forward time > 0 s, at most a "
                         "day, found " +
                             shown))
        << bad.output;
    EXPECT_FALSE(fs::exists(dir / "a.json"));
  }
  fs::remove_all(dir);
}

// serve checked only that --json's folder existed: --json CLUSTER.ini replaced the cluster file
// with the result (exit 0).
TEST(BadInput, ServeNeverWritesItsResultOverAnInput) {
  const auto dir = temp_dir("serve_json_input");
  const fs::path helix = fs::path(HETPLAN_EXTERNAL_DATA) / "helix" / "clusters";
  fs::copy_file(helix / "single24.ini", dir / "single24.ini");
  fs::copy_file(helix / "machine_profiles.ini", dir / "machine_profiles.ini");
  const std::string cluster = (dir / "single24.ini").string();
  // The cluster file, and the machine_profiles.ini serve finds next to it, are both read.
  for (const std::string& input : {cluster, (dir / "machine_profiles.ini").string()}) {
    const std::string before = read_text(input);
    const auto r = run_hetplan("serve --model llama1-30b --cluster " + cluster +
                               " --time-limit 1 --no-simulation --quiet --json " + input);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_TRUE(contains(r.output, "--json " + input + ": also an input (" + input + ")"))
        << r.output;
    EXPECT_EQ(read_text(input), before);
  }
  fs::remove_all(dir);
}

// Flags that were passed on unchecked: calibrate-collectives looked for the GPU first (exit 1 on
// a machine without one, whatever the flags), measure took a NaN budget.
TEST(BadInput, MeasuringFlagsAreCheckedBeforeTheGpuIsLookedFor) {
  const auto dir = temp_dir("bad_measure_flags");
  const std::string out = " --out " + (dir / "c.json").string();
  write_text(dir / "s.json",
             R"({"dp": 4, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 32})");
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"calibrate-collectives --intra-link warp" + out, "--intra-link: warp not in"},
           {"calibrate-collectives --collective-timeout 0" + out,
            "--collective-timeout: expected seconds > 0, found 0"},
           {"calibrate-collectives --max-gpus -1" + out,
            "--max-gpus: expected a number of GPUs >= 1 (0: every visible GPU), found -1"},
           {"measure --model gpt2-medium --strategy " + (dir / "s.json").string() +
                " --dry-run --budget-s nan" + out,
            "--budget-s: expected a number > 0, got nan"}}) {
    const auto r = run_hetplan(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, message)) << args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(dir / "c.json"));
  fs::remove_all(dir);
}

// A flag the chosen format does not read, and a calibration folder with nothing in it, used to be
// passed over without a word (exit 0): the user believed they had changed something.
TEST(BadInput, FlagsTheFormatIgnoresAndEmptyCalibrationFoldersAreRefused) {
  const auto dir = temp_dir("bad_ignored_flags");
  fs::create_directories(dir / "empty");
  const std::string npy = (kAmp / "gpt2_G4_1.npy").string();
  const std::string out = " --out " + (dir / "o.json").string();
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"import --format amp " + npy + " --pp 2" + out,
            "--pp: --format amp does not read it (it reads --model --gpu-type --tp)"},
           {"import --format amp " + npy + " --warmup 3" + out,
            "--warmup: --format amp does not read it"},
           {"import --format helix " + npy + " --tp 2" + out,
            "--tp: --format helix does not read it (it reads --model --gpu-type)"},
           {"import --format megatron " + npy + " --recompute full" + out,
            "--recompute: --format megatron does not read it"},
           {"export --strategy " + kRepoStrategy.string() +
                " --model gpt2-medium --format megatron --torchtitan-split-points" + out,
            "--torchtitan-split-points: a torchtitan option; --format megatron does not read it"},
           {"predict --model gpt2-medium --cluster g4dn.12xlarge:4 --strategy " +
                kRepoStrategy.string() + " --calibration " + (dir / "empty").string(),
            "empty: a folder with no .json calibration file under it"},
           {"fit " + (dir / "empty").string() + out,
            "empty: a folder with no .json calibration file under it"}}) {
    const auto r = run_hetplan(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, message)) << args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(dir / "o.json"));
  // The flags a format does read still pass.
  const auto r = run_hetplan("import --format amp " + npy + " --tp 1 --gpu-type t4" + out);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
