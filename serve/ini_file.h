// A strict reader for the INI files Helix writes (Python configparser syntax) and for the values
// in them, which Helix evaluates as Python expressions: "1000 * mbps", "16 * GB", "1 * MilliSec",
// "[0, 1, 'sink']", "\"L4\"". Every error names the file, the section, the key and the line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace hetplan::serve {

// One `key = value` line (values may continue on indented lines, as in configparser).
struct IniEntry {
  std::string key;  // lower-cased, as configparser does
  std::string value;
  int line = 0;
};

struct IniSection {
  std::string name;
  int line = 0;
  std::vector<IniEntry> entries;
};

// A parsed INI file. Section names keep their case; keys are lower-cased.
class IniFile {
 public:
  // Reads and parses `path`; throws InputError (file and line) for malformed text.
  static IniFile load(const std::filesystem::path& path);
  static IniFile parse(const std::string& text, std::string origin);

  const std::string& origin() const { return origin_; }
  const std::vector<IniSection>& sections() const { return sections_; }
  bool has_section(const std::string& name) const;
  // The section; throws InputError naming the file when it is missing.
  const IniSection& section(const std::string& name) const;

 private:
  std::string origin_;
  std::vector<IniSection> sections_;
  std::map<std::string, size_t> index_;
};

// The kind of quantity a Helix value is expected to hold, with the unit names it may use.
enum class HelixQuantity { kBandwidth, kBytes, kSeconds };

// Typed access to one section's values with errors that name file, section, key and line.
class IniSectionReader {
 public:
  IniSectionReader(const IniFile& file, const IniSection& section);
  IniSectionReader(const IniFile& file, const std::string& section_name);

  bool has(const std::string& key) const;
  int line_of(const std::string& key) const;
  // The raw text of a required key.
  const std::string& text(const std::string& key) const;
  // "12.5 * mbps" as bytes/s (Helix's units trap: mbps/gbps are 1e6/1e9 BYTES per second),
  // "16 * GB" as bytes, "1 * MilliSec" as seconds; a bare number is taken in base units.
  // A negative value (Helix writes -1 for "unlimited") is returned as is.
  double quantity(const std::string& key, HelixQuantity kind) const;
  int64_t integer(const std::string& key) const;
  // A bare word or a quoted string ("L4", L4 or 'L4').
  std::string word(const std::string& key) const;
  // A Python list of integers and quoted strings, each returned as text ("source", "3").
  std::vector<std::string> list(const std::string& key) const;
  // Rejects any key of the section not in `allowed` (typos do not become silent defaults).
  void only(std::initializer_list<const char*> allowed) const;
  const IniSection& section() const { return section_; }
  // The error for `key` ("file: section [S], key 'k' (line N): expected ...").
  [[noreturn]] void fail(const std::string& key, const std::string& expected) const;

 private:
  const IniEntry& entry(const std::string& key) const;

  const IniFile& file_;
  const IniSection& section_;
};

}  // namespace hetplan::serve
