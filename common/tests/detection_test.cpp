#include "kw/common/detection.hpp"
#include "kw/common/stats.hpp"

#include <cmath>
#include <optional>
#include <random>

#include <gtest/gtest.h>

namespace kw::common {
namespace {

std::vector<double> lognormal(double center, double noise, int n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> gauss(0, noise);
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(center * std::exp(gauss(rng)));
  return out;
}

Timing timing(const std::vector<double>& samples, const std::vector<std::int64_t>& throttled = {}) {
  return {samples, throttled};
}

const DetectionSettings kSettings;

TEST(Detection, SameDistributionIsUnchanged) {
  auto base = lognormal(100000, 0.01, 30, 1), head = lognormal(100000, 0.01, 30, 2);
  Comparison c = compare_times(timing(head), timing(base), 0.01, kSettings);
  EXPECT_EQ(c.status, ChangeStatus::unchanged);
  EXPECT_NEAR(c.ratio, 1.0, 0.01);
  EXPECT_LT(c.lower, 1.0);
  EXPECT_GT(c.upper, 1.0);
  EXPECT_NEAR(c.head_noise, 0.01, 0.005);
}

TEST(Detection, FivePercentSlowerIsARegression) {
  auto base = lognormal(100000, 0.01, 30, 3), head = lognormal(105000, 0.01, 30, 4);
  Comparison c = compare_times(timing(head), timing(base), 0.01, kSettings);
  EXPECT_EQ(c.status, ChangeStatus::regression);
  EXPECT_NEAR(c.ratio, 1.05, 0.01);
  EXPECT_GT(c.lower, 1.02);
  EXPECT_LT(c.p_value, 1e-6);
  EXPECT_GE(c.confidence, 0.99);  // exact distribution: the achieved confidence
}

TEST(Detection, FivePercentFasterIsAnImprovement) {
  auto base = lognormal(100000, 0.01, 30, 5), head = lognormal(95000, 0.01, 30, 6);
  EXPECT_EQ(compare_times(timing(head), timing(base), 0.01, kSettings).status, ChangeStatus::improvement);
}

TEST(Detection, SignificantButBelowThresholdIsUnchanged) {
  // 0.5% slower with 0.1% noise: certainly real, but under a 1% threshold.
  auto base = lognormal(100000, 0.001, 100, 7), head = lognormal(100500, 0.001, 100, 8);
  Comparison c = compare_times(timing(head), timing(base), 0.01, kSettings);
  EXPECT_LT(c.p_value, 1e-6);
  EXPECT_EQ(c.status, ChangeStatus::unchanged);
}

TEST(Detection, ThrottledSamplesAreExcluded) {
  auto base = lognormal(100000, 0.01, 30, 9), head = lognormal(100000, 0.01, 30, 10);
  std::vector<std::int64_t> throttled;
  for (int i = 0; i < 12; ++i) {  // 12 of 30 samples at 1.5x while throttled
    head[static_cast<std::size_t>(i * 2)] *= 1.5;
    throttled.push_back(i * 2);
  }
  Comparison marked = compare_times(timing(head, throttled), timing(base), 0.01, kSettings);
  EXPECT_EQ(marked.status, ChangeStatus::unchanged);
  EXPECT_EQ(marked.excluded_throttled, 12u);
  EXPECT_EQ(marked.head_samples, 18u);
  EXPECT_EQ(marked.note, "12 sample(s) taken while throttled were excluded");
  // Unmarked, the same samples look like a regression.
  EXPECT_EQ(compare_times(timing(head), timing(base), 0.01, kSettings).status, ChangeStatus::regression);
}

TEST(Detection, SpeedupCancelsMachineDrift) {
  auto base_candidate = lognormal(100000, 0.01, 30, 11), base_cudnn = lognormal(90000, 0.01, 30, 12);
  // The whole machine is 5% slower: both implementations slowed alike.
  auto head_candidate = lognormal(105000, 0.01, 30, 13), head_cudnn = lognormal(94500, 0.01, 30, 14);
  EXPECT_EQ(compare_times(timing(head_candidate), timing(base_candidate), 0.01, kSettings).status,
            ChangeStatus::regression);
  Comparison drift = compare_speedups(timing(head_candidate), timing(head_cudnn), timing(base_candidate),
                                      timing(base_cudnn), 0.01, kSettings);
  EXPECT_EQ(drift.status, ChangeStatus::unchanged);
  EXPECT_NEAR(drift.ratio, 1.0, 0.01);
  // Only the candidate slowed: the speedup over cuDNN dropped 5%.
  auto same_cudnn = lognormal(90000, 0.01, 30, 15);
  Comparison real = compare_speedups(timing(head_candidate), timing(same_cudnn), timing(base_candidate),
                                     timing(base_cudnn), 0.01, kSettings);
  EXPECT_EQ(real.status, ChangeStatus::regression);
  EXPECT_NEAR(real.ratio, 1 / 1.05, 0.01);
}

TEST(Detection, NoiseAwareThreshold) {
  std::vector<double> quiet(20, 100000.0);
  EXPECT_DOUBLE_EQ(noise_aware_threshold(quiet, 0.01, kSettings), 0.01);
  // Too little history: the configured minimum.
  EXPECT_DOUBLE_EQ(noise_aware_threshold(std::vector<double>{100000, 110000, 90000}, 0.02, kSettings), 0.02);
  // Runs alternating 103000 / 97000: steps of +-log(103/97) = +-0.060018 (10 down, 9 up),
  // IQR 0.120036, step sigma 0.120036 / 1.34898 = 0.088983, run sigma / sqrt(2) = 0.062920,
  // threshold expm1(4 * 0.062920) = 0.28620.
  std::vector<double> noisy;
  for (int i = 0; i < 20; ++i) noisy.push_back(i % 2 == 0 ? 103000.0 : 97000.0);
  EXPECT_NEAR(noise_aware_threshold(noisy, 0.01, kSettings), 0.28620, 1e-4);
  // Slow steady drift (+0.3% a run) is not noise.
  std::vector<double> drifting;
  for (int i = 0; i < 20; ++i) drifting.push_back(100000.0 * std::pow(1.003, i));
  EXPECT_DOUBLE_EQ(noise_aware_threshold(drifting, 0.01, kSettings), 0.01);
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
  EXPECT_DOUBLE_EQ(location({samples, throttled}, kSettings),
                   trimmed_mean(std::vector<double>{100, 101, 99, 100, 100, 101, 99}));
  // Fewer than min_samples left: every sample counts, as in the comparison.
  std::vector<std::int64_t> most = {0, 1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(location({samples, most}, kSettings), trimmed_mean(samples));
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

TEST(Detection, HistoryDecidesWhenTheBaselineRunWasALuckyOutlier) {
  // The baseline run happened to be 1.5% slow; the head is at the usual
  // level. Against that one run it looks 1.5% faster; against the history
  // it is unchanged.
  std::vector<double> history = history_of(100000, 0.002, 30, 24);
  history.back() = 101500;
  auto base = lognormal(101500, 0.005, 30, 25), head = lognormal(100000, 0.005, 30, 26);
  EXPECT_EQ(compare_times(timing(head), timing(base), 0.01, kSettings).status, ChangeStatus::improvement);
  Comparison c = compare_times_with_history(timing(head), timing(base), history, 0.01, kSettings);
  EXPECT_EQ(c.status, ChangeStatus::unchanged);
  EXPECT_NE(c.note.find("decided against the level forecast from 30 runs"), std::string::npos) << c.note;
}

TEST(Detection, HistoryFlagsARealSlowdownAndReportsTheThresholdUsed) {
  std::vector<double> history = history_of(100000, 0.002, 30, 27);
  auto base = lognormal(history.back(), 0.005, 30, 28), head = lognormal(103000, 0.005, 30, 29);
  Comparison c = compare_times_with_history(timing(head), timing(base), history, 0.01, kSettings);
  EXPECT_EQ(c.status, ChangeStatus::regression);
  EXPECT_NEAR(c.ratio, 1.03, 0.01);
  EXPECT_GE(c.threshold, 0.01);
  EXPECT_LT(c.threshold, 0.03);
  // Below the project's floor: not flagged, however certain.
  head = lognormal(100700, 0.0005, 100, 30);
  base = lognormal(history.back(), 0.0005, 100, 31);
  EXPECT_EQ(compare_times_with_history(timing(head), timing(base), history, 0.01, kSettings).status,
            ChangeStatus::unchanged);
}

TEST(Detection, ShortHistoryFallsBackToTheTwoRunComparison) {
  std::vector<double> history = history_of(100000, 0.002, 3, 32);
  auto base = lognormal(100000, 0.01, 30, 33), head = lognormal(105000, 0.01, 30, 34);
  Comparison with = compare_times_with_history(timing(head), timing(base), history, 0.01, kSettings);
  Comparison without = compare_times(timing(head), timing(base), 0.01, kSettings);
  EXPECT_EQ(with.status, ChangeStatus::regression);
  EXPECT_EQ(with.ratio, without.ratio);
  EXPECT_EQ(with.note.find("forecast"), std::string::npos);
}

TEST(Detection, StatusNames) {
  EXPECT_EQ(to_string(ChangeStatus::no_baseline), "no-baseline");
  EXPECT_EQ(to_string(ChangeStatus::regression), "regression");
}

}  // namespace
}  // namespace kw::common
