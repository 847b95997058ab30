// hetplan's own serving cluster file (YAML or JSON):
//
//   machine_types:
//     A100: {gpu: a100-40gb, gpus: 1, nic_GBps: 10}   # nic_in_GBps / nic_out_GBps too; vram_GB
//                                                      # defaults to gpus x the GPU preset's memory
//   machines:
//     - {name: a100, type: A100, count: 4}                     # a100-0 .. a100-3
//   links:
//     default: {bandwidth_GBps: 1.0, latency_ms: 1}            # every pair of machines
//     clients: {bandwidth_GBps: 1.0, latency_ms: 1}            # source/sink <-> every machine
//     pairs:                                                   # overrides, both directions
//       - {between: [a100-0, a100-1], bandwidth_GBps: 12.5, latency_ms: 0.01}
//   client_nic_GBps: 10                                        # optional
//
// GBps = 1e9 bytes/s, GB = 1e9 bytes. Training cluster presets and files are converted instead
// (serve/training_cluster.cpp).
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "costmodel/hardware.h"
#include "serve/serving_cluster.h"

namespace hetplan::serve {
namespace {

constexpr double kGB = 1e9;

struct TypeInfo {
  std::string gpu;
  int gpus = 1;
  double vram_bytes = 0;
  double nic_in_GBps = 0;
  double nic_out_GBps = 0;
};

Link read_link(ObjectReader& r) {
  Link link;
  link.bandwidth_GBps = r.positive("bandwidth_GBps");
  link.latency_s = r.non_negative_or("latency_ms", 0) * 1e-3;
  return link;
}

}  // namespace

ServingCluster read_cluster_file(const std::filesystem::path& path) {
  return read_cluster_document(load_document(path));
}

ServingCluster read_cluster_document(const Document& doc) {
  ObjectReader top(doc);
  top.optional_string("name");
  top.optional_string("description");

  std::map<std::string, TypeInfo> types;
  ObjectReader type_map = top.object("machine_types");
  for (const auto& type_name : type_map.keys()) {
    ObjectReader t = type_map.object(type_name);
    TypeInfo info;
    info.gpu = t.string_or("gpu", type_name);
    info.gpus = static_cast<int>(t.positive_integer_or("gpus", 1));
    // positive_or() marks vram_GB as a known key even when it is absent.
    if (const double vram_GB = t.positive_or("vram_GB", 0); vram_GB > 0) {
      info.vram_bytes = vram_GB * kGB;  // gpu then only names the machine's GPU ("T4")
    } else if (t.has("gpu")) {
      try {
        info.vram_bytes = info.gpus * load_gpu(info.gpu).memory_bytes;
      } catch (const InputError& e) {
        t.fail("gpu", std::string(e.what()) + " (or give vram_GB)");
      }
    } else {
      t.fail("vram_GB", "missing: expected vram_GB, or gpu naming a GPU preset (hetplan clusters)");
    }
    const double nic = t.non_negative_or("nic_GBps", 0);
    info.nic_in_GBps = t.non_negative_or("nic_in_GBps", nic);
    info.nic_out_GBps = t.non_negative_or("nic_out_GBps", nic);
    t.finish();
    types[type_name] = info;
  }

  std::vector<Machine> machines;
  std::set<std::string> names;
  int64_t total = 0;
  for (auto& m : top.objects("machines")) {
    const std::string type = m.string("type");
    auto it = types.find(type);
    if (it == types.end()) {
      std::string known;
      for (const auto& [name, info] : types) known += (known.empty() ? "" : ", ") + name;
      m.fail("type",
             fmt::format("unknown machine type '{}' (machine_types defines: {})", type, known));
    }
    const int64_t count = m.positive_integer_or("count", 1);
    // Checked before the machines are made: a count of 1e8 would take minutes and gigabytes.
    if (count > kMaxServingMachines - total)
      m.fail("count", "the cluster would have " + too_many_machines(total + count));
    total += count;
    const std::string base = m.string_or("name", type);
    for (int64_t i = 0; i < count; ++i) {
      Machine machine;
      machine.name = count == 1 ? base : fmt::format("{}-{}", base, i);
      if (!names.insert(machine.name).second)
        m.fail("name", fmt::format("machine name '{}' is used twice", machine.name));
      machine.machine_type = type;
      machine.gpu_type = it->second.gpu;
      machine.gpus = it->second.gpus;
      machine.vram_bytes = it->second.vram_bytes;
      machine.nic_in_GBps = it->second.nic_in_GBps;
      machine.nic_out_GBps = it->second.nic_out_GBps;
      machines.push_back(machine);
    }
    m.finish();
  }
  if (machines.empty()) top.fail("machines", "expected at least one machine");

  ServingCluster cluster(doc.origin, std::move(machines));
  const double client_nic = top.non_negative_or("client_nic_GBps", 0);
  cluster.source_nic_GBps = client_nic;
  cluster.sink_nic_GBps = client_nic;

  ObjectReader links = top.object("links");
  std::optional<Link> all;
  if (auto d = links.optional_object("default")) {
    all = read_link(*d);
    d->finish();
  }
  std::optional<Link> clients = all;
  if (auto c = links.optional_object("clients")) {
    clients = read_link(*c);
    c->finish();
  }
  if (!clients)
    links.fail("clients",
               "missing: expected the link from clients to machines "
               "(or a default link)");
  const int n = cluster.size();
  for (int i = 0; i < n; ++i) {
    cluster.set_link(kSource, i, *clients);
    cluster.set_link(i, kSink, *clients);
    if (all)
      for (int j = 0; j < n; ++j)
        if (j != i) cluster.set_link(i, j, *all);
  }
  for (auto& p : links.objects_or_empty("pairs")) {
    const auto ends = p.strings("between");
    if (ends.size() != 2) p.fail("between", "expected two machine names");
    const int a = cluster.find(ends[0]), b = cluster.find(ends[1]);
    if (a < 0 || b < 0 || a == b)
      p.fail("between", fmt::format("expected two different machine names of this cluster, found "
                                    "'{}' and '{}'",
                                    ends[0], ends[1]));
    const Link link = read_link(p);
    cluster.set_link(a, b, link);
    cluster.set_link(b, a, link);
    p.finish();
  }
  links.finish();
  top.finish();
  return cluster;
}

}  // namespace hetplan::serve
