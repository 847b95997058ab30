// Opens a report built from real hetplan outputs in headless Chromium: every chart must finish
// rendering with no script error, and a screenshot is saved under the build folder
// (report-browser-test/report.png). Skips with a message where Chromium is not installed
// (Debian packages chromium and chromium-driver; scripts/setup.sh installs them).
#include <cstdlib>
#include <filesystem>
#include <regex>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "report_fixture.h"

namespace hetplan {
namespace {

namespace fs = std::filesystem;

std::string find_chromium() {
  if (const char* env = std::getenv("HETPLAN_CHROMIUM")) return env;
  for (const char* path :
       {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (fs::exists(path)) return path;
  return "";
}

testing::CommandResult run(const std::string& cmd) {
  testing::CommandResult r;
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Chromium as root in a container: no sandbox, no GPU, no network, a fresh profile. The virtual
// time budget lets the page's timers and animation frames run before the dump or screenshot.
std::string chromium_command(const std::string& chromium, const fs::path& profile) {
  fs::remove_all(profile);
  fs::create_directories(profile);
  return chromium +
         " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
         "--disable-background-networking --disable-component-update --disable-sync "
         "--user-data-dir=" +
         profile.string() + " --virtual-time-budget=10000 --enable-logging=stderr --v=0";
}

TEST(ReportBrowser, RendersEveryChartWithoutErrors) {
  const std::string chromium = find_chromium();
  if (chromium.empty())
    GTEST_SKIP() << "Chromium not installed (Debian: apt-get install chromium chromium-driver, "
                    "or set HETPLAN_CHROMIUM): browser test skipped";
  const auto& files = testing::report_inputs();
  const fs::path out = fs::path(HETPLAN_BINARY).parent_path().parent_path() / "report-browser-test";
  fs::create_directories(out);
  const fs::path html = out / "report.html";
  // AMP's published T4 layer timings give the whole-layer chart.
  const fs::path amp = out / "amp-t4.json";
  const auto imported =
      testing::run_hetplan("import --format amp " + std::string(HETPLAN_EXTERNAL_DATA) +
                           "/amp/known_cost/gpt2_G4_1.npy --out " + amp.string());
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  std::string args = "report --measurements " + files.measurements + " --calibration " +
                     files.calibration + " --calibration " + amp.string() + " --out " +
                     html.string();
  for (const auto& p : files.predictions) args += " --predictions " + p;
  args += " --predictions " + files.search;
  const auto made = testing::run_hetplan(args);
  ASSERT_EQ(made.exit_code, 0) << made.output;

  const auto dom =
      run(chromium_command(chromium, out / "profile-dom") + " --dump-dom file://" + html.string());
  ASSERT_EQ(dom.exit_code, 0) << dom.output;
  std::smatch m;
  const std::regex status(
      R"re(id="hetplan-render-status" data-charts="(\d+)" data-rendered="(\d+)" data-errors="([^"]*)")re");
  ASSERT_TRUE(std::regex_search(dom.output, m, status)) << dom.output.substr(0, 4000);
  // Iteration and memory accuracy, GEMM and collective curves, whole layers, timeline, memory
  // per device.
  EXPECT_EQ(m[1].str(), "7");
  EXPECT_EQ(m[2].str(), "7");
  EXPECT_EQ(m[3].str(), "");
  EXPECT_EQ(dom.output.find("Uncaught"), std::string::npos) << dom.output.substr(0, 4000);
  for (const char* chart : {"chart-iteration", "chart-memory-accuracy", "chart-gemm",
                            "chart-collectives", "chart-layers", "chart-timeline", "chart-memory"})
    EXPECT_TRUE(std::regex_search(
        dom.output, std::regex(std::string("id=\"") + chart + "\"[^>]*data-rendered=\"true\"")))
        << chart;

  const fs::path png = out / "report.png";
  fs::remove(png);
  const auto shot =
      run(chromium_command(chromium, out / "profile-shot") +
          " --window-size=1400,3400 --screenshot=" + png.string() + " file://" + html.string());
  ASSERT_EQ(shot.exit_code, 0) << shot.output;
  ASSERT_TRUE(fs::exists(png)) << shot.output;
  EXPECT_GT(fs::file_size(png), 50000u);  // a page of charts, not a blank image
  std::cout << "screenshot: " << png.string() << "\n";
}

}  // namespace
}  // namespace hetplan
