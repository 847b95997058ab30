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

// The gradient reduction (all-reduce, or reduce-scatter under ZeRO) and the parameter gather after
// the step (ZeRO 1 and 2) of rank d's data-parallel group.
std::pair<double, double> dp_collectives_s(const Evaluator& ev, const Strategy& s,
                                           const std::vector<int64_t>& group, const Rank& r,
                                           double params) {
  if (s.dp <= 1) return {0, 0};
  std::vector<int64_t> dp_devices;
  for (int64_t k = 0; k < s.dp; ++k) dp_devices.push_back(group[k * s.tp]);
  const CommGroup g = make_comm_group(ev.cluster(), ev.devices(), dp_devices, s.tp);
  const double grad_bytes = params * (s.fp32_grad_reduce ? 4 : dtype_bytes(r.dtype));
  if (s.zero == 0) return {ev.cost().collective_s(CollectiveKind::kAllReduce, grad_bytes, g), 0};
  const double reduce = ev.cost().collective_s(CollectiveKind::kReduceScatter, grad_bytes, g);
  const double gather = s.zero < 3 ? ev.cost().collective_s(CollectiveKind::kAllGather,
                                                            params * dtype_bytes(r.dtype), g)
                                   : 0.0;
  return {reduce, gather};
}

}  // namespace

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
    const auto [reduce, gather] = dp_collectives_s(ev, s, p.groups[d], ranks[d], t.params[d]);
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
    out.optimizer_s[d] =
        ev.cost().optimizer_s(*ranks[d].gpu, t.params[d] / (s.zero >= 1 ? s.dp : 1));
    if (out.exposed_s[d] + out.optimizer_s[d] > out.tail_s) {
      out.tail_s = out.exposed_s[d] + out.optimizer_s[d];
      out.tail_rank = static_cast<int64_t>(d);
    }
  }
  return out;
}

}  // namespace hetplan::eval
