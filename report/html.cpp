#include "report/html.h"

#include <fmt/format.h>

#include "report/assets.h"

namespace hetplan {
namespace {

std::string esc(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string str(const Json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

std::string percent(double x) { return fmt::format("{:.1f}%", 100 * x); }

// Green within 10%, amber within 25%, red beyond.
std::string error_class(double ape) { return ape <= 0.10 ? "good" : ape <= 0.25 ? "warn" : "bad"; }

std::string seconds(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  return fmt::format("{:.1f} ms", s * 1e3);
}

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024)); }

std::string metrics_table(const Json& m) {
  const Json& it = m["iteration"];
  const Json& mem = m["memory"];
  std::string s =
      "<table class=\"metrics\"><tr><th>metric</th><th class=\"num\">value</th>"
      "<th>over</th></tr>";
  auto row = [&](const std::string& name, const std::string& value, const std::string& cls,
                 const std::string& over) {
    s += fmt::format(
        "<tr><td>{}</td><td class=\"num big {}\">{}</td><td class=\"muted\">{}</td></tr>", name,
        cls, value, over);
  };
  const int64_t n = it["count"];
  if (n > 0) {
    row("iteration time: median absolute % error", percent(it["median_ape"]),
        error_class(it["median_ape"]), fmt::format("{} matched pairs", n));
    row("iteration time: p90 absolute % error", percent(it["p90_ape"]), error_class(it["p90_ape"]),
        fmt::format("max {}", percent(it["max_ape"])));
    row("iteration time: median signed error", percent(it["median_signed"]), "",
        "&gt; 0: predictions slower than measured");
  } else {
    row("iteration time", "-", "", "no matched pair with both times");
  }
  const Json& rho = m["throughput_spearman"];
  row("throughput: Spearman rank correlation",
      rho.is_null() ? "-" : fmt::format("{:.3f}", rho.get<double>()),
      rho.is_null()              ? ""
      : rho.get<double>() >= 0.8 ? "good"
                                 : "warn",
      rho.is_null() ? "needs two pairs with different throughputs" : "1 = same ranking");
  const int64_t nm = mem["count"];
  if (nm > 0) {
    row("peak memory: median absolute % error", percent(mem["median_ape"]),
        error_class(mem["median_ape"]), fmt::format("{} pairs with measured memory", nm));
    row("peak memory: p90 absolute % error", percent(mem["p90_ape"]), error_class(mem["p90_ape"]),
        fmt::format("median signed {}", percent(mem["median_signed"])));
  } else {
    row("peak memory", "-", "", "no matched pair with measured memory");
  }
  // How runs ended against what was foreseen: a failed run whose cause is unknown is not a run
  // that fitted, so it never counts as "neither".
  const int64_t failed = m["failed_runs"], foreseen = m["failed_runs_foreseen"];
  const int64_t done = m["completed_runs"], refused = m["completed_runs_refused"];
  const Json& out = m["outcomes"];
  // Of the runs that ended as `observed`: how many, and how many were predicted infeasible.
  auto ended = [&](const char* observed) {
    const Json& r = out[observed];
    const int64_t refused = r["out_of_memory"].get<int64_t>() + r["infeasible"].get<int64_t>();
    return std::make_pair(refused, refused + r["feasible"].get<int64_t>());
  };
  const auto [oom_foreseen, oom_runs] = ended("out_of_memory");
  const auto [other_foreseen, other_runs] = ended("failed");
  row("runs that failed, predicted infeasible",
      failed > 0 ? fmt::format("{}/{}", foreseen, failed) : "-",
      failed == 0          ? ""
      : foreseen == failed ? "good"
                           : "bad",
      fmt::format("out of memory observed: {} of {} foreseen; failed, cause not logged: {} of {}",
                  oom_foreseen, oom_runs, other_foreseen, other_runs));
  row("runs that completed, predicted infeasible",
      done > 0 ? fmt::format("{}/{}", refused, done) : "-",
      done == 0      ? ""
      : refused == 0 ? "good"
                     : "bad",
      fmt::format("out of memory {}, other reasons {}",
                  out["completed"]["out_of_memory"].get<int64_t>(),
                  out["completed"]["infeasible"].get<int64_t>()));
  return s + "</table>";
}

// Under a measurement's strategy: the keys its importer filled in by default ("assumed" in the
// measurements file), without the "strategy." every strategy key has.
std::string assumed_line(const Json& row) {
  if (!row.contains("assumed")) return "";
  std::string keys;
  for (const Json& k : row["assumed"]) {
    std::string key = k.get<std::string>();
    if (key.starts_with("strategy.")) key.erase(0, std::string_view("strategy.").size());
    keys += (keys.empty() ? "" : ", ") + key;
  }
  return fmt::format(
      "<br><span class=\"muted\" title=\"not in the log: recorded with a default\">assumed: "
      "{}</span>",
      esc(keys));
}

std::string pairs_table(const Json& pairs) {
  std::string s =
      "<div class=\"scroll\"><table><tr><th>model</th><th>strategy</th>"
      "<th>source</th><th class=\"num\">measured (p10-p90, n)</th>"
      "<th class=\"num\">predicted</th><th class=\"num\">error</th>"
      "<th class=\"num\">peak memory measured / predicted</th>"
      "<th>OOM observed / predicted</th></tr>";
  for (const Json& p : pairs) {
    std::string measured = "-", predicted = "-", error = "-", memory = "-";
    if (p.contains("predicted_s")) predicted = seconds(p["predicted_s"]);
    if (p.contains("predicted_feasible") && !p["predicted_feasible"].get<bool>())
      predicted += p["oom_predicted"].get<bool>() ? " (out of memory)" : " (infeasible)";
    if (p.contains("measured_s")) {
      measured = fmt::format("{}<br><span class=\"muted\">{} - {}, n {}</span>",
                             seconds(p["measured_s"]), seconds(p["measured_p10_s"]),
                             seconds(p["measured_p90_s"]), p["measured_count"].get<int64_t>());
      error = fmt::format("<span class=\"{}\">{:+.1f}%</span>", error_class(p["ape"]),
                          100 * p["signed_error"].get<double>());
    }
    if (p.contains("measured_memory_bytes"))
      memory = fmt::format(
          "{} / {}<br><span class=\"{}\">{:.1f}%</span> <span "
          "class=\"muted\">{}</span>",
          gib(p["measured_memory_bytes"]), gib(p["predicted_memory_bytes"]),
          error_class(p["memory_ape"]), 100 * p["memory_ape"].get<double>(),
          esc(str(p, "memory_kind")));
    const bool obs = p["oom_observed"], pred = p["oom_predicted"];
    const std::string oom =
        fmt::format("<span class=\"{}\">{} / {}</span>", obs == pred ? "good" : "bad",
                    obs ? "yes" : "no", pred ? "yes" : "no");
    s += fmt::format(
        "<tr><td>{}</td><td class=\"key\" title=\"{}\">{}</td><td>{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td>{}</td></tr>",
        esc(str(p, "model")), esc(str(p, "origin") + " / " + str(p, "prediction")),
        esc(str(p, "key")) + assumed_line(p), esc(str(p, "source")), measured, predicted, error,
        memory, oom);
  }
  return s + "</table></div>";
}

std::string unmatched_lists(const Json& data) {
  const Json& meas = data["unmatched_measurements"];
  const Json& preds = data["unmatched_predictions"];
  std::string s = fmt::format("<details{}><summary>{} measurements without a prediction</summary>",
                              meas.empty() ? "" : " open", meas.size());
  if (!meas.empty()) {
    s += "<table><tr><th>model</th><th>strategy</th><th>source</th><th>from</th></tr>";
    for (const Json& m : meas)
      s += fmt::format("<tr><td>{}</td><td class=\"key\">{}</td><td>{}</td><td>{}</td></tr>",
                       esc(str(m, "model")), esc(str(m, "key")) + assumed_line(m),
                       esc(str(m, "source")),
                       esc(str(m, "origin").empty() ? str(m, "file") : str(m, "origin")));
    s += "</table>";
  }
  s += fmt::format("</details><details><summary>{} predictions without a measurement</summary>",
                   preds.size());
  if (!preds.empty()) {
    s += "<table><tr><th>model</th><th>strategy</th><th "
         "class=\"num\">predicted</th><th>from</th></tr>";
    for (const Json& p : preds)
      s += fmt::format(
          "<tr><td>{}</td><td class=\"key\">{}</td><td class=\"num\">{}{}</td><td>{}</td></tr>",
          esc(str(p, "model")), esc(str(p, "key")), seconds(p["iteration_s"]),
          p["feasible"].get<bool>() ? "" : " (infeasible)", esc(str(p, "origin")));
    s += "</table>";
  }
  return s + "</details>";
}

std::string inputs_list(const Json& data) {
  const Json& in = data["inputs"];
  std::string s = "<ul>";
  for (const Json& f : in["predictions"])
    s += "<li>predictions: " + esc(f.get<std::string>()) + "</li>";
  for (const Json& f : in["measurements"]) {
    const Json& c = f["context"];
    std::string what;
    for (const char* key :
         {"framework", "framework_version", "gpu_name", "gpu_type", "host", "date"})
      if (c.contains(key)) what += (what.empty() ? "" : ", ") + c[key].get<std::string>();
    s += fmt::format("<li>measurements: {} <span class=\"muted\">{}</span></li>",
                     esc(f["file"].get<std::string>()), esc(what));
  }
  for (const Json& f : in["calibration"])
    s += "<li>calibration: " + esc(f.get<std::string>()) + "</li>";
  return s + "</ul>";
}

// " (device memory 40 GiB)" from the stages' GPU types, where known.
std::string capacity_text(const Json& memory) {
  double least = 0;
  for (const Json& c : memory["capacity_gib"])
    if (c.is_number()) least = least == 0 ? c.get<double>() : std::min(least, c.get<double>());
  return least > 0 ? fmt::format(" (device memory {:.0f} GiB)", least) : "";
}

// The data as a JSON script block: every '<' escaped so no "</script>" can close it early.
std::string data_block(const Json& data) {
  const std::string text = data.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

// The SM clock each class of calibration measurement ran at (docs/calibrate.md "SM clocks").
std::string clocks_table(const Json& clocks) {
  std::string s =
      "<h3>SM clock while timed</h3><p class=\"explain\">Read through NVML during each timed "
      "region: the median over a class's measurements of their median clock, its 10th and 90th "
      "percentiles, the lowest reading, and how many measurements ran under a power or thermal "
      "limit. Timings compared across classes ran at these clocks.</p><table><thead><tr>"
      "<th>GPU</th><th>measurements</th><th class=\"num\">timed</th><th class=\"num\">SM "
      "MHz</th><th class=\"num\">p10 - p90</th><th class=\"num\">lowest</th>"
      "<th class=\"num\">limited</th><th>reasons</th></tr></thead><tbody>";
  for (const Json& c : clocks) {
    std::string reasons;
    for (const Json& r : c["reasons"])
      reasons += (reasons.empty() ? "" : ", ") + r.get<std::string>();
    s += fmt::format(
        "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{:.0f}</td>"
        "<td class=\"num\">{:.0f} - {:.0f}</td><td class=\"num\">{:.0f}</td>"
        "<td class=\"num\">{}</td><td>{}</td></tr>",
        esc(str(c, "gpu_type")), esc(str(c, "what")), c.value("measurements", int64_t{0}),
        c.value("sm_mhz_median", 0.0), c.value("sm_mhz_p10", 0.0), c.value("sm_mhz_p90", 0.0),
        c.value("sm_mhz_min", 0.0), c.value("power_thermal_measurements", int64_t{0}),
        esc(reasons));
  }
  return s + "</tbody></table>";
}

}  // namespace

std::string render_report_html(const Json& data) {
  const bool has_time = !data["pairs"].empty();
  const Json& cal = data["calibration"];
  std::string body;
  body += fmt::format(
      "<header><h1>{}</h1><p class=\"meta\">generated {} by hetplan {}{}</p></header><main>",
      esc(str(data, "title")), esc(str(data, "generated")), esc(str(data, "hetplan_version")),
      str(data, "command").empty() ? "" : " · " + esc(str(data, "command")));
  body +=
      "<section id=\"summary\"><h2>Errors</h2><p class=\"explain\">Absolute percentage error "
      "APE = |predicted − measured| / measured of the median measured iteration time, over "
      "predictions matched to measurements by model and strategy (docs/report.md). Peak "
      "memory compares the framework's allocator figures with the prediction less its CUDA "
      "context reserve.</p>" +
      metrics_table(data["metrics"]) + "</section>";
  // The charts the page script draws: one per quantity some matched pair has measured.
  bool measured_time = false, measured_memory = false;
  for (const Json& p : data["pairs"]) {
    measured_time |= p.contains("measured_s");
    measured_memory |= p.contains("measured_memory_bytes");
  }
  body +=
      "<section id=\"accuracy\"><h2>Predicted against measured</h2><p class=\"explain\">Each "
      "point is one measured strategy; the line is y = x, the shaded band ±10%.</p>";
  if (measured_time || measured_memory) {
    body += "<div class=\"grid2\">";
    if (measured_time) body += "<div class=\"chart\" id=\"chart-iteration\"></div>";
    if (measured_memory) body += "<div class=\"chart\" id=\"chart-memory-accuracy\"></div>";
    body += "</div>";
  } else {
    body +=
        "<p class=\"muted\">No measured time or memory matched a prediction: nothing to "
        "draw.</p>";
  }
  body += "</section>";
  body += "<section id=\"pairs\"><h2>Matched strategies</h2>" +
          (has_time ? pairs_table(data["pairs"])
                    : std::string("<p class=\"muted\">No measurement "
                                  "matched a prediction.</p>")) +
          unmatched_lists(data) + "</section>";
  const int64_t one_gpu = cal.value("one_gpu_collectives", int64_t{0});
  const bool clocks = cal.contains("clocks") && !cal["clocks"].empty();
  if (!cal["gemm"].empty() || !cal["collectives"].empty() || one_gpu > 0 || clocks) {
    body +=
        "<section id=\"calibration\"><h2>Calibration</h2><p class=\"explain\">GEMM throughput "
        "against size and collective bus bandwidth (nccl-tests definition) against message "
        "size, from the calibration files: one series per collective, dtype, group and link." +
        (one_gpu > 0 ? fmt::format(" {} one-GPU (\"self\") measurement{} left out: a copy "
                                   "inside the device says nothing about links.",
                                   one_gpu, one_gpu == 1 ? " is" : "s are")
                     : std::string()) +
        "</p><div class=\"grid2\">";
    if (!cal["gemm"].empty()) body += "<div class=\"chart\" id=\"chart-gemm\"></div>";
    if (!cal["collectives"].empty()) body += "<div class=\"chart\" id=\"chart-collectives\"></div>";
    body += "</div>";
    if (clocks) body += clocks_table(cal["clocks"]);
    body += "</section>";
  }
  if (cal.contains("layers") && !cal["layers"].empty()) {
    body +=
        "<section id=\"layers\"><h2>Whole layers against their ops</h2><p class=\"explain\">"
        "Each point is one pass (F, B or W) of one layer timed whole in the calibration files, "
        "against the cost model's sum of the layer's ops from the fitted profile, before the "
        "layer correction those timings make (docs/fit.md). Imported timings are forward only, "
        "measured inside a framework with its tensor-parallel communication.</p>"
        "<div class=\"chart\" id=\"chart-layers\"></div></section>";
  }
  if (data.contains("pipeline")) {
    const Json& p = data["pipeline"];
    body += fmt::format(
        "<section id=\"pipeline\"><h2>Pipeline timeline</h2><p class=\"explain\">{} · {} · {} "
        "micro-batches per iteration, schedule {}. Drawn from the predicted per-stage F, B and W "
        "times ({:.1f} ms for the pipeline; the predicted iteration, with data-parallel "
        "synchronisation and the optimizer step, is {:.1f} ms).{}</p>"
        "<div class=\"chart tall\" id=\"chart-timeline\"></div></section>",
        esc(str(p, "model")), esc(str(p, "key")), p["microbatches"].get<int64_t>(),
        esc(str(p, "schedule")), p["makespan_ms"].get<double>(),
        p["predicted_iteration_ms"].get<double>(),
        str(p, "note").empty() ? "" : " " + esc(str(p, "note")) + ".");
  }
  if (data.contains("memory")) {
    const Json& m = data["memory"];
    body += fmt::format(
        "<section id=\"memory\"><h2>Memory per device</h2><p class=\"explain\">{} · predicted "
        "memory of each pipeline device, all its chunks (its data- and tensor-parallel peers "
        "alike){}{}.</p><div class=\"chart tall\" "
        "id=\"chart-memory\"></div></section>",
        esc(str(m, "key")), capacity_text(m),
        m["feasible"].get<bool>() ? "" : " — infeasible: " + esc(str(m, "reason")));
  }
  body += "<section id=\"inputs\"><h2>Inputs</h2>" + inputs_list(data) + "</section>";
  body += fmt::format(
      "<footer>hetplan report · charts by Apache ECharts {} (Apache-2.0), "
      "embedded · <span id=\"hetplan-render-status\" data-charts=\"0\" "
      "data-rendered=\"0\" data-errors=\"\">charts not drawn (scripts did not "
      "run)</span></footer></main>",
      kEchartsVersion);
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">";
  html += "<title>" + esc(str(data, "title")) + "</title><style>\n";
  html += report_asset("report.css");
  html += "</style></head><body>\n" + body;
  html +=
      "\n<script type=\"application/json\" id=\"hetplan-data\">" + data_block(data) + "</script>\n";
  html += "<script>\n";
  html += report_asset("echarts/echarts.min.js");
  html += "\n</script>\n<script>\n";
  html += report_asset("report.js");
  html += "\n</script>\n</body></html>\n";
  return html;
}

}  // namespace hetplan
