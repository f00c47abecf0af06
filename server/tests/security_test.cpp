// What a hostile client with a token of one project must not reach: another
// project's data, tokens and jobs (every route × scope × own/other project),
// a crash through settings, commits of projects it cannot read through
// compare, and a 500 through stage details it stored itself.
#include <gtest/gtest.h>
#include <algorithm>
#include <map>
#include <sstream>

#include "../../tests/support/report_factory.hpp"
#include "server_fixture.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

// Routes the matrix below leaves out, each with why.
const std::map<std::string, std::string> kOutsideTheMatrix = {
    {"GET /healthz", "an open probe: no project's data"},
    {"GET /metrics", "an open probe: no project's data"},
    {"GET /download/kw", "the kw binary, the same for every project"},
    {"GET /download/kw.sha256", "the kw binary's checksum"},
    {"GET /download/kwbench.py", "the harness, the same for every project"},
    {"GET /api/v1/projects",
     "a list filtered to the token's projects (AccessTest.AScopedReadTokenSeesOnlyItsProjects)"},
    {"POST /api/v1/projects", "only an unscoped admin makes projects (AccessTest.OnlyAnAdminMakesProjects)"},
    {"GET /api/v1/tokens", "a list filtered to the token's projects (ProjectRulesTest)"},
    {"GET /api/v1/agents", "a list filtered to the token's projects (JobServiceTest)"},
    {"POST /api/v1/agents/claim", "claims only jobs of the token's projects (QueueRoutesTest)"},
    {"GET /api/v1/bisects/{id}", "ownership.cpp: another project's bisect answers 404 as a missing one"},
    {"POST /api/v1/bisects/{id}/cancel",
     "ownership.cpp: another project's bisect answers 404 as a missing one"},
    {"GET /api/v1/profiles/{id}", "ownership.cpp: another project's profile answers 404 as a missing one"},
    {"GET /api/v1/profiles/{id}/ncu/{side}",
     "ownership.cpp: another project's profile answers 404 as a missing one"},
};

// Whether `target`'s path is one `pattern` ("/api/v1/runs/{id}") matches.
bool path_matches(const std::string& pattern, std::string target) {
  target = target.substr(0, target.find('?'));
  std::istringstream want(pattern), got(target);
  std::string w, g;
  while (true) {
    const bool more_w = static_cast<bool>(std::getline(want, w, '/'));
    const bool more_g = static_cast<bool>(std::getline(got, g, '/'));
    if (!more_w || !more_g) return more_w == more_g;
    if (w != g && !(w.size() > 2 && w.front() == '{' && w.back() == '}')) return false;
  }
}

class SecurityTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    create_project("other");
  }
  json report_for(const std::string& project, std::uint64_t seed, const std::string& branch = "main") {
    ReportSpec spec;
    spec.project = project;
    spec.seed = seed;
    spec.commit = make_commit(seed);
    spec.branch = branch;
    return make_report(spec);
  }
  // Every route the server has is a row of `matrix` (by its own side's
  // target) or named in kOutsideTheMatrix: a route added without either fails.
  template <typename Route>
  void expect_every_route_in(const std::vector<Route>& matrix) const {
    for (const auto& route : app_->router().routes()) {
      const std::string& method = route.first;
      const std::string& pattern = route.second;
      const std::string name = method + " " + pattern;
      const bool in_matrix = std::any_of(matrix.begin(), matrix.end(), [&](const Route& row) {
        return row.method == method && path_matches(pattern, row.own.target);
      });
      EXPECT_NE(in_matrix, kOutsideTheMatrix.contains(name))
          << name
          << (in_matrix ? ": in the matrix and named outside it"
                        : ": neither in the matrix nor named outside it");
    }
  }
  std::int64_t post_run(const json& report) {
    auto stored = agent().post("/api/v1/runs", report);
    EXPECT_EQ(stored.status, 201) << stored.body;
    return stored.json().value("run_id", std::int64_t{0});
  }
  // A job of `project` claimed by the unscoped agent token's agent "gpu-x".
  std::int64_t held_job(const std::string& project, std::uint64_t commit) {
    auto job = ci().post("/api/v1/jobs",
                         {{"project", project}, {"commit", make_commit(commit)}, {"branch", "main"}});
    EXPECT_EQ(job.status, 201) << job.body;
    auto claim = agent().post("/api/v1/agents/claim", {{"agent", "gpu-x"}, {"projects", {project}}});
    EXPECT_EQ(claim.status, 200) << claim.body;
    return claim.json().value("id", std::int64_t{0});
  }
  std::string token_of(const std::string& name, Scope scope, std::vector<std::string> projects) {
    return create_token(database_->url(), name, scope, std::move(projects));
  }
};

TEST_F(SecurityTest, AProjectScopedAdminActsOnlyOnItsProjects) {
  http::Client scoped = client(token_of("demo-admin", Scope::admin, {"demo"}));

  // Tokens: only within its projects, never unscoped.
  auto widened = scoped.post("/api/v1/tokens", {{"name", "escalated"}, {"scope", "admin"}});
  ASSERT_EQ(widened.status, 201) << widened.body;
  EXPECT_EQ(widened.json()["projects"], json({"demo"})) << "a token it makes is no wider than its own";
  EXPECT_EQ(
      scoped.post("/api/v1/tokens", {{"name", "x"}, {"scope", "admin"}, {"projects", {"other"}}}).status,
      403);
  EXPECT_EQ(scoped.post("/api/v1/tokens", {{"name", "x"}, {"scope", "read"}, {"projects", {"demo", "other"}}})
                .status,
            403);
  http::Client escalated = client(widened.json()["token"]);
  EXPECT_EQ(escalated.request("PUT", "/api/v1/projects/other/settings", R"({"min_threshold": 0.5})").status,
            403);

  // Settings, acknowledgements and projects of others.
  auto settings = scoped.request("PUT", "/api/v1/projects/other/settings", R"({"min_threshold": 0.5})");
  EXPECT_EQ(settings.status, 403) << settings.body;
  EXPECT_EQ(sql("SELECT min_threshold FROM projects WHERE name = 'other'")[0][0].as<double>(), 0.01);
  EXPECT_EQ(scoped.request("PUT", "/api/v1/projects/demo/settings", R"({"min_threshold": 0.05})").status,
            200);
  EXPECT_EQ(scoped.post("/api/v1/projects", {{"name", "third"}}).status, 403);

  // Listing and revoking: only tokens scoped within its projects.
  const std::string other_token = token_of("other-ci", Scope::ci, {"other"});
  for (const json& listed : scoped.get("/api/v1/tokens").json()) {
    ASSERT_TRUE(listed["projects"].is_array()) << listed.dump();
    for (const json& project : listed["projects"]) EXPECT_EQ(project, "demo") << listed.dump();
  }
  EXPECT_GE(client(admin_token_).get("/api/v1/tokens").json().size(), 7u) << "an unscoped admin lists all";
  const auto other_id = sql("SELECT id FROM api_tokens WHERE name = 'other-ci'")[0][0].as<int>();
  EXPECT_EQ(scoped.request("DELETE", "/api/v1/tokens/" + std::to_string(other_id)).status, 404);
  EXPECT_EQ(client(other_token)
                .post("/api/v1/jobs", {{"project", "other"}, {"commit", make_commit(5)}, {"branch", "main"}})
                .status,
            201)
      << "the other project's token still works";
}

TEST_F(SecurityTest, CompareLooksOnlyInProjectsTheCallerMayRead) {
  // Two commits of "other" that share a 7-digit prefix, and a branch of its own.
  json first = report_for("other", 11, "secret-branch");
  json second = report_for("other", 12, "secret-branch");
  first["commit"] = "deadbee" + std::string(33, '1');
  second["commit"] = "deadbee" + std::string(33, '2');
  post_run(first);
  post_run(second);
  post_run(report_for("demo", 13));
  http::Client reader = client(token_of("demo-reader", Scope::read, {"demo"}));

  auto ambiguous = reader.get("/api/v1/compare?base=main&head=deadbee");
  EXPECT_EQ(ambiguous.status, 404) << ambiguous.body;
  EXPECT_EQ(ambiguous.body.find("deadbee1"), std::string::npos) << ambiguous.body;
  auto branch = reader.get("/api/v1/compare?base=main&head=secret-branch");
  EXPECT_EQ(branch.status, 404) << branch.body;
  EXPECT_EQ(branch.body.find("other"), std::string::npos) << branch.body;
  auto named = reader.get("/api/v1/compare?project=other&base=main&head=deadbee");
  EXPECT_EQ(named.status, 403) << named.body;

  // A token of several projects names the one it means.
  http::Client wide = client(token_of("both-reader", Scope::read, {"demo", "other"}));
  auto unnamed = wide.get("/api/v1/compare?base=main&head=main");
  EXPECT_EQ(unnamed.status, 400) << unnamed.body;
  EXPECT_NE(unnamed.json()["message"].get<std::string>().find("project"), std::string::npos);
  EXPECT_EQ(wide.get("/api/v1/compare?project=other&base=deadbee1&head=deadbee2").status, 200);
}

TEST_F(SecurityTest, StageDetailsTheServerReadsAreValidatedAtIngest) {
  for (const json& kernels :
       {json::parse(R"([{"name": 0}])"), json::parse("[1]"), json("x"), json::parse("[null]"),
        json::parse(R"([{"name": "k", "registers": "many"}])"), json::parse(R"([{"registers": 32}])")}) {
    json report = report_for("demo", 21);
    report["stages"][0]["details"] = {{"kernels", kernels}};
    auto response = agent().post("/api/v1/runs", report);
    EXPECT_EQ(response.status, 422) << kernels.dump() << ": " << response.body;
    EXPECT_EQ(response.json()["field"].get<std::string>().rfind("stages[0].details.kernels", 0), 0u)
        << response.body;
  }
  EXPECT_EQ(sql("SELECT count(*) FROM runs")[0][0].as<int>(), 0);
}

// Runs stored before details were checked may hold any shape: their
// explanation, and that of a later run judged against them, treat it as absent.
TEST_F(SecurityTest, ExplanationsTreatOddStoredDetailsAsAbsent) {
  post_run(report_for("demo", 31));
  std::uint64_t seed = 32;
  for (const char* odd : {R"({"kernels": [{"name": 0}]})", R"({"kernels": [1, null, "x"]})",
                          R"({"kernels": "x"})", R"({"kernels": [{"name": "k", "spill_stores": "lots"}]})"}) {
    // Every stored run's build table, the baseline's included, is odd now.
    sql(std::string("UPDATE stages SET details = '") + odd + "' WHERE name = 'build'");
    ReportSpec spec;
    spec.seed = seed;
    spec.commit = make_commit(seed++);
    spec.slowdown = 1.5;
    const std::int64_t run = post_run(make_report(spec));
    sql(std::string("UPDATE stages SET details = '") + odd + "' WHERE name = 'build'");
    for (const std::string query : {"", "?case=attention.fwd/case0"}) {
      auto explained = client().get("/api/v1/runs/" + std::to_string(run) + "/explanation" + query);
      EXPECT_EQ(explained.status, 200) << odd << ": " << explained.body.substr(0, 300);
    }
  }
}

TEST_F(SecurityTest, CasesAreCountedOncePerCaseNotOncePerRow) {
  for (std::uint64_t seed = 41; seed < 46; ++seed) post_run(report_for("demo", seed));
  auto cases = client().get("/api/v1/projects/demo/cases");
  ASSERT_EQ(cases.status, 200) << cases.body;
  ASSERT_EQ(cases.json().size(), 3u);
  for (const json& c : cases.json()) EXPECT_EQ(c["runs"], 5) << c.dump();
  // The statement as the server prepares it: each case's runs are counted in
  // one grouped pass, with no subquery run per row.
  std::string text;
  for (const Statement& statement : PgHistoryReads::statements()) {
    if (std::string(statement.name) == "cases_json") text = statement.sql;
  }
  ASSERT_FALSE(text.empty());
  pqxx::connection connection(database_->url());
  pqxx::nontransaction tx(connection);
  tx.exec("PREPARE cases_json_plan AS " + text);
  const std::string plan = tx.exec1("EXPLAIN (FORMAT JSON) EXECUTE cases_json_plan(1)")[0].as<std::string>();
  EXPECT_EQ(plan.find("SubPlan"), std::string::npos) << plan;
}

// Every route × scope × own/other project. Each token is scoped to "demo";
// a route of a scope the token lacks is 403 scope_denied whatever the
// project; one it has answers the own project past authorization and never
// serves or changes the other project's.
TEST_F(SecurityTest, EveryRouteScopeAndProject) {
  const std::int64_t own_run = post_run(report_for("demo", 51));
  const std::int64_t other_run = post_run(report_for("other", 52));
  const std::int64_t own_job = held_job("demo", 53);
  const std::int64_t other_job = held_job("other", 54);
  token_of("other-reader", Scope::read, {"other"});
  token_of("demo-reader", Scope::read, {"demo"});
  const std::string other_token_id =
      sql("SELECT id FROM api_tokens WHERE name = 'other-reader'")[0][0].as<std::string>();
  const std::string own_token_id =
      sql("SELECT id FROM api_tokens WHERE name = 'demo-reader'")[0][0].as<std::string>();
  struct Side {
    std::string target;
    json body;
  };
  struct Route {
    std::string method;
    Side own, other;
    std::vector<Scope> scopes;  // besides admin
  };
  auto job = [](std::int64_t id, const std::string& rest) {
    return "/api/v1/jobs/" + std::to_string(id) + rest;
  };
  auto run = [](std::int64_t id, const std::string& rest) {
    return "/api/v1/runs/" + std::to_string(id) + rest;
  };
  const json holder{{"agent", "gpu-x"}, {"reason", "matrix"}, {"started", "build"}};
  const std::vector<Scope> read{Scope::read, Scope::agent, Scope::ci};
  const std::vector<Route> routes = {
      {"POST",
       {"/api/v1/runs", report_for("demo", 61)},
       {"/api/v1/runs", report_for("other", 62)},
       {Scope::agent}},
      {"POST",
       {"/api/v1/jobs", {{"project", "demo"}, {"commit", make_commit(63)}, {"branch", "main"}}},
       {"/api/v1/jobs", {{"project", "other"}, {"commit", make_commit(64)}, {"branch", "main"}}},
       {Scope::ci}},
      {"GET", {job(own_job, ""), {}}, {job(other_job, ""), {}}, read},
      {"POST", {job(own_job, "/heartbeat"), holder}, {job(other_job, "/heartbeat"), holder}, {Scope::agent}},
      {"POST", {job(own_job, "/stages"), holder}, {job(other_job, "/stages"), holder}, {Scope::agent}},
      {"POST", {job(own_job, "/fail"), holder}, {job(other_job, "/fail"), holder}, {Scope::agent}},
      {"POST", {job(own_job, "/release"), holder}, {job(other_job, "/release"), holder}, {Scope::agent}},
      {"POST",
       {job(own_job, "/report"), report_for("demo", 53)},
       {job(other_job, "/report"), report_for("other", 54)},
       {Scope::agent}},
      {"POST",
       {job(own_job, "/profile"), {{"agent", "gpu-x"}, {"summary", json::object()}}},
       {job(other_job, "/profile"), {{"agent", "gpu-x"}, {"summary", json::object()}}},
       {Scope::agent}},
      {"GET", {run(own_run, ""), {}}, {run(other_run, ""), {}}, read},
      {"GET", {run(own_run, "/explanation"), {}}, {run(other_run, "/explanation"), {}}, read},
      {"GET", {run(own_run, "/profiles"), {}}, {run(other_run, "/profiles"), {}}, read},
      {"POST",
       {run(own_run, "/acknowledge"), {{"reason", "x"}}},
       {run(other_run, "/acknowledge"), {{"reason", "x"}}},
       {Scope::ci}},
      {"POST",
       {run(own_run, "/profiles"), {{"case", "nope"}}},
       {run(other_run, "/profiles"), {{"case", "nope"}}},
       {Scope::ci}},
      {"GET", {"/api/v1/projects/demo", {}}, {"/api/v1/projects/other", {}}, read},
      {"PUT",
       {"/api/v1/projects/demo/settings", {{"run_alpha", 0.02}}},
       {"/api/v1/projects/other/settings", {{"run_alpha", 0.02}}},
       {}},
      {"GET", {"/api/v1/projects/demo/overview", {}}, {"/api/v1/projects/other/overview", {}}, read},
      {"GET", {"/api/v1/projects/demo/cases", {}}, {"/api/v1/projects/other/cases", {}}, read},
      {"GET", {"/api/v1/projects/demo/runs", {}}, {"/api/v1/projects/other/runs", {}}, read},
      {"GET", {"/api/v1/projects/demo/regressions", {}}, {"/api/v1/projects/other/regressions", {}}, read},
      {"GET", {"/api/v1/projects/demo/branches", {}}, {"/api/v1/projects/other/branches", {}}, read},
      {"GET",
       {"/api/v1/projects/demo/series?case=attention.fwd.0", {}},
       {"/api/v1/projects/other/series?case=attention.fwd.0", {}},
       read},
      {"GET",
       {"/api/v1/compare?project=demo&base=main&head=main", {}},
       {"/api/v1/compare?project=other&base=main&head=main", {}},
       read},
      {"POST",
       {"/api/v1/tokens", {{"name", "t"}, {"scope", "read"}, {"projects", {"demo"}}}},
       {"/api/v1/tokens", {{"name", "t"}, {"scope", "read"}, {"projects", {"other"}}}},
       {}},
      {"DELETE", {"/api/v1/tokens/" + own_token_id, {}}, {"/api/v1/tokens/" + other_token_id, {}}, {}},
      {"GET", {"/api/v1/projects/demo/audit", {}}, {"/api/v1/projects/other/audit", {}}, read},
      {"GET",
       {"/api/v1/projects/demo/uploads/upload-0001", {}},
       {"/api/v1/projects/other/uploads/upload-0001", {}},
       {Scope::agent}},
      {"POST",
       {"/api/v1/projects/demo/uploads/upload-0001", json::object()},
       {"/api/v1/projects/other/uploads/upload-0001", json::object()},
       {Scope::agent}},
      {"PUT",
       {"/api/v1/projects/demo/uploads/upload-0001/parts/0?of=1", json::object()},
       {"/api/v1/projects/other/uploads/upload-0001/parts/0?of=1", json::object()},
       {Scope::agent}},
  };
  expect_every_route_in(routes);
  int checked = 0;
  for (Scope scope : {Scope::read, Scope::agent, Scope::ci, Scope::admin}) {
    const std::string name = "agent-1";  // every token shares the unscoped agent's name
    http::Client caller = client(token_of(name, scope, {"demo"}));
    for (const Route& route : routes) {
      const bool allowed = scope == Scope::admin ||
                           std::find(route.scopes.begin(), route.scopes.end(), scope) != route.scopes.end();
      for (bool own : {true, false}) {
        const Side& side = own ? route.own : route.other;
        auto response =
            caller.request(route.method, side.target, route.method == "GET" ? "" : side.body.dump());
        const std::string what = std::string(to_string(scope)) + " " + route.method + " " + side.target +
                                 (own ? " (own)" : " (other)") + ": " + response.body.substr(0, 200);
        ++checked;
        if (!allowed) {
          EXPECT_EQ(response.status, 403) << what;
          EXPECT_EQ(response.json().value("error", ""), "scope_denied") << what;
        } else if (own) {
          EXPECT_NE(response.status, 401) << what;
          EXPECT_NE(response.status, 403) << what;
        } else {
          EXPECT_TRUE(response.status == 403 || response.status == 404) << what;
        }
      }
    }
  }
  EXPECT_EQ(checked, 4 * 2 * static_cast<int>(routes.size()));
  // Nothing of the other project changed.
  EXPECT_EQ(client().get(job(other_job, "")).json()["state"], "running");
  EXPECT_EQ(
      sql("SELECT count(*) FROM runs r JOIN projects p ON p.id = r.project_id WHERE p.name = 'other'")[0][0]
          .as<int>(),
      1);
  EXPECT_EQ(sql("SELECT run_alpha FROM projects WHERE name = 'other'")[0][0].as<double>(), 0.01);
  EXPECT_EQ(sql("SELECT count(*) FROM api_tokens WHERE revoked_at IS NOT NULL")[0][0].as<int>(), 1)
      << "only the own project's token was revoked (by the admin)";
}

}  // namespace
}  // namespace kw::server::testing
