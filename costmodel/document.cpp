#include "costmodel/document.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan {
namespace {

std::string lower_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

}  // namespace

Document parse_document(std::string_view text, std::string origin, DocumentFormat format) {
  Document doc{std::move(origin), {}};
  if (format == DocumentFormat::kYaml) {
    doc.root = yaml_to_json(text, doc.origin);
    return doc;
  }
  // nlohmann keeps the last of two equal keys without a word; like the YAML reader, refuse them.
  // Per open object its keys so far and the key being read, per open list the index of the
  // element being read: together the path errors name ("gemm[1].m").
  struct Open {
    bool list = false;
    std::set<std::string> keys;
    std::string key;
    int64_t index = 0;
  };
  std::vector<Open> open;
  const auto path = [&] {
    std::string p;
    for (const auto& o : open)
      p += o.list ? fmt::format("[{}]", o.index) : (p.empty() ? "" : ".") + o.key;
    return p;
  };
  const auto element_done = [&] {
    if (!open.empty() && open.back().list) ++open.back().index;
  };
  const auto track = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (static_cast<int64_t>(open.size()) >= kMaxDocumentDepth)
          throw InputError(doc.origin, abbreviated(path()),
                           fmt::format("nested deeper than {} levels", kMaxDocumentDepth));
        open.push_back({event == Json::parse_event_t::array_start, {}, {}, 0});
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        open.pop_back();
        element_done();
        break;
      case Json::parse_event_t::key:
        if (!open.empty()) {
          open.back().key = parsed.get<std::string>();
          if (!open.back().keys.insert(open.back().key).second)
            throw InputError(doc.origin, path(), "duplicate key (only one value may be given)");
        }
        break;
      case Json::parse_event_t::value:
        element_done();
        break;
    }
    return true;
  };
  try {
    doc.root = Json::parse(text, track);
  } catch (const Json::parse_error& e) {
    throw InputError(doc.origin, "", "malformed JSON: " + json_error_text(e));
  } catch (const Json::out_of_range& e) {
    // A number past the range of a double (1e400): the path open when the parser stopped names it.
    throw InputError(doc.origin, path(),
                     fmt::format("expected a number within +-1.8e308 ({})", json_error_text(e)));
  }
  return doc;
}

std::string json_error_text(const std::exception& e) {
  std::string_view text = e.what();
  if (text.starts_with("[json.exception.")) {
    const size_t end = text.find("] ");
    if (end != std::string_view::npos) text.remove_prefix(end + 2);
  }
  return std::string(text);
}

Document load_document(const std::filesystem::path& path) {
  // A folder opens as a stream that reads nothing, which would parse as an empty document.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(path.string(), "", "a folder; expected a JSON or YAML file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string(), "", "cannot open the file (does it exist?)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string ext = lower_extension(path);
  DocumentFormat format = DocumentFormat::kJson;
  if (ext == ".yaml" || ext == ".yml") {
    format = DocumentFormat::kYaml;
  } else if (ext != ".json") {
    // Sniff: JSON documents start with { or [.
    const std::string text = buffer.str();
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos || (text[first] != '{' && text[first] != '['))
      format = DocumentFormat::kYaml;
  }
  return parse_document(buffer.str(), path.string(), format);
}

std::string abbreviated(std::string_view text) {
  constexpr size_t kShown = 60;
  if (text.size() <= kShown) return std::string(text);
  return fmt::format("{}... ({} characters)", text.substr(0, kShown), text.size());
}

std::string describe_json(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return fmt::format("the boolean {}", value.get<bool>());
    case Json::value_t::string:
      return fmt::format("the string \"{}\"", abbreviated(value.get<std::string>()));
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return fmt::format("the number {}", value.dump());
    case Json::value_t::array:
      return fmt::format("a list of {}", value.size());
    case Json::value_t::object:
      return "an object";
    default:
      return "an unsupported value";
  }
}

ObjectReader::ObjectReader(const Json& object, std::string origin, std::string path)
    : object_(object), origin_(std::move(origin)), path_(std::move(path)) {
  if (!object_.is_object())
    throw InputError(origin_, path_.empty() ? "(top level)" : path_,
                     "expected an object (key: value mapping), found " +
                         (path_.empty() && object_.is_null()
                              ? std::string("nothing (the file is empty or holds only comments)")
                              : describe_json(object_)));
}

std::string ObjectReader::key_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void ObjectReader::fail(std::string_view key, const std::string& expected) const {
  throw InputError(origin_, key.empty() ? path_ : key_path(key), expected);
}

bool ObjectReader::has(std::string_view key) const {
  auto it = object_.find(std::string(key));
  return it != object_.end() && !it->is_null();
}

const Json* ObjectReader::find(std::string_view key) {
  read_.insert(std::string(key));
  auto it = object_.find(std::string(key));
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

const Json& ObjectReader::require(std::string_view key, const char* what) {
  const Json* v = find(key);
  // null reads as absent (an optional key may be written so), but a required key's null is a
  // value to name, not a key missing whose near-spelt neighbour would be guessed at.
  if (!v && object_.contains(std::string(key)))
    fail(key, fmt::format("expected {}, found null", what));
  if (!v) fail(key, fmt::format("missing: expected {}{}", what, misspelling_hint(key)));
  return *v;
}

namespace {

// Levenshtein distance, for telling a misspelt key from an unrelated one.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string ObjectReader::misspelling_hint(std::string_view key) const {
  // A key missing while one spelt nearly like it sits unread ("micro_batch_sise"): say so, or the
  // user fixes the value and never sees the typo.
  // Short keys (dp, tp) are a letter apart from each other: no guesses there.
  if (key.size() < 4) return "";
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    const std::string_view other = it.key();
    if (read_.count(it.key()) != 0 || other.size() < 4) continue;
    const bool extended =
        other.substr(0, key.size()) == key || key.substr(0, other.size()) == other;
    if (extended || edit_distance(other, key) <= (key.size() < 6 ? 1u : 2u))
      return fmt::format(" (the file has \"{}\": a misspelling of {}?)", other, key);
  }
  return "";
}

namespace {

double as_number(const ObjectReader& r, std::string_view key, const Json& v) {
  if (!v.is_number()) r.fail(key, "expected a number, found " + describe_json(v));
  return v.get<double>();
}

int64_t as_integer(const ObjectReader& r, std::string_view key, const Json& v) {
  // An unsigned value past int64 (18446744073709551615) would wrap to a negative one.
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    r.fail(key, "expected a whole number below 2^63, found " + describe_json(v));
  if (v.is_number_integer() || v.is_number_unsigned()) return v.get<int64_t>();
  // Accept 1e9-style integers written as floats, when they are whole.
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // (Past int64 the cast is undefined: 1e30 is no whole number hetplan counts.)
    if (std::fabs(d) < kInt64DoubleLimit && d == static_cast<double>(static_cast<int64_t>(d)))
      return static_cast<int64_t>(d);
  }
  r.fail(key, "expected a whole number, found " + describe_json(v));
}

std::string as_string(const ObjectReader& r, std::string_view key, const Json& v) {
  if (!v.is_string()) r.fail(key, "expected a string, found " + describe_json(v));
  return v.get<std::string>();
}

bool as_bool(const ObjectReader& r, std::string_view key, const Json& v) {
  if (!v.is_boolean()) r.fail(key, "expected true or false, found " + describe_json(v));
  return v.get<bool>();
}

}  // namespace

std::string ObjectReader::string(std::string_view key) {
  return as_string(*this, key, require(key, "a string"));
}
double ObjectReader::number(std::string_view key) {
  return as_number(*this, key, require(key, "a number"));
}
int64_t ObjectReader::integer(std::string_view key) {
  return as_integer(*this, key, require(key, "a whole number"));
}
bool ObjectReader::boolean(std::string_view key) {
  return as_bool(*this, key, require(key, "true or false"));
}

std::string ObjectReader::string_or(std::string_view key, std::string fallback) {
  const Json* v = find(key);
  return v ? as_string(*this, key, *v) : fallback;
}
double ObjectReader::number_or(std::string_view key, double fallback) {
  const Json* v = find(key);
  return v ? as_number(*this, key, *v) : fallback;
}
int64_t ObjectReader::integer_or(std::string_view key, int64_t fallback) {
  const Json* v = find(key);
  return v ? as_integer(*this, key, *v) : fallback;
}
bool ObjectReader::boolean_or(std::string_view key, bool fallback) {
  const Json* v = find(key);
  return v ? as_bool(*this, key, *v) : fallback;
}
std::optional<double> ObjectReader::optional_number(std::string_view key) {
  const Json* v = find(key);
  if (!v) return std::nullopt;
  return as_number(*this, key, *v);
}
std::optional<int64_t> ObjectReader::optional_integer(std::string_view key) {
  const Json* v = find(key);
  if (!v) return std::nullopt;
  return as_integer(*this, key, *v);
}
std::optional<std::string> ObjectReader::optional_string(std::string_view key) {
  const Json* v = find(key);
  if (!v) return std::nullopt;
  return as_string(*this, key, *v);
}

double ObjectReader::positive(std::string_view key) {
  const double v = number(key);
  if (!(v > 0)) fail(key, fmt::format("expected a number > 0, found {}", v));
  return v;
}
int64_t ObjectReader::positive_integer(std::string_view key) {
  const int64_t v = integer(key);
  if (v <= 0) fail(key, fmt::format("expected a whole number > 0, found {}", v));
  return v;
}
double ObjectReader::positive_or(std::string_view key, double fallback) {
  return has(key) ? positive(key) : (find(key), fallback);
}
int64_t ObjectReader::positive_integer_or(std::string_view key, int64_t fallback) {
  return has(key) ? positive_integer(key) : (find(key), fallback);
}
double ObjectReader::non_negative_or(std::string_view key, double fallback) {
  if (!has(key)) return find(key), fallback;
  const double v = number(key);
  if (!(v >= 0)) fail(key, fmt::format("expected a number >= 0, found {}", v));
  return v;
}

double ObjectReader::number_in(std::string_view key, double lo, double hi) {
  const double v = number(key);
  if (!(v >= lo && v <= hi))
    fail(key, fmt::format("expected a number from {} to {}, found {}", lo, hi, v));
  return v;
}

int64_t ObjectReader::integer_in(std::string_view key, int64_t lo, int64_t hi) {
  const int64_t v = integer(key);
  if (v < lo || v > hi)
    fail(key, fmt::format("expected a whole number from {} to {}, found {}", lo, hi, v));
  return v;
}

int64_t ObjectReader::integer_in_or(std::string_view key, int64_t lo, int64_t hi,
                                    int64_t fallback) {
  if (!has(key)) return find(key), fallback;
  return integer_in(key, lo, hi);
}

double ObjectReader::number_in_or(std::string_view key, double lo, double hi, double fallback) {
  if (!has(key)) return find(key), fallback;
  return number_in(key, lo, hi);
}

std::string ObjectReader::choice(std::string_view key,
                                 std::initializer_list<std::string_view> allowed) {
  std::string v = string(key);
  for (auto a : allowed)
    if (v == a) return v;
  std::string list;
  for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  fail(key, fmt::format("expected one of {}, found \"{}\"", list, abbreviated(v)));
}
std::string ObjectReader::choice_or(std::string_view key,
                                    std::initializer_list<std::string_view> allowed,
                                    std::string fallback) {
  if (!has(key)) return find(key), fallback;
  return choice(key, allowed);
}

ObjectReader ObjectReader::object(std::string_view key) {
  const Json& v = require(key, "an object");
  return ObjectReader(v, origin_, key_path(key));
}
std::optional<ObjectReader> ObjectReader::optional_object(std::string_view key) {
  const Json* v = find(key);
  if (!v) return std::nullopt;
  return ObjectReader(*v, origin_, key_path(key));
}

namespace {
const Json& require_array(const ObjectReader& r, std::string_view key, const Json& v) {
  if (!v.is_array()) r.fail(key, "expected a list, found " + describe_json(v));
  return v;
}
}  // namespace

std::vector<ObjectReader> ObjectReader::objects(std::string_view key) {
  const Json& arr = require_array(*this, key, require(key, "a list of objects"));
  std::vector<ObjectReader> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i)
    out.emplace_back(arr[i], origin_, fmt::format("{}[{}]", key_path(key), i));
  return out;
}
std::vector<ObjectReader> ObjectReader::objects_or_empty(std::string_view key) {
  if (!has(key)) return find(key), std::vector<ObjectReader>{};
  return objects(key);
}

std::vector<double> ObjectReader::numbers(std::string_view key) {
  const Json& arr = require_array(*this, key, require(key, "a list of numbers"));
  std::vector<double> out;
  for (size_t i = 0; i < arr.size(); ++i)
    out.push_back(as_number(*this, fmt::format("{}[{}]", key, i), arr[i]));
  return out;
}
std::vector<int64_t> ObjectReader::integers(std::string_view key) {
  const Json& arr = require_array(*this, key, require(key, "a list of whole numbers"));
  std::vector<int64_t> out;
  for (size_t i = 0; i < arr.size(); ++i)
    out.push_back(as_integer(*this, fmt::format("{}[{}]", key, i), arr[i]));
  return out;
}
std::vector<std::string> ObjectReader::strings(std::string_view key) {
  const Json& arr = require_array(*this, key, require(key, "a list of strings"));
  std::vector<std::string> out;
  for (size_t i = 0; i < arr.size(); ++i)
    out.push_back(as_string(*this, fmt::format("{}[{}]", key, i), arr[i]));
  return out;
}

const Json& ObjectReader::raw(std::string_view key) { return require(key, "a value"); }

std::vector<std::string> ObjectReader::keys() {
  std::vector<std::string> out;
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    read_.insert(it.key());
    out.push_back(it.key());
  }
  return out;
}

void ObjectReader::finish() const {
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    if (read_.count(it.key()) == 0) {
      std::string known;
      for (const auto& k : read_) known += (known.empty() ? "" : ", ") + k;
      throw InputError(origin_, key_path(it.key()),
                       fmt::format("unknown key (known keys here: {})", known));
    }
  }
}

std::string string_or(const Json& value, const char* key, std::string otherwise) {
  if (!value.is_object()) return otherwise;
  const auto it = value.find(key);
  return it != value.end() && it->is_string() ? it->get<std::string>() : otherwise;
}

double number_or(const Json& value, const char* key, double otherwise) {
  if (!value.is_object()) return otherwise;
  const auto it = value.find(key);
  return it != value.end() && it->is_number() ? it->get<double>() : otherwise;
}

std::string document_format(const Document& doc) { return string_or(doc.root, "format", ""); }

void require_format(ObjectReader& r, std::string_view format, int64_t schema_version) {
  const std::string found = r.string("format");
  if (found != format)
    r.fail("format", fmt::format("expected \"{}\", found \"{}\"", format, abbreviated(found)));
  const int64_t version = r.integer("schema_version");
  if (version != schema_version)
    r.fail("schema_version", fmt::format("expected {} (this hetplan reads version {}), found {}",
                                         schema_version, schema_version, version));
}

}  // namespace hetplan
