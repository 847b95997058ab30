#include "kernels/registry.h"

#include <set>
#include <stdexcept>

#include "kernels/cases/cases.h"

namespace hetplan::kernels {
namespace {

std::vector<Case> build() {
  std::vector<Case> all;
  cases::add_probe_cases(all);
  cases::add_embedding_cases(all);
  cases::add_norm_cases(all);
  cases::add_rotary_cases(all);
  cases::add_attention_cases(all);
  cases::add_elementwise_cases(all);
  cases::add_cross_entropy_cases(all);
  cases::add_optimizer_cases(all);
  std::set<std::string> names;
  for (const Case& c : all) {
    if (!names.insert(c.name).second) throw std::logic_error("duplicate kernel case " + c.name);
    for (const Shape& s : c.test_shapes)
      if (s.size() != c.dims.size()) throw std::logic_error("bad test shape in " + c.name);
    for (const Shape& s : c.bench_shapes)
      if (s.size() != c.dims.size()) throw std::logic_error("bad bench shape in " + c.name);
  }
  return all;
}

}  // namespace

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = build();
  return cases;
}

const Case* find_case(std::string_view name) {
  for (const Case& c : all_cases())
    if (c.name == name) return &c;
  return nullptr;
}

std::string shape_string(const Case& c, const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < c.dims.size(); ++i) {
    if (i) out += ",";
    out += c.dims[i] + "=" + std::to_string(s[i]);
  }
  return out;
}

}  // namespace hetplan::kernels
