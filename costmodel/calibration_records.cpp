#include "costmodel/calibration_records.h"

#include <tuple>

#include <fmt/format.h>

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
  if (m.ffn_hidden > 0) j["ffn_hidden"] = m.ffn_hidden;
  if (!m.activation.empty()) j["activation"] = m.activation;
  if (m.forward_backward) j["forward_backward"] = true;
  if (!m.framework.empty()) j["framework"] = m.framework;
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
  m.ffn_hidden = r.integer_or("ffn_hidden", 0);
  if (m.ffn_hidden < 0) r.fail("ffn_hidden", "expected the MLP's width >= 0 (0: 4 x hidden)");
  if (r.has("activation")) m.activation = r.choice("activation", {"gelu", "relu"});
  m.forward_backward = r.boolean_or("forward_backward", false);
  m.framework = r.string_or("framework", "");
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

}  // namespace hetplan
