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
#include "kw/http/gzip.hpp"
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
        return std::string(20000 + below(50000), "x/._-"[below(5)]);
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

class FuzzTest : public ServerTest {
 protected:
  // KW_FUZZ_SEED and KW_FUZZ_COUNT replay or widen a run.
  static std::uint64_t seed_or(std::uint64_t fallback) {
    const char* text = std::getenv("KW_FUZZ_SEED");
    return text ? std::strtoull(text, nullptr, 10) : fallback;
  }
  static int count_or(int fallback) {
    const char* text = std::getenv("KW_FUZZ_COUNT");
    return text ? static_cast<int>(std::strtol(text, nullptr, 10)) : fallback;
  }
};

TEST_F(FuzzTest, MutatedReportsJobsAndTargetsNeverGet5xx) {
  const std::uint64_t seed = seed_or(20261123);
  const int count = count_or(10000);
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

// Every write endpoint, each with a valid body mutated: project settings,
// tokens, projects, jobs and their holder's calls, acknowledgements and
// profiles. Each goes through a token of the scope it needs (admin for the
// admin routes), so the mutations reach the handlers' checks.
TEST_F(FuzzTest, EveryWriteEndpointNeverGets5xx) {
  const std::uint64_t seed = seed_or(20261125);
  const int count = count_or(3000);
  Mutator mutator(seed);

  // A job held by agent "fuzz-gpu", and a stored run, for the routes that need one.
  ASSERT_EQ(
      ci().post("/api/v1/jobs", {{"project", "demo"}, {"commit", std::string(40, 'b')}, {"branch", "main"}})
          .status,
      201);
  auto claimed =
      agent().post("/api/v1/agents/claim", {{"agent", "fuzz-gpu"}, {"gpus", {"NVIDIA H100 80GB HBM3"}}});
  ASSERT_EQ(claimed.status, 200) << claimed.body;
  const std::string job = "/api/v1/jobs/" + std::to_string(claimed.json()["id"].get<int>());
  ReportSpec spec;
  auto run = agent().post("/api/v1/runs", make_report(spec));
  ASSERT_EQ(run.status, 201) << run.body;
  const std::string run_path = "/api/v1/runs/" + std::to_string(run.json()["run_id"].get<int>());

  struct Endpoint {
    std::string method, target;
    json body;
    std::string token;
  };
  std::vector<Endpoint> endpoints;
  auto add = [&endpoints](std::string method, std::string target, json body, std::string token) {
    endpoints.push_back({std::move(method), std::move(target), std::move(body), std::move(token)});
  };
  add("PUT", "/api/v1/projects/demo/settings",
      json{{"default_branch", "main"},
           {"min_threshold", 0.02},
           {"case_thresholds", {{"attention.fwd", 0.03}}},
           {"energy_threshold", 0.05},
           {"run_alpha", 0.01},
           {"github_repo", "owner/name"},
           {"gitlab_project", "group/sub/name"},
           {"webhook_url", "https://hooks.example.com/hook"}},
      admin_token_);
  add("POST", "/api/v1/tokens", json{{"name", "fuzzed"}, {"scope", "read"}, {"projects", {"demo"}}},
      admin_token_);
  add("DELETE", "/api/v1/tokens/999999", json::object(), admin_token_);
  add("POST", "/api/v1/projects", json{{"name", "fuzzed"}, {"default_branch", "trunk"}}, admin_token_);
  add("POST", "/api/v1/jobs", json{{"project", "demo"}, {"commit", std::string(40, 'c')}, {"branch", "x"}},
      ci_token_);
  add("POST", "/api/v1/agents/claim", json{{"agent", "fuzz-2"}, {"gpus", {"GPU"}}, {"projects", {"demo"}}},
      agent_token_);
  add("POST", job + "/heartbeat", json{{"agent", "fuzz-gpu"}}, agent_token_);
  add("POST", job + "/stages", json{{"agent", "fuzz-gpu"}, {"started", "build"}}, agent_token_);
  json kernels = json::array({json{{"name", "k"}, {"registers", 32}}});
  json stage{{"name", "build"},
             {"status", "passed"},
             {"duration_ms", 10},
             {"message", ""},
             {"details", json{{"kernels", kernels}}}};
  add("POST", job + "/stages", json{{"agent", "fuzz-gpu"}, {"stage", stage}}, agent_token_);
  add("POST", job + "/fail", json{{"agent", "other-gpu"}, {"reason", "why"}}, agent_token_);
  add("POST", job + "/release", json{{"agent", "other-gpu"}}, agent_token_);
  add("POST", job + "/profile", json{{"agent", "fuzz-gpu"}, {"summary", json::object()}}, agent_token_);
  add("POST", run_path + "/acknowledge", json{{"reason", "intended"}}, ci_token_);
  add("POST", run_path + "/profiles", json{{"case", "attention.fwd"}, {"launch_count", 1}}, ci_token_);
  add("POST", "/api/v1/bisects/1/cancel", json::object(), ci_token_);

  int failures = 0, answered = 0;
  for (int i = 0; i < count; ++i) {
    const Endpoint& endpoint = endpoints[mutator.below(endpoints.size())];
    json mutated = endpoint.body;
    for (std::size_t k = 0, n = 1 + mutator.below(2); k < n; ++k) mutator.mutate(mutated);
    std::string body = mutated.dump(-1, ' ', false, json::error_handler_t::replace);
    if (mutator.below(6) == 0) body = mutator.damage(body);
    try {
      http::Response response = client(endpoint.token).request(endpoint.method, endpoint.target, body);
      ++answered;
      if (response.status >= 500 && ++failures <= 5)
        ADD_FAILURE() << "seed " << seed << " input " << i << ": " << endpoint.method << " "
                      << endpoint.target << " -> " << response.status << " " << response.body.substr(0, 300)
                      << "\n"
                      << body.substr(0, 600);
    } catch (const std::exception& error) {
      if (++failures <= 5)
        ADD_FAILURE() << "seed " << seed << " input " << i << ": " << endpoint.method << " "
                      << endpoint.target << ": no answer (" << error.what() << ")\n"
                      << body.substr(0, 600);
    }
  }
  std::cout << count << " write requests (seed " << seed << "): " << answered << " answered, " << failures
            << " 5xx or unanswered\n";
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(client().get("/healthz").status, 200);
}

// Gzip bodies damaged as bytes or as members, and report parts (gzip or
// plain, damaged, with a byte-order mark before an element, out of order),
// each upload completed now and then: no 5xx, and a completion never
// fails on a body its parts were accepted as.
TEST_F(FuzzTest, MutatedGzipAndPartBodiesNeverGet5xx) {
  const std::uint64_t seed = seed_or(20261127);
  const int count = count_or(3000);
  Mutator mutator(seed);
  ReportSpec spec;
  spec.cases = 300;  // over 1 MiB as JSON: parsed in parts
  spec.samples = 60;
  spec.replicates = 3;
  const json report = make_report(spec);
  const std::string text = report.dump();
  ASSERT_GT(text.size(), std::size_t{1} << 20);
  const std::string first_part = [&] {
    json head = report;
    head["cases"] = json::array({report["cases"][0]});
    return head.dump();
  }();
  // A byte-order mark before one element of a large body: the whole parser
  // refuses it, and so must the parser in parts (it was accepted, then
  // every completion failed with 500).
  std::string marked = text;
  marked.insert(marked.find("},{\"", text.size() / 2) + 2, "\xEF\xBB\xBF");
  http::Client agent = this->agent();
  auto bom = agent.request("PUT", "/api/v1/projects/demo/uploads/bom-00001/parts/0?of=1", marked);
  EXPECT_EQ(bom.status, 400) << bom.body.substr(0, 300);

  int failures = 0, answered = 0;
  auto send = [&](int i, const std::string& method, const std::string& target, const std::string& body,
                  bool gzip) {
    try {
      http::Response response =
          agent.request(method, target, body,
                        gzip ? std::map<std::string, std::string>{{"Content-Encoding", "gzip"}}
                             : std::map<std::string, std::string>{});
      ++answered;
      if (response.status >= 500 && ++failures <= 5)
        ADD_FAILURE() << "seed " << seed << " input " << i << ": " << method << " " << target << " -> "
                      << response.status << " " << response.body.substr(0, 300);
    } catch (const std::exception& error) {
      if (++failures <= 5)
        ADD_FAILURE() << "seed " << seed << " input " << i << ": " << method << " " << target
                      << ": no answer (" << error.what() << ")";
      agent = this->agent();
    }
  };
  const std::string empty_member = http::gzip_compress("");
  for (int i = 0; i < count; ++i) {
    const std::string upload = "/api/v1/projects/demo/uploads/fuzz-" + std::to_string(10000 + i % 7);
    switch (mutator.below(5)) {
      case 0: {  // a report as gzip, its compressed bytes damaged
        std::string gzip = http::gzip_compress(i % 10 == 0 ? text : first_part);
        send(i, "POST", "/api/v1/runs", mutator.damage(gzip), true);
        break;
      }
      case 1: {  // members: empty ones after, garbage between, too many
        std::string gzip = http::gzip_compress(first_part);
        for (std::size_t k = 0, n = mutator.below(80); k < n; ++k) gzip += empty_member;
        if (mutator.below(3) == 0)
          gzip += std::string(1 + mutator.below(30), static_cast<char>(mutator.below(256)));
        send(i, "POST", "/api/v1/runs", gzip, true);
        break;
      }
      case 2: {  // a part, mutated as JSON, gzip or plain
        json part = json::parse(mutator.below(10) == 0 ? text : first_part);
        mutator.mutate(part);
        const std::string body = part.dump(-1, ' ', false, json::error_handler_t::replace);
        const bool gzip = mutator.below(2) == 0;
        const std::size_t of = 1 + mutator.below(3);
        send(i, "PUT", upload + "/parts/" + std::to_string(mutator.below(of)) + "?of=" + std::to_string(of),
             gzip ? http::gzip_compress(body) : body, gzip);
        break;
      }
      case 3: {  // a part damaged as bytes, a mark before an element among them
        std::string body =
            mutator.below(10) == 0 ? marked : mutator.damage(mutator.below(10) == 0 ? text : first_part);
        send(i, "PUT", upload + "/parts/0?of=1", body, false);
        break;
      }
      default:  // completing whatever the upload holds
        send(i, "POST", upload, "{}", false);
    }
  }
  std::cout << count << " gzip and part bodies (seed " << seed << "): " << answered << " answered, "
            << failures << " 5xx or unanswered\n";
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(client().get("/healthz").status, 200);
}

}  // namespace
}  // namespace kw::server::testing
