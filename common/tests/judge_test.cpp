// The run's rules beyond one test: the brake rule, the energy floor, the
// first pass of a re-measured case, and the run's decision with its
// machine-drift signal.
#include "kw/common/judge.hpp"
#include "kw/common/stats.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace kw::common {
namespace {

const DetectionSettings kJudgeSettings;

// `replicates` replicates of 10 samples at `level_ns`, each replicate's level
// moved by 0.5%.
Measurement measured(double level_ns, int replicates, std::uint64_t seed,
                     const std::string& impl = "candidate") {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> between(0, 0.005), within(0, 0.001);
  Measurement m;
  m.impl = impl;
  for (int r = 0; r < replicates; ++r) {
    const double level = level_ns * std::exp(between(rng));
    for (int i = 0; i < 10; ++i) {
      m.samples_ns.push_back(level * std::exp(within(rng)));
      m.replicates.push_back(r);
    }
  }
  m.median_ns = median(m.samples_ns);
  return m;
}

Comparison ab(const Case& head_case, const Measurement& head, const Measurement& base) {
  return judge_time(head_case.name, &head_case, head, {&base, nullptr, false, {}}, default_noise(), 0.01,
                    kJudgeSettings);
}

TEST(Judge, AComparisonWhoseSamplesMostlyRanWhileTheGpuBrakedIsNotJudged) {
  Case c;
  c.name = "k";
  Measurement head = measured(1e6, 4, 1), base = measured(1e6, 4, 2);
  for (std::int64_t i = 0; i < 30; ++i) head.throttled_samples.push_back(i);  // 30 of 40
  c.gpu_state = GpuState{};
  c.gpu_state->throttle_reasons = 0x20;  // software thermal slowdown
  Comparison braked = ab(c, head, base);
  EXPECT_TRUE(braked.throttled_out);
  EXPECT_FALSE(braked.measured());
  EXPECT_EQ(braked.test.note.rfind("not judged: 75% of the head's samples and 0% of the base's", 0), 0u)
      << braked.test.note;
  // The software power cap is how a healthy GPU runs a heavy kernel: judged,
  // its throttled samples left out and said.
  c.gpu_state->throttle_reasons = 0x4;
  Comparison capped = ab(c, head, base);
  EXPECT_FALSE(capped.throttled_out);
  EXPECT_TRUE(capped.measured());
  EXPECT_NE(capped.test.note.find("30 sample(s) taken while throttled were left out"), std::string::npos);
}

TEST(Judge, AReMeasuredCaseCarriesItsFirstPassAndAPullRequestIsAb) {
  Case c;
  c.name = "k";
  c.first_pass_replicates = 4;
  Comparison row = ab(c, measured(1e6, 8, 3), measured(1e6, 8, 4));
  EXPECT_TRUE(row.in_job);
  EXPECT_EQ(row.test.method, CaseTest::Method::ab);
  ASSERT_TRUE(row.first_pass);
  EXPECT_EQ(row.first_pass->head_replicates, 4u);
  EXPECT_EQ(row.test.head_replicates, 8u);
}

TEST(Judge, WithoutABaselineRunTheNoteSaysWhatIsMissing) {
  const Measurement head = measured(1e6, 4, 5);
  Comparison none = judge_time("k", nullptr, head, {}, default_noise(), 0.01, kJudgeSettings);
  EXPECT_FALSE(none.measured());
  EXPECT_EQ(none.test.note, "no baseline run");
  Comparison lacking =
      judge_time("k", nullptr, head, {nullptr, nullptr, true, {}}, default_noise(), 0.01, kJudgeSettings);
  EXPECT_EQ(lacking.test.note, "the baseline run has no candidate measurement for this case");
  // A stored baseline run and no history: judged against that run's location.
  const Measurement stored = measured(1e6, 4, 6);
  Comparison against_run =
      judge_time("k", nullptr, head, {nullptr, &stored, true, {}}, default_noise(), 0.01, kJudgeSettings);
  EXPECT_EQ(against_run.test.method, CaseTest::Method::baseline_run);
  EXPECT_FALSE(against_run.in_job);
}

TEST(Judge, EnergyIsJudgedOnlyForKernelsOfAHundredMicrosecondsOrMore) {
  Measurement head = measured(50e3, 4, 7), base = measured(50e3, 4, 8);
  head.energy_j = {1.0, 1.01, 0.99, 1.0};
  base.energy_j = {1.0, 1.0, 1.01, 0.99};
  EXPECT_FALSE(judge_energy("k", head, &base, nullptr, 0.05, kJudgeSettings));
  head = measured(200e3, 4, 9);
  base = measured(200e3, 4, 10);
  head.energy_j = {1.10, 1.11, 1.09, 1.10};  // 10% more joules in the same time
  base.energy_j = {1.0, 1.0, 1.01, 0.99};
  std::optional<Comparison> energy = judge_energy("k", head, &base, nullptr, 0.05, kJudgeSettings);
  ASSERT_TRUE(energy);
  EXPECT_EQ(energy->kind, "energy");
  EXPECT_NEAR(energy->test.ratio, 1.10, 0.01);
  EXPECT_EQ(energy->test.note.rfind("joules per iteration: ", 0), 0u);
  base.energy_j.clear();
  EXPECT_FALSE(judge_energy("k", head, &base, nullptr, 0.05, kJudgeSettings)) << "no energy on one side";
}

TEST(Judge, TheRunDecidesOnCandidatesAndBaselinesMovingTogetherAreTheMachine) {
  // Three cases: the candidates unchanged, every baseline implementation 4%
  // slower (the machine, not the code).
  std::vector<Comparison> rows;
  for (int i = 0; i < 3; ++i) {
    Case c;
    c.name = "k" + std::to_string(i);
    rows.push_back(ab(c, measured(1e6, 6, 10 + i), measured(1e6, 6, 20 + i)));
    Measurement slow = measured(1.04e6, 6, 30 + i, "baseline:cudnn");
    rows.push_back(ab(c, slow, measured(1e6, 6, 40 + i, "baseline:cudnn")));
  }
  std::vector<Comparison*> all;
  for (Comparison& row : rows) all.push_back(&row);
  const RunDecision run = decide_run(all, kJudgeSettings);
  EXPECT_FALSE(run.regression);
  EXPECT_EQ(run.candidate_comparisons, 3u);
  ASSERT_TRUE(run.machine_drift);
  EXPECT_TRUE(run.machine_drift->flagged);
  EXPECT_EQ(run.machine_drift->same_direction, 3u);
  EXPECT_NEAR(run.machine_drift->median_change, 0.04, 0.01);
  for (const Comparison& row : rows)
    EXPECT_EQ(row.status, row.candidate() ? ChangeStatus::unchanged : ChangeStatus::regression) << row.impl;
}

// Each candidate says what it could see; one that cannot see its
// threshold (a 7 us kernel, whose between-side offset alone is 0.5% a
// side) says so in its note, with the threshold it can defend.
TEST(Judge, EachCandidateSaysTheSmallestSlowdownItSeesAndABlindOneSaysSo) {
  std::vector<Comparison> rows;
  Case large, tiny;
  large.name = "large";
  tiny.name = "tiny";
  rows.push_back(ab(large, measured(1e6, 6, 50), measured(1e6, 6, 51)));
  rows.push_back(ab(tiny, measured(7e3, 4, 52), measured(7e3, 4, 53)));
  rows.push_back(ab(tiny, measured(7e3, 4, 54, "baseline:cudnn"), measured(7e3, 4, 55, "baseline:cudnn")));
  std::vector<Comparison*> all;
  for (Comparison& row : rows) all.push_back(&row);
  decide_run(all, kJudgeSettings);
  ASSERT_TRUE(rows[0].detectable);
  ASSERT_TRUE(rows[1].detectable);
  EXPECT_FALSE(rows[2].detectable) << "only candidates decide, only they say what they see";
  EXPECT_LT(*rows[0].detectable, *rows[1].detectable);
  EXPECT_GT(*rows[1].detectable, rows[1].min_threshold);
  EXPECT_NE(rows[1].test.note.find("above its 1% threshold"), std::string::npos) << rows[1].test.note;
  EXPECT_NE(rows[1].test.note.find("what it can defend"), std::string::npos) << rows[1].test.note;
}

TEST(Judge, ACaseSpreadIsShrunkTowardsItsGpuModels) {
  CaseHistory quiet;
  quiet.replicate_sds = {0.002, 0.002, 0.002};
  quiet.replicate_counts = {4, 4, 4};
  GpuNoise gpu;
  gpu.replicate = {0.01, 100};
  const NoiseModel model = case_noise(quiet, gpu, kJudgeSettings);
  EXPECT_GT(model.replicate_sd, 0.002);
  EXPECT_LT(model.replicate_sd, 0.01);
  EXPECT_EQ(model.run_sd, default_noise().run_sd) << "no between-run spread learned";
}

// What a run stores of a case is the rule's own summary: the candidate's
// location is detection's location of its replicates, its energy the
// geometric mean of its replicates' joules; a case with no candidate stores
// no location.
TEST(Judge, ACaseIsSummarizedByTheRuleBeforeItIsStored) {
  Case c;
  c.name = "scale/fp32/n1m";
  c.measurements = {measured(1000, 4, 7), measured(2000, 4, 8, "baseline:cublas")};
  Measurement& candidate = c.measurements[0];
  candidate.sm_mhz.assign(candidate.samples_ns.size(), 1980);
  candidate.energy_j = {0.002, 0.008};
  candidate.energy_replicates = {0, 1};
  candidate.power_w = {300, 320, 310};
  const CaseSummary summary = summarize_case(c, kJudgeSettings);
  ASSERT_EQ(summary.medians.size(), 2u);
  EXPECT_EQ(summary.medians[1],
            (std::pair<std::string, double>{"baseline:cublas", c.measurements[1].median_ns}));
  EXPECT_EQ(summary.bands[0].second, median_interval(candidate.samples_ns, 0.95));
  ASSERT_TRUE(summary.candidate);
  const std::vector<double> per_replicate = replicate_locations(timing_of(candidate), kJudgeSettings);
  EXPECT_EQ(summary.candidate->location, location(per_replicate));
  EXPECT_EQ(summary.candidate->replicates, 4);
  EXPECT_EQ(summary.candidate->replicate_sd, replicate_log_sd(per_replicate));
  EXPECT_DOUBLE_EQ(summary.candidate->clock.mhz, 1980);
  EXPECT_DOUBLE_EQ(*summary.candidate->energy_j, 0.004);
  EXPECT_DOUBLE_EQ(*summary.candidate->power_w, 310);

  c.measurements.erase(c.measurements.begin());
  const CaseSummary baselines_only = summarize_case(c, kJudgeSettings);
  EXPECT_FALSE(baselines_only.candidate);
  EXPECT_EQ(baselines_only.medians.size(), 1u);
}

}  // namespace
}  // namespace kw::common
