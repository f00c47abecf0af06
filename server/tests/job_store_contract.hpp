// What every JobStore does, whatever keeps it: one suite of typed tests,
// instantiated on PgJobStore over a test database (job_store_pg_test.cpp,
// labelled db) and on the in-memory stand-in (job_store_memory_test.cpp,
// labelled unit), so the stand-in the queue's rules are tested on behaves
// as kw-server's store does. A shard's failure goes through the job
// service's rules (fail_job, requeue_expired), which fail its job with it
// over the store's fail_shard_group.
//
// A harness gives the suite its store and what a store does not make:
//   JobStore& store();
//   std::int64_t add_project(const std::string& name, const SettingsChange& change);
//   Caller agent_token(const std::string& name, std::optional<std::vector<std::string>> projects);
// A lease of -1 seconds has run out by the store's next transaction, on
// either store's clock.
#pragma once

#include <gtest/gtest.h>

#include "errors.hpp"
#include "service/job_service.hpp"

namespace kw::server::testing {

template <typename Harness>
class JobStoreContract : public ::testing::Test {
 protected:
  static constexpr double kLease = 60;
  static constexpr double kRunOut = -1;
  const nlohmann::json h100 = nlohmann::json::array({"NVIDIA H100 80GB HBM3"});

  void SetUp() override {
    demo_ = harness_.add_project("demo", {});
    token_ = harness_.agent_token("agent-1", std::nullopt);
  }

  template <typename Work>
  auto tx(Work&& work) {
    return in_transaction(harness_.store(), std::forward<Work>(work));
  }

  NewJob job(const std::string& commit, const std::string& branch = "main") const {
    NewJob made;
    made.project_id = demo_;
    made.commit = commit;
    made.branch = branch;
    made.max_attempts = 2;
    return made;
  }
  std::int64_t queue(const NewJob& made) {
    return tx([&](JobTransaction& t) { return t.create(made).first; });
  }
  std::int64_t agent(const std::string& name, const Caller& caller,
                     const nlohmann::json& gpus = nlohmann::json::array({"NVIDIA H100 80GB HBM3"})) {
    return tx([&](JobTransaction& t) { return t.bind_agent(name, caller, name + ".local", "0.1.0", gpus); });
  }
  std::optional<std::int64_t> claim(std::int64_t agent_id, double lease = kLease,
                                    const std::optional<std::vector<std::string>>& projects = std::nullopt) {
    return tx([&](JobTransaction& t) { return t.claim(agent_id, h100, lease, projects, false); });
  }
  nlohmann::json get(std::int64_t job_id) {
    return tx([&](JobTransaction& t) { return *t.get(job_id); });
  }

  Harness harness_;
  std::int64_t demo_ = 0;
  Caller token_;
};

TYPED_TEST_SUITE_P(JobStoreContract);

TYPED_TEST_P(JobStoreContract, AnEqualJobIsAnsweredAndARerunOrTheOtherSideMakesAnother) {
  const std::string commit(40, 'a');
  auto [first, created] = this->tx([&](JobTransaction& t) { return t.create(this->job(commit)); });
  EXPECT_TRUE(created);
  auto again = this->tx([&](JobTransaction& t) { return t.create(this->job(commit)); });
  EXPECT_EQ(again, std::make_pair(first, false));
  NewJob other_gpu = this->job(commit);
  other_gpu.gpu_class = "NVIDIA L4";
  EXPECT_NE(this->queue(other_gpu), first);
  const std::int64_t pull_request = this->queue(this->job(commit, "feature"));
  EXPECT_NE(pull_request, first);
  EXPECT_EQ(this->queue(this->job(commit, "other-feature")), pull_request)
      << "one side: not the default branch";
  NewJob rerun = this->job(commit);
  rerun.rerun = true;
  const std::int64_t measured_again = this->queue(rerun);
  EXPECT_NE(measured_again, first);

  const nlohmann::json document = this->get(first);
  EXPECT_EQ(document["project"], "demo");
  EXPECT_EQ(document["commit"], commit);
  EXPECT_EQ(document["branch"], "main");
  EXPECT_EQ(document["state"], "queued");
  EXPECT_EQ(document["kind"], "measure");
  EXPECT_EQ(document["attempts"], 0);
  EXPECT_EQ(document["max_attempts"], 2);
  EXPECT_EQ(document["on_default_branch"], true);
  EXPECT_EQ(document["rerun"], 0);
  EXPECT_EQ(document["agent"], nullptr);
  EXPECT_EQ(document["stages"], nlohmann::json::array());
  EXPECT_EQ(this->get(measured_again)["rerun"], 1);
  EXPECT_EQ(this->get(pull_request)["on_default_branch"], false);
  EXPECT_FALSE(this->tx([](JobTransaction& t) { return t.get(987654).has_value(); }));
}

TYPED_TEST_P(JobStoreContract, AClaimTakesTheOldestJobItsGpusRunOfTheProjectsItMay) {
  const std::int64_t other = this->harness_.add_project("other", {});
  NewJob for_l4 = this->job(std::string(40, '1'));
  for_l4.gpu_class = "NVIDIA L4";
  this->queue(for_l4);
  NewJob elsewhere = this->job(std::string(40, '2'));
  elsewhere.project_id = other;
  const std::int64_t other_job = this->queue(elsewhere);
  const std::int64_t any_gpu = this->queue(this->job(std::string(40, '3')));
  NewJob for_h100 = this->job(std::string(40, '4'));
  for_h100.gpu_class = "NVIDIA H100 80GB HBM3";
  const std::int64_t h100_job = this->queue(for_h100);

  const std::int64_t agent = this->agent("host-a", this->token_);
  EXPECT_EQ(this->claim(agent, this->kLease, std::vector<std::string>{"demo"}), any_gpu);
  EXPECT_EQ(this->claim(agent, this->kLease, std::vector<std::string>{"demo"}), h100_job);
  EXPECT_EQ(this->claim(agent, this->kLease, std::vector<std::string>{"demo"}), std::nullopt)
      << "the L4's job is not for an H100, the other project's not allowed";
  EXPECT_EQ(this->claim(agent), other_job);

  const nlohmann::json claimed = this->get(any_gpu);
  EXPECT_EQ(claimed["state"], "running");
  EXPECT_EQ(claimed["attempts"], 1);
  EXPECT_EQ(claimed["agent"], "host-a");
  const auto hold = this->tx([&](JobTransaction& t) { return *t.lock(any_gpu); });
  EXPECT_EQ(hold.agent_id, agent);
  EXPECT_EQ(hold.state, "running");
  EXPECT_EQ(hold.kind, "measure");
  EXPECT_EQ(hold.shards, 1);
}

TYPED_TEST_P(JobStoreContract, OnlyTheHolderHeartbeatsReleasesOrFailsAndAReleaseSpendsNoAttempt) {
  const std::int64_t job_id = this->queue(this->job(std::string(40, '5')));
  const std::int64_t holder = this->agent("host-a", this->token_);
  const std::int64_t other = this->agent("host-b", this->token_);
  ASSERT_EQ(this->claim(holder), job_id);
  EXPECT_FALSE(this->tx([&](JobTransaction& t) { return t.heartbeat(job_id, other, 60); }));
  EXPECT_FALSE(this->tx([&](JobTransaction& t) { return t.release(job_id, other); }));
  EXPECT_FALSE(this->tx([&](JobTransaction& t) { return t.fail(job_id, other, "not mine"); }));
  EXPECT_TRUE(this->tx([&](JobTransaction& t) { return t.heartbeat(job_id, holder, 60); }));
  EXPECT_TRUE(this->tx([&](JobTransaction& t) { return t.release(job_id, holder); }));
  nlohmann::json released = this->get(job_id);
  EXPECT_EQ(released["state"], "queued");
  EXPECT_EQ(released["attempts"], 0);
  EXPECT_EQ(released["agent"], nullptr);

  ASSERT_EQ(this->claim(other), job_id);
  EXPECT_TRUE(this->tx([&](JobTransaction& t) { return t.fail(job_id, other, "no kernelwatch.json"); }));
  const nlohmann::json failed = this->get(job_id);
  EXPECT_EQ(failed["state"], "failed");
  EXPECT_EQ(failed["error"], "no kernelwatch.json");
  EXPECT_FALSE(this->tx([&](JobTransaction& t) { return t.fail(job_id, other, "again"); }));
  EXPECT_EQ(this->claim(holder), std::nullopt);
}

TYPED_TEST_P(JobStoreContract, ALeaseThatRanOutRequeuesTheJobUntilItsAttemptsAreSpent) {
  const std::int64_t job_id = this->queue(this->job(std::string(40, '6')));
  const std::int64_t agent = this->agent("host-a", this->token_);
  ASSERT_EQ(this->claim(agent, this->kRunOut), job_id);
  ExpiredLeases first = this->tx([](JobTransaction& t) { return t.requeue_expired(); });
  EXPECT_EQ(first.requeued, 1);
  EXPECT_TRUE(first.failed.empty());
  EXPECT_EQ(this->get(job_id)["state"], "queued");
  EXPECT_FALSE(this->tx([&](JobTransaction& t) { return t.heartbeat(job_id, agent, 60); }))
      << "the lease is gone with its holder";

  ASSERT_EQ(this->claim(agent, this->kRunOut), job_id);
  EXPECT_EQ(this->get(job_id)["attempts"], 2);
  ExpiredLeases second = this->tx([](JobTransaction& t) { return t.requeue_expired(); });
  EXPECT_EQ(second.requeued, 0);
  EXPECT_EQ(second.failed, std::vector<std::int64_t>{job_id});
  const nlohmann::json failed = this->get(job_id);
  EXPECT_EQ(failed["state"], "failed");
  EXPECT_EQ(failed["error"], "lease expired 2 times; giving up");
  EXPECT_EQ(this->tx([](JobTransaction& t) { return t.requeue_expired().requeued; }), 0);
}

TYPED_TEST_P(JobStoreContract, StagesAreTheCurrentAttemptsInTheirOrder) {
  const std::int64_t job_id = this->queue(this->job(std::string(40, '7')));
  const std::int64_t agent = this->agent("host-a", this->token_);
  const std::int64_t stranger = this->agent("host-b", this->token_);
  ASSERT_EQ(this->claim(agent), job_id);
  auto record = [&](std::int64_t by, const std::string& name, int ordinal, const std::string& status) {
    StageProgress stage;
    stage.name = name;
    stage.ordinal = ordinal;
    stage.status = status;
    if (status != "started") stage.duration_ms = 1200;
    return this->tx([&](JobTransaction& t) { return t.record_stage(job_id, by, 60, stage); });
  };
  EXPECT_TRUE(record(agent, "build", 0, "started"));
  EXPECT_TRUE(record(agent, "load", 1, "started"));
  EXPECT_TRUE(record(agent, "build", 0, "passed"));
  EXPECT_FALSE(record(stranger, "bench", 2, "started"));
  const nlohmann::json stages = this->get(job_id)["stages"];
  ASSERT_EQ(stages.size(), 2u) << stages.dump();
  EXPECT_EQ(stages[0]["name"], "build");
  EXPECT_EQ(stages[0]["status"], "passed");
  EXPECT_EQ(stages[0]["duration_ms"], 1200);
  EXPECT_EQ(stages[1]["name"], "load");
  EXPECT_EQ(stages[1]["duration_ms"], nullptr);

  ASSERT_TRUE(this->tx([&](JobTransaction& t) { return t.release(job_id, agent); }));
  EXPECT_EQ(this->get(job_id)["stages"], nlohmann::json::array()) << "given back: no attempt runs";
  ASSERT_EQ(this->claim(stranger), job_id);
  EXPECT_EQ(this->get(job_id)["stages"], nlohmann::json::array()) << "a new attempt starts with none";
}

TYPED_TEST_P(JobStoreContract, ShardsAreMadeWithTheirJobTakeTheFirstClaimsGpuAndFailWithIt) {
  NewJob sharded = this->job(std::string(40, '8'));
  sharded.shards = 3;
  const std::int64_t job_id = this->queue(sharded);
  nlohmann::json parent = this->get(job_id);
  EXPECT_EQ(parent["state"], "running") << "never claimed itself";
  EXPECT_EQ(parent["shards"], 3);
  ASSERT_EQ(parent["shard_jobs"].size(), 3u) << parent.dump();

  const std::int64_t agent = this->agent("host-a", this->token_);
  const std::optional<std::int64_t> first = this->claim(agent);
  ASSERT_TRUE(first.has_value());
  const nlohmann::json shard = this->get(*first);
  EXPECT_EQ(shard["kind"], "shard");
  EXPECT_EQ(shard["shard"]["index"], 1);
  EXPECT_EQ(shard["shard"]["count"], 3);
  EXPECT_EQ(shard["shard"]["job_id"], job_id);
  const std::int64_t second = parent["shard_jobs"][1]["id"];
  EXPECT_EQ(this->get(second)["gpu_class"], "NVIDIA H100 80GB HBM3") << "one GPU model for the run";
  const auto hold = this->tx([&](JobTransaction& t) { return *t.lock(*first); });
  EXPECT_EQ(hold.parent_job_id, job_id);
  EXPECT_EQ(hold.shard_index, 1);
  EXPECT_EQ(hold.shards, 3);

  ASSERT_TRUE(this->tx([&](JobTransaction& t) { return fail_job(t, *first, agent, "out of memory"); }));
  parent = this->get(job_id);
  EXPECT_EQ(parent["state"], "failed");
  EXPECT_EQ(parent["error"], "shard 1 of 3 failed: out of memory");
  EXPECT_EQ(this->get(second)["state"], "failed");
  EXPECT_EQ(this->get(*first)["error"], "out of memory");
  EXPECT_EQ(this->claim(agent), std::nullopt);
}

TYPED_TEST_P(JobStoreContract, AShardWhoseLeaseRanOutOnEveryAttemptFailsItsJob) {
  NewJob sharded = this->job(std::string(40, '9'));
  sharded.shards = 2;
  sharded.max_attempts = 1;
  const std::int64_t job_id = this->queue(sharded);
  const std::int64_t agent = this->agent("host-a", this->token_);
  ASSERT_TRUE(this->claim(agent, this->kRunOut).has_value());
  const ExpiredLeases expired = this->tx([](JobTransaction& t) { return requeue_expired(t); });
  EXPECT_EQ(expired.failed, std::vector<std::int64_t>{job_id}) << "the job, not its shard";
  const nlohmann::json parent = this->get(job_id);
  EXPECT_EQ(parent["state"], "failed");
  EXPECT_EQ(parent["error"], "shard 1 of 2 failed: its lease expired on every attempt");
  EXPECT_FALSE(this->tx([&](JobTransaction& t) { return t.fail_unmerged(job_id, "no"); }));
}

TYPED_TEST_P(JobStoreContract, ARunningShardedJobFailsWhenItsReportsDoNotMerge) {
  NewJob sharded = this->job(std::string(40, 'b'));
  sharded.shards = 2;
  const std::int64_t job_id = this->queue(sharded);
  const std::int64_t plain = this->queue(this->job(std::string(40, 'c')));
  EXPECT_TRUE(this->tx([](JobTransaction& t) { return t.merge_pending().empty(); }))
      << "its shards are not done";
  EXPECT_FALSE(this->tx([&](JobTransaction& t) { return t.fail_unmerged(plain, "no shards"); }));
  EXPECT_TRUE(this->tx([&](JobTransaction& t) { return t.fail_unmerged(job_id, "cases differ"); }));
  const nlohmann::json failed = this->get(job_id);
  EXPECT_EQ(failed["state"], "failed");
  EXPECT_EQ(failed["error"], "cases differ");
}

TYPED_TEST_P(JobStoreContract, AShardsReportIsKeptAndItsJobWaitsForTheOthers) {
  NewJob sharded = this->job(std::string(40, 'd'));
  sharded.shards = 2;
  const std::int64_t job_id = this->queue(sharded);
  const nlohmann::json shards = this->get(job_id)["shard_jobs"];
  ASSERT_EQ(shards.size(), 2U);
  const std::int64_t first = shards[0]["id"], second = shards[1]["id"];
  const ShardProgress waiting = this->tx([&](JobTransaction& t) { return t.shard_progress(job_id); });
  EXPECT_EQ(waiting.state, "running");
  EXPECT_EQ(waiting.waiting_for, (std::vector<std::int64_t>{1, 2}));
  EXPECT_TRUE(waiting.reports.empty());
  EXPECT_FALSE(this->tx([&](JobTransaction& t) { return t.shard_report(first).has_value(); }));

  const nlohmann::json report{{"shard", 1}, {"cases", nlohmann::json::array()}};
  this->tx([&](JobTransaction& t) { t.store_shard_report(first, report); });
  EXPECT_EQ(this->get(first)["state"], "done");
  EXPECT_EQ(this->tx([&](JobTransaction& t) { return *t.shard_report(first); }), report);
  const ShardProgress half = this->tx([&](JobTransaction& t) { return t.shard_progress(job_id); });
  EXPECT_EQ(half.waiting_for, std::vector<std::int64_t>{2});
  EXPECT_TRUE(half.reports.empty()) << "reports are given once none is waited for";
  EXPECT_TRUE(this->tx([](JobTransaction& t) { return t.merge_pending().empty(); }));

  this->tx([&](JobTransaction& t) { t.store_shard_report(second, report); });
  const ShardProgress all = this->tx([&](JobTransaction& t) { return t.shard_progress(job_id); });
  EXPECT_TRUE(all.waiting_for.empty());
  EXPECT_EQ(all.reports.size(), 2U);
  EXPECT_EQ(this->tx([](JobTransaction& t) { return t.merge_pending(); }), std::vector<std::int64_t>{job_id})
      << "every shard done, no run yet";
  this->tx([&](JobTransaction& t) { t.complete(job_id); });
  EXPECT_EQ(this->get(job_id)["state"], "done");
  EXPECT_TRUE(this->tx([](JobTransaction& t) { return t.merge_pending().empty(); }));
}

TYPED_TEST_P(JobStoreContract, AnAgentNameIsItsTokensAndTheListShowsWhatEachRuns) {
  this->harness_.add_project("other", {});
  const Caller other_token = this->harness_.agent_token("agent-2", std::vector<std::string>{"other"});
  const std::int64_t mine = this->agent("host-a", this->token_);
  const std::int64_t theirs = this->agent("host-a", other_token);
  EXPECT_NE(mine, theirs);
  const Caller namesake = this->harness_.agent_token("agent-1", std::vector<std::string>{"demo"});
  EXPECT_NE(this->agent("host-a", namesake), mine) << "a token's agents are its own, not its name's";
  EXPECT_EQ(this->agent("host-a", this->token_), mine) << "registered once";
  EXPECT_EQ(this->tx([&](JobTransaction& t) { return t.registered_agent("host-a", this->token_); }), mine);
  try {
    this->tx([&](JobTransaction& t) { return t.registered_agent("host-z", this->token_); });
    ADD_FAILURE() << "an agent never registered";
  } catch (const Conflict& error) {
    EXPECT_EQ(error.code(), "agent_not_registered");
  }

  const std::int64_t job_id = this->queue(this->job(std::string(40, 'd')));
  ASSERT_EQ(this->claim(mine), job_id);
  const std::int64_t sick = this->agent("host-sick", this->token_);
  const nlohmann::json gpu{{"uuid", "GPU-1"}, {"index", 1}, {"model", "NVIDIA H100 80GB HBM3"}};
  const nlohmann::json health{{"healthy", false}, {"checks", nlohmann::json::array()}};
  this->tx([&](JobTransaction& t) { t.record_worker(sick, gpu, health, true); });

  const nlohmann::json all =
      nlohmann::json::parse(this->tx([](JobTransaction& t) { return t.agents_json(std::nullopt); }));
  ASSERT_EQ(all.size(), 4u) << all.dump();
  EXPECT_EQ(all[3]["name"], "host-sick");
  EXPECT_EQ(all[3]["state"], "unhealthy");
  EXPECT_EQ(all[3]["gpu"], gpu);
  EXPECT_EQ(all[3]["can_profile"], true);
  int running = 0;
  for (const nlohmann::json& shown : all) {
    if (shown["state"] != "running") continue;
    ++running;
    EXPECT_EQ(shown["job"]["id"], job_id);
    EXPECT_EQ(shown["job"]["project"], "demo");
  }
  EXPECT_EQ(running, 1);

  // A reader of "other" sees the agents that may run its jobs: those whose
  // token names every project (agent-1's) or "other" (agent-2's), not one
  // whose token names "demo" alone, and no job of "demo".
  this->agent("demo-only", namesake);
  const nlohmann::json scoped = nlohmann::json::parse(
      this->tx([](JobTransaction& t) { return t.agents_json(std::vector<std::string>{"other"}); }));
  ASSERT_EQ(scoped.size(), 3u) << scoped.dump();
  for (const nlohmann::json& shown : scoped) {
    EXPECT_NE(shown["name"], "demo-only");
    EXPECT_EQ(shown["job"], nullptr) << shown.dump();
  }
  EXPECT_EQ(
      nlohmann::json::parse(this->tx([](JobTransaction& t) { return t.agents_json(std::nullopt); })).size(),
      5u);
}

TYPED_TEST_P(JobStoreContract, ATransactionThatThrowsLeavesNothing) {
  const std::string commit(40, 'e');
  EXPECT_THROW(this->tx([&](JobTransaction& t) {
    t.create(this->job(commit));
    t.existing_project_id("no-such-project");
  }),
               NotFound);
  EXPECT_TRUE(this->tx([&](JobTransaction& t) { return t.create(this->job(commit)).second; }));
}

TYPED_TEST_P(JobStoreContract, AProjectIsFoundByNameWithItsSettings) {
  SettingsChange change;
  change.min_threshold = 0.03;
  change.case_thresholds["k/n1"] = 0.05;
  const std::int64_t tuned = this->harness_.add_project("tuned", change);
  const ProjectSettings settings = this->tx([&](JobTransaction& t) {
    EXPECT_EQ(t.existing_project_id("tuned"), tuned);
    EXPECT_EQ(t.project_name(tuned), "tuned");
    return t.project_settings(tuned);
  });
  EXPECT_DOUBLE_EQ(settings.min_threshold, 0.03);
  EXPECT_EQ(settings.case_thresholds, (std::map<std::string, double>{{"k/n1", 0.05}}));
  try {
    this->tx([](JobTransaction& t) { return t.existing_project_id("missing"); });
    ADD_FAILURE() << "no such project";
  } catch (const NotFound& error) {
    EXPECT_EQ(error.code(), "no_such_project");
  }
}

// An agent whose claim lists GPUs of two models pins the job's shards to
// one of them: the run is measured on one model.
TYPED_TEST_P(JobStoreContract, AFirstClaimListingTwoModelsPinsExactlyOne) {
  NewJob sharded = this->job(std::string(40, 'd'));
  sharded.shards = 2;
  const std::int64_t job_id = this->queue(sharded);
  const nlohmann::json models = nlohmann::json::array({"NVIDIA L4", "NVIDIA H100 80GB HBM3"});
  const std::int64_t agent = this->agent("host-mixed", this->token_, models);
  ASSERT_TRUE(
      this->tx([&](JobTransaction& t) { return t.claim(agent, models, this->kLease, std::nullopt, false); }));
  const std::int64_t second = this->get(job_id)["shard_jobs"][1]["id"];
  EXPECT_EQ(this->get(second)["gpu_class"], "NVIDIA L4") << "the model the claim named first";
}

// The agent that pinned a job's shards leaves: the shards no other model may
// take wait kPinnedShardWaitMinutes, then the job fails naming the model it
// waited for (kw submit --wait ends on it).
TYPED_TEST_P(JobStoreContract, ShardsPinnedToAModelNoAgentServesFailTheirJobNamingIt) {
  NewJob sharded = this->job(std::string(40, 'e'));
  sharded.shards = 3;
  const std::int64_t job_id = this->queue(sharded);
  const std::int64_t agent = this->agent("host-a", this->token_);
  ASSERT_TRUE(this->claim(agent).has_value());
  this->harness_.age_jobs((kPinnedShardWaitMinutes - 1) * 60.0);
  EXPECT_TRUE(this->tx([](JobTransaction& t) { return requeue_expired(t); }).failed.empty())
      << "still waiting";
  this->harness_.age_jobs(2 * 60.0);
  const ExpiredLeases expired = this->tx([](JobTransaction& t) { return requeue_expired(t); });
  EXPECT_EQ(expired.failed, std::vector<std::int64_t>{job_id});
  const nlohmann::json parent = this->get(job_id);
  EXPECT_EQ(parent["state"], "failed");
  const std::string error = parent["error"];
  EXPECT_NE(error.find("NVIDIA H100 80GB HBM3 GPU"), std::string::npos) << error;
  EXPECT_NE(error.find("none claimed it"), std::string::npos) << error;
  EXPECT_EQ(this->get(parent["shard_jobs"][2]["id"].template get<std::int64_t>())["state"], "failed");
}

// What a token has queued in shards, for its limit.
TYPED_TEST_P(JobStoreContract, AJobKnowsItsTokenAndItsQueuedShardsCountAgainstIt) {
  NewJob sharded = this->job(std::string(40, 'f'));
  sharded.shards = 3;
  sharded.token_id = this->token_.token_id;
  this->queue(sharded);
  auto queued = [&] {
    return this->tx([&](JobTransaction& t) { return t.queued_shards_of_token(this->token_.token_id); });
  };
  EXPECT_EQ(queued(), 3);
  ASSERT_TRUE(this->claim(this->agent("host-a", this->token_)).has_value());
  EXPECT_EQ(queued(), 2) << "a claimed shard is no longer queued";
}

REGISTER_TYPED_TEST_SUITE_P(
    JobStoreContract, AnEqualJobIsAnsweredAndARerunOrTheOtherSideMakesAnother,
    AFirstClaimListingTwoModelsPinsExactlyOne, ShardsPinnedToAModelNoAgentServesFailTheirJobNamingIt,
    AJobKnowsItsTokenAndItsQueuedShardsCountAgainstIt, AClaimTakesTheOldestJobItsGpusRunOfTheProjectsItMay,
    OnlyTheHolderHeartbeatsReleasesOrFailsAndAReleaseSpendsNoAttempt,
    ALeaseThatRanOutRequeuesTheJobUntilItsAttemptsAreSpent, StagesAreTheCurrentAttemptsInTheirOrder,
    ShardsAreMadeWithTheirJobTakeTheFirstClaimsGpuAndFailWithIt,
    AShardWhoseLeaseRanOutOnEveryAttemptFailsItsJob, ARunningShardedJobFailsWhenItsReportsDoNotMerge,
    AShardsReportIsKeptAndItsJobWaitsForTheOthers, AnAgentNameIsItsTokensAndTheListShowsWhatEachRuns,
    ATransactionThatThrowsLeavesNothing, AProjectIsFoundByNameWithItsSettings);

}  // namespace kw::server::testing
