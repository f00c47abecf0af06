// One job split over several GPUs, through the routes over the in-memory
// store: each shard is claimed, leased and requeued as a job, its report
// kept until every shard's is in, and the shards' reports merge into one
// run, judged once. The leases run out on the store's clock, moved by the
// test, and the reaper's pass is the one kw-server runs (reaper_pass).
#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "kw/common/shards.hpp"
#include "routed_server.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

constexpr const char* kShardGpuModel = "NVIDIA H100 80GB HBM3";

json shard_claim_body(const std::string& agent, const std::string& gpu = kShardGpuModel) {
  return {{"agent", agent}, {"host", agent + ".local"}, {"version", "0.1.0"}, {"gpus", {gpu}}};
}

std::string job_path(std::int64_t id, const std::string& tail = "") {
  return "/api/v1/jobs/" + std::to_string(id) + tail;
}

// Shard `index` (1-based) of `count`: the cases of an 8-case report that
// the split gives it, as an agent measuring that shard would report them.
json shard_report(std::uint64_t commit, std::int64_t index, std::int64_t count, std::int64_t job_id,
                  const std::string& agent) {
  ReportSpec spec;
  spec.commit = make_commit(commit);
  spec.cases = 8;
  spec.agent = agent;
  spec.job_id = job_id;
  json report = make_report(spec);
  std::vector<std::string> names;
  for (const json& c : report["cases"]) names.push_back(c["name"]);
  const common::ShardSplit split(names, {index - 1, count});
  json mine = json::array();
  for (const json& c : report["cases"]) {
    if (split.contains(c["name"])) mine.push_back(c);
  }
  report["cases"] = mine;
  report["shard"] = {{"index", index}, {"count", count}};
  return report;
}

class ShardTest : public RoutedServerTest {
 protected:
  explicit ShardTest(QueueSettings queue = {}) : RoutedServerTest(queue) {}

  std::int64_t submit(std::uint64_t commit, int shards) {
    auto created = ci().post(
        "/api/v1/jobs",
        {{"project", "demo"}, {"commit", make_commit(commit)}, {"branch", "main"}, {"shards", shards}});
    EXPECT_EQ(created.status, 201) << created.body;
    EXPECT_EQ(created.json()["state"], "running") << "a sharded job is never claimed itself";
    EXPECT_EQ(created.json()["shard_jobs"].size(), static_cast<std::size_t>(shards));
    return created.json()["id"];
  }
};

TEST_F(ShardTest, TwoAgentsMeasureOneJobInHalvesAndItIsJudgedOnce) {
  const std::int64_t job = submit(5, 2);
  auto first = agent().post("/api/v1/agents/claim", shard_claim_body("gpu-a"));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.json()["kind"], "shard");
  EXPECT_EQ(first.json()["shard"], json({{"index", 1}, {"count", 2}, {"job_id", job}}));
  // The first claim picked the model of every shard: an L4 takes none.
  EXPECT_EQ(agent().post("/api/v1/agents/claim", shard_claim_body("gpu-l4", "NVIDIA L4")).status, 204);
  auto second = agent().post("/api/v1/agents/claim", shard_claim_body("gpu-b"));
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.json()["shard"]["index"], 2);
  const std::int64_t shard1 = first.json()["id"], shard2 = second.json()["id"];

  const json report1 = shard_report(5, 1, 2, shard1, "gpu-a");
  auto taken = agent().post(job_path(shard1, "/report"), report1);
  ASSERT_EQ(taken.status, 202) << taken.body;
  EXPECT_EQ(taken.json()["shard"]["waiting_for"], json::array({2}));
  EXPECT_EQ(taken.json()["shard"]["job_id"], job);
  EXPECT_EQ(agent().post(job_path(shard1, "/report"), report1).status, 202) << "a resend is taken as before";
  EXPECT_EQ(store_.runs_stored(), 0);
  json progress = client().get(job_path(job)).json();
  EXPECT_EQ(progress["state"], "running");
  EXPECT_EQ(progress["shard_jobs"][0]["state"], "done");
  EXPECT_EQ(progress["shard_jobs"][0]["agent"], "gpu-a");
  EXPECT_EQ(progress["shard_jobs"][0]["cases"], 4);
  EXPECT_EQ(progress["shard_jobs"][1]["state"], "running");

  // Shard 1's report to shard 2's job is refused, naming both.
  json wrong = report1;
  wrong["job_id"] = shard2;
  wrong["agent"]["name"] = "gpu-b";
  auto refused = agent().post(job_path(shard2, "/report"), wrong);
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_NE(refused.json()["message"].get<std::string>().find("is shard 2 of 2"), std::string::npos);

  const json report2 = shard_report(5, 2, 2, shard2, "gpu-b");
  auto run = agent().post(job_path(shard2, "/report"), report2);
  ASSERT_EQ(run.status, 201) << run.body;
  EXPECT_EQ(run.json()["verdict"], "pass");
  EXPECT_EQ(run.json()["shard"]["state"], "done");
  const std::int64_t run_id = run.json()["run_id"];
  auto again = agent().post(job_path(shard2, "/report"), report2);
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["run_id"], run_id) << "judged once";
  EXPECT_EQ(store_.runs_stored(), 1);
  const json merged = client().get("/api/v1/runs/" + std::to_string(run_id)).json();
  EXPECT_EQ(merged["job_id"], job);
  EXPECT_EQ(merged["cases"].size(), 8U);

  json done = client().get(job_path(job)).json();
  EXPECT_EQ(done["state"], "done");
  EXPECT_EQ(done["run_id"], run_id);
  EXPECT_EQ(done["shard_jobs"][1]["cases"], 4);
}

TEST_F(ShardTest, AShardsReportIsNoRunOfItsOwn) {
  json report = shard_report(6, 1, 2, 0, "gpu-a");
  report.erase("job_id");
  auto response = agent().post("/api/v1/runs", report);
  EXPECT_EQ(response.status, 422) << response.body;
  EXPECT_EQ(response.json()["field"], "shard");
  // A job that is not split takes no shard's report.
  std::int64_t job =
      ci().post("/api/v1/jobs", {{"project", "demo"}, {"commit", make_commit(6)}, {"branch", "main"}})
          .json()["id"];
  ASSERT_EQ(agent().post("/api/v1/agents/claim", shard_claim_body("gpu-a")).json()["id"], job);
  report["job_id"] = job;
  response = agent().post(job_path(job, "/report"), report);
  EXPECT_EQ(response.status, 422) << response.body;
  EXPECT_EQ(store_.runs_stored(), 0);
  EXPECT_EQ(ci().post("/api/v1/jobs",
                      {{"project", "demo"}, {"commit", make_commit(7)}, {"branch", "main"}, {"shards", 65}})
                .status,
            422);
}

// Shards that disagree (an agent on another model than its claim said)
// make no run: the job fails, saying why.
TEST_F(ShardTest, ShardsOfTwoGpuModelsFailTheJob) {
  const std::int64_t job = submit(8, 2);
  const std::int64_t shard1 = agent().post("/api/v1/agents/claim", shard_claim_body("gpu-a")).json()["id"];
  const std::int64_t shard2 = agent().post("/api/v1/agents/claim", shard_claim_body("gpu-b")).json()["id"];
  ASSERT_EQ(agent().post(job_path(shard1, "/report"), shard_report(8, 1, 2, shard1, "gpu-a")).status, 202);
  json other = shard_report(8, 2, 2, shard2, "gpu-b");
  other["device"]["name"] = "NVIDIA H200";
  auto last = agent().post(job_path(shard2, "/report"), other);
  EXPECT_EQ(last.status, 202) << last.body;
  EXPECT_EQ(last.json()["shard"]["state"], "failed");
  json failed = client().get(job_path(job)).json();
  EXPECT_EQ(failed["state"], "failed");
  EXPECT_NE(failed["error"].get<std::string>().find("one GPU model"), std::string::npos) << failed["error"];
  EXPECT_EQ(store_.runs_stored(), 0);
}

// Half-second leases and two attempts, as kw-server's lease tests run.
class ShardLeaseTest : public ShardTest {
 protected:
  ShardLeaseTest() : ShardTest(QueueSettings{0.5, 2}) {}
  // The leases not renewed since run out, and the reaper's pass.
  json after_a_lease(std::int64_t job) {
    store_.advance(1);
    reaper_pass(jobs_, ingest_);
    return client().get(job_path(job)).json();
  }
};

// A shard whose agent dies goes back to the queue; another agent measures
// it, and the run is made from that attempt's report.
TEST_F(ShardLeaseTest, ADeadShardIsRequeuedAndAnotherAgentFinishesIt) {
  const std::int64_t job = submit(9, 2);
  const std::int64_t shard1 = agent().post("/api/v1/agents/claim", shard_claim_body("gpu-a")).json()["id"];
  const std::int64_t shard2 = agent().post("/api/v1/agents/claim", shard_claim_body("gpu-b")).json()["id"];
  // gpu-b keeps its lease; gpu-a dies.
  store_.advance(0.4);
  ASSERT_EQ(agent().post(job_path(shard2, "/heartbeat"), {{"agent", "gpu-b"}}).status, 200);
  store_.advance(0.4);
  reaper_pass(jobs_, ingest_);
  const json requeued = client().get(job_path(job)).json();
  ASSERT_EQ(requeued["shard_jobs"][0]["state"], "queued") << requeued.dump();
  EXPECT_EQ(requeued["shard_jobs"][1]["state"], "running") << "its lease renewed";
  EXPECT_EQ(requeued["state"], "running");
  ASSERT_EQ(agent().post(job_path(shard2, "/report"), shard_report(9, 2, 2, shard2, "gpu-b")).status, 202);
  auto retaken = agent().post("/api/v1/agents/claim", shard_claim_body("gpu-c"));
  ASSERT_EQ(retaken.json()["id"], shard1);
  EXPECT_EQ(retaken.json()["attempts"], 2);
  EXPECT_EQ(agent().post(job_path(shard1, "/report"), shard_report(9, 1, 2, shard1, "gpu-a")).status, 409)
      << "the dead agent's late report";
  auto run = agent().post(job_path(shard1, "/report"), shard_report(9, 1, 2, shard1, "gpu-c"));
  ASSERT_EQ(run.status, 201) << run.body;
  EXPECT_EQ(store_.runs_stored(), 1);
}

// A shard that dies on every attempt fails its job and the shards not
// done: nothing is measured for a run that cannot be made.
TEST_F(ShardLeaseTest, AShardOutOfAttemptsFailsTheJobAndItsOtherShards) {
  const std::int64_t job = submit(10, 3);
  const std::int64_t shard1 = agent().post("/api/v1/agents/claim", shard_claim_body("gpu-a")).json()["id"];
  // Whoever claims shard 1 again dies too; the others are left queued.
  json failed = after_a_lease(job);
  EXPECT_EQ(failed["state"], "running") << "a second attempt is left";
  for (auto claim = agent().post("/api/v1/agents/claim", shard_claim_body("gpu-a")); claim.status == 200;
       claim = agent().post("/api/v1/agents/claim", shard_claim_body("gpu-a"))) {
    if (claim.json()["id"] != shard1) {
      agent().post(job_path(claim.json()["id"], "/release"), {{"agent", "gpu-a"}});
      break;
    }
  }
  failed = after_a_lease(job);
  ASSERT_EQ(failed["state"], "failed") << failed.dump();
  EXPECT_EQ(failed["error"], "shard 1 of 3 failed: its lease expired on every attempt");
  for (const json& shard : failed["shard_jobs"]) EXPECT_EQ(shard["state"], "failed") << shard.dump();
}

// The server stopped between the last shard's report and the merge: the
// reaper makes the run.
TEST_F(ShardLeaseTest, TheReaperMergesShardsWhoseRunWasNotMade) {
  const std::int64_t job = submit(11, 2);
  // Both reports stored, as the last report's transaction left them.
  const json shards = client().get(job_path(job)).json()["shard_jobs"];
  in_transaction(static_cast<JobStore&>(store_), [&](JobTransaction& tx) {
    for (std::int64_t index : {1, 2}) {
      const std::int64_t shard = shards[index - 1]["id"];
      tx.store_shard_report(shard, shard_report(11, index, 2, shard, "gpu-" + std::to_string(index)));
    }
  });
  const json done = after_a_lease(job);
  EXPECT_EQ(done["state"], "done") << done.dump();
  EXPECT_EQ(done["verdict"], "pass");
  EXPECT_EQ(store_.runs_stored(), 1);
}

// A merge takes its share of the memory request bodies share: while it is in
// use the last shard's report is taken and the job waits; the reaper merges
// it once the memory is free. A merge larger than the whole of it fails the
// job, naming --body-memory.
TEST_F(ShardLeaseTest, AMergeWaitsForBodyMemoryAndFailsOnlyPastAllOfIt) {
  common::MemoryBudget budget(std::size_t{8} << 20);
  ingest_.set_body_memory(&budget);
  const std::int64_t job = submit(12, 2);
  const std::int64_t shard1 = agent().post("/api/v1/agents/claim", shard_claim_body("gpu-a")).json()["id"];
  const std::int64_t shard2 = agent().post("/api/v1/agents/claim", shard_claim_body("gpu-b")).json()["id"];
  ASSERT_EQ(agent().post(job_path(shard1, "/report"), shard_report(12, 1, 2, shard1, "gpu-a")).status, 202);
  auto held = std::make_unique<common::MemoryLease>(&budget);
  held->take(budget.capacity());  // every byte in use by other requests
  auto taken = agent().post(job_path(shard2, "/report"), shard_report(12, 2, 2, shard2, "gpu-b"));
  ASSERT_EQ(taken.status, 202) << taken.body;
  EXPECT_EQ(taken.json()["shard"]["error"], "merging once the server's memory for reports is free")
      << taken.body;
  EXPECT_EQ(store_.runs_stored(), 0);
  EXPECT_EQ(after_a_lease(job)["state"], "running") << "still in use";
  held.reset();
  const json done = after_a_lease(job);
  EXPECT_EQ(done["state"], "done") << done.dump();
  EXPECT_EQ(store_.runs_stored(), 1);
  EXPECT_EQ(budget.used(), 0u) << "given back";

  common::MemoryBudget tiny(1024);
  ingest_.set_body_memory(&tiny);
  const std::int64_t big = submit(13, 2);
  for (int index : {1, 2}) {
    const std::int64_t shard = agent().post("/api/v1/agents/claim", shard_claim_body("gpu-a")).json()["id"];
    agent().post(job_path(shard, "/report"), shard_report(13, index, 2, shard, "gpu-a"));
  }
  const json failed = client().get(job_path(big)).json();
  EXPECT_EQ(failed["state"], "failed");
  EXPECT_NE(failed["error"].get<std::string>().find("more than the server's --body-memory (1024)"),
            std::string::npos)
      << failed.dump();
  ingest_.set_body_memory(nullptr);
}

// A stored shard's report posted again is answered as before only to the
// agent that sent it: another token's agent of the same name gets 409.
TEST_F(ShardTest, AnotherTokensResendOfAStoredShardIsRefused) {
  const std::int64_t job = submit(14, 2);
  const std::int64_t shard1 = agent().post("/api/v1/agents/claim", shard_claim_body("gpu-a")).json()["id"];
  const json report = shard_report(14, 1, 2, shard1, "gpu-a");
  ASSERT_EQ(agent().post(job_path(shard1, "/report"), report).status, 202);
  const std::string other = store_.create_token("agent-2", Scope::agent, std::nullopt).first;
  ASSERT_EQ(client(other).post("/api/v1/agents/claim", shard_claim_body("gpu-a")).status, 200)
      << "its own agent named gpu-a, claiming shard 2";
  auto resent = client(other).post(job_path(shard1, "/report"), report);
  EXPECT_EQ(resent.status, 409) << resent.body;
  EXPECT_NE(resent.body.find("job_not_held"), std::string::npos) << resent.body;
  EXPECT_EQ(client().get(job_path(job)).json()["state"], "running");
}

}  // namespace
}  // namespace kw::server::testing
