// YAML text to JSON values, built from yaml-cpp's parse events rather than from its node graph.
//
// The node graph (YAML::Load) shares an anchored node between its aliases, so it stays small, but
// every reader of it that walks the tree expands them: ten lines of nested aliases ("billion
// laughs") expand to 10^9 values, and `hetplan predict --model FILE` grew past 3.9 GB before it was
// killed. Here each alias is a copy that is counted, and a file whose aliases would add more than
// kMaxAliasValues values (or kMaxAliasTextBytes of text) is refused at the alias that crosses the
// bound, with its line. The events also give merge keys (<<), core-schema tags and a second
// document a line to be named by.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include "costmodel/document.h"
#include "costmodel/errors.h"

namespace hetplan {
namespace {

// What the aliases of one file may add in all. Hand-written files use an alias for a node or a
// block written once and reused a few times (tens to a few thousand values); the bound keeps the
// worst case to milliseconds and a few MB.
constexpr int64_t kMaxAliasValues = 10000;
constexpr int64_t kMaxAliasTextBytes = int64_t{1} << 20;

const std::string kTagPrefix = "tag:yaml.org,2002:";

struct Size {
  int64_t values = 0;
  int64_t text_bytes = 0;
  Size& operator+=(const Size& o) {
    values += o.values;
    text_bytes += o.text_bytes;
    return *this;
  }
};

int line_of(const YAML::Mark& mark) { return mark.line + 1; }

// A plain YAML scalar as JSON: integer, float, bool or null where it reads as one (YAML 1.2 core
// schema), else a string. A number past the range of a double (1e400) is an error at `path`, not
// the string it would otherwise become.
Json plain_scalar(const std::string& s, const std::string& origin, const std::string& path) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  int64_t i = 0;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, i);
  if (ec == std::errc() && p == end) return i;
  // Numbers such as 1e9, 2.5, -0.5, 1_000 is not accepted (YAML 1.2 has no separators).
  double d = 0;
  auto [q, ec2] = std::from_chars(s.data(), end, d);
  if (ec2 == std::errc() && q == end) return d;
  if (ec2 == std::errc::result_out_of_range && q == end) {
    // Past the range either way: 1e-400 underflows to (about) zero, as JSON's parser takes it.
    const double rounded = std::strtod(s.c_str(), nullptr);
    if (std::isfinite(rounded)) return rounded;
    throw InputError(origin, path,
                     fmt::format("expected a number within +-1.8e308, found {}", abbreviated(s)));
  }
  return s;
}

// "!!int" for YAML's own tags, the tag as written otherwise.
std::string shown_tag(const std::string& tag) {
  if (tag.rfind(kTagPrefix, 0) == 0) return "!!" + tag.substr(kTagPrefix.size());
  return tag;
}

class JsonBuilder final : public YAML::EventHandler {
 public:
  explicit JsonBuilder(const std::string& origin) : origin_(origin) {}

  Json take_root() { return std::move(root_); }

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > 1)
      fail(mark, "a second YAML document starts here (a file holds one document)");
  }
  void OnDocumentEnd() override {}

  void OnAnchor(const YAML::Mark&, const std::string& name) override { pending_name_ = name; }

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (is_key_next()) fail(mark, "an empty or null key; expected a name");
    add(nullptr, {1, 0}, anchor, mark);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    if (is_key_next()) {
      if (tag != "?" && tag != "!" && tag != kTagPrefix + "str")
        fail(mark, fmt::format("a key tagged {}; expected a plain name", shown_tag(tag)));
      name_anchor(anchor);
      if (anchor != YAML::NullAnchor) anchors_[anchor] = {Json(value), {1, size(value)}, true};
      set_key(value, tag == "?" && value == "<<", mark);
      return;
    }
    add(scalar(tag, value, mark), {1, size(value)}, anchor, mark);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto it = anchors_.find(anchor);
    const std::string name = names_.count(anchor) ? "*" + names_[anchor] : "the alias";
    if (it == anchors_.end() || !it->second.complete)
      fail(mark, fmt::format("{} refers to the value it is part of (a cycle)", name));
    const Anchored& a = it->second;
    aliased_ += a.size;
    if (aliased_.values > kMaxAliasValues)
      fail(mark, fmt::format("{} takes what the file's aliases add past {} values (hetplan's "
                             "bound on alias expansion, a guard against alias bombs)",
                             name, kMaxAliasValues));
    if (aliased_.text_bytes > kMaxAliasTextBytes)
      fail(mark, fmt::format("{} takes the text the file's aliases add past {} MiB (hetplan's "
                             "bound on alias expansion, a guard against alias bombs)",
                             name, kMaxAliasTextBytes >> 20));
    if (is_key_next()) {
      if (!a.value.is_primitive() || a.value.is_null())
        fail(mark, fmt::format("{} as a key is not a plain name", name));
      set_key(a.value.is_string() ? a.value.get<std::string>() : a.value.dump(), false, mark);
      return;
    }
    add(a.value, a.size, YAML::NullAnchor, mark);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, tag, kTagPrefix + "seq", Json::array(), anchor);
  }
  void OnSequenceEnd() override { close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, tag, kTagPrefix + "map", Json::object(), anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    Json value;  // the object or array being filled
    YAML::anchor_t anchor = YAML::NullAnchor;
    YAML::Mark mark;
    Size size{1, 0};
    bool has_key = false;  // objects: a key read, its value next
    bool merge = false;    // ... and the key was the merge key <<
    std::string key;
    std::vector<Json> merged;  // maps merged in, in order (the first wins, then explicit keys)
  };
  struct Anchored {
    Json value;
    Size size;
    bool complete = false;
  };

  static int64_t size(const std::string& s) { return static_cast<int64_t>(s.size()); }

  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& what) const {
    throw InputError(origin_, abbreviated(path()), fmt::format("line {}: {}", line_of(mark), what));
  }

  // The key path of the value being read: "groups[1].node".
  std::string path() const {
    std::string p;
    for (const Open& o : stack_) {
      if (o.value.is_array())
        p += fmt::format("[{}]", o.value.size());
      else if (o.has_key)
        p += (p.empty() ? "" : ".") + o.key;
    }
    return p;
  }

  bool is_key_next() const {
    return !stack_.empty() && stack_.back().value.is_object() && !stack_.back().has_key;
  }

  void name_anchor(YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor && !pending_name_.empty()) names_[anchor] = pending_name_;
    pending_name_.clear();
  }

  void set_key(const std::string& key, bool merge, const YAML::Mark& mark) {
    Open& o = stack_.back();
    if (!merge && o.value.contains(key)) {
      const std::string at = path();
      throw InputError(origin_, at.empty() ? key : at + "." + key,
                       fmt::format("duplicate key (line {})", line_of(mark)));
    }
    o.key = key;
    o.has_key = true;
    o.merge = merge;
  }

  // A scalar under its tag: YAML 1.2's core schema for plain scalars, strings for quoted ones
  // (yaml-cpp tags them "!") and !!str, and the other core tags checked against their value.
  Json scalar(const std::string& tag, const std::string& value, const YAML::Mark& mark) {
    if (tag == "!" || tag == kTagPrefix + "str") return value;
    if (tag == "?") return plain_scalar(value, origin_, path());
    const Json v = plain_scalar(value, origin_, path());
    const bool fits = tag == kTagPrefix + "int"     ? v.is_number_integer()
                      : tag == kTagPrefix + "float" ? v.is_number()
                      : tag == kTagPrefix + "bool"  ? v.is_boolean()
                      : tag == kTagPrefix + "null"  ? v.is_null()
                                                    : false;
    if (fits) return v;
    const bool known = tag == kTagPrefix + "int" || tag == kTagPrefix + "float" ||
                       tag == kTagPrefix + "bool" || tag == kTagPrefix + "null";
    if (known)
      fail(mark, fmt::format("\"{}\" is not a {} value", abbreviated(value), shown_tag(tag)));
    fail(mark, fmt::format("the tag {}: hetplan reads YAML's core types (!!str, !!int, !!float, "
                           "!!bool, !!null, !!seq, !!map) and no other",
                           shown_tag(tag)));
  }

  void open(const YAML::Mark& mark, const std::string& tag, const std::string& own_tag, Json value,
            YAML::anchor_t anchor) {
    if (is_key_next()) fail(mark, "a list or mapping as a key; expected a plain name");
    if (tag != "?" && tag != "!" && tag != own_tag)
      fail(mark, fmt::format("the tag {} on a {}: expected none or {}", shown_tag(tag),
                             value.is_array() ? "list" : "mapping", shown_tag(own_tag)));
    if (static_cast<int64_t>(stack_.size()) >= kMaxDocumentDepth)
      fail(mark, fmt::format("nested deeper than {} levels", kMaxDocumentDepth));
    name_anchor(anchor);
    if (anchor != YAML::NullAnchor) anchors_[anchor] = {};  // known, not complete: a cycle
    Open o;
    o.value = std::move(value);
    o.anchor = anchor;
    o.mark = mark;
    stack_.push_back(std::move(o));
  }

  void close() {
    Open o = std::move(stack_.back());
    stack_.pop_back();
    // Merged maps fill only the keys the map does not set itself; of two merged maps with the
    // same key the first wins (the YAML merge key's rule).
    for (const Json& m : o.merged)
      for (auto it = m.begin(); it != m.end(); ++it)
        if (!o.value.contains(it.key())) o.value[it.key()] = *it;
    add(std::move(o.value), o.size, o.anchor, o.mark);
  }

  // A finished value: into its list or mapping (or the root), and kept when anchored.
  void add(Json value, const Size& size, YAML::anchor_t anchor, const YAML::Mark& mark) {
    name_anchor(anchor);
    if (anchor != YAML::NullAnchor) anchors_[anchor] = {value, size, true};
    if (stack_.empty()) {
      root_ = std::move(value);
      return;
    }
    Open& o = stack_.back();
    o.size += size;
    if (o.value.is_array()) {
      o.value.push_back(std::move(value));
      return;
    }
    if (o.merge) {
      merge(o, std::move(value), mark);
    } else {
      o.value[o.key] = std::move(value);
    }
    o.has_key = false;
    o.merge = false;
  }

  void merge(Open& o, Json value, const YAML::Mark& mark) {
    const auto mapping = [](const Json& v) { return v.is_object(); };
    if (value.is_object()) {
      o.merged.push_back(std::move(value));
    } else if (value.is_array() && std::all_of(value.begin(), value.end(), mapping)) {
      for (Json& m : value) o.merged.push_back(std::move(m));
    } else {
      fail(mark,
           "the merge key << takes a mapping or a list of mappings, found " + describe_json(value));
    }
  }

  const std::string& origin_;
  Json root_;
  int documents_ = 0;
  std::vector<Open> stack_;
  std::unordered_map<YAML::anchor_t, Anchored> anchors_;
  std::unordered_map<YAML::anchor_t, std::string> names_;
  std::string pending_name_;
  Size aliased_;
};

}  // namespace

Json yaml_to_json(std::string_view text, const std::string& origin) {
  std::istringstream in{std::string(text)};
  JsonBuilder builder(origin);
  try {
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(builder)) {
    }
  } catch (const YAML::Exception& e) {
    throw InputError(origin, "",
                     fmt::format("malformed YAML at line {}, column {}: {}", e.mark.line + 1,
                                 e.mark.column + 1, e.msg));
  }
  return builder.take_root();
}

}  // namespace hetplan
