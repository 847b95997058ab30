#include "report/import/deepspeed_log.h"

#include <algorithm>
#include <optional>
#include <regex>

#include <fmt/format.h>

#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "report/import/log_measurement.h"
#include "report/import/log_strategy.h"
#include "report/import/log_text.h"
#include "search/strategy.h"

namespace hetplan {
namespace {

using logs::contains;
using logs::fail_at;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

using SvMatch = std::match_results<std::string_view::const_iterator>;

bool search(std::string_view s, SvMatch& m, const std::regex& re) {
  return std::regex_search(s.begin(), s.end(), m, re);
}

double number_at(const SvMatch& m, size_t i, const std::string& what, const std::string& origin,
                 int64_t line) {
  const auto v = logs::parse_number(std::string_view(&*m[i].first, m[i].length()));
  if (!v)
    fail_at(origin, line, fmt::format("{}: expected a number, found \"{}\"", what, m[i].str()));
  return *v;
}

const std::regex kStepRe(
    R"(steps:\s*(\d+)\s+loss:\s*\S+\s+iter time \(s\):\s*(\S+)\s+samples/sec:)");
const std::regex kMemRe(R"(\bMA (\S+) GB\s+Max_MA (\S+) GB\s+CA (\S+) GB\s+Max_CA (\S+) GB)");
const std::regex kTimerRe(
    R"(global_step=(\d+), RunningAvgSamplesPerSec=[^,\s]+, CurrSamplesPerSec=([^,\s]+))");
const std::regex kTimerMemRe(R"(MaxMemAllocated=([^G,\s]+)GB)");
const std::regex kStageRe(R"(RANK=(\d+) STAGE=(\d+) LAYERS=(\d+))");
const std::regex kVersionRe(R"(DeepSpeed info: version=([^,\s]+))");
const std::regex kConfigLineRe(R"(print\]\s+(\w+)\s+\.*\s*(\S.*)$)");

// Collects a JSON object starting at `text` (after "json = ") over the following lines.
Json read_config_json(const std::vector<logs::Line>& lines, size_t& i, size_t brace,
                      const std::string& origin) {
  std::string text(lines[i].text.substr(brace));
  int depth = 0;
  bool in_string = false;
  size_t j = i;
  auto scan = [&](std::string_view s) {
    for (size_t k = 0; k < s.size(); ++k) {
      const char c = s[k];
      if (in_string) {
        if (c == '\\')
          ++k;
        else if (c == '"')
          in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}') {
        --depth;
      }
    }
  };
  scan(text);
  while (depth > 0 && ++j < lines.size()) {
    text += '\n';
    text += lines[j].text;
    scan(lines[j].text);
  }
  if (depth > 0) fail_at(origin, lines[i].number, "the config JSON block never closes");
  try {
    Json config = Json::parse(text);
    i = j;
    return config;
  } catch (const Json::exception& e) {  // syntax, or a number past a double (1e400)
    fail_at(origin, lines[i].number, "malformed config JSON: " + json_error_text(e));
  }
}

}  // namespace

DeepSpeedLog parse_deepspeed_log(std::string_view text, const std::string& origin) {
  DeepSpeedLog log;
  const auto lines = logs::split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string_view s = lines[i].text;
    const int64_t n = lines[i].number;
    SvMatch m;
    if (contains(s, "iter time (s)")) {
      if (!search(s, m, kStepRe))
        fail_at(origin, n, "expected \"steps: N loss: L iter time (s): T samples/sec: S\"");
      DeepSpeedLog::Step st;
      st.step = logs::integer_at(m[1].str(), "steps", origin, n);
      st.iter_s = number_at(m, 2, "iter time (s)", origin, n);
      st.line = n;
      if (!(st.iter_s > 0))
        fail_at(origin, n, fmt::format("iter time: expected a time > 0, found {}", st.iter_s));
      if (!log.steps.empty() && st.step <= log.steps.back().step)
        fail_at(origin, n,
                fmt::format("step {} follows step {}: give one run per log", st.step,
                            log.steps.back().step));
      log.steps.push_back(st);
    } else if (contains(s, "Max_MA")) {
      if (!search(s, m, kMemRe))
        fail_at(origin, n, "expected \"MA x GB Max_MA y GB CA z GB Max_CA w GB\"");
      log.max_allocated_bytes =
          std::max(log.max_allocated_bytes, number_at(m, 2, "Max_MA", origin, n) * kGiB);
      log.max_reserved_bytes =
          std::max(log.max_reserved_bytes, number_at(m, 4, "Max_CA", origin, n) * kGiB);
    } else if (contains(s, "CurrSamplesPerSec=") || contains(s, "MaxMemAllocated=")) {
      if (contains(s, "CurrSamplesPerSec=")) {
        if (!search(s, m, kTimerRe))
          fail_at(origin, n,
                  "expected \"global_step=N, RunningAvgSamplesPerSec=x, "
                  "CurrSamplesPerSec=y\"");
        DeepSpeedLog::Throughput t{logs::integer_at(m[1].str(), "global_step", origin, n),
                                   number_at(m, 2, "CurrSamplesPerSec", origin, n), n};
        if (!(t.samples_per_s > 0))
          fail_at(origin, n,
                  fmt::format("CurrSamplesPerSec: expected > 0, found {}", t.samples_per_s));
        if (!log.throughput.empty() && t.step <= log.throughput.back().step)
          fail_at(origin, n,
                  fmt::format("step {} follows step {}: give one run per log", t.step,
                              log.throughput.back().step));
        log.throughput.push_back(t);
      }
      if (contains(s, "MaxMemAllocated=")) {
        if (!search(s, m, kTimerMemRe)) fail_at(origin, n, "expected \"MaxMemAllocated=<x>GB\"");
        log.max_allocated_bytes =
            std::max(log.max_allocated_bytes, number_at(m, 1, "MaxMemAllocated", origin, n) * kGiB);
      }
    } else if (const size_t pos = s.find("json = {"); pos != std::string_view::npos) {
      if (!log.config.is_null())
        fail_at(origin, n,
                fmt::format("a second config block (the first is at line {}): give "
                            "one run per log",
                            log.config_line));
      log.config_line = n;
      log.config = read_config_json(lines, i, pos + 7, origin);
    } else if (search(s, m, kStageRe)) {
      const int64_t rank = logs::integer_at(m[1].str(), "rank", origin, n);
      const int64_t stage = logs::integer_at(m[2].str(), "stage", origin, n);
      log.pipeline_stages = std::max<int64_t>(log.pipeline_stages, stage + 1);
      auto [it, fresh] = log.stage_first_rank.emplace(stage, std::make_pair(rank, n));
      if (!fresh && rank < it->second.first) it->second = {rank, n};
    } else if (search(s, m, kVersionRe)) {
      log.version = m[1].str();
    } else if (contains(s, "config.py") && search(s, m, kConfigLineRe)) {
      log.engine_config[m[1].str()] = std::string(logs::trim(m[2].str()));
    } else if (log.oom_line == 0 &&
               (contains(s, "CUDA out of memory") || contains(s, "OutOfMemoryError"))) {
      log.oom_line = n;
    }
  }
  return log;
}

namespace {

// The value at `json_path` in the config's JSON, or nullptr where the path or a value is missing;
// `dotted` receives the path as a key path for errors.
const Json* config_value(const DeepSpeedLog& log, std::initializer_list<const char*> json_path,
                         std::string& dotted) {
  const Json* v = &log.config;
  for (const char* key : json_path) {
    dotted += dotted.empty() ? key : fmt::format(".{}", key);
    if (v && v->is_object() && v->contains(key)) {
      v = &(*v)[key];
    } else {
      v = nullptr;
    }
  }
  return v && !v->is_null() ? v : nullptr;
}

// A config value from the JSON block, else from the "name ..... value" lines; none when neither
// gives it or the JSON says "auto".
std::optional<int64_t> config_integer(const DeepSpeedLog& log, const std::string& origin,
                                      std::initializer_list<const char*> json_path,
                                      const char* engine_key) {
  std::string path;
  if (const Json* v = config_value(log, json_path, path)) {
    if (v->is_number_integer()) return v->get<int64_t>();
    if (v->is_string() && *v == "auto") return std::nullopt;
    throw InputError(fmt::format("{}:{}", origin, log.config_line), path,
                     "expected a whole number, found " + describe_json(*v));
  }
  if (auto it = log.engine_config.find(engine_key); it != log.engine_config.end())
    if (auto n = logs::parse_integer(it->second)) return *n;
  return std::nullopt;
}

// A boolean of the config's JSON (the "json = {...}" print); the engine prints the ZeRO section
// as one "zero_config" line, which is not read.
std::optional<bool> config_boolean(const DeepSpeedLog& log, const std::string& origin,
                                   std::initializer_list<const char*> json_path) {
  std::string path;
  const Json* v = config_value(log, json_path, path);
  if (!v) return std::nullopt;
  if (!v->is_boolean())
    throw InputError(fmt::format("{}:{}", origin, log.config_line), path,
                     "expected true or false, found " + describe_json(*v));
  return v->get<bool>();
}

}  // namespace

Measurement deepspeed_measurement(const DeepSpeedLog& log, const std::string& origin,
                                  const LogImportOptions& options) {
  if (log.config.is_null() && log.engine_config.empty())
    throw InputError(origin, "",
                     "no DeepSpeed config print (\"DeepSpeedEngine configuration\" "
                     "and its \"json = {...}\"): the batch sizes are unknown");
  Measurement m;
  m.model = checked_model_name(options.model, ModelShape{}, origin);
  m.cluster = options.cluster;
  m.source = "imported:deepspeed";
  std::string notes;
  Strategy s;
  // What the log does not say is DeepSpeed's default (deepspeed/runtime/zero:
  // zero_optimization.stage defaults to 0, disabled; deepspeed/runtime/config.py resolves a missing
  // gradient_accumulation_steps from train_batch_size / (micro-batch x data-parallel size), and
  // this importer cannot know the data-parallel size without it, so it takes 1), --tp, --pp and
  // --recompute, else hetplan's default; the keys of what the log and the command line do not give
  // go into m.assumed.
  s.micro_batch = config_integer(log, origin, {"train_micro_batch_size_per_gpu"},
                                 "train_micro_batch_size_per_gpu")
                      .value_or(0);
  const auto logged_gas =
      config_integer(log, origin, {"gradient_accumulation_steps"}, "gradient_accumulation_steps");
  const int64_t gas = logged_gas.value_or(1);
  if (!logged_gas) m.assumed.push_back("strategy.dp");  // dp = batch / (micro x accumulation)
  s.global_batch =
      config_integer(log, origin, {"train_batch_size"}, "train_batch_size").value_or(0);
  if (s.micro_batch <= 0 || s.global_batch <= 0)
    throw InputError(origin, "",
                     "the config gives no train_micro_batch_size_per_gpu and "
                     "train_batch_size");
  const auto zero_stage =
      config_integer(log, origin, {"zero_optimization", "stage"}, "zero_optimization_stage");
  s.zero = static_cast<int>(zero_stage.value_or(0));
  if (!zero_stage) m.assumed.push_back("strategy.zero");
  // DeepSpeed adds every gradient with a kernel of its own: no weight-gradient GEMM accumulates
  // into the fp32 main gradient (docs/exports.md), which the report matches on.
  s.grad_accumulation_fusion = false;
  const int64_t autotp =
      config_integer(log, origin, {"tensor_parallel", "autotp_size"}, "").value_or(0);
  bool tp_given = autotp > 0 || options.tp.has_value();
  s.tp = autotp > 0 ? autotp : options.tp.value_or(1);
  if (autotp > 0 && options.tp && *options.tp != autotp)
    throw InputError(origin, "tensor_parallel.autotp_size",
                     fmt::format("the log says {}, --tp says {}", autotp, *options.tp));
  s.pp = log.pipeline_stages > 0 ? log.pipeline_stages : options.pp.value_or(1);
  if (log.pipeline_stages > 0 && options.pp && *options.pp != log.pipeline_stages)
    throw InputError(origin, "",
                     fmt::format("the log shows {} pipeline stages, --pp says {}",
                                 log.pipeline_stages, *options.pp));
  if (s.global_batch % (s.micro_batch * gas) != 0)
    throw InputError(origin, "train_batch_size",
                     fmt::format("{} is not a multiple of micro-batch {} x accumulation {}",
                                 s.global_batch, s.micro_batch, gas));
  s.dp = s.global_batch / (s.micro_batch * gas);
  // Where the log shows a stage after the first, its first rank is stage x dp x tp: the
  // tensor-parallel width the run had, which --tp and autotp must agree with.
  for (const auto& [stage, first] : log.stage_first_rank) {
    if (stage == 0) continue;
    const auto [rank, line] = first;
    const std::string where = fmt::format("RANK={} STAGE={}", rank, stage);
    if (rank % (stage * s.dp) != 0)
      fail_at(origin, line,
              fmt::format("{}: stage {} starts at rank {}, not a multiple of stage x dp = {} x {} "
                          "(DeepSpeed numbers ranks stage, data, model)",
                          where, stage, rank, stage, s.dp));
    const int64_t tp = rank / (stage * s.dp);
    if (tp != s.tp && (autotp > 0 || options.tp))
      fail_at(
          origin, line,
          fmt::format("{}: {} ranks per stage = dp {} x tp {}; {} says tp {}", where, rank / stage,
                      s.dp, tp, autotp > 0 ? "tensor_parallel.autotp_size" : "--tp", s.tp));
    s.tp = tp;
    tp_given = true;
    break;
  }
  // Gradient reduction during the backward: ZeRO 1-3 with overlap_comm (DeepSpeed's default:
  // on at stage 3, off below, deepspeed/runtime/zero/config.py), outside a pipeline, whose engine
  // reduces after the flush (_exec_reduce_grads). ZeRO-0 all-reduces after the backward.
  const auto overlap = config_boolean(log, origin, {"zero_optimization", "overlap_comm"});
  const bool overlap_possible = s.zero >= 1 && s.pp == 1;
  s.overlap_grad_reduce = overlap_possible && overlap.value_or(s.zero == 3);
  if (overlap_possible && !overlap && s.dp > 1) m.assumed.push_back("strategy.overlap_grad_reduce");
  if (!tp_given) m.assumed.push_back("strategy.tp");
  if (log.pipeline_stages == 0 && !options.pp) m.assumed.push_back("strategy.pp");
  if (options.recompute) {
    if (!parse_recompute(*options.recompute, s.recompute))
      throw InputError(fmt::format("--recompute: expected none, selective or full, found \"{}\"",
                                   *options.recompute));
  } else {
    m.assumed.push_back("strategy.recompute");
    if (log.config.is_object() && log.config.contains("activation_checkpointing"))
      notes +=
          "the config has an activation_checkpointing section but the log does not say which "
          "layers the model checkpoints: recorded as recompute none (give --recompute); ";
  }
  // Which attention kernels the model calls is the model code's choice, not DeepSpeed's.
  m.assumed.push_back("strategy.flash_attention");

  // Iteration times: the pipeline engine's "iter time (s)" (a mean over steps_per_print steps),
  // else the ThroughputTimer's samples/s of the step before each line (train_batch_size over it).
  std::vector<DeepSpeedLog::Step> steps = log.steps;
  const bool from_timer = steps.empty() && !log.throughput.empty();
  if (from_timer)
    for (const auto& t : log.throughput)
      steps.push_back({t.step, static_cast<double>(s.global_batch) / t.samples_per_s, t.line});
  const int64_t spacing = steps.size() > 1 ? steps[1].step - steps[0].step : 1;
  const int64_t interval = from_timer ? 1 : spacing;  // steps each sample averages
  KeptSamples kept;
  if (!steps.empty()) {
    // A sample is warm-up when the steps it covers include one of the run's first
    // `warmup_iterations` steps.
    const int64_t start = steps.front().step - spacing;
    int64_t previous = start;
    for (const auto& st : steps) {
      const int64_t first_covered = from_timer ? st.step : previous + 1;
      previous = st.step;
      if (first_covered <= start + options.warmup_iterations) continue;
      kept.keep(st.iter_s, st.line);
    }
  }
  record_iterations(m, kept, log.oom_line,
                    fmt::format("CUDA out of memory at line {}; ", log.oom_line),
                    fmt::format("no \"iter time (s)\" or \"CurrSamplesPerSec\" lines after the "
                                "{} warm-up steps (found {}); lower --warmup or log more steps",
                                options.warmup_iterations, steps.size()),
                    origin, options, notes);
  if (!m.oom) {
    if (interval > 1)
      notes += fmt::format("each sample is DeepSpeed's mean over {} steps; ", interval);
    if (from_timer)
      notes += "each sample is one step's time (train_batch_size / CurrSamplesPerSec); ";
  }
  const double peak =
      options.memory_kind == "reserved" ? log.max_reserved_bytes : log.max_allocated_bytes;
  if (peak >= 0) {
    m.peak_memory_bytes = {peak};
    m.peak_memory_kind = options.memory_kind;
    if (s.pp > 1) notes += "memory as the logging rank (usually rank 0, the first stage) saw it; ";
  }
  m.strategy = to_json(s);
  m.notes = finished_notes(notes);
  return m;
}

MeasurementsFile import_deepspeed_logs(const std::vector<std::filesystem::path>& paths,
                                       const LogImportOptions& options) {
  return measurements_from_logs(
      paths, "deepspeed", options,
      [&](const std::string& text, const std::string& origin, MeasurementsFile& f) {
        const DeepSpeedLog log = parse_deepspeed_log(text, origin);
        if (f.context.framework_version.empty()) f.context.framework_version = log.version;
        return deepspeed_measurement(log, origin, options);
      });
}

}  // namespace hetplan
