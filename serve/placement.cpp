#include "serve/placement.h"

#include <algorithm>

#include <fmt/format.h>

#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "serve/helix_solution.h"

namespace hetplan::serve {

int Placement::used_machines() const {
  return static_cast<int>(
      std::count_if(ranges.begin(), ranges.end(), [](const LayerRange& r) { return !r.empty(); }));
}

Placement read_placement_json(const std::filesystem::path& path, const ServingCluster& cluster,
                              int num_layers) {
  const Document doc = load_document(path);
  ObjectReader top(doc);
  Placement placement;
  placement.ranges.assign(cluster.size(), LayerRange{});
  std::vector<bool> seen(cluster.size(), false);
  for (auto& entry : top.objects("placement")) {
    const std::string name = entry.string("machine");
    const int machine = cluster.find(name);
    if (machine < 0)
      entry.fail("machine", fmt::format("no machine '{}' in {}", name, cluster.origin()));
    if (seen[machine]) entry.fail("machine", fmt::format("machine '{}' appears twice", name));
    seen[machine] = true;
    // A placement made for another cluster must not pass for this one.
    if (entry.has("machine_type")) {
      const std::string type = entry.string("machine_type");
      const std::string& actual = cluster.machines()[machine].machine_type;
      if (type != actual)
        entry.fail("machine_type",
                   fmt::format("the placement says {} for '{}', but {} makes it {}: expected the "
                               "cluster the placement was made for",
                               type, name, cluster.origin(), actual));
    }
    if (!entry.has("layers")) {  // absent or null (as `serve --json` writes unused machines)
      (void)entry.optional_string("layers");  // marks the key as read
      entry.finish();
      continue;  // listed but unused
    }
    const auto layers = entry.integers("layers");
    if (layers.size() != 2 || layers[0] < 0 || layers[1] < layers[0] || layers[1] >= num_layers)
      entry.fail("layers", fmt::format("expected [first, last] with 0 <= first <= last <= {}",
                                       num_layers - 1));
    placement.ranges[machine] = {static_cast<int>(layers[0]),
                                 static_cast<int>(layers[1] - layers[0] + 1)};
    // Fields `serve --json` writes next to each range are accepted and ignored.
    for (const char* key :
         {"layer_count", "flow_tokens_per_s", "capacity_tokens_per_s", "gpu_type"})
      if (entry.has(key)) entry.raw(key);
    entry.finish();
  }
  // The whole output of `serve --json` is a placement file too: its other fields are ignored.
  (void)top.keys();
  return placement;
}

Placement load_placement(const std::filesystem::path& path, const ServingCluster& cluster,
                         int num_layers) {
  if (path.extension() == ".ini") return read_helix_solution(path, cluster, num_layers);
  return read_placement_json(path, cluster, num_layers);
}

}  // namespace hetplan::serve
