// What every RunStore does, whatever keeps it: one suite of typed tests,
// instantiated on PgRunStore over a test database (run_store_pg_test.cpp,
// labelled db) and on the in-memory stand-in (run_store_memory_test.cpp,
// labelled unit), so that the stand-in the rules of ingest and verdicts are
// tested on (detection_test.cpp) chooses baselines, reads histories and
// carries acknowledgements as kw-server's store does. Reports go in through
// IngestService, as they do in kw-server.
//
// A harness gives the suite its stores and what a store does not make:
//   RunStore& runs();  JobStore& jobs();  (one database)
//   std::int64_t add_project(const std::string& name);
//   Caller token(const std::string& name, Scope scope);
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../tests/support/report_factory.hpp"
#include "service/ingest_service.hpp"
#include "service/run_service.hpp"

namespace kw::server::testing {

template <typename Harness>
class RunStoreContract : public ::testing::Test {
 protected:
  static constexpr const char* kH100 = "NVIDIA H100 80GB HBM3";
  static constexpr const char* kL4 = "NVIDIA L4";
  using json = nlohmann::json;
  using ReportSpec = kw::testing::ReportSpec;

  RunStoreContract() : ingest_(harness_.runs(), 3), reads_(harness_.runs()) {
    harness_.add_project("demo");
    agent_ = harness_.token("agent-1", Scope::agent);
    ci_ = harness_.token("ci", Scope::ci);
  }

  template <typename Work>
  auto tx(Work&& work) {
    return in_transaction(harness_.runs(), std::forward<Work>(work));
  }

  json report(ReportSpec spec) {
    if (spec.commit.empty()) spec.commit = kw::testing::make_commit(next_commit_++);
    spec.seed = next_seed_++;
    return kw::testing::make_report(spec);
  }
  IngestResult post(const json& document) { return ingest_.ingest(document, agent_, std::nullopt); }
  IngestResult post(const ReportSpec& spec) { return post(report(spec)); }
  std::string commit_of(std::int64_t run_id) {
    return json::parse(tx([&](RunTransaction& t) { return t.run_head(run_id, Page{})->json; }))["commit"];
  }
  RunJudgingReads reads_for(const ReportSpec& spec) {
    const common::RunReport parsed = common::parse_run_report(report(spec));
    return tx([&](RunTransaction& t) { return t.judging_reads("demo", parsed); });
  }
  json head(std::int64_t run_id) {
    return json::parse(tx([&](RunTransaction& t) { return t.run_head(run_id, Page{})->json; }));
  }
  json comparisons(std::int64_t run_id) {
    return json::parse(tx([&](RunTransaction& t) { return t.run_comparisons_json(run_id, 0, INT64_MAX); }));
  }
  // A report of `tree`, with `parents`.
  json of_tree(ReportSpec spec, const std::string& tree, const std::vector<std::string>& parents = {}) {
    json document = report(spec);
    document["git"] = {{"tree", tree}, {"parents", parents}, {"author", "a <a@b>"}, {"subject", "s"}};
    return document;
  }

  Harness harness_;
  IngestService ingest_;
  RunService reads_;
  Caller agent_, ci_;
  std::uint64_t next_commit_ = 1, next_seed_ = 1;
};

TYPED_TEST_SUITE_P(RunStoreContract);

TYPED_TEST_P(RunStoreContract, ABaselineIsTheNewestJudgedRunOfItsCaseOnTheGpuModel) {
  typename TestFixture::ReportSpec h100, l4, feature, broken, empty;
  l4.gpu_model = TestFixture::kL4;
  feature.branch = "feature";
  broken.failed_stage = "correctness";
  empty.cases = 0;
  const nlohmann::json first = this->report(h100);
  const std::int64_t main_run = this->post(first).run_id;
  const std::int64_t l4_run = this->post(l4).run_id;
  const std::int64_t feature_run = this->post(feature).run_id;
  EXPECT_EQ(this->post(broken).verdict, "failed");
  EXPECT_EQ(this->post(empty).verdict, "no-data");

  RunJudgingReads next = this->reads_for(h100);
  EXPECT_EQ(next.project.name, "demo");
  ASSERT_EQ(next.baselines.size(), 3U);
  const Baseline& b = next.baselines.at("attention.fwd/case0");
  EXPECT_EQ(b.run_id, main_run) << "never a failed run, a run that measured nothing, another branch or GPU";
  EXPECT_EQ(b.commit, this->commit_of(main_run));
  EXPECT_EQ(b.reason, "newest run on main on " + std::string(TestFixture::kH100) + " (run " +
                          std::to_string(main_run) + ", commit " + b.commit.substr(0, 12) + ")");
  // The baseline case's head measurements as stored (in no order): samples
  // as real, the candidate's and the baselines'.
  const std::vector<common::Measurement>& stored = next.base_measurements.at(b.case_id);
  ASSERT_EQ(stored.size(), 2U);
  const common::Measurement& candidate = stored[0].is_candidate() ? stored[0] : stored[1];
  const common::RunReport posted = common::parse_run_report(first);
  const common::Measurement& sent = posted.cases[0].measurements[0];
  ASSERT_TRUE(candidate.is_candidate());
  ASSERT_EQ(candidate.samples_ns.size(), sent.samples_ns.size());
  for (std::size_t i = 0; i < sent.samples_ns.size(); ++i)
    EXPECT_EQ(candidate.samples_ns[i], static_cast<double>(static_cast<float>(sent.samples_ns[i])));
  EXPECT_EQ(candidate.median_ns, sent.median_ns) << "the ratio of medians needs it";
  EXPECT_FALSE(candidate.flops.has_value()) << "what judging does not read is not read";
  EXPECT_EQ(this->reads_for(l4).baselines.at("attention.fwd/case0").run_id, l4_run);

  typename TestFixture::ReportSpec pr;
  pr.branch = "pr-1";
  pr.base_commit = this->commit_of(feature_run);
  const Baseline at_base = this->reads_for(pr).baselines.at("attention.fwd/case1");
  EXPECT_EQ(at_base.run_id, feature_run) << "the base commit's run, whatever its branch";
  EXPECT_EQ(at_base.reason.rfind("base_commit " + pr.base_commit.substr(0, 12) + " on ", 0), 0U)
      << at_base.reason;
  pr.base_commit = this->commit_of(l4_run);
  const Baseline fallback = this->reads_for(pr).baselines.at("attention.fwd/case1");
  EXPECT_EQ(fallback.run_id, main_run);
  EXPECT_EQ(fallback.reason, "base_commit " + pr.base_commit.substr(0, 12) + " has no run of this case on " +
                                 TestFixture::kH100 + "; newest run on main with samples (run " +
                                 std::to_string(main_run) + ", commit " + fallback.commit.substr(0, 12) +
                                 ")");

  const common::RunReport elsewhere = common::parse_run_report(this->report(h100));
  RunJudgingReads unknown =
      this->tx([&](RunTransaction& t) { return t.judging_reads("nowhere", elsewhere); });
  EXPECT_EQ(unknown.project.id, 0);
  EXPECT_TRUE(unknown.baselines.empty());
}

TYPED_TEST_P(RunStoreContract, AHistoryIsTheNewestThirtyJudgedDefaultBranchRunsOfItsCaseOldestFirst) {
  typename TestFixture::ReportSpec both, first_only, feature;
  first_only.cases = 1;
  feature.branch = "feature";
  std::vector<std::int64_t> with_second;
  for (int i = 0; i < 34; ++i) {
    const IngestResult stored = this->post(i % 2 == 0 ? both : first_only);
    if (i % 2 == 0) with_second.push_back(stored.run_id);
  }
  const std::int64_t newest_main = this->post(both).run_id;
  with_second.push_back(newest_main);
  this->post(feature);
  RunJudgingReads reads = this->reads_for(both);
  const common::CaseHistory& first = reads.history.at("attention.fwd/case0");
  ASSERT_EQ(first.run_ids.size(), 30U);
  EXPECT_EQ(first.run_ids.back(), newest_main);
  EXPECT_TRUE(std::is_sorted(first.run_ids.begin(), first.run_ids.end()));
  EXPECT_EQ(first.run_ids.front(), newest_main - 29);
  const common::CaseHistory& second = reads.history.at("attention.fwd/case1");
  EXPECT_EQ(second.run_ids, with_second) << "a case some runs did not measure: its own newest runs";
  ASSERT_EQ(second.locations.size(), second.run_ids.size());
  EXPECT_NEAR(second.locations.back(), 40000, 4000);
  EXPECT_EQ(second.replicate_counts.back(), 1);
  EXPECT_EQ(reads.history.at("attention.fwd/case2").run_ids.size(), 18U);
}

TYPED_TEST_P(RunStoreContract, AReportIsStoredOncePerProject) {
  const nlohmann::json document = this->report({});
  const IngestResult first = this->post(document);
  EXPECT_FALSE(first.duplicate);
  const IngestResult again = this->post(document);
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.run_id, first.run_id);
  EXPECT_EQ(again.verdict, first.verdict);
  EXPECT_EQ(this->head(first.run_id)["verdict"], "pass");
  EXPECT_EQ(this->tx([&](RunTransaction& t) { return t.project_of_run(first.run_id); }), "demo");
  EXPECT_FALSE(this->tx([](RunTransaction& t) { return t.project_of_run(987654).has_value(); }));
  EXPECT_FALSE(this->tx([](RunTransaction& t) { return t.run_head(987654, Page{}).has_value(); }));
}

// The same change: the same tree, or the pull request's commit and the
// merge on the default branch whose parent it is.
TYPED_TEST_P(RunStoreContract, AnAcknowledgementIsCarriedToTheRunsOfTheSameChangeItCovers) {
  this->post(this->of_tree({}, std::string(40, 'a')));
  typename TestFixture::ReportSpec slower;
  slower.slowdown = 1.25;
  slower.branch = "pr-7";
  const std::string pr_commit = kw::testing::make_commit(100);
  slower.commit = pr_commit;
  const IngestResult pull_request = this->post(this->of_tree(slower, std::string(40, 'b')));
  ASSERT_EQ(pull_request.verdict, "regression");
  slower.branch = "main";
  slower.commit = kw::testing::make_commit(101);
  const IngestResult merged =
      this->post(this->of_tree(slower, std::string(40, 'c'), {kw::testing::make_commit(1), pr_commit}));
  ASSERT_EQ(merged.verdict, "regression");

  const Acknowledgement acknowledged = this->reads_.acknowledge(this->ci_, pull_request.run_id, "intended");
  EXPECT_EQ(acknowledged.carried_to, std::vector<std::int64_t>{merged.run_id}) << "the merge of that commit";
  const nlohmann::json merge_head = this->head(merged.run_id);
  EXPECT_EQ(merge_head["verdict"], "pass");
  EXPECT_EQ(merge_head["acknowledgement"]["reason"], "intended");
  EXPECT_EQ(merge_head["acknowledgement"]["carried_from"]["run_id"], pull_request.run_id);

  // A later run of the acknowledged tree takes the acknowledgement as it is judged.
  slower.commit = kw::testing::make_commit(102);
  slower.branch = "pr-8";
  const IngestResult same_tree = this->post(this->of_tree(slower, std::string(40, 'b')));
  EXPECT_EQ(same_tree.verdict, "pass");
  EXPECT_EQ(this->head(same_tree.run_id)["acknowledgement"]["carried_from"]["same_tree"], true);
  // Twice as slow is not covered: a change on top of the acknowledged one.
  slower.slowdown = 2.5;
  slower.commit = kw::testing::make_commit(103);
  EXPECT_EQ(this->post(this->of_tree(slower, std::string(40, 'b'))).verdict, "regression");
  // Another tree is another change.
  slower.slowdown = 1.25;
  slower.commit = kw::testing::make_commit(104);
  EXPECT_EQ(this->post(this->of_tree(slower, std::string(40, 'd'))).verdict, "regression");
  const auto again = this->tx([&](RunTransaction& t) { return *t.acknowledge(merged.run_id, "ci", "x"); });
  EXPECT_EQ(again.previous_verdict, "pass");
  EXPECT_TRUE(again.carried_to.empty());
}

TYPED_TEST_P(RunStoreContract, CommitsAreFoundByPrefixAndBranchAndTheirRunsPairedByGpu) {
  typename TestFixture::ReportSpec base, head, l4;
  base.commit = "abcdef1" + std::string(33, '0');
  head.commit = "abcdef2" + std::string(33, '0');
  l4.commit = head.commit;
  l4.gpu_model = TestFixture::kL4;
  head.branch = l4.branch = "pr-3";
  head.base_commit = base.commit;
  head.replicates = 3;
  head.ab = true;
  const std::int64_t base_run = this->post(base).run_id;
  const std::int64_t head_run = this->post(head).run_id;
  const std::int64_t l4_run = this->post(l4).run_id;
  EXPECT_EQ(this->tx([](RunTransaction& t) { return t.measured_commits_with_prefix(0, "abcdef", 4); }),
            (std::vector<std::string>{base.commit, head.commit}));
  EXPECT_EQ(this->tx([](RunTransaction& t) { return t.measured_commits_with_prefix(1, "abcdef", 1); }),
            std::vector<std::string>{base.commit});
  EXPECT_EQ(this->tx([](RunTransaction& t) { return t.newest_commit_on_branch(0, "pr-3"); }), head.commit);
  EXPECT_FALSE(
      this->tx([](RunTransaction& t) { return t.newest_commit_on_branch(1, "nowhere").has_value(); }));
  EXPECT_EQ(this->tx([&](RunTransaction& t) { return t.projects_with_commit(head.commit); }),
            std::vector<std::int64_t>{1});

  const auto runs =
      this->tx([&](RunTransaction& t) { return t.commit_runs(1, base.commit, head.commit, ""); });
  ASSERT_EQ(runs.size(), 2U);
  EXPECT_EQ(runs[0].gpu, TestFixture::kH100);
  EXPECT_EQ(runs[0].head_run, head_run);
  EXPECT_EQ(runs[0].base_run, base_run);
  EXPECT_TRUE(runs[0].base_in_job);
  EXPECT_EQ(runs[0].head_rule_version, common::kRuleVersion);
  EXPECT_EQ(runs[1].gpu, TestFixture::kL4);
  EXPECT_EQ(runs[1].head_run, l4_run);
  EXPECT_FALSE(runs[1].base_run.has_value());
  EXPECT_FALSE(runs[1].base_in_job);
  EXPECT_EQ(this->tx([&](RunTransaction& t) {
                  return t.commit_runs(1, base.commit, head.commit, TestFixture::kL4);
                })
                .size(),
            1U);

  auto [times, detection] = this->tx([&](RunTransaction& t) { return t.judged_times(head_run, "%case1"); });
  ASSERT_EQ(times.size(), 2U) << "the candidate's and its baseline's time";
  EXPECT_EQ(times[0]["case"], "attention.fwd/case1");
  EXPECT_EQ(detection["run_alpha"], 0.01);
  const CrossRunReads cross = this->tx(
      [&](RunTransaction& t) { return t.cross_run_reads(t.queue().project_settings(1), runs[0], "%CASE_"); });
  ASSERT_EQ(cross.cases.size(), 3U) << "ILIKE: any case";
  EXPECT_EQ(cross.cases[0].name, "attention.fwd/case0");
  EXPECT_EQ(cross.cases[0].head.size(), 2U);
  EXPECT_EQ(cross.cases[0].base.size(), 2U);
  EXPECT_EQ(cross.judged_thresholds.at("attention.fwd/case0").first, 0.01);
  EXPECT_EQ(cross.judged_thresholds.at("attention.fwd/case0").second, "project setting");
  EXPECT_EQ(cross.history.at("attention.fwd/case0").run_ids, std::vector<std::int64_t>{base_run});
}

TYPED_TEST_P(RunStoreContract, AJobsReportCompletesItsJobAndIsItsRun) {
  const std::int64_t job_id = in_transaction(this->harness_.jobs(), [&](JobTransaction& t) {
    NewJob job;
    job.project_id = 1;
    job.commit = kw::testing::make_commit(50);
    job.branch = "main";
    const std::int64_t id = t.create(job).first;
    const std::int64_t agent = t.bind_agent("gpu-host-1", this->agent_, "host", "0.1.0",
                                            nlohmann::json::array({TestFixture::kH100}));
    EXPECT_EQ(t.claim(agent, nlohmann::json::array({TestFixture::kH100}), 60, std::nullopt, false), id);
    return id;
  });
  typename TestFixture::ReportSpec spec;
  spec.commit = kw::testing::make_commit(50);
  spec.job_id = job_id;
  const IngestResult stored = this->ingest_.ingest(this->report(spec), this->agent_, job_id);
  const nlohmann::json job =
      in_transaction(this->harness_.jobs(), [&](JobTransaction& t) { return *t.get(job_id); });
  EXPECT_EQ(job["state"], "done");
  EXPECT_EQ(job["run_id"], stored.run_id);
  EXPECT_EQ(job["verdict"], stored.verdict);
  EXPECT_EQ(this->head(stored.run_id)["job_id"], job_id);
}

TYPED_TEST_P(RunStoreContract, AJudgedRunIsReadBackWithItsCasesComparisonsAndDecision) {
  typename TestFixture::ReportSpec base;
  base.cases = 2;
  this->post(base);
  typename TestFixture::ReportSpec slower = base;
  slower.slowdown = 1.2;
  const IngestResult stored = this->post(slower);
  const nlohmann::json read = this->head(stored.run_id);
  EXPECT_EQ(read["verdict"], "regression");
  EXPECT_EQ(read["rule_version"], common::kRuleVersion);
  EXPECT_EQ(read["detection"]["comparisons"], 2);
  ASSERT_EQ(read["flagged"].size(), 2U);
  EXPECT_EQ(read["flagged"][0]["case"], "attention.fwd/case1") << "the larger ratio first";
  EXPECT_EQ(read["paging"]["cases_total"], 2);
  const nlohmann::json rows = this->comparisons(stored.run_id);
  ASSERT_EQ(rows.size(), 4U);
  EXPECT_EQ(rows[0]["impl"], "candidate");
  EXPECT_EQ(rows[1]["impl"], "baseline:cudnn");
  EXPECT_EQ(rows[0]["case"], "attention.fwd/case0");
  const nlohmann::json second = nlohmann::json::parse(
      this->tx([&](RunTransaction& t) { return t.run_cases_json(stored.run_id, 1, 2); }));
  ASSERT_EQ(second.size(), 1U);
  EXPECT_EQ(second[0]["name"], "attention.fwd/case1");
  EXPECT_EQ(second[0]["base_measurements"], nullptr);
  EXPECT_EQ(this->tx([&](RunTransaction& t) { return t.run_comparisons_json(stored.run_id, 2, 5); }), "[]");
}

REGISTER_TYPED_TEST_SUITE_P(RunStoreContract, ABaselineIsTheNewestJudgedRunOfItsCaseOnTheGpuModel,
                            AHistoryIsTheNewestThirtyJudgedDefaultBranchRunsOfItsCaseOldestFirst,
                            AReportIsStoredOncePerProject,
                            AnAcknowledgementIsCarriedToTheRunsOfTheSameChangeItCovers,
                            CommitsAreFoundByPrefixAndBranchAndTheirRunsPairedByGpu,
                            AJobsReportCompletesItsJobAndIsItsRun,
                            AJudgedRunIsReadBackWithItsCasesComparisonsAndDecision);

}  // namespace kw::server::testing
