// kw-server under mutated input: seeded mutations of valid reports, job
// submissions and request targets, posted to a real server on a real
// database. None may get a 5xx or end the connection without an answer, and
// the server must still be healthy after them. The seed is printed with
// every failure so it can be replayed (KW_FUZZ_SEED, KW_FUZZ_COUNT).
#include <chrono>
#include <cstdlib>
#include <random>

#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "server_fixture.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : rng_(seed) {}

  std::size_t below(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }

  // A value of a kind the contract does not expect there.
  json hostile_value() {
    switch (below(18)) {
      case 0:
        return nullptr;
      case 1:
        return true;
      case 2:
        return -1;
      case 3:
        return 0;
      case 4:
        return 2147483648LL;
      case 5:
        return 9223372036854775807LL;
      case 6:
        return 1e308;
      case 7:
        return -1e308;
      case 8:
        return 0.5;
      case 9:
        return 5e-324;
      case 10:
        return "";
      case 11:
        return std::string(300, 'n');
      case 12:
        return std::string(70000, 'x');
      case 13:
        return std::string("nul\0in", 6);
      case 14:
        return "\xF0\x9F\x98\x80 caf\xC3\xA9";
      case 15:
        return json::array();
      case 16:
        return json::object();
      default: {
        json nested = 1;
        for (int i = 0, depth = 40 + static_cast<int>(below(60)); i < depth; ++i)
          nested = json::array({nested});
        return nested;
      }
    }
  }

  // One structural change at a random place of `document`.
  void mutate(json& document) {
    json* node = &document;
    for (int depth = 0; depth < 6 && node->is_structured() && !node->empty() && below(4) != 0; ++depth) {
      if (node->is_object()) {
        auto it = node->begin();
        std::advance(it, static_cast<std::ptrdiff_t>(below(node->size())));
        node = &it.value();
      } else {
        node = &(*node)[below(node->size())];
      }
    }
    const std::size_t action = below(4);
    if (action == 0 && node->is_object() && !node->empty()) {
      auto it = node->begin();
      std::advance(it, static_cast<std::ptrdiff_t>(below(node->size())));
      node->erase(it);
    } else if (action == 1 && node->is_object()) {
      (*node)["unexpected_" + std::to_string(below(100))] = hostile_value();
    } else if (action == 2 && node->is_array() && !node->empty()) {
      node->erase(below(node->size()));
    } else {
      *node = hostile_value();
    }
  }

  // Byte-level damage to a serialized document.
  std::string damage(std::string text) {
    static const char* const kInserts[] = {
        "1e400", "\\u0000", "\\ud800", "-0", "\"", "{", "]", ",,", "\xff", "NaN", "9999999999999999999999"};
    std::size_t at = below(text.size() + 1);
    switch (below(4)) {
      case 0:
        if (at < text.size()) text[at] = static_cast<char>(below(256));
        break;
      case 1:
        text.insert(at, kInserts[below(std::size(kInserts))]);
        break;
      case 2:
        text.resize(at);
        break;
      default:
        text.insert(at, text.substr(at, below(64)));
    }
    return text;
  }

  // A request target with a hostile path segment or query.
  std::string target() {
    static const char* const kSegments[] = {"%ff", "%00",      "%zz",   "%",      "%e2%82", "..",
                                            "a'b", "%27%3b--", "x%2Fy", "%c0%af", "+",      "demo"};
    static const char* const kRoutes[] = {
        "/api/v1/projects/",    "/api/v1/runs/", "/api/v1/jobs/", "/", "/api/v1/projects/demo/series?case=",
        "/api/v1/compare?base="};
    std::string target = kRoutes[below(std::size(kRoutes))];
    for (std::size_t i = 0, n = 1 + below(3); i < n; ++i) target += kSegments[below(std::size(kSegments))];
    if (below(3) == 0) target += "/cases";
    return target;
  }

 private:
  std::mt19937_64 rng_;
};

class FuzzTest : public ServerTest {};

TEST_F(FuzzTest, MutatedReportsJobsAndTargetsNeverGet5xx) {
  const char* seed_text = std::getenv("KW_FUZZ_SEED");
  const char* count_text = std::getenv("KW_FUZZ_COUNT");
  const std::uint64_t seed = seed_text ? std::strtoull(seed_text, nullptr, 10) : 20261123;
  const int count = count_text ? std::atoi(count_text) : 10000;
  Mutator mutator(seed);
  ReportSpec spec;
  spec.cases = 2;
  spec.samples = 12;
  const json report = make_report(spec);
  const json job{{"project", "demo"}, {"commit", std::string(40, 'a')}, {"branch", "main"}, {"pr", 7}};

  http::Client agent_client = agent(), ci_client = ci(), reader = client();
  int failures = 0, answered_4xx = 0, stored = 0;
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) {
    std::string method = "POST", target, body;
    http::Client* through = &agent_client;
    const std::size_t kind = mutator.below(10);
    if (kind < 6) {
      json mutated = report;
      for (std::size_t k = 0, n = 1 + mutator.below(3); k < n; ++k) mutator.mutate(mutated);
      target = "/api/v1/runs";
      body = mutated.dump(-1, ' ', false, json::error_handler_t::replace);
      if (kind == 5) body = mutator.damage(body);
    } else if (kind < 8) {
      json mutated = job;
      mutator.mutate(mutated);
      through = &ci_client;
      target = "/api/v1/jobs";
      body = kind == 7 ? mutator.damage(mutated.dump(-1, ' ', false, json::error_handler_t::replace))
                       : mutated.dump(-1, ' ', false, json::error_handler_t::replace);
    } else {
      method = "GET";
      through = &reader;
      target = mutator.target();
    }
    try {
      http::Response response = through->request(method, target, body);
      if (response.status >= 500) {
        if (++failures <= 5)
          ADD_FAILURE() << "seed " << seed << " input " << i << ": " << method << " " << target << " -> "
                        << response.status << " " << response.body.substr(0, 300) << "\n"
                        << body.substr(0, 600);
      }
      answered_4xx += response.status >= 400 && response.status < 500;
      stored += response.status == 201 && target == "/api/v1/runs";
    } catch (const std::exception& error) {
      if (++failures <= 5)
        ADD_FAILURE() << "seed " << seed << " input " << i << ": " << method << " " << target
                      << ": no answer (" << error.what() << ")\n"
                      << body.substr(0, 600);
      // A fresh connection for the next input.
      agent_client = agent();
      ci_client = ci();
      reader = client();
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << count << " inputs in " << seconds << " s (seed " << seed << "): " << answered_4xx
            << " answered 4xx, " << stored << " reports stored, " << failures << " 5xx or unanswered\n";
  EXPECT_EQ(failures, 0);
  EXPECT_GT(answered_4xx, count / 2) << "the mutations should mostly break the contract";
  EXPECT_EQ(client().get("/healthz").status, 200);
}

}  // namespace
}  // namespace kw::server::testing
