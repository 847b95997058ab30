#include "search/serve/serving_cluster.h"

#include <stdexcept>

#include "search/serve/helix_import.h"

namespace hetplan::serve {

ServingCluster::ServingCluster(std::string origin, std::vector<Machine> machines)
    : origin_(std::move(origin)), machines_(std::move(machines)) {
  const size_t slots = machines_.size() + 2;
  links_.assign(slots * slots, std::nullopt);
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
  links_[static_cast<size_t>(slot(from)) * (size() + 2) + slot(to)] = link;
}

std::optional<Link> ServingCluster::link(int from, int to) const {
  return links_[static_cast<size_t>(slot(from)) * (size() + 2) + slot(to)];
}

ServingCluster load_serving_cluster(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  if (ext == ".ini") return read_helix_cluster(path);
  return read_cluster_file(path);
}

}  // namespace hetplan::serve
