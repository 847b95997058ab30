// Step 5 of a prediction: one micro-batch's F, B and W per virtual stage, the activations sent
// between stages, and what each rank holds: the pipeline problem the schedule runs.
#include <algorithm>

#include "search/eval/steps.h"

namespace hetplan::eval {
namespace {

// Sums the layers of each virtual stage; charges the p2p send to the next stage's devices.
void sum_stages(const Evaluator& ev, const Placement& p, const std::vector<Rank>& ranks,
                const std::vector<LayerRange>& ranges, StageTimes& t) {
  const std::vector<int64_t>& dev = p.rank_of_stage;
  const int64_t S = static_cast<int64_t>(dev.size());
  pipeline::PipelineProblem& problem = t.problem;
  problem.forward_s.assign(S, 0);
  problem.backward_input_s.assign(S, 0);
  problem.backward_weight_s.assign(S, 0);
  problem.p2p_s.assign(std::max<int64_t>(1, S - 1), 0);
  problem.activation_bytes.assign(S, 0);
  t.stages.assign(S, {});
  for (int64_t j = 0; j < S; ++j) {
    const int64_t d = dev[j];
    StagePrediction& sp = t.stages[j];
    sp.stage.first_layer = ranges[j].first;
    sp.stage.last_layer = ranges[j].second;
    sp.stage.devices = p.groups[d];
    sp.stage.gpu_type = ranks[d].type;
    const auto& costs = ranks[d].costs();
    double activation = 0;
    for (int64_t i = sp.stage.first_layer; i <= sp.stage.last_layer; ++i) {
      const LayerCost& c = costs[i];
      sp.forward_s += c.times.pass_s[0];
      sp.backward_input_s += c.times.pass_s[1];
      sp.backward_weight_s += c.times.pass_s[2];
      sp.tp_comm_s += c.times.tp_comm_s[0] + c.times.tp_comm_s[1] + c.times.tp_comm_s[2];
      for (int pass = 0; pass < kNumPasses; ++pass) {
        const auto& scope = c.times.comm_s;
        sp.cp_comm_s += scope[static_cast<int>(CommScope::kContext)][pass];
        sp.ep_comm_s += scope[static_cast<int>(CommScope::kExpert)][pass] +
                        scope[static_cast<int>(CommScope::kExpertTensor)][pass];
      }
      sp.recompute_s += c.times.recompute_s;
      sp.host_sync_s += c.times.host_sync_s;
      activation += c.activation_bytes;
      t.transient[d] = std::max(t.transient[d], c.transient_bytes);
      t.params[d] += c.param_count;
      t.expert_params[d] += c.expert_param_count;
      t.frozen_params[d] += c.frozen_param_count;
      t.expert_frozen_params[d] += c.expert_frozen_param_count;
      t.low_precision_bytes[d] += c.low_precision_weight_bytes;
      t.weight_quantize_bytes[d] += c.weight_quantize_bytes;
      t.quantized_params[d] += c.quantized_param_count;
      t.expert_low_precision_bytes[d] += c.expert_low_precision_weight_bytes;
      t.expert_quantized_params[d] += c.expert_quantized_param_count;
    }
    if (j + 1 < S) {
      const double bytes = costs[sp.stage.last_layer].output_bytes;
      if (dev[j + 1] != d) {
        sp.p2p_s =
            ev.cost().p2p_s(bytes, link_between(ev.cluster(), ev.devices()[p.groups[d].front()],
                                                ev.devices()[p.groups[dev[j + 1]].front()]));
        t.transient[d] += 2 * bytes;  // send and receive buffers
      }
      problem.p2p_s[j] = sp.p2p_s;
    }
    problem.forward_s[j] = sp.forward_s;
    problem.backward_input_s[j] = sp.backward_input_s;
    problem.backward_weight_s[j] = sp.backward_weight_s;
    problem.activation_bytes[j] = activation;
  }
}

// A tied head on the embedding's own device shares its table: held once, not twice.
void share_tied_table(const Evaluator& ev, const Strategy& s, const Placement& p,
                      const std::vector<Rank>& ranks, StageTimes& t) {
  const LayerSpec& last = ev.model().layers.back();
  const std::vector<int64_t>& dev = p.rank_of_stage;
  if (!(last.head() && last.head()->tied && dev.front() == dev.back())) return;
  const int64_t d = dev.front();
  const double table = static_cast<double>(last.head()->vocab) * last.hidden / s.tp;
  t.params[d] -= table;
  t.frozen_params[d] -= std::min(table, t.frozen_params[d]);  // LoRA: the table is frozen
  if (s.grad_accumulation_fusion) return;
  // Its two uses' gradients meet in one parameter's gradient (autograd adds the second to the
  // first: read 2, write 1 activation-sized element) before the one add into the fp32 main
  // gradient, which the embedding layer already counts; the head's own add into the main gradient
  // (layer_work's grad_accumulate) does not happen.
  const double act = dtype_bytes(ranks[d].dtype);
  const GpuSpec& gpu = *ranks[d].gpu;
  const double saved = ev.cost().memory_op_s(gpu, "grad_accumulate", table * (act + 8)) -
                       ev.cost().memory_op_s(gpu, "grad_accumulate", table * 3 * act);
  t.stages.back().backward_weight_s -= saved;
  t.problem.backward_weight_s.back() -= saved;
}

// A repeated MTP module (TransformerLayer::mtp_repeat) on the device of the module it repeats
// runs that module's weights: held, reduced and stepped once.
void share_repeated_mtp(const Evaluator& ev, const Placement& p,
                        const std::vector<LayerRange>& ranges, const std::vector<Rank>& ranks,
                        StageTimes& t) {
  const auto device_of = [&](int64_t layer) {
    for (size_t j = 0; j < ranges.size(); ++j)
      if (layer >= ranges[j].first && layer <= ranges[j].second) return p.rank_of_stage[j];
    return int64_t{-1};
  };
  const auto& layers = ev.model().layers;
  for (int64_t i = 1; i < static_cast<int64_t>(layers.size()); ++i) {
    const TransformerLayer* b = layers[static_cast<size_t>(i)].block();
    if (!b || !b->mtp_repeat) continue;
    const int64_t d = device_of(i);
    if (d < 0 || d != device_of(i - 1)) continue;
    const LayerCost& c = ranks[d].costs()[i];
    t.params[d] -= c.param_count;
    t.expert_params[d] -= c.expert_param_count;
    t.frozen_params[d] -= c.frozen_param_count;
    t.expert_frozen_params[d] -= c.expert_frozen_param_count;
    t.low_precision_bytes[d] -= c.low_precision_weight_bytes;
    t.quantized_params[d] -= c.quantized_param_count;
    t.expert_low_precision_bytes[d] -= c.expert_low_precision_weight_bytes;
    t.expert_quantized_params[d] -= c.expert_quantized_param_count;
  }
}

// ZeRO-3 gathers a device's weights before every forward and backward; where they stay gathered
// through the step, once a step (its first forward, spread here over the micro-batches'
// forwards: stage times are per micro-batch).
void gather_zero3_weights(const Evaluator& ev, const Strategy& s, const Placement& p,
                          const std::vector<Rank>& ranks, const std::vector<LayerRange>& ranges,
                          StageTimes& t) {
  if (!(s.zero >= 3 && s.grad_replicas() > 1)) return;
  const bool once = weights_stay_gathered(ev.framework(), s);
  const double forward_share = once ? 1.0 / static_cast<double>(s.microbatches()) : 1.0;
  const double backward_share = once ? 0.0 : 1.0;
  for (size_t j = 0; j < p.rank_of_stage.size(); ++j) {
    const int64_t d = p.rank_of_stage[j];
    const CommGroup g = grad_group(ev, s, p.groups[d]);
    double stage_params = 0;
    for (int64_t i = ranges[j].first; i <= ranges[j].second; ++i)
      stage_params += ranks[d].costs()[i].param_count;
    const double gather = ev.cost().collective_s(CollectiveKind::kAllGather,
                                                 stage_params * dtype_bytes(ranks[d].dtype), g);
    t.stages[j].forward_s += gather * forward_share;
    t.stages[j].backward_input_s += gather * backward_share;
    t.problem.forward_s[j] += gather * forward_share;
    t.problem.backward_input_s[j] += gather * backward_share;
  }
}

// A framework whose sends and receives do not overlap compute (DeepSpeed's synchronous p2p) holds
// both stages of a transfer while it runs: each stage's forward takes the receipt of its input and
// the sending of its output, its backward the same for the gradients, and nothing is left to
// travel between passes.
void hold_stages_for_p2p(StageTimes& t) {
  const size_t S = t.stages.size();
  for (size_t j = 0; j < S; ++j) {
    const double in = j > 0 ? t.stages[j - 1].p2p_s : 0.0;
    const double out = j + 1 < S ? t.stages[j].p2p_s : 0.0;
    t.stages[j].forward_s += in + out;
    t.stages[j].backward_input_s += in + out;
    t.problem.forward_s[j] += in + out;
    t.problem.backward_input_s[j] += in + out;
  }
  std::fill(t.problem.p2p_s.begin(), t.problem.p2p_s.end(), 0.0);
}

}  // namespace

StageTimes stage_times(const Evaluator& ev, const Strategy& s, const Placement& p,
                       const std::vector<Rank>& ranks, const std::vector<LayerRange>& ranges,
                       const pipeline::PipelineProblem& base) {
  StageTimes t;
  t.problem = base;
  t.params.assign(ranks.size(), 0);
  t.expert_params.assign(ranks.size(), 0);
  t.frozen_params.assign(ranks.size(), 0);
  t.expert_frozen_params.assign(ranks.size(), 0);
  t.transient.assign(ranks.size(), 0);
  t.low_precision_bytes.assign(ranks.size(), 0);
  t.weight_quantize_bytes.assign(ranks.size(), 0);
  t.quantized_params.assign(ranks.size(), 0);
  t.expert_low_precision_bytes.assign(ranks.size(), 0);
  t.expert_quantized_params.assign(ranks.size(), 0);
  sum_stages(ev, p, ranks, ranges, t);
  share_tied_table(ev, s, p, ranks, t);
  share_repeated_mtp(ev, p, ranges, ranks, t);
  gather_zero3_weights(ev, s, p, ranks, ranges, t);
  if (!ev.framework().can_run.p2p_overlap) hold_stages_for_p2p(t);
  if (p.rank_of_stage.size() == 1) t.problem.p2p_s = {0.0};
  return t;
}

}  // namespace hetplan::eval
