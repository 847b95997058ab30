#include "serve/helix_capacity.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "serve/capacity.h"

namespace hetplan::serve {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// What Helix's model needs of one machine type, from its tables or from hetplan's memory model.
struct TypeInputs {
  int machines = 0;
  int max_layers = 0;                       // most layers it may hold by weight
  std::vector<double> kv_tokens_per_layer;  // index k
  int typical_layers = 0;
  int typical_layers_when_short = 0;
  double initial_speed = 0;
  const LayerTimeModel* times = nullptr;
};

// Python's round(): to nearest, ties to even (Helix's typical batch sizes are rounded so).
double round_half_even(double x) { return std::nearbyint(x); }

class HelixModel {
 public:
  HelixModel(std::map<std::string, TypeInputs> types, int num_layers, const ServingWorkload& w,
             double kv_high_water)
      : types_(std::move(types)), L_(num_layers), w_(w), h_(kv_high_water) {}

  // Relative per-layer speeds after the fixed-point iterations.
  void settle(double short_below_model_copies, int iterations) {
    double held = 0;
    for (const auto& [name, t] : types_) held += t.machines * t.typical_layers;
    const bool is_short = held < short_below_model_copies * L_;
    for (auto& [name, t] : types_) {
      typical_[name] = is_short ? t.typical_layers_when_short : t.typical_layers;
      speed_[name] = t.initial_speed;
    }
    for (int i = 0; i < iterations; ++i) {
      std::map<std::string, double> next;
      for (const auto& [name, t] : types_) {
        const int m = typical_[name];
        next[name] = m > 0 ? m * tokens_per_s(name, m).tokens_per_s : 0;
      }
      speed_ = std::move(next);
    }
  }

  struct AtK {
    double tokens_per_s = 0;
    double decode_batch = 0;  // requests per decode step (unrounded)
  };

  // Capacity of a machine of type `name` holding k layers.
  AtK tokens_per_s(const std::string& name, int k) const {
    const TypeInputs& t = types_.at(name);
    const double ratio = workload_ratio(name, k);
    const double prompt = w_.avg_prompt_tokens, output = w_.avg_output_tokens;
    const double request = prompt + output;
    // Helix: int(KV_CACHE_HWM * entries / k), entries = tokens per layer x k.
    const double entries = t.kv_tokens_per_layer[k] * k;
    const double available = std::trunc(h_ * entries / k);
    const double resident = available / request;
    double prompt_requests = resident * ratio / output;  // prompts per decode step
    double prompt_tokens = round_half_even(prompt_requests * prompt);
    double decode_tokens = round_half_even(resident * ratio);
    AtK out;
    out.decode_batch = std::max(1.0, resident * ratio);
    if (prompt_requests > 1) {  // one whole request per step already: count one request
      prompt_requests = 1;
      prompt_tokens = prompt;
      decode_tokens = output;
    }
    double tokens = prompt_tokens + decode_tokens, seconds = 0;
    if (prompt_requests >= 1) {
      seconds = k * (t.times->prompt_s(prompt_tokens) + t.times->decode_table_s(decode_tokens));
    } else {  // scaled up to one whole prompt
      const double scale = 1 / prompt_requests;
      tokens *= scale;
      seconds = k * (t.times->prompt_s(std::trunc(prompt_tokens * scale)) +
                     t.times->decode_table_s(decode_tokens) * scale);
    }
    out.tokens_per_s = seconds > 0 ? tokens / seconds : 0;
    return out;
  }

 private:
  // Share of a request's round trip spent on this machine: its k layers at its own speed against
  // the other L - k at the cluster's mean per-layer time (weighted by typical layers held).
  double workload_ratio(const std::string& name, int k) const {
    double time = 0, layers = 0;
    for (const auto& [other, t] : types_) {
      const int m = typical_.at(other);
      if (m <= 0 || !(speed_.at(other) > 0)) continue;
      time += t.machines * m / speed_.at(other);
      layers += t.machines * m;
    }
    const double own = k / speed_.at(name);
    return own / ((L_ - k) * (time / layers) + own);
  }

  std::map<std::string, TypeInputs> types_;
  int L_;
  ServingWorkload w_;
  double h_;
  std::map<std::string, int> typical_;
  std::map<std::string, double> speed_;
};

TypeInputs inputs_from_table(const HelixTypeTable& table, double block_tokens) {
  TypeInputs t;
  t.max_layers = table.max_layers;
  t.kv_tokens_per_layer.assign(table.max_layers + 1, 0.0);
  for (int k = 1; k <= table.max_layers; ++k)
    t.kv_tokens_per_layer[k] = block_tokens * table.kv_blocks[k - 1];
  t.typical_layers = table.typical_layers;
  t.typical_layers_when_short = table.typical_layers_when_short;
  t.initial_speed = table.initial_layer_speed;
  return t;
}

// A type Helix has no table for: hetplan's layer limit and KV cache; it typically holds as many
// layers as it may, and its starting speed is its own capacity there.
TypeInputs inputs_from_hetplan(const MachineCapacity& cap) {
  TypeInputs t;
  t.max_layers = cap.max_layers;
  t.kv_tokens_per_layer = cap.kv_tokens_per_layer;
  t.kv_tokens_per_layer.resize(cap.max_layers + 1);
  t.typical_layers = t.typical_layers_when_short = cap.max_layers;
  t.initial_speed = cap.max_layers > 0 ? cap.max_layers * cap.tokens_per_s[cap.max_layers] : 0;
  return t;
}

}  // namespace

const HelixTypeTable* HelixCapacityTables::find(const std::string& machine_type) const {
  for (const auto& [name, table] : types)
    if (lower(name) == lower(machine_type)) return &table;
  return nullptr;
}

HelixCapacityTables read_helix_capacity_tables(const std::filesystem::path& path) {
  const Document doc = load_document(path);
  ObjectReader top(doc);
  HelixCapacityTables t;
  t.origin = path.string();
  t.model = top.string("model");
  t.kv_block_tokens = top.positive("kv_block_tokens");
  t.short_below_model_copies = top.positive("short_below_model_copies");
  t.speed_iterations = static_cast<int>(top.positive_integer("speed_iterations"));
  ObjectReader typical = top.object("typical_layers");
  ObjectReader when_short = top.object("typical_layers_when_short");
  ObjectReader speed = top.object("initial_layer_speed");
  ObjectReader types = top.object("machine_types");
  for (const auto& name : types.keys()) {
    ObjectReader r = types.object(name);
    HelixTypeTable table;
    table.max_layers = static_cast<int>(r.positive_integer("max_layers"));
    table.kv_blocks = r.numbers("kv_blocks");
    if (static_cast<int>(table.kv_blocks.size()) != table.max_layers)
      r.fail("kv_blocks", fmt::format("expected {} block counts (one per layer count 1..{}), "
                                      "found {}",
                                      table.max_layers, table.max_layers, table.kv_blocks.size()));
    for (double b : table.kv_blocks)
      if (!(b > 0)) r.fail("kv_blocks", "expected block counts > 0");
    r.finish();
    table.typical_layers = static_cast<int>(typical.positive_integer(name));
    table.typical_layers_when_short = static_cast<int>(when_short.positive_integer(name));
    table.initial_layer_speed = speed.positive(name);
    for (const auto& [key, m] : {std::pair{"typical_layers", table.typical_layers},
                                 {"typical_layers_when_short", table.typical_layers_when_short}})
      if (m > table.max_layers)
        top.object(key).fail(name, fmt::format("expected at most machine_types.{}.max_layers = {}",
                                               name, table.max_layers));
    t.types[name] = std::move(table);
  }
  // Every key of the three maps must name a machine type of machine_types.
  typical.finish();
  when_short.finish();
  speed.finish();
  top.finish();
  return t;
}

std::vector<MachineCapacity> helix_capacities(
    const ServingCluster& cluster, const ServingModel& model,
    const std::vector<std::shared_ptr<const LayerTimeModel>>& times,
    const ServingWorkload& workload, const CapacityParams& params,
    const std::vector<MachineCapacity>& fallback, const HelixCapacityTables* tables) {
  const auto& machines = cluster.machines();
  std::map<std::string, TypeInputs> types;
  std::map<std::string, const HelixTypeTable*> table_of;
  for (size_t i = 0; i < machines.size(); ++i) {
    const std::string& name = machines[i].machine_type;
    auto [it, fresh] = types.try_emplace(name);
    if (fresh) {
      const HelixTypeTable* table = tables ? tables->find(name) : nullptr;
      it->second = table ? inputs_from_table(*table, tables->kv_block_tokens)
                         : inputs_from_hetplan(fallback[i]);
      it->second.times = times[i].get();
    }
    ++it->second.machines;
  }
  HelixModel helix(types, model.num_layers, workload, params.kv_high_water);
  helix.settle(tables ? tables->short_below_model_copies : 1.2,
               tables ? tables->speed_iterations : 10);

  std::map<std::string, MachineCapacity> by_type;
  for (const auto& [name, t] : types) {
    MachineCapacity cap;
    cap.max_layers = cap.weight_max_layers = std::min(t.max_layers, model.num_layers);
    cap.tokens_per_s.assign(cap.weight_max_layers + 1, 0.0);
    cap.decode_batch.assign(cap.weight_max_layers + 1, 0.0);
    cap.kv_tokens_per_layer.assign(cap.weight_max_layers + 1, 0.0);
    const double request = workload.avg_prompt_tokens + workload.avg_output_tokens;
    for (int k = 1; k <= cap.weight_max_layers; ++k) {
      cap.kv_tokens_per_layer[k] = t.kv_tokens_per_layer[k];
      // As in hetplan's model: a cache that cannot hold one average request serves nothing.
      if (t.kv_tokens_per_layer[k] < request) {
        cap.max_layers = std::min(cap.max_layers, k - 1);
        continue;
      }
      const auto at = helix.tokens_per_s(name, k);
      cap.tokens_per_s[k] = at.tokens_per_s;
      cap.decode_batch[k] = std::min(at.decode_batch, t.times->max_decode_batch());
    }
    by_type[name] = std::move(cap);
  }
  std::vector<MachineCapacity> out;
  out.reserve(machines.size());
  for (const auto& m : machines) out.push_back(by_type.at(m.machine_type));
  return out;
}

}  // namespace hetplan::serve
