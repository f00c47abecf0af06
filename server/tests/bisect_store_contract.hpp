// What every BisectStore does, whatever keeps it: one suite of typed tests
// of BisectService's rules, instantiated on PostgreSQL (run_store_pg_test.cpp,
// labelled db) and on the in-memory stand-in (run_store_memory_test.cpp,
// labelled unit). A push's regression is bisected through jobs an agent
// claims and reports, as in kw-server: reports go in through IngestService,
// failures through JobService.
//
// A harness gives the suite its stores (one database) and what a store does
// not make:
//   RunStore& runs();  JobStore& jobs();  BisectStore& bisects();
//   std::int64_t add_project(const std::string& name);
//   Caller token(const std::string& name, Scope scope);
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../tests/support/report_factory.hpp"
#include "error_of.hpp"
#include "service/bisect_service.hpp"
#include "service/ingest_service.hpp"
#include "service/job_service.hpp"

namespace kw::server::testing {

template <typename Harness>
class BisectStoreContract : public ::testing::Test {
 protected:
  using json = nlohmann::json;
  static constexpr const char* kH100 = "NVIDIA H100 80GB HBM3";
  static constexpr double kSlower = 1.2;

  BisectStoreContract()
      : ingest_(harness_.runs(), 3),
        jobs_(harness_.jobs(), QueueSettings{60, 3}),
        bisects_(harness_.bisects()) {
    harness_.add_project("demo");
    agent_ = harness_.token("agent-1", Scope::agent);
    ci_ = harness_.token("ci", Scope::ci);
    for (std::uint64_t i = 0; i < 5; ++i) push_.push_back(kw::testing::make_commit(100 + i));
    agent_id_ = in_transaction(harness_.jobs(), [&](JobTransaction& t) {
      return t.bind_agent("gpu-host-1", agent_, "host", "0.1.0", json::array({kH100}));
    });
  }

  // The good end measured on main, then the pushed commits' job, whose run
  // regressed: the bisect it started (its id).
  std::int64_t regressed_push() {
    post(spec(push_[0], 1.0), std::nullopt);
    NewJob pushed;
    pushed.project_id = 1;
    pushed.commit = push_[4];
    pushed.branch = "main";
    pushed.range = push_;
    pushed.max_attempts = 3;
    const std::int64_t job_id =
        in_transaction(harness_.jobs(), [&](JobTransaction& t) { return t.create(pushed).first; });
    EXPECT_EQ(claim(), job_id);
    EXPECT_EQ(post(spec(push_[4], kSlower), job_id).verdict, "regression");
    const json job = in_transaction(harness_.jobs(), [&](JobTransaction& t) { return *t.get(job_id); });
    return run_bisect(job["run_id"]);
  }

  kw::testing::ReportSpec spec(const std::string& commit, double slowdown) {
    kw::testing::ReportSpec made;
    made.commit = commit;
    made.slowdown = slowdown;
    made.seed = next_seed_++;
    return made;
  }
  IngestResult post(kw::testing::ReportSpec made, std::optional<std::int64_t> job_id) {
    made.job_id = job_id.value_or(0);
    return ingest_.ingest(kw::testing::make_report(made), agent_, job_id);
  }
  std::optional<std::int64_t> claim() {
    return in_transaction(harness_.jobs(), [&](JobTransaction& t) {
      return t.claim(agent_id_, json::array({kH100}), 60, std::nullopt, false);
    });
  }
  // The step queued now, claimed and measured `slowdown` times the good end.
  json measure_step(double slowdown) {
    const std::optional<std::int64_t> step = claim();
    EXPECT_TRUE(step.has_value());
    json job = in_transaction(harness_.jobs(), [&](JobTransaction& t) { return *t.get(*step); });
    kw::testing::ReportSpec made = spec(job["commit"], slowdown);
    made.branch = job["branch"];
    made.base_commit = job["base_commit"];
    post(made, *step);
    return job;
  }
  std::int64_t run_bisect(std::int64_t run_id) {
    for (std::int64_t id = 1; id < 10; ++id) {
      try {
        if (bisects_.get(&ci_, id)["run_id"] == run_id) return id;
      } catch (const NotFound&) {
        break;
      }
    }
    ADD_FAILURE() << "run " << run_id << " started no bisect";
    return 0;
  }

  Harness harness_;
  IngestService ingest_;
  JobService jobs_;
  BisectService bisects_;
  Caller agent_, ci_;
  std::int64_t agent_id_ = 0;
  std::vector<std::string> push_;  // the good end, then four pushed commits
  std::uint64_t next_seed_ = 1;
};

TYPED_TEST_SUITE_P(BisectStoreContract);

TYPED_TEST_P(BisectStoreContract, APushsRegressionIsBisectedToItsFirstBadCommit) {
  const std::int64_t id = this->regressed_push();
  nlohmann::json bisect = this->bisects_.get(&this->ci_, id);
  EXPECT_EQ(bisect["state"], "running");
  EXPECT_EQ(bisect["project"], "demo");
  EXPECT_EQ(bisect["cases"].size(), 3U) << "every case the regression flagged";
  EXPECT_EQ(bisect["good"], this->push_[0]);
  EXPECT_EQ(bisect["bad"], this->push_[4]);
  EXPECT_EQ(bisect["max_steps"], 6) << "log2 of 4 pushed, plus 4";

  // The midpoint first, against the good end, on a branch of its own.
  const nlohmann::json first = this->measure_step(TestFixture::kSlower);
  EXPECT_EQ(first["commit"], this->push_[2]);
  EXPECT_EQ(first["base_commit"], this->push_[0]);
  EXPECT_EQ(first["branch"], "kernelwatch/bisect-" + std::to_string(id));
  EXPECT_EQ(first["bisect_id"], id);
  const nlohmann::json second = this->measure_step(1.0);
  EXPECT_EQ(second["commit"], this->push_[1]) << "the midpoint's half: it regressed";

  bisect = this->bisects_.get(&this->ci_, id);
  EXPECT_EQ(bisect["state"], "found");
  EXPECT_EQ(bisect["first_bad"], this->push_[2]);
  EXPECT_EQ(bisect["good"], this->push_[1]);
  EXPECT_EQ(bisect["steps"], 2);
  EXPECT_EQ(bisect["message"], "first bad commit " + this->push_[2].substr(0, 12) + " after 2 step(s)");
  ASSERT_EQ(bisect["jobs"].size(), 2U);
  EXPECT_EQ(bisect["jobs"][0]["verdict"], "regression");
  EXPECT_EQ(bisect["jobs"][1]["verdict"], "pass");
  EXPECT_EQ(bisect["jobs"][1]["state"], "done");
  EXPECT_FALSE(this->claim().has_value()) << "a found bisect queues no step";
  EXPECT_EQ(error_of([&] { this->bisects_.cancel(this->ci_, id); }), "bisect_ended");
}

TYPED_TEST_P(BisectStoreContract, AStepThatCannotRunIsSkippedAndACancelStopsTheRest) {
  const std::int64_t id = this->regressed_push();
  const std::optional<std::int64_t> step = this->claim();
  ASSERT_TRUE(step.has_value());
  this->jobs_.fail(this->agent_, *step, "gpu-host-1", "out of memory");
  nlohmann::json bisect = this->bisects_.get(&this->ci_, id);
  EXPECT_EQ(bisect["skipped"], nlohmann::json::array({this->push_[2]}));
  EXPECT_EQ(bisect["steps"], 2);
  ASSERT_EQ(bisect["jobs"].size(), 2U);
  EXPECT_EQ(bisect["jobs"][1]["commit"], this->push_[1]) << "the nearer of the two around the skip, first";
  EXPECT_EQ(bisect["jobs"][1]["state"], "queued");

  const nlohmann::json cancelled = this->bisects_.cancel(this->ci_, id);
  EXPECT_EQ(cancelled["state"], "cancelled");
  EXPECT_EQ(cancelled["message"], "cancelled after 2 step(s)");
  EXPECT_EQ(cancelled["jobs"][1]["state"], "cancelled");
  EXPECT_FALSE(this->claim().has_value()) << "its queued step went with it";
  EXPECT_EQ(error_of([&] { this->bisects_.cancel(this->ci_, id); }), "bisect_ended");
  EXPECT_EQ(error_of([&] { this->bisects_.get(&this->ci_, id + 1); }), "no_such_bisect");
}

REGISTER_TYPED_TEST_SUITE_P(BisectStoreContract, APushsRegressionIsBisectedToItsFirstBadCommit,
                            AStepThatCannotRunIsSkippedAndACancelStopsTheRest);

}  // namespace kw::server::testing
