// hetplan clusters: the GPU, node and cluster presets.
#include <fmt/format.h>

#include "cli/command.h"
#include "costmodel/hardware.h"

namespace hetplan::cli {

CommandRunner declare_clusters(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  app.add_flag("--json", *json, "Print JSON instead of tables");
  return [json]() {
    const auto presets = hardware_presets();
    if (*json) {
      Json out = Json::array();
      for (const auto& p : presets)
        out.push_back({{"kind", p.kind}, {"name", p.name}, {"description", p.description}});
      fmt::print("{}\n", out.dump(2));
      return 0;
    }
    fmt::print("GPU types\n{:<12} {:>9} {:>9} {:>9} {:>5}  {}\n", "name", "bf16/fp16", "memory",
               "HBM", "SMs", "description");
    for (const auto& p : presets) {
      if (p.kind != "gpu") continue;
      const GpuSpec g = load_gpu(p.name);
      const double tf = std::max(g.peak_flops(Dtype::kBf16), g.peak_flops(Dtype::kFp16)) / 1e12;
      fmt::print("{:<12} {:>6.0f} TF {:>6.0f} GB {:>5.0f} GB/s {:>4}  {}\n", g.name, tf,
                 g.memory_bytes / (1ull << 30), g.memory_GBps, g.sm_count, g.description);
    }
    fmt::print("\nNode types (use as --cluster NODE:COUNT,NODE:COUNT)\n{:<15} {:>9} {:>9} {:>11} "
               "{:>10} {:>8}\n", "name", "GPUs", "fabric", "intra GB/s", "network", "$/hour");
    for (const auto& p : presets) {
      if (p.kind != "node") continue;
      const NodeSpec n = load_node(p.name);
      fmt::print("{:<15} {:>3}x {:<5} {:>8} {:>11.1f} {:>6.0f} Gb {:>8.2f}\n", n.name, n.gpus,
                 n.gpu.name, to_string(n.fabric), n.intra_GBps, n.network_gbit, n.price_per_hour);
    }
    fmt::print("\nCluster presets\n");
    for (const auto& p : presets) {
      if (p.kind != "cluster") continue;
      const ClusterSpec c = load_cluster(p.name);
      fmt::print("{:<15} {:>5} GPUs  {}\n", p.name, c.num_gpus(), p.description);
    }
    return 0;
  };
}

}  // namespace hetplan::cli
