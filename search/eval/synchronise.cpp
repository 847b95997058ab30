// Step 7 of a prediction: the data-parallel gradient synchronisation of every pipeline rank, what
// of it the backward hides, the tied embeddings' sum and the optimizer step.
#include <algorithm>

#include "search/eval/steps.h"

namespace hetplan::eval {
namespace {

// Tied embeddings on two devices: their gradients are summed between them.
double tied_sum_s(const Evaluator& ev, const Strategy& s, const Placement& p) {
  const LayerSpec& last = ev.model().layers.back();
  const std::vector<int64_t>& dev = p.rank_of_stage;
  if (!(last.head() && last.head()->tied && dev.front() != dev.back())) return 0;
  const double bytes = static_cast<double>(last.head()->vocab) * last.hidden / s.tp * 4;
  return ev.cost().collective_s(
      CollectiveKind::kAllReduce, bytes,
      make_comm_group(ev.cluster(), ev.devices(),
                      {p.groups[dev.front()][0], p.groups[dev.back()][0]}));
}

// `ranks` devices of a pipeline rank's `devices`, `stride` apart from the first; `sharing` such
// groups use each node's network at once.
CommGroup strided_group(const Evaluator& ev, const std::vector<int64_t>& devices, int64_t ranks,
                        int64_t stride, int64_t sharing) {
  // Consecutive devices (the default placement's, the search's): the evaluator's cached group.
  const int64_t first = devices.front();
  bool consecutive = true;
  for (size_t i = 0; consecutive && i < devices.size(); ++i)
    consecutive = devices[i] == first + static_cast<int64_t>(i);
  if (consecutive) return ev.strided_group(first, ranks, stride, sharing);
  std::vector<int64_t> members;
  for (int64_t k = 0; k < ranks; ++k) members.push_back(devices[k * stride]);
  return make_comm_group(ev.cluster(), ev.devices(), members, sharing);
}

// The gradient reduction (all-reduce, or reduce-scatter under ZeRO) and the parameter gather after
// the step (ZeRO 1 and 2) of `params` over the replicas `g`.
std::pair<double, double> dp_collectives_s(const Evaluator& ev, const Strategy& s,
                                           const CommGroup& g, const Rank& r, double params) {
  if (g.size <= 1 || params <= 0) return {0, 0};
  const double grad_bytes = params * (s.fp32_grad_reduce ? 4 : dtype_bytes(r.dtype));
  if (s.zero == 0) return {ev.cost().collective_s(CollectiveKind::kAllReduce, grad_bytes, g), 0};
  const double reduce = ev.cost().collective_s(CollectiveKind::kReduceScatter, grad_bytes, g);
  const double gather = s.zero < 3 ? ev.cost().collective_s(CollectiveKind::kAllGather,
                                                            params * dtype_bytes(r.dtype), g)
                                   : 0.0;
  return {reduce, gather};
}

}  // namespace

CommGroup grad_group(const Evaluator& ev, const Strategy& s, const std::vector<int64_t>& devices) {
  return strided_group(ev, devices, s.grad_replicas(), s.tp, s.tp);
}

CommGroup expert_grad_group(const Evaluator& ev, const Strategy& s,
                            const std::vector<int64_t>& devices) {
  const int64_t stride = s.ep * s.expert_tp();
  return strided_group(ev, devices, s.expert_dp(), stride, stride);
}

double optimizer_params(const Strategy& s, const StageTimes& t, size_t d) {
  const double dense = trained_dense_params(t, d), experts = trained_expert_params(t, d);
  if (s.zero < 1) return dense + experts;
  return dense / static_cast<double>(s.grad_replicas()) +
         experts / static_cast<double>(s.expert_dp());
}

Synchronisation synchronise(const Evaluator& ev, const Strategy& s, const Placement& p,
                            const std::vector<Rank>& ranks, const StageTimes& t) {
  const size_t P = ranks.size();
  const std::vector<int64_t>& dev = p.rank_of_stage;
  const double tied_sync = tied_sum_s(ev, s, p);
  std::vector<double> backward(P, 0);
  for (size_t j = 0; j < dev.size(); ++j)
    backward[dev[j]] += t.stages[j].backward_input_s + t.stages[j].backward_weight_s;
  Synchronisation out;
  out.sync_s.assign(P, 0);
  out.exposed_s.assign(P, 0);
  out.optimizer_s.assign(P, 0);
  for (size_t d = 0; d < P; ++d) {
    const auto [dense_reduce, dense_gather] = dp_collectives_s(
        ev, s, grad_group(ev, s, p.groups[d]), ranks[d], trained_dense_params(t, d));
    const auto [expert_reduce, expert_gather] = dp_collectives_s(
        ev, s, expert_grad_group(ev, s, p.groups[d]), ranks[d], trained_expert_params(t, d));
    const double reduce = dense_reduce + expert_reduce, gather = dense_gather + expert_gather;
    // Gradient buckets are reduced while the last micro-batch's backward still runs (PyTorch DDP,
    // Megatron-LM --overlap-grad-reduce), or after it (overlap_grad_reduce false). The tied
    // embeddings' sum follows the data-parallel reduction in every framework (Megatron-LM's
    // finalize_model_grads, DeepSpeed's tied-module reduction after the pipeline flush), and the
    // parameter gather after the step is not hidden either.
    const double tied =
        static_cast<int64_t>(d) == dev.front() || static_cast<int64_t>(d) == dev.back() ? tied_sync
                                                                                        : 0.0;
    out.sync_s[d] = reduce + tied + gather;
    out.exposed_s[d] =
        (s.overlap_grad_reduce ? std::max(0.0, reduce - backward[d]) : reduce) + tied + gather;
    // The optimizer steps this device's shard; a low-precision recipe then quantises the weights
    // again (once per step: the copies serve every micro-batch), counted with the step.
    const double quantize = t.weight_quantize_bytes[d];
    out.optimizer_s[d] =
        ev.cost().optimizer_s(*ranks[d].gpu, optimizer_params(s, t, d)) +
        (quantize > 0 ? ev.cost().memory_op_s(*ranks[d].gpu, "quantize_weights", quantize) : 0.0);
    if (out.exposed_s[d] + out.optimizer_s[d] > out.tail_s) {
      out.tail_s = out.exposed_s[d] + out.optimizer_s[d];
      out.tail_rank = static_cast<int64_t>(d);
    }
  }
  return out;
}

}  // namespace hetplan::eval
