#include "serve/ini_file.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan::serve {
namespace {

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool parse_double(const std::string& s, double& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end && std::isfinite(out);
}

struct UnitInfo {
  const char* name;
  HelixQuantity kind;
  double factor;
};

// Helix's constant table (simulator/event_simulator/utils.py). Its kbps/mbps/gbps are powers of
// ten that Helix then treats as BYTES per second, so "12.5 * mbps" is 12.5e6 B/s = 100 Mbit/s
// (the units trap in examples/external/helix/README.md). We keep Helix's meaning, not the name's.
constexpr UnitInfo kUnits[] = {
    {"kbps", HelixQuantity::kBandwidth, 1e3},    {"mbps", HelixQuantity::kBandwidth, 1e6},
    {"gbps", HelixQuantity::kBandwidth, 1e9},    {"Byte", HelixQuantity::kBytes, 1},
    {"KB", HelixQuantity::kBytes, 1e3},          {"MB", HelixQuantity::kBytes, 1e6},
    {"GB", HelixQuantity::kBytes, 1e9},          {"Sec", HelixQuantity::kSeconds, 1},
    {"MilliSec", HelixQuantity::kSeconds, 1e-3},
};

const char* example_of(HelixQuantity kind) {
  switch (kind) {
    case HelixQuantity::kBandwidth:
      return "a bandwidth such as '1000 * mbps' (kbps, mbps or gbps)";
    case HelixQuantity::kBytes:
      return "a size such as '16 * GB' (Byte, KB, MB or GB)";
    case HelixQuantity::kSeconds:
      return "a time such as '1 * MilliSec' (Sec or MilliSec)";
  }
  return "a quantity";
}

std::string unquote(const std::string& s) {
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front())
    return s.substr(1, s.size() - 2);
  return s;
}

}  // namespace

IniFile IniFile::load(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path.string(), "", "cannot open the file (does it exist?)");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path.string());
}

IniFile IniFile::parse(const std::string& text, std::string origin) {
  IniFile file;
  file.origin_ = std::move(origin);
  // A UTF-8 byte-order mark (Windows editors write one) is not part of the first line.
  std::istringstream in(text.rfind("\xEF\xBB\xBF", 0) == 0 ? text.substr(3) : text);
  std::string raw;
  int line_no = 0;
  IniEntry* last_entry = nullptr;
  while (std::getline(in, raw)) {
    ++line_no;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    const bool indented = std::isspace(static_cast<unsigned char>(raw[0]));
    if (indented && last_entry != nullptr) {  // configparser continuation line
      last_entry->value += " " + line;
      continue;
    }
    if (line[0] == '[') {
      if (line.back() != ']' || line.size() < 3)
        throw InputError(file.origin_, fmt::format("line {}", line_no),
                         fmt::format("expected a section header '[name]', found '{}'", line));
      const std::string name = trim(std::string_view(line).substr(1, line.size() - 2));
      if (file.index_.count(name))
        throw InputError(file.origin_, fmt::format("line {}", line_no),
                         fmt::format("section [{}] appears twice (first at line {})", name,
                                     file.sections_[file.index_[name]].line));
      file.index_[name] = file.sections_.size();
      file.sections_.push_back({name, line_no, {}});
      last_entry = nullptr;
      continue;
    }
    const size_t eq = line.find_first_of("=:");
    if (eq == std::string::npos || eq == 0)
      throw InputError(file.origin_, fmt::format("line {}", line_no),
                       fmt::format("expected 'key = value', found '{}'", line));
    if (file.sections_.empty())
      throw InputError(file.origin_, fmt::format("line {}", line_no),
                       "a 'key = value' line before the first [section]");
    IniSection& section = file.sections_.back();
    IniEntry entry{lower(trim(std::string_view(line).substr(0, eq))),
                   trim(std::string_view(line).substr(eq + 1)), line_no};
    for (const auto& other : section.entries)
      if (other.key == entry.key)
        throw InputError(
            file.origin_, fmt::format("[{}] {} (line {})", section.name, entry.key, line_no),
            fmt::format("key appears twice in the section (first at line {})", other.line));
    section.entries.push_back(std::move(entry));
    last_entry = &section.entries.back();
  }
  return file;
}

bool IniFile::has_section(const std::string& name) const { return index_.count(name) > 0; }

const IniSection& IniFile::section(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw InputError(origin_, "[" + name + "]", "missing section");
  return sections_[it->second];
}

IniSectionReader::IniSectionReader(const IniFile& file, const IniSection& section)
    : file_(file), section_(section) {}

IniSectionReader::IniSectionReader(const IniFile& file, const std::string& section_name)
    : file_(file), section_(file.section(section_name)) {}

bool IniSectionReader::has(const std::string& key) const {
  return std::any_of(section_.entries.begin(), section_.entries.end(),
                     [&](const IniEntry& e) { return e.key == key; });
}

const IniEntry& IniSectionReader::entry(const std::string& key) const {
  for (const auto& e : section_.entries)
    if (e.key == key) return e;
  throw InputError(file_.origin(), fmt::format("[{}] (line {})", section_.name, section_.line),
                   fmt::format("missing key '{}'", key));
}

void IniSectionReader::only(std::initializer_list<const char*> allowed) const {
  for (const auto& e : section_.entries) {
    bool known = false;
    std::string list;
    for (const char* k : allowed) {
      known = known || e.key == k;
      list += (list.empty() ? "" : ", ") + std::string(k);
    }
    if (!known) fail(e.key, fmt::format("unknown key (expected one of: {})", list));
  }
}

int IniSectionReader::line_of(const std::string& key) const { return entry(key).line; }

const std::string& IniSectionReader::text(const std::string& key) const { return entry(key).value; }

void IniSectionReader::fail(const std::string& key, const std::string& expected) const {
  const int line = has(key) ? entry(key).line : section_.line;
  throw InputError(file_.origin(), fmt::format("[{}] {} (line {})", section_.name, key, line),
                   expected);
}

double IniSectionReader::quantity(const std::string& key, HelixQuantity kind) const {
  const std::string& value = text(key);
  const size_t star = value.find('*');
  const std::string number = trim(value.substr(0, star));
  double x = 0;
  if (!parse_double(number, x))
    fail(key, fmt::format("expected {}, found '{}'", example_of(kind), value));
  if (star == std::string::npos) return x;
  const std::string unit = trim(value.substr(star + 1));
  for (const auto& u : kUnits) {
    if (unit != u.name) continue;
    if (u.kind != kind)
      fail(key,
           fmt::format("expected {}, found the unit '{}' in '{}'", example_of(kind), unit, value));
    return x * u.factor;
  }
  fail(key, fmt::format("expected {}, found the unknown unit '{}'", example_of(kind), unit));
}

int64_t IniSectionReader::integer(const std::string& key) const {
  const std::string& value = text(key);
  int64_t x = 0;
  const char* end = value.data() + value.size();
  auto [p, ec] = std::from_chars(value.data(), end, x);
  if (ec != std::errc() || p != end)
    fail(key, fmt::format("expected a whole number, found '{}'", value));
  return x;
}

std::string IniSectionReader::word(const std::string& key) const {
  const std::string value = unquote(text(key));
  if (value.empty()) fail(key, "expected a name, found an empty value");
  return value;
}

std::vector<std::string> IniSectionReader::list(const std::string& key) const {
  const std::string& value = text(key);
  if (value.size() < 2 || value.front() != '[' || value.back() != ']')
    fail(key, fmt::format("expected a list such as [0, 1, 'sink'], found '{}'", value));
  std::vector<std::string> out;
  const std::string inner = trim(std::string_view(value).substr(1, value.size() - 2));
  if (inner.empty()) return out;
  std::stringstream ss(inner);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) fail(key, fmt::format("expected a list without empty items: '{}'", value));
    const bool quoted = item.front() == '\'' || item.front() == '"';
    if (quoted) {
      const std::string inner_item = unquote(item);
      if (inner_item.size() + 2 != item.size())
        fail(key, fmt::format("badly quoted item {} in '{}'", item, value));
      out.push_back(inner_item);
      continue;
    }
    int64_t x = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), x);
    if (ec != std::errc() || p != item.data() + item.size())
      fail(key, fmt::format("expected whole numbers or quoted names in the list, found {} in '{}'",
                            item, value));
    out.push_back(item);
  }
  return out;
}

}  // namespace hetplan::serve
