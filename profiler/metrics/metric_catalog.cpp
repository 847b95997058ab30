#include "profiler/metrics/metric_catalog.h"

#include <algorithm>

#include "costmodel/errors.h"

namespace hetplan::profiler::metrics {
namespace {

MetricSpec m(std::string key, std::string group, std::string unit, std::string meaning,
             std::vector<std::string> candidates) {
  return {std::move(key), std::move(group), std::move(unit), std::move(meaning),
          std::move(candidates)};
}

std::vector<MetricSpec> build_catalog() {
  std::vector<MetricSpec> c = {
      // time: how long one launch ran and at what clocks.
      m("duration_ns", "time", "ns", "GPU time of the launch", {"gpu__time_duration.sum"}),
      m("sm_clock_hz", "time", "Hz", "SM clock during the launch",
        {"smsp__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second"}),
      m("dram_clock_hz", "time", "Hz", "DRAM clock during the launch",
        {"dram__cycles_elapsed.avg.per_second"}),
      m("elapsed_cycles", "time", "cycles", "SM cycles from start to end (the slowest SM)",
        {"sm__cycles_elapsed.max", "gpc__cycles_elapsed.max"}),
      m("sm_active_cycles", "time", "cycles", "cycles an SM had at least one warp, SM average",
        {"sm__cycles_active.avg"}),
      // tensor: are the tensor cores busy?
      m("tensor_pct", "tensor", "%", "tensor pipe (all MMA kinds) busy, of peak while SMs active",
        {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
         "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"}),
      m("tensor_gmma_pct", "tensor", "%", "tensor pipe busy with wgmma (GMMA), of peak",
        {"sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"}),
      m("tensor_hmma_pct", "tensor", "%", "tensor pipe busy with mma.sync (HMMA), of peak",
        {"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"}),
      m("gmma_inst", "tensor", "count", "wgmma warp instructions",
        {"sm__inst_executed_pipe_tensor_op_gmma.sum", "smsp__inst_executed_op_gmma.sum"}),
      m("hmma_inst", "tensor", "count", "mma.sync warp instructions",
        {"sm__inst_executed_pipe_tensor_op_hmma.sum"}),
      // pipes: what else competes for issue (softmax exp on XU, FMA/ALU bookkeeping).
      m("fma_pipe_pct", "pipes", "%", "FMA pipe busy, of peak",
        {"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"}),
      m("alu_pipe_pct", "pipes", "%", "ALU pipe busy, of peak",
        {"sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"}),
      m("xu_pipe_pct", "pipes", "%", "XU (exp, rcp) instructions, of peak",
        {"sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"}),
      // smem: shared-memory traffic through the LSU pipe (wgmma operand reads do not pass it).
      m("smem_wavefronts", "smem", "count", "shared-memory wavefronts (ld + st + ldmatrix)",
        {"l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"}),
      m("smem_ld_wavefronts", "smem", "count", "shared-memory load wavefronts",
        {"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"}),
      m("smem_st_wavefronts", "smem", "count", "shared-memory store wavefronts",
        {"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"}),
      m("smem_bank_conflicts", "smem", "count", "extra wavefronts from bank conflicts",
        {"l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"}),
      m("smem_ld_conflicts", "smem", "count", "bank conflicts of loads",
        {"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"}),
      m("smem_st_conflicts", "smem", "count", "bank conflicts of stores",
        {"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"}),
      m("smem_pipe_pct", "smem", "%", "shared-memory wavefronts, of peak over the launch",
        {"l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed"}),
      m("ldsm_inst", "smem", "count", "ldmatrix warp instructions",
        {"smsp__inst_executed_op_ldsm.sum"}),
      // memory: bytes at each level.
      m("l1_bytes", "memory", "bytes", "bytes through L1/TEX (all kinds)", {"l1tex__t_bytes.sum"}),
      m("l1_hit_pct", "memory", "%", "L1 sector hit rate", {"l1tex__t_sector_hit_rate.pct"}),
      m("tma_load_bytes", "memory", "bytes", "bytes TMA (cp.async.bulk) brought into shared memory",
        {"l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld.sum"}),
      m("l2_bytes", "memory", "bytes", "bytes L2 served (all requests)", {"lts__t_bytes.sum"}),
      m("l2_read_sectors", "memory", "sectors", "32-byte L2 sectors read",
        {"lts__t_sectors_op_read.sum"}),
      m("l2_write_sectors", "memory", "sectors", "32-byte L2 sectors written",
        {"lts__t_sectors_op_write.sum"}),
      m("l2_hit_pct", "memory", "%", "L2 sector hit rate", {"lts__t_sector_hit_rate.pct"}),
      m("l2_pct", "memory", "%", "L2 throughput, of peak over the launch",
        {"lts__throughput.avg.pct_of_peak_sustained_elapsed"}),
      m("dram_read_bytes", "memory", "bytes", "bytes read from DRAM", {"dram__bytes_read.sum"}),
      m("dram_write_bytes", "memory", "bytes", "bytes written to DRAM", {"dram__bytes_write.sum"}),
      m("dram_pct", "memory", "%", "DRAM throughput, of peak over the launch",
        {"dram__throughput.avg.pct_of_peak_sustained_elapsed",
         "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"}),
      // l2red: reductions and atomics resolved in L2 (the attention backward's dQ).
      m("l2_red_sectors", "l2red", "sectors", "L2 sectors of reductions (red, bulk reduce)",
        {"lts__t_sectors_op_red.sum"}),
      m("l2_atom_sectors", "l2red", "sectors", "L2 sectors of atomics",
        {"lts__t_sectors_op_atom.sum"}),
      m("l2_red_requests", "l2red", "count", "L2 requests of reductions",
        {"lts__t_requests_op_red.sum"}),
      m("red_inst", "l2red", "count", "global red warp instructions",
        {"smsp__inst_executed_op_global_red.sum"}),
      m("atom_inst", "l2red", "count", "global atom warp instructions",
        {"smsp__inst_executed_op_global_atom.sum"}),
      // occupancy
      m("occupancy_pct", "occupancy", "%", "achieved occupancy: active warps, of the SM's maximum",
        {"sm__warps_active.avg.pct_of_peak_sustained_active"}),
      m("eligible_warps", "occupancy", "warps", "warps ready to issue per scheduler per cycle",
        {"smsp__warps_eligible.avg.per_cycle_active"}),
      // issue
      m("issue_pct", "issue", "%", "cycles a scheduler issued an instruction, of active cycles",
        {"smsp__issue_active.avg.pct_of_peak_sustained_active"}),
      m("ipc", "issue", "inst/cycle", "warp instructions per active SM cycle",
        {"sm__inst_executed.avg.per_cycle_active"}),
      m("inst_executed", "issue", "count", "warp instructions executed",
        {"smsp__inst_executed.sum"}),
      m("cycles_per_issue", "issue", "cycles",
        "cycles between two issues of a warp (the sum of the stall_ columns plus one)",
        {"smsp__average_warp_latency_per_inst_issued.ratio"}),
  };
  for (const std::string& r : stall_reasons())
    c.push_back(m("stall_" + r, "stalls", "cycles/issue",
                  "cycles a warp spent stalled on " + r + " per instruction issued",
                  {"smsp__average_warps_issue_stalled_" + r + "_per_issue_active.ratio",
                   "smsp__average_warp_latency_issue_stalled_" + r + ".ratio"}));
  return c;
}

}  // namespace

const std::vector<std::string>& metric_groups() {
  static const std::vector<std::string> g = {"time",  "tensor",    "pipes", "smem",  "memory",
                                             "l2red", "occupancy", "issue", "stalls"};
  return g;
}

const std::vector<std::string>& stall_reasons() {
  static const std::vector<std::string> r = {"barrier",
                                             "branch_resolving",
                                             "dispatch_stall",
                                             "drain",
                                             "gmma",
                                             "imc_miss",
                                             "lg_throttle",
                                             "long_scoreboard",
                                             "math_pipe_throttle",
                                             "membar",
                                             "mio_throttle",
                                             "misc",
                                             "no_instruction",
                                             "not_selected",
                                             "selected",
                                             "short_scoreboard",
                                             "sleeping",
                                             "tex_throttle",
                                             "wait"};
  return r;
}

const std::vector<MetricSpec>& metric_catalog() {
  static const std::vector<MetricSpec> c = build_catalog();
  return c;
}

std::vector<MetricSpec> select_metrics(const std::vector<std::string>& groups) {
  const auto& known = metric_groups();
  bool all = groups.empty();
  for (const std::string& g : groups) {
    if (g == "all") {
      all = true;
      continue;
    }
    if (std::find(known.begin(), known.end(), g) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      throw InputError("--metrics: unknown metric group '" + g + "'; expected all or one of " +
                       list);
    }
  }
  std::vector<MetricSpec> out;
  for (const MetricSpec& s : metric_catalog())
    if (all || std::find(groups.begin(), groups.end(), s.group) != groups.end()) out.push_back(s);
  return out;
}

std::vector<ResolvedMetric> resolve_metrics(
    const std::vector<MetricSpec>& specs, const std::function<bool(const std::string&)>& accepts) {
  std::vector<ResolvedMetric> out;
  for (const MetricSpec& s : specs) {
    ResolvedMetric r{s, "", {}};
    for (const std::string& name : s.candidates) {
      if (accepts(name)) {
        r.name = name;
        break;
      }
      r.rejected.push_back(name);
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> accepted_names(const std::vector<ResolvedMetric>& resolved) {
  std::vector<std::string> names;
  for (const ResolvedMetric& r : resolved)
    if (!r.name.empty() && std::find(names.begin(), names.end(), r.name) == names.end())
      names.push_back(r.name);
  return names;
}

}  // namespace hetplan::profiler::metrics
