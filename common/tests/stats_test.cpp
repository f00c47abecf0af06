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

// The audit's bound: 0 of n is about 3/n (the "rule of three"), exact values
// from the beta quantile (the binomial CDF solved for p in exact arithmetic).
TEST(BinomialUpperBound, MatchesClopperPearson) {
  EXPECT_NEAR(binomial_upper_bound(0, 3), 0.6316, 1e-4);
  EXPECT_NEAR(binomial_upper_bound(0, 100), 0.0295, 1e-4);
  EXPECT_NEAR(binomial_upper_bound(1, 2000), 0.002370, 1e-5);
  EXPECT_NEAR(binomial_upper_bound(5, 50), 0.1988, 1e-4);
  EXPECT_EQ(binomial_upper_bound(0, 0), 1.0);
  EXPECT_EQ(binomial_upper_bound(4, 4), 1.0);
  EXPECT_THROW(binomial_upper_bound(5, 4), std::invalid_argument);
}

}  // namespace
}  // namespace kw::common
