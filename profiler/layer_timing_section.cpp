// The per-layer section (--layers MODEL): real transformer blocks (layer/block.h), their F, B and
// W passes verified (every output written and finite) and then timed separately with CUDA events,
// one CUPTI trace per pass, and the activation memory they keep.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/model.h"
#include "costmodel/whole_number.h"
#include "profiler/common/layer_plan.h"
#include "profiler/cuda_check.h"
#include "profiler/cupti_trace.h"
#include "profiler/device.h"
#include "profiler/device_check.h"
#include "profiler/gemm/lt_gemm.h"
#include "profiler/layer/block.h"
#include "profiler/section.h"
#include "profiler/timing.h"

namespace hetplan::profiler {
namespace {

constexpr int kMaxSets = 4;

// Enough weight and activation sets that a pass never finds the previous one's data in L2,
// as far as memory allows.
int choose_sets(int64_t set_bytes, int64_t l2_bytes) {
  int sets = static_cast<int>(
      std::clamp<int64_t>((2 * l2_bytes) / std::max<int64_t>(1, set_bytes) + 1, 1, kMaxSets));
  const double free_bytes = static_cast<double>(device_memory().free_bytes);
  while (sets > 1 && static_cast<double>(sets) * set_bytes > 0.8 * free_bytes) --sets;
  return sets;
}

// Verify before timing: every output of F, B and W written (poisoned with NaN first), finite,
// and not all zero.
void verify(TransformerBlock& block, cudaStream_t stream) {
  block.poison(0);
  block.forward(0);
  block.backward_input(0);
  block.backward_weight(0);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  for (const auto& t : block.outputs(0)) {
    const ValueCounts v = count_values(t.data, t.count, t.dtype, stream);
    if (v.nonfinite > 0)
      throw RuntimeFailure(
          fmt::format("incorrect: {} has {} of {} values not finite (unwritten or "
                      "overflowed); not timed",
                      t.name, v.nonfinite, v.count));
    if (v.zeros == v.count)
      throw RuntimeFailure(fmt::format("incorrect: {} is all zeros; not timed", t.name));
  }
}

class LayerTimingSection : public Section {
 public:
  explicit LayerTimingSection(std::vector<std::string> models) : models_(std::move(models)) {}
  std::string name() const override { return "layers"; }

  std::vector<PlanItem> plan(SectionContext& ctx) override {
    std::vector<LayerTimingCase> cases;
    for (const auto& name : models_) {
      const ModelSpec model = load_model(name, ctx.options.seq_len);
      auto more = layer_timing_cases(model, ctx.options.micro_batches, ctx.options.tensor_widths,
                                     Dtype::kBf16);
      cases.insert(cases.end(), more.begin(), more.end());
    }
    return layer_timing_items(cases, ctx.options.quick);
  }

  Json measure(const PlanItem& item, SectionContext& ctx) override {
    const LayerTimingCase c = layer_case_from_spec(item.spec);
    if (const std::string why = TransformerBlock::unsupported_reason(c); !why.empty())
      throw GemmNotSupported("not supported: " + why);
    const cudaStream_t stream = ctx.device.stream();
    const int64_t set_bytes = TransformerBlock::set_bytes(c);
    const int sets = choose_sets(set_bytes, ctx.device.info().l2_bytes);
    TransformerBlock block(c, sets, stream);
    verify(block, stream);

    TimingOptions topt;
    topt.target_s = ctx.options.quick ? 10e-3 : 30e-3;
    topt.min_samples = ctx.options.quick ? 3 : 5;
    topt.sample_s = 1e-3;
    topt.clocks = &ctx.clocks;
    const Timing f =
        time_launches([&](int64_t i) { block.forward(static_cast<int>(i % sets)); }, stream, topt);
    const Timing b = time_launches(
        [&](int64_t i) { block.backward_input(static_cast<int>(i % sets)); }, stream, topt);
    const Timing w = time_launches(
        [&](int64_t i) { block.backward_weight(static_cast<int>(i % sets)); }, stream, topt);

    LayerMeasurement m;
    m.style = c.style;
    m.dtype = c.dtype;
    m.micro_batch = c.micro_batch;
    m.seq_len = c.seq_len;
    m.hidden = c.hidden;
    m.heads = c.heads;
    m.kv_heads = c.kv_heads;
    m.ffn_hidden = c.ffn_hidden;
    m.tp = c.tp;
    m.forward_s = f.per_launch_s;
    m.backward_input_s = b.per_launch_s;
    m.backward_weight_s = w.per_launch_s;
    m.activation_bytes = block.saved_bytes();
    m.method = Json{
        {"forward", method_json(f, topt)},
        {"backward_input", method_json(b, topt)},
        {"backward_weight", method_json(w, topt)},
        {"model", c.model},
        {"head_dim", c.head_dim},
        {"bias", c.bias},
        {"rotary", c.rotary},
        {"causal", c.causal},
        {"dropout", c.dropout},
        {"rotation", {{"sets", sets}, {"set_bytes", set_bytes}}},
        {"saved_tensors_bytes", block.saved_bytes()},
        {"saved_memgetinfo_bytes", block.saved_memgetinfo_bytes()},
        {"costmodel_activation_bytes", whole_number_json(expected_activation_bytes(c))},
        {"b_to_w_bytes", block.b_to_w_bytes()},
        {"check", "every output of F, B and W written (NaN-poisoned first), finite, not all zero"},
        {"notes",
         "one tensor-parallel rank's shard without its collectives; dropout masks "
         "recomputed (Philox), not stored; no attention dropout; Q, K, V split from "
         "the fused QKV output with 2-D copies"}};
    if (ctx.tracer.available()) {
      Json trace;
      const std::pair<const char*, std::function<void()>> passes[] = {
          {"forward", [&] { block.forward(0); }},
          {"backward_input", [&] { block.backward_input(0); }},
          {"backward_weight", [&] { block.backward_weight(0); }}};
      const double medians[] = {m.forward_s.median, m.backward_input_s.median,
                                m.backward_weight_s.median};
      for (size_t i = 0; i < 3; ++i) {
        const TraceResult t = ctx.tracer.trace(passes[i].second, stream, 1);
        if (t.kernel_count > 0) trace[passes[i].first] = t.to_json(medians[i]);
      }
      if (!trace.is_null()) m.trace = trace;
    }
    return to_json(m);
  }

 private:
  std::vector<std::string> models_;
};

}  // namespace

std::unique_ptr<Section> make_layer_timing_section(std::vector<std::string> models) {
  return std::make_unique<LayerTimingSection>(std::move(models));
}

}  // namespace hetplan::profiler
