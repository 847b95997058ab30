#include "costmodel/cost_model.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "costmodel/attention_model.h"
#include "costmodel/errors.h"

namespace hetplan {

CostModel::CostModel(Profile profile, const ClusterSpec& cluster, CommPriors priors)
    : profile_(std::move(profile)), cluster_(cluster), priors_(priors) {
  for (const auto& group : cluster_.groups) {
    const GpuSpec& gpu = group.node.gpu;
    if (gpus_.count(gpu.name)) continue;
    GpuCost c;
    c.fit = profile_.gpu(gpu.name);
    for (Dtype d : kEveryDtype) {
      if (!gpu.supports(d)) continue;
      GemmEfficiency eff;
      if (auto it = c.fit.gemm.find(d); it != c.fit.gemm.end()) {
        eff = it->second;
      } else if (auto f16 = c.fit.gemm.find(Dtype::kFp16); f16 != c.fit.gemm.end()) {
        eff = f16->second;  // same tensor cores
      } else if (auto b16 = c.fit.gemm.find(Dtype::kBf16); b16 != c.fit.gemm.end()) {
        eff = b16->second;
      }
      GemmModel m(eff, gpu.peak_flops(d), gpu.memory_GBps * c.fit.memory_efficiency, gpu.sm_count,
                  dtype_bytes(d));
      if (auto pts = c.fit.gemm_points.find(d); pts != c.fit.gemm_points.end())
        m.set_measurements(pts->second);
      c.gemm.emplace(d, std::move(m));
    }
    // Companions join once every dtype's own model is built (costmodel/gemm_companion.h).
    for (const auto& [d, companion] : c.fit.gemm_companion) {
      auto own = c.gemm.find(d), other = c.gemm.find(companion);
      if (own != c.gemm.end() && other != c.gemm.end()) own->second.set_companion(other->second);
    }
    gpus_.emplace(gpu.name, std::move(c));
  }
  if (!profile_.collectives.empty()) {
    CalibrationFile measured;
    measured.collectives = profile_.collectives;
    comm_ = fit_communication(measured);
  }
  // Whole-layer timings against this model's ops, once the rest is in place.
  for (const auto& group : cluster_.groups) {
    GpuCost& c = gpus_.at(group.node.gpu.name);
    if (!c.timings.empty() || (c.fit.layers.empty() && c.fit.layer_forward.empty())) continue;
    c.timings = compare_layer_timings(*this, group.node.gpu, c.fit);
    std::vector<LayerCorrection> timed = layer_corrections(c.timings);
    // Tensor widths that were not timed take a pooled line where one carries over to them.
    std::vector<LayerCorrection> untimed = untimed_width_corrections(timed);
    for (auto* corrections : {&timed, &untimed})
      for (auto& corr : *corrections)
        c.corrections.emplace(std::make_pair(corr.key, corr.dtype), std::move(corr));
  }
}

const CostModel::GpuCost& CostModel::cost(const GpuSpec& gpu) const {
  auto it = gpus_.find(gpu.name);
  if (it == gpus_.end())
    throw RuntimeFailure(fmt::format("no cost model prepared for GPU type {}", gpu.name));
  return it->second;
}

const GpuFit& CostModel::fit(const GpuSpec& gpu) const { return cost(gpu).fit; }

Dtype CostModel::compute_dtype(const GpuSpec& gpu, Dtype requested) const {
  if (gpu.supports(requested)) return requested;
  // fp4 GEMMs run in fp8 where the GPU has no fp4 units (Hopper), as a recipe would fall back.
  if (requested == Dtype::kFp4 && gpu.supports(Dtype::kFp8)) return Dtype::kFp8;
  if ((requested == Dtype::kBf16 || requested == Dtype::kFp8 || requested == Dtype::kFp4) &&
      gpu.supports(Dtype::kFp16))
    return Dtype::kFp16;
  return Dtype::kFp32;
}

double CostModel::gemm_s(const GpuSpec& gpu, Dtype dtype, const GemmShape& shape) const {
  const GpuCost& c = cost(gpu);
  auto it = c.gemm.find(compute_dtype(gpu, dtype));
  if (it == c.gemm.end())
    throw RuntimeFailure(fmt::format("{} has no unit for {}", gpu.name, to_string(dtype)));
  return it->second.time_s(shape);
}

// Per-expert GEMMs: `batch` kernels of one copy each, issued round-robin over `streams` streams.
// They take no less than the one batched kernel (every copy's tiles packed over the SMs, one
// launch) and no less than the streams running their copies side by side: the copies' own times
// over the streams, where each copy is too small to fill the GPU alone.
double CostModel::gemm_op_s(const GpuSpec& gpu, Dtype dtype, const GemmOp& op) const {
  const Dtype d = op.quantized ? op.dtype : dtype;
  const double batched_s = gemm_s(gpu, d, op.shape);
  if (op.streams <= 0 || op.shape.batch <= 1) return batched_s;
  GemmShape one = op.shape;
  one.batch = 1;
  const auto copies = static_cast<double>(op.shape.batch);
  const double side_by_side = std::min(static_cast<double>(op.streams), copies);
  return std::max(batched_s, copies * gemm_s(gpu, d, one) / side_by_side);
}

double CostModel::memory_op_s(const GpuSpec& gpu, const std::string& kernel, double bytes) const {
  const GpuFit& f = cost(gpu).fit;
  if (auto it = f.kernels.find(kernel); it != f.kernels.end())
    return it->second.overhead_s + bytes / (it->second.GBps * 1e9);
  return f.launch_s + bytes / (gpu.memory_GBps * f.memory_efficiency * 1e9);
}

double CostModel::memory_op_s(const GpuSpec& gpu, const MemoryOp& op) const {
  return memory_op_s(gpu, op.kernel, op.bytes) +
         static_cast<double>(op.launches - 1) * cost(gpu).fit.launch_s;
}

double CostModel::attention_s(const GpuSpec& gpu, Dtype dtype, const AttentionOp& op) const {
  const GpuFit& f = cost(gpu).fit;
  const double peak = gpu.peak_flops(compute_dtype(gpu, dtype));
  const bool forward = op.pass == Pass::kForward;
  // Inside a training step attention runs among its layer's GEMMs: the in-layer context.
  const AttentionCoefficients c = f.attention(forward);
  return f.launch_s +
         c.in_layer_factor * attention_time_s(c, attention_work(op), peak, gpu.sm_count) / op.speed;
}

const CommGroup& LayerGroups::of(CommScope scope) const {
  switch (scope) {
    case CommScope::kTensor:
      return tensor;
    case CommScope::kContext:
      return context;
    case CommScope::kExpert:
      return expert;
    case CommScope::kExpertTensor:
      return expert_tensor;
  }
  return tensor;
}

LayerTimes CostModel::grouped_layer_times(const GpuSpec& gpu, const LayerWork& work,
                                          const Recomputation& recompute, const LayerGroups& groups,
                                          Dtype dtype, bool correct) const {
  if (!correct) return scaled_layer_times(gpu, work, recompute, groups, dtype, PassScale{});
  const LayerCorrection* c = layer_correction(gpu, work.key, compute_dtype(gpu, dtype));
  LayerTimes t = scaled_layer_times(gpu, work, recompute, groups, dtype,
                                    c ? c->scale(work.micro_batch) : PassScale{});
  t.correction = c;
  return t;
}

LayerTimes CostModel::layer_times(const GpuSpec& gpu, const LayerWork& work,
                                  const Recomputation& recompute, const CommGroup& tp,
                                  Dtype dtype) const {
  return grouped_layer_times(gpu, work, recompute, LayerGroups(tp), dtype, /*correct=*/true);
}

LayerTimes CostModel::layer_times_from_ops(const GpuSpec& gpu, const LayerWork& work,
                                           const Recomputation& recompute, const CommGroup& tp,
                                           Dtype dtype) const {
  return grouped_layer_times(gpu, work, recompute, LayerGroups(tp), dtype, /*correct=*/false);
}

double CostModel::comm_op_s(const CommOp& op, const LayerGroups& groups) const {
  const CommGroup& g = groups.of(op.scope);
  const CommGroup& on = op.group_ranks > 0 ? inner_group(g, op.group_ranks) : g;
  if (op.kind == CollectiveKind::kAllToAll && op.dedup_experts > 0)
    return static_cast<double>(op.repeats) *
           deduplicated_all_to_all_s(op.bytes, on, {op.dedup_experts, op.dedup_top_k});
  return static_cast<double>(op.repeats) * collective_s(op.kind, op.bytes, on);
}

const LayerCorrection* CostModel::layer_correction(const GpuSpec& gpu, const LayerKey& key,
                                                   Dtype dtype) const {
  const GpuCost& c = cost(gpu);
  auto it = c.corrections.find({key, dtype});
  return it == c.corrections.end() ? nullptr : &it->second;
}

const std::vector<LayerTiming>& CostModel::layer_timings(const GpuSpec& gpu) const {
  return cost(gpu).timings;
}

// Each op of pass p takes `scale.rate[p]` times its own time and pass p takes `scale.fixed_s[p]`
// more; forward ops re-run inside B keep the forward's rate, and bring the share of the forward's
// fixed time that their ops are of the forward's (all of it for full recomputation).
// Communication is not scaled.
LayerTimes CostModel::scaled_layer_times(const GpuSpec& gpu, const LayerWork& work,
                                         const Recomputation& asked, const LayerGroups& groups,
                                         Dtype dtype, const PassScale& scale) const {
  const Recomputation recompute = layer_recomputation(work, asked);
  LayerTimes t;
  double recomputed_ops = 0;                        // forward ops re-run inside B
  double attention_pass_s[kNumPasses] = {0, 0, 0};  // what ring attention's exchange hides behind
  for (const auto& g : work.gemms) {
    const double s = scale.rate[static_cast<int>(g.pass)] * gemm_op_s(gpu, dtype, g);
    t.pass_s[static_cast<int>(g.pass)] += s;
    recomputed_ops += s * rerun_share(recompute, g.pass, g.group, g.op_rerun);
  }
  for (const auto& m : work.memory_ops) {
    const double s = scale.rate[static_cast<int>(m.pass)] * memory_op_s(gpu, m);
    t.pass_s[static_cast<int>(m.pass)] += s;
    recomputed_ops += s * rerun_share(recompute, m.pass, m.group, m.op_rerun);
  }
  for (const auto& a : work.attention) {
    const double s = scale.rate[static_cast<int>(a.pass)] * attention_s(gpu, dtype, a);
    t.pass_s[static_cast<int>(a.pass)] += s;
    attention_pass_s[static_cast<int>(a.pass)] += s;
    recomputed_ops += s * rerun_share(recompute, a.pass, OpGroup::kDefault, a.op_rerun);
  }
  constexpr int kF = static_cast<int>(Pass::kForward);
  double recomputed = recomputed_ops;  // and, below, the communication they bring
  if (recomputed_ops > 0 && scale.fixed_s[kF] > 0)
    recomputed += scale.fixed_s[kF] * recomputed_ops / t.pass_s[kF];
  for (int p = 0; p < kNumPasses; ++p) t.pass_s[p] += scale.fixed_s[p];
  for (const auto& c : work.comms) {
    const int p = static_cast<int>(c.pass);
    double s = comm_op_s(c, groups);
    if (c.overlap == CommOverlap::kAttention && c.repeats > 0) {
      // Ring attention: each of the cp - 1 transfers runs behind one of the cp steps of the
      // pass's attention; only a transfer's excess over a step is exposed.
      const double step_s = attention_pass_s[p] / static_cast<double>(c.repeats + 1);
      s = std::max(0.0, s - static_cast<double>(c.repeats) * step_s);
    }
    const int scope = static_cast<int>(c.scope);
    t.pass_s[p] += s;
    t.comm_s[scope][p] += s;
    if (c.scope == CommScope::kTensor) t.tp_comm_s[p] += s;
    if (const double share = rerun_share(recompute, c.pass, c.group, c.op_rerun); share > 0) {
      recomputed += s * share;
      constexpr int kB = static_cast<int>(Pass::kBackwardInput);
      t.comm_s[scope][kB] += s * share;
      if (c.scope == CommScope::kTensor) t.tp_comm_s[kB] += s * share;
    }
  }
  t.recompute_s = recomputed;
  t.pass_s[static_cast<int>(Pass::kBackwardInput)] += recomputed;
  return t;
}

double CostModel::link_efficiency(Fabric fabric) const {
  return fabric == Fabric::kPcie ? priors_.pcie_efficiency : priors_.nvlink_efficiency;
}

namespace {

// Ring steps of each collective over n ranks (latency terms).
double ring_steps(CollectiveKind kind, int64_t n) {
  if (n <= 1) return 0;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return 2.0 * (n - 1);
    case CollectiveKind::kSendRecv:
      return 1;
    default:
      return double(n - 1);
  }
}

}  // namespace

std::optional<double> CostModel::measured_collective_s(CollectiveKind kind, double bytes,
                                                       const CommGroup& g) const {
  if (comm_.collectives.empty()) return std::nullopt;
  // The measured dtype matters little for the time of a given byte count; prefer bf16.
  for (Dtype d : {Dtype::kBf16, Dtype::kFp32, Dtype::kFp16}) {
    if (const CollectiveFit* f = comm_.find(kind, d, g.size, g.nodes, g.link())) {
      // Measured alone; a shared network is slower by the sharing factor on its bandwidth part.
      if (g.nodes > 1 && g.sharing > 1)
        return f->time_s(bytes) + (f->time_s(bytes) - f->time_s(0)) * double(g.sharing - 1);
      return f->time_s(bytes);
    }
    if (g.nodes > 1)
      if (auto t = hierarchical_time_s(comm_, kind, d, bytes, g.nodes, g.per_node)) return t;
  }
  return std::nullopt;
}

double CostModel::collective_s(CollectiveKind kind, double bytes, const CommGroup& g) const {
  if (g.size <= 1 || bytes <= 0) return 0;
  if (auto measured = measured_collective_s(kind, bytes, g)) return *measured;
  // Inside one node: a ring over the fabric.
  auto intra = [&](int64_t n, double array_bytes) {
    if (n <= 1) return 0.0;
    const double bw = g.intra_GBps * link_efficiency(g.fabric) * 1e9;
    return ring_steps(kind, n) * g.intra_latency_s +
           array_bytes * bus_bandwidth_factor(kind, n) / bw;
  };
  if (kind == CollectiveKind::kAllToAll)
    return flat_all_to_all_s(all_to_all_traffic(bytes, g, nullptr), g);
  if (g.nodes <= 1) return intra(g.size, bytes);
  // Across nodes (hierarchical: inside the nodes, then between them). Every byte of the
  // cross-node part goes through each node's network, shared by `sharing` concurrent groups: the
  // bus bytes of a collective over the nodes (nccl-tests' factor).
  const double nic = g.inter_GBps * priors_.network_efficiency * 1e9 / double(g.sharing);
  const double nic_bytes = bus_bandwidth_factor(kind, g.nodes) * bytes;
  const double inter = ring_steps(kind, g.nodes) * g.inter_latency_s + nic_bytes / nic;
  return intra(g.per_node, bytes) + inter;
}

double touched_groups(const TokenRouting& r, int64_t groups) {
  if (groups <= 1) return 1;
  const double experts = static_cast<double>(r.experts);
  const double per_group = experts / static_cast<double>(groups);
  double none = 1;  // a given group holds none of a token's picks
  for (int64_t i = 0; i < r.top_k; ++i)
    none *= std::max(
        0.0, (experts - per_group - static_cast<double>(i)) / (experts - static_cast<double>(i)));
  return static_cast<double>(groups) * (1 - none);
}

AllToAllTraffic all_to_all_traffic(double bytes, const CommGroup& g, const TokenRouting* dedup) {
  const double n = static_cast<double>(g.size);
  const double p = static_cast<double>(std::min(g.per_node, g.size));
  const double k = static_cast<double>(g.nodes);
  AllToAllTraffic t;
  if (dedup == nullptr) {
    // Each rank's bytes go evenly to the n ranks (its own share stays).
    t.gpu_link_bytes = bytes * (p - 1) / n;
    t.node_network_bytes = g.nodes > 1 ? p * bytes * (n - p) / n : 0;
    return t;
  }
  // One copy of a token per destination: per node over the network (then forwarded over the
  // node's links), per GPU inside a node (the share of a token's destination GPUs that are not
  // where it entered the node).
  const double token_bytes = bytes / static_cast<double>(std::max<int64_t>(1, dedup->top_k));
  const double gpus = touched_groups(*dedup, g.size);
  t.gpu_link_bytes = token_bytes * gpus * (p - 1) / p;
  if (g.nodes > 1) {
    const double nodes = touched_groups(*dedup, g.nodes);
    t.node_network_bytes = p * token_bytes * nodes * (k - 1) / k;
  }
  return t;
}

double CostModel::flat_all_to_all_s(const AllToAllTraffic& t, const CommGroup& g) const {
  const double link = g.intra_GBps * link_efficiency(g.fabric) * 1e9;
  const double intra_s = g.per_node > 1 ? g.intra_latency_s + t.gpu_link_bytes / link : 0.0;
  if (g.nodes <= 1) return intra_s;
  const double nic = g.inter_GBps * priors_.network_efficiency * 1e9 / double(g.sharing);
  const double inter_s = ring_steps(CollectiveKind::kAllToAll, g.nodes) * g.inter_latency_s +
                         t.node_network_bytes / nic;
  return std::max(intra_s, inter_s);
}

double CostModel::deduplicated_all_to_all_s(double bytes, const CommGroup& g,
                                            const TokenRouting& routing) const {
  if (g.size <= 1 || bytes <= 0) return 0;
  const AllToAllTraffic plain = all_to_all_traffic(bytes, g, nullptr);
  const AllToAllTraffic dedup = all_to_all_traffic(bytes, g, &routing);
  // Measured: the all-to-all at the bytes its busiest resource then carries.
  const double ratio = g.nodes > 1 ? dedup.node_network_bytes / plain.node_network_bytes
                                   : dedup.gpu_link_bytes / plain.gpu_link_bytes;
  if (auto measured = measured_collective_s(CollectiveKind::kAllToAll, bytes * ratio, g))
    return *measured;
  return flat_all_to_all_s(dedup, g);
}

double CostModel::p2p_s(double bytes, const Link& link) const {
  if (bytes <= 0) return 0;
  const double eff = link.same_node ? priors_.nvlink_efficiency : priors_.network_efficiency;
  return link.latency_s + bytes / (link.GBps * eff * 1e9);
}

double CostModel::optimizer_s(const GpuSpec& gpu, double params) const {
  // Fused AdamW: reads fp32 weight, gradient and two moments (16 B), writes weight, moments and
  // the bf16 copy (14 B).
  constexpr double kBytesPerParam = 30;
  return memory_op_s(gpu, "adamw", params * kBytesPerParam);
}

}  // namespace hetplan
