// The job queue's rules (JobService) on the in-memory stand-in of its
// store: who may queue, see, claim and hold a job, and what each failure
// announces. The store's SQL is tested on PostgreSQL (job_store_pg_test.cpp),
// and the HTTP path end to end in queue_test.cpp.
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "errors.hpp"
#include "in_memory_store.hpp"
#include "service/job_service.hpp"

namespace kw::server::testing {
namespace {

using nlohmann::json;

constexpr const char* kH100 = "NVIDIA H100 80GB HBM3";

class JobServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ProjectSettings tuned;
    tuned.min_threshold = 0.03;
    tuned.run_alpha = 0.05;
    tuned.case_thresholds = {{"k/n1", 0.05}};
    store_.add_project("demo", tuned);
    store_.add_project("other");
  }

  static Caller token(std::int64_t id, Scope scope,
                      std::optional<std::vector<std::string>> projects = std::nullopt) {
    return Caller{id, "token-" + std::to_string(id), scope, std::move(projects)};
  }
  static NewJob job(char digit, const std::string& branch = "main") {
    NewJob made;
    made.commit = std::string(40, digit);
    made.branch = branch;
    return made;
  }
  static ClaimRequest ask(const std::string& agent) {
    ClaimRequest request;
    request.agent = agent;
    request.host = agent + ".local";
    request.version = "0.1.0";
    request.gpus = json::array({kH100});
    return request;
  }

  std::int64_t queue(char digit, const std::string& project = "demo") {
    return jobs_.create(ci_, project, job(digit)).second["id"];
  }
  std::optional<std::int64_t> claim(const std::string& agent, const Caller& caller) {
    auto claimed = jobs_.claim(caller, ask(agent));
    if (!claimed) return std::nullopt;
    return (*claimed)["id"].get<std::int64_t>();
  }
  std::vector<std::string> notices_of(std::int64_t job_id) {
    std::vector<std::string> kinds;
    for (const auto& notice : store_.notices())
      if (notice.job_id == job_id) kinds.push_back(notice.kind);
    return kinds;
  }

  InMemoryStore store_;
  JobService jobs_{store_, QueueSettings{0.5, 2}};
  Caller ci_ = token(1, Scope::ci);
  Caller agent_ = token(2, Scope::agent);
  Caller reader_of_other_ = token(3, Scope::read, std::vector<std::string>{"other"});
};

TEST_F(JobServiceTest, AJobIsQueuedOnlyOnceAndAnnouncedOnlyWhenMade) {
  auto [created, document] = jobs_.create(ci_, "demo", job('1'));
  EXPECT_TRUE(created);
  EXPECT_EQ(document["state"], "queued");
  EXPECT_EQ(document["max_attempts"], 2) << "the server's setting, whatever the request";
  auto [again, same] = jobs_.create(ci_, "demo", job('1'));
  EXPECT_FALSE(again);
  EXPECT_EQ(same["id"], document["id"]);
  EXPECT_EQ(notices_of(document["id"]), std::vector<std::string>{"job_queued"});
}

TEST_F(JobServiceTest, TheTokenIsAskedBeforeTheProjectIsLookedFor) {
  const Caller demo_only = token(4, Scope::ci, std::vector<std::string>{"demo"});
  EXPECT_EQ(error_of([&] { jobs_.create(demo_only, "other", job('1')); }), "project_denied");
  EXPECT_EQ(error_of([&] { jobs_.create(demo_only, "nowhere", job('1')); }), "project_denied")
      << "a project the token does not name is not even said to exist";
  EXPECT_EQ(error_of([&] { jobs_.create(ci_, "nowhere", job('1')); }), "no_such_project");
  EXPECT_TRUE(store_.notices().empty());
}

TEST_F(JobServiceTest, AJobIsShownToWhoeverMayReadItsProject) {
  const std::int64_t job_id = queue('1');
  EXPECT_EQ(jobs_.get(nullptr, job_id)["commit"], std::string(40, '1')) << "open reads";
  EXPECT_EQ(jobs_.get(&ci_, job_id)["id"], job_id);
  EXPECT_EQ(error_of([&] { jobs_.get(&reader_of_other_, job_id); }), "project_denied");
  EXPECT_EQ(error_of([&] { jobs_.get(nullptr, 4242); }), "no_such_job");
}

TEST_F(JobServiceTest, AClaimedJobCarriesTheProjectsThresholdsItsDetectionAndTheLease) {
  queue('1');
  const std::optional<json> claimed = jobs_.claim(agent_, ask("host-a"));
  ASSERT_TRUE(claimed.has_value());
  EXPECT_EQ((*claimed)["project_thresholds"],
            json::parse(R"({"min_threshold": 0.03, "cases": {"k/n1": 0.05}})"));
  // The detection settings the agent decides its A/B with, as the server judges.
  const common::DetectionSettings detection =
      common::parse_project_detection((*claimed)["project_detection"], "project_detection");
  EXPECT_EQ(detection.min_threshold, 0.03);
  EXPECT_EQ(detection.run_alpha, 0.05);
  EXPECT_EQ((*claimed)["lease_seconds"], 0.5);
  EXPECT_EQ((*claimed)["state"], "running");
  EXPECT_EQ((*claimed)["agent"], "host-a");
}

TEST_F(JobServiceTest, AClaimTakesOnlyJobsOfProjectsTheAgentServesAndItsTokenNames) {
  const std::int64_t other_job = queue('1', "other");
  const std::int64_t demo_job = queue('2');
  const Caller demo_agent = token(5, Scope::agent, std::vector<std::string>{"demo"});
  ClaimRequest serves_both = ask("host-a");
  serves_both.serves = std::vector<std::string>{"other", "demo"};
  const auto claimed = jobs_.claim(demo_agent, serves_both);
  ASSERT_TRUE(claimed.has_value());
  EXPECT_EQ((*claimed)["id"], demo_job) << "the token does not name \"other\"";

  ClaimRequest serves_none = ask("host-b");
  serves_none.serves = std::vector<std::string>{};
  EXPECT_FALSE(jobs_.claim(agent_, serves_none).has_value()) << "it can fetch no project";
  EXPECT_EQ(claim("host-b", agent_), other_job) << "serving what its token names";
}

TEST_F(JobServiceTest, AWorkerWhoseGpuFailedItsHealthCheckClaimsNothingUntilItPasses) {
  const std::int64_t job_id = queue('1');
  ClaimRequest sick = ask("gpu-host-gpu1");
  sick.gpu = json{{"uuid", "GPU-1"}, {"index", 1}, {"model", kH100}};
  sick.health = json{{"healthy", false}, {"checks", json::array()}};
  EXPECT_FALSE(jobs_.claim(agent_, sick).has_value());
  EXPECT_EQ(jobs_.get(nullptr, job_id)["state"], "queued");
  const json agents = json::parse(jobs_.agents(nullptr));
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_EQ(agents[0]["state"], "unhealthy") << "registered, and why it idles said";

  sick.health = json{{"healthy", true}, {"checks", json::array()}};
  const auto claimed = jobs_.claim(agent_, sick);
  ASSERT_TRUE(claimed.has_value());
  EXPECT_EQ((*claimed)["id"], job_id);
}

TEST_F(JobServiceTest, TheAgentsListShowsAScopedReaderNoJobOfAnotherProject) {
  const std::int64_t job_id = queue('1');
  ASSERT_EQ(claim("host-a", agent_), job_id);
  EXPECT_EQ(json::parse(jobs_.agents(nullptr))[0]["job"]["id"], job_id);
  const json scoped = json::parse(jobs_.agents(&reader_of_other_));
  ASSERT_EQ(scoped.size(), 1u);
  EXPECT_EQ(scoped[0]["job"], nullptr);
}

TEST_F(JobServiceTest, OnlyTheHolderOfAJobActsOnIt) {
  const std::int64_t job_id = queue('1');
  ASSERT_EQ(claim("host-a", agent_), job_id);
  EXPECT_EQ(error_of([&] { jobs_.heartbeat(agent_, 4242, "host-a"); }), "no_such_job");
  EXPECT_EQ(error_of([&] { jobs_.heartbeat(agent_, job_id, "host-z"); }), "agent_not_registered");
  const Caller other_project = token(6, Scope::agent, std::vector<std::string>{"other"});
  EXPECT_EQ(error_of([&] { jobs_.release(other_project, job_id, "host-a"); }), "project_denied");

  // Another token's agent of the same name is an agent of its own.
  const Caller second_token = token(7, Scope::agent);
  EXPECT_FALSE(claim("host-a", second_token).has_value());
  try {
    jobs_.release(second_token, job_id, "host-a");
    ADD_FAILURE() << "released by an agent that does not hold it";
  } catch (const Conflict& error) {
    EXPECT_EQ(error.code(), "job_not_held");
    EXPECT_STREQ(error.what(), ("agent \"host-a\" does not hold job " + std::to_string(job_id) +
                                " (state running); cannot release")
                                   .c_str());
  }
  EXPECT_EQ(jobs_.heartbeat(agent_, job_id, "host-a")["state"], "running");
}

TEST_F(JobServiceTest, AReleaseReturnsTheJobWithoutSpendingAnAttempt) {
  const std::int64_t job_id = queue('1');
  ASSERT_EQ(claim("host-a", agent_), job_id);
  const json released = jobs_.release(agent_, job_id, "host-a");
  EXPECT_EQ(released["state"], "queued");
  EXPECT_EQ(released["attempts"], 0);
  EXPECT_EQ(error_of([&] { jobs_.release(agent_, job_id, "host-a"); }), "job_not_held");
}

TEST_F(JobServiceTest, TheHolderFailsAJobItCannotRunWithTheReasonAndItIsAnnounced) {
  const std::int64_t job_id = queue('1');
  ASSERT_EQ(claim("host-a", agent_), job_id);
  const json failed = jobs_.fail(agent_, job_id, "host-a", "kernelwatch.json: benches: is required");
  EXPECT_EQ(failed["state"], "failed");
  EXPECT_EQ(failed["error"], "agent \"host-a\" could not run it: kernelwatch.json: benches: is required");
  EXPECT_EQ(notices_of(job_id), (std::vector<std::string>{"job_queued", "job_failed"}));
  EXPECT_FALSE(claim("host-a", agent_).has_value()) << "not claimed again";
  EXPECT_EQ(error_of([&] { jobs_.fail(agent_, job_id, "host-a", "again"); }), "job_not_held");
  EXPECT_EQ(notices_of(job_id).size(), 2u) << "announced once";
}

TEST_F(JobServiceTest, HeartbeatsAndStagesKeepTheLease) {
  const std::int64_t job_id = queue('1');
  ASSERT_EQ(claim("host-a", agent_), job_id);
  StageProgress stage;
  stage.name = "build";
  stage.status = "started";
  for (int beat = 0; beat < 6; ++beat) {
    store_.advance(0.4);
    if (beat % 2 == 0)
      jobs_.heartbeat(agent_, job_id, "host-a");
    else
      jobs_.record_stage(agent_, job_id, "host-a", stage);
    EXPECT_EQ(jobs_.reap().requeued, 0) << "after beat " << beat;
  }
  EXPECT_EQ(jobs_.get(nullptr, job_id)["state"], "running");
  store_.advance(0.6);
  EXPECT_EQ(jobs_.reap().requeued, 1);
}

TEST_F(JobServiceTest, AnExpiredLeaseIsRequeuedByAnyClaimAndFailedAndAnnouncedOnceAttemptsAreSpent) {
  const std::int64_t job_id = queue('1');
  ASSERT_EQ(claim("host-a", agent_), job_id);
  store_.advance(1);
  const auto second = jobs_.claim(agent_, ask("host-b"));
  ASSERT_TRUE(second.has_value()) << "a claim returns expired leases first";
  EXPECT_EQ((*second)["id"], job_id);
  EXPECT_EQ((*second)["attempts"], 2);
  EXPECT_EQ(error_of([&] { jobs_.heartbeat(agent_, job_id, "host-a"); }), "job_not_held")
      << "its first holder's lease is gone";

  store_.advance(1);
  const ExpiredLeases reaped = jobs_.reap();
  EXPECT_EQ(reaped.failed, std::vector<std::int64_t>{job_id});
  EXPECT_EQ(jobs_.get(nullptr, job_id)["error"], "lease expired 2 times; giving up");
  EXPECT_EQ(notices_of(job_id), (std::vector<std::string>{"job_queued", "job_failed"}));
}

TEST_F(JobServiceTest, AShardThatCannotRunFailsItsJobAndTheJobIsAnnounced) {
  NewJob sharded = job('1');
  sharded.shards = 2;
  const std::int64_t job_id = jobs_.create(ci_, "demo", sharded).second["id"];
  const auto shard = claim("host-a", agent_);
  ASSERT_TRUE(shard.has_value());
  jobs_.fail(agent_, *shard, "host-a", "out of memory");
  const json parent = jobs_.get(nullptr, job_id);
  EXPECT_EQ(parent["state"], "failed");
  EXPECT_EQ(parent["error"], "shard 1 of 2 failed: agent \"host-a\" could not run it: out of memory");
  EXPECT_TRUE(notices_of(*shard).empty()) << "a shard's failure is its job's";
  EXPECT_EQ(notices_of(job_id), (std::vector<std::string>{"job_queued", "job_failed"}));
  EXPECT_FALSE(claim("host-b", agent_).has_value()) << "the other shard is failed with it";
}

TEST_F(JobServiceTest, AnUnmergedShardedJobIsFailedAndAnnouncedOnce) {
  NewJob sharded = job('1');
  sharded.shards = 2;
  const std::int64_t job_id = jobs_.create(ci_, "demo", sharded).second["id"];
  auto fail = [&] {
    return in_transaction(static_cast<JobStore&>(store_),
                          [&](JobTransaction& tx) { return fail_unmerged_job(tx, job_id, "cases differ"); });
  };
  EXPECT_TRUE(fail());
  EXPECT_FALSE(fail()) << "no longer running";
  EXPECT_EQ(notices_of(job_id), (std::vector<std::string>{"job_queued", "job_failed"}));
}

}  // namespace
}  // namespace kw::server::testing
