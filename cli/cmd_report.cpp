// hetplan report: predicted against measured, as one self-contained HTML file.

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/validators.h"
#include "costmodel/atomic_file.h"
#include "costmodel/calibration.h"
#include "costmodel/errors.h"
#include "report/html.h"
#include "report/report_data.h"

namespace hetplan::cli {
namespace {

struct ReportCliOptions {
  ReportInputs in;
  std::string out, json;
};

}  // namespace

CommandRunner declare_report(CLI::App& app) {
  auto o = std::make_shared<ReportCliOptions>();
  app.add_option("--predictions", o->in.predictions,
                 "predict --json or search --json outputs (repeatable)")
      ->required();
  app.add_option("--measurements", o->in.measurements, "Measurements files (repeatable)");
  app.add_option("--calibration", o->in.calibration,
                 "Calibration files or folders, for the calibration curves (repeatable)");
  app.add_option("--out", o->out, "The HTML file to write")->required();
  app.add_option("--strategy-index", o->in.strategy_index,
                 "Whose pipeline timeline and memory to draw: the K-th strategy over all "
                 "--predictions in order (default 0, the best of a search)")
      ->check(kNonNegative);
  app.add_option("--title", o->in.title, "Page title");
  app.add_option("--json", o->json, "Also write the report's data (matches, metrics) as JSON");
  return [o]() {
    std::vector<std::string> inputs = o->in.predictions;
    inputs.insert(inputs.end(), o->in.measurements.begin(), o->in.measurements.end());
    inputs.insert(inputs.end(), o->in.calibration.begin(), o->in.calibration.end());
    check_outputs(inputs, {{"--out", o->out}, {"--json", o->json}});
    o->in.command = "hetplan report";
    for (const auto& p : o->in.predictions) o->in.command += " --predictions " + p;
    for (const auto& m : o->in.measurements) o->in.command += " --measurements " + m;
    for (const auto& c : o->in.calibration) o->in.command += " --calibration " + c;
    const Json data = build_report_data(o->in);
    write_text_atomically(render_report_html(data), o->out);
    if (!o->json.empty()) write_json_output(data, o->json);
    const Json& it = data["metrics"]["iteration"];
    std::string summary = fmt::format("{}: {} matched pairs", o->out, data["pairs"].size());
    if (it["count"].get<int64_t>() > 0)
      summary +=
          fmt::format(", iteration time median error {:.1f}%, p90 {:.1f}%",
                      100 * it["median_ape"].get<double>(), 100 * it["p90_ape"].get<double>());
    summary +=
        fmt::format("; {} measurements and {} predictions unmatched\n",
                    data["unmatched_measurements"].size(), data["unmatched_predictions"].size());
    // With --json - stdout is the JSON alone.
    fmt::print(o->json == "-" ? stderr : stdout, "{}", summary);
    return 0;
  };
}

}  // namespace hetplan::cli
