#include "kw/common/detection.hpp"

#include <cmath>
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

TEST(Detection, StatusNames) {
  EXPECT_EQ(to_string(ChangeStatus::no_baseline), "no-baseline");
  EXPECT_EQ(to_string(ChangeStatus::regression), "regression");
}

}  // namespace
}  // namespace kw::common
