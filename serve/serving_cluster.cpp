#include "serve/serving_cluster.h"

#include <stdexcept>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "serve/training_cluster.h"

namespace hetplan::serve {

std::string too_many_machines(int64_t machines) {
  return fmt::format(
      "{} machines: hetplan serve takes at most {} (the flow graph of a fully linked cluster has "
      "an edge per pair of machines, 4.2 million at 2048, about 0.3 GB and 0.2 s per max-flow "
      "evaluation, and the search makes thousands)",
      machines, kMaxServingMachines);
}

ServingCluster::ServingCluster(std::string origin, std::vector<Machine> machines)
    : origin_(std::move(origin)), machines_(std::move(machines)) {
  if (machines_.size() > static_cast<size_t>(kMaxServingMachines))
    throw InputError(origin_, "", too_many_machines(static_cast<int64_t>(machines_.size())));
  const size_t slots = machines_.size() + 2;
  links_.assign(slots * slots, 0);
}

int ServingCluster::find(const std::string& name) const {
  for (int i = 0; i < size(); ++i)
    if (machines_[i].name == name) return i;
  return -1;
}

int ServingCluster::slot(int endpoint) const {
  if (endpoint == kSource) return size();
  if (endpoint == kSink) return size() + 1;
  if (endpoint < 0 || endpoint >= size()) throw std::out_of_range("link endpoint");
  return endpoint;
}

void ServingCluster::set_link(int from, int to, Link link) {
  auto [it, fresh] = index_of_.try_emplace({link.bandwidth_GBps, link.latency_s},
                                           static_cast<uint32_t>(distinct_.size() + 1));
  if (fresh) distinct_.push_back(link);
  links_[static_cast<size_t>(slot(from)) * (size() + 2) + slot(to)] = it->second;
}

std::optional<Link> ServingCluster::link(int from, int to) const {
  const uint32_t index = links_[static_cast<size_t>(slot(from)) * (size() + 2) + slot(to)];
  if (index == 0) return std::nullopt;
  return distinct_[index - 1];
}

ServingCluster load_serving_cluster(const std::filesystem::path& path) {
  return read_serve_cluster_file(path).serving;
}

}  // namespace hetplan::serve
