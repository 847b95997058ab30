// `hetplan calibrate-collectives`: the collective sweep on its own (NCCL collectives, p2p matrix,
// host-device copies), for one process or several under mpirun / srun, with the options that
// `hetplan calibrate --collectives` (which runs the same sweep as a section of a calibration) does
// not offer; see docs/collectives.md. Rank 0 journals to `<out>.journal` as `calibrate` does, so
// that `hetplan calibrate --out FILE --from-journal` writes the file of a killed run anywhere.
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/common.h"
#include "costmodel/calibration.h"
#include "costmodel/errors.h"
#include "profiler/common/collective_plan.h"
#include "profiler/common/gpu_module.h"

namespace hetplan::cli {

namespace {

struct CollectiveArgs {
  std::string out;
  bool quick = false, resume = false, no_p2p = false, no_host_device = false;
  std::vector<std::string> ops, dtypes;
  double min_bytes = 1024, max_bytes = double(1 << 30), timeout_s = 120;
  std::string intra_link;
  int max_gpus = 0;
};

profiler::CollectiveOptions to_options(const CollectiveArgs& a) {
  profiler::CollectiveOptions o;
  o.out_path = a.out;
  o.quick = a.quick;
  o.resume = a.resume;
  o.p2p = !a.no_p2p;
  o.host_device = !a.no_host_device;
  o.min_bytes = a.min_bytes;
  o.max_bytes = a.max_bytes;
  o.timeout_s = a.timeout_s;
  o.intra_link = a.intra_link;
  o.max_gpus = a.max_gpus;
  o.keep_journal = true;
  for (const auto& s : a.ops) {
    CollectiveKind k;
    if (!parse_collective(s, k))
      throw InputError(
          fmt::format("--ops: expected all_reduce, all_gather, reduce_scatter, "
                      "all_to_all, broadcast or send_recv; found \"{}\"",
                      s));
    o.ops.push_back(k);
  }
  for (const auto& s : a.dtypes) {
    Dtype d;
    if (!parse_dtype(s, d) || (d != Dtype::kBf16 && d != Dtype::kFp32 && d != Dtype::kFp16))
      throw InputError(fmt::format("--dtypes: expected bf16, fp16 or fp32; found \"{}\"", s));
    o.dtypes.push_back(d);
  }
  if (!(o.min_bytes > 0) || o.max_bytes < o.min_bytes)
    throw InputError("--min-bytes and --max-bytes: expected 0 < min <= max");
  // Checked here, before the GPU is looked for: a typo is bad input on any machine.
  if (!(o.timeout_s > 0) || !std::isfinite(o.timeout_s))
    throw InputError(
        fmt::format("--collective-timeout: expected seconds > 0, found {}", o.timeout_s));
  if (o.max_gpus < 0)
    throw InputError(fmt::format(
        "--max-gpus: expected a number of GPUs >= 1 (0: every visible GPU), found {}", o.max_gpus));
  return o;
}

}  // namespace

// Declares the sweep's own options on `app` (`calibrate --collectives` runs it with the defaults).
std::shared_ptr<CollectiveArgs> add_collective_options(CLI::App& app) {
  auto a = std::make_shared<CollectiveArgs>();
  app.add_option("--ops", a->ops, "collectives to measure (default: all six)")->delimiter(',');
  app.add_option("--dtypes", a->dtypes, "bf16, fp16, fp32 (default: bf16,fp32; quick: bf16)")
      ->delimiter(',');
  app.add_option("--min-bytes", a->min_bytes, "smallest message (default 1024)");
  app.add_option("--max-bytes", a->max_bytes, "largest message (default 1 GiB)");
  // The names the cost model reads (docs/collectives.md): any other would match no link.
  app.add_option("--intra-link", a->intra_link,
                 "link name of groups inside a node (default: detected: nvswitch, nvlink, pcie)")
      ->check(CLI::IsMember({"nvswitch", "nvlink", "pcie", "mixed"}));
  app.add_option(
      "--collective-timeout", a->timeout_s,
      "seconds before a communicator init or a measurement counts as hung (default 120)");
  app.add_option("--max-gpus", a->max_gpus, "use at most this many GPUs per process");
  app.add_flag("--no-p2p", a->no_p2p, "skip the pairwise p2p matrix");
  app.add_flag("--no-host-device", a->no_host_device, "skip host-device copies");
  return a;
}

CommandRunner declare_calibrate_collectives(CLI::App& app) {
  auto a = add_collective_options(app);
  app.add_option("--out", a->out, "calibration file to write (rank 0)")->required();
  app.add_flag("--quick", a->quick, "x8 size steps, bf16 only, fewer repetitions");
  app.add_flag("--resume", a->resume, "continue from the per-rank journals beside --out");
  return [a]() -> int {
    // Before the sweep: the file and the journals beside it need a writable folder.
    check_outputs({}, {{"--out", a->out}});
    const profiler::CollectiveOptions options = to_options(*a);
#if HETPLAN_HAVE_CUDA
    CalibrationFile out;
    out.context.source = "measured";
    out.context.command = own_command_line();
    const auto summary = profiler::gpu_module().run_collective_calibration(
        options, out, nullptr, [](size_t done, size_t total, const std::string& what) {
          fmt::print(stderr, "\r[{}/{}] {:<60}", done, total, what.substr(0, 60));
          if (done == total) fmt::print(stderr, "\n");
        });
    if (summary.writer) {
      save_calibration(out, options.out_path);
      fmt::print(
          "wrote {}: {} collective, {} p2p, {} host-device measurements ({} measured, {} "
          "from journals, {} failed) from {} ranks\n",
          options.out_path.string(), out.collectives.size(), out.p2p.size(), out.host_device.size(),
          summary.measured, summary.reused, summary.failed, summary.ranks);
    }
    return summary.failed > 0 ? 1 : 0;
#else
    (void)options;
    throw RuntimeFailure(
        "this hetplan was built without CUDA (no nvcc or NCCL found at build "
        "time), so it cannot measure collectives: no GPU support");
#endif
  };
}

}  // namespace hetplan::cli
