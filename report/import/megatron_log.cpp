#include "report/import/megatron_log.h"

#include <algorithm>
#include <regex>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "report/import/log_measurement.h"
#include "report/import/log_strategy.h"
#include "report/import/log_text.h"
#include "report/megatron_layout.h"
#include "report/stage_layout.h"

namespace hetplan {
namespace {

using logs::contains;
using logs::fail_at;

const std::regex kIterationRe(R"(\biteration\s+(\d+)\s*/\s*(\d+)\s*\|)");
const std::regex kMemoryRe(R"(\[Rank (\d+)\] \(after (\d+) iterations\) memory \(MB\))");

bool is_args_start(std::string_view line) {
  line = logs::trim(line);
  return logs::starts_with(line, "----") && contains(line, " arguments ") &&
         !contains(line, "end of");
}

// "  name ........ value" (dots fill to 48 columns; none for long names).
void parse_arg_line(std::string_view text, const std::string& origin, int64_t line,
                    std::map<std::string, std::string>& args) {
  std::string_view s = logs::trim(text);
  if (s.empty()) return;
  const size_t space = s.find(' ');
  if (space == std::string_view::npos)
    fail_at(origin, line,
            fmt::format("expected \"name ..... value\" inside the arguments block, "
                        "found \"{}\"",
                        s));
  const std::string name(s.substr(0, space));
  std::string_view rest = s.substr(space);
  while (!rest.empty() && (rest.front() == '.' || rest.front() == ' ')) rest.remove_prefix(1);
  args[name] = std::string(logs::trim(rest));
}

double field_number(const std::vector<std::pair<std::string, std::string>>& fields,
                    const std::string& key, const std::string& origin, int64_t line,
                    bool required) {
  for (const auto& [k, v] : fields) {
    if (k != key) continue;
    const auto n = logs::parse_number(v);
    if (!n) fail_at(origin, line, fmt::format("\"{}\": expected a number, found \"{}\"", key, v));
    return *n;
  }
  if (required) fail_at(origin, line, fmt::format("expected a \"{}: <number>\" field", key));
  return -1;
}

}  // namespace

MegatronLog parse_megatron_log(std::string_view text, const std::string& origin) {
  MegatronLog log;
  const auto lines = logs::split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string_view s = lines[i].text;
    const int64_t n = lines[i].number;
    if (is_args_start(s)) {
      if (log.args_line > 0)
        fail_at(origin, n,
                fmt::format("a second arguments block (the first is at line {}): give "
                            "one log per run",
                            log.args_line));
      log.args_line = n;
      size_t j = i + 1;
      for (; j < lines.size() && !contains(lines[j].text, "end of arguments"); ++j)
        parse_arg_line(lines[j].text, origin, lines[j].number, log.args);
      if (j == lines.size())
        fail_at(origin, n, "the arguments block has no \"end of arguments\" line");
      i = j;
      continue;
    }
    std::match_results<std::string_view::const_iterator> m;
    if (contains(s, "iteration") && contains(s, "|") &&
        std::regex_search(s.begin(), s.end(), m, kIterationRe)) {
      MegatronLog::Iteration it;
      it.iteration = logs::integer_at(m[1].str(), "iteration", origin, n);
      it.train_iters = logs::integer_at(m[2].str(), "iterations", origin, n);
      it.line = n;
      const auto fields = logs::pipe_fields(s);
      it.elapsed_ms = field_number(fields, "elapsed time per iteration (ms)", origin, n, true);
      if (!(it.elapsed_ms > 0))
        fail_at(origin, n,
                fmt::format("elapsed time per iteration: expected a time > 0, found {}",
                            it.elapsed_ms));
      const double gb = field_number(fields, "global batch size", origin, n, false);
      it.global_batch = gb > 0 ? static_cast<int64_t>(gb) : 0;
      if (!log.iterations.empty() && it.iteration <= log.iterations.back().iteration)
        fail_at(origin, n,
                fmt::format("iteration {} follows iteration {}: give one run per log "
                            "(a restarted run goes in its own file)",
                            it.iteration, log.iterations.back().iteration));
      log.iterations.push_back(it);
      continue;
    }
    if (contains(s, "memory (MB)") && std::regex_search(s.begin(), s.end(), m, kMemoryRe)) {
      MegatronLog::Memory mem;
      mem.rank = logs::integer_at(m[1].str(), "rank", origin, n);
      mem.after = logs::integer_at(m[2].str(), "iteration", origin, n);
      mem.line = n;
      const auto fields = logs::pipe_fields(s);
      mem.allocated_mb = field_number(fields, "allocated", origin, n, true);
      mem.max_allocated_mb = field_number(fields, "max allocated", origin, n, true);
      mem.reserved_mb = field_number(fields, "reserved", origin, n, true);
      mem.max_reserved_mb = field_number(fields, "max reserved", origin, n, true);
      log.memory.push_back(mem);
      continue;
    }
    if (log.oom_line == 0 && (contains(s, "CUDA out of memory") || contains(s, "OutOfMemoryError")))
      log.oom_line = n;
  }
  return log;
}

namespace {

// Reads the strategy from the arguments block.
struct MegatronArgs {
  const MegatronLog& log;
  const std::string& origin;

  bool has(const std::string& key) const {
    auto it = log.args.find(key);
    return it != log.args.end() && it->second != "None";
  }
  // Printed at all, "None" included: the block says what the run used, even if that is nothing.
  bool printed(const std::string& key) const { return log.args.count(key) > 0; }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw InputError(fmt::format("{}:{}", origin, log.args_line), "arguments." + key, what);
  }
  int64_t integer(const std::string& key) const {
    if (!has(key)) fail(key, "missing from the arguments block");
    const auto v = logs::parse_integer(log.args.at(key));
    if (!v) fail(key, fmt::format("expected a whole number, found \"{}\"", log.args.at(key)));
    return *v;
  }
  int64_t integer_or(const std::string& key, int64_t fallback) const {
    return has(key) ? integer(key) : fallback;
  }
  bool flag(const std::string& key) const {
    if (!has(key)) return false;
    const std::string& v = log.args.at(key);
    if (v == "True") return true;
    if (v == "False") return false;
    fail(key, fmt::format("expected True or False, found \"{}\"", v));
  }
  std::string text(const std::string& key) const { return has(key) ? log.args.at(key) : ""; }
};

// The strategy the arguments block describes. A value the block does not print is Megatron-LM's
// default (megatron/training/arguments.py) and its key goes into `assumed`.
Strategy strategy_from_args(const MegatronArgs& a, const ModelShape& shape, std::string& notes,
                            std::vector<std::string>& assumed) {
  Strategy s;
  s.tp = a.integer("tensor_model_parallel_size");
  s.pp = a.integer("pipeline_model_parallel_size");
  if (a.integer_or("context_parallel_size", 1) > 1)
    a.fail("context_parallel_size", "context parallelism is not modelled by hetplan");
  if (a.integer_or("expert_model_parallel_size", 1) > 1)
    a.fail("expert_model_parallel_size", "expert parallelism is not modelled by hetplan");
  if (a.has("data_parallel_size")) {
    s.dp = a.integer("data_parallel_size");
  } else {
    const int64_t world = a.integer("world_size");
    if (world % (s.tp * s.pp) != 0)
      a.fail("world_size",
             fmt::format("world size {} is not a multiple of tp x pp = {}", world, s.tp * s.pp));
    s.dp = world / (s.tp * s.pp);
  }
  s.micro_batch = a.integer("micro_batch_size");
  // validate_args sets an unset global batch to micro_batch_size x data_parallel_size.
  s.global_batch = a.integer_or("global_batch_size", s.micro_batch * s.dp);
  if (!a.has("global_batch_size")) assumed.push_back("strategy.global_batch");
  s.sequence_parallel = a.flag("sequence_parallel") && s.tp > 1;
  if (s.tp > 1 && !a.printed("sequence_parallel")) assumed.push_back("strategy.sequence_parallel");
  s.zero = a.flag("use_distributed_optimizer") ? 1 : 0;
  if (a.flag("use_megatron_fsdp") || a.flag("use_custom_fsdp")) {
    const std::string strategy = a.text("data_parallel_sharding_strategy");
    s.zero = strategy == "optim_grads_params" ? 3 : strategy == "optim_grads" ? 2 : 1;
  } else if (!a.printed("use_distributed_optimizer")) {
    assumed.push_back("strategy.zero");
  }
  if (!a.printed("recompute_granularity") && !a.printed("recompute_activations"))
    assumed.push_back("strategy.recompute");
  const std::string granularity = a.text("recompute_granularity");
  if (granularity.empty()) {
    s.recompute = a.flag("recompute_activations") ? Recompute::kSelective : Recompute::kNone;
  } else if (!parse_recompute(granularity, s.recompute)) {
    a.fail("recompute_granularity",
           fmt::format("expected None, selective or full, found \"{}\"", granularity));
  }
  if (s.recompute == Recompute::kFull) {
    const std::string method = a.text("recompute_method");
    const int64_t layers = a.integer_or("recompute_num_layers", 1);
    if (!(method == "uniform" && layers == 1))
      notes += fmt::format(
          "full recomputation with recompute_method {} and recompute_num_layers "
          "{} (hetplan models every layer recomputed); ",
          method.empty() ? "None" : method, layers);
  }
  // Printed after Megatron-LM's checks (it turns the fusion off where neither Transformer Engine
  // nor APEX provides the kernel); --no-gradient-accumulation-fusion prints False.
  if (a.has("gradient_accumulation_fusion")) {
    s.grad_accumulation_fusion = a.flag("gradient_accumulation_fusion");
  } else {
    // --no-gradient-accumulation-fusion is store_false into gradient_accumulation_fusion.
    assumed.push_back("strategy.grad_accumulation_fusion");
    notes +=
        "the arguments block does not print gradient_accumulation_fusion: recorded as true, "
        "Megatron-LM's default (versions before 2022 had no such fusion: false); ";
  }
  // --overlap-grad-reduce is store_true (off by default); versions before it (2023) reduced the
  // gradients after the backward, as the option's absence says.
  s.overlap_grad_reduce = a.flag("overlap_grad_reduce");
  if (s.dp > 1 && !a.printed("overlap_grad_reduce"))
    assumed.push_back("strategy.overlap_grad_reduce");
  const std::string backend = a.text("attention_backend");
  s.flash_attention =
      a.flag("use_flash_attn") || !(contains(backend, "unfused") || contains(backend, "local"));
  if (!a.flag("use_flash_attn") && !a.printed("attention_backend"))
    assumed.push_back("strategy.flash_attention");  // as attention_backend auto: TE's fused kernels
  // Interleaved schedule: virtual stages per pipeline rank.
  if (s.pp > 1) {
    int64_t vpp = a.integer_or("virtual_pipeline_model_parallel_size", 0);
    if (vpp == 0 && a.has("num_layers_per_virtual_pipeline_stage")) {
      const int64_t per = a.integer("num_layers_per_virtual_pipeline_stage");
      vpp = shape.blocks / (per * s.pp);
    }
    if (vpp > 1) {
      s.schedule = "interleaved";
      s.chunks = vpp;
    }
    if (!a.printed("virtual_pipeline_model_parallel_size") &&
        !a.printed("num_layers_per_virtual_pipeline_stage"))
      assumed.insert(assumed.end(), {"strategy.schedule", "strategy.chunks"});
  }
  // The layer partition Megatron-LM ran, in hetplan's stage ranges.
  if (s.pp > 1 && s.chunks == 1) {
    std::vector<StageBlocks> stages;
    if (a.has("pipeline_model_parallel_layout")) {
      stages = parse_megatron_layout(
          a.text("pipeline_model_parallel_layout"), s.pp,
          [&](const std::string& what) { a.fail("pipeline_model_parallel_layout", what); });
    } else {
      if (a.flag("account_for_embedding_in_pipeline_split") ||
          a.flag("account_for_loss_in_pipeline_split"))
        notes +=
            "the embedding or loss counted as a layer in Megatron-LM's split; stage ranges "
            "left to hetplan; ";
      else
        stages = megatron_stage_split(
            shape.blocks, s.pp, a.integer_or("decoder_first_pipeline_num_layers", -1),
            a.integer_or("decoder_last_pipeline_num_layers", -1),
            [&](const std::string& what) { a.fail("decoder_first_pipeline_num_layers", what); });
    }
    s.stages = to_stage_specs(stages);
  }
  return s;
}

}  // namespace

Measurement megatron_measurement(const MegatronLog& log, const std::string& origin,
                                 const LogImportOptions& options) {
  if (log.args_line == 0)
    throw InputError(origin, "",
                     "no Megatron-LM arguments block (\"---- arguments ----\"), so the "
                     "strategy is unknown: import rank 0's output");
  const MegatronArgs a{log, origin};
  ModelShape shape;
  shape.blocks = a.integer("num_layers");
  shape.hidden = a.integer("hidden_size");
  shape.heads = a.integer("num_attention_heads");
  shape.seq_len = a.integer("seq_length");
  shape.ffn_hidden = a.integer_or("ffn_hidden_size", 0);
  shape.kv_heads = a.flag("group_query_attention") ? a.integer("num_query_groups") : shape.heads;
  Measurement m;
  m.model = checked_model_name(options.model, shape, fmt::format("{}:{}", origin, log.args_line));
  m.cluster = options.cluster;
  m.source = "imported:megatron";
  std::string notes;
  Strategy s = strategy_from_args(a, shape, notes, m.assumed);

  // Iteration times: drop the warm-up iterations and lines of another global batch size (batch
  // ramp-up).
  const int64_t interval = a.integer_or(
      "log_interval",
      log.iterations.size() > 1 ? log.iterations[1].iteration - log.iterations[0].iteration : 1);
  KeptSamples kept;
  int64_t dropped_batch = 0, warmup = 0;
  if (!log.iterations.empty()) {
    const int64_t start = log.iterations.front().iteration - interval;
    int64_t previous = start;
    for (const auto& it : log.iterations) {
      const bool in_warmup = previous < start + options.warmup_iterations;
      previous = it.iteration;
      if (in_warmup) {
        ++warmup;
        continue;
      }
      if (it.global_batch > 0 && it.global_batch != s.global_batch) {
        ++dropped_batch;
        continue;
      }
      kept.keep(it.elapsed_ms / 1e3, it.line);
    }
  }
  record_iterations(m, kept, log.oom_line,
                    fmt::format("CUDA out of memory at line {} after {} logged iterations; ",
                                log.oom_line, log.iterations.size()),
                    fmt::format("no iteration lines after the {} warm-up iterations (found {} "
                                "iteration lines); lower --warmup or log more iterations",
                                options.warmup_iterations, log.iterations.size()),
                    origin, options, notes);
  if (!m.oom && interval > 1)
    notes += fmt::format("each sample is Megatron-LM's mean over a log interval of {} iterations; ",
                         interval);
  if (dropped_batch > 0)
    notes += fmt::format("{} iteration line(s) of another global batch size (a ramp-up) left out; ",
                         dropped_batch);

  // Peak memory per pipeline stage: ranks are ordered tensor rank fastest, then data-parallel
  // rank, then pipeline rank (Megatron-LM's default order "tp-cp-ep-dp-pp"; with
  // --use-tp-pp-dp-mapping pipeline before data-parallel), and data-parallel rank 0 reports.
  const bool tp_pp_dp = a.flag("use_tp_pp_dp_mapping");
  std::vector<double> per_stage(s.pp, -1);
  for (const auto& mem : log.memory) {
    const int64_t stage = tp_pp_dp ? (mem.rank / s.tp) % s.pp : mem.rank / (s.tp * s.dp);
    if (stage < 0 || stage >= s.pp) continue;
    const double mb =
        options.memory_kind == "reserved" ? mem.max_reserved_mb : mem.max_allocated_mb;
    per_stage[stage] = std::max(per_stage[stage], mb * 1024.0 * 1024.0);
  }
  const bool all = std::all_of(per_stage.begin(), per_stage.end(), [](double b) { return b >= 0; });
  const double peak = *std::max_element(per_stage.begin(), per_stage.end());
  if (all) {
    m.peak_memory_bytes = per_stage;
  } else if (peak >= 0) {
    m.peak_memory_bytes = {peak};
    notes += "memory reported by some pipeline stages only: the largest is kept; ";
  }
  m.peak_memory_kind = options.memory_kind;
  m.strategy = to_json(s);
  m.notes = finished_notes(notes);
  return m;
}

MeasurementsFile import_megatron_logs(const std::vector<std::filesystem::path>& paths,
                                      const LogImportOptions& options) {
  return measurements_from_logs(
      paths, "megatron-lm", options,
      [&](const std::string& text, const std::string& origin, MeasurementsFile&) {
        return megatron_measurement(parse_megatron_log(text, origin), origin, options);
      });
}

}  // namespace hetplan
