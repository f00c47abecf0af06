// Every endpoint's success and error paths against a real server and database.
#include <functional>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "audit_claim.hpp"
#include "kw/common/sha256.hpp"
#include "kw/http/gzip.hpp"
#include "server_fixture.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

class ApiTest : public ServerTest {};

TEST_F(ApiTest, HealthzReportsSchemaVersion) {
  auto response = client().get("/healthz");
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(response.json()["status"], "ok");
  EXPECT_GE(response.json()["schema_version"].get<int>(), 1);
}

TEST_F(ApiTest, PostRunStoresEverythingAndGetReturnsIt) {
  ReportSpec spec;
  spec.cases = 4;
  spec.samples = 25;
  json report = make_report(spec);
  auto created = agent().post("/api/v1/runs", report);
  ASSERT_EQ(created.status, 201) << created.body;
  std::int64_t run_id = created.json()["run_id"];
  EXPECT_EQ(created.json()["verdict"], "pass");
  EXPECT_EQ(created.json()["duplicate"], false);

  auto fetched = client().get("/api/v1/runs/" + std::to_string(run_id));
  ASSERT_EQ(fetched.status, 200) << fetched.body;
  json run = fetched.json();
  EXPECT_EQ(run["commit"], report["commit"]);
  EXPECT_EQ(run["project"], "demo");
  EXPECT_EQ(run["gpu_model"], "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(run["stages"].size(), 6u);
  EXPECT_EQ(run["stages"][2]["name"], "launch_geometry");
  ASSERT_EQ(run["cases"].size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(run["cases"][i]["name"], report["cases"][i]["name"]);
    EXPECT_EQ(run["cases"][i]["launches"][0]["block"], json({128, 1, 1}));
    // Raw samples come back exactly, in order.
    EXPECT_EQ(run["cases"][i]["measurements"][0]["impl"], "candidate");
    EXPECT_EQ(run["cases"][i]["measurements"][0]["samples_ns"],
              report["cases"][i]["measurements"][0]["samples_ns"]);
  }
}

// Replicate tags in blocks, the agent's shape, are kept as the blocks'
// sizes; tags in another order as they are. Both read back as sent, and
// judge the next run alike.
TEST_F(ApiTest, ReplicateTagsReadBackAsSentHoweverTheyAreKept) {
  ReportSpec spec;
  spec.cases = 2;
  spec.samples = 4;
  spec.replicates = 3;
  json report = make_report(spec);
  json& interleaved = report["cases"][1]["measurements"][0];
  for (std::size_t i = 0; i < interleaved["replicates"].size(); ++i) interleaved["replicates"][i] = i % 3;
  ASSERT_EQ(agent().post("/api/v1/runs", report).status, 201);
  pqxx::result kept =
      sql("SELECT c.name, s.replicates::text, s.replicate_sizes::text FROM samples s JOIN cases c ON c.id = "
          "s.case_id "
          "WHERE s.impl = 'candidate' ORDER BY c.ordinal");
  EXPECT_TRUE(kept[0][1].is_null());
  EXPECT_EQ(kept[0][2].as<std::string>(), "{4,4,4}");
  EXPECT_EQ(kept[1][1].as<std::string>(), "{0,1,2,0,1,2,0,1,2,0,1,2}");
  EXPECT_TRUE(kept[1][2].is_null());
  json run = client().get("/api/v1/runs/1").json();
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(run["cases"][i]["measurements"][0]["replicates"],
              report["cases"][i]["measurements"][0]["replicates"])
        << i;
  }
  spec.commit = kw::testing::make_commit(2);
  spec.seed = 2;
  auto judged = agent().post("/api/v1/runs", make_report(spec));
  ASSERT_EQ(judged.status, 201) << judged.body;
  EXPECT_EQ(judged.json()["verdict"], "pass");
}

// The baseline reason and threshold source a run's comparisons share are kept
// once with the run and read back on every comparison.
TEST_F(ApiTest, ComparisonsShareTheirRunsReason) {
  ReportSpec spec;
  spec.cases = 3;
  spec.replicates = 3;
  spec.samples = 10;
  ASSERT_EQ(agent().post("/api/v1/runs", make_report(spec)).status, 201);
  spec.commit = kw::testing::make_commit(2);
  spec.cases = 4;  // the last one new: no baseline, its own reason
  ASSERT_EQ(agent().post("/api/v1/runs", make_report(spec)).status, 201);
  json run = client().get("/api/v1/runs/2").json();
  std::map<std::string, std::string> reasons;
  for (const json& comparison : run["comparisons"]) {
    if (comparison["impl"] != "candidate") continue;
    reasons[comparison["case"]] = comparison["baseline_reason"];
    EXPECT_EQ(comparison["threshold_source"], "project setting") << comparison;
  }
  ASSERT_EQ(reasons.size(), 4u);
  const std::string stored_reason = run["comparisons"][0]["baseline_reason"];
  EXPECT_NE(stored_reason.find("newest run on main"), std::string::npos) << stored_reason;
  EXPECT_EQ(reasons.rbegin()->second, "") << "the new case had nothing to be compared with";
  EXPECT_EQ(sql("SELECT count(*) FROM comparisons WHERE run_id = 2 AND baseline_reason IS NOT NULL")[0][0]
                .as<int>(),
            static_cast<int>(run["comparisons"].size()) / 4)
      << "only the new case's rows keep their own reason";
  EXPECT_EQ(sql("SELECT comparison_baseline_reason FROM runs WHERE id = 2")[0][0].as<std::string>(),
            stored_reason);
}

TEST_F(ApiTest, SameReportTwiceIsStoredOnce) {
  json report = make_report({});
  auto first = agent().post("/api/v1/runs", report);
  auto second = agent().post("/api/v1/runs", report);
  ASSERT_EQ(first.status, 201);
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.json()["duplicate"], true);
  EXPECT_EQ(second.json()["run_id"], first.json()["run_id"]);
  EXPECT_EQ(sql("SELECT count(*) FROM runs")[0][0].as<int>(), 1);
  // Key order and whitespace do not make a report different.
  auto third = agent().request("POST", "/api/v1/runs", report.dump(2));
  EXPECT_EQ(third.json()["run_id"], first.json()["run_id"]);
}

TEST_F(ApiTest, InvalidReportIs422NamingTheFieldAndStoresNothing) {
  json report = make_report({});
  report["cases"][1]["measurements"][0]["samples_ns"][7] = -3;
  auto response = agent().post("/api/v1/runs", report);
  ASSERT_EQ(response.status, 422) << response.body;
  // The code names the kind of error, `field` the value, the message both for people.
  EXPECT_EQ(response.json()["error"], "out_of_range");
  EXPECT_EQ(response.json()["field"], "cases[1].measurements[0].samples_ns[7]");
  EXPECT_EQ(response.json()["message"], "cases[1].measurements[0].samples_ns[7]: must be finite and > 0");
  EXPECT_EQ(sql("SELECT count(*) FROM runs")[0][0].as<int>(), 0);
}

TEST_F(ApiTest, MalformedJsonIs400) {
  auto response = agent().request("POST", "/api/v1/runs", "{\"schema\": ");
  ASSERT_EQ(response.status, 400) << response.body;
  EXPECT_EQ(response.json()["error"], "bad_json");
}

TEST_F(ApiTest, ReportCarryingJobIdMustGoToTheJob) {
  ReportSpec spec;
  spec.job_id = 5;
  auto response = agent().post("/api/v1/runs", make_report(spec));
  ASSERT_EQ(response.status, 422);
  EXPECT_EQ(response.json()["message"], "job_id: a job's report goes to POST /api/v1/jobs/5/report");
}

TEST_F(ApiTest, UnknownRunAndBadIdsAre404) {
  EXPECT_EQ(client().get("/api/v1/runs/999").status, 404);
  auto bad = client().get("/api/v1/runs/abc");
  EXPECT_EQ(bad.status, 404);
  EXPECT_EQ(bad.json()["error"], "no_such_run");
  EXPECT_EQ(bad.json()["message"], "run \"abc\" is not a positive integer id");
  EXPECT_EQ(client().get("/api/v1/nothing").status, 404);
  EXPECT_EQ(client().get("/api/v1/projects/nope/cases").status, 404);
}

TEST_F(ApiTest, WrongMethodIs405) {
  auto response = agent().request("DELETE", "/api/v1/runs/1");
  EXPECT_EQ(response.status, 405) << response.body;
}

TEST_F(ApiTest, ProjectsCasesRunsAndSeries) {
  for (int i = 0; i < 5; ++i) {
    ReportSpec spec;
    spec.seed = 100 + static_cast<std::uint64_t>(i);
    spec.gpu_model = i % 2 == 0 ? "NVIDIA H100 80GB HBM3" : "NVIDIA L4";
    ASSERT_EQ(agent().post("/api/v1/runs", make_report(spec)).status, 201);
  }
  ReportSpec feature;
  feature.seed = 200;
  feature.branch = "feature";
  ASSERT_EQ(agent().post("/api/v1/runs", make_report(feature)).status, 201);

  json projects = client().get("/api/v1/projects").json();
  ASSERT_EQ(projects.size(), 1u);
  EXPECT_EQ(projects[0]["name"], "demo");
  EXPECT_EQ(projects[0]["runs"], 6);

  json cases = client().get("/api/v1/projects/demo/cases").json();
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0]["name"], "attention.fwd/case0");
  EXPECT_EQ(cases[0]["runs"], 6);

  json runs = client().get("/api/v1/projects/demo/runs?branch=main&limit=3").json();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_GT(runs[0]["id"].get<int>(), runs[1]["id"].get<int>());

  auto series = client().get("/api/v1/projects/demo/series?case=" + http::url_encode("attention.fwd/case1") +
                             "&gpu=" + http::url_encode("NVIDIA L4"));
  ASSERT_EQ(series.status, 200) << series.body;
  json points = series.json();
  ASSERT_EQ(points["run_id"].size(), 2u);  // runs 1 and 3 were on the L4, both on main
  EXPECT_LT(points["run_id"][0].get<int>(), points["run_id"][1].get<int>());
  EXPECT_EQ(points["gpu_model"][0], "NVIDIA L4");
  EXPECT_EQ(points["commit"][1].get<std::string>().size(), 40u);
  EXPECT_DOUBLE_EQ(points["finished_at"][0].get<double>(), 1795255260.0);  // 2026-11-21T10:01:00Z
  EXPECT_GT(points["median_ns"][0]["candidate"].get<double>(), 30000);
  EXPECT_TRUE(points["median_ns"][0].contains("baseline:cudnn"));
  EXPECT_EQ(points["band_ns"][0]["candidate"].size(), 2u);
  EXPECT_EQ(points["acknowledged"], json({false, false}));
  EXPECT_EQ(points["verdict"][0], "pass");
  EXPECT_TRUE(points["status"][1].is_string()) << points["status"];

  json all_gpus = client().get("/api/v1/projects/demo/series?case=attention.fwd/case1").json();
  EXPECT_EQ(all_gpus["run_id"].size(), 5u);  // main only: the feature-branch run is not in the default series
  json feature_series =
      client().get("/api/v1/projects/demo/series?case=attention.fwd/case1&branch=feature").json();
  EXPECT_EQ(feature_series["run_id"].size(), 1u);
  json limited = client().get("/api/v1/projects/demo/series?case=attention.fwd/case1&limit=2").json();
  ASSERT_EQ(limited["run_id"].size(), 2u);
  EXPECT_EQ(limited["run_id"][1], all_gpus["run_id"][4]) << "limit keeps the newest points";
  json none = client().get("/api/v1/projects/demo/series?case=unknown").json();
  EXPECT_EQ(none["run_id"].size(), 0u);

  EXPECT_EQ(client().get("/api/v1/projects/demo/series").status, 400);
  EXPECT_EQ(client().get("/api/v1/projects/nope/series?case=x").json()["error"], "no_such_project");
  EXPECT_EQ(client().get("/api/v1/projects/demo/series?case=x&limit=0").status, 400);
}

TEST_F(ApiTest, FailedStageGivesFailedVerdict) {
  ReportSpec spec;
  spec.failed_stage = "launch_geometry";
  auto response = agent().post("/api/v1/runs", make_report(spec));
  ASSERT_EQ(response.status, 201) << response.body;
  EXPECT_EQ(response.json()["verdict"], "failed");
}

TEST_F(ApiTest, MetricsInPrometheusFormat) {
  client().get("/healthz");
  agent().post("/api/v1/runs", make_report({}));
  auto response = client().get("/metrics");
  ASSERT_EQ(response.status, 200);
  EXPECT_EQ(response.headers["content-type"], "text/plain; version=0.0.4");
  const std::string& text = response.body;
  EXPECT_NE(text.find("kw_http_requests_total{route=\"GET /healthz\",status=\"200\"} 1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("kw_http_requests_total{route=\"POST /api/v1/runs\",status=\"201\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("kw_http_request_duration_seconds_bucket{route=\"POST /api/v1/runs\",le=\"+Inf\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("kw_jobs{state=\"queued\"} 0"), std::string::npos);
  EXPECT_NE(text.find("kw_db_pool_connections{state=\"in_use\"}"), std::string::npos);
  // The post's time, by phase of ingest: each there, and storing took some.
  for (const char* phase : IngestService::kPhaseNames) {
    EXPECT_NE(text.find("kw_ingest_phase_seconds_total{phase=\"" + std::string(phase) + "\"} "),
              std::string::npos)
        << phase;
  }
  EXPECT_GT(metric_value(text, "kw_ingest_phase_seconds_total{phase=\"store\"}"), 0);
  EXPECT_NE(text.find("kw_history_reads_total{database=\"primary\"}"), std::string::npos);
  EXPECT_EQ(text.find("kw_replica_up"), std::string::npos) << "no replica, no replica metrics";
}

// A server with one HTTP option changed from the fixture's.
template <typename Change>
class ServerWithHttp : public ServerTest {
 protected:
  ServerOptions server_options() override {
    ServerOptions options = ServerTest::server_options();
    Change{}(options.http);
    return options;
  }
};

struct BodyLimit4096 {
  void operator()(HttpOptions& http) const { http.body_limit = 4096; }
};
using SmallBodyLimitTest = ServerWithHttp<BodyLimit4096>;

TEST_F(SmallBodyLimitTest, OversizedBodyIs413AndStoresNothing) {
  ReportSpec spec;
  spec.cases = 20;
  auto response = agent().post("/api/v1/runs", make_report(spec));
  ASSERT_EQ(response.status, 413) << response.body;
  EXPECT_EQ(response.json()["error"], "payload_too_large");
  EXPECT_EQ(response.json()["message"], "request body is larger than the limit of 4096 bytes");
  EXPECT_EQ(sql("SELECT count(*) FROM runs")[0][0].as<int>(), 0);
  // The server is still serving.
  EXPECT_EQ(client().get("/healthz").status, 200);
}

struct DecodedBodyLimit1MiB {
  void operator()(HttpOptions& http) const { http.decoded_body_limit = std::size_t{1024} * 1024; }
};
using GzipBodyTest = ServerWithHttp<DecodedBodyLimit1MiB>;

TEST_F(GzipBodyTest, AGzipReportIsStoredAsItsJsonWouldBe) {
  ReportSpec spec;
  spec.cases = 20;
  const json report = make_report(spec);
  auto response = agent().post_gzip("/api/v1/runs", report);
  ASSERT_EQ(response.status, 201) << response.body;
  EXPECT_EQ(sql("SELECT count(*) FROM cases")[0][0].as<int>(), 20);
  // The same report again, plain: the same run (its hash is of the JSON, not of the bytes sent).
  auto again = agent().post("/api/v1/runs", report);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["run_id"], response.json()["run_id"]);
}

TEST_F(GzipBodyTest, BodiesThatCannotBeDecodedAreRefusedNamingWhyAndStoreNothing) {
  // 2 MiB of spaces compress to 2 KiB: under the body limit, over the decoded one.
  const std::string bomb = kw::http::gzip_compress(std::string(std::size_t{2} * 1024 * 1024, ' '));
  auto too_large = agent().request("POST", "/api/v1/runs", bomb, {{"Content-Encoding", "gzip"}});
  ASSERT_EQ(too_large.status, 413) << too_large.body;
  EXPECT_EQ(too_large.json()["error"], "payload_too_large");
  EXPECT_EQ(too_large.json()["message"],
            "the gzip request body decompresses to more than the limit of 1048576 bytes");

  std::string corrupt = kw::http::gzip_compress(make_report({}).dump());
  corrupt[corrupt.size() - 6] ^= 0x5a;  // inside the CRC
  auto bad = agent().request("POST", "/api/v1/runs", corrupt, {{"Content-Encoding", "gzip"}});
  ASSERT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.json()["message"], "Content-Encoding gzip: gzip: CRC mismatch (the data is corrupt)");

  auto plain_as_gzip =
      agent().request("POST", "/api/v1/runs", make_report({}).dump(), {{"Content-Encoding", "gzip"}});
  ASSERT_EQ(plain_as_gzip.status, 400) << plain_as_gzip.body;

  auto brotli = agent().request("POST", "/api/v1/runs", make_report({}).dump(), {{"Content-Encoding", "br"}});
  ASSERT_EQ(brotli.status, 415) << brotli.body;
  EXPECT_EQ(brotli.json()["message"], "Content-Encoding 'br' is not supported: send gzip or identity");

  EXPECT_EQ(sql("SELECT count(*) FROM runs")[0][0].as<int>(), 0);
}

// Who may do what: every write route against every scope.
TEST_F(ApiTest, AuthMatrix) {
  struct Route {
    std::string method, target;
    std::vector<std::string> allowed;  // scopes that get past auth
  };
  std::vector<Route> routes = {
      {"POST", "/api/v1/runs", {"agent", "admin"}},
      {"POST", "/api/v1/jobs", {"ci", "admin"}},
      {"POST", "/api/v1/agents/claim", {"agent", "admin"}},
      {"POST", "/api/v1/jobs/1/heartbeat", {"agent", "admin"}},
      {"POST", "/api/v1/jobs/1/report", {"agent", "admin"}},
  };
  std::map<std::string, std::string> tokens = {
      {"read", read_token_}, {"agent", agent_token_}, {"ci", ci_token_}, {"admin", admin_token_}};
  for (const Route& route : routes) {
    auto anonymous = client().request(route.method, route.target, "{}");
    EXPECT_EQ(anonymous.status, 401) << route.method << " " << route.target;
    auto forged = client("kw_forged").request(route.method, route.target, "{}");
    EXPECT_EQ(forged.status, 401) << route.method << " " << route.target;
    for (const auto& [scope, token] : tokens) {
      auto response = client(token).request(route.method, route.target, "{}");
      bool allowed = std::find(route.allowed.begin(), route.allowed.end(), scope) != route.allowed.end();
      if (allowed) {
        EXPECT_NE(response.status, 401) << scope << " " << route.target << ": " << response.body;
        EXPECT_NE(response.status, 403) << scope << " " << route.target << ": " << response.body;
      } else {
        EXPECT_EQ(response.status, 403) << scope << " " << route.target << ": " << response.body;
        EXPECT_EQ(response.json()["error"], "scope_denied");
      }
    }
  }
  // Reads are open on loopback.
  EXPECT_EQ(client().get("/api/v1/projects").status, 200);
  // A revoked token stops working.
  {
    pqxx::connection connection(database_->url());
    pqxx::work tx(connection);
    TokenRepository::revoke(tx, "agent-1");
    tx.commit();
  }
  EXPECT_EQ(agent().post("/api/v1/runs", make_report({})).status, 401);
}

class TokenOnlyReadsTest : public ServerTest {
 protected:
  ServerOptions server_options() override {
    ServerOptions options = ServerTest::server_options();
    options.reads_need_token = true;
    return options;
  }
};

TEST_F(TokenOnlyReadsTest, ReadsNeedAnyValidToken) {
  EXPECT_EQ(client().get("/api/v1/projects").status, 401);
  // Probes answer anyone, as docs/api.md says.
  EXPECT_EQ(client().get("/healthz").status, 200);
  EXPECT_EQ(client().get("/metrics").status, 200);
  EXPECT_EQ(client("kw_not_a_token").get("/healthz").status, 200);
  EXPECT_EQ(client(read_token_).get("/api/v1/projects").status, 200);
  EXPECT_EQ(client(agent_token_).get("/api/v1/projects").status, 200);
}

// Listening on every interface, not only loopback: reads need a token by
// default, and --open-reads opens them (the tests still connect over loopback).
class AllInterfacesTest : public ServerTest {
 protected:
  ServerOptions server_options() override {
    ServerOptions options = ServerTest::server_options();
    options.http.address = "0.0.0.0";
    return options;
  }
};

TEST_F(AllInterfacesTest, ReadsNeedATokenOffLoopback) {
  EXPECT_EQ(client().get("/api/v1/projects").status, 401);
  EXPECT_EQ(client(read_token_).get("/api/v1/projects").status, 200);
}

class OpenReadsTest : public AllInterfacesTest {
 protected:
  ServerOptions server_options() override {
    ServerOptions options = AllInterfacesTest::server_options();
    options.open_reads = true;
    return options;
  }
};

TEST_F(OpenReadsTest, OpenReadsOpensThemOnAnyAddress) {
  EXPECT_EQ(client().get("/api/v1/projects").status, 200);
  EXPECT_EQ(client().post("/api/v1/runs", json::object()).status, 401) << "writes still need a token";
}

TEST_F(ApiTest, TokensAreStoredOnlyAsHashes) {
  pqxx::result rows = sql("SELECT token_sha256 FROM api_tokens");
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& row : rows) {
    std::string stored = row[0].as<std::string>();
    EXPECT_EQ(stored.size(), 64u);
    for (const std::string& token : {admin_token_, agent_token_, ci_token_, read_token_}) {
      EXPECT_NE(stored, token);
      EXPECT_EQ(stored.find(token.substr(3)), std::string::npos);
    }
  }
  EXPECT_EQ(common::sha256_hex(agent_token_),
            sql("SELECT token_sha256 FROM api_tokens WHERE name = 'agent-1'")[0][0].as<std::string>());
}

// Hostile reports (what a fuzzer and an attacker sent): every one is a 4xx
// that names what is wrong, the server stays up, and nothing is stored.
TEST_F(ApiTest, HostileReportsAre4xxAndStoreNothing) {
  auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  const std::string ten_kb(10000, 'x');
  struct Variant {
    std::string what;
    std::function<void(json&)> mutate;
    std::string text_from, text_to;  // a replacement in the serialized body
    int status;
    std::string message;  // a part of it
  };
  const std::vector<Variant> variants = {
      {"nesting 100 deep",
       [&](json& r) {
         r["stages"][0]["details"] = {{"x", json::parse(nested(100))}};
       },
       "", "", 400, "nested deeper than 64"},
      {"nesting 60000 deep",
       [](json& r) {
         r["stages"][0]["details"] = {{"x", "NESTED"}};
       },
       "\"NESTED\"", nested(60000), 400, "nested deeper than 64"},
      {"1e400", [](json& r) { r["gpu_seconds"] = 12345.5; }, "12345.5", "1e400", 400, "number"},
      {"registers 2^31", [](json& r) { r["cases"][0]["launches"][0]["registers"] = 2147483648LL; }, "", "",
       422, "cases[0].launches[0].registers"},
      {"grid 2^31", [](json& r) { r["cases"][0]["launches"][0]["grid"][0] = 2147483648LL; }, "", "", 422,
       "cases[0].launches[0].grid[0]"},
      {"registers 168.5", [](json& r) { r["cases"][0]["launches"][0]["registers"] = 168.5; }, "", "", 422,
       "must be an integer"},
      {"10 KB branch", [&](json& r) { r["branch"] = ten_kb; }, "", "", 422,
       "branch: is longer than 200 bytes"},
      {"10 KB case name", [&](json& r) { r["cases"][0]["name"] = ten_kb; }, "", "", 422,
       "cases[0].name: is longer than 200 bytes"},
      {"10 KB device name", [&](json& r) { r["device"]["name"] = ten_kb; }, "", "", 422, "device.name"},
      {"10 KB impl", [&](json& r) { r["cases"][0]["measurements"][0]["impl"] = ten_kb; }, "", "", 422,
       "impl"},
      {"10 KB agent name", [&](json& r) { r["agent"]["name"] = ten_kb; }, "", "", 422, "agent.name"},
      {"10 KB project", [&](json& r) { r["project"] = ten_kb; }, "", "", 422, "project"},
      {"NUL in log_tail", [](json& r) { r["stages"][0]["log_tail"] = std::string("a\0b", 3); }, "", "", 422,
       "stages[0].log_tail: contains a NUL character"},
      {"NUL in a case name", [](json& r) { r["cases"][0]["name"] = std::string("c\0d", 3); }, "", "", 422,
       "NUL"},
      {"NUL in the branch", [](json& r) { r["branch"] = std::string("ma\0in", 5); }, "", "", 422,
       "branch: contains a NUL character"},
      {"NUL in a details key",
       [](json& r) {
         r["stages"][0]["details"] = json{{std::string("k\0", 2), 1}};
       },
       "", "", 422, "NUL"},
      {"a 5e-324 sample", [](json& r) { r["cases"][0]["measurements"][0]["samples_ns"][0] = 5e-324; }, "", "",
       422, "samples_ns[0]"},
      {"year 0000", [](json& r) { r["started_at"] = "0000-01-01T00:00:00Z"; }, "", "", 422, "started_at"},
  };
  for (const Variant& variant : variants) {
    json report = make_report({});
    variant.mutate(report);
    std::string body = report.dump();
    if (!variant.text_from.empty()) {
      std::size_t at = body.find(variant.text_from);
      ASSERT_NE(at, std::string::npos) << variant.what;
      body.replace(at, variant.text_from.size(), variant.text_to);
    }
    auto response = agent().request("POST", "/api/v1/runs", body);
    EXPECT_EQ(response.status, variant.status) << variant.what << ": " << response.body.substr(0, 300);
    EXPECT_NE(response.body.find(variant.message), std::string::npos)
        << variant.what << ": " << response.body.substr(0, 300);
  }
  EXPECT_EQ(client().get("/healthz").status, 200);
  EXPECT_EQ(sql("SELECT count(*) FROM runs")[0][0].as<int>(), 0);
  EXPECT_EQ(sql("SELECT count(*) FROM projects")[0][0].as<int>(), 1);  // the fixture's
  // An integer-valued float where an integer goes is that integer.
  json report = make_report({});
  report["cases"][0]["launches"][0]["registers"] = 168.0;
  auto stored = agent().post("/api/v1/runs", report);
  ASSERT_EQ(stored.status, 201) << stored.body;
  EXPECT_EQ(client()
                .get("/api/v1/runs/" + std::to_string(stored.json()["run_id"].get<int>()))
                .json()["cases"][0]["launches"][0]["registers"],
            168);
}

// A run's cases and their comparisons come a page at a time; so does the
// overview's list of cases.
TEST_F(ApiTest, RunAndOverviewArePagedByCase) {
  ReportSpec spec;
  spec.cases = 5;
  ASSERT_EQ(agent().post("/api/v1/runs", make_report(spec)).status, 201);
  spec.seed = 2;
  auto posted = agent().post("/api/v1/runs", make_report(spec));
  ASSERT_EQ(posted.status, 201);
  std::string run = "/api/v1/runs/" + std::to_string(posted.json()["run_id"].get<int>());

  std::vector<std::string> seen;
  for (int page = 1; page <= 3; ++page) {
    json body = client().get(run + "?per_page=2&page=" + std::to_string(page)).json();
    EXPECT_EQ(body["paging"], json({{"page", page}, {"per_page", 2}, {"cases_total", 5}, {"pages", 3}}));
    std::set<std::string> names;
    for (const json& c : body["cases"]) {
      names.insert(c["name"]);
      seen.push_back(c["name"]);
    }
    EXPECT_EQ(body["cases"].size(), page < 3 ? 2u : 1u);
    ASSERT_FALSE(body["comparisons"].empty());
    for (const json& comparison : body["comparisons"]) EXPECT_TRUE(names.contains(comparison["case"]));
    EXPECT_EQ(body["stages"].size(), 6u);  // the run's header comes with every page
  }
  EXPECT_EQ(seen,
            (std::vector<std::string>{"attention.fwd/case0", "attention.fwd/case1", "attention.fwd/case2",
                                      "attention.fwd/case3", "attention.fwd/case4"}));
  EXPECT_TRUE(client().get(run + "?page=4&per_page=2").json()["cases"].empty());
  EXPECT_EQ(client().get(run).json()["paging"]["per_page"], 500);
  EXPECT_EQ(client().get(run + "?per_page=0").json()["error"], "bad_query");
  EXPECT_EQ(client().get(run + "?per_page=2001").status, 400);

  json overview = client().get("/api/v1/projects/demo/overview?per_page=4&page=2").json();
  EXPECT_EQ(overview["paging"], json({{"page", 2}, {"per_page", 4}, {"cases_total", 5}, {"pages", 2}}));
  ASSERT_EQ(overview["cases"].size(), 1u);
  EXPECT_EQ(overview["cases"][0]["case"], "attention.fwd/case4");
}

// A report whose case `slowed` has its candidate `factor` times slower.
json with_slower_case(const ReportSpec& spec, int slowed, double factor) {
  json report = make_report(spec);
  json& candidate = report["cases"][slowed]["measurements"][0];
  for (json& sample : candidate["samples_ns"]) sample = sample.get<double>() * factor;
  candidate["median_ns"] = candidate["median_ns"].get<double>() * factor;
  return report;
}

// What a timed case's fingerprint changed from its base's comes back as it
// was sent: on the case, and beside its comparisons and its flagged row, for
// the run page and the pull request comment.
TEST_F(ApiTest, WhatACaseChangedFromItsBaseComesBackWithItsComparisons) {
  ReportSpec spec;
  spec.cases = 3;
  ASSERT_EQ(agent().post("/api/v1/runs", make_report(spec)).status, 201);
  spec.seed = 2;
  json report = with_slower_case(spec, 1, 1.5);
  const json changed = {{"differs", {"the code of kernel attention_fwd", "its launches"}},
                        {"base", {{"digest", std::string(64, 'b')}}}};
  report["cases"][1]["changed_from_base"] = changed;
  auto posted = agent().post("/api/v1/runs", report);
  ASSERT_EQ(posted.status, 201) << posted.body;
  const json run = client().get("/api/v1/runs/" + std::to_string(posted.json()["run_id"].get<int>())).json();
  ASSERT_EQ(run["flagged"].size(), 1u) << run["flagged"].dump();
  EXPECT_EQ(run["flagged"][0]["changed"], changed["differs"]);
  for (const json& c : run["cases"])
    EXPECT_EQ(c["changed_from_base"], c["name"] == "attention.fwd/case1" ? changed : json()) << c.dump();
  for (const json& comparison : run["comparisons"])
    EXPECT_EQ(comparison["changed"],
              comparison["case"] == "attention.fwd/case1" ? changed["differs"] : json())
        << comparison.dump();
}

TEST_F(ApiTest, AClaimSaysHowManyCasesTheProjectAuditedOnItsGpuModel) {
  a_claim_says_how_many_cases_the_project_audited(agent(), ci());
}

std::vector<std::string> case_names(const json& cases, const char* key = "case") {
  std::vector<std::string> names;
  for (const json& c : cases) names.push_back(c[key].get<std::string>() + " " + c.value("gpu_model", ""));
  return names;
}

// The overview, the regressions list and compare keep what a case glob (or
// text), statuses and a GPU model ask for, filtered and paged in the server.
TEST_F(ApiTest, OverviewRegressionsAndCompareFilterByCaseStatusAndGpu) {
  const std::string h100 = "NVIDIA H100 80GB HBM3", a100 = "NVIDIA A100-SXM4-80GB";
  ReportSpec spec;
  spec.cases = 4;
  ASSERT_EQ(agent().post("/api/v1/runs", make_report(spec)).status, 201);
  spec.seed = 2;
  auto slower = agent().post("/api/v1/runs", with_slower_case(spec, 2, 1.5));
  ASSERT_EQ(slower.status, 201);
  ASSERT_EQ(slower.json()["verdict"], "regression");
  ReportSpec other_gpu = spec;
  other_gpu.seed = 3;
  other_gpu.gpu_model = a100;
  ASSERT_EQ(agent().post("/api/v1/runs", make_report(other_gpu)).status, 201);
  ReportSpec feature = spec;  // another branch moves none of main's cases
  feature.seed = 4;
  feature.branch = "feature";
  ASSERT_EQ(agent().post("/api/v1/runs", with_slower_case(feature, 1, 3.0)).status, 201);

  auto overview = [&](const std::string& query) {
    auto response = client().get("/api/v1/projects/demo/overview?" + query);
    EXPECT_EQ(response.status, 200) << query << ": " << response.body;
    return response.json();
  };
  EXPECT_EQ(overview("")["paging"]["cases_total"], 8);
  EXPECT_EQ(case_names(overview("case=case2")["cases"]),
            (std::vector<std::string>{"attention.fwd/case2 " + a100, "attention.fwd/case2 " + h100}));
  EXPECT_EQ(case_names(overview("case=CASE1&gpu=" + http::url_encode(h100))["cases"]),
            (std::vector<std::string>{"attention.fwd/case1 " + h100}));
  json regressed = overview("status=regression");
  EXPECT_EQ(case_names(regressed["cases"]), (std::vector<std::string>{"attention.fwd/case2 " + h100}));
  EXPECT_EQ(regressed["paging"]["cases_total"], 1);
  EXPECT_EQ(overview("status=no-baseline")["paging"]["cases_total"], 4);  // the A100's first run
  EXPECT_EQ(overview("status=unchanged,regression&gpu=" + http::url_encode(h100))["paging"]["cases_total"],
            4);
  // A glob matches whole names; * and ? are wildcards, % and _ are not.
  EXPECT_EQ(overview("case=" + http::url_encode("attention.fwd/case?"))["paging"]["cases_total"], 8);
  EXPECT_EQ(overview("case=" + http::url_encode("*case3"))["paging"]["cases_total"], 2);
  EXPECT_EQ(overview("case=" + http::url_encode("case*"))["paging"]["cases_total"], 0);
  EXPECT_EQ(overview("case=" + http::url_encode("case_"))["paging"]["cases_total"], 0);
  json paged = overview("case=case&per_page=3&page=3");
  EXPECT_EQ(paged["paging"], json({{"page", 3}, {"per_page", 3}, {"cases_total", 8}, {"pages", 3}}));
  EXPECT_EQ(paged["cases"].size(), 2u);
  EXPECT_EQ(client().get("/api/v1/projects/demo/overview?status=slower").json()["message"],
            "status: \"slower\" is not one of regression, improvement, unchanged, inconclusive, no-baseline, "
            "undetectable");
  // Every compared case says what its test could see; "undetectable" lists those that cannot see their
  // threshold, as many as the overview counts.
  const json every_case = overview("per_page=100");
  int blind = 0, seen = 0;
  for (const json& c : every_case["cases"]) {
    const json& cmp = c["comparison"];
    if (!cmp.is_object() || cmp["status"] == "no-baseline" || cmp["ratio"].is_null()) continue;
    ASSERT_TRUE(cmp["detectable"].is_number()) << c.dump();
    EXPECT_GT(cmp["detectable"].get<double>(), 0) << c.dump();
    ++seen;
    blind += cmp["detectable"].get<double>() > cmp["threshold"].get<double>();
  }
  EXPECT_GT(seen, 0);
  EXPECT_EQ(every_case["undetectable"], blind);
  EXPECT_EQ(overview("status=undetectable")["paging"]["cases_total"], blind);

  auto regressions = [&](const std::string& query) {
    auto response = client().get("/api/v1/projects/demo/regressions?" + query);
    EXPECT_EQ(response.status, 200) << query << ": " << response.body;
    return response.json();
  };
  EXPECT_EQ(regressions("").size(), 2u);  // main's and the feature branch's
  json case2 = regressions("case=case2");
  ASSERT_EQ(case2.size(), 1u);
  EXPECT_EQ(case2[0]["branch"], "main");
  ASSERT_EQ(case2[0]["regressions"].size(), 1u);
  EXPECT_EQ(case2[0]["regressions"][0]["case"], "attention.fwd/case2");
  EXPECT_TRUE(regressions("case=case3").empty());
  EXPECT_TRUE(regressions("gpu=" + http::url_encode(a100)).empty());
  EXPECT_EQ(regressions("limit=1&page=2").size(), 1u);
  EXPECT_EQ(regressions("limit=1&page=3").size(), 0u);

  const std::string base = kw::testing::make_commit(1), head = kw::testing::make_commit(2);
  auto compare = [&](const std::string& query) {
    auto response = client().get("/api/v1/compare?base=" + base + "&head=" + head + "&" + query);
    EXPECT_EQ(response.status, 200) << query << ": " << response.body;
    return response.json()["gpus"][0];
  };
  json all = compare("");
  EXPECT_EQ(all["paging"]["cases_total"], 4);
  EXPECT_EQ(all["cases"][0]["case"], "attention.fwd/case2");  // the largest effect first
  EXPECT_EQ(all["cases"][0]["comparisons"].size(), 2u);       // the candidate's and the baseline's
  EXPECT_EQ(case_names(compare("status=regression")["cases"]),
            (std::vector<std::string>{"attention.fwd/case2 "}));
  json one = compare("case=case1");
  EXPECT_EQ(case_names(one["cases"]), (std::vector<std::string>{"attention.fwd/case1 "}));
  EXPECT_EQ(one["detection"]["comparisons"], 1);  // the decision covers the cases kept
  json page2 = compare("per_page=3&page=2");
  EXPECT_EQ(page2["paging"], json({{"page", 2}, {"per_page", 3}, {"cases_total", 4}, {"pages", 2}}));
  EXPECT_EQ(page2["cases"].size(), 1u);
  EXPECT_EQ(page2["detection"]["comparisons"], 4);
}

// A page of hundreds of cases goes out in chunks, 100 cases at a time, and
// arrives whole: every case once, in order, each with its comparisons.
TEST_F(ApiTest, ALargePageIsStreamedAndArrivesWhole) {
  ReportSpec spec;
  spec.cases = 250;
  spec.samples = 5;
  ASSERT_EQ(agent().post("/api/v1/runs", make_report(spec)).status, 201);
  spec.seed = 2;
  auto posted = agent().post("/api/v1/runs", make_report(spec));
  ASSERT_EQ(posted.status, 201);
  std::string run = "/api/v1/runs/" + std::to_string(posted.json()["run_id"].get<int>());
  http::Client reader = client();
  auto response = reader.get(run + "?per_page=240&page=1");
  ASSERT_EQ(response.status, 200);
  EXPECT_EQ(response.headers["transfer-encoding"], "chunked");
  json body = response.json();
  ASSERT_EQ(body["cases"].size(), 240u);
  for (std::size_t i = 0; i < 240; ++i)
    EXPECT_EQ(body["cases"][i]["name"], "attention.fwd/case" + std::to_string(i));
  std::set<std::string> compared;
  for (const json& comparison : body["comparisons"]) compared.insert(comparison["case"]);
  EXPECT_EQ(compared.size(), 240u);
  // The last page, and a page past the end, are whole documents too; the
  // connection stays usable after each.
  json last = reader.get(run + "?per_page=240&page=2").json();
  EXPECT_EQ(last["cases"].size(), 10u);
  EXPECT_EQ(last["cases"][9]["name"], "attention.fwd/case249");
  json past = reader.get(run + "?per_page=240&page=3").json();
  EXPECT_TRUE(past["cases"].empty());
  EXPECT_TRUE(past["comparisons"].empty());
  EXPECT_EQ(reader.request("HEAD", run).status, 200);
  EXPECT_EQ(reader.get(run + "?per_page=1").json()["cases"].size(), 1u);
}

// Paths and names that cannot be stored or looked up: 400 or 422, never 500
// or a closed connection.
}  // namespace
}  // namespace kw::server::testing
