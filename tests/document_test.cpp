#include "costmodel/document.h"

#include <gtest/gtest.h>

#include "costmodel/errors.h"

namespace hetplan {
namespace {

TEST(Document, YamlScalarsBecomeTypedJson) {
  Json j = yaml_to_json("a: 3\nb: 2.5\nc: true\nd: hello\ne: '7'\nf: ~\ng: 1e9\n", "t.yaml");
  EXPECT_TRUE(j["a"].is_number_integer());
  EXPECT_EQ(j["a"].get<int>(), 3);
  EXPECT_DOUBLE_EQ(j["b"].get<double>(), 2.5);
  EXPECT_EQ(j["c"].get<bool>(), true);
  EXPECT_EQ(j["d"].get<std::string>(), "hello");
  EXPECT_TRUE(j["e"].is_string());  // quoted stays a string
  EXPECT_TRUE(j["f"].is_null());
  EXPECT_DOUBLE_EQ(j["g"].get<double>(), 1e9);
}

TEST(Document, DuplicateYamlKeyIsAnError) {
  EXPECT_THROW(yaml_to_json("a: 1\na: 2\n", "t.yaml"), InputError);
}

std::string yaml_error(const std::string& text) {
  try {
    yaml_to_json(text, "t.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// JSON's numbers past a double name their path with list indices too.
TEST(Document, JsonNumberPastADoubleNamesItsPath) {
  try {
    parse_document(R"({"collectives": [{"time": {"median_s": 1}}, {"time": {"median_s": 1e400}}]})",
                   "c.json", DocumentFormat::kJson);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "collectives[1].time.median_s");
  }
}

// QA: `hidden: 1e400` became the string "1e400" (and "expected a number, found the string"); the
// YAML reader now names the key path, list indices included, as the JSON reader does.
TEST(Document, YamlErrorsNameTheKeyPath) {
  EXPECT_EQ(yaml_error("block:\n  hidden: 1e400\n"),
            "t.yaml: block.hidden: expected a number within +-1.8e308, found 1e400");
  EXPECT_EQ(yaml_error("groups:\n  - count: 1\n  - count: -1e999\n"),
            "t.yaml: groups[1].count: expected a number within +-1.8e308, found -1e999");
  EXPECT_EQ(yaml_error("block:\n  heads: 8\n  heads: 16\n"),
            "t.yaml: block.heads: duplicate key (line 3)");
  // Tiny numbers round to zero without harm; words stay words.
  EXPECT_EQ(yaml_error("a: 1e-400\nb: e400\n"), "");
}

// QA: {"gpu_type": "t4", "gpu_type": "v100"} read as v100 without a word.
TEST(Document, DuplicateJsonKeyIsAnErrorNamingItsPath) {
  auto error = [](const std::string& text) {
    try {
      parse_document(text, "d.json", DocumentFormat::kJson);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error(R"({"context": {"source": "x", "gpu_type": "t4", "gpu_type": "v100"}})"),
            "d.json: context.gpu_type: duplicate key (only one value may be given)");
  EXPECT_EQ(error(R"({"gemm": [{"m": 1}, {"m": 1, "n": 2, "m": 3}]})"),
            "d.json: gemm[1].m: duplicate key (only one value may be given)");
  EXPECT_EQ(error(R"({"a": [[1, 2], [3, {"x": 1, "x": 2}]]})"),
            "d.json: a[1][1].x: duplicate key (only one value may be given)");
  // The same key in sibling and nested objects is no duplicate.
  EXPECT_EQ(error(R"([{"m": 1}, {"x": {"m": 1}, "m": 2, "y": [{"m": 1}, {"m": 1}]}])"), "");
}

TEST(Document, MalformedInputNamesTheFile) {
  try {
    parse_document("{\"a\": ", "bad.json", DocumentFormat::kJson);
    FAIL();
  } catch (const InputError& e) {
    // The parser's own words, without its "[json.exception.parse_error.101] " identifier.
    EXPECT_EQ(
        std::string(e.what()).find("bad.json: malformed JSON: parse error at line 1, column "), 0u)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find("json.exception"), std::string::npos) << e.what();
  }
}

TEST(ObjectReader, NumbersInARange) {
  const Json j = Json::parse(R"({"a": 0.5, "b": 1.5, "c": -0.0})");
  ObjectReader r(j, "r.json");
  EXPECT_EQ(r.number_in("a", 0, 1), 0.5);
  EXPECT_EQ(r.number_in_or("z", 0, 1, 0.25), 0.25);  // absent
  EXPECT_EQ(r.number_in("c", 0, 1), 0.0);            // the ends are in
  try {
    r.number_in_or("b", 0, 1, 0.25);
    FAIL() << "1.5 was read as in [0, 1]";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "r.json: b: expected a number from 0 to 1, found 1.5");
  }
}

TEST(ObjectReader, ReportsKeyPathAndExpectation) {
  Document doc =
      parse_document(R"({"outer": {"items": [{"n": -2}]}})", "f.json", DocumentFormat::kJson);
  ObjectReader r(doc);
  auto items = r.object("outer").objects("items");
  ASSERT_EQ(items.size(), 1u);
  try {
    items[0].positive_integer("n");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "f.json: outer.items[0].n: expected a whole number > 0, found -2");
    EXPECT_EQ(e.key_path(), "outer.items[0].n");
  }
}

// QA: a YAML file of comments only said "expected an object, found null".
TEST(ObjectReader, AFileWithNothingInItSaysSo) {
  const Document doc =
      parse_document("# a model, to be written\n", "m.yaml", DocumentFormat::kYaml);
  try {
    ObjectReader r(doc);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "m.yaml: (top level): expected an object (key: value mapping), found nothing "
                 "(the file is empty or holds only comments)");
  }
  // A file that holds something else is told by what it holds.
  const Document list = parse_document("- 1\n", "l.yaml", DocumentFormat::kYaml);
  try {
    ObjectReader r(list);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "l.yaml: (top level): expected an object (key: value mapping), found a list of 1");
  }
}

TEST(ObjectReader, UnknownKeyIsRejectedByFinish) {
  Document doc = parse_document("hidden: 10\nhiden: 3\n", "m.yaml", DocumentFormat::kYaml);
  ObjectReader r(doc);
  EXPECT_EQ(r.integer("hidden"), 10);
  try {
    r.finish();
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "hiden");
    EXPECT_NE(std::string(e.what()).find("unknown key"), std::string::npos);
  }
}

TEST(ObjectReader, MissingAndMistypedValues) {
  Document doc =
      parse_document(R"({"s": 3, "x": 1.5, "c": "zz"})", "f.json", DocumentFormat::kJson);
  ObjectReader r(doc);
  EXPECT_THROW(r.string("s"), InputError);
  EXPECT_THROW(r.integer("x"), InputError);  // not whole
  EXPECT_THROW(r.number("missing"), InputError);
  EXPECT_THROW(r.choice("c", {"a", "b"}), InputError);
  EXPECT_EQ(r.integer_or("absent", 7), 7);
}

}  // namespace
}  // namespace hetplan
