// The frameworks' own definitions of the flags and config keys hetplan exports, read from
// tests/data/frameworks/ (transcribed from Megatron-LM, DeepSpeed, torchtitan and PyTorch; each
// file's header says which commit), and checkers that list what an exported file gets wrong.
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

struct Definitions {
  std::map<std::string, Definition> names;
  std::vector<std::vector<std::string>> exclusive;                // at most one given
  std::vector<std::pair<std::string, std::string>> requirements;  // first given: second given
};

inline std::vector<std::string> split(const std::string& text, char by) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, by)) parts.push_back(part);
  return parts;
}

// Reads a tests/data/frameworks/ file: "NAME KIND [CHOICES]" lines, "exclusive A B ..." and
// "requires A B" rules, "#" comments.
inline Definitions load_definitions(const std::string& file) {
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
      d.requirements.emplace_back(w[1], w[2]);
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

// --- Megatron-LM: the MEGATRON_ARGS=( ... ) bash array, one option (and its value) a line ---

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

// Whether rule term "--flag" or "--flag=value" is among the options.
inline bool given(const std::map<std::string, std::string>& options, const std::string& term) {
  const size_t eq = term.find('=');
  const auto it = options.find(term.substr(0, eq));
  return it != options.end() && (eq == std::string::npos || it->second == term.substr(eq + 1));
}

inline std::vector<std::string> megatron_problems(const std::string& text, const Definitions& d) {
  std::vector<std::string> problems;
  const auto options = megatron_options(text);
  if (options.empty()) problems.push_back("no MEGATRON_ARGS=( ... ) array");
  std::map<std::string, std::string> seen;
  for (auto [flag, raw] : options) {
    if (!seen.emplace(flag, raw).second) problems.push_back(flag + " given twice");
    const auto it = d.names.find(flag);
    if (it == d.names.end()) {
      problems.push_back(fmt::format("{}: not an option of arguments.py", flag));
      continue;
    }
    const Definition& def = it->second;
    const bool quoted = raw.size() >= 2 && raw.front() == '"' && raw.back() == '"';
    const std::string value = quoted ? raw.substr(1, raw.size() - 2) : raw;
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
  for (const auto& rule : d.exclusive) {
    std::vector<std::string> both;
    for (const auto& term : rule)
      if (given(seen, term)) both.push_back(term);
    if (both.size() > 1)
      problems.push_back(fmt::format("at most one of {} may be given", fmt::join(both, ", ")));
  }
  for (const auto& [when, then] : d.requirements)
    if (given(seen, when) && !given(seen, then))
      problems.push_back(fmt::format("{} requires {}", when, then));
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

// --- torchtitan: the TOML job config hetplan writes ([section] tables, key = value lines, arrays
// of strings possibly over several lines) ---

// The TOML value as JSON: hetplan writes integers, "strings" (JSON escapes) and arrays of them,
// with a trailing comma in multi-line arrays.
inline Json toml_value(std::string v) {
  for (size_t pos; (pos = v.find(",\n]")) != std::string::npos;) v.erase(pos, 1);
  return Json::parse(v);
}

inline std::vector<std::string> torchtitan_problems(const std::string& text, const Definitions& d) {
  std::vector<std::string> problems;
  std::istringstream lines(text);
  std::string section;
  std::set<std::string> seen;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      const auto it = d.names.find(section);
      if (it == d.names.end() || it->second.kind != "section")
        problems.push_back(fmt::format("[{}]: not a torchtitan config section", section));
      if (!seen.insert(section).second) problems.push_back("[" + section + "] given twice");
      continue;
    }
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos || section.empty()) {
      problems.push_back("cannot read line \"" + line + "\"");
      continue;
    }
    std::string value = line.substr(eq + 3);
    auto depth = [](const std::string& s) {
      return std::count(s.begin(), s.end(), '[') - std::count(s.begin(), s.end(), ']');
    };
    for (std::string more; depth(value) > 0 && std::getline(lines, more);) value += "\n" + more;
    const std::string path = section + "." + line.substr(0, eq);
    if (!seen.insert(path).second) problems.push_back(path + " given twice");
    const auto it = d.names.find(path);
    if (it == d.names.end())
      problems.push_back(path + ": not a field of torchtitan's job config");
    else
      check_value(path, toml_value(value), it->second, problems);
  }
  return problems;
}

}  // namespace hetplan::testing
