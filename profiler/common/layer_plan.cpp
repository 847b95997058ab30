#include "profiler/common/layer_plan.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace hetplan::profiler {
namespace {

// Identity of a layer's shapes: two layers with the same signature have the same GEMMs.
std::string signature(const LayerSpec& l) {
  std::string s = fmt::format("{}:{}:{}", static_cast<int>(l.kind()), l.hidden, l.seq_len);
  if (const auto* b = l.block()) {
    s += fmt::format(":{}:{}:{}:{}:{}:{}:{}:{}:{}:{}:{}:{}", b->heads, b->kv_heads, b->head_dim,
                     b->ffn_hidden, static_cast<int>(b->activation), static_cast<int>(b->norm),
                     b->bias, b->mlp_bias, b->rotary, b->causal, b->experts, b->top_k);
  } else if (const auto* h = l.head()) {
    s += fmt::format(":{}:{}", h->vocab, h->transform);
  } else if (const auto* e = l.embedding()) {
    s += fmt::format(":{}", e->vocab);
  }
  return s;
}

// F, B, W: short tags keep the origin labels readable.
const char* pass_tag(Pass p) {
  switch (p) {
    case Pass::kForward:
      return "F";
    case Pass::kBackwardInput:
      return "B";
    case Pass::kBackwardWeight:
      return "W";
  }
  return "?";
}

}  // namespace

std::vector<LayerGroup> group_identical_layers(const ModelSpec& model) {
  std::vector<LayerGroup> groups;
  std::string last_sig;
  std::string last_name;
  for (const auto& layer : model.layers) {
    const std::string sig = signature(layer);
    if (!groups.empty() && sig == last_sig) {
      ++groups.back().count;
      groups.back().name = fmt::format(
          "{}..{}", groups.back().name.substr(0, groups.back().name.find("..")), layer.name);
    } else {
      groups.push_back({layer.name, &layer, 1});
    }
    last_sig = sig;
  }
  return groups;
}

std::vector<GemmCase> layer_gemm_cases(const ModelSpec& model,
                                       const std::vector<int64_t>& micro_batches,
                                       const std::vector<int64_t>& tensor_widths,
                                       const std::vector<Dtype>& dtypes,
                                       std::vector<std::string>* skipped) {
  std::vector<GemmCase> out;
  const auto groups = group_identical_layers(model);
  for (Dtype d : dtypes) {
    for (int64_t tp : tensor_widths) {
      if (const std::string why = tensor_parallel_problem(model, tp); !why.empty()) {
        if (skipped) skipped->push_back(fmt::format("{}: tp {} skipped: {}", model.name, tp, why));
        continue;
      }
      for (int64_t mb : micro_batches) {
        LayerShape shape;
        shape.micro_batch = mb;
        shape.tp = tp;
        shape.dtype = d;
        for (const auto& group : groups) {
          for (const auto& g : layer_work(*group.layer, shape).gemms) {
            const std::string origin = fmt::format("{}/{}/{}/{}/mb{}/tp{}", model.name, group.name,
                                                   g.name, pass_tag(g.pass), mb, tp);
            out.push_back({d, g.shape, origin});
            if (g.shape.batch > 1) {
              // Experts' GEMMs also as the frameworks that run one GEMM per expert launch them
              // (FrameworkSpec::expert_gemms: Transformer Engine's GroupedLinear).
              GemmShape one = g.shape;
              one.batch = 1;
              out.push_back({d, one, origin + "/per_expert"});
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<LayerTimingCase> layer_timing_cases(const ModelSpec& model,
                                                const std::vector<int64_t>& micro_batches,
                                                const std::vector<int64_t>& tensor_widths,
                                                Dtype dtype) {
  std::vector<LayerTimingCase> out;
  std::set<std::string> seen;
  for (const auto& group : group_identical_layers(model)) {
    const LayerSpec& l = *group.layer;
    const TransformerLayer* b = l.block();
    // The profiler's block has one bias flag for all four projections.
    if (b == nullptr || b->experts > 1 || b->bias != b->mlp_bias) continue;
    for (int64_t tp : tensor_widths) {
      if (!tensor_parallel_problem(model, tp).empty()) continue;
      for (int64_t mb : micro_batches) {
        LayerTimingCase c;
        c.model = model.name;
        c.style = b->norm == NormKind::kRmsNorm ? "llama" : "gpt";
        c.dtype = dtype;
        c.micro_batch = mb;
        c.seq_len = l.seq_len;
        c.hidden = l.hidden;
        c.heads = b->heads;
        c.kv_heads = b->kv_heads > 0 ? b->kv_heads : b->heads;
        c.head_dim = b->head_dim > 0 ? b->head_dim : l.hidden / b->heads;
        c.ffn_hidden = b->ffn_hidden;
        c.tp = tp;
        c.bias = b->bias;
        c.rotary = b->rotary;
        c.causal = b->causal;
        c.dropout = b->dropout;
        if (seen.insert(layer_key(c)).second) out.push_back(c);
      }
    }
  }
  return out;
}

double expected_activation_bytes(const LayerTimingCase& c) {
  LayerSpec layer;
  layer.name = "block";
  layer.hidden = c.hidden;
  layer.seq_len = c.seq_len;
  TransformerLayer b;
  b.heads = c.heads;
  b.kv_heads = c.kv_heads;
  b.head_dim = c.head_dim;
  b.ffn_hidden = c.ffn_hidden;
  b.activation = c.style == "llama" ? MlpActivation::kSwiglu : MlpActivation::kGelu;
  b.norm = c.style == "llama" ? NormKind::kRmsNorm : NormKind::kLayerNorm;
  b.bias = c.bias;
  b.mlp_bias = c.bias;
  b.rotary = c.rotary;
  b.causal = c.causal;
  b.dropout = c.dropout;
  layer.op = b;
  LayerShape shape;
  shape.micro_batch = c.micro_batch;
  shape.tp = c.tp;
  shape.dtype = c.dtype;
  return layer_work(layer, shape).activation(Recompute::kNone);
}

std::string layer_key(const LayerTimingCase& c) {
  std::string key = fmt::format("layer/{}/{}/b{}/s{}/h{}/a{}/g{}/d{}/f{}/tp{}", c.style,
                                to_string(c.dtype), c.micro_batch, c.seq_len, c.hidden, c.heads,
                                c.kv_heads, c.head_dim, c.ffn_hidden, c.tp);
  if (!c.bias) key += "/nobias";
  if (!c.causal) key += "/full";
  if (c.dropout > 0) key += fmt::format("/p{}", c.dropout);
  return key;
}

double estimate_layer_s(const LayerTimingCase& c, bool quick) {
  // GEMM FLOPs of one forward on one rank: 2 * tokens * (weights per rank), attention causal.
  const double tokens = static_cast<double>(c.micro_batch) * c.seq_len;
  const double q = static_cast<double>(c.heads) / c.tp * c.head_dim;
  const double kv = std::max(1.0, static_cast<double>(c.kv_heads) / c.tp) * c.head_dim;
  const double ffn = static_cast<double>(c.ffn_hidden) / c.tp;
  const double mlp = c.style == "llama" ? 3 * ffn : 2 * ffn;
  const double weights = c.hidden * (q + 2 * kv) + q * c.hidden + mlp * c.hidden;
  const double attention = 4.0 * tokens * c.seq_len * q * (c.causal ? 0.5 : 1.0);
  const double forward_s = (2 * tokens * weights + attention) / 400e12 + 30e-6;
  const double fbw_s = forward_s * 3.5;  // B: dgrad GEMMs + 2.5x attention; W: wgrad GEMMs
  const int reps = quick ? 6 : 13;       // warm-up, checked run, timed samples
  return 0.05 + reps * fbw_s;
}

Json to_spec(const LayerTimingCase& c) {
  return Json{{"model", c.model},
              {"style", c.style},
              {"dtype", to_string(c.dtype)},
              {"micro_batch", c.micro_batch},
              {"seq_len", c.seq_len},
              {"hidden", c.hidden},
              {"heads", c.heads},
              {"kv_heads", c.kv_heads},
              {"head_dim", c.head_dim},
              {"ffn_hidden", c.ffn_hidden},
              {"tp", c.tp},
              {"bias", c.bias},
              {"rotary", c.rotary},
              {"causal", c.causal},
              {"dropout", c.dropout}};
}

LayerTimingCase layer_case_from_spec(const Json& s) {
  LayerTimingCase c;
  c.model = s.at("model").get<std::string>();
  c.style = s.at("style").get<std::string>();
  parse_dtype(s.at("dtype").get<std::string>(), c.dtype);
  c.micro_batch = s.at("micro_batch").get<int64_t>();
  c.seq_len = s.at("seq_len").get<int64_t>();
  c.hidden = s.at("hidden").get<int64_t>();
  c.heads = s.at("heads").get<int64_t>();
  c.kv_heads = s.at("kv_heads").get<int64_t>();
  c.head_dim = s.at("head_dim").get<int64_t>();
  c.ffn_hidden = s.at("ffn_hidden").get<int64_t>();
  c.tp = s.at("tp").get<int64_t>();
  c.bias = s.at("bias").get<bool>();
  c.rotary = s.at("rotary").get<bool>();
  c.causal = s.at("causal").get<bool>();
  c.dropout = s.at("dropout").get<double>();
  return c;
}

std::vector<PlanItem> layer_timing_items(const std::vector<LayerTimingCase>& cases, bool quick) {
  std::vector<PlanItem> out;
  for (const auto& c : cases) {
    out.push_back(
        {"layers", layer_key(c),
         fmt::format("{} {} b{} s{} tp{}", c.model, c.style, c.micro_batch, c.seq_len, c.tp),
         estimate_layer_s(c, quick), to_spec(c)});
  }
  return deduplicate(std::move(out));
}

}  // namespace hetplan::profiler
