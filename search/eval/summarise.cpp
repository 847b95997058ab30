// Step 10 of a prediction: iteration time, throughput, MFU and the breakdown into named parts that
// sum to the iteration time.
#include <algorithm>

#include "search/eval/steps.h"

namespace hetplan::eval {
namespace {

// Peak FLOP/s of every device the strategy uses, each at the dtype it computes in.
double peak_flops(const Evaluator& ev, const Placement& p) {
  double peak = 0;
  for (const auto& group : p.groups)
    for (int64_t device : group) {
      const GpuSpec& g = ev.cluster().groups[ev.devices()[device].group].node.gpu;
      peak += g.peak_flops(ev.cost().compute_dtype(g, ev.model().dtype));
    }
  return peak;
}

}  // namespace

void summarise(const Evaluator& ev, const Strategy& s, const Placement& p, const StageTimes& t,
               const pipeline::PipelineResult& pipe, const Synchronisation& sync,
               const HostFloor& host, Prediction& out) {
  const double m = static_cast<double>(s.microbatches());
  out.kernels_per_iteration = host.kernels;
  out.host_s = host.host_s;
  const double device_s = pipe.makespan_s + sync.tail_s;
  const double host_wait = std::max(0.0, host.host_s - device_s);
  out.iteration_s = device_s + host_wait;
  out.samples_per_s = static_cast<double>(s.global_batch) / out.iteration_s;
  out.tokens_per_s = out.samples_per_s * static_cast<double>(ev.model().seq_len);
  out.mfu = model_flops_per_sample(ev.model(), s.lora) * static_cast<double>(s.global_batch) /
            (out.iteration_s * peak_flops(ev, p));
  out.bubble_rate = pipe.bubble_rate;
  // The busiest device bounds the makespan; what is left is pipeline fill, drain and waiting.
  const size_t P = p.groups.size();
  std::vector<double> busy(P, 0), comm(P, 0), cp_comm(P, 0), ep_comm(P, 0), host_sync(P, 0);
  for (size_t j = 0; j < p.rank_of_stage.size(); ++j) {
    const StagePrediction& st = t.stages[j];
    const int64_t d = p.rank_of_stage[j];
    busy[d] += st.forward_s + st.backward_input_s + st.backward_weight_s;
    comm[d] += st.tp_comm_s;
    cp_comm[d] += st.cp_comm_s;
    ep_comm[d] += st.ep_comm_s;
    host_sync[d] += st.host_sync_s;
  }
  const size_t crit = std::max_element(busy.begin(), busy.end()) - busy.begin();
  double p2p = 0;
  for (double c : t.problem.p2p_s) p2p += 2 * c;
  const double idle = std::max(0.0, pipe.makespan_s - m * busy[crit]);
  p2p = std::min(p2p, idle);
  const int64_t tail = sync.tail_rank;
  out.breakdown = {
      {"compute", m * (busy[crit] - comm[crit] - cp_comm[crit] - ep_comm[crit] - host_sync[crit])},
      {"tp_comm", m * comm[crit]},
      {"cp_comm", m * cp_comm[crit]},  // context parallelism's exposed exchange
      {"ep_comm", m * ep_comm[crit]},  // the experts' all-to-alls or gathers
      {"pp_p2p", p2p},
      {"pp_bubble", idle - p2p},  // >= 0: rounding can put the makespan a hair below m x busy
      {"dp_sync", sync.exposed_s[tail]},
      {"optimizer", sync.optimizer_s[tail]},
      {"host_sync", m * host_sync[crit]},  // the device waiting for its host after host syncs
      {"host_wait", host_wait},  // the device idle for its host beyond its own work (host floor)
  };
}

}  // namespace hetplan::eval
