// Per-layer F/B/W timing of real transformer blocks (GPT-style and LLaMA-style), assembled from
// cuBLASLt GEMMs and the kernels/ launchers. Waits for kernels/ to land: until then it plans the
// cases and records that it cannot run them.
#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/model.h"
#include "profiler/common/layer_plan.h"
#include "profiler/section.h"

namespace hetplan::profiler {
namespace {

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

  void begin(SectionContext&, const std::vector<PlanItem>&) override {
    throw RuntimeFailure("per-layer timing needs kernels/ (norms, activations, attention), not in "
                         "this build yet");
  }
  Json measure(const PlanItem&, SectionContext&) override { return Json(); }

 private:
  std::vector<std::string> models_;
};

}  // namespace

std::unique_ptr<Section> make_layer_timing_section(std::vector<std::string> models) {
  return std::make_unique<LayerTimingSection>(std::move(models));
}

}  // namespace hetplan::profiler
