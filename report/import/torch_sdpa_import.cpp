// `hetplan import --format torch-sdpa`: the JSON of scripts/bench_attention_torch.py (schema
// hetplan.attention_vs_torch/1), PyTorch's scaled_dot_product_attention timed per backend on the
// same shapes as hetplan's attention kernels, as kernel records "sdpa_fwd_<backend>" and
// "sdpa_bwd_<backend>". The fit takes the attention efficiency from the FLASH_ATTENTION backend's
// (what a flash_attention strategy and the reference harness run), else the default backend's
// (costmodel/profile.cpp).
#include <cctype>
#include <optional>

#include <fmt/format.h>

#include "costmodel/clocks.h"
#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "report/import/profile_import.h"

namespace hetplan {
namespace {

constexpr std::string_view kSchema = "hetplan.attention_vs_torch/1";

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// FLOPs as FlashAttention counts them, as kernels/attention.cu does: 4 b h s^2 d forward (half
// when causal), 2.5 times that backward.
double forward_flops(int64_t b, int64_t h, int64_t s, int64_t d, bool causal) {
  const double full = 4.0 * b * h * static_cast<double>(s) * s * d;
  return causal ? full / 2 : full;
}

// A timing's SM clock record (`clocks_<timing>`), checked and in the calibration's form; null
// where the bench read none.
Json clock_record(ObjectReader& t, const std::string& timing) {
  const std::string key = "clocks_" + timing;
  if (std::optional<ObjectReader> r = t.optional_object(key))
    return to_json(clock_summary_from_json(*r));
  return nullptr;
}

KernelMeasurement record(const std::string& name, const Json& params, double flops, double time_s,
                         const std::string& method, const Json& clocks, const Json& after_clocks) {
  KernelMeasurement k;
  k.kernel = name;
  k.dtype = Dtype::kBf16;
  k.params = params;
  k.flops = flops;
  k.time_s.count = 1;
  k.time_s.median = k.time_s.min = k.time_s.max = k.time_s.mean = k.time_s.p10 = k.time_s.p90 =
      time_s;
  k.method = Json{{"tool", "scripts/bench_attention_torch.py"}, {"timing", method}};
  // The clock alone, and after GEMMs where params.after_gemm_s is: the method's `clocks` and
  // `after_gemm.clocks` (costmodel/clock_classes.h reads both).
  if (!clocks.is_null()) k.method["clocks"] = clocks;
  if (!after_clocks.is_null()) k.method["after_gemm"] = Json{{"clocks", after_clocks}};
  return k;
}

}  // namespace

CalibrationFile import_torch_sdpa(const std::vector<std::filesystem::path>& files,
                                  const ProfileImportOptions& options) {
  CalibrationFile cal;
  cal.context.source = "measured";
  cal.context.gpu_type = options.gpu_type;
  for (const auto& path : files) {
    const Document doc = load_document(path);
    ObjectReader root(doc);
    const std::string schema = root.string("schema");
    if (schema != kSchema)
      root.fail("schema", fmt::format("\"{}\" (the JSON of scripts/bench_attention_torch.py), "
                                      "not \"{}\"",
                                      kSchema, schema));
    const std::string gpu = root.string("gpu");
    const std::string torch = root.string("torch");
    const int64_t cudnn = root.integer_or("cudnn", 0);
    // The torch timings are taken right after the kernel bench in the same run, on its GPU: the
    // bench's context is the provenance (its date stands), with this script as the command.
    read_kernel_bench_context(root.object("ours_context"), cal.context);
    if (cal.context.gpu_name != gpu)
      root.fail("gpu", fmt::format("the GPU of ours_context (\"{}\")", cal.context.gpu_name));
    cal.context.command = "scripts/bench_attention_torch.py (run by scripts/kernel_gpu_run.sh)";
    cal.context.add_note(
        fmt::format("torch {} (cuDNN {}) scaled_dot_product_attention, bf16, per backend, from {}",
                    torch, cudnn, path.filename().string()));
    for (ObjectReader row : root.objects("rows")) {
      ObjectReader shape = row.object("shape");
      const int64_t b = shape.positive_integer("batch"), h = shape.positive_integer("heads");
      const int64_t s = shape.positive_integer("seq"), d = shape.positive_integer("head_dim");
      const bool causal = shape.boolean("causal");
      shape.finish();
      for (const char* ours_key : {"ours_fwd_s", "ours_bwd_s", "ours_fwd_bwd_s"})
        (void)row.optional_number(ours_key);  // hetplan's own: in the kernel bench's file
      for (ObjectReader t : row.objects("torch")) {
        const std::string backend = t.string("backend");
        const std::string picked = t.string_or("picked", backend);
        (void)t.optional_number("ratio_ours_over_torch_fwd_bwd");
        const auto fwd = t.optional_number("fwd_s");
        const auto fwd_bwd = t.optional_number("fwd_bwd_s");
        // --between-gemm-ms: the same calls right after a run of GEMMs (the factors are derived).
        const auto fwd_after = t.optional_number("fwd_s_after_gemm");
        const auto fwd_bwd_after = t.optional_number("fwd_bwd_s_after_gemm");
        (void)t.optional_number("after_gemm_factor_fwd");
        (void)t.optional_number("after_gemm_factor_fwd_bwd");
        // The SM clock of each timing (NVML), or why there is none.
        const Json clocks_fwd = clock_record(t, "fwd_s");
        const Json clocks_fwd_bwd = clock_record(t, "fwd_bwd_s");
        const Json clocks_fwd_after = clock_record(t, "fwd_s_after_gemm");
        const Json clocks_fwd_bwd_after = clock_record(t, "fwd_bwd_s_after_gemm");
        if (const auto note = t.optional_string("clocks_note");
            note && cal.context.notes.find(*note) == std::string::npos)
          cal.context.add_note(*note);
        if (!fwd || !fwd_bwd) continue;  // the backend refused the shape
        if (!(*fwd > 0) || !(*fwd_bwd > *fwd))
          t.fail("fwd_bwd_s", "a forward + backward time above the forward time");
        check_measured_seconds(t, "fwd_bwd_s", *fwd_bwd);
        if (fwd_bwd_after) check_measured_seconds(t, "fwd_bwd_s_after_gemm", *fwd_bwd_after);
        if (fwd_after.has_value() != fwd_bwd_after.has_value())
          t.fail(fwd_after ? "fwd_bwd_s_after_gemm" : "fwd_s_after_gemm",
                 "both timings after GEMMs or neither");
        if (fwd_after && (!(*fwd_after > 0) || !(*fwd_bwd_after > *fwd_after)))
          t.fail("fwd_bwd_s_after_gemm",
                 "a forward + backward time after GEMMs above the forward time after GEMMs");
        t.finish();
        Json params = {{"batch", b},       {"heads", h},           {"seq", s},
                       {"head_dim", d},    {"causal", causal},     {"backend", backend},
                       {"picked", picked}, {"family", "attention"}};
        const double flops = forward_flops(b, h, s, d, causal);
        const std::string suffix = lower(backend);
        // After GEMMs: attention in the power state a layer's GEMMs leave (the fit's in-layer
        // context, costmodel/attention_model.h).
        if (fwd_after) params["after_gemm_s"] = *fwd_after;
        cal.kernels.push_back(record("sdpa_fwd_" + suffix, params, flops, *fwd, "median of 30",
                                     clocks_fwd, clocks_fwd_after));
        if (fwd_after) params["after_gemm_s"] = *fwd_bwd_after - *fwd_after;
        // The backward is the forward + backward less the forward: the clock of the former.
        cal.kernels.push_back(record("sdpa_bwd_" + suffix, params, 2.5 * flops, *fwd_bwd - *fwd,
                                     "median forward + backward less median forward",
                                     clocks_fwd_bwd, clocks_fwd_bwd_after));
      }
    }
  }
  if (cal.kernels.empty())
    throw InputError(files.empty() ? "" : files.front().string(), "rows",
                     "at least one torch timing with fwd_s and fwd_bwd_s");
  return cal;
}

}  // namespace hetplan
