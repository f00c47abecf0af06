// The job queue: idempotent submission, claims under concurrency, leases.
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "server_fixture.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

json job_request(std::uint64_t n, const std::string& gpu_class = "") {
  json body{{"project", "demo"}, {"commit", make_commit(n)}, {"branch", "main"}};
  if (!gpu_class.empty()) body["gpu_class"] = gpu_class;
  return body;
}

json claim_body(const std::string& agent, const std::vector<std::string>& gpus = {"NVIDIA H100 80GB HBM3"}) {
  return {{"agent", agent}, {"host", agent + ".local"}, {"version", "0.1.0"}, {"gpus", gpus}};
}

class QueueTest : public ServerTest {};

TEST_F(QueueTest, SubmitIsIdempotentPerProjectCommitAndGpuClass) {
  auto first = ci().post("/api/v1/jobs", job_request(1));
  ASSERT_EQ(first.status, 201) << first.body;
  EXPECT_EQ(first.json()["state"], "queued");
  auto again = ci().post("/api/v1/jobs", job_request(1));
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(again.json()["id"], first.json()["id"]);
  auto other_gpu = ci().post("/api/v1/jobs", job_request(1, "NVIDIA L4"));
  EXPECT_EQ(other_gpu.status, 201);
  EXPECT_NE(other_gpu.json()["id"], first.json()["id"]);

  auto fetched = client().get("/api/v1/jobs/" + std::to_string(first.json()["id"].get<int>()));
  ASSERT_EQ(fetched.status, 200);
  EXPECT_EQ(fetched.json()["commit"], make_commit(1));
  EXPECT_EQ(client().get("/api/v1/jobs/424242").status, 404);
}

TEST_F(QueueTest, SubmitRejectsBadFields) {
  json bad = job_request(1);
  bad["commit"] = "HEAD";
  auto response = ci().post("/api/v1/jobs", bad);
  EXPECT_EQ(response.status, 422);
  EXPECT_EQ(response.json()["message"], "commit: must be a 40-character lowercase hex SHA");
  json missing = job_request(1);
  missing.erase("branch");
  EXPECT_EQ(ci().post("/api/v1/jobs", missing).json()["message"], "branch: is required");
  EXPECT_EQ(ci().request("POST", "/api/v1/jobs", "[1]").status, 422);
  EXPECT_EQ(sql("SELECT count(*) FROM jobs")[0][0].as<int>(), 0);
}

TEST_F(QueueTest, ClaimHeartbeatReportCompletesTheJob) {
  std::int64_t job_id = ci().post("/api/v1/jobs", job_request(7)).json()["id"];
  auto empty_claim = agent().post("/api/v1/agents/claim", claim_body("host-a", {"NVIDIA L4"}));
  ASSERT_EQ(ci().post("/api/v1/jobs", job_request(8, "NVIDIA H100 80GB HBM3")).status, 201);
  // gpu_class 'any' goes to any agent; the H100 job only to H100 hosts.
  EXPECT_EQ(empty_claim.status, 200);
  EXPECT_EQ(empty_claim.json()["id"], job_id);
  EXPECT_EQ(agent().post("/api/v1/agents/claim", claim_body("host-a", {"NVIDIA L4"})).status, 204);

  auto claim = agent().post("/api/v1/agents/claim", claim_body("host-b"));
  ASSERT_EQ(claim.status, 200) << claim.body;
  std::int64_t h100_job = claim.json()["id"];
  EXPECT_EQ(claim.json()["state"], "running");
  EXPECT_EQ(claim.json()["agent"], "host-b");
  EXPECT_EQ(claim.json()["attempts"], 1);

  auto beat = agent().post("/api/v1/jobs/" + std::to_string(h100_job) + "/heartbeat", {{"agent", "host-b"}});
  ASSERT_EQ(beat.status, 200) << beat.body;
  auto wrong_beat =
      agent().post("/api/v1/jobs/" + std::to_string(h100_job) + "/heartbeat", {{"agent", "host-a"}});
  EXPECT_EQ(wrong_beat.status, 409) << wrong_beat.body;

  ReportSpec spec;
  spec.commit = make_commit(8);
  spec.agent = "host-a";
  json report = make_report(spec);
  auto stolen = agent().post("/api/v1/jobs/" + std::to_string(h100_job) + "/report", report);
  EXPECT_EQ(stolen.status, 409) << stolen.body;
  EXPECT_EQ(sql("SELECT count(*) FROM runs")[0][0].as<int>(), 0);

  report["agent"]["name"] = "host-b";
  auto delivered = agent().post("/api/v1/jobs/" + std::to_string(h100_job) + "/report", report);
  ASSERT_EQ(delivered.status, 201) << delivered.body;
  EXPECT_EQ(delivered.json()["job_id"], h100_job);
  auto redelivered = agent().post("/api/v1/jobs/" + std::to_string(h100_job) + "/report", report);
  EXPECT_EQ(redelivered.status, 200) << redelivered.body;
  EXPECT_EQ(redelivered.json()["run_id"], delivered.json()["run_id"]);

  json job = client().get("/api/v1/jobs/" + std::to_string(h100_job)).json();
  EXPECT_EQ(job["state"], "done");
  EXPECT_EQ(job["run_id"], delivered.json()["run_id"]);
  EXPECT_EQ(job["verdict"], "pass");
}

TEST_F(QueueTest, ReportForTheWrongCommitIsRejected) {
  ci().post("/api/v1/jobs", job_request(3));
  std::int64_t job_id = agent().post("/api/v1/agents/claim", claim_body("host-a")).json()["id"];
  ReportSpec spec;
  spec.commit = make_commit(4);
  spec.agent = "host-a";
  auto response = agent().post("/api/v1/jobs/" + std::to_string(job_id) + "/report", make_report(spec));
  EXPECT_EQ(response.status, 422) << response.body;
  EXPECT_EQ(client().get("/api/v1/jobs/" + std::to_string(job_id)).json()["state"], "running");
}

// Another token's agent of the same name is an agent of its own: it does
// not hold the first one's job.
TEST_F(QueueTest, AgentNameBelongsToItsToken) {
  ci().post("/api/v1/jobs", job_request(3));
  std::int64_t job_id = agent().post("/api/v1/agents/claim", claim_body("host-a")).json()["id"];
  std::string other = create_token(database_->url(), "agent-2", Scope::agent);
  EXPECT_EQ(client(other).post("/api/v1/agents/claim", claim_body("host-a")).status, 204);
  auto response =
      client(other).post("/api/v1/jobs/" + std::to_string(job_id) + "/release", {{"agent", "host-a"}});
  EXPECT_EQ(response.status, 409) << response.body;
  EXPECT_EQ(response.json()["error"], "job_not_held");
}

// A claimed job carries the project's thresholds: the agent screens its
// first A/B pass by what the server will judge with.
TEST_F(QueueTest, AClaimedJobCarriesTheProjectsThresholds) {
  ci().post("/api/v1/jobs", job_request(4));
  const auto settings = client(admin_token_)
                            .request("PUT", "/api/v1/projects/demo/settings",
                                     R"({"min_threshold": 0.03, "case_thresholds": {"k/n1": 0.05}})");
  ASSERT_EQ(settings.status, 200) << settings.body;
  const json job = agent().post("/api/v1/agents/claim", claim_body("host-a")).json();
  EXPECT_EQ(job["project_thresholds"], json::parse(R"({"min_threshold": 0.03, "cases": {"k/n1": 0.05}})"));
}

TEST_F(QueueTest, ReleaseReturnsTheJobWithoutSpendingAnAttempt) {
  ci().post("/api/v1/jobs", job_request(9));
  std::int64_t job_id = agent().post("/api/v1/agents/claim", claim_body("host-a")).json()["id"];
  auto released = agent().post("/api/v1/jobs/" + std::to_string(job_id) + "/release", {{"agent", "host-a"}});
  ASSERT_EQ(released.status, 200) << released.body;
  EXPECT_EQ(released.json()["state"], "queued");
  EXPECT_EQ(released.json()["attempts"], 0);
}

// The holder streams each stage as it starts and ends; the job shows them in
// order, the failed one with its message and log, before any report.
TEST_F(QueueTest, StreamedStagesShowOnTheJobBeforeItsReport) {
  std::int64_t job_id = ci().post("/api/v1/jobs", job_request(1)).json()["id"];
  ASSERT_EQ(agent().post("/api/v1/agents/claim", claim_body("host-a")).status, 200);
  const std::string stages = "/api/v1/jobs/" + std::to_string(job_id) + "/stages";
  auto post = [&](const json& body) { return agent().post(stages, body); };
  ASSERT_EQ(post({{"agent", "host-a"}, {"started", "build"}}).status, 200);
  json built{{"name", "build"},
             {"status", "passed"},
             {"duration_ms", 40900},
             {"gpu_seconds", 0},
             {"message", "2 command(s) succeeded"},
             {"details", {{"kernels", json::array()}}}};
  ASSERT_EQ(post({{"agent", "host-a"}, {"stage", built}}).status, 200);
  ASSERT_EQ(post({{"agent", "host-a"}, {"started", "correctness"}}).status, 200);
  auto running = client().get("/api/v1/jobs/" + std::to_string(job_id)).json();
  ASSERT_EQ(running["stages"].size(), 2u) << running.dump();
  EXPECT_EQ(running["stages"][1]["status"], "started");
  json failed{{"name", "correctness"},
              {"status", "failed"},
              {"duration_ms", 1200},
              {"gpu_seconds", 0.8},
              {"message", "attention: 1 of 76 cases failed"},
              {"log_tail", "rel_l2_err 0.3 > 0.01"}};
  auto answer = post({{"agent", "host-a"}, {"stage", failed}});
  ASSERT_EQ(answer.status, 200) << answer.body;
  json job = answer.json();
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
  auto unknown = post({{"agent", "host-a"}, {"started", "benchmarks"}});
  EXPECT_EQ(unknown.status, 422);
  EXPECT_NE(unknown.json()["message"].get<std::string>().find("started: unknown stage \"benchmarks\""),
            std::string::npos)
      << unknown.body;
  json silent = failed;
  silent["message"] = "";
  auto no_reason = post({{"agent", "host-a"}, {"stage", silent}});
  EXPECT_EQ(no_reason.status, 422);
  EXPECT_EQ(no_reason.json()["message"], "stage.message: must say why when the stage is failed");
  EXPECT_EQ(post({{"agent", "host-a"}}).status, 422);
  json long_log = failed;
  long_log["log_tail"] = std::string(70000, 'x');
  EXPECT_EQ(post({{"agent", "host-a"}, {"stage", long_log}}).status, 422);
  // Only the holder.
  agent().post("/api/v1/agents/claim", claim_body("host-b"));
  auto other = post({{"agent", "host-b"}, {"started", "load"}});
  EXPECT_EQ(other.status, 409) << other.body;
  EXPECT_EQ(sql("SELECT count(*) FROM job_stages")[0][0].as<int>(), 2);

  // Given back and claimed again: a fresh list.
  ASSERT_EQ(agent().post("/api/v1/jobs/" + std::to_string(job_id) + "/release", {{"agent", "host-a"}}).status,
            200);
  EXPECT_EQ(client().get("/api/v1/jobs/" + std::to_string(job_id)).json()["stages"].size(), 0u);
  auto again = agent().post("/api/v1/agents/claim", claim_body("host-b"));
  ASSERT_EQ(again.json()["id"], job_id);
  EXPECT_EQ(again.json()["stages"].size(), 0u) << again.body;
}

// An agent that cannot make a report of a job fails it at once, with the
// reason, instead of letting its lease expire max_attempts times.
TEST_F(QueueTest, TheHolderFailsAJobItCannotRunWithTheReason) {
  std::int64_t job_id = ci().post("/api/v1/jobs", job_request(1)).json()["id"];
  ASSERT_EQ(agent().post("/api/v1/agents/claim", claim_body("host-a")).status, 200);
  const std::string fail = "/api/v1/jobs/" + std::to_string(job_id) + "/fail";
  EXPECT_EQ(agent().post(fail, {{"agent", "host-a"}}).json()["message"], "reason: is required");
  agent().post("/api/v1/agents/claim", claim_body("host-b"));
  EXPECT_EQ(agent().post(fail, {{"agent", "host-b"}, {"reason", "not mine"}}).status, 409);
  auto failed =
      agent().post(fail, {{"agent", "host-a"}, {"reason", "kernelwatch.json: benches: is required"}});
  ASSERT_EQ(failed.status, 200) << failed.body;
  EXPECT_EQ(failed.json()["state"], "failed");
  EXPECT_EQ(failed.json()["error"],
            "agent \"host-a\" could not run it: kernelwatch.json: benches: is required");
  // Not claimed again.
  EXPECT_EQ(agent().post("/api/v1/agents/claim", claim_body("host-a")).status, 204);
  EXPECT_EQ(agent().post(fail, {{"agent", "host-a"}, {"reason", "again"}}).status, 409);
}

// Each worker of a multi-GPU host claims as an agent of its own, saying
// which GPU it owns and how its health check went. An unhealthy GPU is
// refused jobs, and GET /agents says why; once it passes it claims again.
TEST_F(QueueTest, AWorkerWhoseGpuFailedItsHealthCheckClaimsNothingAndTheAgentsListSaysWhy) {
  std::int64_t job_id = ci().post("/api/v1/jobs", job_request(21)).json()["id"];
  auto worker = [](int index, bool healthy) {
    json body = claim_body("gpu-host-1-gpu" + std::to_string(index));
    body["gpu"] = {{"uuid", "GPU-0000000" + std::to_string(index)},
                   {"index", index},
                   {"model", "NVIDIA H100 80GB HBM3"}};
    body["health"] = {{"healthy", healthy},
                      {"checks",
                       {{{"name", "cuda_context"}, {"passed", true}, {"message", "ran"}},
                        {{"name", "ecc"},
                         {"passed", healthy},
                         {"message", healthy ? "no uncorrected ECC error" : "2 uncorrected ECC error(s)"}}}}};
    return body;
  };
  EXPECT_EQ(agent().post("/api/v1/agents/claim", worker(1, false)).status, 204)
      << "the queued job stays queued";
  auto claimed = agent().post("/api/v1/agents/claim", worker(0, true));
  ASSERT_EQ(claimed.status, 200) << claimed.body;
  EXPECT_EQ(claimed.json()["id"], job_id);

  json agents = client().get("/api/v1/agents").json();
  ASSERT_EQ(agents.size(), 2u) << agents.dump();
  EXPECT_EQ(agents[0]["name"], "gpu-host-1-gpu0");
  EXPECT_EQ(agents[0]["state"], "running");
  EXPECT_EQ(agents[0]["job"]["id"], job_id);
  EXPECT_EQ(agents[0]["gpu"]["uuid"], "GPU-00000000");
  EXPECT_EQ(agents[1]["state"], "unhealthy");
  EXPECT_EQ(agents[1]["gpu"]["index"], 1);
  EXPECT_EQ(agents[1]["health"]["checks"][1]["message"], "2 uncorrected ECC error(s)");
  EXPECT_EQ(agents[1]["job"], nullptr);

  // Healthy again: it claims the next job.
  std::int64_t next = ci().post("/api/v1/jobs", job_request(22)).json()["id"];
  auto again = agent().post("/api/v1/agents/claim", worker(1, true));
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["id"], next);

  json bad = worker(1, true);
  bad["health"]["checks"][0].erase("passed");
  auto refused = agent().post("/api/v1/agents/claim", bad);
  EXPECT_EQ(refused.status, 422);
  EXPECT_EQ(refused.json()["message"],
            "health.checks[0]: must be {name: string, passed: bool, message: string}");
  bad = worker(1, true);
  bad["gpu"]["index"] = -1;
  EXPECT_EQ(agent().post("/api/v1/agents/claim", bad).json()["message"],
            "gpu.index: must be the GPU's index, an integer >= 0");
}

// A bisect step whose lease ran out on every attempt (its agent died each
// time) fails, and the bisect skips that commit and measures another, as it
// does for a commit that does not build; before, it waited on the failed
// step for ever.
TEST_F(QueueTest, ABisectStepWhoseLeaseRanOutOnEveryAttemptIsSkippedAndTheBisectGoesOn) {
  ReportSpec spec;
  spec.commit = make_commit(40);
  ASSERT_EQ(agent().post("/api/v1/runs", make_report(spec)).status, 201);
  std::vector<std::string> commits;
  for (std::uint64_t n = 41; n <= 44; ++n) commits.push_back(make_commit(n));
  sql("INSERT INTO bisects (project_id, run_id, gpu_class, commits, cases, good, bad, steps, max_steps) "
      "SELECT project_id, id, 'any', ARRAY['" +
      commits[0] + "', '" + commits[1] + "', '" + commits[2] + "', '" + commits[3] +
      "'], ARRAY['case0'], 0, 3, 1, 6 FROM runs");
  // The first step: commits[1] against the good end, its third attempt's lease gone.
  sql("INSERT INTO jobs (project_id, commit_sha, branch, base_commit, gpu_class, state, attempts, "
      "max_attempts, "
      "lease_expires_at, rerun, on_default_branch, bisect_id) "
      "SELECT b.project_id, '" +
      commits[1] + "', 'kernelwatch/bisect-' || b.id, '" + commits[0] +
      "', 'any', 'running', 3, 3, now() - interval '1 second', 1, false, b.id FROM bisects b");

  // Any claim returns expired leases first.
  EXPECT_EQ(agent().post("/api/v1/agents/claim", claim_body("host-a", {"NVIDIA L4"})).json()["commit"],
            commits[2])
      << "the next step is claimable at once";
  pqxx::result failed = sql("SELECT state, error FROM jobs WHERE commit_sha = '" + commits[1] + "'");
  EXPECT_EQ(failed[0][0].as<std::string>(), "failed");
  EXPECT_EQ(failed[0][1].as<std::string>(), "lease expired 3 times; giving up");
  pqxx::result bisect = sql("SELECT state, skipped::text, steps FROM bisects");
  EXPECT_EQ(bisect[0][0].as<std::string>(), "running");
  EXPECT_EQ(bisect[0][1].as<std::string>(), "{1}");
  EXPECT_EQ(bisect[0][2].as<int>(), 2);
}

TEST_F(QueueTest, TwentyConcurrentClaimersOnTwoHundredJobsEachClaimedOnce) {
  for (int i = 0; i < 200; ++i) ASSERT_EQ(ci().post("/api/v1/jobs", job_request(1000 + i)).status, 201);
  std::vector<std::vector<std::int64_t>> claimed(20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 20; ++t) {
    threads.emplace_back([&, t] {
      http::Client c(base_url_, agent_token_);
      for (;;) {
        auto response = c.post("/api/v1/agents/claim", claim_body("claimer-" + std::to_string(t)));
        if (response.status == 204) return;
        ASSERT_EQ(response.status, 200) << response.body;
        claimed[t].push_back(response.json()["id"].get<std::int64_t>());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::set<std::int64_t> unique;
  std::size_t total = 0;
  int claimers_with_work = 0;
  for (const auto& ids : claimed) {
    total += ids.size();
    unique.insert(ids.begin(), ids.end());
    claimers_with_work += ids.empty() ? 0 : 1;
  }
  EXPECT_EQ(total, 200u) << "every job claimed exactly once";
  EXPECT_EQ(unique.size(), 200u) << "no job claimed twice";
  EXPECT_GT(claimers_with_work, 1);
  EXPECT_EQ(sql("SELECT count(*) FROM jobs WHERE state = 'running' AND attempts = 1")[0][0].as<int>(), 200);
}

class LeaseTest : public ServerTest {
 protected:
  ServerOptions server_options() override { return with_short_leases(ServerTest::server_options()); }
};

TEST_F(LeaseTest, ExpiredLeaseRequeuesThenFailsAfterMaxAttempts) {
  std::int64_t job_id = ci().post("/api/v1/jobs", job_request(11)).json()["id"];
  ASSERT_EQ(agent().post("/api/v1/agents/claim", claim_body("host-a")).json()["id"], job_id);
  const std::string job_url = "/api/v1/jobs/" + std::to_string(job_id);
  // The reaper returns it to the queue once the lease expires; a second agent takes it over.
  wait_until([&] { return client().get(job_url).json()["state"] == "queued"; },
             "the expired lease's job queued");
  auto second = agent().post("/api/v1/agents/claim", claim_body("host-b"));
  ASSERT_EQ(second.status, 200);
  EXPECT_EQ(second.json()["id"], job_id);
  EXPECT_EQ(second.json()["attempts"], 2);
  // The first agent's late report is refused.
  ReportSpec spec;
  spec.commit = make_commit(11);
  spec.agent = "host-a";
  EXPECT_EQ(agent().post("/api/v1/jobs/" + std::to_string(job_id) + "/report", make_report(spec)).status,
            409);
  // The second lease expires too: max_attempts = 2, so the job fails.
  wait_until([&] { return client().get(job_url).json()["state"] == "failed"; }, "the job failed");
  json job = client().get(job_url).json();
  EXPECT_EQ(job["state"], "failed");
  EXPECT_EQ(job["error"], "lease expired 2 times; giving up");
}

TEST_F(LeaseTest, HeartbeatsKeepTheLease) {
  std::int64_t job_id = ci().post("/api/v1/jobs", job_request(12)).json()["id"];
  agent().post("/api/v1/agents/claim", claim_body("host-a"));
  // A deliberate wait: heartbeats 200 ms apart, 1.2 s in all, past the 0.5 s lease.
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_EQ(
        agent().post("/api/v1/jobs/" + std::to_string(job_id) + "/heartbeat", {{"agent", "host-a"}}).status,
        200);
  }
  EXPECT_EQ(client().get("/api/v1/jobs/" + std::to_string(job_id)).json()["state"], "running");
}

}  // namespace
}  // namespace kw::server::testing
