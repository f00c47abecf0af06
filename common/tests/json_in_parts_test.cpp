// parse_in_parts against nlohmann's own parse: the same value for every
// text, the same error for every broken one.
#include "kw/common/json_in_parts.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

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

// A byte-order mark before one element: the whole parse refuses it (a mark
// is skipped only at the start of the text); a part parsed alone skipped it.
TEST(JsonInParts, AByteOrderMarkBeforeAnElementIsRefusedAsWhole) {
  const std::string text = large_document(kCases).dump();
  const std::size_t middle = text.find("{\"empty\"", text.size() / 2);
  const std::size_t element = text.rfind("{\"empty\"", middle - 1);
  ASSERT_NE(element, std::string::npos);
  expect_same_error(text.substr(0, element) + "\xEF\xBB\xBF" + text.substr(element));
  EXPECT_EQ(parse_in_parts("\xEF\xBB\xBF" + text), json::parse("\xEF\xBB\xBF" + text))
      << "at the start: kept";
}

// Random edits of a document large enough to be split, each parsed both
// ways: the same value, or the same error.
TEST(JsonInParts, MutatedDocumentsParseAsTheWholeParserDoes) {
  const std::string text = large_document(300).dump();
  std::string padded = text;
  padded.insert(padded.size() - 1,
                ",\"pad\":\"" + std::string((std::size_t{1} << 20) - text.size() + 64, 'p') + "\"");
  ASSERT_GT(padded.size(), std::size_t{1} << 20);
  std::mt19937_64 rng(11);
  const std::vector<std::string> inserts = {"\xEF\xBB\xBF", ",", "]",    "[",    "{",     "}", "\"",
                                            "\\",           " ", "\x01", "\xFF", "1e400", "-", "tru",
                                            "null",         ":"};
  int refused = 0;
  for (int round = 0; round < 60; ++round) {
    std::string mutated = padded;
    std::uniform_int_distribution<std::size_t> at(0, mutated.size() - 1);
    const std::size_t where = at(rng);
    switch (round % 3) {
      case 0:
        mutated.insert(where, inserts[rng() % inserts.size()]);
        break;
      case 1:
        mutated.erase(where, 1 + rng() % 3);
        break;
      default:
        mutated[where] = static_cast<char>(rng() & 0xff);
    }
    std::string whole, split;
    try {
      whole = json::parse(mutated).dump();
    } catch (const json::exception& error) {
      whole = std::string("error: ") + error.what();
    }
    try {
      split = parse_in_parts(mutated).dump();
    } catch (const json::exception& error) {
      split = std::string("error: ") + error.what();
    }
    ASSERT_EQ(split.substr(0, 300), whole.substr(0, 300)) << "round " << round << " at byte " << where;
    ASSERT_EQ(split, whole) << "round " << round;
    refused += whole.rfind("error: ", 0) == 0 ? 1 : 0;
  }
  EXPECT_GT(refused, 15) << "most edits break the document";
}

// Limits stop the parse at the first excess, split or whole, and what was
// taken from a lease is the estimate of what the value holds.
TEST(JsonInParts, LimitsStopTheParseAtTheFirstExcess) {
  const std::string nested = std::string(65, '[') + std::string(65, ']');
  EXPECT_THROW(parse_in_parts(nested, {64}), JsonTooDeep);
  EXPECT_EQ(parse_in_parts(nested.substr(1, 128), {64}), json::parse(nested.substr(1, 128)));

  std::string empties = "{\"cases\":[{}";
  for (int i = 0; i < 500'000; ++i) empties += ",{}";
  empties += "]}";
  MemoryBudget budget(std::size_t{1} << 30);
  {
    MemoryLease lease(&budget);
    try {
      parse_in_parts(empties, {64, empties.size() * 8, &lease});
      FAIL() << "1.5 MB of empty objects hold over 60 MB";
    } catch (const JsonTooLarge& error) {
      EXPECT_NE(std::string(error.what()).find("more than " + std::to_string(empties.size() * 8) + " bytes"),
                std::string::npos)
          << error.what();
    }
  }
  EXPECT_EQ(budget.used(), 0u) << "the lease gave back what it took";

  // A report-like document fits within 8 times its size, and its estimate is
  // what its lease holds until the lease ends.
  const std::string report = large_document(kCases).dump();
  {
    MemoryLease lease(&budget);
    EXPECT_EQ(parse_in_parts(report, {64, report.size() * 8, &lease}), json::parse(report));
    EXPECT_GT(lease.held(), report.size());
    EXPECT_LT(lease.held(), report.size() * 8);
    EXPECT_EQ(budget.used(), lease.held());
  }
  MemoryBudget small(1 << 20);
  MemoryLease lease(&small);
  EXPECT_THROW(parse_in_parts(report, {64, report.size() * 8, &lease}), MemoryBusy);
}

}  // namespace
}  // namespace kw::common
