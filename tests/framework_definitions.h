// The frameworks' own definitions of the flags and config keys hetplan exports, read from
// tests/data/frameworks/ (made by scripts/framework_definitions.py from Megatron-LM, DeepSpeed,
// torchtitan and PyTorch; each file's header says which commit), and checkers that list what an
// exported file gets wrong: names and value kinds for every export, and the frameworks' rules
// (validate_args, the batch assertion, the schedules' micro-batch rules) for those that claim to
// be expressed.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodel/document.h"

namespace hetplan::testing {

// One option or key: its value kind and, when limited, the values allowed.
struct Definition {
  std::string kind;
  std::vector<std::string> choices;
};

// "requires W T": when every term of `when` holds, `then` holds.
struct Requirement {
  std::vector<std::string> when;
  std::string then;
};

struct Definitions {
  std::map<std::string, Definition> names;
  std::vector<std::vector<std::string>> exclusive;  // at most one given
  std::vector<Requirement> requirements;
  // The other keyword lines (import, module, schedule, batch, ...), by keyword: the words after it.
  std::map<std::string, std::vector<std::vector<std::string>>> keyed;
};

// The keyword lines of one keyword (none: empty).
inline const std::vector<std::vector<std::string>>& keyed(const Definitions& d,
                                                          const std::string& keyword) {
  static const std::vector<std::vector<std::string>> kNone;
  const auto it = d.keyed.find(keyword);
  return it == d.keyed.end() ? kNone : it->second;
}

inline std::vector<std::string> split(const std::string& text, char by) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, by)) parts.push_back(part);
  return parts;
}

// Reads a tests/data/frameworks/ file: "NAME KIND [CHOICES]" lines, "exclusive A B ..." and
// "requires W T" rules, other keyword lines (their format: the file's header), "#" comments.
inline Definitions load_definitions(const std::string& file) {
  static const std::set<std::string> kKeywords = {
      "section",   "policy",           "import",           "module",       "entry",
      "schedule",  "schedules",        "divides",          "accumulation", "batch",
      "arguments", "default-topology", "pipeline-zero-max"};
  std::ifstream in(std::string(HETPLAN_TEST_DATA) + "/frameworks/" + file);
  if (!in) throw std::runtime_error("cannot read tests/data/frameworks/" + file);
  Definitions d;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    if (w.empty() || w[0][0] == '#') continue;
    if (w[0] == "exclusive") {
      d.exclusive.emplace_back(w.begin() + 1, w.end());
    } else if (w[0] == "requires" && w.size() == 3) {
      d.requirements.push_back({split(w[1], ','), w[2]});
    } else if (kKeywords.count(w[0])) {
      d.keyed[w[0]].emplace_back(w.begin() + 1, w.end());
    } else if (w.size() == 2 || w.size() == 3) {
      d.names[w[0]] = {w[1], w.size() == 3 ? split(w[2], ',') : std::vector<std::string>{}};
    } else {
      throw std::runtime_error(fmt::format("{}: cannot read line \"{}\"", file, line));
    }
  }
  return d;
}

inline bool is_integer(const std::string& v) {
  const size_t start = !v.empty() && v[0] == '-' ? 1 : 0;
  return v.size() > start && std::all_of(v.begin() + start, v.end(), ::isdigit);
}

inline bool is_number(const std::string& v) {
  char* end = nullptr;
  std::strtod(v.c_str(), &end);
  return !v.empty() && end == v.c_str() + v.size();
}

// "<int>" allows an integer, "PREFIX*" any value starting with PREFIX; no choices allow anything.
inline bool allowed(const Definition& d, const std::string& value) {
  if (d.choices.empty()) return true;
  for (const auto& c : d.choices) {
    if (c == value || (c == "<int>" && is_integer(value))) return true;
    if (!c.empty() && c.back() == '*' && value.rfind(c.substr(0, c.size() - 1), 0) == 0)
      return true;
  }
  return false;
}

// --- Rules over settings: what a file gives, by name, with its value as text ---

using Settings = std::map<std::string, std::string>;

// A rule term: "NAME" (given), "NAME=V", "NAME!=V" (given with another value), "NAME>N" (given,
// an integer above N), "!TERM".
inline bool holds(const Settings& s, const std::string& term) {
  if (!term.empty() && term[0] == '!') return !holds(s, term.substr(1));
  if (const size_t gt = term.find('>'); gt != std::string::npos) {
    const auto it = s.find(term.substr(0, gt));
    return it != s.end() && is_integer(it->second) &&
           std::stoll(it->second) > std::stoll(term.substr(gt + 1));
  }
  if (const size_t ne = term.find("!="); ne != std::string::npos) {
    const auto it = s.find(term.substr(0, ne));
    return it != s.end() && it->second != term.substr(ne + 2);
  }
  const size_t eq = term.find('=');
  const auto it = s.find(term.substr(0, eq));
  return it != s.end() && (eq == std::string::npos || it->second == term.substr(eq + 1));
}

inline std::vector<std::string> rule_problems(const Settings& s, const Definitions& d) {
  std::vector<std::string> problems;
  for (const auto& rule : d.exclusive) {
    std::vector<std::string> both;
    for (const auto& term : rule)
      if (holds(s, term)) both.push_back(term);
    if (both.size() > 1)
      problems.push_back(fmt::format("at most one of {} may be given", fmt::join(both, ", ")));
  }
  for (const auto& r : d.requirements) {
    bool all = true;
    for (const auto& term : r.when) all = all && holds(s, term);
    if (all && !holds(s, r.then))
      problems.push_back(fmt::format("{} requires {}", fmt::join(r.when, ", "), r.then));
  }
  return problems;
}

// --- Megatron-LM: the MEGATRON_ARGS=( ... ) bash array, one option (and its value) a line, and
// the environment the file sets before it ---

// Options given, in order, with their value as the shell passes it ("" for none).
inline std::vector<std::pair<std::string, std::string>> megatron_options(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> options;
  const size_t start = text.find("MEGATRON_ARGS=(\n");
  if (start == std::string::npos) return options;
  std::istringstream lines(text.substr(start + 16));
  for (std::string line; std::getline(lines, line) && line != ")";) {
    line = line.substr(line.find_first_not_of(' '));
    const size_t space = line.find(' ');
    options.emplace_back(line.substr(0, space),
                         space == std::string::npos ? "" : line.substr(space + 1));
  }
  return options;
}

// The environment the bash lines before the array set, as "$NAME" settings: "export NAME=V" gives
// V, "unset NAME" gives "" (set, to nothing). Lines of another kind are problems.
inline Settings megatron_environment(const std::string& text, std::vector<std::string>& problems) {
  Settings env;
  std::istringstream lines(text.substr(0, text.find("MEGATRON_ARGS=(\n")));
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#' || line.rfind("HETPLAN_", 0) == 0) continue;
    if (line.rfind("export ", 0) == 0 && line.find('=') != std::string::npos) {
      const size_t eq = line.find('=');
      env["$" + line.substr(7, eq - 7)] = line.substr(eq + 1);
    } else if (line.rfind("unset ", 0) == 0) {
      env["$" + line.substr(6)] = "";
    } else {
      problems.push_back("cannot read line \"" + line + "\"");
    }
  }
  return env;
}

inline std::vector<std::string> megatron_problems(const std::string& text, const Definitions& d) {
  std::vector<std::string> problems;
  const auto options = megatron_options(text);
  if (options.empty()) problems.push_back("no MEGATRON_ARGS=( ... ) array");
  Settings seen = megatron_environment(text, problems);
  for (auto [flag, raw] : options) {
    const bool quoted = raw.size() >= 2 && raw.front() == '"' && raw.back() == '"';
    const std::string value = quoted ? raw.substr(1, raw.size() - 2) : raw;
    if (!seen.emplace(flag, value).second) problems.push_back(flag + " given twice");
    const auto it = d.names.find(flag);
    if (it == d.names.end()) {
      problems.push_back(fmt::format("{}: not an option of arguments.py", flag));
      continue;
    }
    const Definition& def = it->second;
    if (!quoted && raw.find_first_of("|*()&;<>\"'") != std::string::npos)
      problems.push_back(fmt::format("{} {}: the shell would read the value", flag, raw));
    if (def.kind == "flag") {
      if (!raw.empty()) problems.push_back(fmt::format("{} takes no value, given {}", flag, raw));
      continue;
    }
    if (value.empty()) {
      problems.push_back(fmt::format("{} takes a value ({}), given none", flag, def.kind));
      continue;
    }
    const bool ok = def.kind == "int"     ? is_integer(value)
                    : def.kind == "float" ? is_number(value)
                    : def.kind == "layout"
                        ? value.find_first_not_of("EtmL|*(),0123456789") == std::string::npos
                        : def.kind == "list" || def.kind == "str";
    if (!ok) problems.push_back(fmt::format("{} {}: not a value of kind {}", flag, raw, def.kind));
    if (!allowed(def, value))
      problems.push_back(fmt::format("{} {}: not one of its choices", flag, raw));
  }
  const auto broken = rule_problems(seen, d);
  problems.insert(problems.end(), broken.begin(), broken.end());
  return problems;
}

// --- JSON values: DeepSpeed keys and torchtitan fields ---

inline bool json_kind_ok(const std::string& kind, const Json& v) {
  const bool nullable = !kind.empty() && kind.back() == '?';
  const std::string k = nullable ? kind.substr(0, kind.size() - 1) : kind;
  if (v.is_null()) return nullable || k == "any";
  if (k == "int") return v.is_number_integer();
  if (k == "float") return v.is_number();
  if (k == "bool") return v.is_boolean();
  if (k == "str") return v.is_string();
  if (k == "list" || k == "list2") {
    if (!v.is_array()) return false;
    for (const auto& item : v)
      if (!(k == "list" ? item.is_string() : json_kind_ok("list", item))) return false;
    return true;
  }
  return k == "any";
}

inline std::string json_text(const Json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

inline void check_value(const std::string& path, const Json& v, const Definition& def,
                        std::vector<std::string>& problems) {
  if (!json_kind_ok(def.kind, v))
    problems.push_back(fmt::format("{} = {}: not a value of kind {}", path, v.dump(), def.kind));
  else if (!v.is_null() && !allowed(def, json_text(v)))
    problems.push_back(fmt::format("{} = {}: not one of its allowed values", path, v.dump()));
}

// --- DeepSpeed: every key path of the config ---

// `extensions`: hetplan's own keys, allowed only inside open sections (which DeepSpeed ignores or
// copies without reading).
inline void deepspeed_walk(const Json& object, const std::string& prefix, const Definitions& d,
                           const std::set<std::string>& extensions,
                           std::vector<std::string>& problems) {
  for (const auto& [key, value] : object.items()) {
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    if (extensions.count(path)) {
      const auto section = d.names.find(prefix.empty() ? "." : prefix);
      if (section == d.names.end() || section->second.choices != std::vector<std::string>{"open"})
        problems.push_back(path + ": hetplan's own key in a section DeepSpeed checks");
      continue;
    }
    const auto it = d.names.find(path);
    if (it == d.names.end()) {
      problems.push_back(path + ": not a DeepSpeed config key");
    } else if (it->second.kind == "ignored") {
      problems.push_back(path + ": DeepSpeed does not read it");
    } else if (it->second.kind == "section") {
      if (value.is_object())
        deepspeed_walk(value, path, d, extensions, problems);
      else
        problems.push_back(path + ": expected a section (object)");
    } else {
      check_value(path, value, it->second, problems);
    }
  }
}

inline std::vector<std::string> deepspeed_problems(const std::string& text, const Definitions& d,
                                                   const std::set<std::string>& extensions) {
  std::vector<std::string> problems;
  const Json j = Json::parse(text);
  deepspeed_walk(j, "", d, extensions, problems);
  return problems;
}

// The arguments of a PipelineModule (or topology) class a JSON object gives: each one of the
// class's ("CLASS.ARGUMENT" in the definitions), of its kind; `own`: hetplan's keys.
inline void check_arguments(const std::string& where, const std::string& cls, const Json& args,
                            const std::set<std::string>& own, const Definitions& d,
                            std::vector<std::string>& problems) {
  for (const auto& [key, value] : args.items()) {
    if (own.count(key)) continue;
    const auto it = d.names.find(cls + "." + key);
    if (it == d.names.end())
      problems.push_back(fmt::format("{}.{}: not an argument of {}", where, key, cls));
    else
      check_value(where + "." + key, value, it->second, problems);
  }
}

// What DeepSpeed refuses when it runs the config on `world` ranks, with the PipelineModule its
// "hetplan_pipeline_module" describes (none: no pipeline, no mpu): the batch assertion over the
// data-parallel size DeepSpeedConfig counts (the pipeline grid's data axis: the topology's, or
// world / num_stages for the default topology; without an mpu the whole world), and ZeRO stages
// the pipeline engine refuses.
inline std::vector<std::string> deepspeed_run_problems(const std::string& text,
                                                       const Definitions& d, int64_t world) {
  std::vector<std::string> problems;
  const Json j = Json::parse(text);
  int64_t counted = world;
  if (j.contains("hetplan_pipeline_module")) {
    const Json& m = j.at("hetplan_pipeline_module");
    check_arguments("hetplan_pipeline_module", "PipelineModule", m, {"topology", "parts"}, d,
                    problems);
    if (m.contains("topology")) {
      const Json& t = m.at("topology");
      const std::string cls = t.value("class", "");
      const auto& classes = keyed(d, "arguments");
      if (std::none_of(classes.begin(), classes.end(),
                       [&](const auto& a) { return a.at(0) == cls; }))
        problems.push_back("hetplan_pipeline_module.topology.class: not a topology: " + cls);
      check_arguments("hetplan_pipeline_module.topology", cls, t, {"class"}, d, problems);
      int64_t product = 1;
      for (const auto& [key, value] : t.items())
        if (key != "class" && value.is_number_integer()) product *= value.get<int64_t>();
      if (product != world)
        problems.push_back(fmt::format("the topology's dimensions multiply to {}, not the {} ranks",
                                       product, world));
      counted = t.value("num_dp", int64_t{1});
    } else {
      const int64_t stages = m.value("num_stages", int64_t{0});
      if (stages <= 0 || world % stages != 0)
        problems.push_back(
            fmt::format("num_stages {} must divide the {} ranks (PipelineModule)", stages, world));
      else
        counted = world / stages;
    }
    const int zero = j.contains("zero_optimization") ? j["zero_optimization"].value("stage", 0) : 0;
    for (const auto& z : keyed(d, "pipeline-zero-max"))
      if (zero > std::stoi(z.at(0)))
        problems.push_back(
            fmt::format("ZeRO stage {} with a pipeline (the engine takes {} at most)", zero, z[0]));
  }
  for (const auto& b : keyed(d, "batch")) {
    const auto get = [&j](const std::string& key) { return j.value(key, int64_t{-1}); };
    if (get(b.at(0)) != get(b.at(1)) * get(b.at(2)) * counted)
      problems.push_back(
          fmt::format("{} {} != {} {} x {} {} x the data-parallel size DeepSpeed counts, {} "
                      "(DeepSpeedConfig._batch_assertion)",
                      b[0], get(b[0]), b[1], get(b[1]), b[2], get(b[2]), counted));
  }
  return problems;
}

// --- torchtitan: the Python module (current torchtitan) and the TOML job config (older) ---

// The schedule rules of PyTorch's schedules.py for schedule `name` with `n` micro-batches per step
// over `pp` ranks and `stages` stages in all: "v=K" (K stages per rank), "n>=stages", "rounds"
// (n % max(1, n / pp) == 0).
inline std::vector<std::string> schedule_problems(const std::string& name, int64_t pp, int64_t n,
                                                  int64_t stages, const Definitions& d) {
  std::vector<std::string> problems;
  const int64_t v = pp > 0 ? stages / pp : 0;
  for (const auto& rule : keyed(d, "schedule")) {
    if (rule.size() != 2 || rule[0] != name) continue;
    const std::string& r = rule[1];
    if (r.rfind("v=", 0) == 0 && v != std::stoll(r.substr(2)))
      problems.push_back(fmt::format("{}: {} stages per rank, it runs {}", name, v, r.substr(2)));
    if (r == "n>=stages" && n < stages)
      problems.push_back(
          fmt::format("{}: {} micro-batches, fewer than its {} stages", name, n, stages));
    if (r == "rounds" && n % std::max<int64_t>(1, n / pp) != 0)
      problems.push_back(fmt::format("{}: {} micro-batches are no multiple of its {} rounds", name,
                                     n, std::max<int64_t>(1, n / pp)));
  }
  return problems;
}

// Whether `fqn` is a module the definitions list ("module layers.*": layers.<integer>).
inline bool known_module(const std::string& fqn, const Definitions& d) {
  for (const auto& m : keyed(d, "module")) {
    const std::string& name = m.at(0);
    if (name == fqn) return true;
    if (name.size() > 1 && name.back() == '*' &&
        fqn.rfind(name.substr(0, name.size() - 1), 0) == 0 &&
        is_integer(fqn.substr(name.size() - 1)))
      return true;
  }
  return false;
}

inline void check_modules(const std::string& path, const Json& v, const Definitions& d,
                          std::vector<std::string>& problems) {
  if (!v.is_array()) return;
  for (const auto& item : v) {
    if (item.is_array()) check_modules(path, item, d, problems);
    if (item.is_string() && !known_module(item.get<std::string>(), d))
      problems.push_back(
          fmt::format("{}: {} is not a module of torchtitan's model", path, item.dump()));
  }
}

// A value as the file writes it: hetplan writes integers, "strings" (JSON escapes), True / False /
// None and lists of them, with a trailing comma in multi-line lists.
inline Json literal_value(std::string v) {
  std::string json;
  bool in_string = false;
  for (size_t i = 0; i < v.size(); ++i) {
    const char c = v[i];
    if (in_string) {
      json += c;
      if (c == '\\' && i + 1 < v.size()) json += v[++i];
      if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    const auto word = [&](const char* py, const char* js) {
      const size_t n = std::char_traits<char>::length(py);
      if (v.compare(i, n, py) != 0) return false;
      json += js;
      i += n - 1;
      return true;
    };
    if (word("True", "true") || word("False", "false") || word("None", "null")) continue;
    json += c;
  }
  // A trailing comma before a closing bracket (", \n  ]") is not JSON.
  std::string out;
  for (size_t i = 0; i < json.size(); ++i) {
    const size_t next = json.find_first_not_of(" \n", i + 1);
    if (json[i] == ',' && next != std::string::npos && json[next] == ']') continue;
    out += json[i];
  }
  json = out;
  return Json::parse(json);
}

// A file's settings: field path -> value (Python: "ParallelismConfig.x", "TrainingConfig.x",
// "Trainer.Config.activation_checkpoint"; TOML: "parallelism.x").
struct TorchtitanFile {
  std::map<std::string, Json> values;
  std::vector<std::string> problems;
};

inline int64_t bracket_depth(const std::string& s) {
  return std::count(s.begin(), s.end(), '[') + std::count(s.begin(), s.end(), '(') -
         std::count(s.begin(), s.end(), ']') - std::count(s.begin(), s.end(), ')');
}

inline void put_field(TorchtitanFile& f, const std::string& path, const std::string& text,
                      const Definitions& d) {
  if (f.values.count(path)) f.problems.push_back(path + " given twice");
  const auto it = d.names.find(path);
  if (it == d.names.end()) {
    f.problems.push_back(path + ": not a field of torchtitan's config");
    return;
  }
  Json v = literal_value(text);
  check_value(path, v, it->second, f.problems);
  if (path.find("module_fqns_per_model_part") != std::string::npos ||
      path.find("split_points") != std::string::npos)
    check_modules(path, v, d, f.problems);
  f.values[path] = std::move(v);
}

// The Python module hetplan writes: "from M import A, B" lines, and in its function
// "config.SECTION.FIELD = V", "config.SECTION = CLASS(" + "FIELD=V," lines + ")" and
// "config.activation_checkpoint = POLICY".
inline TorchtitanFile torchtitan_python(const std::string& text, const Definitions& d) {
  TorchtitanFile f;
  std::map<std::string, std::string> section_class;
  for (const auto& s : keyed(d, "section")) section_class[s.at(0)] = s.at(1);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("from ", 0) == 0) {
      const size_t imp = line.find(" import ");
      const std::string module = line.substr(5, imp - 5);
      for (std::string name : split(line.substr(imp + 8), ',')) {
        name.erase(0, name.find_first_not_of(' '));
        bool found = false;
        for (const auto& i : keyed(d, "import"))
          found = found || (i.at(0) == module && std::count(i.begin() + 1, i.end(), name));
        if (!found) f.problems.push_back(fmt::format("{} does not export {}", module, name));
      }
      continue;
    }
    if (line.rfind("    config.", 0) != 0) continue;
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) {
      f.problems.push_back("cannot read line \"" + line + "\"");
      continue;
    }
    const std::string target = line.substr(11, eq - 11), value = line.substr(eq + 3);
    const size_t dot = target.find('.');
    if (dot != std::string::npos) {  // config.SECTION.FIELD = V
      const auto cls = section_class.find(target.substr(0, dot));
      if (cls == section_class.end())
        f.problems.push_back("config." + target.substr(0, dot) + ": not a section hetplan knows");
      else
        put_field(f, cls->second + "." + target.substr(dot + 1), value, d);
    } else if (section_class.count(target)) {  // config.SECTION = CLASS(...)
      const std::string& cls = section_class.at(target);
      if (value != cls + "(") f.problems.push_back("config." + target + ": not a " + cls);
      for (std::string arg; std::getline(lines, arg) && arg != "    )";) {
        for (std::string more; bracket_depth(arg) > 0 && std::getline(lines, more);)
          arg += "\n" + more;
        const size_t start = arg.find_first_not_of(' '), is = arg.find('=');
        if (is == std::string::npos) {
          f.problems.push_back("cannot read line \"" + arg + "\"");
          continue;
        }
        std::string v = arg.substr(is + 1);
        if (!v.empty() && v.back() == ',') v.pop_back();
        put_field(f, cls + "." + arg.substr(start, is - start), v, d);
      }
    } else {
      bool known = false;
      for (const auto& p : keyed(d, "policy"))
        if (p.at(0) == target) {
          known = true;
          const auto values = split(p.at(1), ',');
          if (!std::count(values.begin(), values.end(), value))
            f.problems.push_back(
                fmt::format("config.{} = {}: not one of its values", target, value));
        }
      if (!known) f.problems.push_back("config." + target + ": not a field hetplan knows");
      f.values["Trainer.Config." + target] = value;
    }
  }
  return f;
}

// The TOML job config hetplan writes: [section] tables, key = value lines, arrays of strings
// possibly over several lines.
inline TorchtitanFile torchtitan_toml(const std::string& text, const Definitions& d) {
  TorchtitanFile f;
  std::istringstream lines(text);
  std::string section;
  std::set<std::string> seen;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      const auto it = d.names.find(section);
      if (it == d.names.end() || it->second.kind != "section")
        f.problems.push_back(fmt::format("[{}]: not a torchtitan config section", section));
      if (!seen.insert(section).second) f.problems.push_back("[" + section + "] given twice");
      continue;
    }
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos || section.empty()) {
      f.problems.push_back("cannot read line \"" + line + "\"");
      continue;
    }
    std::string value = line.substr(eq + 3);
    for (std::string more; bracket_depth(value) > 0 && std::getline(lines, more);)
      value += "\n" + more;
    put_field(f, section + "." + line.substr(0, eq), value, d);
  }
  return f;
}

inline std::vector<std::string> torchtitan_problems(const std::string& text, const Definitions& d) {
  return torchtitan_toml(text, d).problems;
}

inline std::vector<std::string> torchtitan_python_problems(const std::string& text,
                                                           const Definitions& d) {
  return torchtitan_python(text, d).problems;
}

// What torchtitan and PyTorch refuse when they run the file: the schedule's micro-batch and stage
// rules, and (Python form) the Trainer's rules. `p`: the prefix of the parallelism fields
// ("ParallelismConfig." or "parallelism."); `n`: micro-batches per pipeline step.
inline std::vector<std::string> torchtitan_run_problems(const TorchtitanFile& f,
                                                        const Definitions& d, const std::string& p,
                                                        int64_t n) {
  std::vector<std::string> problems;
  const auto number = [&f](const std::string& path, int64_t otherwise) {
    const auto it = f.values.find(path);
    return it != f.values.end() && it->second.is_number_integer() ? it->second.get<int64_t>()
                                                                  : otherwise;
  };
  const int64_t pp = number(p + "pipeline_parallel_degree", 1);
  if (pp > 1) {
    const auto sched = f.values.find(p + "pipeline_parallel_schedule");
    const std::string name = sched == f.values.end() ? "1F1B" : sched->second.get<std::string>();
    const auto parts = f.values.find(p + "module_fqns_per_model_part");
    const auto points = f.values.find(p + "pipeline_parallel_split_points");
    bool single = false;
    for (const auto& r : keyed(d, "schedule"))
      single = single || (r.at(0) == name && r.at(1) == "v=1");
    // Without a partition torchtitan builds 1 stage per rank for single-stage schedules, else 2.
    const int64_t stages = parts != f.values.end() ? static_cast<int64_t>(parts->second.size())
                           : points != f.values.end()
                               ? static_cast<int64_t>(points->second.size()) + 1
                               : pp * (single ? 1 : 2);
    const auto broken = schedule_problems(name, pp, n, stages, d);
    problems.insert(problems.end(), broken.begin(), broken.end());
  }
  Settings s;
  for (const auto& [path, value] : f.values)
    s[path] = value.is_boolean() ? (value.get<bool>() ? "True" : "False") : json_text(value);
  const auto broken = rule_problems(s, d);
  problems.insert(problems.end(), broken.begin(), broken.end());
  // divides A B when C: B is a multiple of A where C holds.
  for (const auto& r : keyed(d, "divides"))
    if (r.size() == 4 && holds(s, r[3]) && number(r[1], 0) % std::max<int64_t>(1, number(r[0], 1)))
      problems.push_back(fmt::format("{} {} is no multiple of {} {}", r[1], number(r[1], 0), r[0],
                                     number(r[0], 1)));
  // accumulation T M P: T is a multiple of M x P x dp (Trainer.__init__; P counts only with a
  // pipeline, dp = replicate x shard degrees).
  for (const auto& r : keyed(d, "accumulation")) {
    const int64_t dp = number(p + "data_parallel_replicate_degree", 1) *
                       std::max<int64_t>(1, number(p + "data_parallel_shard_degree", 1));
    const int64_t step = number(r.at(1), 0) * (pp > 1 ? number(r.at(2), 1) : 1) * dp;
    if (step <= 0 || number(r[0], -1) % step != 0)
      problems.push_back(
          fmt::format("{} {} is no multiple of the {} tokens of one accumulation "
                      "step",
                      r[0], number(r[0], -1), step));
  }
  return problems;
}

}  // namespace hetplan::testing
