// hetplan clusters: the GPU, node and cluster presets.
#include <fmt/format.h>

#include "cli/command.h"
#include "costmodel/hardware.h"
#include "costmodel/whole_number.h"

namespace hetplan::cli {

CommandRunner declare_clusters(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  app.add_flag("--json", *json, "Print JSON instead of tables");
  return [json]() {
    const auto presets = hardware_presets();
    if (*json) {
      Json out = Json::array();
      // What the tables show, and more, for scripts.
      for (const auto& p : presets) {
        Json j = {{"kind", p.kind}, {"name", p.name}, {"description", p.description}};
        if (p.kind == "gpu") {
          const GpuSpec g = load_gpu(p.name);
          Json peaks = Json::object();
          for (const auto& [dtype, tflops] : g.peak_tflops)
            peaks[std::string(to_string(dtype))] = tflops;
          j["peak_tflops"] = peaks;
          j["memory_bytes"] = whole_number_json(g.memory_bytes);
          j["memory_GBps"] = g.memory_GBps;
          j["sm_count"] = g.sm_count;
          j["l2_bytes"] = whole_number_json(g.l2_bytes);
          j["vendor"] = g.vendor;
          j["calibration"] = g.calibratable() ? "cuda" : "priors only";
        } else if (p.kind == "node") {
          const NodeSpec n = load_node(p.name);
          j["gpu"] = n.gpu.name;
          j["gpus"] = n.gpus;
          j["fabric"] = std::string(to_string(n.fabric));
          j["intra_GBps"] = n.intra_GBps;
          j["network_gbit"] = n.network_gbit;
          j["price_per_hour"] = n.price_per_hour;
        } else if (p.kind == "network") {
          const CloudNetwork n = load_network(p.name);
          for (const auto& [key, link] : {std::pair{"between_zones", n.between_zones},
                                          {"between_regions", n.between_regions}})
            j[key] = {{"network_fraction", link.network_fraction},
                      {"latency_s", link.latency_s},
                      {"price_per_GB", link.price_per_GB}};
        } else if (p.kind == "cluster") {
          const ClusterSpec c = load_cluster(p.name);
          j["gpus"] = c.num_gpus();
          Json nodes = Json::array();
          for (const auto& g : c.groups)
            nodes.push_back({{"type", g.node.name}, {"count", g.count}});
          j["nodes"] = nodes;
        }
        out.push_back(j);
      }
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
      if (!g.calibratable())
        fmt::print(
            "{:<12} ({} GPU: hetplan's calibration kernels are CUDA-only, so only its "
            "datasheet priors apply)\n",
            "", g.vendor);
    }
    fmt::print(
        "\nNode types (use as --cluster NODE:COUNT,NODE:COUNT)\n{:<15} {:<14} {:>9} {:>11} "
        "{:>10} {:>8}\n",
        "name", "GPUs", "fabric", "intra GB/s", "network", "$/hour");
    for (const auto& p : presets) {
      if (p.kind != "node") continue;
      const NodeSpec n = load_node(p.name);
      fmt::print("{:<15} {:<14} {:>9} {:>11.1f} {:>7.0f} Gb {:>8.2f}\n", n.name,
                 fmt::format("{}x {}", n.gpus, n.gpu.name), to_string(n.fabric), n.intra_GBps,
                 n.network_gbit, n.price_per_hour);
    }
    fmt::print(
        "\nNetworks (cluster files' network.cloud, provision --network)\n{:<8} {:>22} {:>22}\n",
        "name", "between zones", "between regions");
    for (const auto& p : presets) {
      if (p.kind != "network") continue;
      const CloudNetwork n = load_network(p.name);
      const auto cell = [](const ZoneLink& l) {
        return fmt::format("{:.0f}% {:.0f} ms ${:.3f}/GB", l.network_fraction * 100,
                           l.latency_s * 1e3, l.price_per_GB);
      };
      fmt::print("{:<8} {:>22} {:>22}\n", n.name, cell(n.between_zones), cell(n.between_regions));
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
