#include "search/transfer.h"

#include "costmodel/dtype.h"

namespace hetplan {
namespace {

// Adds `bytes` sent from device a to device b to the link between their zones, if priced.
void add_send(const ClusterSpec& c, const Device& a, const Device& b, double bytes,
              TransferPerStep& out) {
  if (a.node == b.node || bytes <= 0) return;
  const ZoneLink* link = c.zone_link(static_cast<size_t>(a.group), static_cast<size_t>(b.group));
  if (!link) return;
  const bool regions = link == &c.cloud->between_regions;
  (regions ? out.bytes_between_regions : out.bytes_between_zones) += bytes;
  out.dollars += bytes / 1e9 * link->price_per_GB;
}

// Bytes per ring edge for a gradient synchronisation of `params` over `ranks` replicas: the
// all-reduce's reduce-scatter and all-gather each send (N-1)/N of the buffer over every edge.
double ring_edge_bytes(const Strategy& s, Dtype dtype, double params, int64_t ranks) {
  if (ranks <= 1 || params <= 0) return 0;
  const double share = static_cast<double>(ranks - 1) / static_cast<double>(ranks);
  const double grads = params * (s.fp32_grad_reduce ? 4 : dtype_bytes(dtype));
  const double weights = params * dtype_bytes(dtype);
  // ZeRO 0: all-reduce (2 passes of the gradients); 1 and 2: reduce-scatter, then the updated
  // weights gathered; 3: reduce-scatter, and the weights gathered for forward and backward.
  const double passes = s.zero == 0  ? 2 * grads
                        : s.zero < 3 ? grads + weights
                                     : grads + 2 * weights;
  return share * passes;
}

struct StageParams {
  double dense = 0, experts = 0;
};

StageParams stage_params(const Evaluator& ev, const Strategy& s, const StageSpec& stage) {
  const int64_t group = ev.devices()[stage.devices.front()].group;
  const std::vector<LayerCost>& costs = ev.layer_costs(group, 1, s);
  StageParams out;
  for (int64_t i = stage.first_layer; i <= stage.last_layer; ++i) {
    out.dense += costs[i].param_count - costs[i].expert_param_count;
    out.experts += costs[i].expert_param_count;
  }
  return out;
}

// The replicas of each of `offsets` devices of a stage, `stride` apart: one ring each.
void add_stage_rings(const Evaluator& ev, const std::vector<int64_t>& devices, int64_t offsets,
                     int64_t stride, int64_t replicas, double edge_bytes, TransferPerStep& out) {
  if (replicas <= 1 || edge_bytes <= 0) return;
  for (int64_t o = 0; o < offsets; ++o) {
    std::vector<int64_t> ring;
    for (int64_t k = 0; k < replicas; ++k) ring.push_back(devices[o + k * stride]);
    add_ring_crossings(ev.cluster(), ev.devices(), ring, edge_bytes, out);
  }
}

}  // namespace

void add_ring_crossings(const ClusterSpec& cluster, const std::vector<Device>& devices,
                        const std::vector<int64_t>& ring, double edge_bytes, TransferPerStep& out) {
  if (ring.size() < 2) return;
  for (size_t i = 0; i < ring.size(); ++i)
    add_send(cluster, devices[ring[i]], devices[ring[(i + 1) % ring.size()]], edge_bytes, out);
}

TransferPerStep transfer_per_step(const Evaluator& ev, const Strategy& s, const Prediction& p) {
  TransferPerStep out;
  const ClusterSpec& c = ev.cluster();
  if (!c.cloud || !p.feasible || p.stages.empty()) return out;
  const Dtype dtype = ev.model().dtype;
  const LayerSpec& last = ev.model().layers.back();
  const bool tied_on_one_rank = last.head() && last.head()->tied &&
                                p.stages.front().stage.devices == p.stages.back().stage.devices;
  for (size_t j = 0; j < p.stages.size(); ++j) {
    const StageSpec& stage = p.stages[j].stage;
    StageParams params = stage_params(ev, s, stage);
    // A tied head on the embedding's own rank shares its table (search/eval/stage_times.cpp).
    if (tied_on_one_rank && j + 1 == p.stages.size())
      params.dense -= static_cast<double>(last.head()->vocab) * last.hidden / s.tp;
    const double before = out.bytes();
    add_stage_rings(ev, stage.devices, s.tp, s.tp, s.grad_replicas(),
                    ring_edge_bytes(s, dtype, params.dense, s.grad_replicas()), out);
    const int64_t expert_stride = s.ep * s.expert_tp();
    add_stage_rings(ev, stage.devices, expert_stride, expert_stride, s.expert_dp(),
                    ring_edge_bytes(s, dtype, params.experts, s.expert_dp()), out);
    out.gradient_bytes += out.bytes() - before;
    if (j + 1 == p.stages.size()) continue;
    // One activation forward and its gradient back, per micro-batch, from each (dp, cp) slice.
    const StageSpec& next = p.stages[j + 1].stage;
    const int64_t group = ev.devices()[stage.devices.front()].group;
    const double activation = ev.layer_costs(group, 1, s)[stage.last_layer].output_bytes;
    const double bytes = 2 * activation * static_cast<double>(s.microbatches());
    const double sent = out.bytes();
    for (int64_t k = 0; k < s.grad_replicas(); ++k)
      add_send(c, ev.devices()[stage.devices[k * s.tp]], ev.devices()[next.devices[k * s.tp]],
               bytes, out);
    out.pipeline_bytes += out.bytes() - sent;
  }
  return out;
}

}  // namespace hetplan
