// parse_in_parts against nlohmann's own parse: the same value for every
// text, the same error for every broken one.
#include "kw/common/json_in_parts.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace kw::common {
namespace {

using nlohmann::json;

constexpr std::size_t kCases = 1500;  // 1.4 MiB: parsed in parts

// A report-like document over 1 MiB: its "cases" array holds strings with
// quotes, brackets, commas and escapes that a scan for element boundaries
// must step over, and numbers of every form.
json large_document(std::size_t cases) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> ns(1e3, 1e7);
  json document{
      {"schema", "kernelwatch.run/v1"}, {"agent", {{"name", "a\"]}{[,"}}}, {"stages", json::array()}};
  json& all = document["cases"] = json::array();
  for (std::size_t i = 0; i < cases; ++i) {
    json samples = json::array();
    for (int k = 0; k < 40; ++k) samples.push_back(ns(rng));
    all.push_back(
        {{"name", "gemm/\"m\":[" + std::to_string(i) + "]\\{,}"},
         {"params", {{"note", "tab\there, unicode \u00e9\u4e2d, slash \\/"}, {"n", -12}, {"e", 1.5e-300}}},
         {"empty", {{"object", json::object()}, {"array", json::array()}, {"null", nullptr}}},
         {"measurements", {{{"impl", "candidate"}, {"samples_ns", samples}, {"ok", true}}}}});
  }
  return document;
}

void expect_same_error(const std::string& text) {
  std::string expected;
  try {
    const json parsed = json::parse(text);
    FAIL() << "the parser accepted it: " << parsed.type_name();
  } catch (const json::exception& error) {
    expected = error.what();
  }
  try {
    const json parsed = parse_in_parts(text);
    FAIL() << "parse_in_parts accepted what the parser refuses (" << expected << "): " << parsed.type_name();
  } catch (const json::exception& error) {
    EXPECT_EQ(error.what(), expected);
  }
}

TEST(JsonInParts, LargeDocumentsParseToTheSameValue) {
  const json document = large_document(kCases);
  for (int indent : {-1, 1, 4}) {
    const std::string text = document.dump(indent);
    ASSERT_GT(text.size(), std::size_t{1} << 20);
    EXPECT_EQ(parse_in_parts(text), document) << "indent " << indent;
  }
  // Leading and trailing space, a scalar array and a later, smaller one.
  json with_numbers = document;
  for (int i = 0; i < 300000; ++i) with_numbers["numbers"].push_back(i % 7 == 0 ? -i : i);
  EXPECT_EQ(parse_in_parts(" \n" + with_numbers.dump() + "\n\t "), with_numbers);
}

TEST(JsonInParts, SmallAndUnusualDocumentsParseAsWhole) {
  for (const char* text : {"[]", "{}", "1", "\"x\"", "{\"a\":[1,2,3]}"})
    EXPECT_EQ(parse_in_parts(text), json::parse(text));
  // A repeated key, or one spelled with an escape: whichever the parser keeps.
  const std::string body = large_document(kCases).dump();
  const std::string repeated = "{\"cases\":[1]," + body.substr(1);
  EXPECT_EQ(parse_in_parts(repeated), json::parse(repeated));
  const std::string escaped = "{\"cas\\u0065s\":[2]," + body.substr(1);
  EXPECT_EQ(parse_in_parts(escaped), json::parse(escaped));
}

TEST(JsonInParts, BrokenDocumentsGetTheParsersOwnError) {
  const std::string text = large_document(kCases).dump();
  ASSERT_GT(text.size(), std::size_t{1} << 20);
  const std::size_t middle = text.find("{\"empty\"", text.size() / 2);
  ASSERT_NE(middle, std::string::npos);
  expect_same_error(text.substr(0, text.size() - 1));                                // cut short
  expect_same_error(text.substr(0, middle - 1) + " " + text.substr(middle));         // a comma missing
  expect_same_error(text.substr(0, middle) + "," + text.substr(middle));             // an empty element
  expect_same_error(text.substr(0, middle) + "]" + text.substr(middle));             // closed early
  expect_same_error(text.substr(0, middle + 2) + "\x01" + text.substr(middle + 2));  // a control character
  expect_same_error(text + "x");                                                     // text after the end
  std::string trailing = text;
  trailing.insert(trailing.find("],\"schema\""), ",");  // a trailing comma in the cases
  expect_same_error(trailing);
  expect_same_error(text.substr(0, middle) + "1e400," + text.substr(middle));  // out of range
}

}  // namespace
}  // namespace kw::common
