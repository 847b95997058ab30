// Input documents (JSON or YAML) and a strict reader for their objects. Every loader in hetplan
// reads through ObjectReader so that unknown keys, missing keys, wrong types and out-of-range
// values are all reported the same way: file, key path, what was expected.
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace hetplan {

using Json = nlohmann::json;

// Doubles below this magnitude convert to int64 without overflow (just under 2^63): the bound
// for reading a whole number from a double and for writing one as a JSON integer.
inline constexpr double kInt64DoubleLimit = 9.2e18;

// How deeply lists and mappings may nest in an input file (hetplan's own nest under ten deep): a
// file nested deeper is refused where it crosses the bound instead of exhausting the stack of
// whatever walks it.
inline constexpr int64_t kMaxDocumentDepth = 256;

// A parsed document and where it came from (a path, or "preset gpt2-medium").
struct Document {
  std::string origin;
  Json root;
};

enum class DocumentFormat { kJson, kYaml };

// Reads a .json, .yaml or .yml file. Throws InputError when it is missing or malformed.
Document load_document(const std::filesystem::path& path);
// Parses text; `origin` is used in error messages.
Document parse_document(std::string_view text, std::string origin, DocumentFormat format);
// Converts YAML text to JSON values (costmodel/yaml_document.cpp): plain scalars become numbers,
// booleans or null where they read as such; quoted scalars and !!str stay strings. Aliases are
// copies, bounded in all (an alias bomb is refused at its line); merge keys (<<) merge; tags other
// than YAML's core ones, a second document and non-scalar keys are refused with their line.
Json yaml_to_json(std::string_view text, const std::string& origin);
// A JSON library exception's message without its "[json.exception.parse_error.101] " prefix (an
// identifier for the library's maintainers, not for the person fixing the file).
std::string json_error_text(const std::exception& e);

// Strict, typed view of one JSON object. Keys read through it are remembered; finish() rejects any
// key that was never read, so typos do not become silent defaults.
class ObjectReader {
 public:
  ObjectReader(const Json& object, std::string origin, std::string path = "");
  ObjectReader(const Document& doc) : ObjectReader(doc.root, doc.origin) {}

  bool has(std::string_view key) const;
  const std::string& origin() const { return origin_; }
  const std::string& path() const { return path_; }
  std::string key_path(std::string_view key) const;

  // Required values of a type; throw InputError naming the key when missing or mistyped.
  std::string string(std::string_view key);
  double number(std::string_view key);
  int64_t integer(std::string_view key);
  bool boolean(std::string_view key);
  // Optional values: the fallback when the key is absent (or null), checked like required ones.
  std::string string_or(std::string_view key, std::string fallback);
  double number_or(std::string_view key, double fallback);
  int64_t integer_or(std::string_view key, int64_t fallback);
  bool boolean_or(std::string_view key, bool fallback);
  std::optional<double> optional_number(std::string_view key);
  std::optional<int64_t> optional_integer(std::string_view key);
  std::optional<std::string> optional_string(std::string_view key);

  // Range-checked numbers: > 0, >= 0, in [lo, hi].
  double positive(std::string_view key);
  int64_t positive_integer(std::string_view key);
  double positive_or(std::string_view key, double fallback);
  int64_t positive_integer_or(std::string_view key, int64_t fallback);
  double non_negative_or(std::string_view key, double fallback);
  double number_in(std::string_view key, double lo, double hi);
  // A whole number in [lo, hi]; the message names both ends.
  int64_t integer_in(std::string_view key, int64_t lo, int64_t hi);
  int64_t integer_in_or(std::string_view key, int64_t lo, int64_t hi, int64_t fallback);
  double number_in_or(std::string_view key, double lo, double hi, double fallback);
  // One of a fixed set of strings.
  std::string choice(std::string_view key, std::initializer_list<std::string_view> allowed);
  std::string choice_or(std::string_view key, std::initializer_list<std::string_view> allowed,
                        std::string fallback);

  // Nested objects and arrays.
  ObjectReader object(std::string_view key);
  std::optional<ObjectReader> optional_object(std::string_view key);
  std::vector<ObjectReader> objects(std::string_view key);           // required array of objects
  std::vector<ObjectReader> objects_or_empty(std::string_view key);  // absent = empty
  std::vector<double> numbers(std::string_view key);
  std::vector<int64_t> integers(std::string_view key);
  std::vector<std::string> strings(std::string_view key);
  // The raw value (marks the key as read). Throws when missing.
  const Json& raw(std::string_view key);
  // All keys of the object, marking them read (for maps keyed by name).
  std::vector<std::string> keys();

  // " (the file has \"micro_batch_sise\": a misspelling of micro_batch?)" when an unread key of
  // the object is spelt nearly like `key`; "" otherwise.
  std::string misspelling_hint(std::string_view key) const;
  // Throws InputError for the first key that was never read.
  void finish() const;
  [[noreturn]] void fail(std::string_view key, const std::string& expected) const;

 private:
  const Json* find(std::string_view key);
  const Json& require(std::string_view key, const char* what);

  const Json& object_;
  std::string origin_;
  std::string path_;
  std::set<std::string, std::less<>> read_;
};

// `text` for an error message: as it is up to 60 characters, else its start and its length.
std::string abbreviated(std::string_view text);
// Formats a JSON value briefly for an error message ("a string \"abc\"", "the number -3").
std::string describe_json(const Json& value);

// `value`'s string at `key`, else `otherwise` (not an object, the key missing or not a string):
// for free-form records read for a message, where Json::value would throw on another type.
std::string string_or(const Json& value, const char* key, std::string otherwise);
// The same for a number.
double number_or(const Json& value, const char* key, double otherwise);
// A document's "format" string, to tell its kind before reading it; "" when the root is not an
// object or its "format" is missing or not a string (the reader of the kind then says which).
std::string document_format(const Document& doc);

// Reads a file's "format" and "schema_version" keys; fails naming the key unless they are `format`
// and `schema_version` (the one version this hetplan reads).
void require_format(ObjectReader& r, std::string_view format, int64_t schema_version);

}  // namespace hetplan
