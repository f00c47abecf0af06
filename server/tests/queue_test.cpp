// The job queue over HTTP, end to end on PostgreSQL: claims under
// concurrency, leases that run out under kw-server's reaper, a bisect step
// given up. Its rules and routes alone are tested on an in-memory store
// (job_service_test.cpp, queue_routes_test.cpp, job_report_test.cpp).
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "job_bodies.hpp"
#include "server_fixture.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

class QueueTest : public ServerTest {};

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

}  // namespace
}  // namespace kw::server::testing
