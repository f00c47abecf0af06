#include "kw/common/stats.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace kw::common {
namespace {

using V = std::vector<double>;

TEST(Stats, Median) {
  EXPECT_DOUBLE_EQ(median(V{3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median(V{4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median(V{7}), 7);
  EXPECT_THROW(median(V{}), std::invalid_argument);
}

TEST(Stats, QuantileIsType7) {
  // Hyndman & Fan type 7: h = (n-1)q, x[floor h] + frac(h) (x[floor h + 1] - x[floor h]).
  // R: quantile(c(1,2,3,4,5), 0.25) = 2; quantile(c(1,2,3,4), 0.9) = 3.7.
  EXPECT_DOUBLE_EQ(quantile(V{5, 4, 3, 2, 1}, 0.25), 2);
  EXPECT_DOUBLE_EQ(quantile(V{1, 2, 3, 4}, 0.9), 3.7);
  EXPECT_DOUBLE_EQ(quantile(V{1, 2, 3, 4}, 0), 1);
  EXPECT_DOUBLE_EQ(quantile(V{1, 2, 3, 4}, 1), 4);
  EXPECT_THROW(quantile(V{1}, 1.5), std::invalid_argument);
}

TEST(Stats, MadAndRelativeNoise) {
  // Wikipedia "Median absolute deviation": {1,1,2,2,4,6,9} has median 2 and MAD 1.
  EXPECT_DOUBLE_EQ(mad(V{1, 1, 2, 2, 4, 6, 9}), 1);
  // relative noise = 1.4826 * 1 / 2
  EXPECT_DOUBLE_EQ(relative_noise(V{1, 1, 2, 2, 4, 6, 9}), 0.7413);
  EXPECT_DOUBLE_EQ(relative_noise(V{5, 5, 5}), 0);
}

TEST(Stats, NormalHelpers) {
  // Phi^-1(0.975) = 1.959963984540054 (Abramowitz & Stegun table 26.5).
  EXPECT_NEAR(normal_quantile(0.975), 1.959963984540054, 1e-12);
  EXPECT_NEAR(normal_quantile(0.5), 0, 1e-15);
  EXPECT_NEAR(normal_quantile(1e-6), -4.753424308822899, 1e-9);
  EXPECT_NEAR(normal_cdf(1.959963984540054), 0.975, 1e-15);
}

TEST(Stats, ExactMannWhitneyDistribution) {
  // m = n = 3: the 20 arrangements give U counts 1,1,2,3,3,3,3,2,1,1 for U = 0..9.
  EXPECT_DOUBLE_EQ(mann_whitney_cdf(3, 3, 0), 1.0 / 20);
  EXPECT_DOUBLE_EQ(mann_whitney_cdf(3, 3, 2), 4.0 / 20);
  EXPECT_DOUBLE_EQ(mann_whitney_cdf(3, 3, 4.5), 10.0 / 20);
  EXPECT_DOUBLE_EQ(mann_whitney_cdf(3, 3, 9), 1.0);
}

TEST(Stats, MannWhitneyExactSmallSamples) {
  // x entirely below y: U = 0, two-sided p = 2 * 1/20 = 0.1 (R: wilcox.test(1:3, 4:6)$p.value).
  MannWhitney below = mann_whitney(V{1, 2, 3}, V{4, 5, 6});
  EXPECT_TRUE(below.exact);
  EXPECT_DOUBLE_EQ(below.u, 0);
  EXPECT_DOUBLE_EQ(below.p_value, 0.1);
  // One inversion: U = 1, p = 2 * 2/20 = 0.2.
  MannWhitney one = mann_whitney(V{1, 2, 4}, V{3, 5, 6});
  EXPECT_DOUBLE_EQ(one.u, 1);
  EXPECT_DOUBLE_EQ(one.p_value, 0.2);
  // Symmetric: x above y gives U = 9 and the same p.
  MannWhitney above = mann_whitney(V{4, 5, 6}, V{1, 2, 3});
  EXPECT_DOUBLE_EQ(above.u, 9);
  EXPECT_NEAR(above.p_value, 0.1, 1e-12);
}

TEST(Stats, MannWhitneyNormalApproximationWithTies) {
  // x = {1,2,2,3}, y = {2,3,4,5}: midranks of x are 1, 3, 3, 5.5 -> R_x = 12.5, U = 2.5.
  // Ties: a run of 3 (value 2) and of 2 (value 3): sum(t^3 - t) = 24 + 6 = 30.
  // var = 16/12 * (9 - 30/56) = 11.2857142857; z = (2.5 - 8 + 0.5) / sqrt(var) = -1.48835139446897;
  // p = 2 Phi(z) = 0.136658247738148 (R: wilcox.test(c(1,2,2,3), c(2,3,4,5)) gives 0.1367).
  MannWhitney result = mann_whitney(V{1, 2, 2, 3}, V{2, 3, 4, 5});
  EXPECT_FALSE(result.exact);
  EXPECT_DOUBLE_EQ(result.u, 2.5);
  EXPECT_NEAR(result.z, -1.4883513944689681, 1e-12);
  EXPECT_NEAR(result.p_value, 0.13665824773814753, 1e-12);
}

TEST(Stats, MannWhitneyAllEqualIsNoEvidence) {
  MannWhitney result = mann_whitney(V{2, 2, 2}, V{2, 2});
  EXPECT_DOUBLE_EQ(result.p_value, 1);
}

TEST(Stats, HodgesLehmannExactInterval) {
  // x = {10,11,12}, y = {1,2,3}: differences 7,8,8,9,9,9,10,10,11 -> estimate 9.
  // qwilcox(0.025, 3, 3) = 0, bumped to 1 as R does: interval [d(1), d(9)] = [7, 11],
  // achieved confidence 1 - 2 P(U <= 0) = 0.9 (R: wilcox.test(x, y, conf.int=TRUE)).
  ShiftEstimate shift = hodges_lehmann_shift(V{10, 11, 12}, V{1, 2, 3});
  EXPECT_DOUBLE_EQ(shift.estimate, 9);
  EXPECT_DOUBLE_EQ(shift.lower, 7);
  EXPECT_DOUBLE_EQ(shift.upper, 11);
  EXPECT_DOUBLE_EQ(shift.confidence, 0.9);
}

TEST(Stats, HodgesLehmannLargeSampleIntervalCoversShift) {
  V x, y;
  for (int i = 0; i < 100; ++i) {
    y.push_back(1000 + (i * 37 % 100));  // a permutation of 1000..1099
    x.push_back(1050 + (i * 53 % 100));  // shifted by exactly 50
  }
  ShiftEstimate shift = hodges_lehmann_shift(x, y);
  EXPECT_DOUBLE_EQ(shift.estimate, 50);
  EXPECT_LT(shift.lower, 50);
  EXPECT_GT(shift.upper, 50);
  // The differences are 50 + (a - b) over all pairs a, b in 0..99, so #(a - b = t) = 100 - |t| and
  // #(a - b <= -s) = (100 - s)(101 - s) / 2. Normal-approximation rank:
  // k = floor(5000 - 1.959964 * sqrt(100 * 100 * 201 / 12)) = floor(4197.86) = 4197; the smallest s with
  // (100 - s)(101 - s) / 2 >= 4197 is s = 8 (4278), so d(4197) = 42 and symmetrically d(5804) = 58.
  EXPECT_DOUBLE_EQ(shift.lower, 42);
  EXPECT_DOUBLE_EQ(shift.upper, 58);
}

// The estimate and bounds are order statistics of the m x n differences,
// found without listing them: checked against listing and sorting them, on
// sizes and value sets that include heavy ties, clusters and a lone outlier.
TEST(Stats, HodgesLehmannMatchesEveryPairwiseDifferenceSorted) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::size_t m = 1 + rng() % 120, n = 1 + rng() % 120;
    int levels = trial % 3 == 0 ? 4 : 1000000;  // every third trial: values from 4 levels only (ties)
    auto draw = [&](std::size_t count, double shift) {
      V values;
      for (std::size_t i = 0; i < count; ++i)
        values.push_back(shift + static_cast<double>(rng() % levels) / 7);
      if (trial % 5 == 0) values.back() *= 50;  // an outlier
      return values;
    };
    V x = draw(m, trial % 2 ? 3.0 : 0.0), y = draw(n, 0);
    V differences;
    for (double a : x)
      for (double b : y) differences.push_back(a - b);
    std::sort(differences.begin(), differences.end());
    ShiftEstimate shift = hodges_lehmann_shift(x, y, 0.95);
    std::size_t count = differences.size(), half = count / 2;
    double middle = count % 2 ? differences[half] : (differences[half - 1] + differences[half]) / 2;
    ASSERT_DOUBLE_EQ(shift.estimate, middle) << "m " << m << " n " << n << " trial " << trial;
    // The bounds are the k-th from each end for one k (with ties, a value
    // holds a run of ranks).
    bool symmetric = false;
    for (std::size_t k = 0; k < count && !symmetric; ++k)
      symmetric = differences[k] == shift.lower && differences[count - 1 - k] == shift.upper;
    EXPECT_TRUE(symmetric) << "lower " << shift.lower << " upper " << shift.upper << " trial " << trial;
  }
}

TEST(Stats, MedianInterval) {
  // n = 100, 95%: n/2 -+ 1.959964 * sqrt(100) / 2 = 50 -+ 9.80 -> ranks floor(40.2) = 40 and ceil(59.8) = 60
  // (0-based) of 0..99.
  V values;
  for (int i = 99; i >= 0; --i) values.push_back(i);
  auto [low, high] = median_interval(values);
  EXPECT_DOUBLE_EQ(low, 40);
  EXPECT_DOUBLE_EQ(high, 60);
  auto [one_low, one_high] = median_interval(V{7});
  EXPECT_DOUBLE_EQ(one_low, 7);
  EXPECT_DOUBLE_EQ(one_high, 7);
}

TEST(Stats, RatioOfMedians) {
  V base{100, 101, 102, 103, 104, 105, 106, 107, 108, 109};
  V slower;
  for (double b : base) slower.push_back(b * 1.05);
  RatioEstimate ratio = ratio_of_medians(slower, base);
  EXPECT_NEAR(ratio.ratio, 1.05, 1e-12);
  EXPECT_GT(ratio.hl_ratio, 1.04);
  EXPECT_LT(ratio.hl_ratio, 1.06);
  EXPECT_LE(ratio.lower, ratio.hl_ratio);
  EXPECT_GE(ratio.upper, ratio.hl_ratio);
  EXPECT_GT(ratio.lower, 1.0) << "a 5% shift on 1% spread must exclude 1";
  EXPECT_THROW(ratio_of_medians(V{1, 0}, V{1, 2}), std::invalid_argument);
}

}  // namespace
}  // namespace kw::common
