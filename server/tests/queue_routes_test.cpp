// The queue's routes (/api/v1/jobs, /api/v1/agents) through the router, with
// JobService over the in-memory stand-in of its store and a TEST DOUBLE for
// token lookup: what the handlers decide (which bodies are good, which
// status answers what, which scope may call a route) needs no database.
// The same routes on PostgreSQL, end to end, are in queue_test.cpp.
#include <gtest/gtest.h>

#include "http/handlers/handlers.hpp"
#include "http/router.hpp"
#include "in_memory_store.hpp"
#include "kw/common/memory_budget.hpp"
#include "routed_request.hpp"

namespace kw::server::testing {
namespace {

using nlohmann::json;

std::string commit(char digit) {
  return std::string(40, digit);
}

json job_request(char digit, const std::string& gpu_class = "") {
  json body{{"project", "demo"}, {"commit", commit(digit)}, {"branch", "main"}};
  if (!gpu_class.empty()) body["gpu_class"] = gpu_class;
  return body;
}

json claim_body(const std::string& agent) {
  return {{"agent", agent},
          {"host", agent + ".local"},
          {"version", "0.1.0"},
          {"gpus", {"NVIDIA H100 80GB HBM3"}}};
}

class QueueRoutesTest : public ::testing::Test {
 protected:
  QueueRoutesTest()
      : router_(
            [this](const std::string& token) -> std::optional<Caller> {
              auto found = tokens_.find(token);
              if (found == tokens_.end()) return std::nullopt;
              return found->second;
            },
            metrics_, false) {
    router_.set_body_decoding(std::size_t{1} << 20, &memory_);
    store_.add_project("demo");
    store_.add_project("other");
    add_job_routes(router_, jobs_);
    add_agent_routes(router_, jobs_);
  }

  using Answer = RoutedAnswer;
  Answer call(const std::string& method, const std::string& path, const std::string& token,
              const std::string& body = {}) {
    return routed(router_, method, path, token, body);
  }
  Answer post(const std::string& path, const json& body, const std::string& token = "agent") {
    return call("POST", path, token, body.dump());
  }
  std::int64_t queued(char digit, const std::string& project = "demo") {
    json body = job_request(digit);
    body["project"] = project;
    return post("/api/v1/jobs", body, "ci").body["id"];
  }
  // A job of `project` held by the unscoped agent token's "gpu-host".
  std::int64_t held(char digit, const std::string& project) {
    const std::int64_t job_id = queued(digit, project);
    EXPECT_EQ(post("/api/v1/agents/claim", claim_body("gpu-host")).body["id"], job_id);
    return job_id;
  }
  std::string job_path(std::int64_t id, const std::string& action = "") {
    return "/api/v1/jobs/" + std::to_string(id) + (action.empty() ? "" : "/" + action);
  }

  // Secrets and who they are: as kw-server's token store answers.
  std::map<std::string, Caller> tokens_{
      {"ci", Caller{1, "ci", Scope::ci, std::nullopt}},
      {"agent", Caller{2, "agent-1", Scope::agent, std::nullopt}},
      {"reader", Caller{3, "reader", Scope::read, std::nullopt}},
      {"demo-agent", Caller{4, "demo-host", Scope::agent, std::vector<std::string>{"demo"}}},
      {"other-agent", Caller{5, "other-host", Scope::agent, std::vector<std::string>{"other"}}},
      // Another token of the fixture's agent token's name, scoped to demo.
      {"namesake", Caller{6, "agent-1", Scope::agent, std::vector<std::string>{"demo"}}}};
  Metrics metrics_;
  common::MemoryBudget memory_{std::size_t{64} << 20};
  InMemoryStore store_;
  JobService jobs_{store_, QueueSettings{}};
  Router router_;
};

TEST_F(QueueRoutesTest, ASubmitIsAnswered201ThenWithTheSameJob200) {
  const Answer first = post("/api/v1/jobs", job_request('1'), "ci");
  ASSERT_EQ(first.status, 201) << first.body;
  EXPECT_EQ(first.body["state"], "queued");
  const Answer again = post("/api/v1/jobs", job_request('1'), "ci");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.body["id"], first.body["id"]);
  const Answer other_gpu = post("/api/v1/jobs", job_request('1', "NVIDIA L4"), "ci");
  EXPECT_EQ(other_gpu.status, 201);

  const Answer fetched = call("GET", job_path(first.body["id"]), "");
  ASSERT_EQ(fetched.status, 200);
  EXPECT_EQ(fetched.body["commit"], commit('1'));
  EXPECT_EQ(call("GET", job_path(424242), "").status, 404);
  EXPECT_EQ(call("GET", "/api/v1/jobs/x", "").body["error"], "no_such_job");
}

TEST_F(QueueRoutesTest, ASubmitWithBadFieldsIs422NamingTheFieldAndQueuesNothing) {
  json bad = job_request('1');
  bad["commit"] = "HEAD";
  Answer answer = post("/api/v1/jobs", bad, "ci");
  EXPECT_EQ(answer.status, 422);
  EXPECT_EQ(answer.body["message"], "commit: must be a 40-character lowercase hex SHA");
  json missing = job_request('1');
  missing.erase("branch");
  EXPECT_EQ(post("/api/v1/jobs", missing, "ci").body["message"], "branch: is required");
  EXPECT_EQ(call("POST", "/api/v1/jobs", "ci", "[1]").status, 422);
  EXPECT_EQ(call("POST", "/api/v1/jobs", "ci", "{not json").status, 400);
  json shards = job_request('1');
  shards["shards"] = 0;
  EXPECT_EQ(post("/api/v1/jobs", shards, "ci").body["field"], "shards");
  json nowhere = job_request('1');
  nowhere["project"] = "nowhere";
  EXPECT_EQ(post("/api/v1/jobs", nowhere, "ci").status, 404);
  EXPECT_TRUE(store_.notices().empty()) << "nothing queued";
}

TEST_F(QueueRoutesTest, EachRouteTakesOnlyItsScopes) {
  EXPECT_EQ(post("/api/v1/jobs", job_request('1'), "").status, 401);
  EXPECT_EQ(post("/api/v1/jobs", job_request('1'), "reader").status, 403);
  EXPECT_EQ(post("/api/v1/jobs", job_request('1'), "agent").status, 403);
  EXPECT_EQ(post("/api/v1/agents/claim", claim_body("host-a"), "ci").status, 403);
  const std::int64_t job_id = queued('1');
  EXPECT_EQ(post(job_path(job_id, "heartbeat"), {{"agent", "host-a"}}, "ci").status, 403);
  EXPECT_EQ(call("GET", "/api/v1/agents", "").status, 200) << "reads are open here";
  EXPECT_EQ(call("DELETE", job_path(job_id), "ci").status, 405);
}

TEST_F(QueueRoutesTest, AClaimIs204WhenThereIsNothingAnd200WithTheJob) {
  EXPECT_EQ(post("/api/v1/agents/claim", claim_body("host-a")).status, 204);
  const std::int64_t job_id = queued('1');
  const Answer claimed = post("/api/v1/agents/claim", claim_body("host-a"));
  ASSERT_EQ(claimed.status, 200) << claimed.body;
  EXPECT_EQ(claimed.body["id"], job_id);
  EXPECT_EQ(claimed.body["lease_seconds"], 120);
  const json agents = call("GET", "/api/v1/agents", "").body;
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_EQ(agents[0]["job"]["id"], job_id);
}

TEST_F(QueueRoutesTest, AClaimsGpuAndHealthAreCheckedBeforeAnythingIsRecorded) {
  json body = claim_body("gpu-host-gpu1");
  body["gpu"] = {{"uuid", "GPU-1"}, {"index", 1}, {"model", "NVIDIA H100 80GB HBM3"}};
  body["health"] = {
      {"healthy", true},
      {"checks", {{{"name", "ecc"}, {"passed", true}, {"message", "no uncorrected ECC error"}}}}};
  json bad = body;
  bad["health"]["checks"][0].erase("passed");
  Answer refused = post("/api/v1/agents/claim", bad);
  EXPECT_EQ(refused.status, 422);
  EXPECT_EQ(refused.body["message"],
            "health.checks[0]: must be {name: string, passed: bool, message: string}");
  bad = body;
  bad["gpu"]["index"] = -1;
  EXPECT_EQ(post("/api/v1/agents/claim", bad).body["message"],
            "gpu.index: must be the GPU's index, an integer >= 0");
  bad = body;
  bad["gpus"] = {"NVIDIA H100 80GB HBM3", 7};
  EXPECT_EQ(post("/api/v1/agents/claim", bad).body["field"], "gpus[1]");
  bad = body;
  bad["can_profile"] = "yes";
  EXPECT_EQ(post("/api/v1/agents/claim", bad).body["field"], "can_profile");
  EXPECT_EQ(call("GET", "/api/v1/agents", "").body, json::array()) << "no agent registered by a bad claim";

  EXPECT_EQ(post("/api/v1/agents/claim", body).status, 204);
  const json agents = call("GET", "/api/v1/agents", "").body;
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_EQ(agents[0]["gpu"]["uuid"], "GPU-1");
  EXPECT_EQ(agents[0]["health"]["checks"][0]["message"], "no uncorrected ECC error");
}

TEST_F(QueueRoutesTest, TheHolderFailsAJobWithAReasonAndANonHolderIs409) {
  const std::int64_t job_id = queued('1');
  ASSERT_EQ(post("/api/v1/agents/claim", claim_body("host-a")).status, 200);
  EXPECT_EQ(post(job_path(job_id, "fail"), {{"agent", "host-a"}}).body["message"], "reason: is required");
  EXPECT_EQ(post(job_path(job_id, "fail"), {{"agent", "host-a"}, {"reason", std::string(4097, 'x')}}).status,
            422);
  post("/api/v1/agents/claim", claim_body("host-b"));
  const Answer not_held = post(job_path(job_id, "fail"), {{"agent", "host-b"}, {"reason", "not mine"}});
  EXPECT_EQ(not_held.status, 409);
  EXPECT_EQ(not_held.body["error"], "job_not_held");
  const Answer failed = post(job_path(job_id, "fail"),
                             {{"agent", "host-a"}, {"reason", "kernelwatch.json: benches: is required"}});
  ASSERT_EQ(failed.status, 200) << failed.body;
  EXPECT_EQ(failed.body["error"],
            "agent \"host-a\" could not run it: kernelwatch.json: benches: is required");
  EXPECT_EQ(post(job_path(job_id, "heartbeat"), {{"agent", "nobody"}}).body["error"], "agent_not_registered");
}

// The holder streams each stage as it starts and ends; the job shows them in
// order, the failed one with its message and log, before any report.
TEST_F(QueueRoutesTest, StreamedStagesShowOnTheJobBeforeItsReport) {
  const std::int64_t job_id = queued('1');
  ASSERT_EQ(post("/api/v1/agents/claim", claim_body("host-a")).status, 200);
  const std::string stages = job_path(job_id, "stages");
  auto stage = [&](const json& body) { return post(stages, body); };
  ASSERT_EQ(stage({{"agent", "host-a"}, {"started", "build"}}).status, 200);
  const json built{{"name", "build"},
                   {"status", "passed"},
                   {"duration_ms", 40900},
                   {"gpu_seconds", 0},
                   {"message", "2 command(s) succeeded"},
                   {"details", {{"kernels", json::array()}}}};
  ASSERT_EQ(stage({{"agent", "host-a"}, {"stage", built}}).status, 200);
  ASSERT_EQ(stage({{"agent", "host-a"}, {"started", "correctness"}}).status, 200);
  const json running = call("GET", job_path(job_id), "").body;
  ASSERT_EQ(running["stages"].size(), 2u) << running.dump();
  EXPECT_EQ(running["stages"][1]["status"], "started");
  const json failed{{"name", "correctness"},
                    {"status", "failed"},
                    {"duration_ms", 1200},
                    {"gpu_seconds", 0.8},
                    {"message", "attention: 1 of 76 cases failed"},
                    {"log_tail", "rel_l2_err 0.3 > 0.01"}};
  const Answer answer = stage({{"agent", "host-a"}, {"stage", failed}});
  ASSERT_EQ(answer.status, 200) << answer.body;
  const json& job = answer.body;
  EXPECT_EQ(job["state"], "running");
  ASSERT_EQ(job["stages"].size(), 2u);
  EXPECT_EQ(job["stages"][0]["name"], "build");
  EXPECT_EQ(job["stages"][0]["duration_ms"], 40900);
  EXPECT_EQ(job["stages"][1]["name"], "correctness");
  EXPECT_EQ(job["stages"][1]["status"], "failed");
  EXPECT_EQ(job["stages"][1]["message"], "attention: 1 of 76 cases failed");
  EXPECT_EQ(job["stages"][1]["log_tail"], "rel_l2_err 0.3 > 0.01");
  EXPECT_DOUBLE_EQ(job["stages"][1]["gpu_seconds"].get<double>(), 0.8);

  // Bad input names what is wrong and stores nothing.
  const Answer unknown = stage({{"agent", "host-a"}, {"started", "benchmarks"}});
  EXPECT_EQ(unknown.status, 422);
  EXPECT_NE(unknown.body["message"].get<std::string>().find("started: unknown stage \"benchmarks\""),
            std::string::npos)
      << unknown.body;
  json silent = failed;
  silent["message"] = "";
  const Answer no_reason = stage({{"agent", "host-a"}, {"stage", silent}});
  EXPECT_EQ(no_reason.status, 422);
  EXPECT_EQ(no_reason.body["message"], "stage.message: must say why when the stage is failed");
  EXPECT_EQ(stage({{"agent", "host-a"}}).body["message"],
            "stage: exactly one of started and stage is required");
  json long_log = failed;
  long_log["log_tail"] = std::string(70000, 'x');
  EXPECT_EQ(stage({{"agent", "host-a"}, {"stage", long_log}}).body["field"], "stage.log_tail");
  // Only the holder.
  post("/api/v1/agents/claim", claim_body("host-b"));
  EXPECT_EQ(stage({{"agent", "host-b"}, {"started", "load"}}).status, 409);
  EXPECT_EQ(call("GET", job_path(job_id), "").body["stages"].size(), 2u);

  // Given back and claimed again: a fresh list.
  ASSERT_EQ(post(job_path(job_id, "release"), {{"agent", "host-a"}}).status, 200);
  EXPECT_EQ(call("GET", job_path(job_id), "").body["stages"].size(), 0u);
  const Answer again = post("/api/v1/agents/claim", claim_body("host-b"));
  ASSERT_EQ(again.body["id"], job_id);
  EXPECT_EQ(again.body["stages"].size(), 0u) << again.body;
}

TEST_F(QueueRoutesTest, AnAgentClaimsOnlyJobsOfItsTokensProjects) {
  queued('1', "other");
  queued('2');
  json claim{{"agent", "demo-gpu"}, {"gpus", {"NVIDIA H100 80GB HBM3"}}};
  const Answer first = post("/api/v1/agents/claim", claim, "demo-agent");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.body["project"], "demo") << "the older job is another project's";
  EXPECT_EQ(post("/api/v1/agents/claim", claim, "demo-agent").status, 204);
}

// An agent that can fetch only some projects says so and is handed no
// other's job, even where its token would allow it.
TEST_F(QueueRoutesTest, AnAgentClaimsOnlyJobsOfTheProjectsItServes) {
  queued('1', "other");
  queued('2');
  json claim{{"agent", "gpu-1"}, {"gpus", {"NVIDIA H100 80GB HBM3"}}, {"projects", {"demo"}}};
  const Answer first = post("/api/v1/agents/claim", claim);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.body["project"], "demo");
  EXPECT_EQ(post("/api/v1/agents/claim", claim).status, 204) << "the other project's job waits";
  claim["projects"] = json::array();
  EXPECT_EQ(post("/api/v1/agents/claim", claim).status, 204);
  // A token scoped to demo cannot widen itself by naming another project.
  EXPECT_EQ(
      post("/api/v1/agents/claim", {{"agent", "demo-gpu"}, {"projects", {"other"}}}, "demo-agent").status,
      204);
  const Answer bad = post("/api/v1/agents/claim", {{"agent", "gpu-1"}, {"projects", "demo"}});
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_EQ(bad.body["field"], "projects");
}

// An agent token of one project whose name is another token's name does not
// hold that token's agents' jobs: a job is held by the agent of a token (its
// id), and agent names are each token's own.
TEST_F(QueueRoutesTest, AJobIsHeldByItsAgentsTokenNotByAName) {
  const std::int64_t other_job = held('1', "other");
  for (const char* action : {"release", "heartbeat", "fail"}) {
    const Answer answer =
        post(job_path(other_job, action), {{"agent", "gpu-host"}, {"reason", "taken over"}}, "namesake");
    EXPECT_EQ(answer.status, 403) << action << ": " << answer.body;
  }
  EXPECT_EQ(call("GET", job_path(other_job), "").body["state"], "running");
  // Even on its own project, a token acts only as its own agents.
  const std::int64_t own = held('2', "demo");
  const Answer answer = post(job_path(own, "release"), {{"agent", "gpu-host"}}, "namesake");
  EXPECT_EQ(answer.status, 409) << answer.body;
  EXPECT_EQ(answer.body["error"], "agent_not_registered");
  EXPECT_EQ(call("GET", job_path(own), "").body["state"], "running");
}

TEST_F(QueueRoutesTest, AgentNamesAreEachTokensOwn) {
  ASSERT_EQ(post("/api/v1/agents/claim", {{"agent", "gpu-host-1"}}, "demo-agent").status, 204);
  // The other project's agent gets the name it needs.
  const std::int64_t job_id = queued('3', "other");
  const Answer claim = post("/api/v1/agents/claim", {{"agent", "gpu-host-1"}}, "other-agent");
  ASSERT_EQ(claim.status, 200) << claim.body;
  EXPECT_EQ(claim.body["id"], job_id);
  EXPECT_EQ(call("GET", "/api/v1/agents", "").body.size(), 2u) << "two agents of one name";
}

}  // namespace
}  // namespace kw::server::testing
