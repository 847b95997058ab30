// `hetplan fit-collectives CALIBRATION... [--out FIT]`: the communication fit alone (two-regime
// latency-bandwidth per collective, group shape and link; p2p pairs; host-device copies; checks of
// the hierarchical composition), printed as a table and optionally written as JSON. `hetplan fit`
// stores the same CommunicationFit in the profile.
#include <algorithm>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/common.h"
#include "costmodel/atomic_file.h"
#include "costmodel/calibration_merge.h"
#include "costmodel/fit_collectives.h"
#include "costmodel/profile.h"

namespace hetplan::cli {
namespace {

// A regime's bandwidth, or "-" where it has none (latency only).
std::string bandwidth_text(const LatencyBandwidth& term) {
  return term.latency_only() ? "-" : fmt::format("{:.2f}", term.bandwidth_GBps);
}

}  // namespace

CommandRunner declare_fit_collectives(CLI::App& app) {
  struct Args {
    std::vector<std::string> inputs;
    std::string out;
  };
  auto args = std::make_shared<Args>();
  app.add_option("calibrations", args->inputs,
                 "calibration files or folders of them (merged in order)")
      ->required();
  app.add_option("--out", args->out, "write the fit as JSON");
  return [args]() {
    check_outputs(args->inputs, {{"--out", args->out}});
    std::vector<CalibrationFile> files = read_calibration_inputs(args->inputs, "fit-collectives");
    for (CalibrationFile& f : files) {
      // Only the communication is fitted here: files of several GPU types may hold GEMMs too.
      f.gemm.clear();
      f.kernels.clear();
      f.layers.clear();
      f.layer_forward.clear();
      f.serving_layer.clear();
      f.datasheet.reset();
    }
    const CommunicationFit fit = fit_communication(merge_calibration_files(files));
    fmt::print("{:<15} {:<5} {:>6} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7} {:>4}\n",
               "collective", "dtype", "group", "link", "small_us", "small_GBps", "break_KiB",
               "large_us", "large_GBps", "med_err", "max_err", "pts");
    for (const auto& f : fit.collectives)
      fmt::print(
          "{:<15} {:<5} {:>3}x{:<2} {:>9} {:>10.2f} {:>10} {:>10.2f} {:>10.2f} {:>10} "
          "{:>6.1f}% {:>6.1f}% {:>4}\n",
          to_string(f.op), to_string(f.dtype), f.nodes, f.gpus_per_node, f.link,
          f.small.latency_s * 1e6, bandwidth_text(f.small), f.breakpoint_bytes / 1024,
          f.large.latency_s * 1e6, bandwidth_text(f.large), 100 * f.median_rel_error,
          100 * f.max_rel_error, f.points);
    if (std::any_of(fit.collectives.begin(), fit.collectives.end(),
                    [](const auto& f) { return f.small.latency_only() || f.large.latency_only(); }))
      fmt::print("GB/s -: the regime's times do not grow with the message size (latency only)\n");
    for (const auto& f : fit.host_device)
      fmt::print(
          "host-device {} {:<8}: {:.2f} us + bytes / {} GB/s (large), median error "
          "{:.1f}%\n",
          f.direction, f.pinned ? "pinned" : "pageable", f.large.latency_s * 1e6,
          bandwidth_text(f.large), 100 * f.median_rel_error);
    for (const auto& c : fit.hierarchy_checks)
      fmt::print("hierarchical {} {} over {} x {}: median error {:.1f}%, max {:.1f}% ({} sizes)\n",
                 to_string(c.op), to_string(c.dtype), c.nodes, c.gpus_per_node,
                 100 * c.median_rel_error, 100 * c.max_rel_error, c.points);
    if (!args->out.empty()) write_json_atomically(to_json(fit), args->out);
    return 0;
  };
}

}  // namespace hetplan::cli
