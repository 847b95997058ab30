// `hetplan import --format kernel-bench`: the JSON that kernels/bench (hetplan_kernel_bench --json)
// writes, as a calibration file's kernels section. The bench is hetplan's own measurement on a GPU,
// so the file's source stays "measured"; the bench's context (GPU, driver, date, command) becomes
// the provenance.
#include <fmt/format.h>

#include "costmodel/clocks.h"
#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "costmodel/hardware.h"
#include "profiler/common/gpu_type.h"
#include "report/import/profile_import.h"

namespace hetplan {
namespace {

constexpr std::string_view kSchema = "hetplan.kernel_bench/1";

// CUDA's integer version (13000) as text ("13.0").
std::string cuda_version(int64_t v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

KernelMeasurement read_result(ObjectReader r) {
  KernelMeasurement k;
  k.kernel = r.string("case");
  const std::string dtype = r.string("dtype");
  if (!parse_dtype(dtype, k.dtype))
    r.fail("dtype", "bf16, fp16, fp32 or fp8, not \"" + dtype + "\"");
  k.params = Json{{"family", r.string("family")},
                  {"pass", r.string("pass")},
                  {"bound", r.string_or("bound", "")},
                  {"note", r.string_or("note", "")}};
  ObjectReader shape = r.object("shape");
  for (const auto& dim : shape.keys()) k.params[dim] = shape.integer(dim);
  k.bytes = r.non_negative_or("bytes", 0);
  k.flops = r.non_negative_or("flops", 0);
  k.time_s.median = r.positive("time_s");
  k.time_s.min = r.positive_or("time_min_s", k.time_s.median);
  k.time_s.max = r.positive_or("time_max_s", k.time_s.median);
  k.time_s.count = r.positive_integer_or("samples", 1);
  // The calibration file's reader (and so fit) requires this of every time.
  if (k.time_s.min > k.time_s.median || k.time_s.median > k.time_s.max)
    r.fail("time_s", fmt::format("expected time_min_s <= time_s <= time_max_s, found {:.6g} <= "
                                 "{:.6g} <= {:.6g}",
                                 k.time_s.min, k.time_s.median, k.time_s.max));
  check_measured_seconds(r, r.has("time_max_s") ? "time_max_s" : "time_s", k.time_s.max);
  k.time_s.mean = k.time_s.median;
  // The bench keeps min, median and max; the spread fields take the extremes.
  k.time_s.p10 = k.time_s.min;
  k.time_s.p90 = k.time_s.max;
  k.method = Json{{"tool", "kernels/bench (hetplan_kernel_bench)"},
                  {"runs_per_sample", r.integer_or("runs_per_sample", 1)},
                  {"instances", r.integer_or("instances", 1)},
                  {"check", r.string_or("check", "")},
                  {"check_rel_l2", r.number_or("check_rel_l2", 0)}};
  // The SM clock while it ran (benches built since the clock monitor).
  if (auto clocks = r.optional_object("clocks"))
    k.method["clocks"] = to_json(clock_summary_from_json(*clocks));
  // GBps, pct_of_copy, TFLOPs and shape_text are derived from the above and not kept.
  return k;
}

}  // namespace

void read_kernel_bench_context(ObjectReader r, Provenance& p) {
  const std::string gpu = r.string("gpu");
  const int64_t memory = r.integer_or("memory_bytes", 0);
  if (!p.gpu_name.empty() && p.gpu_name != gpu)
    r.fail("gpu",
           fmt::format("the same GPU as the other inputs (\"{}\"), not \"{}\"", p.gpu_name, gpu));
  p.gpu_name = gpu;
  const profiler::GpuTypeKey named = profiler::gpu_type_key(gpu, memory);
  // --gpu-type names a type the bench's GPU cannot be: another preset than its name says. (A type
  // that is no preset may be a cluster's name for it.)
  if (!p.gpu_type.empty() && named.known && p.gpu_type != named.key && is_gpu_preset(p.gpu_type))
    r.fail("gpu", fmt::format("the GPU --gpu-type names ({}), not \"{}\" ({}): give that GPU's "
                              "bench, or leave out --gpu-type",
                              p.gpu_type, gpu, named.key));
  if (p.gpu_type.empty()) p.gpu_type = named.key;
  p.memory_bytes = memory;
  p.sm_count = r.integer_or("sm_count", 0);
  p.l2_bytes = r.integer_or("l2_bytes", 0);
  if (auto v = r.optional_integer("driver_version")) p.driver = "CUDA " + cuda_version(*v);
  if (auto v = r.optional_integer("runtime_version")) p.cuda_runtime = cuda_version(*v);
  p.host = r.string_or("host", "");
  p.date = r.string_or("date", "");
  p.command = r.string_or("command", "");
  const std::string cc = r.string_or("compute_capability", "");
  if (!cc.empty()) p.add_note("compute capability " + cc);
  p.add_note(r.string_or("clocks", ""));
  const std::string source = r.string_or("source", "measured");
  if (source != "measured")
    r.fail("source", "\"measured\" (a kernel bench run on a GPU), not \"" + source + "\"");
  r.finish();
}

CalibrationFile import_kernel_bench(const std::vector<std::filesystem::path>& files,
                                    const ProfileImportOptions& options) {
  CalibrationFile cal;
  cal.context.source = "measured";
  cal.context.gpu_type = options.gpu_type;
  int64_t skipped = 0;
  for (const auto& path : files) {
    const Document doc = load_document(path);
    ObjectReader root(doc);
    const std::string schema = root.string("schema");
    if (schema != kSchema)
      root.fail("schema",
                fmt::format("\"{}\" (the JSON of hetplan_kernel_bench --json), not \"{}\"", kSchema,
                            schema));
    read_kernel_bench_context(root.object("context"), cal.context);
    for (ObjectReader r : root.objects("results")) {
      const std::string status = r.string("status");
      if (status != "ok") {
        // Failed or unsupported cases carry no time; the bench's own log says why.
        ++skipped;
        continue;
      }
      KernelMeasurement k = read_result(r);
      cal.kernels.push_back(std::move(k));
    }
    cal.context.add_note(
        fmt::format("imported from {} ({} results{})", path.filename().string(), cal.kernels.size(),
                    skipped ? fmt::format(", {} not ok and left out", skipped) : ""));
  }
  if (cal.kernels.empty())
    throw InputError(files.empty() ? "" : files.front().string(), "results",
                     "at least one result with status \"ok\"");
  return cal;
}

}  // namespace hetplan
