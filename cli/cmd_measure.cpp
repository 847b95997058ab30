// hetplan measure: times real training iterations of a strategy with the PyTorch reference harness
// (scripts/reference_train.py) and writes a measurements file. docs/measure.md.
#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/cmd_model_info.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/validators.h"
#include "costmodel/atomic_file.h"
#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "costmodel/install_paths.h"
#include "costmodel/measurements.h"
#include "costmodel/model.h"
#include "costmodel/version.h"
#include "report/import/log_text.h"
#include "search/evaluate.h"
#include "search/strategy.h"

namespace hetplan::cli {
namespace {

struct MeasureOptions {
  std::string model, strategy, out, cluster, python, gpu_type, framework;
  int64_t seq_len = 0;
  int warmup = 3, iters = 10;
  double budget_s = 15;
  bool dry_run = false;
};

// 'text' for /bin/sh, with embedded single quotes escaped.
std::string quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Exit status of a shell command (-1 when it did not exit normally).
int run_shell(const std::string& command) {
  const int status = std::system(command.c_str());
  if (status == -1 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

std::filesystem::path harness_path() {
  const char* dir = std::getenv("HETPLAN_SCRIPTS_DIR");
  const std::filesystem::path base = dir ? std::filesystem::path(dir) : data_dir() / "scripts";
  return base / "reference_train.py";
}

std::string python_of(const MeasureOptions& o) {
  if (!o.python.empty()) return o.python;
  if (const char* env = std::getenv("HETPLAN_PYTHON")) return env;
  return "python3";
}

// Fails with a clear message when the interpreter cannot import torch or sees no GPU.
void check_python(const std::string& python) {
  const int rc =
      run_shell(quote(python) +
                " -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)'"
                " >/dev/null 2>&1");
  if (rc == 3)
    throw RuntimeFailure(
        fmt::format("PyTorch ({}) sees no CUDA GPU: hetplan measure needs one", python));
  if (rc != 0)
    throw RuntimeFailure(
        fmt::format("no Python with PyTorch found (tried \"{}\"); install "
                    "PyTorch, or pass --python or set HETPLAN_PYTHON",
                    python));
}

// A folder removed with everything in it when the command ends, however it ends.
struct ScratchDir {
  std::filesystem::path path;
  explicit ScratchDir(std::filesystem::path p) : path(std::move(p)) {
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

}  // namespace

CommandRunner declare_measure(CLI::App& app) {
  auto o = std::make_shared<MeasureOptions>();
  app.add_option("--model", o->model, "Model preset, model file or Hugging Face config.json")
      ->required();
  app.add_option("--strategy", o->strategy, "Strategy file (JSON or YAML)")->required();
  app.add_option("--out", o->out, "Measurements file to write")->required();
  app.add_option("--seq-len", o->seq_len, "Sequence length (default: the model's)")
      ->check(kPositive);
  app.add_option("--cluster", o->cluster, "Cluster name to record with the measurement");
  app.add_option("--framework", o->framework,
                 "How the harness runs the strategy: a framework with a harness style "
                 "(reference, the default, or pytorch)");
  app.add_option("--python", o->python,
                 "Python with PyTorch (default: $HETPLAN_PYTHON, else python3)");
  app.add_option("--gpu-type", o->gpu_type, "hetplan GPU type to record (default: from the name)");
  app.add_option("--warmup", o->warmup, "Warm-up iterations (default 3)")
      ->check(CLI::Range(1, 100));
  app.add_option("--iters", o->iters, "Timed iterations at most (default 10)")
      ->check(CLI::Range(3, 10000));
  app.add_option("--budget-s", o->budget_s,
                 "Seconds of timed iterations at most (at least 3 iterations run; default 15)")
      ->check(kPositive);
  app.add_flag("--dry-run", o->dry_run,
               "Print what the harness would build (no torch or GPU needed) and write nothing");
  return [o]() {
    if (!o->dry_run) check_outputs({o->strategy, o->model}, {{"--out", o->out}});
    const ModelSpec model = load_model(o->model, o->seq_len);
    const FrameworkSpec framework = load_run_framework(o->framework, "reference");
    // The framework names the style of the harness that runs as it (its `harness` key).
    if (framework.harness.empty())
      throw InputError("--framework", "",
                       fmt::format("a framework the reference harness runs as (reference or "
                                   "pytorch: one with a `harness` style), found \"{}\"",
                                   o->framework));
    const Strategy strategy =
        with_framework_defaults(load_strategy(o->strategy), framework, &model);
    if (const auto broken = first_broken_rule({model, framework}, strategy))
      throw InputError(o->strategy, broken->key, broken->reason);
    // What the reference harness runs (docs/measure.md): one kind of parallelism at a time, and
    // ZeRO up to stage 2.
    std::vector<std::string> kinds;
    for (const auto& [key, degree] : {std::pair<const char*, int64_t>{"dp", strategy.dp},
                                      {"tp", strategy.tp},
                                      {"pp", strategy.pp}})
      if (degree > 1) kinds.push_back(fmt::format("{} {}", key, degree));
    if (kinds.size() > 1)
      throw InputError(o->strategy, "dp",
                       fmt::format("the reference harness runs one kind of parallelism at a time; "
                                   "this strategy has {}",
                                   fmt::join(kinds, ", ")));
    if (framework.harness == "pytorch" && !kinds.empty())
      throw InputError(o->strategy, "dp",
                       fmt::format("the harness runs the pytorch framework's style on one GPU; "
                                   "this strategy has {}",
                                   fmt::join(kinds, ", ")));
    const auto harness = harness_path();
    if (!std::filesystem::exists(harness))
      throw RuntimeFailure(
          fmt::format("the reference harness {} is missing (set "
                      "HETPLAN_SCRIPTS_DIR to the scripts/ folder)",
                      harness.string()));
    const std::string python = python_of(*o);
    if (!o->dry_run) check_python(python);

    // The harness builds the model from hetplan's own layer list, and runs hetplan's strategy.
    // It writes into a scratch folder: --out is replaced only by a file this run wrote and the
    // strict reader accepts, never left holding an earlier run's numbers as if they were new.
    const ScratchDir tmp(std::filesystem::temp_directory_path() /
                         fmt::format("hetplan_measure_{}", ::getpid()));
    const auto info_path = tmp.path / "model.json";
    const auto strategy_path = tmp.path / "strategy.json";
    const auto written = tmp.path / "measurements.json";
    write_json_atomically(model_info_json(model), info_path);
    write_json_atomically(to_json(strategy), strategy_path);

    const int64_t devices = strategy.devices();
    std::string cmd = quote(python) + " ";
    if (devices > 1 && !o->dry_run)
      // The underscore spelling: torchrun before 2.0 knows no other.
      cmd += fmt::format("-m torch.distributed.run --standalone --nproc_per_node={} ", devices);
    cmd += quote(harness.string()) + " --model-info " + quote(info_path.string()) + " --strategy " +
           quote(strategy_path.string()) +
           // The name `hetplan predict --json` writes, which `hetplan report` matches on.
           " --model-name " + quote(model.name) + " --style " + quote(framework.harness);
    if (o->dry_run) {
      cmd += " --dry-run";
    } else {
      cmd += " --out " + quote(written.string()) +
             fmt::format(" --warmup {} --iters {} --budget-s {}", o->warmup, o->iters, o->budget_s);
      if (!o->cluster.empty()) cmd += " --cluster " + quote(o->cluster);
      if (!o->gpu_type.empty()) cmd += " --gpu-type " + quote(o->gpu_type);
      cmd += fmt::format(" --hetplan-version {} --command ", version()) + quote(own_command_line());
    }
    const int rc = run_shell(cmd);
    if (rc == 2) throw InputError("the reference harness rejected its input (see above)");
    if (o->dry_run) {
      if (rc != 0) throw RuntimeFailure(fmt::format("the reference harness failed (exit {})", rc));
      return 0;
    }
    if (!std::filesystem::exists(written))
      throw RuntimeFailure(
          fmt::format("the reference harness failed (exit {}) before it measured "
                      "anything; {} was not written",
                      rc, o->out));
    // Read once, checked by the strict reader: what --out gets is a valid measurements file.
    const std::string text = logs::read_text_file(written);
    MeasurementsFile file;
    try {
      file =
          measurements_from_document(parse_document(text, written.string(), DocumentFormat::kJson));
    } catch (const InputError& e) {
      const std::string kept = o->out + ".rejected";
      write_text_atomically(text, kept);
      throw RuntimeFailure(fmt::format(
          "the reference harness (exit {}) wrote a measurements file hetplan cannot read, kept "
          "as {}: {}",
          rc, kept, e.what()));
    }
    write_text_atomically(text, o->out);
    for (const auto& m : file.measurements) {
      if (m.oom) {
        fmt::print("{}: out of memory\n", m.model);
      } else if (m.iteration_s) {
        fmt::print("{}: iteration {} (median of {}), peak allocated {}\n", m.model,
                   format_seconds(m.iteration_s->median), m.iteration_s->count,
                   format_gib(max_peak_memory(m)));
      } else if (!m.error.empty()) {
        fmt::print("{}: failed: {}\n", m.model, m.error);
      }
    }
    if (rc != 0)
      throw RuntimeFailure(fmt::format(
          "the reference harness failed (exit {}); {} keeps what it measured", rc, o->out));
    return 0;
  };
}

}  // namespace hetplan::cli
