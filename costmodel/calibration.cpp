#include "costmodel/calibration.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <tuple>

#include <fmt/format.h>

#include "costmodel/calibration_gpu_type.h"
#include "costmodel/errors.h"
#include "costmodel/hardware.h"
#include "costmodel/whole_number.h"

namespace hetplan {
namespace {

Dtype read_dtype(ObjectReader& r, std::string_view key) {
  const std::string text = r.string(key);
  Dtype d;
  if (!parse_dtype(text, d))
    r.fail(key,
           fmt::format("expected one of fp32, tf32, fp16, bf16, fp8, fp4; found \"{}\"", text));
  return d;
}

Json json_or_null(const Json& j) { return j.is_null() ? Json::object() : j; }

// Free-form diagnostic objects (method, trace): written when present, read back as they are.
void put_optional(Json& j, const char* key, const Json& value) {
  if (!value.is_null()) j[key] = value;
}

void read_optional(ObjectReader& r, std::string_view key, Json& out) {
  if (!r.has(key)) return;
  out = r.raw(key);
  if (!out.is_object()) r.fail(key, "expected an object");
}

}  // namespace

int64_t global_rank(ObjectReader& r, std::string_view key) {
  const int64_t rank = r.integer(key);
  if (rank < 0 || rank >= kMaxClusterGpus)
    r.fail(key, fmt::format("expected a global rank in [0, {}), found {}", kMaxClusterGpus, rank));
  return rank;
}

double message_bytes(ObjectReader& r) { return static_cast<double>(r.positive_integer("bytes")); }

bool GemmShape::operator<(const GemmShape& o) const {
  return std::tie(m, n, k, batch, trans_a, trans_b) <
         std::tie(o.m, o.n, o.k, o.batch, o.trans_a, o.trans_b);
}

std::string_view to_string(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kSendRecv:
      return "send_recv";
  }
  return "?";
}

bool parse_collective(std::string_view text, CollectiveKind& out) {
  for (CollectiveKind k :
       {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
        CollectiveKind::kAllToAll, CollectiveKind::kBroadcast, CollectiveKind::kSendRecv}) {
    if (text == to_string(k)) {
      out = k;
      return true;
    }
  }
  return false;
}

double bus_bandwidth_factor(CollectiveKind kind, int64_t n) {
  // nccl-tests, doc/PERFORMANCE.md: all-reduce 2(n-1)/n; all-gather, reduce-scatter and
  // all-to-all (n-1)/n; broadcast, reduce and send/recv 1.
  if (n <= 1)
    return kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kSendRecv ? 1 : 0;
  const double nd = static_cast<double>(n);
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return 2.0 * (nd - 1) / nd;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:
      return (nd - 1) / nd;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kSendRecv:
      return 1.0;
  }
  return 1.0;
}

Json to_json(const Provenance& p) {
  Json j;
  j["source"] = p.source;
  auto put = [&](const char* key, const std::string& v) {
    if (!v.empty()) j[key] = v;
  };
  auto put_int = [&](const char* key, int64_t v) {
    if (v != 0) j[key] = v;
  };
  put("gpu_type", p.gpu_type);
  put("gpu_name", p.gpu_name);
  put("node_type", p.node_type);
  put_int("gpu_count", p.gpu_count);
  put_int("sm_count", p.sm_count);
  put_int("sm_clock_mhz", p.sm_clock_mhz);
  put_int("memory_clock_mhz", p.memory_clock_mhz);
  put_int("memory_bytes", p.memory_bytes);
  put_int("l2_bytes", p.l2_bytes);
  put("driver", p.driver);
  put("cuda_runtime", p.cuda_runtime);
  put("cublas", p.cublas);
  put("nccl", p.nccl);
  put("cupti", p.cupti);
  put("host", p.host);
  put("date", p.date);
  put("command", p.command);
  put("hetplan_version", p.hetplan_version);
  put("notes", p.notes);
  if (!p.citations.empty()) j["citations"] = p.citations;
  return j;
}

Provenance provenance_from_json(ObjectReader r) {
  Provenance p;
  p.source = r.string("source");
  if (p.source != "measured" && p.source != "datasheet" && p.source.rfind("imported:", 0) != 0)
    r.fail("source", fmt::format("expected \"measured\", \"datasheet\" or \"imported:<tool>\", "
                                 "found \"{}\"",
                                 p.source));
  p.gpu_type = r.string_or("gpu_type", "");
  p.gpu_name = r.string_or("gpu_name", "");
  p.node_type = r.string_or("node_type", "");
  p.gpu_count = r.integer_or("gpu_count", 0);
  p.sm_count = r.integer_or("sm_count", 0);
  p.sm_clock_mhz = r.integer_or("sm_clock_mhz", 0);
  p.memory_clock_mhz = r.integer_or("memory_clock_mhz", 0);
  p.memory_bytes = r.integer_or("memory_bytes", 0);
  p.l2_bytes = r.integer_or("l2_bytes", 0);
  p.driver = r.string_or("driver", "");
  p.cuda_runtime = r.string_or("cuda_runtime", "");
  p.cublas = r.string_or("cublas", "");
  p.nccl = r.string_or("nccl", "");
  p.cupti = r.string_or("cupti", "");
  p.host = r.string_or("host", "");
  p.date = r.string_or("date", "");
  p.command = r.string_or("command", "");
  p.hetplan_version = r.string_or("hetplan_version", "");
  p.notes = r.string_or("notes", "");
  if (auto c = r.optional_object("citations")) {
    for (const auto& key : c->keys()) p.citations[key] = c->string(key);
  }
  r.finish();
  return p;
}

Json to_json(const GemmShape& s) {
  return {{"m", s.m},
          {"n", s.n},
          {"k", s.k},
          {"batch", s.batch},
          {"trans_a", s.trans_a},
          {"trans_b", s.trans_b}};
}

GemmShape gemm_shape_from_json(ObjectReader& r) {
  // cuBLAS takes each size as an int.
  constexpr int64_t kMax = 2147483647;
  auto size = [&](std::string_view key, int64_t v) {
    if (v > kMax)
      r.fail(key, fmt::format("expected at most {} (cuBLAS's int sizes), found {}", kMax, v));
    return v;
  };
  GemmShape s;
  s.m = size("m", r.positive_integer("m"));
  s.n = size("n", r.positive_integer("n"));
  s.k = size("k", r.positive_integer("k"));
  s.batch = size("batch", r.positive_integer_or("batch", 1));
  s.trans_a = r.boolean_or("trans_a", false);
  s.trans_b = r.boolean_or("trans_b", false);
  return s;
}

Json to_json(const GemmMeasurement& m) {
  Json j = to_json(m.shape);
  j["dtype"] = to_string(m.dtype);
  j["origin"] = m.origin;
  j["time"] = to_json(m.time_s);
  j["tflops"] = m.shape.flops() / m.time_s.median / 1e12;
  if (!m.kernels.empty()) j["kernels"] = m.kernels;
  j["tensor_cores"] = m.tensor_cores;
  if (!m.algo.is_null()) j["algo"] = m.algo;
  put_optional(j, "method", m.method);
  put_optional(j, "trace", m.trace);
  return j;
}

GemmMeasurement gemm_from_json(ObjectReader r) {
  GemmMeasurement m;
  m.dtype = read_dtype(r, "dtype");
  m.shape = gemm_shape_from_json(r);
  m.origin = r.string_or("origin", "grid");
  m.time_s = distribution_from_json(r.object("time"));
  r.optional_number("tflops");  // derived; recomputed on write
  if (r.has("kernels")) m.kernels = r.strings("kernels");
  m.tensor_cores = r.boolean_or("tensor_cores", false);
  if (r.has("algo")) m.algo = r.raw("algo");
  read_optional(r, "method", m.method);
  read_optional(r, "trace", m.trace);
  r.finish();
  return m;
}

Json to_json(const KernelMeasurement& m) {
  Json j;
  j["kernel"] = m.kernel;
  j["dtype"] = to_string(m.dtype);
  j["params"] = json_or_null(m.params);
  j["bytes"] = whole_number_json(m.bytes);
  j["flops"] = m.flops;
  j["time"] = to_json(m.time_s);
  j["GBps"] = m.bytes / m.time_s.median / 1e9;
  put_optional(j, "method", m.method);
  put_optional(j, "trace", m.trace);
  return j;
}

KernelMeasurement kernel_from_json(ObjectReader r) {
  KernelMeasurement m;
  m.kernel = r.string("kernel");
  m.dtype = read_dtype(r, "dtype");
  m.params = r.has("params") ? r.raw("params") : Json::object();
  m.bytes = r.non_negative_or("bytes", 0);
  m.flops = r.non_negative_or("flops", 0);
  m.time_s = distribution_from_json(r.object("time"));
  r.optional_number("GBps");
  read_optional(r, "method", m.method);
  read_optional(r, "trace", m.trace);
  r.finish();
  return m;
}

Json to_json(const LayerMeasurement& m) {
  Json j;
  j["style"] = m.style;
  j["dtype"] = to_string(m.dtype);
  j["micro_batch"] = m.micro_batch;
  j["seq_len"] = m.seq_len;
  j["hidden"] = m.hidden;
  j["heads"] = m.heads;
  j["kv_heads"] = m.kv_heads;
  j["ffn_hidden"] = m.ffn_hidden;
  j["tp"] = m.tp;
  j["forward"] = to_json(m.forward_s);
  j["backward_input"] = to_json(m.backward_input_s);
  j["backward_weight"] = to_json(m.backward_weight_s);
  j["activation_bytes"] = m.activation_bytes;
  put_optional(j, "method", m.method);
  put_optional(j, "trace", m.trace);
  return j;
}

LayerMeasurement layer_from_json(ObjectReader r) {
  LayerMeasurement m;
  m.style = r.choice("style", {"gpt", "llama"});
  m.dtype = read_dtype(r, "dtype");
  m.micro_batch = r.positive_integer("micro_batch");
  m.seq_len = r.positive_integer("seq_len");
  m.hidden = r.positive_integer("hidden");
  m.heads = r.positive_integer("heads");
  m.kv_heads = r.positive_integer_or("kv_heads", m.heads);
  m.ffn_hidden = r.positive_integer("ffn_hidden");
  m.tp = r.positive_integer_or("tp", 1);
  m.forward_s = distribution_from_json(r.object("forward"));
  m.backward_input_s = distribution_from_json(r.object("backward_input"));
  m.backward_weight_s = distribution_from_json(r.object("backward_weight"));
  m.activation_bytes = r.integer_or("activation_bytes", 0);
  read_optional(r, "method", m.method);
  read_optional(r, "trace", m.trace);
  r.finish();
  return m;
}

Json to_json(const CollectiveMeasurement& m) {
  Json j;
  j["op"] = to_string(m.op);
  j["dtype"] = to_string(m.dtype);
  j["bytes"] = whole_number_json(m.bytes);
  j["group_size"] = m.group_size;
  j["nodes"] = m.nodes;
  j["gpus_per_node"] = m.gpus_per_node;
  j["link"] = m.link;
  j["ok"] = m.ok;
  if (m.ok) {
    j["time"] = to_json(m.time_s);
    j["algbw_GBps"] = m.algbw_GBps;
    j["busbw_GBps"] = m.busbw_GBps;
  } else {
    j["error"] = m.error;
  }
  if (!m.gpus.empty()) j["gpus"] = m.gpus;
  return j;
}

CollectiveMeasurement collective_from_json(ObjectReader r) {
  CollectiveMeasurement m;
  const std::string op = r.string("op");
  if (!parse_collective(op, m.op))
    r.fail("op", fmt::format("expected all_reduce, all_gather, reduce_scatter, all_to_all, "
                             "broadcast or send_recv; found \"{}\"",
                             op));
  m.dtype = read_dtype(r, "dtype");
  m.bytes = message_bytes(r);
  m.group_size = r.positive_integer("group_size");
  m.nodes = r.positive_integer_or("nodes", 1);
  m.gpus_per_node = r.positive_integer_or("gpus_per_node", m.group_size / m.nodes);
  m.link = r.string_or("link", "");
  m.ok = r.boolean_or("ok", true);
  if (m.ok) {
    m.time_s = distribution_from_json(r.object("time"));
    m.algbw_GBps = m.bytes / m.time_s.median / 1e9;
    m.busbw_GBps = m.algbw_GBps * bus_bandwidth_factor(m.op, m.group_size);
    r.optional_number("algbw_GBps");
    r.optional_number("busbw_GBps");
  } else {
    m.error = r.string("error");
  }
  if (r.has("gpus")) m.gpus = r.strings("gpus");
  r.finish();
  return m;
}

Json to_json(const P2pMeasurement& m) {
  Json j{{"src", m.src},
         {"dst", m.dst},
         {"bytes", whole_number_json(m.bytes)},
         {"time", to_json(m.time_s)},
         {"GBps", m.GBps},
         {"link", m.link}};
  if (!m.gpus.empty()) j["gpus"] = m.gpus;
  return j;
}

P2pMeasurement p2p_from_json(ObjectReader r) {
  P2pMeasurement m;
  m.src = global_rank(r, "src");
  m.dst = global_rank(r, "dst");
  m.bytes = message_bytes(r);
  m.time_s = distribution_from_json(r.object("time"));
  m.GBps = m.bytes / m.time_s.median / 1e9;
  r.optional_number("GBps");
  m.link = r.string_or("link", "");
  if (r.has("gpus")) m.gpus = r.strings("gpus");
  r.finish();
  return m;
}

Json to_json(const HostDeviceMeasurement& m) {
  Json j{{"direction", m.direction},
         {"pinned", m.pinned},
         {"bytes", whole_number_json(m.bytes)},
         {"time", to_json(m.time_s)},
         {"GBps", m.GBps}};
  if (!m.gpus.empty()) j["gpus"] = m.gpus;
  return j;
}

HostDeviceMeasurement host_device_from_json(ObjectReader r) {
  HostDeviceMeasurement m;
  m.direction = r.choice("direction", {"h2d", "d2h"});
  m.pinned = r.boolean_or("pinned", true);
  m.bytes = message_bytes(r);
  m.time_s = distribution_from_json(r.object("time"));
  m.GBps = m.bytes / m.time_s.median / 1e9;
  r.optional_number("GBps");
  if (r.has("gpus")) m.gpus = r.strings("gpus");
  r.finish();
  return m;
}

Json to_json(const HostMeasurement& m) {
  return {{"framework", m.framework},  {"config", m.config},     {"kernels", m.kernels},
          {"step", to_json(m.step_s)}, {"device_s", m.device_s}, {"s_per_kernel", m.s_per_kernel}};
}

HostMeasurement host_from_json(ObjectReader r) {
  HostMeasurement m;
  m.framework = r.string_or("framework", m.framework);
  m.config = r.string_or("config", "");
  m.kernels = r.positive_integer("kernels");
  m.step_s = distribution_from_json(r.object("step"));  // refuses a median <= 0
  m.device_s = r.non_negative_or("device_s", 0);
  m.s_per_kernel = m.step_s.median / static_cast<double>(m.kernels);
  r.optional_number("s_per_kernel");  // derived: the step and the kernels say it
  r.finish();
  return m;
}

Json to_json(const LayerForwardMeasurement& m) {
  Json j = {{"model", m.model},
            {"entry", m.entry},
            {"layer", m.layer},
            {"kind", m.kind},
            {"hidden", m.hidden},
            {"heads", m.heads},
            {"seq_len", m.seq_len},
            {"vocab", m.vocab},
            {"micro_batch", m.micro_batch},
            {"tp", m.tp},
            {"dtype", to_string(m.dtype)},
            {"forward", to_json(m.forward_s)}};
  if (!m.node_type.empty()) j["node_type"] = m.node_type;
  return j;
}

LayerForwardMeasurement layer_forward_from_json(ObjectReader r) {
  LayerForwardMeasurement m;
  m.model = r.string("model");
  m.entry = r.integer("entry");
  m.layer = r.integer_or("layer", -1);
  m.kind = r.choice("kind", {"embedding", "transformer", "lm_head", "other"});
  m.hidden = r.integer_or("hidden", 0);
  m.heads = r.integer_or("heads", 0);
  m.seq_len = r.integer_or("seq_len", 0);
  m.vocab = r.integer_or("vocab", 0);
  m.micro_batch = r.positive_integer_or("micro_batch", 1);
  m.tp = r.positive_integer_or("tp", 1);
  m.dtype = read_dtype(r, "dtype");
  m.forward_s = distribution_from_json(r.object("forward"));
  m.node_type = r.string_or("node_type", "");
  if (m.entry < 0 || m.layer < -1) r.fail("entry", "expected entry >= 0 and layer >= -1");
  r.finish();
  return m;
}

Json to_json(const ServingLayerMeasurement& m) {
  return {{"model", m.model},
          {"phase", m.phase},
          {"tokens", m.tokens},
          {"gpus", m.gpus},
          {"time", to_json(m.time_s)}};
}

ServingLayerMeasurement serving_layer_from_json(ObjectReader r) {
  ServingLayerMeasurement m;
  m.model = r.string("model");
  m.phase = r.choice("phase", {"prompt", "decode"});
  m.tokens = r.positive_integer("tokens");
  m.gpus = r.positive_integer_or("gpus", 1);
  m.time_s = distribution_from_json(r.object("time"));
  r.finish();
  return m;
}

namespace {

Json priors_to_json(const DatasheetPriors& p) {
  Json j;
  j["gemm_efficiency"] = p.gemm_efficiency;
  j["memory_efficiency"] = p.memory_efficiency;
  j["kernel_launch_s"] = p.kernel_launch_s;
  j["attention_efficiency"] = p.attention_efficiency;
  return j;
}

double fraction(ObjectReader& r, std::string_view key) {
  const double v = r.positive(key);
  if (v > 1) r.fail(key, fmt::format("expected a fraction in (0, 1], found {}", v));
  return v;
}

DatasheetPriors priors_from_json(ObjectReader r) {
  DatasheetPriors p;
  auto eff = r.object("gemm_efficiency");
  for (const auto& key : eff.keys()) {
    Dtype d;
    if (!parse_dtype(key, d))
      eff.fail(key, "expected a dtype key (fp32, tf32, fp16, bf16, fp8, fp4)");
    p.gemm_efficiency[key] = fraction(eff, key);
  }
  p.memory_efficiency = fraction(r, "memory_efficiency");
  p.kernel_launch_s = r.positive("kernel_launch_s");
  if (p.kernel_launch_s > kMaxLaunchS)
    r.fail("kernel_launch_s", fmt::format("expected a launch cost of at most {} s, found {}",
                                          kMaxLaunchS, p.kernel_launch_s));
  p.attention_efficiency = fraction(r, "attention_efficiency");
  r.finish();
  return p;
}

template <typename T, typename F>
std::vector<T> read_list(ObjectReader& r, std::string_view key, F parse) {
  std::vector<T> out;
  for (auto& item : r.objects_or_empty(key)) out.push_back(parse(item));
  return out;
}

template <typename T>
Json list_to_json(const std::vector<T>& items) {
  Json arr = Json::array();
  for (const auto& item : items) arr.push_back(to_json(item));
  return arr;
}

}  // namespace

Json to_json(const CalibrationFile& f) {
  Json j;
  j["format"] = kCalibrationFormat;
  j["schema_version"] = kCalibrationSchemaVersion;
  j["context"] = to_json(f.context);
  if (f.datasheet) j["datasheet"] = priors_to_json(*f.datasheet);
  j["gemm"] = list_to_json(f.gemm);
  j["kernels"] = list_to_json(f.kernels);
  j["layers"] = list_to_json(f.layers);
  j["collectives"] = list_to_json(f.collectives);
  j["p2p"] = list_to_json(f.p2p);
  j["host_device"] = list_to_json(f.host_device);
  // Imported sections are written only when present, so files without them stay readable by
  // readers that predate them.
  if (!f.layer_forward.empty()) j["layer_forward"] = list_to_json(f.layer_forward);
  if (!f.serving_layer.empty()) j["serving_layer"] = list_to_json(f.serving_layer);
  if (!f.host.empty()) j["host"] = list_to_json(f.host);
  Json failures = Json::array();
  for (const auto& fm : f.failures) failures.push_back({{"what", fm.what}, {"error", fm.error}});
  j["failures"] = failures;
  return j;
}

CalibrationFile calibration_from_document(const Document& doc) {
  ObjectReader r(doc);
  require_format(r, kCalibrationFormat, kCalibrationSchemaVersion);
  CalibrationFile f;
  f.origin = doc.origin;
  f.context = provenance_from_json(r.object("context"));
  if (auto d = r.optional_object("datasheet")) f.datasheet = priors_from_json(*d);
  if (f.context.source == "datasheet" && !f.datasheet)
    r.fail("datasheet", "missing: a file with source \"datasheet\" must give its priors");
  f.gemm = read_list<GemmMeasurement>(r, "gemm", gemm_from_json);
  f.kernels = read_list<KernelMeasurement>(r, "kernels", kernel_from_json);
  f.layers = read_list<LayerMeasurement>(r, "layers", layer_from_json);
  f.collectives = read_list<CollectiveMeasurement>(r, "collectives", collective_from_json);
  f.p2p = read_list<P2pMeasurement>(r, "p2p", p2p_from_json);
  f.host_device = read_list<HostDeviceMeasurement>(r, "host_device", host_device_from_json);
  f.layer_forward = read_list<LayerForwardMeasurement>(r, "layer_forward", layer_forward_from_json);
  f.serving_layer = read_list<ServingLayerMeasurement>(r, "serving_layer", serving_layer_from_json);
  f.host = read_list<HostMeasurement>(r, "host", host_from_json);
  for (auto& item : r.objects_or_empty("failures")) {
    f.failures.push_back({item.string("what"), item.string("error")});
    item.finish();
  }
  r.finish();
  check_gpu_type_form(f);
  return f;
}

CalibrationFile load_calibration(const std::filesystem::path& path) {
  return calibration_from_document(load_document(path));
}

std::filesystem::path write_target(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  constexpr int kMaxLinks = 40;  // Linux's limit (ELOOP)
  fs::path p = path;
  for (int hop = 0; hop < kMaxLinks; ++hop) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return p;
    const fs::path link = fs::read_symlink(p, ec);
    if (ec) return p;
    p = link.is_absolute() ? link : p.parent_path() / link;
  }
  throw RuntimeFailure(fmt::format("{}: too many levels of symbolic links", path.string()));
}

void write_text_atomically(const std::string& text, const std::filesystem::path& output) {
  // Renaming over a symbolic link would replace the link with a regular file and leave the file
  // it leads to as it was: the temporary file goes beside the target, and the rename replaces it.
  const std::filesystem::path path = write_target(output);
  // A device or pipe (/dev/null, /dev/stdout) is written in place: renaming over it would
  // replace it with a regular file.
  std::error_code status_error;
  const auto status = std::filesystem::status(path, status_error);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out) throw RuntimeFailure(fmt::format("error while writing {}", path.string()));
    return;
  }
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw RuntimeFailure(fmt::format("cannot write {}", tmp.string()));
    out << text;
    if (!out) throw RuntimeFailure(fmt::format("error while writing {}", tmp.string()));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    throw RuntimeFailure(
        fmt::format("cannot rename {} to {}: {}", tmp.string(), path.string(), ec.message()));
}

void write_json_atomically(const Json& json, const std::filesystem::path& path) {
  write_text_atomically(json.dump(1) + '\n', path);
}

void save_calibration(const CalibrationFile& file, const std::filesystem::path& path) {
  write_json_atomically(to_json(file), path);
}

std::string gpu_preset_names() { return hardware_preset_names("gpus"); }

std::string per_gpu_records(const CalibrationFile& f) {
  std::string out;
  auto count = [&](size_t n, const char* what) {
    if (n) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, what);
  };
  count(f.gemm.size(), "GEMM");
  count(f.kernels.size(), "kernel");
  count(f.layers.size(), "layer");
  count(f.layer_forward.size(), "layer_forward");
  count(f.serving_layer.size(), "serving_layer");
  count(f.host.size(), "host");
  if (f.datasheet) out += std::string(out.empty() ? "" : ", ") + "datasheet priors";
  return out;
}

std::string context_gpu_kind(const Provenance& context) {
  return context.gpu_type.empty() ? context.gpu_name : context.gpu_type;
}

void tag_measurements_with_gpu_kind(CalibrationFile& file) {
  const std::string kind = context_gpu_kind(file.context);
  if (kind.empty()) return;
  auto tag = [&](auto& list) {
    for (auto& m : list)
      if (m.gpus.empty()) m.gpus = {kind};
  };
  tag(file.collectives);
  tag(file.p2p);
  tag(file.host_device);
}

void merge_calibration(CalibrationFile& into, const CalibrationFile& other_in) {
  auto append = [](auto& a, const auto& b) { a.insert(a.end(), b.begin(), b.end()); };
  CalibrationFile other = other_in;
  tag_measurements_with_gpu_kind(other);
  append(into.gemm, other.gemm);
  append(into.kernels, other.kernels);
  append(into.layers, other.layers);
  append(into.collectives, other.collectives);
  append(into.p2p, other.p2p);
  append(into.host_device, other.host_device);
  append(into.layer_forward, other.layer_forward);
  append(into.serving_layer, other.serving_layer);
  append(into.host, other.host);
  append(into.failures, other.failures);
  const std::string note = fmt::format(
      "merged {} (source {}, host {}, date {})", other.origin.empty() ? "a file" : other.origin,
      other.context.source, other.context.host, other.context.date);
  into.context.add_note(note);
}

}  // namespace hetplan
