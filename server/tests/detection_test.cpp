// Regression detection through the routes, over the in-memory store:
// baseline selection across branches and GPU models, each status, verdict
// rules, thresholds, acknowledgement, commit comparison, reports without
// replicates judged with the prior, the in-job A/B of pull requests, and
// the A/A vs 5%-slower verdict counts. The same store's SQL is held to the
// stand-in by run_store_contract.hpp; explanations, which it does not keep,
// are tested on PostgreSQL (detection_pg_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>

#include "../../tests/support/report_factory.hpp"
#include "detection_fixture.hpp"
#include "kw/common/judge.hpp"
#include "kw/common/stats.hpp"
#include "routed_server.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

constexpr const char* kDetectionH100 = "NVIDIA H100 80GB HBM3";
constexpr const char* kDetectionL4 = "NVIDIA L4";

using DetectionApiTest = DetectionTest<RoutedServerTest>;

// A power-capped GPU: each replicate of a measurement runs at its own SM
// clock (the run's log clock plus `within` of log sd) and its time follows
// the clock; the measurement carries each sample's clock.
void put_clocks(json& m, double run_log_clock, double within, std::mt19937_64& rng) {
  std::normal_distribution<double> clock(run_log_clock, within);
  std::map<std::int64_t, double> mhz;
  // Whole MHz, as NVML reports them.
  for (const json& r : m["replicates"])
    mhz.try_emplace(r.get<std::int64_t>(), std::round(1800 * std::exp(clock(rng))));
  std::vector<double> samples, clocks;
  for (std::size_t i = 0; i < m["samples_ns"].size(); ++i) {
    double f = mhz[m["replicates"][i].get<std::int64_t>()];
    samples.push_back(m["samples_ns"][i].get<double>() * 1800 / f);
    clocks.push_back(f);
  }
  m["samples_ns"] = samples;
  m["sm_mhz"] = clocks;
  m["median_ns"] = common::median(samples);
}

TEST_F(DetectionApiTest, FirstRunHasNoBaseline) {
  json first = post({});
  EXPECT_EQ(first["verdict"], "pass");
  json c = candidate_comparison(first);
  EXPECT_EQ(c["status"], "no-baseline");
  EXPECT_TRUE(c["baseline_run_id"].is_null());
}

TEST_F(DetectionApiTest, BaselineIsNewestDefaultBranchRunOnTheSameGpuModel) {
  ReportSpec h100;
  h100.gpu_model = kDetectionH100;
  ReportSpec l4;
  l4.gpu_model = kDetectionL4;
  ReportSpec feature = h100;
  feature.branch = "feature";
  json main_h100 = post(h100);
  json main_l4 = post(l4);
  json on_feature = post(feature);
  json next = post(h100);
  json c = candidate_comparison(next);
  EXPECT_EQ(c["baseline_run_id"], main_h100["run_id"]) << c.dump();
  EXPECT_NE(c["baseline_reason"].get<std::string>().find("newest run on main on NVIDIA H100 80GB HBM3"),
            std::string::npos)
      << c["baseline_reason"];
  // Never another GPU model: the L4 run compares with the L4 run.
  json next_l4 = post(l4);
  EXPECT_EQ(candidate_comparison(next_l4)["baseline_run_id"], main_l4["run_id"]);
  // A feature-branch run also compares with main, not with the earlier feature run.
  json feature_again = post(feature);
  EXPECT_EQ(candidate_comparison(feature_again)["baseline_run_id"], next["run_id"]);
  (void)on_feature;
}

TEST_F(DetectionApiTest, BaseCommitChoosesItsRunAndFallsBackWhenItHasNone) {
  json base = post({});
  json newer_main = post({});
  ReportSpec pr;
  pr.branch = "pr-7";
  pr.base_commit = base["commit"];
  json with_base = post(pr);
  json c = candidate_comparison(with_base);
  EXPECT_EQ(c["baseline_run_id"], base["run_id"]);
  EXPECT_NE(c["baseline_reason"].get<std::string>().find("base_commit " +
                                                         base["commit"].get<std::string>().substr(0, 12)),
            std::string::npos);
  // A base commit measured only on an L4: an H100 PR falls back to main's newest H100 run.
  ReportSpec l4;
  l4.gpu_model = kDetectionL4;
  json l4_base = post(l4);
  pr.base_commit = l4_base["commit"];
  json fallback = post(pr);
  json f = candidate_comparison(fallback);
  EXPECT_EQ(f["baseline_run_id"], newer_main["run_id"]);
  EXPECT_NE(f["baseline_reason"].get<std::string>().find("has no run of this case on NVIDIA H100"),
            std::string::npos)
      << f["baseline_reason"];
}

// A run that measured nothing (its GPU stages skipped on a host without a
// GPU) is no evidence of no regression: never pass, never a baseline.
TEST_F(DetectionApiTest, ARunWithNothingMeasuredIsNoData) {
  json good = post({});
  ReportSpec empty;
  empty.cases = 0;
  json nothing = post(empty);
  EXPECT_EQ(nothing["verdict"], "no-data");
  json next = post({});
  EXPECT_EQ(candidate_comparison(next)["baseline_run_id"], good["run_id"]);
}

TEST_F(DetectionApiTest, FailedRunsAreNeverBaselines) {
  json good = post({});
  ReportSpec broken;
  broken.failed_stage = "correctness";
  json failed = post(broken);
  EXPECT_EQ(failed["verdict"], "failed");
  json next = post({});
  EXPECT_EQ(candidate_comparison(next)["baseline_run_id"], good["run_id"]);
}

// Reports of older agents (no replicates) against one stored run are judged
// with the between-run prior (1.5% by default), not their within-run
// precision: 20% is flagged either way, the same speed never.
TEST_F(DetectionApiTest, EachStatusAndVerdict) {
  post({});
  ReportSpec slower;
  slower.slowdown = 1.2;
  json regression = post(slower);
  EXPECT_EQ(regression["verdict"], "regression");
  json c = candidate_comparison(regression);
  EXPECT_EQ(c["status"], "regression");
  EXPECT_EQ(c["method"], "baseline-run");
  EXPECT_NEAR(c["ratio"].get<double>(), 1.2, 0.02);
  EXPECT_NEAR(c["ratio_of_medians"].get<double>(), 1.2, 0.02) << "the stored baseline's median is read";
  EXPECT_GT(c["lower"].get<double>(), 1.0);
  EXPECT_LT(c["p_value"].get<double>(), 0.01);
  EXPECT_EQ(c["threshold"], 0.01);

  json back_to_normal = post({});  // against the mean of the stored runs: faster
  EXPECT_EQ(candidate_comparison(back_to_normal)["status"], "improvement")
      << candidate_comparison(back_to_normal);

  // Against stored runs that hold the 1.2x one, the same level is some 6%
  // faster than their mean without the evidence: inconclusive, and a pass.
  json same = post({});
  EXPECT_EQ(same["verdict"], "pass");
  EXPECT_EQ(candidate_comparison(same)["status"], "inconclusive");
  // The run records its decision: the false-alarm rate and the comparisons it covered.
  json detection = run(same)["detection"];
  EXPECT_EQ(detection["run_alpha"], 0.01);
  EXPECT_EQ(detection["comparisons"], 3);
}

// The samples of one run are tight (0.05%) but runs move by 2%: a test on the
// samples would call that certain; judged as one replicate with the
// between-run prior, it is noise.
TEST_F(DetectionApiTest, OldReportsAreNotJudgedByTheirWithinRunPrecision) {
  ReportSpec base;
  base.noise = 0.0005;
  base.cases = 1;
  post(base);
  ReportSpec head = base;
  head.run_shift = 1.02;
  json answer = post(head);
  EXPECT_EQ(answer["verdict"], "pass");
  json c = candidate_comparison(answer);
  EXPECT_EQ(c["status"], "inconclusive") << "2% past a 1% threshold, not shown: " << c.dump();
  EXPECT_GT(c["p_value"].get<double>(), 0.1);
  EXPECT_NE(c["note"].get<std::string>().find("between-run prior sd 1.50%"), std::string::npos) << c.dump();
  EXPECT_NE(c["note"].get<std::string>().find("inconclusive: moved +2.0%, past its 1% threshold"),
            std::string::npos)
      << c.dump();
  EXPECT_EQ(run(answer)["inconclusive"], 1);
}

TEST_F(DetectionApiTest, FailedStageOutranksRegression) {
  post({});
  ReportSpec spec;
  spec.slowdown = 1.2;
  spec.failed_stage = "quick_bench";
  EXPECT_EQ(post(spec)["verdict"], "failed");
  ReportSpec wrong;
  wrong.failed_correctness = true;
  EXPECT_EQ(post(wrong)["verdict"], "failed");
}

// Only the candidate decides: a slower cuDNN is context, and when the
// baselines move together the run says the machine drifted.
TEST_F(DetectionApiTest, BaselinesAreContextAndShowMachineDrift) {
  post({});
  ReportSpec slower_cudnn;
  slower_cudnn.baseline_slowdown = 1.25;
  json answer = post(slower_cudnn);
  EXPECT_EQ(answer["verdict"], "pass");
  json full = run(answer);
  bool baseline_flagged = false;
  for (const json& row : full["comparisons"]) {
    if (row["impl"] == "baseline:cudnn") baseline_flagged = baseline_flagged || row["status"] == "regression";
  }
  EXPECT_TRUE(baseline_flagged) << "the context row still shows the slower baseline";
  EXPECT_EQ(full["detection"]["machine_drift"]["flagged"], true) << full["detection"].dump();
  EXPECT_NEAR(full["detection"]["machine_drift"]["median_change"].get<double>(), 0.25, 0.03);
  EXPECT_EQ(full["detection"]["machine_drift"]["comparisons"], 3);
}

TEST_F(DetectionApiTest, ThrottledSamplesAreExcludedAndSaid) {
  post({});
  ReportSpec throttled;
  throttled.throttled = 6;
  json answer = post(throttled);
  EXPECT_EQ(answer["verdict"], "pass");
  json c = candidate_comparison(answer);
  EXPECT_EQ(c["excluded_throttled"], 6);
  EXPECT_NE(c["note"].get<std::string>().find("6 sample(s) taken while throttled were left out"),
            std::string::npos)
      << c["note"];
}

// A GPU braking through most of a run (an H100 at 92 °C did, 98% of its
// samples throttled) measures the GPU, not the code: its comparisons are not
// judged, and a run with nothing else to judge has no verdict (no-data), not
// a regression.
TEST_F(DetectionApiTest, ARunMeasuredMostlyWhileThrottledIsNotJudged) {
  post({});
  ReportSpec braking;
  braking.throttled = 25;  // of 30 samples, each 1.3x
  braking.seed = next_seed_++;
  auto with_reasons = [&](std::uint64_t reasons) {
    braking.commit = make_commit(next_commit_++);
    json report = make_report(braking);
    for (json& c : report["cases"]) {
      c["gpu_state"] = {{"sm_mhz", {1980, 1755}}, {"mem_mhz", {2619, 2619}}, {"throttle_reasons", reasons}};
    }
    auto response = agent().post("/api/v1/runs", report);
    EXPECT_EQ(response.status, 201) << response.body;
    return response.json();
  };
  // At the power cap (0x4) a healthy GPU runs heavy kernels: judged.
  EXPECT_NE(with_reasons(0x4)["verdict"], "no-data");
  // Thermal (0x20, 0x40) is braking: not judged, no verdict.
  json answer = with_reasons(0x4 | 0x20 | 0x40);
  EXPECT_EQ(answer["verdict"], "no-data") << answer.dump();
  json c = candidate_comparison(answer);
  EXPECT_EQ(c["status"], "no-baseline");
  EXPECT_NE(c["note"].get<std::string>().find(
                "not judged: 83% of the head's samples were taken while the GPU braked (thermal"),
            std::string::npos)
      << c["note"];
  EXPECT_EQ(run(answer)["detection"]["throttled_out"], 3);
}

TEST_F(DetectionApiTest, PerCaseThresholdOverride) {
  post({});
  auto update =
      client(admin_token_)
          .request(
              "PUT", "/api/v1/projects/demo/settings",
              json{{"min_threshold", 0.02}, {"case_thresholds", {{"attention.fwd/case0", 0.10}}}}.dump());
  ASSERT_EQ(update.status, 200) << update.body;
  EXPECT_EQ(update.json()["case_thresholds"]["attention.fwd/case0"], 0.10);
  ReportSpec slower;
  slower.slowdown = 1.08;  // certain, with tight replicates measured in the job
  slower.replicates = 4;
  slower.replicate_noise = 0.002;
  slower.ab = true;
  slower.base_commit = make_commit(1);
  json answer = post(slower);
  EXPECT_EQ(candidate_comparison(answer, "attention.fwd/case0")["status"], "unchanged");
  EXPECT_EQ(candidate_comparison(answer, "attention.fwd/case0")["threshold"], 0.10);
  EXPECT_EQ(candidate_comparison(answer, "attention.fwd/case1")["status"], "regression");
  EXPECT_EQ(candidate_comparison(answer, "attention.fwd/case1")["threshold"], 0.02);

  EXPECT_EQ(
      client(admin_token_).request("PUT", "/api/v1/projects/demo/settings", R"({"min_threshold": 2})").status,
      422);
  EXPECT_EQ(client(admin_token_)
                .request("PUT", "/api/v1/projects/demo/settings", R"({"treshold": 0.1})")
                .json()["message"],
            "treshold: unknown setting (default_branch, min_threshold, case_thresholds, energy_threshold, "
            "run_alpha, inconclusive_gate, inconclusive_factor, github_repo, gitlab_project, webhook_url)");
  EXPECT_EQ(ci().request("PUT", "/api/v1/projects/demo/settings", R"({"min_threshold": 0.05})").status, 403);
  EXPECT_EQ(client().get("/api/v1/projects/demo").json()["min_threshold"], 0.02);
}

TEST_F(DetectionApiTest, NoisyHistoryWidensTheTest) {
  // Eight main runs whose levels swing +-4%: a 5% slowdown is within this case's noise.
  for (int i = 0; i < 8; ++i) {
    ReportSpec swing;
    swing.slowdown = i % 2 == 0 ? 1.04 : 0.96;
    post(swing);
  }
  ReportSpec slower;
  slower.slowdown = 0.96 * 1.05;  // 5% slower than the last (0.96) run
  json c = candidate_comparison(post(slower));
  EXPECT_EQ(c["method"], "history");
  EXPECT_GT(c["se"].get<double>(), 0.025) << c.dump();
  EXPECT_EQ(c["status"], "inconclusive") << "not flagged, nor called unchanged";
}

// A slowdown estimated far past its threshold that the noise leaves
// unproven never merges silently: by default the gate gets no verdict
// ("measure again"); the project may make it fail, or pass as before.
TEST_F(DetectionApiTest, AnInconclusiveSlowdownFarPastItsThresholdIsNoVerdictUnlessTheProjectSaysOtherwise) {
  // A pull request 1.88x slower, measured A/B with two noisy replicates a side.
  auto slower = [&](std::uint64_t seed) {
    ReportSpec spec;
    spec.cases = 1;
    spec.branch = "feature";
    spec.base_commit = kw::testing::make_commit(7);
    spec.ab = true;
    spec.replicates = 2;
    spec.replicate_noise = 0.3;
    spec.slowdown = 1.88;
    spec.seed = seed;
    return post(spec);
  };
  json answer = slower(101);
  ASSERT_EQ(candidate_comparison(answer)["status"], "inconclusive");
  EXPECT_EQ(answer["verdict"], "no-data");
  json gate = run(answer)["detection"]["inconclusive_gate"];
  EXPECT_EQ(gate["applied"], "no-verdict") << gate.dump();
  EXPECT_EQ(gate["cases"].size(), 1u);
  const std::string text = kw::common::inconclusive_gate_text(run(answer)["detection"]);
  EXPECT_EQ(text.rfind("no verdict: 1 case(s) slower by 3 times their threshold or more", 0), 0u) << text;

  auto set = [&](const json& change) {
    return client(admin_token_).request("PUT", "/api/v1/projects/demo/settings", change.dump()).status;
  };
  EXPECT_EQ(set({{"inconclusive_gate", "maybe"}}), 422);
  EXPECT_EQ(set({{"inconclusive_factor", 0.5}}), 422);
  ASSERT_EQ(set({{"inconclusive_gate", "fail"}}), 200);
  EXPECT_EQ(slower(102)["verdict"], "regression");
  ASSERT_EQ(set({{"inconclusive_gate", "pass"}}), 200);
  EXPECT_EQ(slower(103)["verdict"], "pass");
  ASSERT_EQ(set({{"inconclusive_gate", "no-verdict"}, {"inconclusive_factor", 1000}}), 200);
  json far_enough = slower(104);
  EXPECT_EQ(far_enough["verdict"], "pass") << "88% is not a thousand thresholds";
  EXPECT_FALSE(run(far_enough)["detection"].contains("inconclusive_gate"));
}

TEST_F(DetectionApiTest, AcknowledgeTurnsARegressionIntoPass) {
  post({});
  ReportSpec slower;
  slower.slowdown = 1.25;
  json regression = post(slower);
  std::string target = "/api/v1/runs/" + std::to_string(regression["run_id"].get<int>()) + "/acknowledge";
  EXPECT_EQ(agent().post(target, {{"reason", "x"}}).status, 403);
  EXPECT_EQ(ci().post(target, json::object()).json()["message"], "reason: is required");
  auto acknowledged = ci().post(target, {{"reason", "smaller tiles trade 5% for 40% less memory"}});
  ASSERT_EQ(acknowledged.status, 200) << acknowledged.body;
  json r = acknowledged.json();
  EXPECT_EQ(r["verdict"], "pass");
  EXPECT_EQ(r["acknowledgement"]["by"], "ci");
  EXPECT_EQ(r["acknowledgement"]["reason"], "smaller tiles trade 5% for 40% less memory");
  // Only regressions: a second acknowledgement (now pass) is refused.
  EXPECT_EQ(ci().post(target, {{"reason", "again"}}).status, 409);
  EXPECT_EQ(ci().post("/api/v1/runs/9999/acknowledge", {{"reason", "x"}}).status, 404);
}

TEST_F(DetectionApiTest, CompareTwoCommits) {
  ReportSpec base_spec;
  base_spec.cases = 3;
  json base = post(base_spec);
  ReportSpec head_spec = base_spec;
  head_spec.slowdown = 1.25;
  json head = post(head_spec);
  auto response = client().get("/api/v1/compare?base=" + base["commit"].get<std::string>() +
                               "&head=" + head["commit"].get<std::string>());
  ASSERT_EQ(response.status, 200) << response.body;
  json body = response.json();
  EXPECT_EQ(body["project"], "demo");
  ASSERT_EQ(body["gpus"].size(), 1u);
  json cases = body["gpus"][0]["cases"];
  ASSERT_EQ(cases.size(), 3u);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(cases[i]["status"], "regression");
    EXPECT_NEAR(cases[i]["ratio"].get<double>(), 1.25, 0.02);
    EXPECT_LT(cases[i]["lower"].get<double>(), cases[i]["ratio"].get<double>());
    if (i > 0) {
      EXPECT_GE(std::abs(std::log(cases[i - 1]["ratio"].get<double>())),
                std::abs(std::log(cases[i]["ratio"].get<double>())))
          << "sorted by effect size";
    }
  }
  auto unknown = client().get("/api/v1/compare?base=abc&head=" + head["commit"].get<std::string>());
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.json()["message"], "base: no run of a commit or branch \"abc\"");
  EXPECT_EQ(client().get("/api/v1/compare?head=" + head["commit"].get<std::string>()).status, 400);

  // Short SHAs and branch names, as the dashboard's compare page takes them.
  const std::string base_sha = base["commit"], head_sha = head["commit"];
  auto short_shas =
      client().get("/api/v1/compare?base=" + base_sha.substr(0, 12) + "&head=" + head_sha.substr(0, 12));
  ASSERT_EQ(short_shas.status, 200) << short_shas.body;
  EXPECT_EQ(short_shas.json()["gpus"][0]["cases"], cases);
  auto by_branch = client().get("/api/v1/compare?base=" + base_sha.substr(0, 12) + "&head=main");
  ASSERT_EQ(by_branch.status, 200) << by_branch.body;  // main's newest run is the head's
  EXPECT_EQ(by_branch.json()["gpus"][0]["cases"], cases);
  ASSERT_EQ(base_sha.substr(0, 7), head_sha.substr(0, 7)) << "make_commit's leading zeros";
  auto ambiguous = client().get("/api/v1/compare?base=" + base_sha.substr(0, 7) + "&head=" + head_sha);
  EXPECT_EQ(ambiguous.status, 400);
  EXPECT_EQ(ambiguous.json()["error"], "ambiguous_revision") << ambiguous.body;
  EXPECT_EQ(
      client()
          .get("/api/v1/compare?base=" + base["commit"].get<std::string>() + "&head=" + make_commit(999))
          .status,
      404);
}

TEST_F(DetectionApiTest, WithAHistoryTheCandidateIsJudgedAgainstTheForecastLevel) {
  ReportSpec main_run;
  main_run.cases = 1;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(post(main_run)["verdict"], "pass") << "history run " << i;
  // Same speed: unchanged, and the comparison says what it was judged against.
  json same = post(main_run);
  json c = candidate_comparison(same);
  EXPECT_EQ(c["status"], "unchanged") << c.dump();
  EXPECT_NE(c["note"].get<std::string>().find("against the level forecast from 10 runs"), std::string::npos)
      << c.dump();
  // A real 5% slowdown: flagged.
  ReportSpec slower = main_run;
  slower.slowdown = 1.05;
  json flagged = post(slower);
  EXPECT_EQ(flagged["verdict"], "regression");
  c = candidate_comparison(flagged);
  EXPECT_EQ(c["status"], "regression");
  EXPECT_EQ(c["method"], "history");
  EXPECT_NE(c["note"].get<std::string>().find("level forecast from 11 runs: +"), std::string::npos)
      << c.dump();
}

// run_alpha is the project's sensitivity: the same slowdown against the same
// history is flagged at the default and not when the project asks for fewer
// false alarms than its p-value.
TEST_F(DetectionApiTest, RunAlphaSetsTheSensitivity) {
  ReportSpec main_run;
  main_run.cases = 1;
  for (int i = 0; i < 10; ++i) post(main_run);
  ReportSpec slower = main_run;
  slower.slowdown = 1.05;
  slower.branch = "feature";  // not part of main's history, so both heads see the same ten runs
  json c = candidate_comparison(post(slower));
  EXPECT_EQ(c["status"], "regression") << c.dump();
  double stricter = c["p_value"].get<double>() / 4;
  auto update = client(admin_token_)
                    .request("PUT", "/api/v1/projects/demo/settings", json{{"run_alpha", stricter}}.dump());
  ASSERT_EQ(update.status, 200) << update.body;
  EXPECT_DOUBLE_EQ(update.json()["run_alpha"].get<double>(), stricter);
  json again = candidate_comparison(post(slower));
  EXPECT_EQ(again["status"], "inconclusive") << again.dump();

  auto rejected =
      client(admin_token_).request("PUT", "/api/v1/projects/demo/settings", R"({"run_alpha": 0.5})");
  EXPECT_EQ(rejected.status, 422);
  EXPECT_EQ(
      rejected.json()["message"],
      "run_alpha: must be a number above 0 and at most 0.2 (the chance that a run of an unchanged build "
      "flags any case; default 0.01)");
}

// A history is the newest 30 runs of each case: read from the newest runs as
// a whole, and on its own for a case that some of them did not measure.
TEST_F(DetectionApiTest, HistoryIsTheNewestThirtyRunsOfEachCase) {
  ReportSpec both, first_only;
  both.cases = 2;
  first_only.cases = 1;
  for (int i = 0; i < 36; ++i) EXPECT_EQ(post(i % 2 == 0 ? both : first_only)["verdict"], "pass") << i;
  json last = post(both);
  for (auto [case_name, runs] : {std::pair{"attention.fwd/case0", 30}, {"attention.fwd/case1", 18}}) {
    json c = candidate_comparison(last, case_name);
    EXPECT_NE(c["note"].get<std::string>().find("level forecast from " + std::to_string(runs) + " runs"),
              std::string::npos)
        << case_name << ": " << c.dump();
  }
}

// Pull requests measured A/B in one job, 4 replicates a side whose levels
// move 0.5% from process to process and the whole job 3% from job to job
// (which A/B cancels): 40 no-op and 40 5%-slower PRs against one base.
TEST_F(DetectionApiTest, FortyAAndFortySlowerPullRequestsMeasuredInTheirJob) {
  ReportSpec baseline;
  baseline.cases = 3;
  json base = post(baseline);
  int aa_flagged = 0, slow_regressions = 0;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> job_drift(0, 0.03);
  for (int i = 0; i < 40; ++i) {
    ReportSpec same = baseline;
    same.branch = "pr-" + std::to_string(i);
    same.base_commit = base["commit"];
    same.replicates = 4;
    same.ab = true;
    same.run_shift = std::exp(job_drift(rng));
    json aa = post(same);
    aa_flagged += aa["verdict"] != "pass";
    ReportSpec slower = same;
    slower.slowdown = 1.05;
    json slow = post(slower);
    slow_regressions += slow["verdict"] == "regression";
    if (i == 0) {
      EXPECT_EQ(candidate_comparison(slow)["method"], "ab");
    }
  }
  std::cout << "A/A verdicts other than pass: " << aa_flagged << "/40, 5% slower: " << slow_regressions
            << "/40\n";
  EXPECT_LE(aa_flagged, 1);
  EXPECT_GE(slow_regressions, 38);
}

// One case of a pull request measured A/B against make_commit(1) in its job.
ReportSpec one_case_pull_request(int replicates) {
  ReportSpec pr;
  pr.cases = 1;
  pr.branch = "pr";
  pr.base_commit = make_commit(1);
  pr.ab = true;
  pr.replicates = replicates;
  return pr;
}

// A pull request on a power-capped GPU: each replicate runs at its own SM
// clock (4% apart) and its time follows it. The report carries each
// sample's clock, the verdict compares at equal clock, and the clocks are
// stored and served back.
TEST_F(DetectionApiTest, PullRequestComparedAtEqualClock) {
  ReportSpec pr = one_case_pull_request(8);
  pr.replicate_noise = 0.002;
  pr.slowdown = 1.03;
  json report = make_report(pr);
  std::mt19937_64 rng(11);
  for (const char* side : {"measurements", "base_measurements"}) {
    json& m = report["cases"][0][side][0];
    ASSERT_EQ(m["impl"], "candidate");
    put_clocks(m, 0, 0.04, rng);
  }
  json plain = report;
  for (const char* side : {"measurements", "base_measurements"}) plain["cases"][0][side][0].erase("sm_mhz");
  plain["commit"] = make_commit(601);
  report["commit"] = make_commit(600);

  auto response = agent().post("/api/v1/runs", report);
  ASSERT_EQ(response.status, 201) << response.body;
  json full = client().get("/api/v1/runs/" + std::to_string(response.json()["run_id"].get<int>())).json();
  json c = candidate_comparison(response.json());
  EXPECT_EQ(c["status"], "regression") << c.dump();
  EXPECT_NEAR(c["ratio"].get<double>(), 1.03, 0.01) << c.dump();
  EXPECT_NE(c["note"].get<std::string>().find("at equal SM clock"), std::string::npos) << c["note"];
  EXPECT_EQ(full["cases"][0]["measurements"][0]["sm_mhz"], report["cases"][0]["measurements"][0]["sm_mhz"]);

  // The same replicates without their clocks: the 4% clock spread hides 3%.
  auto without = agent().post("/api/v1/runs", plain);
  ASSERT_EQ(without.status, 201) << without.body;
  json p = candidate_comparison(without.json());
  EXPECT_EQ(p["status"], "inconclusive") << p.dump();
  EXPECT_EQ(p["note"].get<std::string>().find("at equal SM clock"), std::string::npos) << p["note"];
}

// A CPU benchmark on a shared host: the head's processes met more of the
// neighbours' work, so all but the fastest repetition of each of its
// replicates ran 5-40% slower, the code unchanged. Judged by each
// replicate's fastest repetition (replicate_location minimum, what kw sends
// for Google Benchmark's CPU times), the pull request passes; by the
// trimmed mean the contention is a regression.
TEST_F(DetectionApiTest, ACpuBenchmarkOnABusyHostIsJudgedByItsFastestRepetitions) {
  ReportSpec pr = one_case_pull_request(6);
  pr.samples = 10;
  pr.noise = 0.002;
  json report = make_report(pr);
  json& head = report["cases"][0]["measurements"][0];
  ASSERT_EQ(head["impl"], "candidate");
  std::mt19937_64 rng(21);
  std::uniform_real_distribution<double> contention(1.05, 1.4);
  std::set<std::int64_t> spared;  // each replicate's first repetition
  for (std::size_t i = 0; i < head["samples_ns"].size(); ++i) {
    if (spared.insert(head["replicates"][i].get<std::int64_t>()).second) continue;
    head["samples_ns"][i] = head["samples_ns"][i].get<double>() * contention(rng);
  }
  head["median_ns"] = common::median(head["samples_ns"].get<std::vector<double>>());
  json trimmed = report;
  for (const char* side : {"measurements", "base_measurements"})
    report["cases"][0][side][0]["replicate_location"] = "minimum";
  report["commit"] = make_commit(700);
  trimmed["commit"] = make_commit(701);

  auto response = agent().post("/api/v1/runs", report);
  ASSERT_EQ(response.status, 201) << response.body;
  json c = candidate_comparison(response.json());
  EXPECT_EQ(c["status"], "unchanged") << c.dump();
  EXPECT_EQ(c["method"], "ab") << c.dump();
  json full = run(response.json());
  EXPECT_EQ(full["cases"][0]["measurements"][0]["replicate_location"], "minimum");
  EXPECT_EQ(full["cases"][0]["base_measurements"][0]["replicate_location"], "minimum");

  auto by_trimmed_mean = agent().post("/api/v1/runs", trimmed);
  ASSERT_EQ(by_trimmed_mean.status, 201) << by_trimmed_mean.body;
  EXPECT_EQ(candidate_comparison(by_trimmed_mean.json())["status"], "regression");
  EXPECT_EQ(run(by_trimmed_mean.json())["cases"][0]["measurements"][0]["replicate_location"], "trimmed_mean");
}

// Main runs on a power-capped GPU: each settles at its own clock (1.5%
// apart), its replicates around it. A main commit is judged against its
// history at that history's slope of time on clock: the same code at a
// clock 4% lower passes, 2.5% slower at the usual clock is flagged.
TEST_F(DetectionApiTest, MainRunJudgedAgainstItsHistoryAtEqualClock) {
  std::mt19937_64 rng(12);
  std::normal_distribution<double> run_clock(0, 0.015);
  auto post_main = [&](double slowdown, double log_clock) {
    ReportSpec spec;
    spec.cases = 1;
    spec.replicates = 4;
    spec.replicate_noise = 0.001;
    spec.noise = 0.002;
    spec.slowdown = slowdown;
    spec.commit = make_commit(next_commit_++);
    spec.seed = next_seed_++;
    json report = make_report(spec);
    put_clocks(report["cases"][0]["measurements"][0], log_clock, 0.01, rng);
    auto response = agent().post("/api/v1/runs", report);
    EXPECT_EQ(response.status, 201) << response.body;
    return response.json();
  };
  for (int i = 0; i < 12; ++i) EXPECT_EQ(post_main(1.0, run_clock(rng))["verdict"], "pass");
  json lower_clock = post_main(1.0, -0.04);
  json c = candidate_comparison(lower_clock);
  EXPECT_EQ(lower_clock["verdict"], "pass") << c.dump();
  EXPECT_EQ(c["method"], "history") << c.dump();
  EXPECT_NE(c["note"].get<std::string>().find("at equal SM clock"), std::string::npos) << c["note"];
  EXPECT_NEAR(c["ratio"].get<double>(), 1.0, 0.01) << c.dump();
  json slower = post_main(1.025, 0);
  c = candidate_comparison(slower);
  EXPECT_EQ(slower["verdict"], "regression") << c.dump();
  EXPECT_NEAR(c["ratio"].get<double>(), 1.025, 0.01) << c.dump();
}

// A case the agent measured again shows its first pass beside the decision
// on all replicates; the between-replicate spread is learned from the runs
// stored before.
TEST_F(DetectionApiTest, ConfirmationPassAndLearnedPrior) {
  ReportSpec main_run;
  main_run.cases = 1;
  main_run.replicates = 4;
  main_run.replicate_noise = 0.003;
  for (int i = 0; i < 3; ++i) post(main_run);
  ReportSpec pr = main_run;
  pr.branch = "pr";
  pr.base_commit = make_commit(1);
  pr.ab = true;
  pr.replicates = 8;
  pr.slowdown = 1.04;
  json report = make_report(pr);
  report["commit"] = make_commit(500);
  report["cases"][0]["first_pass_replicates"] = 4;
  auto response = agent().post("/api/v1/runs", report);
  ASSERT_EQ(response.status, 201) << response.body;
  json full = client().get("/api/v1/runs/" + std::to_string(response.json()["run_id"].get<int>())).json();
  json c;
  for (const json& row : full["comparisons"]) {
    if (row["impl"] == "candidate") c = row;
  }
  EXPECT_EQ(c["status"], "regression") << c.dump();
  EXPECT_EQ(c["head_samples"], 8);
  ASSERT_TRUE(c["first_pass"].is_object()) << c.dump();
  EXPECT_EQ(c["first_pass"]["head_replicates"], 4);
  EXPECT_EQ(c["first_pass"]["method"], "ab");
  // Three stored runs of 4 replicates: 9 degrees of freedom behind the prior.
  EXPECT_EQ(full["detection"]["noise_prior"]["replicate_df"], 9);
  EXPECT_NEAR(full["detection"]["noise_prior"]["replicate_sd"].get<double>(), 0.003, 0.002);
  EXPECT_EQ(full["cases"][0]["first_pass_replicates"], 4);
  EXPECT_EQ(full["cases"][0]["base_measurements"][0]["impl"], "candidate");
}

// Energy per iteration on each replicate of a measurement: `level` joules,
// each replicate moved by `sd` (log), at `watts`.
void put_energy(json& m, double level, double sd, std::mt19937_64& rng) {
  std::normal_distribution<double> gauss(0, sd);
  std::set<std::int64_t> replicates;
  for (const json& r : m["replicates"]) replicates.insert(r.get<std::int64_t>());
  json joules = json::array(), indices = json::array(), watts = json::array();
  for (std::int64_t r : replicates) {
    joules.push_back(level * std::exp(gauss(rng)));
    indices.push_back(r);
    watts.push_back(700.0);
  }
  m["energy_j"] = joules;
  m["energy_replicates"] = indices;
  m["power_w"] = watts;
}

// A change that keeps its time but burns more energy. A pull
// request measured A/B whose head takes the same time as its base and 10%
// more joules per iteration is a regression on energy alone, with the
// energy_threshold its own; an A/A with energy passes, and a main run is
// judged against its baseline run's stored energy.
TEST_F(DetectionApiTest, AChangeThatKeepsItsTimeButBurnsMoreEnergyIsFlagged) {
  post({});  // the project's first main run, without energy
  std::mt19937_64 rng(19);
  auto pull_request = [&](double head_joules, std::uint64_t commit, double case_ns = 250e3) {
    ReportSpec pr;
    pr.cases = 2;
    pr.case_ns = case_ns;
    pr.branch = "pr";
    pr.base_commit = make_commit(1);
    pr.commit = make_commit(commit);
    pr.ab = true;
    pr.replicates = 6;
    pr.replicate_noise = 0.003;
    pr.seed = commit;
    json report = make_report(pr);
    for (json& c : report["cases"]) {
      put_energy(c["measurements"][0], c["name"] == "attention.fwd/case0" ? head_joules : 0.25, 0.01, rng);
      put_energy(c["base_measurements"][0], 0.25, 0.01, rng);
    }
    auto response = agent().post("/api/v1/runs", report);
    EXPECT_EQ(response.status, 201) << response.body;
    return response.json();
  };
  auto energy_of = [&](const json& answer, const std::string& name) {
    const json full = run(answer);
    for (const json& c : full["comparisons"])
      if (c["case"] == name && c["kind"] == "energy") return c;
    ADD_FAILURE() << "no energy comparison of " << name;
    return json();
  };

  json hotter = pull_request(0.275, 700);
  EXPECT_EQ(hotter["verdict"], "regression");
  json energy = energy_of(hotter, "attention.fwd/case0");
  EXPECT_EQ(energy["status"], "regression") << energy.dump();
  EXPECT_EQ(energy["method"], "ab");
  EXPECT_NEAR(energy["ratio"].get<double>(), 1.10, 0.02);
  EXPECT_DOUBLE_EQ(energy["threshold"].get<double>(), 0.05);
  EXPECT_NE(energy["note"].get<std::string>().find("joules per iteration"), std::string::npos);
  EXPECT_EQ(candidate_comparison(hotter)["status"], "unchanged");
  EXPECT_EQ(energy_of(hotter, "attention.fwd/case1")["status"], "unchanged");
  // Stored and shown with the run.
  json stored = run(hotter)["cases"][0]["measurements"][0];
  EXPECT_EQ(stored["energy_j"].size(), 6u) << stored.dump().substr(0, 400);
  EXPECT_EQ(stored["power_w"][0], 700.0);

  EXPECT_EQ(pull_request(0.25, 701)["verdict"], "pass");

  // Over the project's energy_threshold (20%), 10% more is not flagged.
  auto set_threshold = [&](const char* body) {
    return client(admin_token_).request("PUT", "/api/v1/projects/demo/settings", body);
  };
  ASSERT_EQ(set_threshold(R"({"energy_threshold": 0.2})").status, 200);
  EXPECT_EQ(client().get("/api/v1/projects/demo").json()["energy_threshold"], 0.2);
  EXPECT_EQ(energy_of(pull_request(0.275, 702), "attention.fwd/case0")["status"], "unchanged");
  EXPECT_EQ(set_threshold(R"({"energy_threshold": 0})").status, 422);
  ASSERT_EQ(set_threshold(R"({"energy_threshold": 0.05})").status, 200);

  // A main run against its baseline run's stored energy: 30% more flagged.
  auto main_run = [&](double joules, std::uint64_t commit) {
    ReportSpec m;
    m.cases = 1;
    m.case_ns = 250e3;
    m.replicates = 6;
    m.replicate_noise = 0.003;
    m.commit = make_commit(commit);
    m.seed = commit;
    json report = make_report(m);
    put_energy(report["cases"][0]["measurements"][0], joules, 0.01, rng);
    auto response = agent().post("/api/v1/runs", report);
    EXPECT_EQ(response.status, 201) << response.body;
    return response.json();
  };
  main_run(0.25, 710);
  json main_hotter = main_run(0.325, 711);
  EXPECT_EQ(main_hotter["verdict"], "regression");
  EXPECT_EQ(energy_of(main_hotter, "attention.fwd/case0")["method"], "baseline-run");
  // A report without energy has no energy comparison: absent, never zero.
  const json plain = run(post(ReportSpec{}));
  for (const json& c : plain["comparisons"]) EXPECT_NE(c["kind"], "energy");
  // Nor has a kernel under 100 us: its joules are mostly the board's idle power.
  const json tiny = run(pull_request(0.275, 703, 20e3));
  for (const json& c : tiny["comparisons"]) EXPECT_NE(c["kind"], "energy") << c.dump();
}

}  // namespace
}  // namespace kw::server::testing
