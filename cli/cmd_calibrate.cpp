// hetplan calibrate: measures the GPU it runs on into a calibration file (see docs/calibrate.md).
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/validators.h"
#include "costmodel/errors.h"
#include "costmodel/journal.h"
#include "profiler/common/dtypes.h"
#include "profiler/common/gpu_module.h"
#include "profiler/common/options.h"
#include "profiler/common/records.h"

namespace hetplan::cli {
namespace {

int run(const profiler::CalibrateOptions& o) {
#ifdef HETPLAN_HAVE_CUDA
  const profiler::CalibrationOutcome r = profiler::gpu_module().run_calibration(o);
  fmt::print("wrote {}\n", r.summary);
  fmt::print("{} measured now, {} failed, {} from the journal of an earlier run\n", r.measured,
             r.failed, r.resumed);
  if (r.gpu_lost) {
    fmt::print(stderr,
               "hetplan: failed: the GPU context was lost; the file is partial. Run the "
               "same command with --resume to continue\n");
    return 1;
  }
  if (r.stopped) {
    fmt::print(stderr,
               "hetplan: interrupted: the file is partial; run the same command with "
               "--resume to continue\n");
    return 1;
  }
  return 0;
#else
  (void)o;
  throw RuntimeFailure(
      "this build of hetplan has no CUDA profiler (it was built without the "
      "CUDA toolkit, or with HETPLAN_CUDA=OFF). `hetplan calibrate` needs a "
      "CUDA build of hetplan on a machine with an NVIDIA GPU");
#endif
}

// --from-journal: the file of what FILE.journal holds, on any machine, measuring nothing.
int write_from_journal(const profiler::CalibrateOptions& o) {
  const auto path = o.journal_path();
  if (!std::filesystem::is_regular_file(path)) {
    // calibrate-collectives of an older hetplan kept only one journal per rank, whose samples
    // only its --resume combines.
    const std::filesystem::path rank0 = o.out.string() + ".collectives.rank0.jsonl";
    throw InputError(fmt::format(
        "--from-journal: {} does not exist (a calibration with --out {} journals to it){}",
        path.string(), o.out.string(),
        std::filesystem::exists(rank0)
            ? fmt::format("; {} is calibrate-collectives' journal of rank 0: `hetplan "
                          "calibrate-collectives --out {} --resume` on the GPUs completes it",
                          rank0.string(), o.out.string())
            : ""));
  }
  const auto journal = Journal::read_only(path);
  if (journal->dropped_lines() > 0)
    fmt::print(stderr, "calibrate: {} torn or malformed journal line(s) ignored\n",
               journal->dropped_lines());
  const profiler::Assembly a = profiler::assemble_from_journal(*journal, o.command_line);
  save_calibration(a.file, o.out);
  fmt::print("wrote {}\n", profiler::file_summary(a.file, o.out));
  fmt::print("{} measurements from the journal{}\n", a.measurements,
             a.unreadable
                 ? fmt::format(", {} unreadable record(s) (listed in failures)", a.unreadable)
                 : "");
  const Provenance& run = a.file.context;
  if (!a.last_run_finished)
    fmt::print(stderr,
               "calibrate: the journal's last run ({} on {}) may not have finished: the file may "
               "be partial; {}, completes it\n",
               run.date.empty() ? "?" : run.date, run.host.empty() ? "?" : run.host,
               profiler::resume_command(run, o.out));
  return 0;
}

}  // namespace

CommandRunner declare_calibrate(CLI::App& app) {
  auto o = std::make_shared<profiler::CalibrateOptions>();
  auto dtypes = std::make_shared<std::string>();
  auto from_journal = std::make_shared<bool>(false);
  const CLI::Option* out =
      app.add_option("--out", o->out, "Calibration file to write (its journal is FILE.journal)")
          ->required();
  app.add_flag("--quick", o->quick, "Coarse sweeps: under 2 minutes on an H100");
  app.add_flag("--resume", o->resume,
               "Continue FILE.journal: measure only what it does not hold yet");
  app.add_flag("--retry-failed", o->retry_failed,
               "With --resume: measure again what the journal records as failed");
  app.add_flag("--gemm", o->gemm, "Generic cuBLASLt GEMM grid");
  app.add_flag("--kernels", o->kernels, "Our kernels and the device copy bandwidth");
  app.add_option("--layers", o->layer_models,
                 "MODEL (repeatable): its layers' GEMMs and per-layer F/B/W timing")
      ->type_name("MODEL");
  app.add_flag("--collectives", o->collectives, "NCCL collectives, p2p and host-device copies");
  app.add_option("--device", o->device, "GPU index (default 0)")->check(kNonNegative);
  app.add_option(
      "--dtypes", *dtypes,
      "GEMM dtypes, comma-separated: fp32,tf32,fp16,bf16,fp8 (default: all the GPU has)");
  app.add_option("--micro-batches", o->micro_batches,
                 "Micro-batch sizes for --layers (default 1 2 4 8)")
      ->delimiter(',')
      ->check(kPositive);
  app.add_option("--tp", o->tensor_widths, "Tensor-parallel widths for --layers (default 1 2 4 8)")
      ->delimiter(',')
      ->check(kPositive);
  app.add_option("--seq-len", o->seq_len, "Sequence length for --layers (default: the model's)")
      ->check(kPositive);
  app.add_flag_callback(
      "--no-cupti", [o] { o->cupti = false; }, "Do not trace kernels with CUPTI");
  app.add_flag_callback(
      "--no-clocks", [o] { o->clocks = false; },
      "Do not read the SM clock, power and clock-event reasons (NVML) during timed regions");
  app.add_option("--stop-after", o->stop_after,
                 "Stop after N new measurements as if interrupted (for testing --resume)")
      ->check(kPositive);
  const CLI::Option* from_journal_flag =
      app.add_flag("--from-journal", *from_journal,
                   "Write FILE from FILE.journal alone, measuring nothing and needing no GPU (a "
                   "run killed before it wrote FILE, or whose machine is gone)");
  app.footer("With no section flag, every section runs (--layers with gpt2-medium and llama2-7b).");
  return [o, dtypes, from_journal, &app, out, from_journal_flag] {
    // Every other option is about measuring.
    if (*from_journal)
      for (const CLI::Option* option : std::as_const(app).get_options())
        if (option != out && option != from_journal_flag && option->count() > 0)
          throw InputError(fmt::format(
              "--from-journal writes the file from its journal alone; {} is for measuring",
              option->get_name()));
    // Before minutes of measuring: the file and its journal need a writable folder.
    check_outputs({}, {{"--out", o->out.string()}});
    if (!dtypes->empty()) o->dtypes = profiler::parse_dtype_list(*dtypes);
    o->command_line = own_command_line();
    return *from_journal ? write_from_journal(*o) : run(*o);
  };
}

}  // namespace hetplan::cli
