// Who may do what: tokens scoped to projects, agents bound to their token,
// projects made only by an admin, the admin token API, and the stable
// error codes clients branch on.
#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "server_fixture.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

class AccessTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    create_project("other");
  }
  std::string token(const std::string& name, Scope scope, std::vector<std::string> projects) {
    return create_token(database_->url(), name, scope, std::move(projects));
  }
  json report_for(const std::string& project, std::uint64_t seed, const std::string& agent = "gpu-host-1") {
    ReportSpec spec;
    spec.project = project;
    spec.seed = seed;
    spec.agent = agent;
    return make_report(spec);
  }
  int count(const std::string& table) { return sql("SELECT count(*) FROM " + table)[0][0].as<int>(); }
};

TEST_F(AccessTest, AnAgentTokenWritesOnlyTheProjectsItNames) {
  http::Client demo_agent = client(token("demo-host", Scope::agent, {"demo"}));
  EXPECT_EQ(demo_agent.post("/api/v1/runs", report_for("demo", 1)).status, 201);
  auto denied = demo_agent.post("/api/v1/runs", report_for("other", 2));
  ASSERT_EQ(denied.status, 403) << denied.body;
  EXPECT_EQ(denied.json()["error"], "project_denied");
  EXPECT_EQ(denied.json()["message"], "token \"demo-host\" is not scoped to project \"other\"");
  EXPECT_EQ(count("runs"), 1);
}

TEST_F(AccessTest, ACiTokenSubmitsAndAcknowledgesOnlyItsProjects) {
  http::Client demo_ci = client(token("demo-ci", Scope::ci, {"demo"}));
  auto job =
      demo_ci.post("/api/v1/jobs", {{"project", "other"}, {"commit", make_commit(1)}, {"branch", "main"}});
  EXPECT_EQ(job.status, 403) << job.body;
  EXPECT_EQ(job.json()["error"], "project_denied");
  EXPECT_EQ(count("jobs"), 0);

  // A regression in "other", posted by an unscoped agent token.
  ReportSpec spec;
  spec.project = "other";
  ASSERT_EQ(agent().post("/api/v1/runs", make_report(spec)).status, 201);
  spec.seed = 2;
  spec.slowdown = 1.5;
  auto regressed = agent().post("/api/v1/runs", make_report(spec));
  ASSERT_EQ(regressed.json()["verdict"], "regression") << regressed.body;
  std::string ack = "/api/v1/runs/" + std::to_string(regressed.json()["run_id"].get<int>()) + "/acknowledge";
  EXPECT_EQ(demo_ci.post(ack, {{"reason", "not mine"}}).status, 403);
  EXPECT_EQ(ci().post(ack, {{"reason", "intended"}}).status, 200);
}

TEST_F(AccessTest, AScopedReadTokenSeesOnlyItsProjects) {
  auto other_run = agent().post("/api/v1/runs", report_for("other", 1));
  ASSERT_EQ(other_run.status, 201);
  ASSERT_EQ(agent().post("/api/v1/runs", report_for("demo", 2)).status, 201);
  http::Client reader = client(token("demo-reader", Scope::read, {"demo"}));
  auto projects = reader.get("/api/v1/projects").json();
  ASSERT_EQ(projects.size(), 1u) << projects.dump();
  EXPECT_EQ(projects[0]["name"], "demo");
  EXPECT_EQ(client().get("/api/v1/projects").json().size(), 2u);  // an open read sees all
  EXPECT_EQ(reader.get("/api/v1/projects/demo/overview").status, 200);
  EXPECT_EQ(reader.get("/api/v1/projects/other/overview").status, 403);
  EXPECT_EQ(reader.get("/api/v1/projects/other/runs").status, 403);
  EXPECT_EQ(reader.get("/api/v1/projects/nope/runs").status, 403);  // says nothing of what exists
  auto run = reader.get("/api/v1/runs/" + std::to_string(other_run.json()["run_id"].get<int>()));
  EXPECT_EQ(run.status, 403) << run.body;
  EXPECT_EQ(run.json()["error"], "project_denied");
}

TEST_F(AccessTest, AnAgentStaysWithItsTokenAcrossRotation) {
  std::string first = token("host-1", Scope::agent, {"demo"});
  ASSERT_EQ(client(first).post("/api/v1/runs", report_for("demo", 1, "gpu-1")).status, 201);
  const auto agent_id = [](const std::string& where) {
    return "SELECT a.id FROM agents a JOIN api_tokens t ON t.id = a.token_id WHERE a.name = 'gpu-1' AND " +
           where;
  };
  const int original = sql(agent_id("t.name = 'host-1'"))[0][0].as<int>();

  // Another token's "gpu-1" is an agent of its own, not host-1's.
  http::Client other = client(token("host-2", Scope::agent, {"demo"}));
  EXPECT_EQ(other.post("/api/v1/runs", report_for("demo", 2, "gpu-1")).status, 201);
  EXPECT_NE(sql(agent_id("t.name = 'host-2'"))[0][0].as<int>(), original);

  // A rotated token (revoked, made again under the same name, scope and
  // projects) takes over its agent.
  sql("UPDATE api_tokens SET revoked_at = now() WHERE name = 'host-1'");
  EXPECT_EQ(client(first).post("/api/v1/runs", report_for("demo", 3, "gpu-1")).status, 401);
  std::string rotated = token("host-1", Scope::agent, {"demo"});
  EXPECT_EQ(client(rotated).post("/api/v1/runs", report_for("demo", 4, "gpu-1")).status, 201);
  EXPECT_EQ(sql(agent_id("t.name = 'host-1' AND t.revoked_at IS NULL"))[0][0].as<int>(), original);
  // One of the same name but wider projects does not.
  sql("UPDATE api_tokens SET revoked_at = now() WHERE name = 'host-1'");
  std::string wider = token("host-1", Scope::agent, {"demo", "other"});
  EXPECT_EQ(client(wider).post("/api/v1/runs", report_for("demo", 5, "gpu-1")).status, 201);
  EXPECT_NE(sql(agent_id("t.name = 'host-1' AND t.revoked_at IS NULL"))[0][0].as<int>(), original);
  EXPECT_EQ(count("runs"), 4);
}

TEST_F(AccessTest, OnlyAnAdminMakesProjects) {
  auto unknown = agent().post("/api/v1/runs", report_for("brand-new", 1));
  ASSERT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_EQ(unknown.json()["error"], "no_such_project");
  auto job =
      ci().post("/api/v1/jobs", {{"project", "brand-new"}, {"commit", make_commit(1)}, {"branch", "main"}});
  EXPECT_EQ(job.status, 404);
  EXPECT_EQ(count("projects"), 2);
  EXPECT_EQ(count("runs") + count("jobs"), 0);

  json body{{"name", "brand-new"}, {"default_branch", "trunk"}};
  EXPECT_EQ(agent().post("/api/v1/projects", body).json()["error"], "scope_denied");
  EXPECT_EQ(ci().post("/api/v1/projects", body).status, 403);
  auto created = client(admin_token_).post("/api/v1/projects", body);
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.json()["default_branch"], "trunk");
  EXPECT_EQ(client(admin_token_).post("/api/v1/projects", body).json()["error"], "project_exists");
  EXPECT_EQ(client(admin_token_).post("/api/v1/projects", {{"name", "a b"}}).status, 422);
  EXPECT_EQ(agent().post("/api/v1/runs", report_for("brand-new", 1)).status, 201);
}

TEST_F(AccessTest, AdminsManageTokensOverHttp) {
  http::Client admin = client(admin_token_);
  EXPECT_EQ(ci().post("/api/v1/tokens", {{"name", "x"}, {"scope", "admin"}}).status, 403);
  auto created = admin.post("/api/v1/tokens",
                            {{"name", "new-host"}, {"scope", "agent"}, {"projects", {"demo", "fresh"}}});
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.json()["projects"], json({"demo", "fresh"}));
  EXPECT_EQ(sql("SELECT count(*) FROM projects WHERE name = 'fresh'")[0][0].as<int>(), 1);
  std::string secret = created.json()["token"];
  EXPECT_EQ(client(secret).post("/api/v1/runs", report_for("fresh", 1)).status, 201);
  EXPECT_EQ(client(secret).post("/api/v1/runs", report_for("other", 2)).status, 403);

  auto listed = admin.get("/api/v1/tokens").json();
  EXPECT_EQ(listed.back()["name"], "new-host");
  EXPECT_FALSE(listed.back().contains("token"));  // secrets are shown once
  EXPECT_EQ(admin.post("/api/v1/tokens", {{"name", "x"}, {"scope", "root"}}).json()["field"], "scope");
  EXPECT_EQ(
      admin.post("/api/v1/tokens", {{"name", "x"}, {"scope", "read"}, {"projects", json::array()}}).status,
      422);

  std::string revoke = "/api/v1/tokens/" + std::to_string(created.json()["id"].get<int>());
  EXPECT_EQ(admin.request("DELETE", revoke).status, 200);
  EXPECT_EQ(admin.request("DELETE", revoke).json()["error"], "no_such_token");
  EXPECT_EQ(client(secret).post("/api/v1/runs", report_for("fresh", 3)).json()["error"], "token_unknown");
}

// Each kind of error has its code, whatever the request it came from.
TEST_F(AccessTest, ErrorsCarryAStableCodePerKind) {
  auto code = [](const http::Response& response) { return response.json().value("error", std::string()); };
  json report = report_for("demo", 1);
  report.erase("branch");
  EXPECT_EQ(code(agent().post("/api/v1/runs", report)), "missing_field");
  report = report_for("demo", 1);
  report["cases"][0]["launches"][0]["registers"] = "many";
  auto wrong = agent().post("/api/v1/runs", report);
  EXPECT_EQ(code(wrong), "not_an_integer");
  EXPECT_EQ(wrong.json()["field"], "cases[0].launches[0].registers");
  report = report_for("demo", 1);
  report["branch"] = std::string(300, 'b');
  EXPECT_EQ(code(agent().post("/api/v1/runs", report)), "too_long");
  report = report_for("demo", 1);
  report["cases"][0]["nme"] = "typo";
  EXPECT_EQ(code(agent().post("/api/v1/runs", report)), "unknown_field");
  report = report_for("demo", 1);
  report["schema"] = "kernelwatch.run/9";
  EXPECT_EQ(code(agent().post("/api/v1/runs", report)), "unknown_schema");
  report = report_for("demo", 1);
  report["finished_at"] = "2026-11-21T09:00:00Z";
  EXPECT_EQ(code(agent().post("/api/v1/runs", report)), "inconsistent");
  EXPECT_EQ(code(agent().request("POST", "/api/v1/runs", "{")), "bad_json");
  EXPECT_EQ(code(client().post("/api/v1/runs", report_for("demo", 1))), "token_missing");
  EXPECT_EQ(code(client().get("/api/v1/jobs/77")), "no_such_job");
  EXPECT_EQ(code(client().get("/api/v1/projects/demo/series")), "bad_query");
  EXPECT_EQ(code(client().get("/api/v1/nothing")), "no_such_endpoint");
  EXPECT_EQ(code(client().request("DELETE", "/api/v1/projects")), "method_not_allowed");
  EXPECT_EQ(code(agent().post("/api/v1/jobs/1/heartbeat", {{"agent", "never-claimed"}})), "no_such_job");
  auto job = ci().post("/api/v1/jobs", {{"project", "demo"}, {"commit", make_commit(9)}, {"branch", "main"}});
  EXPECT_EQ(code(agent().post("/api/v1/jobs/" + std::to_string(job.json()["id"].get<int>()) + "/heartbeat",
                              {{"agent", "never-claimed"}})),
            "agent_not_registered");
}

}  // namespace
}  // namespace kw::server::testing
