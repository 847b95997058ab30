#include "profiler/common/collective_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodel/errors.h"
#include "costmodel/version.h"
#include "profiler/common/gpu_type.h"
#include "profiler/common/run_info.h"

namespace hetplan::profiler {

Json to_json(const ProcessInfo& p) {
  Json gpus = Json::array();
  for (const auto& g : p.gpus)
    gpus.push_back({{"name", g.name}, {"bus_id", g.bus_id}, {"memory_bytes", g.memory_bytes}});
  return Json{{"rank", p.rank}, {"host", p.host}, {"gpus", gpus}, {"error", p.error}};
}

ProcessInfo process_info_from_json(const Json& j) {
  ProcessInfo p;
  p.rank = j.at("rank").get<int>();
  p.host = j.at("host").get<std::string>();
  p.error = j.at("error").get<std::string>();
  for (const auto& g : j.at("gpus"))
    p.gpus.push_back({g.at("name").get<std::string>(), g.at("bus_id").get<std::string>(),
                      g.at("memory_bytes").get<int64_t>()});
  return p;
}

int Layout::gpus_on_node(int node) const {
  return static_cast<int>(
      std::count_if(gpus.begin(), gpus.end(), [&](const Gpu& g) { return g.node == node; }));
}

Layout make_layout(const std::vector<ProcessInfo>& processes) {
  std::vector<std::string> missing;
  for (const auto& p : processes)
    if (p.gpus.empty())
      missing.push_back(fmt::format("rank {} on {}: {}", p.rank, p.host,
                                    p.error.empty() ? "no GPU visible" : p.error));
  if (!missing.empty()) {
    std::string text;
    for (const auto& m : missing) text += "\n  " + m;
    throw RuntimeFailure(
        fmt::format("no GPU: {} of {} processes have no usable GPU, so no "
                    "collective can be measured:{}",
                    missing.size(), processes.size(), text));
  }
  Layout layout;
  layout.processes = processes;
  std::map<std::pair<std::string, std::string>, int> owner;  // (host, bus id) -> rank
  for (const auto& p : processes) {
    auto it = std::find(layout.hosts.begin(), layout.hosts.end(), p.host);
    const int node = static_cast<int>(it - layout.hosts.begin());
    if (it == layout.hosts.end()) layout.hosts.push_back(p.host);
    for (size_t i = 0; i < p.gpus.size(); ++i) {
      const auto [pos, fresh] = owner.emplace(std::pair{p.host, p.gpus[i].bus_id}, p.rank);
      if (!fresh && !p.gpus[i].bus_id.empty())
        throw RuntimeFailure(fmt::format(
            "ranks {} and {} on {} both use GPU {}: give each process its own GPU (one process "
            "per node drives all its GPUs; with one process per GPU, the local rank picks it)",
            pos->second, p.rank, p.host, p.gpus[i].bus_id));
      layout.gpus.push_back({p.rank, static_cast<int>(i), node, p.gpus[i].name});
    }
  }
  return layout;
}

void describe_collective_run(const Layout& layout, const std::string& intra_link, Provenance& p) {
  if (p.source.empty()) p.source = "measured";
  if (p.gpu_count == 0) p.gpu_count = static_cast<int64_t>(layout.gpus.size());
  if (!layout.gpus.empty() && p.gpu_name.empty()) p.gpu_name = layout.gpus[0].name;
  if (!layout.gpus.empty() && p.gpu_type.empty()) {
    // The GPU kind of the file: the first GPU's, with its memory from its process's report.
    const Layout::Gpu& g0 = layout.gpus[0];
    const auto& reported = layout.processes[static_cast<size_t>(g0.process)].gpus;
    const int64_t memory = static_cast<size_t>(g0.local) < reported.size()
                               ? reported[static_cast<size_t>(g0.local)].memory_bytes
                               : 0;
    p.gpu_type = gpu_type_key(g0.name, memory).key;
    p.memory_bytes = memory;
  }
  if (p.date.empty()) p.date = utc_now_iso();
  if (p.host.empty() && !layout.hosts.empty()) p.host = layout.hosts[0];
  if (p.hetplan_version.empty()) p.hetplan_version = version();
  const std::string note =
      fmt::format("collectives: {} processes, {} GPUs on {} nodes ({}); intra-node link {}",
                  layout.processes.size(), layout.gpus.size(), layout.hosts.size(),
                  fmt::join(layout.hosts, ", "), intra_link);
  p.add_note(note);
}

std::string GroupSpec::label() const {
  if (nodes > 1)
    return fmt::format("{} nodes x {} GPU{}", nodes, gpus_per_node, gpus_per_node > 1 ? "s" : "");
  return fmt::format("{} {} GPU{}", shape, members.size(), members.size() > 1 ? "s" : "");
}

std::vector<double> sweep_sizes(double min_bytes, double max_bytes, double factor) {
  std::vector<double> sizes;
  for (double b = min_bytes; b <= max_bytes * (1 + 1e-9); b *= factor) sizes.push_back(b);
  if (sizes.empty() || sizes.back() < max_bytes * (1 - 1e-9)) sizes.push_back(max_bytes);
  return sizes;
}

std::vector<double> collective_sizes(const CollectiveOptions& o) {
  return sweep_sizes(o.min_bytes, o.max_bytes, o.quick ? 8 : 2);
}

std::vector<double> p2p_sizes(const CollectiveOptions& o) {
  // Enough for a latency-bandwidth fit per pair: x8 steps (x64 quick), 4 KiB .. 256 MiB.
  return sweep_sizes(std::max(o.min_bytes, 4096.0), std::min(o.max_bytes, double(1 << 28)),
                     o.quick ? 64 : 8);
}

std::vector<CollectiveKind> planned_ops(const CollectiveOptions& o) {
  if (!o.ops.empty()) return o.ops;
  return {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
          CollectiveKind::kAllToAll,  CollectiveKind::kBroadcast, CollectiveKind::kSendRecv};
}

std::vector<Dtype> planned_dtypes(const CollectiveOptions& o) {
  if (!o.dtypes.empty()) return o.dtypes;
  if (o.quick) return {Dtype::kBf16};
  return {Dtype::kBf16, Dtype::kFp32};
}

namespace {

std::vector<std::string> names_of(const Layout& layout, const std::vector<int>& members) {
  std::set<std::string> names;
  for (int m : members) names.insert(layout.gpus[m].name);
  return {names.begin(), names.end()};
}

}  // namespace

std::vector<GroupSpec> plan_groups(const Layout& layout, const CollectiveOptions& options,
                                   const std::string& intra_link) {
  std::vector<GroupSpec> groups;
  const int nodes = static_cast<int>(layout.hosts.size());
  auto add = [&](std::string shape, std::vector<int> members, int64_t n, int64_t per_node,
                 std::string link) {
    GroupSpec g{std::move(shape), std::move(members), n, per_node, std::move(link), {}};
    g.gpus = names_of(layout, g.members);
    groups.push_back(std::move(g));
  };
  if (nodes == 1) {
    const int g = static_cast<int>(layout.gpus.size());
    if (g == 1) add("self", {0}, 1, 1, "self");
    for (int k = 2; k <= g; ++k) {
      const bool power_of_two = (k & (k - 1)) == 0;
      if (options.quick && !power_of_two && k != g) continue;
      std::vector<int> members(k);
      for (int i = 0; i < k; ++i) members[i] = i;
      add("intra", members, 1, k, intra_link);
    }
    return groups;
  }
  // Across nodes: first GPU of each node, then every GPU of every node (when nodes hold the same
  // number; otherwise the whole set still runs, with gpus_per_node the smallest node's count).
  std::vector<int> firsts, all;
  int min_per_node = 1 << 30;
  for (int n = 0; n < nodes; ++n) {
    min_per_node = std::min(min_per_node, layout.gpus_on_node(n));
    for (size_t i = 0; i < layout.gpus.size(); ++i)
      if (layout.gpus[i].node == n) {
        if (all.empty() || layout.gpus[all.back()].node != n) firsts.push_back(static_cast<int>(i));
        all.push_back(static_cast<int>(i));
      }
  }
  add("one_per_node", firsts, nodes, 1, "net");
  if (all.size() > firsts.size()) add("whole_nodes", all, nodes, min_per_node, "net");
  return groups;
}

std::vector<std::pair<int, int>> plan_p2p_pairs(const Layout& layout) {
  std::vector<std::pair<int, int>> pairs;
  const int nodes = static_cast<int>(layout.hosts.size());
  if (nodes == 1) {
    const int g = static_cast<int>(layout.gpus.size());
    if (g == 1) pairs.emplace_back(0, 0);
    for (int s = 0; s < g; ++s)
      for (int d = 0; d < g; ++d)
        if (s != d) pairs.emplace_back(s, d);
    return pairs;
  }
  std::vector<int> firsts(nodes, -1);
  for (size_t i = 0; i < layout.gpus.size(); ++i)
    if (firsts[layout.gpus[i].node] < 0) firsts[layout.gpus[i].node] = static_cast<int>(i);
  for (int s : firsts)
    for (int d : firsts)
      if (s != d) pairs.emplace_back(s, d);
  return pairs;
}

std::string collective_key(CollectiveKind op, Dtype dtype, const GroupSpec& group, double bytes) {
  return fmt::format("collective/{}/{}/{}/n{}x{}/g{}/{:.0f}", to_string(op), to_string(dtype),
                     group.shape, group.nodes, group.gpus_per_node, group.members.size(), bytes);
}

std::string p2p_key(int src, int dst, double bytes) {
  return fmt::format("p2p/{}-{}/{:.0f}", src, dst, bytes);
}

std::string host_device_key(const std::string& direction, bool pinned, double bytes) {
  return fmt::format("host_device/{}/{}/{:.0f}", direction, pinned ? "pinned" : "pageable", bytes);
}

Json to_json(const RankRecord& r) {
  Json j{{"ok", r.ok}, {"bytes", r.bytes}, {"samples_s", r.samples_s}};
  if (!r.ok) j["error"] = r.error;
  return j;
}

RankRecord rank_record_from_json(const Json& j) {
  RankRecord r;
  r.ok = j.at("ok").get<bool>();
  r.bytes = j.at("bytes").get<double>();
  r.samples_s = j.at("samples_s").get<std::vector<double>>();
  if (j.contains("error")) r.error = j.at("error").get<std::string>();
  return r;
}

namespace {

// Slowest rank per batch; empty when a record failed or the batch counts differ.
std::vector<double> slowest_per_batch(const std::vector<RankRecord>& records,
                                      const std::vector<int>& ranks, std::string& error) {
  std::vector<double> out;
  for (size_t i = 0; i < records.size(); ++i) {
    const RankRecord& r = records[i];
    const int rank = i < ranks.size() ? ranks[i] : static_cast<int>(i);
    if (!r.ok) {
      error += fmt::format("{}rank {}: {}", error.empty() ? "" : "; ", rank, r.error);
      continue;
    }
    if (r.samples_s.empty()) continue;  // a process with no GPU in the group
    if (out.empty()) out.assign(r.samples_s.size(), 0.0);
    if (r.samples_s.size() != out.size()) {
      error += fmt::format("{}rank {} timed {} batches, others {}", error.empty() ? "" : "; ", rank,
                           r.samples_s.size(), out.size());
      continue;
    }
    for (size_t b = 0; b < out.size(); ++b) out[b] = std::max(out[b], r.samples_s[b]);
  }
  if (out.empty() && error.empty()) error = "no rank timed this measurement";
  return error.empty() ? out : std::vector<double>{};
}

double record_bytes(const std::vector<RankRecord>& records, double fallback) {
  for (const auto& r : records)
    if (r.bytes > 0) return r.bytes;
  return fallback;
}

}  // namespace

CollectiveMeasurement combine_collective(CollectiveKind op, Dtype dtype, const GroupSpec& group,
                                         const std::vector<RankRecord>& records,
                                         const std::vector<int>& ranks) {
  CollectiveMeasurement m;
  m.op = op;
  m.dtype = dtype;
  m.bytes = record_bytes(records, 0);
  m.group_size = static_cast<int64_t>(group.members.size());
  m.nodes = group.nodes;
  m.gpus_per_node = group.gpus_per_node;
  m.link = group.link;
  m.gpus = group.gpus;
  std::string error;
  const std::vector<double> samples = slowest_per_batch(records, ranks, error);
  if (!error.empty() || m.bytes <= 0) {
    m.ok = false;
    m.error = error.empty() ? "no bytes recorded" : error;
    if (m.bytes <= 0) m.bytes = 1;  // keeps the file readable; the entry is a failure
    return m;
  }
  m.time_s = summarize(samples);
  m.algbw_GBps = m.bytes / m.time_s.median / 1e9;
  m.busbw_GBps = m.algbw_GBps * bus_bandwidth_factor(op, m.group_size);
  return m;
}

P2pMeasurement combine_p2p(int src, int dst, const std::string& link,
                           const std::vector<std::string>& gpus,
                           const std::vector<RankRecord>& records) {
  P2pMeasurement m;
  m.src = src;
  m.dst = dst;
  m.link = link;
  m.gpus = gpus;
  m.bytes = record_bytes(records, 0);
  std::string error;
  const std::vector<double> samples = slowest_per_batch(records, {}, error);
  if (!error.empty()) throw RuntimeFailure(fmt::format("p2p {} -> {}: {}", src, dst, error));
  m.time_s = summarize(samples);
  m.GBps = m.bytes / m.time_s.median / 1e9;
  return m;
}

}  // namespace hetplan::profiler
