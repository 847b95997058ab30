#include "profiler/collectives/calibrate_collectives.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "profiler/collectives/communicator.h"
#include "profiler/collectives/harness.h"
#include "profiler/collectives/host_device.h"
#include "profiler/collectives/topology.h"
#include "profiler/common/launcher.h"
#include "profiler/common/records.h"
#include "profiler/common/rendezvous.h"
#include "profiler/common/run_info.h"

namespace hetplan::profiler {
namespace {

using coll::CommGroup;
using coll::LocalMember;

// This process's GPUs: one (picked by the local rank) when several processes share the host,
// otherwise every visible GPU.
ProcessInfo probe_gpus(const LaunchInfo& launch, int max_gpus, std::vector<int>& devices) {
  ProcessInfo me;
  me.rank = launch.rank;
  me.host = host_name();
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    me.error = err != cudaSuccess ? fmt::format("cudaGetDeviceCount: {}", cudaGetErrorString(err))
                                  : "no CUDA device visible";
    return me;
  }
  if (launch.local_size > 1) {
    devices = {launch.local_rank % count};
  } else {
    for (int d = 0; d < count && (max_gpus <= 0 || d < max_gpus); ++d) devices.push_back(d);
  }
  for (int d : devices) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    char bus[32] = {0};
    CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, d));
    me.gpus.push_back({prop.name, bus, static_cast<int64_t>(prop.totalGlobalMem)});
  }
  return me;
}

std::string nccl_version_text() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "";
  return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

// Everything one run needs, so that the steps below stay small.
class Sweep {
 public:
  // `own_run`: `main_journal` is this sweep's alone (calibrate-collectives' `<out>.journal`), so
  // the sweep journals its run's provenance and end there too.
  Sweep(const CollectiveOptions& o, CalibrationFile& out, Journal* main_journal, bool own_run,
        const CollectiveProgressFn& progress, const LaunchInfo& launch, Rendezvous& rdv,
        Layout layout, std::vector<int> devices)
      : o_(o),
        out_(out),
        main_(main_journal),
        own_run_(own_run && main_journal != nullptr),
        progress_(progress),
        rdv_(rdv),
        layout_(std::move(layout)),
        devices_(std::move(devices)),
        journal_(o.out_path.string() + fmt::format(".collectives.rank{}.jsonl", launch.rank),
                 o.resume),
        plan_(coll::timing_plan(o.quick)) {
    summary_.rank = launch.rank;
    summary_.ranks = launch.size;
    summary_.writer = launch.rank == 0;
  }

  CollectiveRunSummary run();

 private:
  bool root() const { return rdv_.rank() == 0; }
  std::string intra_link();
  void host_device();
  void group(const GroupSpec& g, bool with_p2p);
  // Exchanges this process's journalled record of `key` (or null); true when every process has
  // a successful one, with the records in `records`.
  bool all_have(const std::string& key, std::vector<RankRecord>& records);
  std::vector<RankRecord> exchange(const RankRecord& mine);
  double agree(double mine);
  // Creates the group's communicators and buffers on every process; false (recorded) on failure.
  bool connect(const GroupSpec& g, std::unique_ptr<CommGroup>& comm,
               std::unique_ptr<coll::Workspace>& ws, std::string& error);
  void record(const std::string& key, const Json& record, bool ok, const std::string& label);
  void tick(const std::string& label);

  const CollectiveOptions& o_;
  CalibrationFile& out_;
  Journal* main_;
  bool own_run_;
  const CollectiveProgressFn& progress_;
  Rendezvous& rdv_;
  Layout layout_;
  std::vector<int> devices_;
  Journal journal_;
  coll::TimingPlan plan_;
  CollectiveRunSummary summary_;
  size_t done_ = 0, total_ = 0;
};

std::string Sweep::intra_link() {
  if (!o_.intra_link.empty()) return o_.intra_link;
  std::string link = "unknown";
  // Only a process that drives every GPU of the node can see all pairs.
  if (root() && layout_.hosts.size() == 1 && layout_.processes.size() == 1)
    link = coll::node_link(devices_);
  return rdv_.broadcast(link);
}

void Sweep::tick(const std::string& label) {
  ++done_;
  if (root() && progress_) progress_(done_, total_, label);
}

void Sweep::record(const std::string& key, const Json& rec, bool ok, const std::string& label) {
  if (!root()) return;
  if (main_) main_->append(key, rec);
  if (!ok) ++summary_.failed;
  tick(label);
}

std::vector<RankRecord> Sweep::exchange(const RankRecord& mine) {
  std::vector<RankRecord> all;
  for (const auto& s : rdv_.all_gather(to_json(mine).dump()))
    all.push_back(rank_record_from_json(Json::parse(s)));
  return all;
}

bool Sweep::all_have(const std::string& key, std::vector<RankRecord>& records) {
  const Json* mine = journal_.find(key);
  const bool ok = mine && mine->value("ok", false);
  const auto all = rdv_.all_gather(ok ? mine->dump() : std::string());
  records.clear();
  for (const auto& s : all) {
    if (s.empty()) return false;
    records.push_back(rank_record_from_json(Json::parse(s)));
  }
  return true;
}

double Sweep::agree(double mine) {
  double agreed = 0;
  for (const auto& s : rdv_.all_gather(fmt::format("{:.17g}", mine))) {
    const double v = std::stod(s);
    if (v < 0) return -1;
    agreed = std::max(agreed, v);
  }
  return agreed;
}

void Sweep::host_device() {
  if (!o_.host_device || !root()) return;
  const auto sizes = p2p_sizes(o_);
  std::unique_ptr<coll::HostDeviceBench> bench;
  for (const char* dir : {"h2d", "d2h"}) {
    for (bool pinned : {true, false}) {
      for (double bytes : sizes) {
        const std::string key = host_device_key(dir, pinned, bytes);
        const std::string label =
            fmt::format("host-device {} {} {:.0f} B", dir, pinned ? "pinned" : "pageable", bytes);
        HostDeviceMeasurement m;
        if (const Json* j = journal_.find(key)) {
          m = host_device_from_json(ObjectReader(*j, journal_.path().string(), key));
          ++summary_.reused;
        } else {
          try {
            if (!bench) bench = std::make_unique<coll::HostDeviceBench>(devices_[0], sizes.back());
            m = bench->measure(dir, pinned, bytes, plan_);
            m.gpus = {layout_.gpus[0].name};
            journal_.append(key, to_json(m));
            ++summary_.measured;
          } catch (const RuntimeFailure& e) {
            out_.failures.push_back({key, e.what()});
            record(key, Json{{"failed", {{"what", key}, {"error", e.what()}}}}, false, label);
            continue;
          }
        }
        out_.host_device.push_back(m);
        record(key, to_json(m), true, label);
      }
    }
  }
}

bool Sweep::connect(const GroupSpec& g, std::unique_ptr<CommGroup>& comm,
                    std::unique_ptr<coll::Workspace>& ws, std::string& error) {
  ws.reset();
  comm.reset();
  ncclUniqueId id{};
  if (root()) NCCL_CHECK(ncclGetUniqueId(&id));
  const std::string shared =
      rdv_.broadcast(std::string(reinterpret_cast<const char*>(&id), sizeof id));
  std::memcpy(&id, shared.data(), sizeof id);
  std::vector<LocalMember> mine;
  for (size_t r = 0; r < g.members.size(); ++r) {
    const auto& gpu = layout_.gpus[g.members[r]];
    if (gpu.process == rdv_.rank()) mine.push_back({devices_[gpu.local], static_cast<int>(r)});
  }
  std::string local_error;
  size_t capacity = static_cast<size_t>(o_.max_bytes);
  try {
    comm = std::make_unique<CommGroup>(id, static_cast<int>(g.members.size()), mine, o_.timeout_s);
    capacity = coll::local_buffer_capacity(mine, capacity);
  } catch (const coll::NcclFault& e) {
    local_error = e.what();
  }
  // Every process must agree on success and on one buffer size.
  const auto all = rdv_.all_gather(Json{{"error", local_error}, {"capacity", capacity}}.dump());
  size_t agreed = capacity;
  error.clear();
  for (size_t r = 0; r < all.size(); ++r) {
    const Json j = Json::parse(all[r]);
    if (!j["error"].get<std::string>().empty())
      error +=
          fmt::format("{}rank {}: {}", error.empty() ? "" : "; ", r, j["error"].get<std::string>());
    agreed = std::min(agreed, j["capacity"].get<size_t>());
  }
  if (!error.empty()) {
    if (comm) comm->abort();
    comm.reset();
    return false;
  }
  ws = std::make_unique<coll::Workspace>(*comm, agreed);
  return true;
}

void Sweep::group(const GroupSpec& g, bool with_p2p) {
  std::unique_ptr<CommGroup> comm;
  std::unique_ptr<coll::Workspace> ws;
  auto agree = [this](double v) { return this->agree(v); };
  // Runs or reuses one measurement; `measure` runs it on this process, `store` keeps the result.
  auto step = [&](const std::string& key, const std::string& label, auto&& measure, auto&& store) {
    std::vector<RankRecord> records;
    if (all_have(key, records)) {
      ++summary_.reused;
      store(records);
      return;
    }
    RankRecord mine;
    std::string error;
    if (!comm && !connect(g, comm, ws, error)) {
      mine.ok = false;
      mine.error = "communicator creation failed: " + error;
      mine.bytes = 1;
      records.assign(rdv_.size(), mine);
    } else {
      mine = measure();
      journal_.append(key, to_json(mine));
      records = exchange(mine);
      ++summary_.measured;
    }
    const bool failed =
        std::any_of(records.begin(), records.end(), [](const RankRecord& r) { return !r.ok; });
    if (failed) {  // every process sees the same records: all start afresh with new communicators
      ws.reset();
      if (comm) comm->abort();
      comm.reset();
    }
    store(records);
    (void)label;
  };
  const std::vector<int> ranks(g.members.begin(), g.members.end());
  for (CollectiveKind op : planned_ops(o_)) {
    const coll::CollectiveOps& ops = coll::collective_ops(op);
    for (Dtype dtype : planned_dtypes(o_)) {
      for (double bytes : collective_sizes(o_)) {
        const std::string key = collective_key(op, dtype, g, bytes);
        const std::string label =
            fmt::format("{} {} {} {:.0f} B", to_string(op), to_string(dtype), g.label(), bytes);
        step(
            key, label,
            [&] { return coll::measure_collective(*comm, *ws, ops, dtype, bytes, plan_, agree); },
            [&](const std::vector<RankRecord>& records) {
              if (!root()) return;
              CollectiveMeasurement m = combine_collective(op, dtype, g, records, {});
              out_.collectives.push_back(m);
              record(key, to_json(m), m.ok, label);
            });
      }
    }
  }
  if (!with_p2p) return;
  const bool single_node = layout_.hosts.size() == 1;
  for (const auto& [src, dst] : plan_p2p_pairs(layout_)) {
    const int s =
        static_cast<int>(std::find(g.members.begin(), g.members.end(), src) - g.members.begin());
    const int d =
        static_cast<int>(std::find(g.members.begin(), g.members.end(), dst) - g.members.begin());
    std::string link = src == dst ? "self" : single_node ? g.link : "net";
    if (single_node && layout_.processes.size() == 1 && src != dst)
      link = coll::pair_link(devices_[src], devices_[dst]);
    std::vector<std::string> gpus = {layout_.gpus[src].name, layout_.gpus[dst].name};
    std::sort(gpus.begin(), gpus.end());
    gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
    for (double bytes : p2p_sizes(o_)) {
      const std::string key = p2p_key(src, dst, bytes);
      const std::string label = fmt::format("p2p {} -> {} {:.0f} B", src, dst, bytes);
      step(
          key, label, [&] { return coll::measure_p2p(*comm, *ws, s, d, bytes, plan_, agree); },
          [&](const std::vector<RankRecord>& records) {
            if (!root()) return;
            try {
              P2pMeasurement m = combine_p2p(src, dst, link, gpus, records);
              out_.p2p.push_back(m);
              record(key, to_json(m), true, label);
            } catch (const RuntimeFailure& e) {
              out_.failures.push_back({key, e.what()});
              record(key, Json{{"failed", {{"what", key}, {"error", e.what()}}}}, false, label);
            }
          });
    }
  }
}

CollectiveRunSummary Sweep::run() {
  const std::string link = intra_link();
  const auto groups = plan_groups(layout_, o_, link);
  // The provenance is known before the first measurement: a journal that holds it becomes the
  // file even if the run is killed (`calibrate --from-journal`).
  const int64_t run_id = getpid();
  if (root()) {
    describe_collective_run(layout_, link, out_.context);
    if (out_.context.nccl.empty()) out_.context.nccl = nccl_version_text();
    if (own_run_) main_->append(context_key(out_.context, run_id), to_json(out_.context));
  }
  // The p2p matrix runs on the group that holds every endpoint: the widest one.
  size_t p2p_group = 0;
  for (size_t i = 0; i < groups.size(); ++i)
    if (groups[i].shape != "whole_nodes" &&
        groups[i].members.size() >= groups[p2p_group].members.size())
      p2p_group = i;
  const size_t per_group =
      planned_ops(o_).size() * planned_dtypes(o_).size() * collective_sizes(o_).size();
  total_ = groups.size() * per_group +
           (o_.p2p ? plan_p2p_pairs(layout_).size() * p2p_sizes(o_).size() : 0) +
           (o_.host_device ? 4 * p2p_sizes(o_).size() : 0);
  host_device();
  for (size_t i = 0; i < groups.size(); ++i) group(groups[i], o_.p2p && i == p2p_group);
  if (root() && own_run_)
    main_->append(finished_key(out_.context, run_id),
                  Json{{"measured", summary_.measured}, {"failed", summary_.failed}});
  return summary_;
}

}  // namespace

CollectiveRunSummary run_collective_calibration(const CollectiveOptions& options,
                                                CalibrationFile& out, Journal* main_journal,
                                                const CollectiveProgressFn& progress) {
  const Environment env = process_environment();
  const LaunchInfo launch = detect_launch(env);
  std::vector<int> devices;
  const ProcessInfo me = probe_gpus(launch, options.max_gpus, devices);
  if (launch.size == 1) make_layout({me});  // no GPU: say so before opening any socket
  Rendezvous rdv(launch, rendezvous_address(launch, env), rendezvous_timeouts(env));
  std::vector<ProcessInfo> all;
  for (const auto& s : rdv.all_gather(to_json(me).dump()))
    all.push_back(process_info_from_json(Json::parse(s)));
  Layout layout = make_layout(all);  // every rank throws the same "no GPU" message
  // Opened once every process has a GPU: a run that cannot start leaves no journal behind.
  std::unique_ptr<Journal> own;
  if (!main_journal && options.keep_journal && launch.rank == 0)
    own = std::make_unique<Journal>(options.out_path.string() + ".journal", options.resume);
  Sweep sweep(options, out, own ? own.get() : main_journal, own != nullptr, progress, launch, rdv,
              std::move(layout), std::move(devices));
  return sweep.run();
}

}  // namespace hetplan::profiler
