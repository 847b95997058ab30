// `cmake --install` and the Debian package (cmake/Install.cmake): the installed binary finds what
// it ships, prints its version and commit, and the package depends on Debian's packages only.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/document.h"
#include "costmodel/version.h"
#include "test_util.h"

namespace hetplan {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::temp_dir;

struct Shell {
  int status = -1;
  std::string output;
};

Shell shell(const std::string& cmd) {
  Shell r;
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

// Installs this build into a fresh prefix under /tmp, once for the tests below.
const fs::path& installed_prefix() {
  static const fs::path prefix = [] {
    const fs::path p = temp_dir("install") / "prefix";
    fs::remove_all(p);
    const Shell r = shell(std::string(HETPLAN_CMAKE_COMMAND) + " --install " +
                          quoted(HETPLAN_BUILD_DIR) + " --prefix " + quoted(p));
    EXPECT_EQ(r.status, 0) << r.output;
    return p;
  }();
  return prefix;
}

TEST(Install, TheInstalledBinaryFindsItsCalibrationDataAndExamples) {
  const fs::path& prefix = installed_prefix();
  const fs::path hetplan = prefix / "bin" / "hetplan";
  ASSERT_TRUE(fs::exists(hetplan));
  const fs::path share = prefix / "share" / "hetplan";
  EXPECT_TRUE(fs::exists(share / "calibration_data" / "datasheet" / "t4.json"));
  EXPECT_TRUE(fs::exists(share / "presets" / "models" / "gpt2-medium.yaml"));
  EXPECT_TRUE(fs::exists(share / "scripts" / "reference_train.py"));
  EXPECT_TRUE(fs::exists(share / "scripts" / "reference" / "train.py"));
  // The GPU module beside the binary's lib/ where CUDA was built, and nowhere otherwise.
#ifdef HETPLAN_HAVE_CUDA
  EXPECT_TRUE(fs::exists(prefix / "lib" / "hetplan" / "libhetplan_gpu.so"));
#else
  EXPECT_FALSE(fs::exists(prefix / "lib"));
#endif

  // The README's quick start, run from another folder than the source tree.
  const std::string run = "cd / && " + quoted(hetplan) + " ";
  const Shell models = shell(run + "models");
  EXPECT_EQ(models.status, 0) << models.output;
  EXPECT_TRUE(contains(models.output, "gpt2-medium")) << models.output;
  const fs::path json = temp_dir("install") / "prediction.json";
  const Shell predict =
      shell(run + "predict --model gpt2-medium --cluster g4dn.12xlarge:4 --strategy " +
            quoted(share / "examples" / "strategies" / "gpt2-medium-g4dn.json") + " --json " +
            quoted(json));
  ASSERT_EQ(predict.status, 0) << predict.output;
  const Json j = load_document(json).root;
  EXPECT_EQ(j["predicted"]["feasible"], true);
  // The shipped calibration it read is the installed copy, not the source tree's (the list also
  // holds the origins a shipped profile records of its own fit).
  const std::string t4 = (share / "calibration_data" / "datasheet" / "t4.json").string();
  bool read_installed = false;
  for (const auto& file : j["context"]["calibration"]) read_installed |= file == t4;
  EXPECT_TRUE(read_installed) << j["context"]["calibration"].dump();
}

TEST(Install, VersionNamesTheCommit) {
  const Shell r = shell(quoted(installed_prefix() / "bin" / "hetplan") + " --version");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, version_line() + "\n");
  const std::string commit = hetplan::commit();
  const Shell git = shell("git -C " + quoted(HETPLAN_SOURCE_DIR) + " rev-parse --short=12 HEAD");
  if (git.status == 0) {
    // The hash of the checkout the build was configured in (and "-dirty" when it had changes).
    EXPECT_TRUE(std::regex_match(commit, std::regex("[0-9a-f]{12}(-dirty)?"))) << commit;
    EXPECT_EQ(commit.substr(0, 12), git.output.substr(0, 12));
  } else {
    EXPECT_EQ(commit, "unknown");
  }
  EXPECT_TRUE(contains(r.output, "hetplan " + std::string(version()) + " (commit ")) << r.output;
}

// The Debian package: built by CPack where dpkg-shlibdeps is there (dpkg-dev), its files where
// the installed binary looks, and its dependencies Debian's own packages (each one apt knows).
TEST(Install, TheDebianPackageDependsOnDebiansPackagesOnly) {
  if (shell("command -v dpkg-shlibdeps && command -v dpkg-deb && command -v apt-cache").status != 0)
    GTEST_SKIP() << "dpkg-dev or apt not installed";
  const fs::path out = temp_dir("package");
  fs::remove_all(out);
  fs::create_directories(out);
  const fs::path cpack = fs::path(HETPLAN_CMAKE_COMMAND).parent_path() / "cpack";
  const Shell r = shell("cd " + quoted(out) + " && " + quoted(cpack) + " --config " +
                        quoted(fs::path(HETPLAN_BUILD_DIR) / "CPackConfig.cmake"));
  ASSERT_EQ(r.status, 0) << r.output;
  const fs::path deb = out / ("hetplan_" + std::string(version()) + "_amd64.deb");
  ASSERT_TRUE(fs::exists(deb)) << r.output;
  const Shell files = shell("dpkg-deb -c " + quoted(deb));
  EXPECT_TRUE(contains(files.output, "./usr/bin/hetplan")) << files.output;
  EXPECT_TRUE(contains(files.output, "./usr/share/hetplan/calibration_data/datasheet/t4.json"));
  EXPECT_FALSE(contains(files.output, "libhetplan_gpu.so")) << "the module is hetplan-gpu's";
  const Shell depends = shell("dpkg-deb -f " + quoted(deb) + " Depends");
  ASSERT_EQ(depends.status, 0) << depends.output;
  EXPECT_TRUE(contains(depends.output, "libc6")) << depends.output;
  std::stringstream list(depends.output);
  std::string entry;
  while (std::getline(list, entry, ',')) {
    const std::string name = std::regex_replace(entry, std::regex("^\\s*([^ ]+).*\\s*$"), "$1");
    EXPECT_EQ(shell("apt-cache show " + name + " > /dev/null").status, 0)
        << name << " is no package apt knows (" << depends.output << ")";
  }
#ifdef HETPLAN_HAVE_CUDA
  const fs::path gpu = out / ("hetplan-gpu_" + std::string(version()) + "_amd64.deb");
  ASSERT_TRUE(fs::exists(gpu)) << r.output;
  EXPECT_TRUE(
      contains(shell("dpkg-deb -c " + quoted(gpu)).output, "./usr/lib/hetplan/libhetplan_gpu.so"));
  EXPECT_TRUE(contains(shell("dpkg-deb -f " + quoted(gpu) + " Depends").output,
                       "hetplan (= " + std::string(version()) + ")"));
#endif
  fs::remove_all(out);
}

}  // namespace
}  // namespace hetplan
