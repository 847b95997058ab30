// `hetplan merge FILE... --out FILE`: merges calibration files (ranks, runs, node kinds, the
// network between node kinds) into one cluster calibration. Rules: docs/formats.md.
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/common.h"
#include "costmodel/calibration_merge.h"
#include "costmodel/profile.h"

namespace hetplan::cli {

CommandRunner declare_merge(CLI::App& app) {
  struct Args {
    std::vector<std::string> inputs;
    std::string out;
  };
  auto args = std::make_shared<Args>();
  app.add_option("calibrations", args->inputs,
                 "calibration files (or folders of them) to merge, in order")
      ->required();
  app.add_option("--out", args->out, "merged calibration file to write")->required();
  return [args]() {
    check_outputs(args->inputs, {{"--out", args->out}});
    const std::vector<CalibrationFile> files = read_calibration_inputs(args->inputs, "merge");
    const CalibrationFile merged = merge_calibration_files(files);
    save_calibration(merged, args->out);
    fmt::print(
        "merged {} files into {}: {} collective, {} p2p, {} host-device, {} GEMM, {} "
        "kernel, {} layer, {} layer_forward, {} serving_layer measurements, {} failures{}\n",
        files.size(), args->out, merged.collectives.size(), merged.p2p.size(),
        merged.host_device.size(), merged.gemm.size(), merged.kernels.size(), merged.layers.size(),
        merged.layer_forward.size(), merged.serving_layer.size(), merged.failures.size(),
        merged.context.gpu_type.empty() ? ""
                                        : fmt::format(" (GPU type {})", merged.context.gpu_type));
    return 0;
  };
}

}  // namespace hetplan::cli
