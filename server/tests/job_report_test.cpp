// A job claimed, measured and reported through the routes over the
// in-memory store: only the agent holding it reports it, for its commit,
// a resend is answered with the run already made, and the report completes
// the job.
#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "audit_claim.hpp"
#include "job_bodies.hpp"
#include "routed_server.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

using JobReportTest = RoutedServerTest;

TEST_F(JobReportTest, ClaimHeartbeatReportCompletesTheJob) {
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
  EXPECT_EQ(store_.runs_stored(), 0U);

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

TEST_F(JobReportTest, ReportForTheWrongCommitIsRejected) {
  ci().post("/api/v1/jobs", job_request(3));
  std::int64_t job_id = agent().post("/api/v1/agents/claim", claim_body("host-a")).json()["id"];
  ReportSpec spec;
  spec.commit = make_commit(4);
  spec.agent = "host-a";
  auto response = agent().post("/api/v1/jobs/" + std::to_string(job_id) + "/report", make_report(spec));
  EXPECT_EQ(response.status, 422) << response.body;
  EXPECT_EQ(client().get("/api/v1/jobs/" + std::to_string(job_id)).json()["state"], "running");
}

TEST_F(JobReportTest, AClaimSaysHowManyCasesTheProjectAuditedOnItsGpuModel) {
  a_claim_says_how_many_cases_the_project_audited(agent(), ci());
}

}  // namespace
}  // namespace kw::server::testing
