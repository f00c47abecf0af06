#include "kw/common/detection.hpp"
#include "kw/common/stats.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kw/common/run_report.hpp"

namespace kw::common {
namespace {

const DetectionSettings kSettings;

Timing timing(const std::vector<double>& samples, const std::vector<std::int64_t>& throttled = {},
              const std::vector<std::int64_t>& replicates = {}) {
  return {samples, throttled, replicates, {}};
}

// A default changed under the same kRuleVersion would judge new runs against
// a history another rule computed. Each version's defaults are listed here,
// so a change fails until the version is bumped and its row added
// (kw/common/detection.hpp says what else a new version takes).
TEST(RuleVersionTest, TheDefaultsAreThoseOfTheCurrentVersion) {
  struct Rule {
    int version;
    double min_threshold, energy_threshold, run_alpha, max_run_alpha, screen_alpha;
    std::size_t min_history, min_samples;
    double prior_df, prior_conflict_alpha, outlier_sds, resolution;
    std::size_t history_runs;
    double outlier_floor, min_clock_sd, energy_sd;
  };
  // Version 1 had no prior_conflict_alpha (its prior was never set aside);
  // version 3 changed how an A/B job's outliers are found, no default.
  constexpr Rule kRules[] = {{1, 0.01, 0.05, 0.01, 0.2, 0.05, 8, 5, 8, 0, 6, 3, 30, 0.03, 0.0025, 0.03},
                             {2, 0.01, 0.05, 0.01, 0.2, 0.05, 8, 5, 8, 0.01, 6, 3, 30, 0.03, 0.0025, 0.03},
                             {3, 0.01, 0.05, 0.01, 0.2, 0.05, 8, 5, 8, 0.01, 6, 3, 30, 0.03, 0.0025, 0.03}};
  const Rule& rule = kRules[std::size(kRules) - 1];
  ASSERT_EQ(rule.version, kRuleVersion) << "add this version's row to kRules";
  const DetectionSettings now;
  const std::string why = "a default changed: that is rule version " + std::to_string(kRuleVersion + 1);
  EXPECT_EQ(now.min_threshold, rule.min_threshold) << why;
  EXPECT_EQ(now.energy_threshold, rule.energy_threshold) << why;
  EXPECT_EQ(now.run_alpha, rule.run_alpha) << why;
  EXPECT_EQ(DetectionSettings::kMaxRunAlpha, rule.max_run_alpha) << why;
  EXPECT_EQ(now.screen_alpha, rule.screen_alpha) << why;
  EXPECT_EQ(now.min_history, rule.min_history) << why;
  EXPECT_EQ(now.min_samples, rule.min_samples) << why;
  EXPECT_EQ(now.prior_df, rule.prior_df) << why;
  EXPECT_EQ(now.prior_conflict_alpha, rule.prior_conflict_alpha) << why;
  EXPECT_EQ(now.outlier_sds, rule.outlier_sds) << why;
  EXPECT_EQ(now.resolution, rule.resolution) << why;
  EXPECT_EQ(now.history_runs, rule.history_runs) << why;
  EXPECT_EQ(now.outlier_floor, rule.outlier_floor) << why;
  EXPECT_EQ(now.min_clock_sd, rule.min_clock_sd) << why;
  EXPECT_EQ(now.energy_sd, rule.energy_sd) << why;
}

// k replicate locations of a case at `level`, each moved by the
// between-replicate noise (log sd).
std::vector<double> replicates_of(double level, double sd, int k, std::mt19937_64& rng) {
  std::normal_distribution<double> gauss(0, sd);
  std::vector<double> out;
  for (int i = 0; i < k; ++i) out.push_back(level * std::exp(gauss(rng)));
  return out;
}

TEST(Detection, StudentTMatchesTables) {
  // Two-sided p of t with df degrees of freedom (R: 2 * pt(-t, df)).
  EXPECT_NEAR(student_t_two_sided_p(2.228139, 10), 0.05, 1e-5);
  EXPECT_NEAR(student_t_two_sided_p(2.0, 10), 0.0733880, 1e-6);
  EXPECT_NEAR(student_t_two_sided_p(1.0, 3), 0.3910022, 1e-6);
  EXPECT_NEAR(student_t_two_sided_p(3.0, 200), 0.0030430, 1e-6);
  EXPECT_NEAR(student_t_two_sided_p(0, 5), 1.0, 1e-12);
  EXPECT_NEAR(student_t_quantile(0.95, 10), 2.228139, 1e-5);
  EXPECT_NEAR(student_t_quantile(0.99, 4.5), 4.34, 0.1);
  // Quantiles (R: qt(1 - (1 - p) / 2, df)), from one degree of freedom,
  // where the tail is heaviest, to nearly the normal's.
  EXPECT_NEAR(student_t_quantile(0.95, 1), 12.7062047362, 1e-8);
  EXPECT_NEAR(student_t_quantile(0.99, 5), 4.0321429836, 1e-9);
  EXPECT_NEAR(student_t_quantile(0.99, 2.5), 7.1637281389, 1e-8);
  EXPECT_NEAR(student_t_quantile(0.999, 3), 12.9239786367, 1e-8);
  EXPECT_NEAR(student_t_quantile(0.95, 1e6), 1.959966, 1e-5);
  for (double df : {1.0, 1.7, 3.2, 9.0, 41.5, 300.0}) {
    for (double p : {0.5, 0.9, 0.95, 0.99, 0.999}) {
      EXPECT_NEAR(student_t_two_sided_p(student_t_quantile(p, df), df), 1 - p, 1e-12 * (1 - p) + 1e-15)
          << "df " << df << ", p " << p;
    }
  }
  EXPECT_THROW(student_t_two_sided_p(1, 0), std::invalid_argument);
}

TEST(Detection, ReplicateLocationsGroupSamplesByReplicate) {
  std::vector<double> samples = {100, 102, 101, 200, 202, 201, 150, 400, 151};
  std::vector<std::int64_t> replicates = {0, 0, 0, 1, 1, 1, 2, 2, 2};
  DetectionSettings settings;
  settings.min_samples = 2;
  std::vector<std::int64_t> throttled = {7};  // 400 in replicate 2
  std::vector<double> locations = replicate_locations(timing(samples, throttled, replicates), settings);
  ASSERT_EQ(locations.size(), 3u);
  EXPECT_DOUBLE_EQ(locations[0], 101);
  EXPECT_DOUBLE_EQ(locations[1], 201);
  EXPECT_DOUBLE_EQ(locations[2], 150.5);
  // The first pass only.
  EXPECT_EQ(replicate_locations(timing(samples, throttled, replicates), settings, 2).size(), 2u);
  // A run's location is their geometric mean.
  EXPECT_NEAR(location(timing(samples, throttled, replicates), settings), std::cbrt(101.0 * 201 * 150.5),
              1e-9);
  // No replicate indices: one replicate.
  EXPECT_EQ(replicate_locations(timing(samples), settings).size(), 1u);
  std::vector<std::int64_t> short_indices = {0, 1};
  EXPECT_THROW(replicate_locations(timing(samples, {}, short_indices), settings), std::invalid_argument);
}

// The failure behind this design: samples of one process are tight (0.05%)
// while the process's level moves by 1%. A test on replicate locations keeps
// its false-alarm rate near nominal however many samples each replicate has.
TEST(Detection, AMinimumRuleTakesEachReplicatesFastestUnthrottledSample) {
  std::vector<double> samples = {130, 100, 180, 205, 201, 260, 90, 150, 151};
  std::vector<std::int64_t> replicates = {0, 0, 0, 1, 1, 1, 2, 2, 2};
  std::vector<std::int64_t> throttled = {6};  // 90 in replicate 2
  DetectionSettings settings;
  settings.min_samples = 2;
  Timing t = timing(samples, throttled, replicates);
  t.rule = ReplicateLocation::minimum;
  EXPECT_EQ(replicate_locations(t, settings), (std::vector<double>{100, 201, 150}));
  EXPECT_EQ(to_string(ReplicateLocation::minimum), "minimum");
  EXPECT_EQ(replicate_location_from("trimmed_mean"), ReplicateLocation::trimmed_mean);
  EXPECT_FALSE(replicate_location_from("min").has_value());
}

TEST(Detection, ABFalseAlarmsAreNominalWhenLevelsMoveBetweenReplicates) {
  std::mt19937_64 rng(1);
  std::normal_distribution<double> within(0, 0.0005);
  int alarms = 0, default_alarms = 0;
  const int trials = 4000;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> head_samples, base_samples;
    std::vector<std::int64_t> head_reps, base_reps;
    for (int r = 0; r < 4; ++r) {
      for (auto [samples, reps] :
           {std::pair{&head_samples, &head_reps}, std::pair{&base_samples, &base_reps}}) {
        double level = 1e5 * std::exp(std::normal_distribution<double>(0, 0.01)(rng));
        for (int i = 0; i < 200; ++i) {
          samples->push_back(level * std::exp(within(rng)));
          reps->push_back(r);
        }
      }
    }
    std::vector<double> head = replicate_locations(timing(head_samples, {}, head_reps), kSettings);
    std::vector<double> base = replicate_locations(timing(base_samples, {}, base_reps), kSettings);
    alarms += test_ab(head, base, NoiseModel{0.01, 100, 0.01, 100}, kSettings).p_value < 0.05;
    default_alarms += test_ab(head, base, default_noise(), kSettings).p_value < 0.05;
  }
  EXPECT_NEAR(static_cast<double>(alarms) / trials, 0.05, 0.015);
  // The default prior (before anything is learned) errs on the quiet side.
  EXPECT_LT(default_alarms, alarms);
}

TEST(Detection, ABFindsAThreePercentSlowdownAndReportsIt) {
  std::mt19937_64 rng(2);
  auto base = replicates_of(1e5, 0.006, 6, rng), head = replicates_of(1.03e5, 0.006, 6, rng);
  NoiseModel noise{0.006, 200, 0.01, 50};
  CaseTest test = test_ab(head, base, noise, kSettings);
  EXPECT_EQ(test.method, CaseTest::Method::ab);
  EXPECT_NEAR(test.ratio, 1.03, 0.01);
  EXPECT_LT(test.p_value, 1e-4);
  EXPECT_GT(test.lower, 1.0);
  EXPECT_EQ(test.head_replicates, 6u);
  EXPECT_NE(test.note.find("A/B in one job: 6 head vs 6 base replicates"), std::string::npos) << test.note;
  std::vector<double> tests_thresholds = {0.01};
  Decision d = decide(std::span<const CaseTest>(&test, 1), tests_thresholds, kSettings);
  EXPECT_EQ(d.statuses[0], ChangeStatus::regression);
  EXPECT_TRUE(d.regression);
}

// The smallest detectable change is what its name says: a slowdown of that
// size, in jobs of the same noise and replicates, is flagged in about 90% of
// them; a case whose noise is far under its threshold sees the threshold
// plus a little, and one among many comparisons sees less than alone.
TEST(Detection, TheSmallestDetectableChangeIsFlaggedNineTimesInTen) {
  const NoiseModel noise{0.004, 400, 0.01, 50, 0.004, 0};
  const int replicates = 6;
  const std::size_t comparisons = 20;
  std::mt19937_64 rng(76);
  // The detectable change from the typical job's test (its se moves a little from job to job).
  std::vector<double> detectable;
  for (int i = 0; i < 101; ++i) {
    const CaseTest aa = test_ab(replicates_of(1e5, 0.004, replicates, rng),
                                replicates_of(1e5, 0.004, replicates, rng), noise, kSettings);
    detectable.push_back(*detectable_change(aa, 0.01, comparisons, kSettings));
  }
  std::nth_element(detectable.begin(), detectable.begin() + 50, detectable.end());
  const double change = detectable[50];
  EXPECT_GT(change, 0.01);
  EXPECT_LT(change, 0.02) << "0.4% noise, 6 replicates a side";
  int flagged = 0;
  const int jobs = 1000;
  for (int job = 0; job < jobs; ++job) {
    std::vector<CaseTest> tests;
    for (std::size_t c = 0; c < comparisons; ++c) {
      const double level = c == 0 ? 1e5 * (1 + change) : 1e5;
      tests.push_back(test_ab(replicates_of(level, 0.004, replicates, rng),
                              replicates_of(1e5, 0.004, replicates, rng), noise, kSettings));
    }
    const std::vector<double> thresholds(comparisons, 0.01);
    flagged += decide(tests, thresholds, kSettings).statuses[0] == ChangeStatus::regression;
  }
  EXPECT_NEAR(static_cast<double>(flagged) / jobs, 0.9, 0.04) << change;

  CaseTest quiet;
  quiet.method = CaseTest::Method::ab;
  quiet.se = 0.0005;
  quiet.df = 30;
  EXPECT_NEAR(*detectable_change(quiet, 0.01, 1, kSettings), std::expm1(std::log1p(0.01) + 1.31 * 0.0005),
              1e-4);
  CaseTest noisy = quiet;
  noisy.se = 0.02;
  EXPECT_GT(*detectable_change(noisy, 0.01, 50, kSettings), *detectable_change(noisy, 0.01, 1, kSettings));
  EXPECT_FALSE(detectable_change(CaseTest{}, 0.01, 1, kSettings));
}

// Two A/A jobs of one H100 host: replicate locations and SM clocks of ~7 us cases whose
// sides sat 1.8% and 2.9% apart, every replicate of one side on its own side
// of the other's, though head and base were one build. Judged as one of the
// run's 56 comparisons, the replicates' own spread flags the first. (Rule 1
// flagged the second too; rule 2 keeps two of its four low replicates,
// near the base's level, and the job's spread then hides the offset.)
TEST(Detection, ATinyKernelsBetweenSideOffsetIsNotAChange) {
  struct Job {
    std::vector<double> head, head_mhz, base, base_mhz;
  };
  const std::vector<Job> jobs = {
      {{6993.6, 7158.1, 7187.5, 7193.9, 7193.6, 7178.2, 7199.0, 7232.0, 7254.1, 7208.3},
       {1949, 1965, 2025, 2040, 2054, 1979, 1979, 1980, 1979, 1979},
       {7312.3, 7267.5, 7217.6, 7304.6, 7405.1, 7307.5, 7347.8, 7279.7, 7315.8, 7383.4},
       {2040, 1965, 2069, 1980, 1965, 1995, 1979, 1979, 1979, 1979}},
      {{7378.9, 7281.3, 7227.5, 7386.2, 7519.4, 7377.9, 6619.2, 7322.2, 6711.0, 7318.4},
       {2054, 2009, 1979, 1965, 1965, 1980, 1979, 1979, 1980, 1979},
       {7174.1, 7305.6, 7158.1, 7023.0, 7144.6, 7131.5, 6552.0, 7081.6, 6574.1, 7130.9},
       {2040, 1979, 2024, 1995, 1965, 1965, 1979, 1979, 1979, 1979}}};
  const double first_holm_step = kSettings.run_alpha / 56;
  NoiseModel without_offset = default_noise();
  without_offset.side_offset_ns = 0;
  EXPECT_LT(test_ab(jobs[0].head, jobs[0].base, without_offset, kSettings, jobs[0].head_mhz, jobs[0].base_mhz)
                .p_value,
            first_holm_step);
  for (const Job& job : jobs) {
    CaseTest test = test_ab(job.head, job.base, default_noise(), kSettings, job.head_mhz, job.base_mhz);
    EXPECT_GT(test.p_value, first_holm_step) << test.note;
    EXPECT_NE(test.note.find("between-side offset 35 ns"), std::string::npos) << test.note;
    // A real 10% slowdown of the same kernel is still found.
    std::vector<double> slower = job.head;
    for (double& location : slower) location *= 1.10;
    EXPECT_LT(test_ab(slower, job.base, default_noise(), kSettings, job.head_mhz, job.base_mhz).p_value,
              first_holm_step);
  }
  // For a 1 ms kernel the offset is nothing.
  std::mt19937_64 rng(3);
  auto base = replicates_of(1e6, 0.004, 6, rng), head = replicates_of(1.03e6, 0.004, 6, rng);
  CaseTest with = test_ab(head, base, default_noise(), kSettings),
           without = test_ab(head, base, without_offset, kSettings);
  EXPECT_NEAR(with.se, without.se, 1e-4 * without.se);
  EXPECT_EQ(with.note.find("between-side offset"), std::string::npos) << with.note;
}

// A power-capped case: each replicate gets its own SM clock (sd 4%), its
// time following the clock, and 0.3% of noise besides.
struct ClockedReplicates {
  std::vector<double> locations, clocks;
};
ClockedReplicates clocked_replicates(double level, double clock_shift, int k, std::mt19937_64& rng) {
  std::normal_distribution<double> clock(0, 0.04), rest(0, 0.003);
  ClockedReplicates out;
  for (int i = 0; i < k; ++i) {
    double log_clock = clock(rng) + clock_shift;
    out.clocks.push_back(1800 * std::exp(log_clock));
    out.locations.push_back(level * std::exp(-log_clock + rest(rng)));
  }
  return out;
}

TEST(Detection, ABComparesAtEqualClockWhereTheClockMovesBetweenReplicates) {
  std::mt19937_64 rng(5);
  int found_with_clocks = 0, found_without = 0, false_with_clocks = 0;
  const int trials = 400;
  for (int t = 0; t < trials; ++t) {
    ClockedReplicates base = clocked_replicates(1e6, 0, 6, rng), head = clocked_replicates(1.03e6, 0, 6, rng);
    CaseTest with =
        test_ab(head.locations, base.locations, default_noise(), kSettings, head.clocks, base.clocks);
    CaseTest without = test_ab(head.locations, base.locations, default_noise(), kSettings);
    ASSERT_TRUE(with.clock_adjusted);
    EXPECT_NEAR(with.clock_slope, -1, 0.25);
    EXPECT_FALSE(without.clock_adjusted);
    found_with_clocks += with.p_value < 1e-3 && with.ratio > 1.01;
    found_without += without.p_value < 1e-3 && without.ratio > 1.01;
    ClockedReplicates again = clocked_replicates(1e6, 0, 6, rng);
    false_with_clocks +=
        test_ab(again.locations, base.locations, default_noise(), kSettings, again.clocks, base.clocks)
            .p_value < 1e-3;
  }
  EXPECT_GT(found_with_clocks, trials * 95 / 100);
  EXPECT_LT(found_without, trials / 4);
  EXPECT_LE(false_with_clocks, trials / 100);
  ClockedReplicates base = clocked_replicates(1e6, 0, 6, rng), head = clocked_replicates(1.03e6, 0, 6, rng);
  CaseTest test =
      test_ab(head.locations, base.locations, default_noise(), kSettings, head.clocks, base.clocks);
  EXPECT_NE(test.note.find("at equal SM clock"), std::string::npos) << test.note;
}

TEST(Detection, AChangeOfTheClockItselfIsShownAsAClockShift) {
  // The head draws more power and runs at a 5% lower clock, 5% slower: at
  // equal clock it is unchanged, and the shift says why it was slower.
  std::mt19937_64 rng(6);
  ClockedReplicates base = clocked_replicates(1e6, 0, 8, rng), head = clocked_replicates(1e6, -0.05, 8, rng);
  CaseTest test =
      test_ab(head.locations, base.locations, default_noise(), kSettings, head.clocks, base.clocks);
  EXPECT_NEAR(test.clock_shift, -0.05, 0.04);
  EXPECT_NEAR(test.ratio, 1.0, 0.01);
  // Clocks that did not move leave the plain comparison.
  std::vector<double> steady(8, 1980.0);
  CaseTest plain = test_ab(head.locations, base.locations, default_noise(), kSettings, steady, steady);
  EXPECT_FALSE(plain.clock_adjusted);
  // Clocks per replicate: one per location on each side, or none are used.
  std::vector<double> short_clocks(3, 1980.0);
  EXPECT_FALSE(test_ab(head.locations, base.locations, default_noise(), kSettings, short_clocks, base.clocks)
                   .clock_adjusted);
}

TEST(Detection, ReplicateClocksAverageEachReplicate) {
  std::vector<double> samples{10, 11, 12, 13}, clocks{1800, 1900, 1700, 1710};
  std::vector<std::int64_t> replicates{0, 0, 1, 1};
  Timing t{samples, {}, replicates, clocks};
  EXPECT_EQ(replicate_clocks(t), (std::vector<double>{1850, 1705}));
  EXPECT_EQ(replicate_clocks(t, 1), (std::vector<double>{1850}));
  EXPECT_TRUE(replicate_clocks(timing(samples, {}, replicates)).empty());
}

// A run of 76 unchanged cases: Holm keeps the chance of any false flag near
// run_alpha, where 76 tests at 1% each would flag about half the runs.
TEST(Detection, HolmKeepsTheRunLevelFalseAlarmRate) {
  std::mt19937_64 rng(3);
  const int runs = 1000, cases = 76;
  int flagged_runs = 0, naive_runs = 0;
  for (int run = 0; run < runs; ++run) {
    std::vector<CaseTest> tests;
    for (int c = 0; c < cases; ++c)
      tests.push_back(test_ab(replicates_of(1e5, 0.008, 4, rng), replicates_of(1e5, 0.008, 4, rng),
                              NoiseModel{0.008, 100, 0.01, 20}, kSettings));
    std::vector<double> thresholds(cases, 0.005);
    flagged_runs +=
        decide(tests, thresholds, kSettings).regression || decide(tests, thresholds, kSettings).improvement;
    bool naive = false;
    for (const CaseTest& t : tests) naive = naive || t.p_value < 0.01;
    naive_runs += naive;
  }
  EXPECT_LE(flagged_runs, 20) << "of " << runs;  // 1% nominal, 2% allowed for the simulation's own noise
  EXPECT_GT(naive_runs, 400);
}

// One replicate 2.4x slow (a stall, another process on the GPU) must not
// decide the case either way: it is left out and the note says so.
TEST(Detection, AnOutlierReplicateIsLeftOut) {
  std::vector<double> head = {1148.9, 475.8, 478.1, 481.2, 477.7}, base = {465.4, 468.4, 461.7, 470.3, 463.6};
  NoiseModel noise{0.006, 100, 0.01, 50};
  noise.side_offset_ns = 0;  // the outlier rule alone
  CaseTest test = test_ab(head, base, noise, kSettings);
  EXPECT_NEAR(test.ratio, 478.2 / 465.9, 0.003);
  EXPECT_LT(test.p_value, 1e-5);
  EXPECT_NE(test.note.find("1 outlier replicate(s) left out"), std::string::npos) << test.note;
  // A real 3% change of every replicate is never left out.
  std::vector<double> slower = {480, 479.5, 481, 478.8};
  std::vector<double> same = {466, 465.5, 467, 464.8};
  EXPECT_EQ(test_ab(slower, same, noise, kSettings).note.find("outlier"), std::string::npos);
}

// attention/bf16/d64/b1h1s128 in a main run of the H100 series: a stalled replicate and a
// fast one in the same run of six. Leaving out only the stall kept the fast
// one, which moved the run by -2.6% and, against a history of ten runs within
// 1.4% of each other, made an A/A run an `improvement`.
TEST(Detection, AStallAndAFastReplicateInOneRunAreBothLeftOut) {
  const std::vector<double> head = {6820, 5807, 13247, 6885, 6906, 6824};
  EXPECT_NEAR(location(head),
              std::exp((std::log(6820.0) + std::log(6885.0) + std::log(6906.0) + std::log(6824.0)) / 4), 0.5);
  const std::vector<double> history = {6755, 6846, 6938, 6758, 6872, 6854, 6800, 6849, 6818, 6880};
  CaseTest test = test_history(head, history, default_noise(), kSettings);
  EXPECT_EQ(test.method, CaseTest::Method::history);
  EXPECT_LT(std::abs(test.effect), 0.01) << test.note;
  EXPECT_NE(test.note.find("2 outlier replicate(s) left out"), std::string::npos) << test.note;
  // The majority is never left out: three of six far from the other three
  // are a side that moved, not outliers.
  const std::vector<double> split = {6800, 6810, 6820, 7500, 7510, 7520};
  EXPECT_NEAR(location(split), std::sqrt(6810.0 * 7510.0), 3);
}

// attention/fp16/d64/b1h1s64 in an A/A pull request on an H100
// (tests/data/aa-two-levels-h100): each process settles at 6.25 or 6.85 us,
// and both sides have both levels (the head 4 and 5 of 10, the base 6 and 4),
// beside one 2.4x replicate of the head. Leaving out each side's minority
// level as outliers compared 6.85 with 6.25: a 9% regression. Judged as
// kw-server judges it (at equal SM clock, the default noise), it passes.
TEST(Detection, AKernelWithTwoLevelsKeepsBothInEachSide) {
  std::ifstream in(std::string(KW_TEST_DATA_DIR) + "/aa-two-levels-h100/b1h1s64.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json data = nlohmann::json::parse(in);
  auto measurement = [&](const char* side) {
    Measurement m;
    m.impl = "candidate";
    m.samples_ns = data[side]["samples_ns"].get<std::vector<double>>();
    m.replicates = data[side]["replicates"].get<std::vector<std::int64_t>>();
    m.sm_mhz = data[side]["sm_mhz"].get<std::vector<double>>();
    return m;
  };
  const Measurement head = measurement("head"), base = measurement("base");
  const Timing head_timing = timing_of(head), base_timing = timing_of(base);
  const std::vector<double> head_locations = replicate_locations(head_timing, kSettings);
  const std::vector<double> base_locations = replicate_locations(base_timing, kSettings);
  ASSERT_EQ(head_locations.size(), 10u);
  ASSERT_EQ(base_locations.size(), 10u);
  const std::vector<double> head_clocks = replicate_clocks(head_timing);
  const std::vector<double> base_clocks = replicate_clocks(base_timing);
  CaseTest test =
      test_ab(head_locations, base_locations, default_noise(), kSettings, head_clocks, base_clocks);
  // Neither a regression nor an improvement at the default 1% threshold.
  EXPECT_LT(test.lower, 1 + kSettings.min_threshold) << test.note;
  EXPECT_GT(test.upper, 1 / (1 + kSettings.min_threshold)) << test.note;
  EXPECT_LT(std::abs(test.effect), 0.03) << test.note;
  // The 2.4x replicate alone is left out.
  EXPECT_NE(test.note.find("1 outlier replicate(s) left out"), std::string::npos) << test.note;
}

// The GPU model's between-run sd is the median case's: a case whose
// replicates are 2% apart has runs ~0.85% apart (sqrt(6) replicates a run)
// and is judged with that, where a quiet case keeps the GPU model's.
TEST(Detection, ANoisyCaseIsJudgedWithItsOwnReplicateSpread) {
  const std::vector<double> history = {1e5,     1.002e5, 0.999e5, 1.003e5, 0.998e5,
                                       1.001e5, 0.997e5, 1.002e5, 1.0e5,   0.999e5};
  const std::vector<double> head = {0.98e5, 0.975e5, 0.982e5, 0.978e5, 0.981e5, 0.977e5};  // -2%
  NoiseModel noisy{0.02, 100, 0.005, 100};
  CaseTest own = test_history(head, history, noisy, kSettings);
  EXPECT_EQ(own.method, CaseTest::Method::history);
  EXPECT_GT(own.se, 0.006) << own.note;           // the prior, 0.85%, shrunk with the history's 0.2%
  EXPECT_GT(own.p_value, 0.01 / 56) << own.note;  // Holm's first step over 56 cases
  NoiseModel quiet{0.003, 100, 0.005, 100};
  CaseTest gpu = test_history(head, history, quiet, kSettings);
  EXPECT_LT(gpu.se, 0.006) << gpu.note;
  EXPECT_LT(gpu.p_value, 0.01 / 56) << gpu.note;
}

TEST(Detection, ACertainChangeUnderTheThresholdIsUnchanged) {
  std::mt19937_64 rng(4);
  auto base = replicates_of(1e5, 0.0005, 8, rng), head = replicates_of(1.005e5, 0.0005, 8, rng);
  CaseTest test = test_ab(head, base, NoiseModel{0.0005, 100, 0.001, 50}, kSettings);
  EXPECT_LT(test.p_value, 1e-6);
  std::vector<double> thresholds = {0.01};
  EXPECT_EQ(decide(std::span<const CaseTest>(&test, 1), thresholds, kSettings).statuses[0],
            ChangeStatus::unchanged);
  thresholds[0] = 0.002;
  EXPECT_EQ(decide(std::span<const CaseTest>(&test, 1), thresholds, kSettings).statuses[0],
            ChangeStatus::regression);
}

// 0.774x with an interval excluding 1, yet not flagged: the run's other 55
// comparisons hold it back (Holm). It is inconclusive, not unchanged, and
// decide() says which tests that was, so the run page can say it beside the
// interval; a change under its threshold or one Holm flags is not held back.
TEST(Detection, HeldBackByTheRunsOtherComparisonsIsInconclusive) {
  std::vector<CaseTest> tests(56);
  for (CaseTest& t : tests) {
    t.method = CaseTest::Method::history;
    t.p_value = 0.5;
  }
  tests[0].effect = std::log(0.774);
  tests[0].p_value = 0.003;  // < run_alpha alone, > 0.01 / 56
  tests[1].effect = 0.001;
  tests[1].p_value = 0.004;  // under the threshold
  tests[2].effect = 0.05;
  tests[2].p_value = 1e-7;  // flagged
  std::vector<double> thresholds(tests.size(), 0.01);
  Decision d = decide(tests, thresholds, kSettings);
  EXPECT_EQ(d.statuses[0], ChangeStatus::inconclusive);
  EXPECT_TRUE(d.held_back[0]);
  EXPECT_EQ(d.statuses[1], ChangeStatus::unchanged);
  EXPECT_FALSE(d.held_back[1]);
  EXPECT_EQ(d.statuses[2], ChangeStatus::regression);
  EXPECT_FALSE(d.held_back[2]);
  EXPECT_EQ(std::count(d.held_back.begin(), d.held_back.end(), true), 1);
}

// The Google Benchmark A/B end-to-end test's misses: a 10% slower BM_Sort
// came out 1.045x [0.973, 1.122] and 1.056x [0.942, 1.183] with a 3%
// threshold. The data hold both no change and one past the threshold:
// inconclusive, never unchanged. So is an A/B estimate inside the threshold
// whose interval reaches past three thresholds; a tight one inside is
// unchanged, a tight one past it flagged. A history's interval is its runs'
// scatter: only its estimate makes it inconclusive.
TEST(Detection, AChangeThatMattersWithoutTheEvidenceIsInconclusive) {
  auto status_of = [](double ratio, double se, CaseTest::Method method = CaseTest::Method::ab) {
    CaseTest t;
    t.method = method;
    t.effect = std::log(ratio);
    t.se = se;
    t.df = 20;
    t.p_value = student_t_two_sided_p(t.effect / se, t.df);
    const double half = student_t_quantile(1 - kSettings.run_alpha / 2, t.df) * se;
    t.lower = std::exp(t.effect - half);
    t.upper = std::exp(t.effect + half);
    const std::vector<double> thresholds = {0.03};
    return decide(std::span<const CaseTest>(&t, 1), thresholds, kSettings).statuses[0];
  };
  EXPECT_EQ(status_of(1.045, 0.025), ChangeStatus::inconclusive);
  EXPECT_EQ(status_of(1.056, 0.04), ChangeStatus::inconclusive);
  EXPECT_EQ(status_of(1 / 1.045, 0.025), ChangeStatus::inconclusive);
  EXPECT_EQ(status_of(1.02, 0.01), ChangeStatus::unchanged);
  EXPECT_EQ(status_of(1.0, 0.035), ChangeStatus::inconclusive) << "[0.90, 1.11] rules out no 10% change";
  EXPECT_EQ(status_of(1.0, 0.035, CaseTest::Method::history), ChangeStatus::unchanged);
  EXPECT_EQ(status_of(1.045, 0.025, CaseTest::Method::history), ChangeStatus::inconclusive);
  EXPECT_EQ(status_of(1.10, 0.02), ChangeStatus::regression);
  EXPECT_EQ(to_string(ChangeStatus::inconclusive), "inconclusive");
}

TEST(Detection, NoBaselineIsNotCountedAndSaysSo) {
  CaseTest none = test_ab(std::vector<double>{1e5}, std::vector<double>{}, default_noise(), kSettings);
  EXPECT_EQ(none.method, CaseTest::Method::none);
  std::vector<double> thresholds = {0.01};
  EXPECT_EQ(decide(std::span<const CaseTest>(&none, 1), thresholds, kSettings).statuses[0],
            ChangeStatus::no_baseline);
  CaseTest no_history =
      test_history(std::vector<double>{1e5}, std::vector<double>{}, default_noise(), kSettings);
  EXPECT_EQ(no_history.method, CaseTest::Method::none);
  EXPECT_EQ(no_history.note, "no baseline run");
}

// Per-run locations: level x (1 + per-run jitter), as a stable case's history.
std::vector<double> history_of(double level, double jitter, int runs, unsigned seed,
                               double drift_per_run = 0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> gauss(0, jitter);
  std::vector<double> out;
  for (int i = 0; i < runs; ++i) out.push_back(level * std::exp(drift_per_run * i + gauss(rng)));
  return out;
}

TEST(Detection, ForecastAveragesAStableHistoryAndFollowsADrift) {
  // Stable: the level is near the common value, the scale near the jitter,
  // and the smoothing small (many runs averaged).
  std::vector<double> stable = history_of(100000, 0.003, 30, 21);
  std::optional<Forecast> f = forecast_level(stable, kSettings);
  ASSERT_TRUE(f.has_value());
  EXPECT_NEAR(f->level_ns, 100000, 300);
  EXPECT_GT(f->scale, 0.001);
  EXPECT_LT(f->scale, 0.006);
  EXPECT_LE(f->smoothing, 0.3);
  EXPECT_EQ(f->runs, 30u);
  // Steady 0.5% per run upward drift: the forecast follows the recent runs.
  std::vector<double> drifting = history_of(100000, 0.001, 30, 22, 0.005);
  f = forecast_level(drifting, kSettings);
  ASSERT_TRUE(f.has_value());
  EXPECT_GE(f->smoothing, 0.5);
  EXPECT_NEAR(f->level_ns / drifting.back(), 1.0, 0.01);
  // Too short a history: no forecast.
  EXPECT_FALSE(forecast_level(history_of(100000, 0.003, 7, 23), kSettings).has_value());
}

TEST(Detection, LocationLeavesThrottledSamplesOut) {
  std::vector<double> samples = {100, 101, 99, 100, 250, 260, 100, 101, 99, 270};
  std::vector<std::int64_t> throttled = {4, 5, 9};
  EXPECT_DOUBLE_EQ(location(timing(samples, throttled), kSettings),
                   trimmed_mean(std::vector<double>{100, 101, 99, 100, 100, 101, 99}));
  // Fewer than min_samples left: every sample counts.
  std::vector<std::int64_t> most = {0, 1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(location(timing(samples, most), kSettings), trimmed_mean(samples));
}

// The smoothing starts as the running mean, so the first run (here 10% slow,
// e.g. a cold cache on the case's first run) does not linger in the level of
// a stable history for dozens of runs, as plain exponential smoothing with a
// small weight would leave it (0.95^29 of it after 30 runs).
TEST(Detection, ForecastDoesNotCarryTheFirstRun) {
  std::vector<double> history = history_of(100000, 0.002, 30, 24);
  history.front() = 110000;
  std::optional<Forecast> f = forecast_level(history, kSettings);
  ASSERT_TRUE(f.has_value());
  EXPECT_NEAR(f->level_ns, 100000, 250) << "smoothing " << f->smoothing;
}

// In a stable history, weights whose errors came out a little smaller by
// chance are passed over for the smoothest one within a standard error: the
// scale is then not an understatement of the noise.
TEST(Detection, ForecastPrefersTheSmoothestWeightWithinAStandardError) {
  int smoothest = 0;
  for (unsigned seed = 100; seed < 140; ++seed) {
    std::optional<Forecast> f = forecast_level(history_of(100000, 0.003, 30, seed), kSettings);
    ASSERT_TRUE(f.has_value());
    smoothest += f->smoothing == 0.05;
    EXPECT_GT(f->scale, 0.003 * 0.6) << "seed " << seed;  // about the jitter: not understated
  }
  EXPECT_GE(smoothest, 30) << "of 40 stable histories";
}

// A run whose level was far off (half its replicates stalled, or a mode
// jump) neither drags the forecast for the runs after it nor is left out of
// the spread: the head at the usual level passes, one as far off as that
// run is not a sure flag.
TEST(Detection, AFarRunInTheHistoryMovesTheForecastLittle) {
  for (unsigned seed = 300; seed < 320; ++seed) {
    std::vector<double> history = history_of(100000, 0.003, 30, seed);
    history[24] *= 1.5;
    std::optional<Forecast> f = forecast_level(history, kSettings);
    ASSERT_TRUE(f.has_value());
    EXPECT_NEAR(f->level_ns, 100000, 600) << "seed " << seed << ", smoothing " << f->smoothing;
    std::mt19937_64 rng(seed);
    NoiseModel noise{0.005, 100, 0.003, 100};
    EXPECT_GT(test_history(replicates_of(100000, 0.002, 4, rng), history, noise, kSettings).p_value, 0.01)
        << "seed " << seed;
  }
  // Its first run far off: the forecast starts from the median of the first three.
  std::vector<double> history = history_of(100000, 0.003, 12, 7);
  history[0] *= 1.5;
  EXPECT_NEAR(forecast_level(history, kSettings)->level_ns, 100000, 600);
}

TEST(Detection, HistoryJudgesTheHeadAgainstTheForecastWithItsOwnSpread) {
  std::mt19937_64 rng(5);
  std::vector<double> history = history_of(100000, 0.004, 30, 24);
  NoiseModel noise{0.005, 100, 0.006, 100};
  CaseTest same = test_history(replicates_of(100000, 0.005, 4, rng), history, noise, kSettings);
  EXPECT_EQ(same.method, CaseTest::Method::history);
  EXPECT_GT(same.p_value, 0.01);
  EXPECT_NE(same.note.find("against the level forecast from 30 runs"), std::string::npos) << same.note;
  CaseTest slower = test_history(replicates_of(105000, 0.005, 4, rng), history, noise, kSettings);
  EXPECT_LT(slower.p_value, 1e-4);
  EXPECT_NEAR(slower.ratio, 1.05, 0.015);
}

TEST(Detection, ShortHistoryIsJudgedWithTheBetweenRunPrior) {
  std::mt19937_64 rng(6);
  std::vector<double> history = history_of(100000, 0.002, 3, 32);
  // 2% slower against 3 runs: within what runs scatter by (1.5% by default).
  CaseTest test = test_history(replicates_of(102000, 0.001, 4, rng), history, default_noise(), kSettings);
  EXPECT_EQ(test.method, CaseTest::Method::baseline_run);
  EXPECT_GT(test.p_value, 0.05);
  EXPECT_NEAR(test.se, 0.015 * std::sqrt(1 + 1 / 3.0), 1e-12);
  // 15% slower is not.
  test = test_history(replicates_of(115000, 0.001, 4, rng), history, default_noise(), kSettings);
  EXPECT_LT(test.p_value, 1e-3);
}

TEST(Detection, RunClockSumsTheReplicatesDeviations) {
  std::vector<double> locations = {100, 110}, clocks = {2000, 1800};
  RunClock clock = run_clock(locations, clocks);
  EXPECT_NEAR(clock.mhz, std::sqrt(2000.0 * 1800.0), 1e-9);
  const double dx = std::log(2000.0 / 1800.0) / 2, dy = std::log(100.0 / 110.0) / 2;
  EXPECT_NEAR(clock.sxx, 2 * dx * dx, 1e-12);
  EXPECT_NEAR(clock.sxy, 2 * dx * dy, 1e-12);
  EXPECT_EQ(clock.replicates, 2);
  EXPECT_EQ(run_clock(locations, std::vector<double>{2000}).mhz, 0);  // one clock per replicate, or none
  EXPECT_EQ(run_clock(locations, std::vector<double>{2000, 0}).mhz, 0);
}

// Main runs of a power-capped case: each run settles at its own clock (sd
// 1.5%), its replicates a little around it (sd 1%), the time following the
// clock, with 0.2% of other noise.
struct ClockedRun {
  std::vector<double> locations, clocks;
};
ClockedRun clocked_run(double level, double log_clock, std::mt19937_64& rng) {
  std::normal_distribution<double> within(0, 0.01), rest(0, 0.002);
  ClockedRun run;
  for (int r = 0; r < 4; ++r) {
    double x = log_clock + within(rng);
    run.clocks.push_back(1800 * std::exp(x));
    run.locations.push_back(level * std::exp(-x + rest(rng)));
  }
  return run;
}

TEST(Detection, HistoryAtEqualClockSeesThroughTheClockARunSettledAt) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> run_clock_noise(0, 0.015);
  std::vector<double> history;
  std::vector<RunClock> clocks;
  for (int r = 0; r < 30; ++r) {
    ClockedRun run = clocked_run(1e6, run_clock_noise(rng), rng);
    history.push_back(location(run.locations));
    clocks.push_back(run_clock(run.locations, run.clocks));
  }
  // As learned from such histories at equal clock.
  NoiseModel noise{0.01, 100, 0.003, 100};
  // The same code at a clock 3% lower: 3% slower on plain times.
  ClockedRun same = clocked_run(1e6, -0.03, rng);
  CaseTest plain = test_history(same.locations, history, noise, kSettings);
  CaseTest at_clock = test_history(same.locations, history, noise, kSettings, same.clocks, clocks);
  EXPECT_FALSE(plain.clock_adjusted);
  ASSERT_TRUE(at_clock.clock_adjusted);
  EXPECT_NEAR(at_clock.clock_slope, -1, 0.1);
  EXPECT_NEAR(at_clock.clock_shift, -0.03, 0.015);  // the head's replicates move too
  EXPECT_GT(at_clock.p_value, 0.01) << at_clock.note;
  EXPECT_LT(std::abs(std::log(at_clock.ratio)), 0.006) << at_clock.note;
  EXPECT_NE(at_clock.note.find("at equal SM clock"), std::string::npos) << at_clock.note;
  // A real 2% slowdown at the history's clock: lost in the runs' clock
  // spread on plain times, clear at equal clock.
  ClockedRun slower = clocked_run(1.02e6, 0, rng);
  plain = test_history(slower.locations, history, noise, kSettings);
  at_clock = test_history(slower.locations, history, noise, kSettings, slower.clocks, clocks);
  EXPECT_GT(plain.p_value, 1e-3) << plain.note;
  EXPECT_LT(at_clock.p_value, 1e-5) << at_clock.note;
  EXPECT_NEAR(at_clock.ratio, 1.02, 0.006);
}

TEST(Detection, HistoryRunsWithoutClocksAreLeftOutOnceEnoughHaveThem) {
  std::mt19937_64 rng(12);
  std::vector<double> history;
  std::vector<RunClock> clocks;
  for (int r = 0; r < 30; ++r) {
    ClockedRun run = clocked_run(1e6, 0, rng);
    history.push_back(location(run.locations));
    // The oldest 20 were stored before the agent reported clocks.
    clocks.push_back(r < 20 ? RunClock{} : run_clock(run.locations, run.clocks));
  }
  ClockedRun head = clocked_run(1e6, 0, rng);
  CaseTest test = test_history(head.locations, history, default_noise(), kSettings, head.clocks, clocks);
  ASSERT_TRUE(test.clock_adjusted);
  EXPECT_EQ(test.base_replicates, 10u);
  EXPECT_NE(test.note.find("20 run(s) without clocks left out"), std::string::npos) << test.note;
  // Fewer than min_history with clocks: the whole history on plain times.
  for (int r = 20; r < 25; ++r) clocks[static_cast<std::size_t>(r)] = RunClock{};
  test = test_history(head.locations, history, default_noise(), kSettings, head.clocks, clocks);
  EXPECT_FALSE(test.clock_adjusted);
  EXPECT_EQ(test.base_replicates, 30u);
  // A head without clocks: plain times.
  test = test_history(head.locations, history, default_noise(), kSettings, {}, clocks);
  EXPECT_FALSE(test.clock_adjusted);
}

TEST(Detection, PooledAndShrunkSpread) {
  std::vector<double> sds = {0.01, 0.02, 0.5};
  std::vector<std::int64_t> counts = {5, 3, 1};  // the third has one replicate: no spread
  PooledSd pooled = pool_replicate_sds(sds, counts);
  EXPECT_DOUBLE_EQ(pooled.df, 6);
  EXPECT_NEAR(pooled.sd, std::sqrt((4 * 1e-4 + 2 * 4e-4) / 6), 1e-12);
  PooledSd shrunk = shrink(pooled, 0.01, 6);
  EXPECT_DOUBLE_EQ(shrunk.df, 12);
  EXPECT_NEAR(shrunk.sd, std::sqrt((6 * pooled.sd * pooled.sd + 6 * 1e-4) / 12), 1e-12);
  EXPECT_DOUBLE_EQ(pool_replicate_sds({}, {}).df, 0);
}

TEST(Detection, ScreenPicksCasesToMeasureAgain) {
  CaseTest test;
  test.method = CaseTest::Method::ab;
  test.p_value = 0.02;
  test.effect = std::log(1.008);
  EXPECT_TRUE(needs_confirmation(test, 0.01, kSettings));
  test.effect = std::log(1.004);  // under half the threshold
  EXPECT_FALSE(needs_confirmation(test, 0.01, kSettings));
  test.effect = std::log(0.99);
  test.p_value = 0.2;
  EXPECT_FALSE(needs_confirmation(test, 0.01, kSettings));
}

TEST(Detection, StatusNames) {
  EXPECT_EQ(to_string(ChangeStatus::no_baseline), "no-baseline");
  EXPECT_EQ(to_string(ChangeStatus::regression), "regression");
  EXPECT_EQ(to_string(CaseTest::Method::baseline_run), "baseline-run");
}

}  // namespace
}  // namespace kw::common
