// The YAML reader's anchors, aliases, merge keys and tags, and the bounds every input document is
// held to (costmodel/yaml_document.cpp, costmodel/document.h).
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "costmodel/document.h"
#include "costmodel/errors.h"

namespace hetplan {
namespace {

std::string yaml_error(const std::string& text) {
  try {
    yaml_to_json(text, "t.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string json_error(const std::string& text) {
  try {
    parse_document(text, "t.json", DocumentFormat::kJson);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// `n` copies of `item`, comma-separated.
std::string repeated(const std::string& item, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += (i ? ", " : "") + item;
  return out;
}

TEST(YamlDocument, AnAliasIsACopyOfItsAnchor) {
  const Json j = yaml_to_json("base: &b {x: 1, y: [2, 3]}\nuse: *b\nn: &n 5\nm: *n\n", "t.yaml");
  EXPECT_EQ(j["use"], j["base"]);
  EXPECT_EQ(j["use"]["y"][1], 3);
  EXPECT_EQ(j["m"], 5);
}

// Nine lines of nested aliases expand to 9^9 strings ("billion laughs"); the reader built them
// until the process passed 3.9 GB. Counting what each alias adds (an anchored list of nine
// strings is 10 values; b = 1 + 9 x 10 = 91; c = 820; d = 7381): after b, c and d the aliases
// have added 90 + 819 + 7380 = 8289 values, and e's first alias of d would add 7381 more, past
// the bound of 10,000 at line 5.
TEST(YamlDocument, AnAliasBombIsRefusedAtTheAliasThatCrossesTheBound) {
  const std::string lol = repeated("\"lol\"", 9);
  std::string text = "a: &a [" + lol + "]\n";
  const std::string names = "abcdefghi";
  for (size_t i = 1; i < names.size(); ++i)
    text +=
        fmt::format("{0}: &{0} [{1}]\n", names[i], repeated(fmt::format("*{}", names[i - 1]), 9));
  EXPECT_EQ(yaml_error(text),
            "t.yaml: e[0]: line 5: *d takes what the file's aliases add past 10000 values "
            "(hetplan's bound on alias expansion, a guard against alias bombs)");
}

// The bound is on what aliases add in all: an anchored list of 99 numbers (100 values) aliased 100
// times adds exactly 10,000; once more is refused.
TEST(YamlDocument, AliasesMayAddTenThousandValues) {
  const std::string anchor = "a: &a [" + repeated("1", 99) + "]\n";
  const Json j = yaml_to_json(anchor + "b: [" + repeated("*a", 100) + "]\n", "t.yaml");
  EXPECT_EQ(j["b"].size(), 100u);
  EXPECT_EQ(j["b"][99].size(), 99u);
  EXPECT_EQ(yaml_error(anchor + "b: [" + repeated("*a", 101) + "]\n"),
            "t.yaml: b[100]: line 2: *a takes what the file's aliases add past 10000 values "
            "(hetplan's bound on alias expansion, a guard against alias bombs)");
}

// A long string aliased a few times is bounded by its text: 4 x 262,145 bytes > 1 MiB.
TEST(YamlDocument, AliasedTextIsBoundedToo) {
  const std::string text = "a: &s \"" + std::string(262145, 'x') + "\"\nb: [*s, *s, *s, *s]\n";
  EXPECT_EQ(yaml_error(text),
            "t.yaml: b[3]: line 2: *s takes the text the file's aliases add past 1 MiB (hetplan's "
            "bound on alias expansion, a guard against alias bombs)");
  EXPECT_EQ(yaml_error("a: &s \"" + std::string(262144, 'x') + "\"\nb: [*s, *s, *s, *s]\n"), "");
}

TEST(YamlDocument, AnAliasInsideItsOwnAnchorIsACycle) {
  EXPECT_EQ(yaml_error("a: &a [1, *a]\n"),
            "t.yaml: a[1]: line 1: *a refers to the value it is part of (a cycle)");
  EXPECT_NE(yaml_error("a: *nowhere\n").find("malformed YAML at line 1"), std::string::npos);
}

// YAML 1.1's merge key (yaml.org/type/merge.html): the mapping's own keys win over merged ones,
// and of a list of merged mappings the first wins.
TEST(YamlDocument, MergeKeysMergeAndTheMappingsOwnKeysWin) {
  const Json j = yaml_to_json(
      "base: &b {x: 1, y: 2}\nother: &o {y: 5, z: 6}\n"
      "one:\n  <<: *b\n  y: 3\n"
      "two: {<<: [*o, *b]}\n"
      "three: {y: 7, <<: *b}\n",
      "t.yaml");
  EXPECT_EQ(j["one"], Json::parse(R"({"x": 1, "y": 3})"));
  EXPECT_EQ(j["two"], Json::parse(R"({"x": 1, "y": 5, "z": 6})"));
  EXPECT_EQ(j["three"], Json::parse(R"({"x": 1, "y": 7})"));
  // A quoted "<<" is an ordinary key.
  EXPECT_EQ(yaml_to_json("\"<<\": 1\n", "t.yaml")["<<"], 1);
  EXPECT_EQ(yaml_error("a: 1\n<<: 5\n"),
            "t.yaml: <<: line 2: the merge key << takes a mapping or a list of mappings, found "
            "the number 5");
}

TEST(YamlDocument, CoreTagsAreReadAndOthersRefused) {
  const Json j = yaml_to_json(
      "a: !!str 5\nb: !!int 7\nc: !!float 3\nd: !!bool true\n"
      "e: !!null ~\nf: !!map {x: 1}\ng: !!seq [1]\n",
      "t.yaml");
  EXPECT_EQ(j["a"], "5");
  EXPECT_EQ(j["b"], 7);
  EXPECT_EQ(j["c"], 3);
  EXPECT_EQ(j["d"], true);
  EXPECT_TRUE(j["e"].is_null());
  EXPECT_EQ(j["f"]["x"], 1);
  EXPECT_EQ(j["g"][0], 1);
  EXPECT_EQ(yaml_error("a: !!int x\n"), "t.yaml: a: line 1: \"x\" is not a !!int value");
  EXPECT_EQ(yaml_error("a: !custom 5\n"),
            "t.yaml: a: line 1: the tag !custom: hetplan reads YAML's core types (!!str, !!int, "
            "!!float, !!bool, !!null, !!seq, !!map) and no other");
  EXPECT_EQ(yaml_error("a:\n  b: !!set {x: ~}\n"),
            "t.yaml: a.b: line 2: the tag !!set on a mapping: expected none or !!map");
}

TEST(YamlDocument, OneDocumentOfPlainKeys) {
  EXPECT_EQ(yaml_error("a: 1\n---\nb: 2\n"),
            "t.yaml: line 2: a second YAML document starts here (a file holds one document)");
  EXPECT_EQ(yaml_error("? [a, b]\n: 1\n"),
            "t.yaml: line 1: a list or mapping as a key; expected a plain name");
  EXPECT_EQ(yaml_error("a:\n  ~: 1\n"), "t.yaml: a: line 2: an empty or null key; expected a name");
  // A leading document marker starts the one document.
  EXPECT_EQ(yaml_to_json("---\na: 1\n", "t.yaml")["a"], 1);
}

// 256 levels of lists read; the 257th is refused where it opens (line 1, under 256 list indices).
TEST(YamlDocument, NestingIsBoundedInYamlAndJson) {
  const auto nested = [](int depth) {
    return std::string(depth, '[') + "1" + std::string(depth, ']');
  };
  EXPECT_EQ(yaml_error("a: " + nested(255) + "\n"), "");  // the mapping is the first level
  EXPECT_NE(yaml_error("a: " + nested(256) + "\n").find(": line 1: nested deeper than 256 levels"),
            std::string::npos);
  EXPECT_EQ(json_error(nested(256)), "");
  EXPECT_NE(json_error(nested(257)).find("nested deeper than 256 levels"), std::string::npos);
  // The key path in the message is cut short: the first 60 characters and its length.
  std::string shown;
  for (int i = 0; i < 20; ++i) shown += "[0]";
  EXPECT_EQ(json_error(nested(257)),
            "t.json: " + shown + "... (768 characters): nested deeper than 256 levels");
}

TEST(YamlDocument, LongValuesAreCutShortInMessages) {
  const Document doc =
      parse_document("c: " + std::string(1000, 'z') + "\n", "t.yaml", DocumentFormat::kYaml);
  ObjectReader r(doc);
  try {
    r.choice("c", {"a", "b"});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "t.yaml: c: expected one of a, b, found \"" +
                                         std::string(60, 'z') + "... (1000 characters)\"");
  }
}

TEST(ObjectReader, WholeNumbersInARangeNameBothEnds) {
  const Document doc =
      parse_document(R"({"a": 9, "b": 4611686018427387904})", "f.json", DocumentFormat::kJson);
  ObjectReader r(doc);
  EXPECT_EQ(r.integer_in_or("absent", 1, 8, 3), 3);
  try {
    r.integer_in("a", 1, 8);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "f.json: a: expected a whole number from 1 to 8, found 9");
  }
  EXPECT_THROW(r.integer_in_or("b", 1, 1 << 20, 1), InputError);
}

}  // namespace
}  // namespace hetplan
