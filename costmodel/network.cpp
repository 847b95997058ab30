#include "costmodel/network.h"

#include <filesystem>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/preset_table.h"

namespace hetplan {
namespace {

ZoneLink parse_zone_link(ObjectReader r) {
  ZoneLink l;
  l.network_fraction = r.number_in_or("network_fraction", 0.001, 1, 1);
  l.latency_s = r.positive("latency_us") * 1e-6;
  l.price_per_GB = r.non_negative_or("price_per_GB", 0);
  r.finish();
  return l;
}

std::string network_preset_names() {
  std::string out;
  for (const auto& p : embedded_presets())
    if (p.kind == "networks") out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

}  // namespace

CloudNetwork parse_network(ObjectReader r, const std::string& name) {
  CloudNetwork n;
  n.name = name;
  n.description = r.string_or("description", "");
  n.between_zones = parse_zone_link(r.object("between_zones"));
  n.between_regions = parse_zone_link(r.object("between_regions"));
  if (auto c = r.optional_object("citations"))
    for (const auto& key : c->keys()) n.citations[key] = c->string(key);
  r.finish();
  return n;
}

CloudNetwork load_network(const std::string& name_or_path) {
  if (const EmbeddedPreset* p = find_preset("networks", name_or_path)) {
    Document doc = parse_document(p->text, std::string(p->path), DocumentFormat::kYaml);
    return parse_network(ObjectReader(doc), name_or_path);
  }
  if (looks_like_file_path(name_or_path)) {
    Document doc = load_document(name_or_path);
    return parse_network(ObjectReader(doc), std::filesystem::path(name_or_path).stem().string());
  }
  throw InputError(fmt::format("unknown network \"{}\": expected one of {} or a network file",
                               name_or_path, network_preset_names()));
}

}  // namespace hetplan
