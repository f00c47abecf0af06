// Judging without a database: service/judging.hpp over reads made by hand.
// InMemoryDetectionReads is a stand-in for DetectionRepository's reads,
// named as one: it keeps earlier runs in memory and answers what the store's
// SQL would for runs on the default branch and a pull request's base commit
// (detection_test.cpp checks the store's own reads on PostgreSQL).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "../../tests/support/report_factory.hpp"
#include "errors.hpp"
#include "kw/common/judge.hpp"
#include "kw/common/run_report.hpp"
#include "service/judging.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::ReportSpec;
using nlohmann::json;

class InMemoryDetectionReads {
 public:
  ProjectSettings project;

  InMemoryDetectionReads() {
    project.id = 1;
    project.name = "demo";
  }

  // The run, as the store keeps it after judging; returns its id.
  std::int64_t store(const common::RunReport& report) {
    runs_.push_back(report);
    return static_cast<std::int64_t>(runs_.size());
  }

  // What DetectionRepository::run_judging_reads reads for `report`.
  RunJudgingReads for_run(const common::RunReport& report) const {
    RunJudgingReads reads;
    reads.project = project;
    const common::DetectionSettings rule;
    for (const common::Case& c : report.cases) {
      if (!c.candidate()) continue;
      common::CaseHistory& history = reads.history[c.name];
      for (std::size_t i = 0; i < runs_.size(); ++i) {
        const common::Case* stored = case_of(runs_[i], c.name);
        if (runs_[i].branch != project.default_branch || !stored) continue;
        const auto summary = common::summarize_case(*stored, rule).candidate;
        if (!summary) continue;
        history.run_ids.push_back(run_id(i));
        history.locations.push_back(summary->location);
        history.replicate_counts.push_back(summary->replicates);
        history.replicate_sds.push_back(summary->replicate_sd.value_or(0));
        history.clocks.push_back(summary->clock);
      }
      if (auto baseline = baseline_of(report, c.name)) {
        const common::Case& stored = *case_of(runs_[*baseline], c.name);
        const std::int64_t case_id = run_id(*baseline) * 1000 + 1;
        reads.baselines[c.name] = {run_id(*baseline), runs_[*baseline].commit, case_id,
                                   "newest run (run " + std::to_string(run_id(*baseline)) + ")"};
        reads.base_measurements[case_id] = stored.measurements;
      }
    }
    // The base commit's newest run's fingerprints, where the report claims
    // cases identical to it.
    for (std::size_t i = runs_.size(); report.base_commit && i-- > 0;) {
      if (runs_[i].commit != *report.base_commit) continue;
      reads.base_fingerprints = RunJudgingReads::BaseFingerprints{run_id(i), {}};
      for (const common::Case& c : runs_[i].cases) {
        if (c.fingerprint && c.fingerprint->contains("digest"))
          reads.base_fingerprints->digests[c.name] = (*c.fingerprint)["digest"];
      }
      break;
    }
    return reads;
  }

 private:
  static std::int64_t run_id(std::size_t index) { return static_cast<std::int64_t>(index) + 1; }
  static const common::Case* case_of(const common::RunReport& run, const std::string& name) {
    for (const common::Case& c : run.cases) {
      if (c.name == name && c.candidate()) return &c;
    }
    return nullptr;
  }
  // The base commit's newest run of the case, else the default branch's.
  std::optional<std::size_t> baseline_of(const common::RunReport& report, const std::string& name) const {
    std::optional<std::size_t> on_branch;
    for (std::size_t i = runs_.size(); i-- > 0;) {
      if (!case_of(runs_[i], name)) continue;
      if (report.base_commit && runs_[i].commit == *report.base_commit) return i;
      if (!on_branch && runs_[i].branch == project.default_branch) on_branch = i;
    }
    return on_branch;
  }

  std::vector<common::RunReport> runs_;
};

class JudgingTest : public ::testing::Test {
 protected:
  common::RunReport report(ReportSpec spec) {
    if (spec.commit.empty()) spec.commit = kw::testing::make_commit(next_commit_++);
    spec.seed = next_seed_++;
    return common::parse_run_report(kw::testing::make_report(spec));
  }
  // Judged against what is stored, then stored.
  std::shared_ptr<const RunJudgement> judge(const common::RunReport& run) {
    auto judged = judge_run(store_.for_run(run), run);
    store_.store(run);
    return judged;
  }
  std::shared_ptr<const RunJudgement> judge(ReportSpec spec) { return judge(report(std::move(spec))); }

  static const ComparisonRow& candidate_time(const RunJudgement& judged,
                                             const std::string& name = "attention.fwd/case0") {
    for (const ComparisonRow& row : judged.rows) {
      if (row.case_name == name && row.impl == "candidate" && row.kind == "time") return row;
    }
    throw std::runtime_error("no candidate time comparison of " + name);
  }

  InMemoryDetectionReads store_;
  std::uint64_t next_commit_ = 1;
  std::uint64_t next_seed_ = 1000;
};

TEST_F(JudgingTest, AFirstRunHasNoBaselineAndPasses) {
  auto first = judge(ReportSpec{});
  EXPECT_EQ(first->verdict, "pass");
  EXPECT_EQ(candidate_time(*first).status, common::ChangeStatus::no_baseline);
  EXPECT_EQ(candidate_time(*first).baseline, nullptr);
}

TEST_F(JudgingTest, TwentyPercentSlowerIsARegressionAgainstItsBaseline) {
  judge(ReportSpec{});
  ReportSpec slower;
  slower.slowdown = 1.2;
  auto judged = judge(slower);
  EXPECT_EQ(judged->verdict, "regression");
  const ComparisonRow& row = candidate_time(*judged);
  EXPECT_EQ(row.status, common::ChangeStatus::regression);
  EXPECT_NEAR(row.test.ratio, 1.2, 0.02);
  ASSERT_NE(row.baseline, nullptr);
  EXPECT_EQ(row.baseline->run_id, 1);
  EXPECT_EQ(row.threshold_source, "project setting");
  EXPECT_EQ(row.min_threshold, 0.01);
  EXPECT_EQ(judged->detection["comparisons"], 3);
  EXPECT_EQ(judged->detection["run_alpha"], 0.01);
  // Each case's status, as the store writes it beside the case.
  const auto statuses = judged->case_statuses();
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_EQ(statuses[0], (std::pair<std::string, std::string>{"attention.fwd/case0", "regression"}));
}

TEST_F(JudgingTest, AFailureOutranksARegressionAndNothingMeasuredIsNoData) {
  judge(ReportSpec{});
  ReportSpec failed_stage;
  failed_stage.slowdown = 1.2;
  failed_stage.failed_stage = "quick_bench";
  EXPECT_EQ(judge(failed_stage)->verdict, "failed");
  ReportSpec wrong;
  wrong.failed_correctness = true;
  EXPECT_EQ(judge(wrong)->verdict, "failed");
  ReportSpec empty;
  empty.cases = 0;
  EXPECT_EQ(judge(empty)->verdict, "no-data");
}

TEST_F(JudgingTest, ARunMeasuredWhileTheGpuBrakedHasNoVerdict) {
  judge(ReportSpec{});
  ReportSpec braking;
  braking.throttled = 25;  // of 30 samples, each 1.3x
  common::RunReport run = report(braking);
  for (common::Case& c : run.cases) {
    c.gpu_state = common::GpuState{{1980, 1755}, {2619, 2619}, 0x4 | 0x20 | 0x40, std::nullopt, std::nullopt};
  }
  auto judged = judge(run);
  EXPECT_EQ(judged->verdict, "no-data");
  EXPECT_EQ(judged->detection["throttled_out"], 3);
  EXPECT_NE(candidate_time(*judged).test.note.find("while the GPU braked"), std::string::npos);
}

// kernelwatch.json's threshold outranks the project's; a pull request's
// base's, where stricter, outranks its own, so a pull request cannot loosen
// its own gate.
TEST_F(JudgingTest, ThresholdsComeFromTheCommitThenTheStricterBase) {
  judge(ReportSpec{});
  common::RunReport own = report(ReportSpec{});
  own.thresholds = common::Thresholds{0.05, {}};
  auto own_judged = judge(own);
  const ComparisonRow& loosened = candidate_time(*own_judged);
  EXPECT_EQ(loosened.min_threshold, 0.05);
  EXPECT_EQ(loosened.threshold_source, "kernelwatch.json at " + own.commit.substr(0, 12));

  ReportSpec pr;
  pr.branch = "pr-1";
  pr.base_commit = own.commit;
  common::RunReport head = report(pr);
  head.thresholds = common::Thresholds{0.20, {}};
  head.base_thresholds = common::Thresholds{std::nullopt, {{"attention.fwd/case0", 0.03}}};
  auto judged = judge(head);
  const ComparisonRow& gated = candidate_time(*judged);
  EXPECT_EQ(gated.min_threshold, 0.03);
  EXPECT_NE(gated.threshold_source.find("the base's, stricter than kernelwatch.json"), std::string::npos)
      << gated.threshold_source;
  // Where the base's kernelwatch.json sets nothing, the project's setting
  // at the base is the base's threshold: stricter than 20% as well.
  const ComparisonRow& other = candidate_time(*judged, "attention.fwd/case1");
  EXPECT_EQ(other.min_threshold, 0.01);
  EXPECT_EQ(other.threshold_source, "project setting (the base's, stricter than kernelwatch.json at " +
                                        head.commit.substr(0, 12) + ")");
  ASSERT_NE(gated.baseline, nullptr);
  EXPECT_EQ(gated.baseline->commit, own.commit) << "a pull request is compared with its base's run";
}

// A case whose code is identical to its base's is unchanged by its
// fingerprint, held against the base's stored run, not timed, and takes no
// part in the decision.
TEST_F(JudgingTest, ACaseIdenticalToItsBaseIsUnchangedWithItsEvidence) {
  common::RunReport base = report(ReportSpec{});
  base.cases[1].fingerprint = json{{"digest", "0123456789abcdef0123"}};
  judge(base);
  ReportSpec pr;
  pr.branch = "pr-2";
  pr.base_commit = base.commit;
  common::RunReport head = report(pr);
  common::Case& same = head.cases[1];
  same.measurements.clear();
  same.identical_to_base = true;
  same.fingerprint = json{{"digest", "0123456789abcdef0123"}};
  auto judged = judge(head);
  const ComparisonRow& row = candidate_time(*judged, same.name);
  EXPECT_EQ(row.status, common::ChangeStatus::unchanged);
  EXPECT_FALSE(row.measured());
  EXPECT_NE(row.test.note.find("identical code (fingerprint 0123456789ab in both; base run 1), not timed"),
            std::string::npos)
      << row.test.note;
  EXPECT_NE(row.reason.find("runs the same code"), std::string::npos);
  EXPECT_EQ(judged->detection["comparisons"], 2) << "only the two timed cases are decided";
  EXPECT_EQ(judged->verdict, "pass");
}

// The claim is the report's: where the base's stored run recorded another
// fingerprint the case is judged as changed and not measured (never a
// pass); where no base run is stored the note says the claim is unchecked;
// a run of the default branch may not skip at all.
TEST_F(JudgingTest, AnIdenticalCodeClaimIsHeldAgainstTheBasesStoredFingerprint) {
  common::RunReport base = report(ReportSpec{});
  base.cases[1].fingerprint = json{{"digest", std::string(64, 'a')}};
  judge(base);
  ReportSpec pr;
  pr.branch = "pr-3";
  pr.base_commit = base.commit;
  common::RunReport head = report(pr);
  common::Case& claimed = head.cases[1];
  claimed.measurements.clear();
  claimed.identical_to_base = true;
  claimed.fingerprint = json{{"digest", std::string(64, 'b')}};
  auto disputed = judge(head);
  const ComparisonRow& row = candidate_time(*disputed, claimed.name);
  EXPECT_EQ(row.status, common::ChangeStatus::no_baseline);
  EXPECT_NE(
      row.test.note.find("not measured: claimed identical to the base (fingerprint bbbbbbbbbbbb), but base "
                         "run 1 recorded aaaaaaaaaaaa: judged as changed, and not timed"),
      std::string::npos)
      << row.test.note;
  EXPECT_EQ(disputed->verdict, "no-data") << "never a pass";

  common::RunReport unknown_base = head;
  unknown_base.base_commit = kw::testing::make_commit(4242);
  unknown_base.commit = kw::testing::make_commit(4243);
  auto unchecked = judge(unknown_base);
  const ComparisonRow& unchecked_row = candidate_time(*unchecked, claimed.name);
  EXPECT_EQ(unchecked_row.status, common::ChangeStatus::unchanged);
  EXPECT_NE(unchecked_row.test.note.find("has no stored run on this GPU model to check it against"),
            std::string::npos)
      << unchecked_row.test.note;
  EXPECT_EQ(unchecked_row.test.note.find("in both"), std::string::npos);

  common::RunReport on_main = head;
  on_main.branch = "main";
  EXPECT_THROW(judge(on_main), Unprocessable) << "skipping on the default branch";
  common::RunReport no_base = head;
  no_base.branch = "pr-4";
  no_base.base_commit.reset();
  EXPECT_THROW(judge(no_base), Unprocessable) << "skipping without a base";
}

// Two stored runs of different jobs: every case judged as detection would,
// largest effect first, paged, of the statuses asked for.
TEST_F(JudgingTest, ACrossRunComparisonIsPagedByEffect) {
  common::RunReport base = report(ReportSpec{});
  ReportSpec slower;
  slower.slowdown = 1.3;
  common::RunReport head = report(slower);
  head.cases[2].measurements[0].samples_ns = base.cases[2].measurements[0].samples_ns;  // unchanged
  CrossRunReads reads;
  for (std::size_t i = 0; i < head.cases.size(); ++i)
    reads.cases.push_back({head.cases[i].name, head.cases[i].measurements, base.cases[i].measurements});
  reads.judged_thresholds["attention.fwd/case0"] = {0.02, "kernelwatch.json at abc"};
  const CommitRuns runs{"NVIDIA H100 80GB HBM3", 8, 7, false};
  Page page;
  page.per_page = 2;
  json compared = cross_run_comparison(store_.project, runs, base.commit, reads, CaseFilter{}, page);
  EXPECT_EQ(compared["source"], "cross_run");
  EXPECT_EQ(compared["paging"]["cases_total"], 3);
  EXPECT_EQ(compared["paging"]["pages"], 2);
  ASSERT_EQ(compared["cases"].size(), 2u);
  EXPECT_EQ(compared["cases"][0]["status"], "regression");
  EXPECT_GE(compared["cases"][0]["ratio"].get<double>(), compared["cases"][1]["ratio"].get<double>());
  json first_case;
  for (const json& c : compared["cases"]) {
    if (c["case"] == "attention.fwd/case0") first_case = c;
  }
  ASSERT_FALSE(first_case.is_null()) << compared.dump();
  EXPECT_EQ(first_case["threshold"], 0.02) << "the threshold the head run was judged by";
  EXPECT_EQ(first_case["threshold_source"], "kernelwatch.json at abc");

  CaseFilter unchanged_only;
  unchanged_only.statuses = "unchanged,inconclusive";
  json kept = cross_run_comparison(store_.project, runs, base.commit, reads, unchanged_only, Page{});
  ASSERT_EQ(kept["cases"].size(), 1u) << kept.dump();
  EXPECT_EQ(kept["cases"][0]["case"], "attention.fwd/case2");
  EXPECT_EQ(kept["detection"]["comparisons"], 3) << "the decision covers every case, whatever is shown";
}

}  // namespace
}  // namespace kw::server::testing
