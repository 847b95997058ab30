// The two GEMM sections: the generic grid (--gemm) and the layers' own GEMMs (--layers MODEL).
#include <algorithm>

#include <fmt/format.h>

#include "costmodel/model.h"
#include "profiler/common/dtypes.h"
#include "profiler/common/layer_plan.h"
#include "profiler/gemm/gemm_bench.h"

namespace hetplan::profiler {
namespace {

std::vector<Dtype> gemm_dtypes(SectionContext& ctx, const std::vector<Dtype>& requested) {
  std::vector<std::string> skipped;
  const auto& info = ctx.device.info();
  auto out = supported_dtypes(requested, info.cc_major, info.cc_minor, &skipped);
  for (const auto& line : skipped) ctx.progress.message("calibrate: " + line);
  return out;
}

// Keeps items of one dtype together so that the input pool is filled once per dtype.
void group_by_dtype(std::vector<PlanItem>& items) {
  std::stable_sort(items.begin(), items.end(), [](const PlanItem& a, const PlanItem& b) {
    return a.spec.at("dtype").get<std::string>() < b.spec.at("dtype").get<std::string>();
  });
}

class GemmSection : public Section {
 public:
  void begin(SectionContext& ctx, const std::vector<PlanItem>& todo) override {
    bench_ = std::make_unique<GemmBench>(ctx.device.info());
    std::vector<GemmCase> cases;
    for (const auto& item : todo) cases.push_back(gemm_case_from_spec(item.spec));
    bench_->plan_pools(cases);
  }
  Json measure(const PlanItem& item, SectionContext& ctx) override {
    return to_json(bench_->measure(gemm_case_from_spec(item.spec), ctx));
  }
  void end(SectionContext&) override { bench_.reset(); }

 private:
  std::unique_ptr<GemmBench> bench_;
};

class GemmGridSection : public GemmSection {
 public:
  std::string name() const override { return "gemm"; }
  std::vector<PlanItem> plan(SectionContext& ctx) override {
    auto items = gemm_items(gemm_grid(ctx.options.quick, gemm_dtypes(ctx, ctx.options.dtypes)),
                            name(), ctx.options.quick);
    group_by_dtype(items);
    return items;
  }
};

class LayerGemmSection : public GemmSection {
 public:
  explicit LayerGemmSection(std::vector<std::string> models) : models_(std::move(models)) {}
  std::string name() const override { return "layer_gemm"; }
  std::vector<PlanItem> plan(SectionContext& ctx) override {
    std::vector<GemmCase> cases;
    for (const auto& name : models_) {
      const ModelSpec model = load_model(name, ctx.options.seq_len);
      // The model's own dtype unless --dtypes says otherwise.
      const std::vector<Dtype> wanted =
          ctx.options.dtypes.empty() ? std::vector<Dtype>{model.dtype} : ctx.options.dtypes;
      std::vector<std::string> skipped;
      const auto more =
          layer_gemm_cases(model, ctx.options.micro_batches, ctx.options.tensor_widths,
                           gemm_dtypes(ctx, wanted), &skipped);
      for (const auto& line : skipped) ctx.progress.message("calibrate: " + line);
      cases.insert(cases.end(), more.begin(), more.end());
    }
    auto items = gemm_items(cases, name(), ctx.options.quick);
    group_by_dtype(items);
    return items;
  }

 private:
  std::vector<std::string> models_;
};

}  // namespace

std::unique_ptr<Section> make_gemm_grid_section() { return std::make_unique<GemmGridSection>(); }

std::unique_ptr<Section> make_layer_gemm_section(std::vector<std::string> models) {
  return std::make_unique<LayerGemmSection>(std::move(models));
}

}  // namespace hetplan::profiler
