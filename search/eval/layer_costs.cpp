// Step 5, per layer: one layer's passes, activations, transients and kernels on one GPU type under
// the strategy and the framework (its kernels, its tensor-parallel overlap, its cast copies).
#include <algorithm>

#include "search/eval/steps.h"

namespace hetplan::eval {
namespace {

// The framework's attention kernel on `gpu`, where the calibration's attention is FlashAttention-2
// (torch SDPA's flash backend, or the priors, which assume it) and the framework runs another.
const AttentionKernel* attention_kernel(const FrameworkSpec& framework, const GpuSpec& gpu,
                                        const CostModel& cost) {
  const AttentionKernel* k = framework.attention_kernel(gpu.compute_capability);
  if (!k || k->kernel == "flash2") return nullptr;
  return cost.fit(gpu).attention_is_flash2() ? k : nullptr;
}

LayerShape layer_shape(const Strategy& s, Dtype dtype, const FrameworkSpec& framework) {
  LayerShape shape;
  shape.micro_batch = s.micro_batch;
  shape.tp = s.tp;
  shape.sequence_parallel = s.sequence_parallel && s.tp > 1;
  shape.flash_attention = s.flash_attention;
  shape.grad_accumulation_fusion = s.grad_accumulation_fusion;
  shape.dtype = dtype;
  shape.framework = &framework;
  shape.host_mode = s.host_mode;
  shape.cp = s.cp;
  shape.cp_comm = s.cp_comm;
  shape.cp_a2a = s.cp_a2a;
  shape.ep = s.ep;
  shape.etp = s.etp;
  shape.dispatcher = s.moe_dispatcher;
  shape.moe_imbalance = s.moe_imbalance;
  shape.precision = s.precision;
  shape.lora = s.lora;
  if (framework.param_precision == ParamPrecision::kAutocast) shape.microbatches = s.microbatches();
  return shape;
}

// Tensor-parallel overlap (Transformer Engine's userbuffers) runs each pass's all-gathers and
// reduce-scatters beside the GEMMs that consume and produce them: of a pass's collectives only
// what its GEMMs cannot cover is exposed.
void overlap_tp_comm(const GpuSpec& gpu, const LayerWork& w, const CostModel& cost, Dtype dtype,
                     LayerTimes& t) {
  double gemm_s[kNumPasses] = {0, 0, 0};
  for (const GemmOp& g : w.gemms) gemm_s[static_cast<int>(g.pass)] += cost.gemm_op_s(gpu, dtype, g);
  for (int p = 0; p < kNumPasses; ++p) {
    const double exposed = std::max(0.0, t.tp_comm_s[p] - gemm_s[p]);
    t.pass_s[p] -= t.tp_comm_s[p] - exposed;
    t.tp_comm_s[p] = exposed;
  }
}

// Megatron-Core's batch-level overlap of the experts' all-to-alls: in the 1F1B steady state one
// micro-batch's dispatch and combine run beside another's compute of the same layer, so of the
// layer's expert communication only what its compute cannot cover is exposed (each pass keeps
// its share of what is left).
void overlap_ep_comm(LayerTimes& t) {
  const int e = static_cast<int>(CommScope::kExpert);
  const int et = static_cast<int>(CommScope::kExpertTensor);
  double comm = 0, busy = 0;
  for (int p = 0; p < kNumPasses; ++p) {
    comm += t.comm_s[e][p] + t.comm_s[et][p];
    busy += t.pass_s[p];
  }
  if (comm <= 0) return;
  const double exposed = std::max(0.0, comm - (busy - comm));
  const double keep = exposed / comm;
  for (int p = 0; p < kNumPasses; ++p) {
    const double hidden = (t.comm_s[e][p] + t.comm_s[et][p]) * (1 - keep);
    t.pass_s[p] -= hidden;
    t.comm_s[e][p] *= keep;
    t.comm_s[et][p] *= keep;
  }
}

}  // namespace

// After a host sync the device has nothing queued: the layer's forward takes as long as its host
// takes to issue the kernels from there on, where that is longer than the device's own work.
// Between one layer's sync and the next layer's are about one layer's forward kernels, so the
// forward is max(device, host) with the host's time of all its forward kernels (one sync a layer;
// the host's and device's lead before the sync is lost at it).
void host_sync_stall(const LayerWork& w, const Recomputation& recompute, double host_s_per_kernel,
                     LayerTimes& t) {
  if (w.host_syncs == 0 || host_s_per_kernel <= 0) return;
  constexpr int kF = static_cast<int>(Pass::kForward);
  const double host_s = layer_kernels(w, recompute).pass[kF] * host_s_per_kernel;
  t.host_sync_s = std::max(0.0, host_s - t.pass_s[kF]);
  t.pass_s[kF] += t.host_sync_s;
}

double layer_host_s(const LayerSpec& layer, const LayerWork& w, double kernels,
                    const FrameworkSpec& framework, const HostCosts& host) {
  const double loss = std::min(w.loss_launches, kernels);
  return (kernels - loss) * host.in(framework.mode_for(model_part(layer.kind()), host.mode)) +
         loss * host.in(framework.mode_for("loss", host.mode));
}

LayerWork layer_work_under(const LayerSpec& layer, const Strategy& s, const GpuSpec& gpu,
                           const CostModel& cost, Dtype dtype, const FrameworkSpec& framework) {
  LayerShape shape = layer_shape(s, dtype, framework);
  shape.attention_kernel = attention_kernel(framework, gpu, cost);
  return layer_work(layer, shape);
}

LayerCost cost_layer(const LayerSpec& layer, const Strategy& s, const GpuSpec& gpu,
                     const LayerGroups& groups, const CostModel& cost, Dtype dtype,
                     const FrameworkSpec& framework, const HostCosts& host) {
  const LayerWork w = layer_work_under(layer, s, gpu, cost, dtype, framework);
  const double host_s_per_kernel = host.in(framework.mode_for(model_part(layer.kind()), host.mode));
  LayerCost c;
  c.times = cost.layer_times(gpu, w, s.recomputation(), groups, dtype);
  if (s.tp_comm_overlap) overlap_tp_comm(gpu, w, cost, dtype, c.times);
  if (s.ep_comm_overlap) overlap_ep_comm(c.times);
  host_sync_stall(w, s.recomputation(), host_s_per_kernel, c.times);
  c.activation_bytes = w.activation(s.recomputation());
  c.param_count = static_cast<double>(w.params);
  c.expert_param_count = static_cast<double>(w.expert_params);
  c.frozen_param_count = static_cast<double>(w.frozen_params);
  c.expert_frozen_param_count = static_cast<double>(w.expert_frozen_params);
  c.low_precision_weight_bytes = w.low_precision_weight_bytes;
  c.weight_quantize_bytes = w.weight_quantize_bytes;
  c.quantized_param_count = static_cast<double>(w.quantized_weight_params);
  c.expert_low_precision_weight_bytes = w.expert_low_precision_weight_bytes;
  c.expert_quantized_param_count = static_cast<double>(w.expert_quantized_weight_params);
  c.output_bytes = w.output_bytes;
  c.kernel_launches = static_cast<double>(layer_kernels(w, s.recomputation()).total());
  c.host_s = layer_host_s(layer, w, c.kernel_launches, framework, host);
  // Recomputed activations live while the layer's backward runs; gradients of the layer's input
  // and output are in flight (one rank's share under sequence parallelism).
  const double shard = s.sequence_parallel && s.tp > 1 ? static_cast<double>(s.tp) : 1.0;
  // (Under context parallelism the layer's tensors are of its seq / cp tokens already.)
  c.transient_bytes = w.activation(Recompute::kNone) - c.activation_bytes +
                      2 * w.output_bytes / shard + w.transient_bytes;
  if (const auto* head = layer.head()) {
    // bf16 logits and their gradient exist next to the kept fp32 softmax.
    const double logits =
        static_cast<double>(s.micro_batch) * (layer.seq_len / s.cp) * head->vocab / s.tp;
    c.transient_bytes += 2 * logits * dtype_bytes(dtype);
  }
  // ZeRO-3 gathers the weights of the layer running and the next (prefetched), unless they stay
  // gathered through the step (parameter_states counts them there).
  if (s.zero >= 3 && !weights_stay_gathered(framework, s))
    c.transient_bytes += 2 * c.param_count * dtype_bytes(dtype);
  // Weights cast to half precision for each forward are kept for its backward (autocast over
  // fp32 parameters), except where the forward is recomputed.
  if (s.recompute != Recompute::kFull || !w.checkpointed)
    c.activation_bytes += c.param_count * framework.memory.cast_copy_bytes;
  return c;
}

}  // namespace hetplan::eval
