// Links between the zones and regions of a cloud (presets/networks): their bandwidth, latency and
// price per GB, for clusters whose nodes are not all in one zone.
#pragma once

#include <map>
#include <string>

#include "costmodel/document.h"

namespace hetplan {

// What traffic between two nodes in different zones (or regions) runs on and costs.
struct ZoneLink {
  double network_fraction = 1;  // of the slower node's network bandwidth that crosses the link
  double latency_s = 0;
  double price_per_GB = 0;  // dollars per GB (1e9 bytes) sent across it, both ends' charges
};

// A cloud's zone and region links.
struct CloudNetwork {
  std::string name;  // preset key, e.g. "aws"
  std::string description;
  ZoneLink between_zones;    // two zones of one region
  ZoneLink between_regions;  // two regions
  std::map<std::string, std::string> citations;
};

// A network preset's name (presets/networks) or a network file; throws InputError otherwise.
CloudNetwork load_network(const std::string& name_or_path);
CloudNetwork parse_network(ObjectReader r, const std::string& name);

}  // namespace hetplan
