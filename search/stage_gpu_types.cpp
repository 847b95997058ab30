#include "search/stage_gpu_types.h"

#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hetplan {

std::optional<RuleViolation> stage_gpu_type_problem(const Strategy& s, const ClusterSpec& cluster) {
  std::set<std::string> types;
  for (const auto& g : cluster.groups) types.insert(g.node.gpu.name);
  for (size_t i = 0; i < s.stages.size(); ++i) {
    std::stringstream joined(s.stages[i].gpu_type);
    for (std::string t; std::getline(joined, t, '+');)
      if (!t.empty() && !types.count(t))
        return RuleViolation{"gpu_type", fmt::format("stages[{}].gpu_type", i),
                             fmt::format("a GPU type of cluster {} ({}), found \"{}\"",
                                         cluster.name, fmt::join(types, ", "), t)};
    for (size_t g = 0; g < s.stages[i].replicas.size(); ++g)
      if (const std::string& t = s.stages[i].replicas[g].gpu_type; !types.count(t))
        return RuleViolation{"gpu_type", fmt::format("stages[{}].replicas[{}].gpu_type", i, g),
                             fmt::format("a GPU type of cluster {} ({}), found \"{}\"",
                                         cluster.name, fmt::join(types, ", "), t)};
  }
  return std::nullopt;
}

}  // namespace hetplan
