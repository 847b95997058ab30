#include "costmodel/framework.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodel/errors.h"
#include "costmodel/layer_ops.h"
#include "costmodel/preset_table.h"

namespace hetplan {

std::string_view to_string(HostMode mode) {
  switch (mode) {
    case HostMode::kEager:
      return "eager";
    case HostMode::kCompiled:
      return "compiled";
    case HostMode::kCudaGraphs:
      return "cuda-graphs";
  }
  return "?";
}

bool parse_host_mode(std::string_view text, HostMode& out) {
  for (HostMode m : kAllHostModes)
    if (text == to_string(m)) {
      out = m;
      return true;
    }
  return false;
}

std::vector<std::string_view> host_mode_names(const std::vector<HostMode>& modes) {
  std::vector<std::string_view> names;
  for (HostMode m : modes) names.push_back(to_string(m));
  return names;
}

std::string_view to_string(PeakKind kind) {
  switch (kind) {
    case PeakKind::kAllocated:
      return "allocated";
    case PeakKind::kReserved:
      return "reserved";
    case PeakKind::kDevice:
      return "device";
  }
  return "?";
}

std::string_view to_string(ParamPrecision precision) {
  return precision == ParamPrecision::kAutocast ? "autocast" : "half";
}

const std::vector<OpFamilyInfo>& op_families() {
  static const std::vector<OpFamilyInfo> kFamilies = {
      {"rmsnorm", "a token's hidden value (tokens x hidden on the rank)"},
      {"rotary", "a rotated query or key value (tokens x (heads + KV heads) x head size)"},
      {"swiglu", "an output of the gate (tokens x MLP width on the rank)"},
      {"softmax", "an attention score of unfused attention (heads x sequence^2 per sample)"},
      {"softmax_fp32",
       "an attention score of unfused attention in a fp32 or tf32 model, where the framework's "
       "fused scale-mask-softmax takes half precision only (heads x sequence^2 per sample)"},
      {"bias_dropout_add", "a token's hidden value of the residual branch, where it has dropout"},
      {"cross_entropy", "a logit (tokens x vocabulary on the rank)"},
  };
  return kFamilies;
}

const OpRecipe* FrameworkSpec::recipe(std::string_view family, HostMode mode) const {
  const auto& table = mode == HostMode::kCompiled ? compiled_ops : ops;
  const auto it = table.find(std::string(family));
  return it == table.end() ? nullptr : &it->second;
}

HostMode FrameworkSpec::mode_for(std::string_view part, HostMode mode) const {
  const std::vector<std::string>* parts = mode == HostMode::kCompiled     ? &compiled_parts
                                          : mode == HostMode::kCudaGraphs ? &graphed_parts
                                                                          : nullptr;
  if (!parts || parts->empty()) return mode;
  const bool covered = std::find(parts->begin(), parts->end(), part) != parts->end();
  return covered ? mode : HostMode::kEager;
}

std::string FrameworkSpec::cuda_graphs_refusal(int64_t pp, int64_t ep) const {
  if (pp > 1 && !can_run.cuda_graphs_pipeline)
    return fmt::format("{} captures no pipeline in CUDA graphs", name);
  if (ep > 1 && !can_run.cuda_graphs_expert_parallel)
    return fmt::format(
        "{}'s expert-parallel dispatch reads token counts back to the host, which a CUDA graph "
        "cannot capture",
        name);
  return "";
}

bool FrameworkSpec::can_run_schedule(std::string_view schedule) const {
  return std::find(can_run.schedules.begin(), can_run.schedules.end(), schedule) !=
         can_run.schedules.end();
}

namespace {

const std::initializer_list<std::string_view> kRecompute = {"none", "selective", "full", "op"};
const std::initializer_list<std::string_view> kAttention = {"fused", "unfused"};
const std::initializer_list<std::string_view> kHostModes = {"eager", "compiled", "cuda-graphs"};
const std::initializer_list<std::string_view> kStates = {"weights", "gradients", "master",
                                                         "optimizer"};
const std::initializer_list<std::string_view> kExports = {"megatron", "deepspeed", "torchtitan",
                                                          "torchtitan-toml", "none"};

// A list of strings, each one of `allowed`, at least one.
std::vector<std::string> choices(ObjectReader& r, std::string_view key,
                                 std::span<const std::string_view> allowed) {
  std::vector<std::string> out = r.strings(key);
  if (out.empty())
    r.fail(key, fmt::format("expected a list of one or more of {}", fmt::join(allowed, ", ")));
  for (const auto& v : out)
    if (std::find(allowed.begin(), allowed.end(), v) == allowed.end())
      r.fail(key, fmt::format("expected values of {}, found \"{}\"", fmt::join(allowed, ", "), v));
  return out;
}
std::vector<std::string> choices(ObjectReader& r, std::string_view key,
                                 std::initializer_list<std::string_view> allowed) {
  return choices(r, key, std::span<const std::string_view>(allowed.begin(), allowed.size()));
}

// A list of host modes, each one hetplan knows, at least one.
std::vector<HostMode> host_modes_of(ObjectReader& r, std::string_view key) {
  std::vector<HostMode> out;
  for (const auto& name : choices(r, key, kHostModes)) {
    HostMode mode;
    parse_host_mode(name, mode);
    out.push_back(mode);
  }
  return out;
}

std::vector<bool> booleans(ObjectReader& r, std::string_view key) {
  const Json& raw = r.raw(key);
  std::vector<bool> out;
  if (raw.is_array())
    for (const auto& v : raw)
      if (v.is_boolean()) out.push_back(v.get<bool>());
  if (!raw.is_array() || out.size() != raw.size() || out.empty())
    r.fail(key, "expected a list of the values it runs: [true], [false] or [false, true]");
  return out;
}

std::vector<int> zero_stages(ObjectReader& r, std::string_view key) {
  std::vector<int> out;
  for (int64_t z : r.integers(key)) {
    if (z < 0 || z > 3) r.fail(key, fmt::format("expected ZeRO stages 0-3, found {}", z));
    out.push_back(static_cast<int>(z));
  }
  return out;
}

void read_recompute_modules(ObjectReader& r, Capabilities& c) {
  const bool selective =
      std::find(c.recompute.begin(), c.recompute.end(), "selective") != c.recompute.end();
  if (!r.has("recompute_modules")) {
    if (selective) c.recompute_modules = {"core_attn"};
    return;
  }
  c.recompute_modules = r.strings("recompute_modules");
  for (const auto& name : c.recompute_modules) {
    RecomputeModule m;
    if (!parse_recompute_module(name, m))
      r.fail("recompute_modules",
             fmt::format("expected values of {}, found \"{}\"", recompute_module_names(), name));
  }
  if (!selective && !c.recompute_modules.empty())
    r.fail("recompute_modules",
           "modules are what selective recomputation re-runs: recompute lists no selective");
}

template <class T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

Capabilities read_capabilities(ObjectReader r) {
  Capabilities c;
  // Checked against the pipeline schedules hetplan simulates where a framework is used
  // (search/framework_rules.h): costmodel does not know them.
  c.schedules = r.strings("schedules");
  if (c.schedules.empty()) r.fail("schedules", "expected the pipeline schedules it runs");
  if (r.has("pipeline_runtime"))
    c.pipeline_runtime = r.choice("pipeline_runtime", {"megatron", "pytorch"});
  c.recompute = choices(r, "recompute", kRecompute);
  read_recompute_modules(r, c);
  c.zero = zero_stages(r, "zero");
  c.zero_with_pipeline = zero_stages(r, "zero_with_pipeline");
  c.tensor_parallel = r.boolean("tensor_parallel");
  c.sequence_parallel = r.boolean("sequence_parallel");
  c.tp_comm_overlap = r.boolean("tp_comm_overlap");
  c.p2p_overlap = r.boolean("p2p_overlap");
  c.overlap_grad_reduce = booleans(r, "overlap_grad_reduce");
  c.grad_accumulation_fusion = booleans(r, "grad_accumulation_fusion");
  c.attention = choices(r, "attention", kAttention);
  c.host_modes = host_modes_of(r, "host_modes");
  if (r.has("tp_comm_overlap_modes")) {
    if (!c.tp_comm_overlap)
      r.fail("tp_comm_overlap_modes", "expected no modes: tp_comm_overlap is false");
    c.tp_comm_overlap_modes = host_modes_of(r, "tp_comm_overlap_modes");
    for (HostMode mode : c.tp_comm_overlap_modes)
      if (!contains(c.host_modes, mode))
        r.fail("tp_comm_overlap_modes", "expected modes listed in host_modes");
  }
  if (auto g = r.optional_object("cuda_graphs")) {
    if (!contains(c.host_modes, HostMode::kCudaGraphs))
      r.fail("cuda_graphs", "expected host_modes to list cuda-graphs, whose limits these are");
    c.cuda_graphs_pipeline = g->boolean("pipeline");
    c.cuda_graphs_expert_parallel = g->boolean("expert_parallel");
    g->finish();
  }
  // Newer keys: a file without them runs none of it (bf16 only).
  if (r.has("context_parallel"))
    c.context_parallel = choices(r, "context_parallel", {"p2p", "all_gather", "a2a", "a2a+p2p"});
  c.expert_parallel = r.boolean_or("expert_parallel", false);
  c.expert_tensor_parallel = r.boolean_or("expert_tensor_parallel", false);
  c.ep_comm_overlap = r.boolean_or("ep_comm_overlap", false);
  c.recompute_block = r.boolean_or("recompute_block", false);
  c.lora = r.boolean_or("lora", false);
  if (r.has("moe_dispatchers"))
    c.moe_dispatchers = choices(r, "moe_dispatchers", {"allgather", "alltoall", "flex"});
  if (r.has("fused_attention_dtypes"))
    c.fused_attention_dtypes = choices(r, "fused_attention_dtypes", {"fp16", "bf16", "fp32"});
  if (r.has("precisions"))
    c.precisions = choices(
        r, "precisions", {"bf16", "fp8-delayed", "fp8-current", "fp8-blockwise", "mxfp8", "nvfp4"});
  r.finish();
  return c;
}

HostMode host_mode(ObjectReader& r, std::string_view key) {
  HostMode mode;
  parse_host_mode(r.choice(key, kHostModes), mode);
  return mode;
}

// The defaults must be values the framework can run.
FrameworkDefaults read_defaults(ObjectReader r, const Capabilities& c) {
  FrameworkDefaults d;
  d.flash_attention = r.boolean("flash_attention");
  if (!contains(c.attention, std::string(d.flash_attention ? "fused" : "unfused")))
    r.fail("flash_attention", "expected an attention kernel listed in can_run.attention");
  d.grad_accumulation_fusion = r.boolean("grad_accumulation_fusion");
  if (!contains(c.grad_accumulation_fusion, d.grad_accumulation_fusion))
    r.fail("grad_accumulation_fusion",
           "expected a value listed in can_run.grad_accumulation_fusion");
  d.overlap_grad_reduce = r.boolean("overlap_grad_reduce");
  if (!contains(c.overlap_grad_reduce, d.overlap_grad_reduce))
    r.fail("overlap_grad_reduce", "expected a value listed in can_run.overlap_grad_reduce");
  d.tp_comm_overlap = r.boolean("tp_comm_overlap");
  if (d.tp_comm_overlap && !c.tp_comm_overlap)
    r.fail("tp_comm_overlap", "expected false: can_run.tp_comm_overlap is false");
  d.fp32_grad_reduce = r.boolean("fp32_grad_reduce");
  d.low_precision_params = r.boolean_or("low_precision_params", false);
  d.ep_comm_overlap = r.boolean_or("ep_comm_overlap", false);
  if (d.ep_comm_overlap && !c.ep_comm_overlap)
    r.fail("ep_comm_overlap", "expected false: can_run.ep_comm_overlap is false");
  d.host_mode = host_mode(r, "host_mode");
  if (!contains(c.host_modes, d.host_mode))
    r.fail("host_mode", "expected a mode listed in can_run.host_modes");
  const bool limited = !c.cuda_graphs_pipeline || !c.cuda_graphs_expert_parallel;
  if (d.host_mode == HostMode::kCudaGraphs && limited && !contains(c.host_modes, HostMode::kEager))
    r.fail("host_mode",
           "expected can_run.host_modes to list eager too: a cuda-graphs default gives way to "
           "eager where can_run.cuda_graphs refuses a strategy");
  r.finish();
  return d;
}

OpValues read_values(ObjectReader& r) {
  OpValues v;
  v.act_values = r.non_negative_or("act_values", 0);
  v.fp32_values = r.non_negative_or("fp32_values", 0);
  v.bytes = r.non_negative_or("bytes", 0);
  return v;
}

bool moves_nothing(const OpValues& v) {
  return v.act_values == 0 && v.fp32_values == 0 && v.bytes == 0;
}

OpPass read_op_pass(ObjectReader r) {
  OpPass p;
  const int64_t launches = r.integer("launches");
  static_cast<OpValues&>(p) = read_values(r);
  if (launches < 0 || (launches == 0 && !moves_nothing(p)))
    r.fail("launches", "expected kernels > 0, or 0 with no values (a pass run inside another)");
  p.launches = launches;
  if (launches > 0 && moves_nothing(p))
    r.fail("act_values", "expected what it moves per element (act_values, fp32_values, bytes)");
  r.finish();
  return p;
}

OpValues read_kept(ObjectReader r) {
  const OpValues v = read_values(r);
  if (moves_nothing(v))
    r.fail("act_values", "expected the values per element (act_values, fp32_values, bytes)");
  r.finish();
  return v;
}

std::map<std::string, OpRecipe> read_ops(ObjectReader r) {
  std::map<std::string, OpRecipe> ops;
  for (const auto& family : r.keys()) {
    const auto& known = op_families();
    if (std::none_of(known.begin(), known.end(), [&](const auto& f) { return f.name == family; })) {
      std::vector<std::string_view> names;
      for (const auto& f : known) names.push_back(f.name);
      r.fail(family, fmt::format("expected an op family: {}", fmt::join(names, ", ")));
    }
    ObjectReader o = r.object(family);
    OpRecipe recipe;
    if (auto f = o.optional_object("forward")) recipe.forward = read_op_pass(*f);
    if (auto b = o.optional_object("backward")) recipe.backward = read_op_pass(*b);
    if (auto w = o.optional_object("weight")) recipe.weight = read_op_pass(*w);
    if (auto k = o.optional_object("kept")) recipe.kept = read_kept(*k);
    if (auto t = o.optional_object("transient")) recipe.transient = read_kept(*t);
    o.finish();
    ops[family] = recipe;
  }
  r.finish();
  return ops;
}

std::map<HostMode, double> read_host(ObjectReader r, const Capabilities& c) {
  std::map<HostMode, double> out;
  for (const auto& key : r.keys()) {
    HostMode mode;
    if (!parse_host_mode(key, mode))
      r.fail(key, fmt::format("expected a host mode: {}", fmt::join(kHostModes, ", ")));
    if (!contains(c.host_modes, mode)) r.fail(key, "expected a mode listed in can_run.host_modes");
    out[mode] = r.number_in(key, 0, 1e-2);
  }
  r.finish();
  return out;
}

StateBytes read_state_bytes(ObjectReader r) {
  StateBytes b;
  b.weights = r.number_in("weights", 0, 16);
  b.gradients = r.number_in("gradients", 0, 16);
  b.master = r.number_in("master", 0, 16);
  b.optimizer = r.number_in("optimizer", 0, 32);
  r.finish();
  return b;
}

ShardedStates read_sharded(ObjectReader& r, std::string_view key) {
  ShardedStates s;
  for (const auto& state : choices(r, key, kStates)) {
    if (state == "weights") s.weights = true;
    if (state == "gradients") s.gradients = true;
    if (state == "master") s.master = true;
    if (state == "optimizer") s.optimizer = true;
  }
  return s;
}

MemoryLayout read_memory(ObjectReader r) {
  MemoryLayout m;
  const std::string peak = r.choice("reported_peak", {"allocated", "reserved", "device"});
  m.reported_peak = peak == "allocated"  ? PeakKind::kAllocated
                    : peak == "reserved" ? PeakKind::kReserved
                                         : PeakKind::kDevice;
  ObjectReader states = r.object("states");
  for (const auto& key : states.keys()) {
    Dtype d;
    if (!parse_dtype(key, d) || d == Dtype::kFp8 || d == Dtype::kTf32)
      states.fail(key, "expected a training dtype: bf16, fp16 or fp32");
    m.states[d] = read_state_bytes(states.object(key));
  }
  states.finish();
  if (m.states.empty()) r.fail("states", "expected the bytes per parameter of bf16, fp16 or fp32");
  ObjectReader sharding = r.object("sharding");
  for (const auto& key : sharding.keys()) {
    if (key != "1" && key != "2" && key != "3")
      sharding.fail(key, "expected a ZeRO stage: 1, 2 or 3");
    m.sharding[key[0] - '0'] = read_sharded(sharding, key);
  }
  sharding.finish();
  m.cast_copy_bytes = r.number_in("cast_copy_bytes", 0, 16);
  m.gathered_with_pipeline = r.boolean_or("gathered_with_pipeline", false);
  m.gradients_in_reduce_dtype = r.boolean_or("gradients_in_reduce_dtype", false);
  m.dp_bucket_bytes = r.number_in_or("dp_bucket_bytes", 0, 16, 0);
  if (r.has("gradients_freed_after_step"))
    m.gradients_freed_after_step = host_modes_of(r, "gradients_freed_after_step");
  m.fragmentation = r.number_in("fragmentation", 0, 1);
  m.context_bytes = r.number_in("context_bytes", 0, 64.0 * (1ull << 30));
  m.communicator_bytes = r.number_in("communicator_bytes", 0, 16.0 * (1ull << 30));
  r.finish();
  return m;
}

// expert_gemms: {kernels: grouped} or {kernels: per_expert, streams: N}.
ExpertGemms read_expert_gemms(ObjectReader r) {
  ExpertGemms e;
  if (r.choice("kernels", {"grouped", "per_expert"}) == "per_expert") {
    e.kernels = ExpertGemmKernels::kPerExpert;
    e.streams = r.integer_in("streams", 1, 64);
  }
  r.finish();
  return e;
}

// The entries of op_recompute.saves and the flag each sets.
constexpr std::pair<std::string_view, bool OpRecompute::*> kSavedOps[] = {
    {"matmul", &OpRecompute::matmuls},
    {"quantized_matmul", &OpRecompute::quantized_matmuls},
    {"grouped_matmul", &OpRecompute::grouped_matmuls},
    {"attention", &OpRecompute::attention},
    {"reduce_scatter", &OpRecompute::reduce_scatter},
    {"all_to_all", &OpRecompute::all_to_all},
    {"all_gather", &OpRecompute::all_gather}};

// op_recompute: {saves: [matmul, attention, ...], every_second_matmul: B, recomputed_linears:
// [..]}.
OpRecompute read_op_recompute(ObjectReader r) {
  OpRecompute o;
  std::vector<std::string_view> names;
  for (const auto& [name, flag] : kSavedOps) names.push_back(name);
  for (const auto& op : choices(r, "saves", names))
    for (const auto& [name, flag] : kSavedOps)
      if (op == name) o.*flag = true;
  o.every_second_matmul = r.boolean_or("every_second_matmul", false);
  o.quantized_linears_as_matmuls =
      r.choice_or("quantized_linears", {"matmul", "scaled_mm"}, "scaled_mm") == "matmul";
  if (o.every_second_matmul && !o.matmuls)
    r.fail("every_second_matmul", "re-runs every second saved matmul: saves lists no matmul");
  if (r.has("recomputed_linears")) o.recomputed_linears = r.strings("recomputed_linears");
  r.finish();
  return o;
}

// speed_vs_flash2: {forward: {HEAD_DIM: SPEED, ...}, backward: {...}}.
std::map<int64_t, double> read_speeds(ObjectReader r) {
  std::map<int64_t, double> out;
  for (const auto& key : r.keys()) {
    int64_t head_dim = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), head_dim);
    if (ec != std::errc() || end != key.data() + key.size() || head_dim <= 0)
      r.fail(key, "expected a head size (a whole number > 0) as the key");
    out[head_dim] = r.number_in(key, 0.05, 20);
  }
  if (out.empty()) r.fail("", "expected the speed at one head size at least");
  return out;
}

std::vector<AttentionKernel> read_attention_kernels(ObjectReader& parent) {
  std::vector<AttentionKernel> out;
  for (auto& r : parent.objects("attention_kernels")) {
    AttentionKernel k;
    k.min_compute_capability = r.number_in_or("min_compute_capability", 0, 20, 0);
    k.max_compute_capability = r.number_in_or("max_compute_capability", 0, 20, 0);
    k.kernel = r.string("kernel");
    ObjectReader speeds = r.object("speed_vs_flash2");
    k.forward_speed = read_speeds(speeds.object("forward"));
    k.backward_speed = read_speeds(speeds.object("backward"));
    speeds.finish();
    r.finish();
    out.push_back(std::move(k));
  }
  return out;
}

// Every value the file sets needs a source: an entry under `sources` for its key path or for one
// of the sections above it ("memory" covers "memory.states.bf16.weights").
void check_sources(const Json& root, const std::map<std::string, std::string>& sources,
                   const std::string& origin) {
  const auto covered = [&](const std::string& path) {
    for (std::string p = path;; p = p.substr(0, p.rfind('.'))) {
      if (sources.count(p)) return true;
      if (p.find('.') == std::string::npos) return false;
    }
  };
  // Depth first, in key order, so that the first value without a source is the one named.
  std::function<void(const std::string&, const Json&)> check = [&](const std::string& path,
                                                                   const Json& value) {
    if (value.is_object() && !value.empty()) {
      for (const auto& [k, v] : value.items()) check(path + "." + k, v);
      return;
    }
    if (!covered(path))
      throw InputError(origin, "sources",
                       fmt::format("a source (the framework's file and commit, or the "
                                   "measurement) for {} or a section above it",
                                   path));
  };
  for (const char* section : {"can_run", "defaults", "precision", "ops", "compiled_ops",
                              "compiled_parts", "graphed_parts", "host_s_per_kernel",
                              "expert_gemms", "op_recompute", "attention_kernels", "memory"})
    if (root.contains(section)) check(section, root.at(section));
  for (const auto& [key, text] : sources)
    if (text.empty()) throw InputError(origin, "sources." + key, "a non-empty source");
}

}  // namespace

std::vector<std::string> saved_op_names(const OpRecompute& o) {
  std::vector<std::string> out;
  for (const auto& [name, flag] : kSavedOps)
    if (o.*flag) out.emplace_back(name);
  return out;
}

FrameworkSpec parse_framework(const Document& doc, const std::string& name) {
  ObjectReader r(doc);
  FrameworkSpec f;
  f.name = name;
  f.origin = doc.origin;
  f.description = r.string("description");
  f.version = r.string("version");
  const std::string format = r.choice("export", kExports);
  f.export_toml = format == "torchtitan-toml";
  f.export_format = format == "none" ? "" : f.export_toml ? "torchtitan" : format;
  f.can_run = read_capabilities(r.object("can_run"));
  f.defaults = read_defaults(r.object("defaults"), f.can_run);
  f.param_precision = r.choice_or("precision", {"half", "autocast"}, "half") == "autocast"
                          ? ParamPrecision::kAutocast
                          : ParamPrecision::kHalf;
  f.harness = r.choice_or("harness", {"reference", "pytorch", "none"}, "none");
  if (f.harness == "none") f.harness.clear();
  if (auto ops = r.optional_object("ops")) f.ops = read_ops(*ops);
  if (auto ops = r.optional_object("compiled_ops")) f.compiled_ops = read_ops(*ops);
  if (r.has("compiled_parts"))
    f.compiled_parts = choices(r, "compiled_parts", {"blocks", "embedding", "head", "loss"});
  if (r.has("graphed_parts")) {
    f.graphed_parts =
        choices(r, "graphed_parts", {"blocks", "embedding", "head", "loss", "optimizer"});
    if (!contains(f.can_run.host_modes, HostMode::kCudaGraphs))
      throw InputError(doc.origin, "graphed_parts",
                       "can_run.host_modes to list cuda-graphs, whose capture this describes");
  }
  f.host_s_per_kernel = read_host(r.object("host_s_per_kernel"), f.can_run);
  if (auto e = r.optional_object("expert_gemms")) f.expert_gemms = read_expert_gemms(*e);
  if (auto o = r.optional_object("op_recompute")) f.op_recompute = read_op_recompute(*o);
  const auto& modes = f.can_run.recompute;
  if (f.op_recompute.has_value() != (std::find(modes.begin(), modes.end(), "op") != modes.end()))
    throw InputError(doc.origin, "op_recompute",
                     f.op_recompute ? "can_run.recompute to list op, which this section describes"
                                    : "what per-op recomputation saves, since can_run.recompute "
                                      "lists op");
  if (r.has("attention_kernels")) f.attention_kernels = read_attention_kernels(r);
  f.memory = read_memory(r.object("memory"));
  ObjectReader sources = r.object("sources");
  for (const auto& key : sources.keys()) f.sources[key] = sources.string(key);
  sources.finish();
  r.finish();
  check_sources(doc.root, f.sources, doc.origin);
  return f;
}

double AttentionKernel::speed(bool forward, int64_t head_dim) const {
  const std::map<int64_t, double>& points = forward ? forward_speed : backward_speed;
  if (points.empty()) return 1;
  auto hi = points.lower_bound(head_dim);
  if (hi == points.end()) return std::prev(hi)->second;
  if (hi->first == head_dim || hi == points.begin()) return hi->second;
  auto lo = std::prev(hi);
  const double t = std::log(static_cast<double>(head_dim) / static_cast<double>(lo->first)) /
                   std::log(static_cast<double>(hi->first) / static_cast<double>(lo->first));
  return lo->second + t * (hi->second - lo->second);
}

const AttentionKernel* FrameworkSpec::attention_kernel(double cc) const {
  for (const auto& k : attention_kernels)
    if (cc >= k.min_compute_capability &&
        (k.max_compute_capability == 0 || cc <= k.max_compute_capability))
      return &k;
  return nullptr;
}

namespace {

// `over`'s keys replace `base`'s, objects merged key by key (a list or a value replaces whole; a
// null removes the key: what the base has and the release has not).
void merge_over(Json& base, const Json& over) {
  for (const auto& [key, value] : over.items()) {
    if (value.is_null())
      base.erase(key);
    else if (value.is_object() && base.contains(key) && base[key].is_object())
      merge_over(base[key], value);
    else
      base[key] = value;
  }
}

// A framework file may start from a preset (`base: NAME`) and set only what differs: its keys
// replace the preset's, section by section (a release of the same framework, a fork).
Document with_base(Document doc) {
  if (!doc.root.is_object() || !doc.root.contains("base")) return doc;
  const Json& name = doc.root.at("base");
  const EmbeddedPreset* p =
      name.is_string() ? find_preset("frameworks", name.get<std::string>()) : nullptr;
  if (!p)
    throw InputError(doc.origin, "base",
                     fmt::format("the name of a framework preset to start from: one of {}",
                                 framework_preset_names()));
  Document base = parse_document(p->text, std::string(p->path), DocumentFormat::kYaml);
  if (base.root.contains("base"))
    throw InputError(std::string(p->path), "base", "a preset that starts from no other");
  doc.root.erase("base");
  merge_over(base.root, doc.root);
  return {doc.origin, std::move(base.root)};
}

}  // namespace

FrameworkSpec load_framework(const std::string& name_or_path) {
  if (const EmbeddedPreset* p = find_preset("frameworks", name_or_path)) {
    const Document doc = parse_document(p->text, std::string(p->path), DocumentFormat::kYaml);
    FrameworkSpec f = parse_framework(with_base(doc), name_or_path);
    f.origin = std::string(p->path);
    return f;
  }
  if (looks_like_file_path(name_or_path)) {
    const Document doc = load_document(name_or_path);
    return parse_framework(with_base(doc), std::filesystem::path(name_or_path).stem().string());
  }
  throw InputError(fmt::format("unknown framework \"{}\": expected one of {} or a framework file",
                               name_or_path, framework_preset_names()));
}

std::vector<std::pair<std::string, std::string>> framework_presets() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& p : embedded_presets())
    if (p.kind == "frameworks")
      out.emplace_back(std::string(p.name), load_framework(std::string(p.name)).description);
  std::sort(out.begin(), out.end());
  return out;
}

std::string framework_preset_names() {
  std::vector<std::string_view> names;
  for (const auto& p : embedded_presets())
    if (p.kind == "frameworks") names.push_back(p.name);
  std::sort(names.begin(), names.end());
  return fmt::format("{}", fmt::join(names, ", "));
}

const FrameworkSpec& loaded_framework(const std::string& name_or_path) {
  static std::mutex guard;
  static std::map<std::string, FrameworkSpec> loaded;
  const std::lock_guard<std::mutex> lock(guard);
  auto it = loaded.find(name_or_path);
  if (it == loaded.end()) it = loaded.emplace(name_or_path, load_framework(name_or_path)).first;
  return it->second;
}

bool Capabilities::fused_attention_takes(Dtype model_dtype) const {
  // fp8 recipes run their attention in bf16; tf32 is fp32 storage.
  const Dtype d = model_dtype == Dtype::kFp8    ? Dtype::kBf16
                  : model_dtype == Dtype::kTf32 ? Dtype::kFp32
                                                : model_dtype;
  return std::find(fused_attention_dtypes.begin(), fused_attention_dtypes.end(),
                   std::string(to_string(d))) != fused_attention_dtypes.end();
}

}  // namespace hetplan
