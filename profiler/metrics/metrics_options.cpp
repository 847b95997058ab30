#include "profiler/metrics/metrics_options.h"

#include <cstdlib>

#include "costmodel/errors.h"
#include "profiler/metrics/metric_catalog.h"

namespace hetplan::profiler::metrics {
namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string part = s.substr(start, comma == std::string::npos ? comma : comma - start);
    if (!part.empty()) out.push_back(part);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

double number(const std::string& option, const std::string& text, double min) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= min))
    throw InputError(option + ": expected a number >= " + std::to_string(static_cast<int>(min)) +
                     ", got '" + text + "'");
  return v;
}

void check_shapes(const std::string& policy) {
  if (policy != "bench" && policy != "first" && policy != "last" && policy != "test")
    throw InputError("--shapes: expected bench, first, last or test, got '" + policy + "'");
}

}  // namespace

std::vector<Pick> default_picks() {
  // The backward first: it is the open question, and --max-seconds may stop the run early.
  return {{"attention_bwd_bf16", "bench"},
          {"copy_probe", "last"},
          {kGemmCaseName, "bench"},
          {"attention_fwd_bf16", "bench"}};
}

std::string usage() {
  return "usage: hetplan_kernel_metrics [--filter NAME]... [--shapes bench|first|last|test]\n"
         "                              [--metrics GROUP[,GROUP...]] [--json FILE] [--runs N]\n"
         "                              [--max-seconds S] [--device N] [--no-counters]\n"
         "                              [--list] [--list-metrics]\n"
         "Profiles kernel cases of the registry (and the cuBLASLt GEMM anchor " +
         std::string(kGemmCaseName) +
         ") with CUPTI's range profiler: per kernel launch the hardware counters of the metric "
         "groups (default all), plus CUDA-event timings that need no counters.\n"
         "Default selection: attention_bwd_bf16 at the benchmark shapes, copy_probe at its "
         "largest, the GEMM anchor, attention_fwd_bf16 at the benchmark shapes.\n"
         "Exit status: 0 done, 1 no GPU or a CUDA failure, 2 bad arguments, 3 timings written "
         "but hardware counters unavailable (restricted, unsupported or failed).\n";
}

Options parse_options(const std::vector<std::string>& args) {
  Options o;
  std::vector<std::string> filters;
  std::string shapes = "bench";
  bool shapes_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string opt = args[i], value;
    const bool has_inline = opt.rfind("--", 0) == 0 && opt.find('=') != std::string::npos;
    if (has_inline) {
      value = opt.substr(opt.find('=') + 1);
      opt = opt.substr(0, opt.find('='));
    }
    auto take = [&]() -> std::string {
      if (has_inline) return value;
      if (i + 1 >= args.size()) throw InputError(opt + ": expected a value after it");
      return args[++i];
    };
    if (opt == "--filter") {
      filters.push_back(take());
      if (filters.back().empty()) throw InputError("--filter: expected a case name, got ''");
    } else if (opt == "--shapes") {
      shapes = take();
      check_shapes(shapes);
      shapes_given = true;
    } else if (opt == "--metrics") {
      o.groups = split_commas(take());
      select_metrics(o.groups);  // throws for an unknown group
    } else if (opt == "--json") {
      o.json_path = take();
    } else if (opt == "--runs") {
      o.runs = static_cast<int>(number(opt, take(), 1));
    } else if (opt == "--max-seconds") {
      o.max_seconds = number(opt, take(), 0);
    } else if (opt == "--device") {
      o.device = static_cast<int>(number(opt, take(), 0));
    } else if (opt == "--no-counters" && !has_inline) {
      o.counters = false;
    } else if (opt == "--list" && !has_inline) {
      o.list = true;
    } else if (opt == "--list-metrics" && !has_inline) {
      o.list_metrics = true;
    } else if ((opt == "--help" || opt == "-h") && !has_inline) {
      o.help = true;
    } else {
      throw InputError("unknown argument '" + args[i] + "' (see --help)");
    }
  }
  if (filters.empty()) {
    o.picks = default_picks();
    if (shapes_given)
      for (Pick& p : o.picks) p.shapes = shapes;
  } else {
    for (const std::string& f : filters) o.picks.push_back({f, shapes});
  }
  return o;
}

bool pick_matches(const std::string& filter, const std::string& name, const std::string& family) {
  return name.find(filter) != std::string::npos || family == filter;
}

std::vector<size_t> pick_shape_indices(const std::string& policy, size_t count) {
  std::vector<size_t> out;
  if (count == 0) return out;
  if (policy == "first") return {0};
  if (policy == "last") return {count - 1};
  for (size_t i = 0; i < count; ++i) out.push_back(i);
  return out;
}

}  // namespace hetplan::profiler::metrics
